from pydantic import ValidationError

from factorspec_sdk.domains.trip import SAMPLE_CONTEXT, Itinerary

plan = {
    "stays": [{"city": "Copenhagen", "first_day": 1, "last_day": 5}],
    "flights": [],
}
try:  # the relations run as ordinary Pydantic validators, no model needed
    Itinerary.model_validate(plan, context=SAMPLE_CONTEXT)
except ValidationError as exc:
    print(exc.error_count(), "relations violated:")
    for error in exc.errors():
        print(" -", error["msg"])
