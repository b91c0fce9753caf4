"""Hotel bookings with real dates: check-in, check-out, nights, the hotel's season and blackouts.

The per-request context is the hotel's calendar: its season (opening and closing dates), the
blackout dates on which no stay may begin or end, the stay lengths it takes, the week the
guest wants to arrive in and the weekdays it takes arrivals on. The relations compare
``datetime.date`` fields, subtract them (``.days``), shift them by a ``timedelta`` built
from a field, and read ``.weekday()``. In the sample, the arrival week and weekday fix the
check-in date, and the nights the guest asked for fix the check-out: both dates are drafted as
certain tokens. ``python -m examples.booking`` validates a hand-written booking for the sample.
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from factorspec_sdk import relation

__all__ = [
    "FLEXIBLE_CONTEXT",
    "FLEXIBLE_PROMPT",
    "SAMPLE_CONTEXT",
    "SAMPLE_PROMPT",
    "Booking",
    "HotelCalendar",
    "later_season",
    "main",
]

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


class HotelCalendar(BaseModel):
    """Per-request constants: the hotel's calendar and the guest's request."""

    hotel: str
    guest: str
    opens: dt.date
    closes: dt.date
    blackout: list[dt.date] = Field(default_factory=list)
    min_nights: int = Field(ge=1)
    max_nights: int = Field(ge=1)
    nights_wanted: int | None = None
    arrival_week: dt.date | None = None
    """Monday of the week the guest wants to arrive in (None: any day of the season)."""
    arrival_weekdays: list[int] = Field(default_factory=lambda: list(range(7)))
    """Weekdays the hotel takes arrivals on (``date.weekday()``: 0 is Monday)."""


class Booking(BaseModel):
    """A hotel booking."""

    guest: str = Field(max_length=40)
    check_in: dt.date
    nights: int = Field(ge=1, le=28)
    check_out: dt.date
    breakfast: bool

    @relation
    def nights_match(self) -> bool:
        """Check-out is ``nights`` days after check-in."""
        return (self.check_out - self.check_in).days == self.nights

    @relation
    def check_out_follows(self) -> bool:
        """The same, written as a shift by a timedelta (compiled to the same thing)."""
        return self.check_in + dt.timedelta(days=self.nights) == self.check_out

    @relation
    def in_season(self, cal: HotelCalendar) -> bool:
        """The whole stay is inside the hotel's season."""
        return cal.opens <= self.check_in and self.check_out <= cal.closes

    @relation
    def avoids_blackouts(self, cal: HotelCalendar) -> bool:
        """No stay begins or ends on a blackout date."""
        return self.check_in not in cal.blackout and self.check_out not in cal.blackout

    @relation
    def stay_length(self, cal: HotelCalendar) -> bool:
        """The hotel's stay lengths, and the guest's when given."""
        wanted = cal.nights_wanted is None or self.nights == cal.nights_wanted
        return cal.min_nights <= self.nights <= cal.max_nights and wanted

    @relation
    def arrives_as_asked(self, cal: HotelCalendar) -> bool:
        """Arrival in the requested week, on a day the hotel takes arrivals."""
        on_day = self.check_in.weekday() in cal.arrival_weekdays
        if cal.arrival_week is None:
            return on_day
        week_end = cal.arrival_week + dt.timedelta(days=6)
        return on_day and cal.arrival_week <= self.check_in <= week_end


def later_season(cal: HotelCalendar, weeks: int) -> HotelCalendar:
    """The same hotel ``weeks`` weeks later, its season ``weeks`` days longer.

    Its dates all move (season, blackouts, the arrival week); its ints stay. A spec compiled
    for ``cal`` has the same context shape (`factorspec_sdk.graph.compile_spec`).
    """
    shift = dt.timedelta(days=7 * weeks)
    arrival = None if cal.arrival_week is None else cal.arrival_week + shift
    return cal.model_copy(
        update={
            "opens": cal.opens + shift,
            "closes": cal.closes + shift + dt.timedelta(days=weeks),
            "blackout": [d + shift for d in cal.blackout],
            "arrival_week": arrival,
        }
    )


SAMPLE_CONTEXT = HotelCalendar(
    hotel="Hotel Aurora, Tromsø",
    guest="Ingrid Solberg",
    opens=dt.date(2026, 12, 1),
    closes=dt.date(2027, 3, 31),
    blackout=[dt.date(2026, 12, 24), dt.date(2026, 12, 25), dt.date(2026, 12, 31)],
    min_nights=2,
    max_nights=14,
    nights_wanted=4,
    arrival_week=dt.date(2027, 1, 4),
    arrival_weekdays=[4],
)


FLEXIBLE_CONTEXT = SAMPLE_CONTEXT.model_copy(
    update={"nights_wanted": None, "arrival_week": None, "arrival_weekdays": [0, 1, 2, 3, 4]}
)
"""The same hotel, a guest who may arrive any weekday of the season: the model picks the
dates, digit by digit among the feasible ones."""


def _prompt(cal: HotelCalendar) -> str:
    days = " or ".join(WEEKDAYS[d] for d in cal.arrival_weekdays)
    nights = f"{cal.nights_wanted} nights" if cal.nights_wanted else "a few nights"
    week = f"in the week of {cal.arrival_week.isoformat()}" if cal.arrival_week else "any week"
    blackout = ", ".join(d.isoformat() for d in cal.blackout) or "none"
    return (
        f"Book a stay at {cal.hotel} for {cal.guest}: {nights}, arriving on a {days} "
        f"{week}. The hotel is open from "
        f"{cal.opens.isoformat()} to {cal.closes.isoformat()} and takes no arrivals or "
        f"departures on {blackout}. Say whether breakfast is included. Answer with JSON."
    )


SAMPLE_PROMPT = _prompt(SAMPLE_CONTEXT)
"""The sample request; its only valid dates are 2027-01-08 to 2027-01-12."""

FLEXIBLE_PROMPT = _prompt(FLEXIBLE_CONTEXT)


def main() -> None:
    """Validate a hand-written booking for the sample request and print it."""
    print(SAMPLE_PROMPT, end="\n\n")
    booking = Booking.model_validate(
        {
            "guest": "Ingrid Solberg",
            "check_in": "2027-01-08",
            "nights": 4,
            "check_out": "2027-01-12",
            "breakfast": True,
        },
        context=SAMPLE_CONTEXT,
    )
    print(f"{booking.guest}: {booking.check_in} to {booking.check_out} ({booking.nights} nights)")


if __name__ == "__main__":
    main()
