"""The generation benchmark on the scripted engine: every mode valid and identical, dated too."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from factorspec_sdk.bench.gen_bench import MODES, run
from factorspec_sdk.cli.main import app
from factorspec_sdk.engines.scripted import ScriptedEngine
from tests.helpers import tiny_tokenizer


@pytest.mark.parametrize("dated", [False, True], ids=["days", "dates"])
def test_every_mode_decodes_valid_identical_records(
    dated: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = ScriptedEngine.random(tiny_tokenizer(), seed=3, temperature_scale=2.0)
    results = run(2, 3, seed=4, dated=dated, engine=engine)
    assert set(results) == set(MODES)
    for r in results.values():
        assert r.valid == r.records == 2
    assert results["plain"].verify_steps == results["plain"].tokens
    assert results["certain"].tokens == results["plain"].tokens  # the same records
    assert results["certain"].tokens_per_step > 10
    assert "decoded differently" not in capsys.readouterr().err


def test_the_cli_refuses_an_unknown_itinerary() -> None:
    result = CliRunner().invoke(app, ["bench", "gen", "--itinerary", "weeks"])
    assert result.exit_code == 2
    assert "days, dates or both" in result.output
