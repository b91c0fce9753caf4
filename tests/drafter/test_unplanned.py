"""Drafts plan no segment the record does not reach: past a guess, a segment not planned yet
is left to the step whose model takes the draft that far."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.bench.user_models import golden_text, scripted_engine
from factorspec_sdk.drafter.loop import DecodeJob, Decoder, DecoderConfig
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import Writer


class Shift(BaseModel):
    """Whose shift, and how long: the person decides the hours a relation allows."""

    who: Literal["Ana", "Ben", "Dev"]
    hours: int = Field(ge=1, le=8)
    role: Literal["floor", "stock"]

    @relation
    def dev_works_long_on_stock(self) -> bool:
        return (self.who == "Dev") == (self.hours > 4) and (self.role == "stock") == (
            self.who == "Dev"
        )


GOLDEN = Shift(who="Ben", hours=3, role="floor")
PROMPT = "Ana, Dev and Ben work today. Write Ben's shift: 3 hours on the floor."


def _decode(speculative: bool) -> tuple[str, Planner, int]:
    engine = scripted_engine("tiny")
    engine.follow(golden_text(GOLDEN))
    planner = Planner(Writer(compile_spec(Shift)), engine.tokenizer)
    job = DecodeJob(planner, engine.tokenizer.encode(PROMPT), SamplingParams(temperature=0.0))
    config = DecoderConfig(speculative=speculative, overlap=False)
    (out,) = Decoder(engine, config).run([job])
    assert out.error is None
    return out.text, planner, out.stats.guesses_proposed


def test_a_rejected_guess_plans_nothing_past_it() -> None:
    text, planner, guesses = _decode(speculative=True)
    plain_text, plain, _ = _decode(speculative=False)
    assert text == plain_text == golden_text(GOLDEN)
    assert guesses > 0  # the drafts guessed (the prompt names Ana and Dev before Ben)
    # the same segments and oracle questions as decoding one token a forward: none for a
    # guessed person the model did not write
    assert planner.stats.segments == plain.stats.segments
    assert planner.writer.oracle.stats.queries == plain.writer.oracle.stats.queries
