"""A trip of hotel stays with real dates: every city once, by train, nights as asked.

The context is the trip request: the cities, the nights wanted in each, the day the trip
starts and the direct trains (pairs of cities). The stays follow each other (each check-in
is the previous check-out), last the nights asked, each move has a direct train, and no
train runs on a Sunday, so no stay but the first begins on one.
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from factorspec_sdk import distinct, relation

__all__ = ["CONTEXT", "GOLDEN", "PROMPT", "Stay", "TripPlan", "TripRequest"]


class TripRequest(BaseModel):
    """The context: where, how long, from when, and the trains."""

    cities: list[str]
    nights: dict[str, int]
    start: dt.date
    trains: list[tuple[str, str]]


class Stay(BaseModel):
    """A hotel stay in one city."""

    city: str
    check_in: dt.date
    check_out: dt.date


class TripPlan(BaseModel):
    """The stays, in the order of the trip."""

    stays: list[Stay] = Field(min_length=1, max_length=6)

    @relation
    def every_city_once(self, trip: TripRequest) -> bool:
        """Each city of the request once."""
        return (
            len(self.stays) == len(trip.cities)
            and all(s.city in trip.cities for s in self.stays)
            and distinct(s.city for s in self.stays)
        )

    @relation
    def nights_as_asked(self, trip: TripRequest) -> bool:
        """Each stay lasts the nights asked for its city."""
        return all((s.check_out - s.check_in).days == trip.nights[s.city] for s in self.stays)

    @relation
    def one_after_another(self, trip: TripRequest) -> bool:
        """The trip starts on its day and each stay begins when the one before ends."""
        return self.stays[0].check_in == trip.start and all(
            b.check_in == a.check_out for a, b in zip(self.stays, self.stays[1:])
        )

    @relation
    def by_direct_train(self, trip: TripRequest) -> bool:
        """A direct train for every move, and none on a Sunday."""
        return all(
            (a.city, b.city) in trip.trains and b.check_in.weekday() != 6
            for a, b in zip(self.stays, self.stays[1:])
        )


CONTEXT = TripRequest(
    cities=["Vienna", "Prague", "Budapest", "Krakow", "Berlin"],
    nights={"Vienna": 3, "Prague": 2, "Budapest": 4, "Krakow": 2, "Berlin": 3},
    start=dt.date(2027, 4, 5),
    trains=[
        ("Vienna", "Budapest"),
        ("Budapest", "Vienna"),
        ("Vienna", "Prague"),
        ("Prague", "Vienna"),
        ("Prague", "Berlin"),
        ("Berlin", "Prague"),
        ("Budapest", "Krakow"),
        ("Krakow", "Prague"),
        ("Krakow", "Berlin"),
        ("Berlin", "Krakow"),
    ],
)

PROMPT = (
    "Plan a trip by train through Vienna, Prague, Budapest, Krakow and Berlin, starting on "
    "Monday 2027-04-05. Stay 3 nights in Vienna, 2 in Prague, 4 in Budapest, 2 in Krakow "
    "and 3 in Berlin. Direct trains: Vienna-Budapest and back, Vienna-Prague and back, "
    "Prague-Berlin and back, Budapest to Krakow, Krakow to Prague, Krakow-Berlin and back. "
    "No trains run on Sundays. Give each stay's city, check-in and check-out date."
)

GOLDEN = TripPlan.model_validate(
    {
        "stays": [
            {"city": "Vienna", "check_in": "2027-04-05", "check_out": "2027-04-08"},
            {"city": "Budapest", "check_in": "2027-04-08", "check_out": "2027-04-12"},
            {"city": "Krakow", "check_in": "2027-04-12", "check_out": "2027-04-14"},
            {"city": "Berlin", "check_in": "2027-04-14", "check_out": "2027-04-17"},
            {"city": "Prague", "check_in": "2027-04-17", "check_out": "2027-04-19"},
        ]
    },
    context=CONTEXT,
)
"""A plan that keeps every rule."""
