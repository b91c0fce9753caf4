"""A component's tuned first solver (`component_solver.TUNED_PARAMS`), its fallback, and
the flat copies long searches move to (`component_solver.FLAT_AFTER`).

The tuned solver must answer what Z3's default one answers (the oracle stays exact), must
stay in use where it decides every check (or the speed-up is silently gone), and a check it
gets stuck on must move the component into a default solver at the next query, leaving the
running query's scopes where the query pops them. A search that moves to a flat copy must
answer what it answers on the incremental solver, and leave that solver's scopes as they
were.
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest
import z3
from pydantic import BaseModel, Field

from examples.invoice import SAMPLE_CONTEXT, Invoice
from factorspec_sdk import relation
from factorspec_sdk.bench.models import shifts
from factorspec_sdk.bench.solver_tail import random_facts
from factorspec_sdk.graph import compile_spec, component_solver, z3check
from factorspec_sdk.graph.compiled import CompiledSpec, Fact
from factorspec_sdk.graph.component_solver import TUNED_PARAMS
from factorspec_sdk.graph.moves import Moves
from factorspec_sdk.graph.oracle import Oracle
from tests.helpers import Product


class Line(BaseModel):
    quantity: int = Field(ge=1, le=20)
    price: int = Field(ge=1, le=20)
    amount: int = Field(ge=1, le=400)

    @relation
    def amount_is_sum(self) -> bool:
        return self.amount == 6 * self.quantity + self.price


class StuckAt(z3.Solver):
    """A real solver whose ``stuck_at``-th check runs out of its time (the tuned one)."""

    checks = 0
    stuck_at = 0

    def check(self, *assumptions: z3.ExprRef) -> z3.CheckSatResult:
        self.checks += 1
        if self.checks == self.stuck_at:
            return z3.unknown
        return super().check(*assumptions)

    def reason_unknown(self) -> str:
        return "timeout"


def _untuned(spec: CompiledSpec) -> Oracle:
    """An oracle whose components use Z3's default solver from the start."""
    oracle = spec.new_oracle()
    for i in range(len(spec.components)):
        oracle._solver(i).tuned = False
    return oracle


def _queries(spec: CompiledSpec, n: int, seed: int) -> list[tuple[tuple[Fact, ...], str]]:
    rng = random.Random(seed)
    names = sorted(spec.variables)
    return [(tuple(random_facts(spec, rng)), rng.choice(names)) for _ in range(n)]


def test_the_tuned_solver_answers_as_the_default_one_and_stays_in_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert TUNED_PARAMS  # the tuning is on
    # a check that a loaded machine slows past the budget falls back too: only one the
    # tuned solver cannot decide may here
    monkeypatch.setattr(component_solver, "TUNED_BUDGET_MS", 60_000)
    roster = compile_spec(shifts.Roster, shifts.CONTEXT)
    invoice = compile_spec(Invoice, SAMPLE_CONTEXT)
    for spec, n in ((roster, 24), (invoice, 12)):
        tuned, plain = spec.new_oracle(), _untuned(spec)
        for facts, var in _queries(spec, n, seed=5):
            want = plain.feasible_values(facts, var, limit=64)
            assert tuned.feasible_values(facts, var, limit=64) == want, (facts, var)
        assert tuned.stats.solver_checks > 0
    # the roster's checks are the ones the tuning speeds up: none of them fell back
    oracle = roster.new_oracle()
    golden = [
        ("len(shifts)", 3),
        ("shifts[0].employee", shifts.GOLDEN.shifts[0].employee),
        ("shifts[0].role", shifts.GOLDEN.shifts[0].role),
    ]
    for k in range(len(golden) + 1):
        for var in ("shifts[0].start", "shifts[0].end", "shifts[1].start"):
            assert oracle.feasible_values(tuple(golden[:k]), var, limit=64)
    assert oracle.stats.solver_checks > 0 and oracle.stats.restarts == 0
    used = [s for s in oracle._solvers.values() if s._solver is not None]
    assert used and all(s.tuned for s in used)


def test_a_stuck_tuned_check_moves_the_component_to_a_default_solver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(component_solver, "TUNED_STRIKES", 1)  # the last strike
    monkeypatch.setattr(component_solver, "FLAT_AFTER", 10**9)  # every check on the solver
    # the amount moved with the price would find the values without the checks counted here
    monkeypatch.setattr(Moves, "companions", lambda self, var: ())
    spec = compile_spec(Line)
    plain, oracle = _untuned(spec), spec.new_oracle()
    index = spec.component_of("amount")
    s = oracle._solver(index)
    assert s.solver is not None and s.tuned
    stuck = StuckAt(ctx=s.ctx)
    stuck.add(*s.solver.assertions())
    stuck.stuck_at = 6  # inside the enumeration: five values blocked in its own scope
    s._solver = stuck
    facts: tuple[Fact, ...] = (("quantity", 6),)
    want = plain.feasible_values(facts, "amount", limit=64)
    assert want == [36 + p for p in range(1, 21)]
    assert oracle.feasible_values(facts, "amount", limit=64) == want
    # the stuck check restarted, and so did each later check of the query, in a fresh
    # solver with the assertions of the one its scopes are in: no value found twice, so no
    # check more than the default oracle's
    assert stuck.checks == 6 and oracle.stats.restarts == oracle.stats.solver_checks - 5
    assert not s.tuned and s.stale and s._solver is stuck
    assert oracle.stats.solver_checks == plain.stats.solver_checks
    assert stuck.num_scopes() == len(s.pushed) == 1  # the query's scope popped
    # the next query replaces it with a default solver, on which later ones pop and push
    for facts, var in [
        ((("quantity", 7), ("price", 3)), "amount"),
        ((("amount", 50),), "price"),
        ((("quantity", 6),), "price"),
    ]:
        assert oracle.feasible_values(facts, var) == plain.feasible_values(facts, var)
        assert s._solver is not stuck and not s.stale
    restarts = oracle.stats.restarts
    assert not oracle.feasible((("quantity", 7), ("amount", 22)))
    assert oracle.stats.restarts == restarts


def test_a_stuck_tuned_check_gets_a_fresh_tuned_solver_until_the_last_strike() -> None:
    """A tuned check that runs out of its budget is the solver's learned state gone astray:
    the next query gets a fresh tuned solver; only `TUNED_STRIKES` of them move the
    component to Z3's defaults. The answers are the default oracle's throughout."""
    spec = compile_spec(Line)
    plain, oracle = _untuned(spec), spec.new_oracle()
    s = oracle._solver(spec.component_of("amount"))
    queries: list[tuple[tuple[Fact, ...], str]] = [
        ((("quantity", q),), "amount") for q in range(1, 2 + component_solver.TUNED_STRIKES)
    ]
    constraints = s.solver.assertions()  # no fact pushed yet
    for strike, (facts, var) in enumerate(queries, start=1):
        stuck = StuckAt(ctx=s.ctx)
        stuck.add(*constraints)
        stuck.stuck_at = 1
        s._solver = stuck
        s.pushed.clear()  # the copy holds the constraints alone
        assert oracle.feasible_values(facts, var) == plain.feasible_values(facts, var)
        assert s.strikes == min(strike, component_solver.TUNED_STRIKES)
        assert s.tuned is (strike < component_solver.TUNED_STRIKES) and s.stale
        if not s.tuned:
            break
        oracle.feasible_values((("quantity", 10 + strike),), "price")  # a new solver
        assert s._solver is not stuck and s.tuned and not s.stale
    assert not s.tuned and s.strikes == component_solver.TUNED_STRIKES


def test_a_check_stuck_inside_a_backbone_search_leaves_no_scope_of_it_behind() -> None:
    """The backbone search (`Oracle.determined`) pushes its own scope on the solver it was
    given and pops it there; a check of it that restarts must not move that scope into
    another solver, where no one pops it (every later answer would be under it)."""
    spec = compile_spec(Line)
    plain, oracle = _untuned(spec), spec.new_oracle()
    s = oracle._solver(spec.component_of("amount"))
    model = s.witness(())
    assert model is not None and s.solver is not None and s.tuned  # the spec's own model
    q = model.eval(s.term("quantity")).as_long()
    p = model.eval(s.term("price")).as_long()
    stuck = StuckAt(ctx=s.ctx)
    stuck.add(*s.solver.assertions())
    stuck.stuck_at = 1  # the search's first check: "a value differs from the model's"
    s._solver = stuck
    assert oracle.determined(()) == plain.determined(()) == {}
    assert stuck.checks >= 1 and oracle.stats.restarts >= 1
    # the model's own completion is still feasible (asked of the solver: no witness)
    s.witnesses.clear()
    facts: tuple[Fact, ...] = (("quantity", q),)
    assert p in plain.feasible_values(facts, "price")
    assert oracle.feasible_values(facts, "price") == plain.feasible_values(facts, "price")
    assert s.solver.num_scopes() == len(s.pushed)


def test_a_component_with_products_of_variables_starts_untuned() -> None:
    spec = compile_spec(Product)
    oracle = spec.new_oracle()
    s = oracle._solver(spec.component_of("amount"))
    assert oracle.feasible_values((("quantity", 6),), "amount") == [6 * p for p in range(1, 21)]
    assert not s.tuned and spec.component(s.index).traits.tunable is False
    linear = compile_spec(Line)
    t = linear.new_oracle()._solver(linear.component_of("amount"))
    assert t.solver is not None and t.tuned and linear.component(t.index).traits.tunable


class Meeting(BaseModel):
    start: dt.datetime
    end: dt.datetime

    @relation
    def on_the_hour(self) -> bool:
        return self.start.minute == 0 and self.end > self.start


class Shift(BaseModel):
    start: dt.time
    end: dt.time

    @relation
    def on_the_hour(self) -> bool:
        return self.start.minute == 0 and self.end > self.start


def test_a_component_with_numbers_past_32_bits_starts_untuned() -> None:
    """A datetime's seconds since year 1 are past `TUNED_NUMBERS`, a clock time's are not;
    both solvers answer alike."""
    meeting, shift = compile_spec(Meeting), compile_spec(Shift)
    for spec, tuned in ((meeting, False), (shift, True)):
        oracle = spec.new_oracle()
        s = oracle._solver(spec.component_of("start"))
        assert s.solver is not None and s.tuned is tuned
        assert spec.component(s.index).traits.tunable is tuned
    x = z3.Int("x")
    below = component_solver.TUNED_NUMBERS - 1
    narrow, wide = [-below, below], [0, below + 1, None]
    # `Traits.tunable`: linear, with small numbers
    small, linear = component_solver.small_numbers, component_solver.linear
    assert small(narrow) and linear([x <= below, x >= -below, x % 300 == 0])
    assert not small(wide) and linear([x <= below + 1, x % 300 == 0])
    assert not linear([x * x == 4])
    assert small([]) and linear([])


class Fee(BaseModel):
    """A fee in cents, rounded from a base price at a context rate (a division by 10,000)."""

    base_cents: int = Field(ge=1, le=100_000)
    fee_cents: int = Field(ge=1, le=100_000)

    @relation
    def at_the_rate(self) -> bool:
        return self.fee_cents == round(self.base_cents * Decimal("0.1525"))


def test_a_component_that_rounds_to_a_unit_starts_untuned() -> None:
    """A division by `TUNED_DIVISOR` or more (rounding an amount) leaves the component with
    Z3's defaults, and its checks restart fresh after `NONLINEAR_BUDGET_MS` (its tail is a
    nonlinear one's); a clock's marks (a division by 5) do not; both answer alike."""
    fee, marks = compile_spec(Fee), compile_spec(Marks)
    for spec, var, tuned in ((fee, "fee_cents", False), (marks, "start", True)):
        oracle = spec.new_oracle()
        s = oracle._solver(spec.component_of(var))
        assert s.solver is not None and s.tuned is tuned
        assert spec.component(s.index).traits.tunable is tuned
        assert s.rounds is (not tuned) and spec.component(s.index).traits.rounds is (not tuned)
        budget = component_solver.TUNED_BUDGET_MS if tuned else component_solver.NONLINEAR_BUDGET_MS
        assert s.budget_ms == budget
    facts: tuple[Fact, ...] = (("base_cents", 2000),)
    assert fee.new_oracle().feasible_values(facts, "fee_cents") == [305]
    assert _untuned(fee).feasible_values(facts, "fee_cents") == [305]


class Marks(BaseModel):
    """``start`` on a five-minute mark after ``arrive``, ``end`` at least 45 minutes later."""

    arrive: int = Field(ge=0, le=600)
    start: int = Field(ge=0, le=600)
    end: int = Field(ge=0, le=600)

    @relation
    def after_arriving(self) -> bool:
        return self.arrive <= self.start and self.start % 5 == 0 and self.end >= self.start + 45


def _answers(oracle: Oracle, queries: list[tuple[Fact, ...]]) -> list[object]:
    out: list[object] = []
    for facts in queries:
        for var in ("arrive", "start", "end"):
            if any(f[0] == var for f in facts):
                continue
            out.append(oracle.feasible_values(facts, var))
            out.append(oracle.feasible_values(facts, var, limit=64, span=64))
            out.append(oracle.next_digits(facts, var, ""))
            out.append(oracle.next_digits(facts, var, "1"))
            out.append(oracle.feasible_ranges(facts, var, [(0, 99), (100, 299), (300, 600)]))
    return out


@pytest.mark.parametrize("flat_after", [0, 1, 3])
def test_a_long_search_goes_on_in_a_flat_copy_with_the_same_answers(
    monkeypatch: pytest.MonkeyPatch, flat_after: int
) -> None:
    """Enumerations and searches of classes past `FLAT_AFTER` checks run on a flat copy of
    the solver: the same answers as the incremental solver alone (which the answers of a
    brute force confirm on a few), and each query leaves the facts pushed as they were."""
    spec = compile_spec(Marks)
    queries: list[tuple[Fact, ...]] = [
        (),
        (("arrive", 100),),
        (("arrive", 100), ("start", 150)),
        (("arrive", 520),),
        (("end", 300),),
        (("arrive", 577),),  # no start on a mark leaves room for 45 minutes
    ]
    monkeypatch.setattr(component_solver, "FLAT_AFTER", 10**9)
    incremental = _answers(spec.new_oracle(), queries)
    monkeypatch.setattr(component_solver, "FLAT_AFTER", flat_after)
    copies: list[int] = []
    real = component_solver.ComponentSolver.flat_copy

    def counted(self: component_solver.ComponentSolver) -> z3.Solver:
        copies.append(self.solver.num_scopes())
        return real(self)

    monkeypatch.setattr(component_solver.ComponentSolver, "flat_copy", counted)
    oracle = spec.new_oracle()
    assert _answers(oracle, queries) == incremental
    assert copies, "no search moved to a flat copy"
    s = oracle._solver(spec.component_of("start"))
    assert s.solver.num_scopes() == len(s.pushed)
    assert incremental[0] is None  # 601 arrivals
    after_100 = [v for v in range(100, 556) if v % 5 == 0]
    assert oracle.feasible_values((("arrive", 100),), "start", limit=200) == after_100
    assert oracle.feasible_values((("arrive", 577),), "start") == []
    copies.clear()  # products of variables: every check on the incremental solver
    product = compile_spec(Product).new_oracle()
    assert product.feasible_values((("quantity", 6),), "amount") == [6 * p for p in range(1, 21)]
    assert not copies and not product._solver(0).linear


def test_each_check_gets_the_incremental_solvers_share_of_its_component_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A nonlinear component's solver gets `NONLINEAR_BUDGET_MS` of a check before it
    restarts fresh; a tuned one `TUNED_BUDGET_MS`; a linear one with Z3's defaults
    `z3check.FIRST_BUDGET_MS`."""
    budgets: list[int] = []
    real = z3check.check

    def spy(solver: z3.Solver, *args: object, **kwargs: object) -> z3check.Outcome:
        if "first_budget_ms" in kwargs:  # an oracle's check (the spec's own take the default)
            budgets.append(int(kwargs["first_budget_ms"]))  # type: ignore[call-overload]
        return real(solver, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(z3check, "check", spy)
    want: dict[type[BaseModel], int] = {
        Product: component_solver.NONLINEAR_BUDGET_MS,  # a product of two fields
        Line: component_solver.TUNED_BUDGET_MS,
    }
    for model, budget in want.items():
        budgets.clear()
        oracle = compile_spec(model).new_oracle()
        assert oracle.feasible_values((), "amount", limit=500)
        assert budgets and set(budgets) == {budget}, model
    budgets.clear()
    oracle = _untuned(compile_spec(Line))  # linear, with Z3's defaults
    assert oracle.feasible_values((), "quantity", limit=500)
    assert budgets and set(budgets) == {z3check.FIRST_BUDGET_MS}
    assert component_solver.NONLINEAR_BUDGET_MS < z3check.FIRST_BUDGET_MS
