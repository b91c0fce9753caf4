"""Checks that restart in a fresh solver where the warm one gets stuck (`graph.z3check`).

A warm solver that gets stuck cannot be produced on demand (which check does depends on the
process's history), so `Stuck` stands in for one: a real solver that answers nothing. The
fresh solvers the checks restart in are real.
"""

from __future__ import annotations

import time

import pytest
import z3

from factorspec_sdk.errors import OracleError
from factorspec_sdk.graph import compile_spec, z3check
from factorspec_sdk.graph.compiled import Fact
from tests.helpers import Product


class Stuck(z3.Solver):
    """A solver whose every check runs out of its time: the warm solver the module guards."""

    checks = 0

    def check(self, *assumptions: z3.ExprRef) -> z3.CheckSatResult:
        self.checks += 1
        return z3.unknown

    def reason_unknown(self) -> str:
        return "timeout"


def _stuck_with(*formulas: z3.BoolRef) -> Stuck:
    s = Stuck(ctx=formulas[0].ctx)
    s.add(*formulas)
    return s


def test_the_warm_solver_answers_when_it_can() -> None:
    x, y = z3.Ints("x y")
    s = z3.SimpleSolver()
    s.add(x * y == 12, x > 1, y > x)
    out = z3check.check(s)
    assert out.result == z3.sat and out.restarts == 0
    assert out.model is not None
    assert out.model.eval(x * y).as_long() == 12
    assert z3check.check(s, model=False) == z3check.Outcome(z3.sat, None, 0)
    s.add(y < x)
    assert z3check.check(s) == z3check.Outcome(z3.unsat, None, 0)


def test_a_stuck_check_is_answered_by_a_fresh_solver_with_the_same_assertions() -> None:
    x, y = z3.Ints("x y")
    s = _stuck_with(x * y == 12, x > 1)
    s.push()
    s.add(y > x)  # a scope's assertion counts too
    a = z3.Bool("a")
    s.add(z3.Implies(a, x == 2))
    out = z3check.check(s, assumptions=[a])
    assert out.result == z3.sat and out.restarts == 1
    assert out.model is not None
    assert [out.model.eval(v).as_long() for v in (x, y)] == [2, 6]
    assert s.num_scopes() == 1  # the caller's scopes are left as they were
    s.add(y < x)
    out = z3check.check(s)
    assert (out.result, out.model, out.restarts) == (z3.unsat, None, 1)
    assert s.checks == 2


def test_a_solver_known_stuck_is_not_tried_again() -> None:
    x = z3.Int("x")
    s = _stuck_with(x > 3)
    out = z3check.check(s, warm=False)
    assert out.result == z3.sat and out.restarts == 1
    assert s.checks == 0


def test_the_time_limit_bounds_every_attempt() -> None:
    # x^3 + y^3 == z^3 in positive integers: no solution, and none Z3 can prove
    x, y, z = z3.Ints("x y z")
    s = z3.SimpleSolver()
    s.add(x > 0, y > 0, z > 0, x * x * x + y * y * y == z * z * z)
    t0 = time.monotonic()
    out = z3check.check(s, timeout_ms=800, first_budget_ms=100)
    took = time.monotonic() - t0
    assert out.result == z3.unknown and out.model is None
    assert out.restarts >= 1 and out.reason
    assert 0.7 < took < 30  # spent the limit, then stopped (the upper bound only catches a hang)


def test_a_solver_that_cannot_decide_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Stuck] = []

    def fresh(ctx: z3.Context | None = None) -> Stuck:
        made.append(Stuck(ctx=ctx))
        return made[-1]

    monkeypatch.setattr(z3check.z3, "SimpleSolver", fresh)
    out = z3check.check(_stuck_with(z3.Int("x") > 0))  # no time limit: only this stops it
    assert out.result == z3.unknown and out.reason == "timeout"
    assert out.restarts == len(made) == z3check.GIVE_UP_AFTER


def test_an_oracle_whose_solver_gets_stuck_answers_the_same_and_replaces_it() -> None:
    spec = compile_spec(Product)
    plain, stuck = spec.new_oracle(), spec.new_oracle()
    index = spec.component_of("amount")
    s = stuck._solver(index)
    stuck_solver = _stuck_with(*s.solver.assertions())
    s._solver = stuck_solver
    facts: tuple[Fact, ...] = (("quantity", 6),)
    want = plain.feasible_values(facts, "amount", limit=64)
    assert want == [6 * p for p in range(1, 21)]
    assert stuck.feasible_values(facts, "amount", limit=64) == want
    assert stuck.stats.restarts > 0 and plain.stats.restarts == 0
    assert stuck_solver.checks == 1  # once stuck, the rest of the query went fresh at once
    facts = (("quantity", 7), ("price", 3))
    assert stuck.feasible_values(facts, "amount", limit=64) == [21]
    assert s._solver is not stuck_solver  # the next query replaced it
    restarts = stuck.stats.restarts
    assert not stuck.feasible((("quantity", 7), ("amount", 22)))
    assert stuck.stats.restarts == restarts


def test_an_oracle_check_no_solver_decides_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = compile_spec(Product)
    oracle = spec.new_oracle()
    s = oracle._solver(spec.component_of("amount"))
    s._solver = _stuck_with(*s.solver.assertions())
    monkeypatch.setattr(z3check.z3, "SimpleSolver", lambda ctx=None: Stuck(ctx=ctx))
    with pytest.raises(OracleError, match="could not decide a query: timeout"):
        oracle.feasible((("quantity", 7), ("amount", 22)))
    assert oracle.stats.restarts == z3check.GIVE_UP_AFTER
