"""The trip planning domain with calendar dates: ``DatedItinerary`` beside the int-day one.

The same problems as `factorspec_sdk.domains.trip`, starting on a date the context gives:
every stay has a ``first_date`` and a ``last_date`` and every flight a ``date``
(``datetime.date`` fields, written ``YYYY-MM-DD``), and the relations say what
`trip.Itinerary`'s say about day numbers, with date arithmetic (``(last - first).days``,
``start + timedelta(days=n)``). Once the cities are chosen the relations fix every date,
so the dates are drafted as certain tokens as the day numbers are.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, Field

from factorspec_sdk.domains.trip import TripProblem, itinerary_record, prompt_for
from factorspec_sdk.relations.decorator import distinct, relation

__all__ = [
    "BENCH_START",
    "DatedFlight",
    "DatedItinerary",
    "DatedStay",
    "DatedTripProblem",
    "dated_problem",
    "dated_prompt_for",
    "dated_record",
]


BENCH_START = dt.date(2026, 12, 28)
"""Day 1 of the benchmarks' dated itineraries (a year's end falls inside most trips)."""


class DatedTripProblem(TripProblem):
    """A `TripProblem` whose day 1 is ``start``."""

    start: dt.date

    def date_of(self, day: int) -> dt.date:
        """The date of trip day ``day`` (day 1 is ``start``)."""
        return self.start + dt.timedelta(days=day - 1)


def dated_problem(problem: TripProblem, start: dt.date) -> DatedTripProblem:
    """``problem`` starting on ``start``."""
    return DatedTripProblem(**problem.model_dump(), start=start)


def dated_prompt_for(problem: DatedTripProblem) -> str:
    """The problem in the int-day prompt's words, with the start date and the event dates."""
    text = prompt_for(problem)
    for e in problem.events:
        a, b = problem.date_of(e.first_day), problem.date_of(e.last_day)
        for days in (
            f"between day {e.first_day} and day {e.last_day}",
            f"from day {e.first_day} to day {e.last_day}",
        ):
            text = text.replace(days, f"from {a} to {b}")
    end = problem.date_of(problem.total_days)
    return (
        text
        + f" The trip starts on {problem.start.isoformat()} and ends on {end.isoformat()};"
        + " give every stay and flight its dates (YYYY-MM-DD)."
    )


class DatedStay(BaseModel):
    """``first_date``..``last_date`` spent in ``city`` (the flight dates count for both)."""

    city: str
    first_date: dt.date
    last_date: dt.date


class DatedFlight(BaseModel):
    """A direct flight on ``date`` from ``origin`` to ``destination``."""

    date: dt.date
    origin: str
    destination: str


class DatedItinerary(BaseModel):
    """An ordered trip with calendar dates; its context is a `DatedTripProblem`."""

    stays: list[DatedStay] = Field(max_length=10)
    flights: list[DatedFlight] = Field(max_length=9)

    @relation
    def visits_every_city_once(self, trip: DatedTripProblem) -> bool:
        """One stay per city of the trip, none repeated."""
        return (
            len(self.stays) == len(trip.cities)
            and all(s.city in trip.cities for s in self.stays)
            and distinct(s.city for s in self.stays)
        )

    @relation
    def stays_follow_each_other(self, trip: DatedTripProblem) -> bool:
        """The trip starts on its start date, ends on its last; each stay starts as one ends."""
        end = trip.start + dt.timedelta(days=trip.total_days - 1)
        return (
            self.stays[0].first_date == trip.start
            and self.stays[-1].last_date == end
            and all(b.first_date == a.last_date for a, b in zip(self.stays, self.stays[1:]))
        )

    @relation
    def stay_lengths(self, trip: DatedTripProblem) -> bool:
        """Each stay lasts as many days as asked for its city (both end dates count)."""
        return all((s.last_date - s.first_date).days + 1 == trip.days[s.city] for s in self.stays)

    @relation
    def flights_link_stays(self, trip: DatedTripProblem) -> bool:
        """A direct flight from each stay to the next, on the date the first ends."""
        return len(self.flights) == len(self.stays) - 1 and all(
            f.date == a.last_date
            and f.origin == a.city
            and f.destination == b.city
            and (a.city, b.city) in trip.direct_flights
            for f, a, b in zip(self.flights, self.stays, self.stays[1:])
        )

    @relation
    def events_covered(self, trip: DatedTripProblem) -> bool:
        """The stay in an event's city covers the event's dates."""
        return all(
            any(
                s.city == e.city
                and s.first_date <= trip.start + dt.timedelta(days=e.first_day - 1)
                and trip.start + dt.timedelta(days=e.last_day - 1) <= s.last_date
                for s in self.stays
            )
            for e in trip.events
        )


def dated_record(problem: DatedTripProblem, plan: list[tuple[str, int]]) -> dict[str, Any]:
    """The JSON record of an ordered plan, dated from ``problem.start``."""
    days = itinerary_record(plan)
    return {
        "stays": [
            {
                "city": s["city"],
                "first_date": problem.date_of(s["first_day"]).isoformat(),
                "last_date": problem.date_of(s["last_day"]).isoformat(),
            }
            for s in days["stays"]
        ],
        "flights": [
            {
                "date": problem.date_of(f["day"]).isoformat(),
                "origin": f["origin"],
                "destination": f["destination"],
            }
            for f in days["flights"]
        ],
    }
