"""Trip itineraries with calendar dates: the sample trip, starting on a date the context gives.

The model, `DatedItinerary`, and its context, `DatedTripProblem` (a `TripProblem` with a
``start`` date), live in the packaged domain `factorspec_sdk.domains.trip_dates`: every stay
has a ``first_date`` and a ``last_date``, every flight a ``date``, and the relations are the
int-day itinerary's over ``datetime.date`` fields. Once the model picks the cities, every date
is fixed and drafted as certain tokens. ``python -m examples.itinerary_dates`` generates a
guaranteed-valid dated plan for the sample with the embedded engine.
"""

from __future__ import annotations

import datetime as dt

from examples.itinerary import SAMPLE_CONTEXT as DAY_CONTEXT
from factorspec_sdk.domains.trip_dates import (
    DatedItinerary,
    DatedTripProblem,
    dated_problem,
    dated_prompt_for,
)

__all__ = ["SAMPLE_CONTEXT", "SAMPLE_PROMPT", "main"]

SAMPLE_CONTEXT: DatedTripProblem = dated_problem(DAY_CONTEXT, dt.date(2026, 12, 28))
"""The bundled 5-city problem of ``examples.itinerary``, from 2026-12-28 to 2027-01-19."""

SAMPLE_PROMPT: str = dated_prompt_for(SAMPLE_CONTEXT)


def main() -> None:
    """Generate a guaranteed-valid dated itinerary for the sample and print it with stats."""
    from factorspec_sdk import Client

    print(SAMPLE_PROMPT, end="\n\n")
    with Client() as client:
        result = client.generate(
            DatedItinerary, SAMPLE_PROMPT, context=SAMPLE_CONTEXT, return_result=True
        )
    plan = result.value
    for stay in plan.stays:
        print(f"{stay.first_date} to {stay.last_date}: {stay.city}")
    for flight in plan.flights:
        print(f"{flight.date}: fly {flight.origin} -> {flight.destination}")
    print("\nstats:", result.stats.summary())


if __name__ == "__main__":
    main()
