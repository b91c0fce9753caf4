"""A NATURAL PLAN-style meeting plan: a day of meetings across town.

The context says where the day starts, the travel minutes between places (a nested
``dict[str, dict[str, int]]``) and each friend's place, availability window and the
shortest meeting they want. The plan meets every friend once, in some order: the arrival
at each place is the previous meeting's end plus the travel time, a meeting starts once
both are there, lasts long enough, ends before the friend leaves, and starts and ends on
a five-minute mark.
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from factorspec_sdk import distinct, relation

__all__ = ["CONTEXT", "GOLDEN", "PROMPT", "Day", "Friend", "Meeting", "MeetingPlan"]


class Friend(BaseModel):
    """Where a friend is, when, and for how long they want to meet."""

    location: str
    available_from: dt.datetime
    available_until: dt.datetime
    min_minutes: int


class Day(BaseModel):
    """The context: the start, the travel times and the friends."""

    start_location: str
    start_time: dt.datetime
    travel_minutes: dict[str, dict[str, int]]
    friends: dict[str, Friend]


class Meeting(BaseModel):
    """One meeting: who, where, when I get there, when it starts and ends."""

    person: str
    location: str
    arrive: dt.datetime
    start: dt.datetime
    end: dt.datetime


class MeetingPlan(BaseModel):
    """The day's meetings, in the order they happen."""

    meetings: list[Meeting] = Field(min_length=1, max_length=3)

    @relation
    def meets_everyone_once(self, day: Day) -> bool:
        """Every friend once."""
        return (
            len(self.meetings) == len(day.friends)
            and all(m.person in day.friends for m in self.meetings)
            and distinct(m.person for m in self.meetings)
        )

    @relation
    def at_their_place(self, day: Day) -> bool:
        """Each meeting is where the friend is."""
        return all(m.location == day.friends[m.person].location for m in self.meetings)

    @relation
    def travel_times(self, day: Day) -> bool:
        """I arrive after travelling from where I was."""
        first = self.meetings[0]
        go = day.travel_minutes[day.start_location][first.location]
        return first.arrive == day.start_time + dt.timedelta(minutes=go) and all(
            b.arrive == a.end + dt.timedelta(minutes=day.travel_minutes[a.location][b.location])
            for a, b in zip(self.meetings, self.meetings[1:])
        )

    @relation
    def while_they_are_there(self, day: Day) -> bool:
        """A meeting starts once I am there and fits the friend's window."""
        return all(
            m.arrive <= m.start
            and day.friends[m.person].available_from <= m.start
            and m.end <= day.friends[m.person].available_until
            for m in self.meetings
        )

    @relation
    def long_enough(self, day: Day) -> bool:
        """Each meeting lasts at least as long as the friend wants."""
        return all(
            m.end - m.start >= dt.timedelta(minutes=day.friends[m.person].min_minutes)
            for m in self.meetings
        )

    @relation
    def on_five_minute_marks(self) -> bool:
        """Meetings start and end on a five-minute mark."""
        return all(
            m.start.minute % 5 == 0
            and m.start.second == 0
            and m.end.minute % 5 == 0
            and m.end.second == 0
            for m in self.meetings
        )


def _at(hour: int, minute: int = 0) -> dt.datetime:
    return dt.datetime(2026, 12, 7, hour, minute)


CONTEXT = Day(
    start_location="Nob Hill",
    start_time=_at(9),
    travel_minutes={
        "Nob Hill": {"Union Square": 7, "Golden Gate Park": 17, "Mission District": 13},
        "Union Square": {"Nob Hill": 9, "Golden Gate Park": 22, "Mission District": 14},
        "Golden Gate Park": {"Nob Hill": 20, "Union Square": 22, "Mission District": 17},
        "Mission District": {"Nob Hill": 12, "Union Square": 15, "Golden Gate Park": 17},
    },
    friends={
        "Sarah": Friend(
            location="Union Square",
            available_from=_at(10),
            available_until=_at(12, 15),
            min_minutes=45,
        ),
        "Mark": Friend(
            location="Golden Gate Park",
            available_from=_at(13),
            available_until=_at(17, 30),
            min_minutes=90,
        ),
        "Ana": Friend(
            location="Mission District",
            available_from=_at(18),
            available_until=_at(21),
            min_minutes=60,
        ),
    },
)

PROMPT = (
    "You are visiting San Francisco for the day and want to meet as many friends as "
    "possible. Travel distances (in minutes): Nob Hill to Union Square: 7. Nob Hill to "
    "Golden Gate Park: 17. Nob Hill to Mission District: 13. Union Square to Nob Hill: 9. "
    "Union Square to Golden Gate Park: 22. Union Square to Mission District: 14. Golden "
    "Gate Park to Nob Hill: 20. Golden Gate Park to Union Square: 22. Golden Gate Park to "
    "Mission District: 17. Mission District to Nob Hill: 12. Mission District to Union "
    "Square: 15. Mission District to Golden Gate Park: 17.\n"
    "CONSTRAINTS: You arrive at Nob Hill at 9:00AM on 2026-12-07. Sarah will be at Union "
    "Square from 10:00AM to 12:15PM; you'd like to meet Sarah for a minimum of 45 minutes. "
    "Mark will be at Golden Gate Park from 1:00PM to 5:30PM; you'd like to meet Mark for a "
    "minimum of 90 minutes. Ana will be at Mission District from 6:00PM to 9:00PM; you'd "
    "like to meet Ana for a minimum of 60 minutes. Meetings start and end on a five-minute "
    "mark. Give the plan: for each meeting the person, the place, when you arrive, and when "
    "the meeting starts and ends."
)

GOLDEN = MeetingPlan.model_validate(
    {
        "meetings": [
            {
                "person": "Sarah",
                "location": "Union Square",
                "arrive": "2026-12-07T09:07:00",
                "start": "2026-12-07T10:00:00",
                "end": "2026-12-07T10:45:00",
            },
            {
                "person": "Mark",
                "location": "Golden Gate Park",
                "arrive": "2026-12-07T11:07:00",
                "start": "2026-12-07T13:00:00",
                "end": "2026-12-07T14:30:00",
            },
            {
                "person": "Ana",
                "location": "Mission District",
                "arrive": "2026-12-07T14:47:00",
                "start": "2026-12-07T18:00:00",
                "end": "2026-12-07T19:00:00",
            },
        ]
    },
    context=CONTEXT,
)
"""A record a good model writes: each meeting as early and as short as it may be."""
