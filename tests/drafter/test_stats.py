"""`GenerationStats`: the parts of a call's wall, and the clock the decoders keep them with."""

from __future__ import annotations

import dataclasses
import time

import pytest

from factorspec_sdk.drafter.loop import DecodeJob, Decoder
from factorspec_sdk.drafter.stats import PARTS, DecoderClock, GenerationStats
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import Planner, PlannerStats
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import TRIP_CONTEXT, Trip, tiny_tokenizer

TOK = tiny_tokenizer()


def check_parts(stats: GenerationStats) -> None:
    """Every part is there, none is negative, and they add up to the wall."""
    parts = stats.parts()
    assert tuple(parts) == PARTS
    assert all(seconds >= 0.0 for seconds in parts.values()), parts
    assert sum(parts.values()) == pytest.approx(stats.wall_seconds, rel=1e-9, abs=1e-12)


def test_every_seconds_field_is_a_part_or_the_wall_or_planning_counted_apart() -> None:
    seconds = [f.name for f in dataclasses.fields(GenerationStats) if f.name.endswith("_seconds")]
    apart = {"wall_seconds", "plan_seconds", "background_plan_seconds", "oracle_query_seconds"}
    assert set(seconds) == set(PARTS) | apart
    assert PARTS[-1] == "other_seconds"


def test_settle_makes_other_what_the_parts_leave_and_add_refuses_unknown_parts() -> None:
    stats = GenerationStats()
    stats.add({"forward_seconds": 1.5, "spec_seconds": 0.25})
    stats.add({"forward_seconds": 0.5})
    stats.settle(3.0)
    assert stats.forward_seconds == 2.0 and stats.other_seconds == 0.75
    check_parts(stats)
    with pytest.raises(ValueError, match="not a part"):
        stats.add({"wall_seconds": 1.0})
    with pytest.raises(ValueError, match="not a part"):
        stats.add({"other_seconds": 1.0})  # settle sets it
    assert "wall 3.00s (forward 2.00s, other 0.75s, spec 0.25s)" in stats.summary()


def test_json_round_trip() -> None:
    stats = GenerationStats(tokens=7, verify_steps=2, forward_seconds=0.5, plan_seconds=0.1)
    stats.settle(1.0)
    again = GenerationStats.from_json({**stats.to_json(), "unknown": 1, "tokens_per_step": 3.5})
    assert again == stats
    assert isinstance(again.tokens, int) and isinstance(again.wall_seconds, float)
    assert GenerationStats.from_json({"tokens": "many", "valid": True}) == GenerationStats()


def test_a_clock_part_leaves_the_planning_it_waited_for_to_the_planner() -> None:
    clock = DecoderClock()
    planner = PlannerStats()
    record = clock.record(GenerationStats(), planner)
    with clock.part(record, "draft_seconds"):
        planner.critical_seconds += 0.25  # planning the part waited for
        planner.critical_grammar_seconds += 0.125  # a grammar compile within it
    clock.close(record)
    stats = record.stats
    assert stats.critical_plan_seconds == 0.125 and stats.grammar_seconds == 0.125
    assert stats.batch_seconds == 0.0  # one record: all the thread's work was its own
    # the part's own time is its measured time less the planning (which took no real time
    # here, so the part may be "negative" by it; `other_seconds` then makes up for it)
    assert stats.draft_seconds + 0.25 == pytest.approx(record.own)


def test_decoder_parts_add_up_to_each_record_wall_in_a_batch() -> None:
    engine = ScriptedEngine.random(TOK, seed=2, temperature_scale=2.0)
    spec = compile_spec(Trip, TRIP_CONTEXT)
    decoder = Decoder(engine)
    jobs = [DecodeJob(Planner(Writer(spec), TOK), [1, 2, 3], SamplingParams()) for _ in range(3)]
    outcomes = decoder.run(jobs)
    for out in outcomes:
        assert out.error is None
        check_parts(out.stats)
        assert out.stats.forward_seconds > 0 and out.stats.batch_seconds > 0
    alone = Decoder(engine).run([DecodeJob(Planner(Writer(spec), TOK), [1, 2], SamplingParams())])
    check_parts(alone[0].stats)
    assert alone[0].stats.batch_seconds == 0.0


def test_continuous_batching_settles_each_record_on_its_own_life() -> None:
    """`Decoder.step` (a server's loop): a record's wall runs from its submission to its end."""
    engine = ScriptedEngine.random(TOK, seed=2, temperature_scale=2.0)
    spec = compile_spec(Trip, TRIP_CONTEXT)
    decoder = Decoder(engine)
    decoder.submit(DecodeJob(Planner(Writer(spec), TOK), [1, 2, 3], SamplingParams()))
    ended = decoder.step()
    decoder.submit(DecodeJob(Planner(Writer(spec), TOK), [4, 5], SamplingParams()))
    while decoder.busy:
        ended += decoder.step()
    decoder.close()
    assert len(ended) == 2
    for _, out in ended:
        check_parts(out.stats)
        assert out.stats.verify_steps > 0


def test_the_budget_check_before_the_first_token_is_critical_planning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under a budget below the bound's ceiling the check walks segments through the oracle
    before the first token: the decoding thread's planning, not the record's set-up."""
    from factorspec_sdk.tokens.budget import CompletionBound

    fits = CompletionBound.fits

    def slow(self: CompletionBound, cursor: object, limit: int) -> bool:
        time.sleep(0.05)
        return fits(self, cursor, limit)  # type: ignore[arg-type]

    monkeypatch.setattr(CompletionBound, "fits", slow)
    engine = ScriptedEngine.random(TOK, seed=0)
    spec = compile_spec(Trip, TRIP_CONTEXT)
    planner = Planner(Writer(spec), TOK)
    budget = planner.bound.ceiling - 1
    [out] = Decoder(engine).run([DecodeJob(planner, [1, 2], SamplingParams(max_tokens=budget))])
    assert out.error is None
    check_parts(out.stats)
    assert out.stats.critical_plan_seconds >= 0.05
    assert out.stats.start_seconds < 0.05
