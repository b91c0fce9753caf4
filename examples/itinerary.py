"""Trip itineraries (NATURAL PLAN-style): the relations make every plan a valid trip.

The model, `Itinerary`, its per-request context, `TripProblem` (the cities, each city's stay
length, the trip length, the direct flights and the event windows), and a sample problem live
in the packaged domain `factorspec_sdk.domains.trip`.
``python -m examples.itinerary`` (``make run``) generates a guaranteed-valid plan for it with
the embedded engine.
"""

from __future__ import annotations

from factorspec_sdk.domains.trip import SAMPLE_CONTEXT, SAMPLE_PROMPT, Itinerary

__all__ = ["SAMPLE_CONTEXT", "SAMPLE_PROMPT", "main"]


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
