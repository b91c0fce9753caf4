"""Records the vLLM tests decode: the examples and trip problems with several valid plans.

Problems are drawn with several valid plans (``unique=False``) so that the model makes real
choices; with a unique plan the oracle writes the whole record and vLLM is never asked.
"""

from __future__ import annotations

from pydantic import BaseModel

from examples import invoice, meeting
from factorspec_sdk.domains.trip import Itinerary, TripProblem, generate_problem, prompt_for


def problems(n: int, seed: int = 100) -> list[TripProblem]:
    """``n`` trip problems of 4-8 cities with several valid plans."""
    return [generate_problem(4 + i % 5, seed + i, unique=False) for i in range(n)]


CASES: list[tuple[type[BaseModel], str, object]] = [
    (invoice.Invoice, invoice.SAMPLE_PROMPT, invoice.SAMPLE_CONTEXT),
    (meeting.Meeting, meeting.SAMPLE_PROMPT, meeting.SAMPLE_CONTEXT),
    *((Itinerary, prompt_for(p), p) for p in problems(6)),
]
"""(model, prompt, context): an invoice, a meeting and six trips."""
