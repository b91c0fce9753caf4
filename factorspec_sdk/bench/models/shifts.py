"""A day's shift roster with clock times: quarter hours, no double booking, the budget.

The context is the shop's day: the date, opening and closing times, the staff, and the
hours the manager may pay for. Each shift is one person's, in one role, between two and
eight hours, inside opening hours and on quarter hours; the roster lists shifts by start
time, opens and closes the shop with someone on the floor, books nobody twice at once, and
keeps the paid minutes within the budget.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, Field

from factorspec_sdk import relation

__all__ = ["CONTEXT", "GOLDEN", "PROMPT", "Roster", "Shift", "ShopDay"]


class ShopDay(BaseModel):
    """The context: the day, the hours, the staff and the budget."""

    day: dt.date
    opens: dt.time
    closes: dt.time
    staff: list[str]
    budget_minutes: int


class Shift(BaseModel):
    """One person's shift."""

    employee: str
    role: Literal["cashier", "floor", "stock"]
    start: dt.time
    end: dt.time

    @relation
    def two_to_eight_hours(self) -> bool:
        """A shift lasts between two and eight hours."""
        minutes = (self.end.hour * 60 + self.end.minute) - (
            self.start.hour * 60 + self.start.minute
        )
        return 120 <= minutes <= 480

    @relation
    def on_quarter_hours(self) -> bool:
        """Shifts start and end on a quarter hour."""
        return (
            self.start.minute % 15 == 0
            and self.end.minute % 15 == 0
            and self.start.second == 0
            and self.end.second == 0
        )


class Roster(BaseModel):
    """The day's roster."""

    day: dt.date
    shifts: list[Shift] = Field(min_length=1, max_length=8)

    @relation
    def for_the_day(self, shop: ShopDay) -> bool:
        """The roster is for the shop's day, its people and its hours."""
        return self.day == shop.day and all(
            s.employee in shop.staff and shop.opens <= s.start and s.end <= shop.closes
            for s in self.shifts
        )

    @relation
    def by_start_time(self) -> bool:
        """Shifts are listed by start time."""
        return all(a.start <= b.start for a, b in zip(self.shifts, self.shifts[1:]))

    @relation
    def open_to_close(self, shop: ShopDay) -> bool:
        """Someone on the floor when the shop opens and until it closes."""
        return any(s.role == "floor" and s.start == shop.opens for s in self.shifts) and any(
            s.role == "floor" and s.end == shop.closes for s in self.shifts
        )

    @relation
    def nobody_twice_at_once(self) -> bool:
        """Two shifts of one person do not overlap."""
        return all(
            a.employee != b.employee or a.end <= b.start
            for i, a in enumerate(self.shifts)
            for b in self.shifts[i + 1 :]
        )

    @relation
    def within_budget(self, shop: ShopDay) -> bool:
        """The paid minutes fit the budget."""
        return (
            sum(
                (s.end.hour * 60 + s.end.minute) - (s.start.hour * 60 + s.start.minute)
                for s in self.shifts
            )
            <= shop.budget_minutes
        )


CONTEXT = ShopDay(
    day=dt.date(2026, 12, 19),
    opens=dt.time(8),
    closes=dt.time(20),
    staff=["Ana", "Ben", "Chloe", "Dev"],
    budget_minutes=32 * 60,
)

PROMPT = (
    "Make the roster for Saturday 2026-12-19. The shop opens at 08:00 and closes at 20:00. "
    "Staff: Ana, Ben, Chloe and Dev. Shifts are 2 to 8 hours, on quarter hours, listed by "
    "start time; someone must be on the floor at opening and at closing; nobody works two "
    "shifts at once; at most 32 paid hours. Ana and Ben cover the floor, Chloe the till in "
    "the middle of the day, Dev does the stock in the morning."
)

GOLDEN = Roster.model_validate(
    {
        "day": "2026-12-19",
        "shifts": [
            {"employee": "Ana", "role": "floor", "start": "08:00:00", "end": "14:00:00"},
            {"employee": "Dev", "role": "stock", "start": "08:00:00", "end": "12:00:00"},
            {"employee": "Chloe", "role": "cashier", "start": "11:00:00", "end": "17:00:00"},
            {"employee": "Ben", "role": "floor", "start": "14:00:00", "end": "20:00:00"},
        ],
    },
    context=CONTEXT,
)
"""A roster that keeps every rule (22 paid hours)."""
