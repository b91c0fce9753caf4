"""``python -m factorspec_sdk.bench.planning``: FactorSpec's CPU per trip record (scripted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factorspec_sdk.bench.planning import main, run, summary


def test_each_record_is_measured_and_valid() -> None:
    costs = run(2, (3, 4), seed=5) + run(1, (3, 3), seed=9, unique=False)
    assert [c.cities for c in costs] == [3, 4, 3]
    for c in costs:
        assert c.spec_cpu_ms > 0 and c.decode_cpu_ms > 0 and c.wall_ms > 0
        assert c.cpu_ms == c.spec_cpu_ms + c.decode_cpu_ms
        assert c.tokens > 50
        # every query the writer asks; a record with one valid plan needs no check (the
        # spec's own check found what the relations determine), one with several does
        assert c.oracle_queries > 0 and c.solver_checks <= 3 * c.oracle_queries
    assert [c.solver_checks > 0 for c in costs] == [False, False, True]
    s = summary(costs)
    assert s["records"] == 3
    assert s["tokens_median"] == sorted(c.tokens for c in costs)[1]


def test_the_command_prints_a_table_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "planning.json"
    main(["--n", "2", "--cities", "3", "--gc", "default", "--json", str(out)])
    printed = capsys.readouterr().out
    assert "2 trip records, 3-3 cities (one valid plan)" in printed and "| CPU ms, all |" in printed
    data = json.loads(out.read_text())
    assert list(data) == ["default"]
    assert data["default"]["summary"]["records"] == 2 and len(data["default"]["records"]) == 2


def test_bad_cities_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--cities", "5-3"])
    assert "cities must be" in capsys.readouterr().err
