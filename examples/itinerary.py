"""Trip itineraries (NATURAL PLAN-style): the relations make every plan a valid trip.

The per-request context is a `TripProblem`: the cities, each city's stay length, the trip
length, the direct flights and the event windows. ``python -m examples.itinerary`` (``make run``)
generates a guaranteed-valid plan for the bundled sample problem with the embedded engine.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from factorspec_sdk import distinct, relation
from factorspec_sdk.bench.trip import MAX_TRIP_DAYS, TripProblem, generate_problem, prompt_for

__all__ = ["SAMPLE_CONTEXT", "SAMPLE_PROMPT", "Flight", "Itinerary", "Stay", "main"]


class Stay(BaseModel):
    """Days ``first_day``..``last_day`` spent in ``city`` (the flight days count for both)."""

    city: str
    first_day: int = Field(ge=1, le=MAX_TRIP_DAYS)
    last_day: int = Field(ge=1, le=MAX_TRIP_DAYS)


class Flight(BaseModel):
    """A direct flight on ``day`` from ``origin`` to ``destination``."""

    day: int = Field(ge=1, le=MAX_TRIP_DAYS)
    origin: str
    destination: str


class Itinerary(BaseModel):
    """An ordered trip: one stay per city, linked by direct flights."""

    stays: list[Stay] = Field(max_length=10)
    flights: list[Flight] = Field(max_length=9)

    @relation
    def visits_every_city_once(self, trip: TripProblem) -> bool:
        """One stay per city of the trip, none repeated."""
        return (
            len(self.stays) == len(trip.cities)
            and all(s.city in trip.cities for s in self.stays)
            and distinct(s.city for s in self.stays)
        )

    @relation
    def stays_follow_each_other(self, trip: TripProblem) -> bool:
        """The trip starts on day 1, ends on its last day; a stay starts when the last ends."""
        return (
            self.stays[0].first_day == 1
            and self.stays[-1].last_day == trip.total_days
            and all(b.first_day == a.last_day for a, b in zip(self.stays, self.stays[1:]))
        )

    @relation
    def stay_lengths(self, trip: TripProblem) -> bool:
        """Each stay lasts as many days as asked for its city."""
        return all(s.last_day - s.first_day + 1 == trip.days[s.city] for s in self.stays)

    @relation
    def flights_link_stays(self, trip: TripProblem) -> bool:
        """A direct flight from each stay to the next, on the day the first ends."""
        return len(self.flights) == len(self.stays) - 1 and all(
            f.day == a.last_day
            and f.origin == a.city
            and f.destination == b.city
            and (a.city, b.city) in trip.direct_flights
            for f, a, b in zip(self.flights, self.stays, self.stays[1:])
        )

    @relation
    def events_covered(self, trip: TripProblem) -> bool:
        """The stay in an event's city covers the event's days."""
        return all(
            any(
                s.city == e.city and s.first_day <= e.first_day and e.last_day <= s.last_day
                for s in self.stays
            )
            for e in trip.events
        )


SAMPLE_CONTEXT: TripProblem = generate_problem(5, seed=1)
"""A bundled 5-city problem with two events (golden: Copenhagen, Split, Berlin, Helsinki,
Budapest)."""

SAMPLE_PROMPT: str = prompt_for(SAMPLE_CONTEXT)


def main() -> None:
    """Generate a guaranteed-valid itinerary for the sample problem and print it with stats."""
    import sys
    import time

    from factorspec_sdk import Client

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    print(SAMPLE_PROMPT, end="\n\n")
    t0 = time.perf_counter()
    say("[1/3] loading the embedded engine (SmolLM2-135M-Instruct; first run converts it once)")
    client = Client()
    client.engine  # noqa: B018 - load now so the steps below are timed separately
    say(f"      ready in {time.perf_counter() - t0:.1f}s")
    say("[2/3] compiling the relations for this trip and decoding")
    result = client.generate(Itinerary, SAMPLE_PROMPT, context=SAMPLE_CONTEXT, return_result=True)
    say("[3/3] checking the record against every relation")
    plan = Itinerary.model_validate_json(result.text, context=SAMPLE_CONTEXT)
    for stay in plan.stays:
        print(f"Day {stay.first_day}-{stay.last_day}: {stay.city}")
    for flight in plan.flights:
        print(f"Day {flight.day}: fly {flight.origin} -> {flight.destination}")
    print()
    print(result.text)
    print()
    print("stats:", result.stats.summary())


if __name__ == "__main__":
    main()
