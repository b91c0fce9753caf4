"""``factorspec bench models``: the user-models suite, decoded on the scripted engine."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factorspec_sdk.bench.models import NAMES, suite
from factorspec_sdk.bench.user_models import golden_text, main, markdown, run, scripted_engine
from factorspec_sdk.cli.main import app

runner = CliRunner()


def test_every_golden_record_keeps_its_models_rules_and_reads_back_from_its_text() -> None:
    cases = suite()
    assert [c.name for c in cases] == list(NAMES)
    for case in cases:
        text = golden_text(case.golden)
        assert case.model.model_validate_json(text, context=case.context) == case.golden, case.name
        assert case.prompt and case.has == NAMES[case.name]


def test_a_record_is_measured_and_its_parts_add_up_to_the_wall() -> None:
    (r,) = run(["ticket"], scripted_engine("tiny"), warm_up=False)
    assert r.name == "ticket" and r.engine == "scripted-golden"
    assert r.valid and r.golden  # the golden engine wrote the golden record
    assert r.tokens > 50 and r.verify_steps >= 1
    assert r.spec_seconds > 0 and r.wall_seconds > 0 and r.cpu_seconds > 0
    assert r.oracle_queries > 0 and r.oracle_seconds > 0  # its relations ask the oracle
    assert r.critical_plan_seconds <= r.wall_seconds
    assert math.isclose(sum(r.parts.values()), r.wall_seconds, rel_tol=1e-9, abs_tol=1e-9)
    assert 0.0 <= r.critical_share <= 1.0
    table = markdown([r])
    assert "| ticket |" in table and "| model | tokens, steps |" in table


def test_the_command_prints_the_tables_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "models.json"
    main(["--models", "ticket", "--vocabulary", "tiny", "--json", str(out)])
    printed = capsys.readouterr().out
    assert "1 models, one record each, engine scripted-golden, greedy" in printed
    assert "| ticket |" in printed and "(not golden)" not in printed
    (data,) = json.loads(out.read_text())
    assert data["name"] == "ticket" and data["golden"]
    assert math.isclose(sum(data["parts"].values()), data["wall_seconds"], abs_tol=1e-9)


def test_an_unknown_model_is_a_usage_error() -> None:
    result = runner.invoke(app, ["bench", "models", "--models", "tickets"])
    assert result.exit_code == 2
    assert "no model 'tickets' in the suite" in result.output


def test_the_warm_up_builds_the_vocabularys_tables_before_the_first_record() -> None:
    from factorspec_sdk.tokens.free import free_tables

    free_tables.cache_clear()
    engine = scripted_engine("tiny")
    (r,) = run(["hotel_stays"], engine, warm_up=True)  # writes no free string itself
    assert r.golden
    assert free_tables.cache_info().currsize == 1  # built once, before the record
    hits = free_tables.cache_info().hits
    free_tables(engine.tokenizer)
    assert free_tables.cache_info().hits == hits + 1
