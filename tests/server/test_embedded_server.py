"""The real embedded SmolLM2 engine behind `factorspec serve`, through the official client."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest
from pydantic import BaseModel

from examples.invoice import SAMPLE_CONTEXT as INVOICE_CONTEXT
from examples.invoice import SAMPLE_PROMPT as INVOICE_PROMPT
from examples.invoice import Invoice
from examples.meeting import SAMPLE_CONTEXT as MEETING_CONTEXT
from examples.meeting import SAMPLE_PROMPT as MEETING_PROMPT
from examples.meeting import Meeting
from factorspec_sdk.backends.remote import RemoteBackend
from factorspec_sdk.client import Client, GenerationResult
from factorspec_sdk.domains.trip import Itinerary, generate_problem, prompt_for
from factorspec_sdk.server import create_app
from tests.server.helpers import running

if TYPE_CHECKING:
    from factorspec_sdk.engines.embedded import EmbeddedEngine


@pytest.mark.model
def test_examples_through_the_server(embedded_engine: EmbeddedEngine) -> None:
    trips = [generate_problem(n, seed) for n, seed in ((3, 1), (4, 2))]
    work: list[tuple[type[BaseModel], str, object]] = [
        *((Itinerary, prompt_for(t), t) for t in trips),
        (Invoice, INVOICE_PROMPT, INVOICE_CONTEXT),
        (Meeting, MEETING_PROMPT, MEETING_CONTEXT),
    ]
    with running(create_app(embedded_engine)) as url:
        backend = Client(backend=RemoteBackend(url, max_retries=0))

        def one(item: tuple[type[BaseModel], str, object]) -> GenerationResult[BaseModel]:
            model, prompt, ctx = item
            return backend.generate(model, prompt, context=ctx, max_tokens=1024, return_result=True)

        with ThreadPoolExecutor(len(work)) as pool:  # decoded together on the engine thread
            results = list(pool.map(one, work))
    for (model, _, ctx), r in zip(work, results, strict=True):
        model.model_validate_json(r.text, context=ctx)
        assert r.stats.tokens_per_step > 1.5, r.stats.summary()
    assert results[3].value.model_dump() == {"day": "Tuesday", "start_hour": 12, "end_hour": 14}
