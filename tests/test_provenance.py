"""``result.provenance``: values the model chose, the relations determined, the schema forced."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, Field

from examples import meeting
from factorspec_sdk import Client, GenerationError, SamplingParams, TokenBudgetError, relation
from factorspec_sdk.backends.base import GenerationRequest, RecordOutcome
from factorspec_sdk.backends.local import engine_backend
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.provenance import ORIGINS, Provenance, received
from tests.helpers import TRIP_CONTEXT, Trip, tiny_tokenizer

TOK = tiny_tokenizer()


def engine() -> ScriptedEngine:
    return ScriptedEngine.random(TOK, seed=2, temperature_scale=2.0)


def check_whole(prov: Provenance, text: str, tokens: list[int]) -> None:
    """The token origins cover the record, once each."""
    assert sum(prov.tokens.values()) == len(tokens) == len(prov.token_origins)
    assert "".join(piece for piece, _ in prov.pieces(text)) == text
    assert sum(prov.share(o) for o in ORIGINS) == pytest.approx(1.0)


def test_trip_days_are_determined_once_the_cities_are_chosen() -> None:
    result = Client(engine()).generate(Trip, "go", context=TRIP_CONTEXT, return_result=True)
    prov = result.provenance
    check_whole(prov, result.text, result.tokens)
    n = len(TRIP_CONTEXT)
    assert prov.sources["legs[0].city"].origin == "model"
    assert prov.sources[f"legs[{n - 1}].city"].origin == "relations"  # the one city left
    for k in range(n):
        for day in ("first_day", "last_day"):
            source = prov.sources[f"legs[{k}].{day}"]
            assert source.origin == "relations"
            assert source.relations == ("chain",)
            assert source.tokens.get("model", 0) == 0
    assert prov.sources["len(legs)"].origin == "relations"
    assert prov.sources["len(legs)"].span is None
    # the span of a value is its text
    first = prov.sources["legs[0].city"]
    assert first.span is not None
    assert result.text[first.span[0] : first.span[1]] == f'"{result.value.legs[0].city}"'
    assert prov.tokens["model"] == sum(s.tokens.get("model", 0) for s in prov.sources.values())
    assert "relations: 8 values" in prov.summary()


def test_a_meeting_the_relations_fix_has_no_token_of_the_model() -> None:
    result = Client(engine()).generate(
        meeting.Meeting, "x", context=meeting.SAMPLE_CONTEXT, return_result=True
    )
    prov = result.provenance
    check_whole(prov, result.text, result.tokens)
    assert {s.origin for s in prov.sources.values()} == {"relations"}
    assert prov.tokens.get("model", 0) == 0
    assert "everyone_free" in prov.sources["day"].relations


class Form(BaseModel):
    version: Literal["v1"]
    size: int = Field(ge=3, le=3)
    note: str = Field(max_length=6)
    a: int = Field(ge=0, le=5)
    b: int = Field(ge=0, le=5)

    @relation
    def sums(self) -> bool:
        return self.a + self.b == 5 and self.size == 3


def test_schema_forced_values_and_free_choices() -> None:
    result = Client(engine()).generate(Form, "go", return_result=True)
    prov = result.provenance
    check_whole(prov, result.text, result.tokens)
    assert prov.sources["version"].origin == "schema"
    assert prov.sources["size"].origin == "schema"  # ge == le: the relation adds nothing
    assert prov.sources["note"].origin == "model" or result.value.note == ""
    assert prov.sources["b"].origin == "relations"  # a + b == 5 once a is written
    assert prov.sources["b"].relations == ("sums",)
    assert prov.sources["a"].origin == "model"  # every a in 0..5 has a b


def test_provenance_is_the_same_with_and_without_speculation() -> None:
    eng = engine()
    on = Client(eng).generate(Trip, "go", context=TRIP_CONTEXT, return_result=True)
    off = Client(eng, speculative=False).generate(
        Trip, "go", context=TRIP_CONTEXT, return_result=True
    )
    assert on.tokens == off.tokens
    assert on.provenance == off.provenance
    assert on.provenance is on.provenance  # computed once


def test_provenance_travels_as_json() -> None:
    """A server sends it as JSON data; read back, it is the same object."""
    import json

    result = Client(engine()).generate(Trip, "go", context=TRIP_CONTEXT, return_result=True)
    prov = result.provenance
    data = json.loads(json.dumps(prov.to_json()))
    assert Provenance.from_json(data) == prov
    assert data["sources"]["len(legs)"]["span"] is None
    with pytest.raises(ValueError):
        Provenance.from_json({"sources": {}, "tokens": {"nobody": 1}})


def test_a_backend_answers_a_plain_outcome_that_explains_itself() -> None:
    """`Backend.run` answers `RecordOutcome` objects: text, tokens, stats and `explain`.

    Nothing of the decoder (its job, its planner) reaches the client; the outcome's
    `explain` replays the planner once, and a server's JSON is read back the same way.
    """
    backend = engine_backend(engine())
    (out,) = backend.run([GenerationRequest(Trip, "go", TRIP_CONTEXT)])
    assert type(out) is RecordOutcome and out.error is None
    assert not hasattr(out, "job")
    assert out.explain is not None
    prov = out.explain()
    assert out.explain() is prov  # computed once
    check_whole(prov, out.text, out.tokens)
    result = Client(backend=backend).generate(Trip, "go", context=TRIP_CONTEXT, return_result=True)
    assert result.provenance == prov
    assert received(prov.to_json())() == prov
    bad = received({"sources": {}, "tokens": {"nobody": 1}})
    with pytest.raises(GenerationError, match="provenance cannot be read"):
        bad()
    (failed,) = backend.run(
        [GenerationRequest(Trip, "go", TRIP_CONTEXT, SamplingParams(max_tokens=3))]
    )
    assert isinstance(failed.error, TokenBudgetError) and failed.explain is None
