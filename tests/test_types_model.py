"""The ten everyday kinds of model of issue #13 generate valid records on the real SmolLM2.

The ten requests go through one `AsyncClient` under one ``asyncio.gather``, so they decode as
one batch (one forward per step for all ten records), each under its own spec.

In float32, not the measured dtype: these specs have grammar values, which have no token-budget
masks, so a record whose free text loops ends at ``max_tokens`` unfinished. In bf16 the
budget's ``note`` went from a long sentence in one run to a ``-JSON-Data-...`` loop in another
(a fresh-clone run failed so). With fp32 and certain drafts only (no guesses, so no verify
width chosen by measured costs), every run computes the same logits in the same chunks.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from pydantic import BaseModel

from factorspec_sdk import AsyncClient
from tests.tokens import test_grammar as kinds

if TYPE_CHECKING:
    from factorspec_sdk.engines.embedded import EmbeddedEngine

pytestmark = pytest.mark.model

CASES: list[tuple[type[BaseModel], str]] = [
    (kinds.Sentiment, "Classify the sentiment of: 'The food was wonderful.'"),
    (kinds.Contact, "Extract the contact: Ann Lee, ann.lee@mail.com, phone +4512345678."),
    (kinds.Booking, "Book the Grand Hotel from 2026-12-03 to 2026-12-06 for 2 guests."),
    (kinds.Receipt, "Receipt: coffee 3.50, cake 4.25. Total 7.75."),
    (kinds.Order, "Order amount 120.50 with tax 0.125."),
    (kinds.Step, "Search for hotels in Paris."),
    (kinds.Tally, "Count the words: apple apple pear."),
    (kinds.Quote, 'Quote: He said "ship it" -- Ann.'),
    (kinds.Slot, "A meeting from 09:00:00 to 10:30:00 on 2026-12-03T09:00:00, 90 minutes."),
    (kinds.Budget, "Budget: food 300, rent 1200."),
]


def test_everyday_models_generate_valid_records(embedded_engine_fp32: EmbeddedEngine) -> None:
    async def run() -> tuple[list[BaseModel], list[int]]:
        async with AsyncClient(embedded_engine_fp32, max_guesses=0) as client:
            records = await asyncio.gather(
                *(client.generate(model, prompt, max_tokens=400) for model, prompt in CASES)
            )
            return list(records), client.batch_sizes

    records, batches = asyncio.run(run())
    for (model, _), record in zip(CASES, records, strict=True):
        assert type(record) is model
        model.model_validate(record.model_dump())  # the client validated it; check it again
    assert batches[0] == len(CASES)  # one batch: the kinds shared every forward
