"""Meeting scheduling (NATURAL PLAN calendar style): a slot that fits everyone's calendar.

Times are whole hours (0-24) so that every field has a small domain. The per-request context
(`MeetingContext`) lists the allowed days, the working hours, the meeting length and everyone's
busy intervals; `Meeting` is the record, `SAMPLE_CONTEXT` and `SAMPLE_PROMPT` a sample request
whose only valid slot is Tuesday 12:00 to 14:00 (the docs' engine examples decode it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from factorspec_sdk.relations.decorator import relation

__all__ = [
    "SAMPLE_CONTEXT",
    "SAMPLE_PROMPT",
    "Busy",
    "Meeting",
    "MeetingContext",
    "Weekday",
    "meeting_prompt",
]

Weekday = Literal["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


class Busy(BaseModel):
    """``person`` is busy on ``day`` from ``start_hour`` to ``end_hour``."""

    person: str
    day: Weekday
    start_hour: int = Field(ge=0, le=24)
    end_hour: int = Field(ge=0, le=24)


class MeetingContext(BaseModel):
    """Per-request constants of a scheduling request."""

    participants: list[str]
    allowed_days: list[Weekday]
    work_start: int = Field(ge=0, le=24)
    work_end: int = Field(ge=0, le=24)
    duration: int = Field(ge=1, le=24)
    busy: list[Busy] = Field(default_factory=list)


class Meeting(BaseModel):
    """The meeting: a day and an hour range."""

    day: Weekday
    start_hour: int = Field(ge=0, le=24)
    end_hour: int = Field(ge=0, le=24)

    @relation
    def lasts_duration(self, ctx: MeetingContext) -> bool:
        """The meeting lasts as long as asked."""
        return self.end_hour - self.start_hour == ctx.duration

    @relation
    def within_work_hours(self, ctx: MeetingContext) -> bool:
        """The meeting is inside working hours."""
        return ctx.work_start <= self.start_hour and self.end_hour <= ctx.work_end

    @relation
    def on_allowed_day(self, ctx: MeetingContext) -> bool:
        """The meeting is on one of the allowed days."""
        return self.day in ctx.allowed_days

    @relation
    def everyone_free(self, ctx: MeetingContext) -> bool:
        """No participant is busy during the meeting."""
        return all(
            b.day != self.day or self.end_hour <= b.start_hour or b.end_hour <= self.start_hour
            for b in ctx.busy
        )


SAMPLE_CONTEXT = MeetingContext(
    participants=["Alice", "Bob", "Carol"],
    allowed_days=["Monday", "Tuesday"],
    work_start=9,
    work_end=17,
    duration=2,
    busy=[
        Busy(person="Alice", day="Monday", start_hour=9, end_hour=12),
        Busy(person="Alice", day="Tuesday", start_hour=14, end_hour=15),
        Busy(person="Bob", day="Monday", start_hour=13, end_hour=17),
        Busy(person="Bob", day="Tuesday", start_hour=9, end_hour=11),
        Busy(person="Carol", day="Monday", start_hour=12, end_hour=13),
        Busy(person="Carol", day="Tuesday", start_hour=11, end_hour=12),
        Busy(person="Carol", day="Tuesday", start_hour=16, end_hour=17),
    ],
)


def meeting_prompt(ctx: MeetingContext) -> str:
    """The request in NATURAL PLAN's calendar wording."""
    names = ctx.participants
    who = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
    days = " or ".join(ctx.allowed_days)
    parts = [
        f"You need to schedule a meeting for {who} for {ctx.duration} hours between the work "
        f"hours of {ctx.work_start}:00 to {ctx.work_end}:00 on either {days}."
    ]
    for person in names:
        mine = [b for b in ctx.busy if b.person == person]
        if mine:
            slots = ", ".join(f"{b.day} {b.start_hour}:00 to {b.end_hour}:00" for b in mine)
            parts.append(f"{person} is busy on {slots}.")
        else:
            parts.append(f"{person} is free the entire week.")
    parts.append("Find a time that works for everyone's schedule and constraints.")
    return " ".join(parts)


SAMPLE_PROMPT = meeting_prompt(SAMPLE_CONTEXT)
"""The sample request; its only valid slot is Tuesday 12:00 to 14:00."""
