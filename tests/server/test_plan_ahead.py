"""Planning a record's first segment before its job is queued (`EngineWorker.plan_ahead`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from factorspec_sdk.drafter.loop import DecoderConfig
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.ir import spec_from_ir, to_ir
from factorspec_sdk.server.metrics import Metrics
from factorspec_sdk.server.worker import EngineWorker
from factorspec_sdk.tokens.plan import Planner
from tests.helpers import TRIP_CONTEXT, Trip, tiny_tokenizer


@pytest.fixture
def worker() -> Iterator[EngineWorker]:
    engine = ScriptedEngine.random(tiny_tokenizer(), seed=2, temperature_scale=2.0)
    w = EngineWorker(engine, DecoderConfig(), Metrics())
    yield w
    w.close()


def test_a_planned_ahead_record_is_admitted_without_planning_again(worker: EngineWorker) -> None:
    spec = spec_from_ir(to_ir(Trip, TRIP_CONTEXT))
    planner = worker.plan_ahead(spec)
    assert planner is not None
    queries = planner.writer.oracle.stats.queries
    assert queries > 0  # the first segment was planned here
    first = planner.start()  # what `Decoder.submit` calls at admission
    assert planner.start() is first
    assert planner.writer.oracle.stats.queries == queries  # answered from the plan cache


def test_a_first_segment_that_fails_is_left_to_the_engine_thread(
    worker: EngineWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(self: Planner) -> object:
        raise RuntimeError("injected fault: planning failed")

    monkeypatch.setattr(Planner, "start", fail)
    assert worker.plan_ahead(spec_from_ir(to_ir(Trip, TRIP_CONTEXT))) is None
