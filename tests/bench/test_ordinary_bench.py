"""``python -m factorspec_sdk.bench.ordinary``: its models, table and arguments (no vLLM here;
the engine's spans on vLLM are tests/engines/test_vllm.py's)."""

from __future__ import annotations

from typing import Any

import pytest

from factorspec_sdk.bench.baselines import DecodeRun
from factorspec_sdk.bench.ordinary import MODELS, Run, main, markdown, run
from factorspec_sdk.bench.trip.engines import tiny_scripted_engine
from factorspec_sdk.client import Client
from factorspec_sdk.relations.decorator import relations_of
from factorspec_sdk.relations.pydantic_layout import build_layout
from tests.helpers import GuidedEngine


def test_the_models_are_ordinary_records() -> None:
    """No relations; free text, lists, enums and numbers the writer lays out itself."""
    for model, prompt in MODELS.values():
        assert prompt and build_layout(model) is not None
        assert not relations_of(model).relations


def test_the_table_gives_both_engines_and_their_ratios() -> None:
    run = Run("review", 200, 8, 4.0, True, 100, 2.0, False)
    assert run.ms_per_token == 20.0 and run.baseline_ms_per_token == 20.0
    table = markdown([run])
    assert "| review | 200, 8, 20, 4.00 | 100, 20, 2.00 | 1.00x | 0.50x | True, False |" in table


def test_an_unknown_model_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as info:
        main(["--models", "reviews"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["--repeat", "0"])
    assert info.value.code == 2


def test_repeats_give_median_walls_and_each_repeats_ratio() -> None:
    run = Run("person", 50, 5, 2.0, True, 100, 3.0, True, walls=[2.0, 1.0, 4.0])
    run.baseline_walls = [3.0, 8.0, 2.0]
    assert run.repeat_ratios == pytest.approx([0.75, 4.0, 0.25])  # per token: 50 vs 100
    table = markdown([run])
    assert "per token, each repeat |" in table and "| 0.75x, 4.00x, 0.25x |" in table
    assert "each repeat" not in markdown([Run("person", 50, 5, 2.0, True, 100, 3.0, True)])


class _Counted:
    """A completion engine over `GuidedEngine` that counts its requests, as VLLMEngine does."""

    def __init__(self, guided: GuidedEngine) -> None:
        self.guided = guided
        self.requests = 0
        self.llm = None  # vLLM's LLM, which the baseline (patched out here) runs on
        self.tokenizer = guided.tokenizer
        self.name = "counted"
        self.constraint_style = guided.constraint_style

    def apply_chat_template(self, messages: Any) -> list[int]:
        return self.guided.apply_chat_template(messages)

    def complete(self, requests: Any) -> Any:
        self.requests += len(requests)
        return self.guided.complete(requests)

    def close(self) -> None:
        pass


def test_the_order_turns_each_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    """FactorSpec first in even repeats, vLLM first in odd ones; the warm-up runs once."""
    from factorspec_sdk.bench.trip import completion_baselines

    engine = _Counted(GuidedEngine(tiny_scripted_engine()))  # type: ignore[arg-type]
    sides: list[str] = []
    generate = Client.generate

    def factorspec_side(self: Client, *args: Any, **kwargs: Any) -> Any:
        sides.append("factorspec")
        return generate(self, *args, **kwargs)

    def vllm_side(*args: Any, **kwargs: Any) -> list[DecodeRun]:
        sides.append("vllm")
        return [DecodeRun('{"name": "x"}', [1, 2, 3], 3, wall_seconds=0.5, stopped="eos")]

    monkeypatch.setattr(Client, "generate", factorspec_side)
    monkeypatch.setattr(completion_baselines, "structured_runs", vllm_side)
    (one,) = run(engine, ["person"], repeats=3)  # type: ignore[arg-type]
    warm_up, *timed = [sides[i : i + 2] for i in range(0, len(sides), 2)]
    assert warm_up == ["factorspec", "vllm"]
    assert timed == [["factorspec", "vllm"], ["vllm", "factorspec"], ["factorspec", "vllm"]]
    assert len(one.walls) == len(one.baseline_walls) == 3 and one.baseline_seconds == 0.5
    assert one.requests > 0 and one.valid and one.baseline_tokens == 3
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        run(engine, ["person"], repeats=0)  # type: ignore[arg-type]
