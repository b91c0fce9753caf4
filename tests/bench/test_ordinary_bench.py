"""``python -m factorspec_sdk.bench.ordinary``: its models, table and arguments (no vLLM here;
the engine's spans on vLLM are tests/engines/test_vllm.py's)."""

from __future__ import annotations

import pytest

from factorspec_sdk.bench.ordinary import MODELS, Run, main, markdown
from factorspec_sdk.relations.decorator import relations_of
from factorspec_sdk.relations.pydantic_layout import build_layout


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
