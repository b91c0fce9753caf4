"""The issue's contact card on the real SmolLM2: valid within ``max_tokens``, tight or not.

Before budget masks covered patterns, SmolLM2 wrote ``johnny-johnny-...`` into one string
until ``max_tokens=400`` ran out (`IncompleteGenerationError`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from factorspec_sdk import Client
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import Writer
from tests.tokens.test_budget_every_value import Contact

if TYPE_CHECKING:
    from factorspec_sdk.engines.embedded import EmbeddedEngine

pytestmark = pytest.mark.model

PROMPT = (
    "Write the contact card of Johnny Appleseed as JSON: his name, his e-mail address "
    "johnny@example.com, no phone, and a few tags about him."
)


def test_the_contact_card_finishes_within_the_budget(embedded_engine: EmbeddedEngine) -> None:
    client = Client(embedded_engine)
    planner = Planner(Writer(compile_spec(Contact, None)), embedded_engine.tokenizer)
    shortest = planner.min_tokens(planner.start())
    for budget in (400, shortest + 4):
        result = client.generate(Contact, PROMPT, max_tokens=budget, return_result=True)
        assert isinstance(result.value, Contact)
        assert len(result.tokens) <= budget
