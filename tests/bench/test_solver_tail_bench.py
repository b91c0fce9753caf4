"""``python -m factorspec_sdk.bench.solver_tail``: the slowest oracle queries, and restarts."""

from __future__ import annotations

import random

import pytest

from examples.invoice import SAMPLE_CONTEXT, Invoice
from factorspec_sdk.bench.solver_tail import main, random_facts, run
from factorspec_sdk.graph import AtLeast, compile_spec


def test_random_facts_stay_within_each_variables_bounds() -> None:
    spec = compile_spec(Invoice, SAMPLE_CONTEXT)
    rng = random.Random(3)
    seen = 0
    for _ in range(50):
        facts = random_facts(spec, rng)
        assert len(facts) <= 6 and len({name for name, _ in facts}) == len(facts)
        for name, value in facts:
            v = spec.variables[name]
            n = value.n if isinstance(value, AtLeast) else value
            assert isinstance(n, int) and v.ge is not None and v.le is not None
            assert v.ge <= n <= v.le
            seen += 1
    assert seen > 50


def test_each_query_is_timed_and_counted() -> None:
    r = run(2, 5, seed=7)
    assert len(r.query_ms) == 10 and all(t > 0 for t in r.query_ms)
    assert r.solver_checks > 0 and r.restarts >= 0


def test_the_command_prints_the_tail(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--oracles", "1", "--queries", "3"])
    out = capsys.readouterr().out
    assert "3 queries of examples.invoice:Invoice (1 oracles x 3)" in out
    assert "| query ms | median | p99 | slowest |" in out and "queries over 1 s:" in out


def test_a_model_that_does_not_load_is_a_clear_exit() -> None:
    with pytest.raises(SystemExit, match="run from the repository root"):
        main(["--model", "no_such_module:Model", "--oracles", "1", "--queries", "1"])
    with pytest.raises(SystemExit, match="not a pydantic model"):
        main(["--model", "examples.invoice:SAMPLE_PROMPT", "--context", "none"])
