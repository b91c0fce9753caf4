"""The incremental solver of one component of a spec, in an oracle's private context.

An `Oracle` holds one `ComponentSolver` per connected component it has been asked about:
the component's constraints copied into the oracle's context at first use, the facts pushed
one scope each (`ComponentSolver.sync` pops back to the longest common prefix), the models
found so far kept as witnesses (`ComponentSolver.witness`), and the backbones learned (what
earlier facts determine, `ComponentSolver.forced`). `fact_value` and `fact_literal` turn a
fact into the value or the Z3 literal it gives its variable's term.

A linear component whose numbers fit in 32 bits and that divides by no constant of
`TUNED_DIVISOR` or more (`Traits.tunable`) starts with `TUNED_PARAMS` (faster checks); a
check it does not decide within `TUNED_BUDGET_MS` restarts fresh (`z3check`), the rest of the
running query checks fresh too (it keeps the solver whose scopes it pops), and the next query
gets a fresh tuned solver, or, after `TUNED_STRIKES` such checks, one with Z3's defaults,
which later checks use warm. A nonlinear component's check restarts fresh after
`NONLINEAR_BUDGET_MS` (Z3's nonlinear arithmetic has a heavy tail that a fresh solver
mostly avoids).

A query that asks many checks under the same facts (an enumeration of values, a search of
classes) goes through a `Search`: its first `FLAT_AFTER` checks run on the incremental
solver; on a `linear` component the rest run on a flat copy that holds the component's
constraints, the facts and the query's own additions at its base level, where Z3
simplifies them together.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, cast

import z3

from factorspec_sdk.errors import OracleError
from factorspec_sdk.graph import z3check
from factorspec_sdk.graph.compiled import AtLeast, AtMost, Fact, Value
from factorspec_sdk.graph.moves import Misses, Moves
from factorspec_sdk.graph.stopping import stop_point
from factorspec_sdk.graph.z3raw import (
    Node,
    TermBuilder,
    assert_all,
    copy_assertions,
    largest_divisor,
    value_in,
)
from factorspec_sdk.relations.compiler import OTHER_CODE, OTHER_TEXT
from factorspec_sdk.relations.kinds import BOOL_KINDS, LENGTH_KINDS, VAR_SORTS, Sort

if TYPE_CHECKING:
    from factorspec_sdk.graph.compiled import CompiledSpec
    from factorspec_sdk.graph.oracle import Oracle

__all__ = [
    "COMPANION_MISSES",
    "FLAT_AFTER",
    "MOVES_KEPT",
    "NONLINEAR_BUDGET_MS",
    "PROMOTED",
    "TUNED_BUDGET_MS",
    "TUNED_DIVISOR",
    "TUNED_NUMBERS",
    "TUNED_PARAMS",
    "TUNED_STRIKES",
    "WITNESSES",
    "ComponentSolver",
    "Search",
    "fact_literal",
    "fact_value",
    "linear",
    "small_numbers",
]


WITNESSES = 16
"""Models kept per component solver as witnesses for later queries (the most recent)."""

MOVES_KEPT = 32
"""Moves kept per component solver (`ComponentSolver.keep_move`, the most recent): a later
query whose facts one satisfies gets it as a witness."""

COMPANION_MISSES = 8
"""Moves of a variable that its companions did not save before `ComponentSolver.moved`
stops trying them for it (an invoice line's price and amount, which an equality ties: each
try is an evaluation that cannot hold; measured on the invoice of the user-models suite,
scripted, trying them always cost about 15% more oracle time)."""

PROMOTED = 2
"""Kept moves made witnesses at most per query (`ComponentSolver._promote`)."""

TUNED_PARAMS: dict[str, int] = {"arith.solver": 2}
"""Parameters of a component's first solver (`ComponentSolver.tuned`): Z3's older simplex
arithmetic solver, several times faster per check on the linear integer constraints of
clock times (a roster's quarter hours and shift lengths), and slower on products of
variables (an invoice line's ``quantity * unit_price``) and on numbers past `TUNED_NUMBERS`
(a meeting plan's datetimes, seconds since year 1: 4-10x slower per check there, 100x on
some): a component that is not `Traits.tunable` starts with Z3's defaults.
Where `TUNED_STRIKES` of its checks run past `TUNED_BUDGET_MS`, the component falls back
to Z3's defaults for good. Either way each answer is the solver's own, sat with a
model or unsat."""

TUNED_NUMBERS = 2**31
"""The magnitude every bound of a component's variables stays below for its solver to start
tuned (`small_numbers`). The older simplex computes with machine integers while its numbers fit
and with big numbers past them: measured here, enumerating 30 five-minute marks of a
datetime split into date, hour, minute and second took 9-11 ms with values near 2**31 and
150-160 ms near 2**33 and 6e10 (Z3's default solver: 13-23 ms throughout); every bound of a
datetime in seconds since year 1 is past it, every bound of a date, a clock time or an
amount in cents under 10 million is below it."""

TUNED_DIVISOR = 100
"""The constant no ``div`` or ``mod`` of a component may divide by for its solver to start
tuned (`z3raw.largest_divisor`). The older simplex is fast on a clock's marks (a minute
divided by 5 or 15, a weekday as a day modulo 7) and slow on rounding to a unit: measured
here on the expense report of the user-models suite (each amount in euros ``round(amount *
rate, 2)``, a division of a sum of products by 10,000 and a parity), enumerating the
list's 8 lengths took 2.8-3 s or did not finish in 3 s, with three of four seeds, against
36-216 ms with Z3's defaults; with two-decimal rates (dividing by 100) 216-554 ms and one
unfinished against 22-46 ms, and a first expense's amount in euros 98-681 ms against 16-28.
The roster's and the stays' enumerations (divisors 15 and 7) took the same time or less
tuned."""

TUNED_STRIKES = 3
"""Tuned checks of a component that may run past `TUNED_BUDGET_MS` before its solvers take
Z3's defaults for good. One is the incremental solver's learned state gone astray, which a
fresh tuned solver leaves behind: measured on the roster of the user-models suite (scripted
engine, six runs), a run that met one and fell back at once spent 2.2-2.7x the oracle time
of one that did not (the default solver is that much slower on clock times)."""

TUNED_BUDGET_MS = 100
"""The tuned solver's share of a check before it restarts fresh (`z3check.check`'s
``first_budget_ms``): a healthy check of it takes a few ms, and one that gets stuck costs its
component this much once, not `z3check.FIRST_BUDGET_MS`."""

NONLINEAR_BUDGET_MS = 50
"""The incremental solver's share of a check on a nonlinear component (products of
variables: an invoice line's ``quantity * unit_price``) before the check restarts fresh.

Z3's nonlinear arithmetic has a heavy tail: on the invoice of the user-models suite (embedded
engine, two runs each) most checks took 3-5 ms and the slowest 230-510 ms, which the
decoding thread waited for whenever the worker was in one; a fresh solver with another seed
answered them, so with this budget the slowest took 50-110 ms (restarts included) and the
invoice's critical planning fell from 1.0-1.4 s to 0.4-0.8 s.

A linear component that rounds to a unit (divides by `TUNED_DIVISOR` or more: an expense's
amount in euros, ``round(amount * rate, 2)``) has the same tail: on the expense report of
the suite (scripted engine, four runs each) a check took up to 500 ms before its restart,
and the oracle's time per record was 1.7-2.3 s with `z3check.FIRST_BUDGET_MS`, 1.3-1.4 s
with 100 ms and 1.0-1.3 s with this budget. Other linear components keep
`z3check.FIRST_BUDGET_MS` (or `TUNED_BUDGET_MS`): their slow checks are rarer, and a restart
loses what the incremental solver learned."""

FLAT_AFTER = 4
"""Checks of one `Search` on the incremental solver before the rest go to a flat copy.

Z3 preprocesses what a solver holds at its base level (values propagated, equalities
solved, the ``If`` chains of a nested context lookup folded once a fact names the key) and
much less of what is pushed in a scope, where the incremental solver holds the facts.
Measured on the meeting plan of the user-models suite (datetimes, travel times looked up
by place), replaying its enumerations of start and end times (19-37 values each): a flat
copy took 2.2x less time in all than the incremental solver (1.0 s against 2.3 s), up to
3.5x on one enumeration; copying takes about 1 ms (`z3raw.copy_assertions`). On the
suite's linear components the oracle's time fell by 10-50% (the roster, the meeting plan);
on the invoice's products of variables a flat check took as long as an incremental one
(4.4 ms against 3.6), so only `linear` components make copies. A search that ends within
this many checks (most do) pays no copy."""


class ComponentSolver:
    """The incremental solver of one component, in the oracle's private context.

    Args:
        oracle: the oracle it serves (its spec, private context and counters are read once).
        index: the component's index in the spec.
    """

    def __init__(self, oracle: Oracle, index: int) -> None:
        spec = oracle.spec
        comp = spec.component(index)
        self.ctx = oracle.ctx
        self.index = index
        self._solver: z3.Solver | None = None
        self.stale = False
        """A check restarted away from the solver: replace it at the next `sync`."""
        self.tuned = True
        """The solver runs with `TUNED_PARAMS` (where the component is `Traits.tunable`: settled
        when the solver is built). A check it does not decide within `TUNED_BUDGET_MS`
        counts a strike: the rest of the running query checks fresh (`stale`), and the
        next `sync` builds a fresh tuned solver; the `TUNED_STRIKES`-th turns this off for
        good, and the next `sync` builds a solver with Z3's defaults, which the later checks
        use warm."""
        self.strikes = 0
        """Checks of a tuned solver that ran past `TUNED_BUDGET_MS`."""
        self.linear = False
        """The component is linear (`Traits.linear`, settled when the solver is built):
        its long searches go on in flat copies (`Search`)."""
        self.rounds = False
        """The component divides by a large constant (`Traits.rounds`, settled when the
        solver is built): its checks restart after `NONLINEAR_BUDGET_MS`."""
        with spec.context_lock:  # translate reads the spec's context
            known = [] if comp.witness is None else [comp.witness, *comp.models]
            first = [m.translate(self.ctx) for m in known]
        self.pushed: list[Fact] = []
        self.terms: dict[str, z3.ExprRef] = {}
        self.existence: dict[str, z3.BoolRef] = {}
        # the spec and the counters, not the oracle: no reference cycle, so an oracle's
        # private Z3 context (~16 MB) is freed as soon as its request ends, not at the next
        # cyclic garbage collection
        self.spec = spec
        self.stats = oracle.stats
        self.variables = comp.variables
        self.witnesses: list[tuple[z3.ModelRef, tuple[Fact, ...]]] = []
        """Models of the component found by earlier checks, each with facts it satisfies."""
        for model in reversed(first):  # the spec's own check found them: no check for them
            self.witnesses.append((model, ()))
        self.backbones: list[tuple[tuple[Fact, ...], dict[str, Value]]] = []
        """Facts, each with the variables they determine (`Oracle.determined`'s values)."""
        self.backbone_at = -1
        """How many facts the last backbone was computed under (-1: none yet)."""
        self._moves: Moves | None = None
        self.companion_misses = Misses(COMPANION_MISSES)
        """Moves of a variable its companions did not save: after `COMPANION_MISSES`
        they are not tried for it again (`moved`)."""
        self.moves_kept: list[tuple[z3.ModelRef, dict[str, int], tuple[Fact, ...]]] = []
        """Models an enumeration moved (`moved`): each with the changes and the facts it
        satisfies, a witness once a query needs it (`_promote`)."""
        if comp.determined is not None:  # the spec's check found what no facts determine
            self.backbones.append(((), {v: self.value(v, x) for v, x in comp.determined.items()}))
        if comp.searched:  # found, or its rounds did not settle it: no search again
            self.backbone_at = 0

    @property
    def solver(self) -> z3.Solver:
        """The component's solver, its constraints copied in at first use.

        A record the spec's check found determined is answered from its witness and
        backbone, and never needs one.
        """
        if self._solver is None:
            spec = self.spec
            with spec.context_lock:  # translate reads the spec's context
                comp = spec.component(self.index)
                traits = comp.traits
                if traits.linear is None:
                    traits.linear = linear(comp.constraints)
                if traits.rounds is None:
                    traits.rounds = largest_divisor(comp.constraints) >= TUNED_DIVISOR
                if traits.tunable is None:
                    records = [spec.record(v) for v in comp.variables]
                    bounds = [b for r in records for b in (r.ge, r.le)]
                    traits.tunable = traits.linear and small_numbers(bounds) and not traits.rounds
                self.linear = traits.linear
                self.rounds = traits.rounds
                self.tuned = self.tuned and traits.tunable
                solver = self._new_solver()
                assert_all(solver, comp.constraints)
            self._solver = solver
        return self._solver

    def exists(self, var: str) -> z3.BoolRef:
        """Whether ``var``'s item exists, in this solver's context."""
        ex = self.existence.get(var)
        if ex is None:
            cond = self.spec.record(var).exists
            if isinstance(cond, bool):
                ex = z3.BoolVal(cond, self.ctx)
            else:
                with self.spec.context_lock:
                    ex = cond.translate(self.ctx)
            self.existence[var] = ex
        return ex

    def forced(self, facts: tuple[Fact, ...], var: str) -> Value | None:
        """``var``'s value when some earlier facts that ``facts`` extend determine it.

        Every completion of ``facts`` is one of those facts, so ``var`` has that value in it.
        """
        for known, values in reversed(self.backbones):
            if var in values and facts[: len(known)] == known:
                return values[var]
        return None

    def decided(self, facts: tuple[Fact, ...]) -> bool | None:
        """Whether ``facts`` are feasible, where a backbone tells it without a check.

        A backbone learned under earlier facts that ``facts`` extend gives the values its
        variables have in every completion of them (and those facts are feasible: it was
        learned from a model). A later fact of an int or a bool variable, or a bound of a
        length, is then true in every completion or in none. So ``facts`` are infeasible if
        one contradicts such a value, and feasible if each later fact is told and holds.
        None: no backbone tells it (a fact of a variable none determines, or of a text).
        """
        for known, values in reversed(self.backbones):
            if facts[: len(known)] != known:
                continue
            told = True
            for fact in facts[len(known) :]:
                value = values.get(fact[0])
                if value is None or isinstance(value, str):  # a text's code: a check
                    told = False
                elif not self._meets(value, fact):
                    return False
            if told:
                return True
        return None

    def term(self, var: str) -> z3.ExprRef:
        """``var``'s term, copied into this solver's context at first use."""
        t = self.terms.get(var)
        if t is None:
            with self.spec.context_lock:
                t = self.spec.record(var).term.translate(self.ctx)
            self.terms[var] = t
        return t

    def sync(self, facts: Sequence[Fact]) -> None:
        """Make the solver's scopes hold ``facts``: pop to their common prefix, push the rest.

        A solver that a check had to restart (`z3check`) is dropped first: its learned
        state is what got it stuck, so a fresh one takes its place, its facts pushed again.
        """
        if self.stale:
            self.stale = False
            self._solver = None
            self.pushed.clear()
        pushed = self.pushed
        k = 0
        n = min(len(pushed), len(facts))
        while k < n and pushed[k] == facts[k]:
            k += 1
        if k < len(pushed):
            self.solver.pop(len(pushed) - k)
            del pushed[k:]
        for fact in facts[k:]:
            self.solver.push()
            self.solver.add(self.literal(fact))
            pushed.append(fact)

    def literal(self, fact: Fact) -> z3.BoolRef:
        """The Z3 literal of ``fact`` in this solver's context (`fact_literal`)."""
        return fact_literal(self.spec, self.term(fact[0]), fact, self.ctx)

    def witness(self, facts: tuple[Fact, ...]) -> z3.ModelRef | None:
        """A model found earlier that satisfies ``facts`` too (so they are feasible), or None.

        A model of the component's constraints that agrees with every fact is a completion
        of the assignment: exact, like a check. Each kept model remembers facts it satisfies;
        only the facts past their common prefix are evaluated.
        """
        for i in range(len(self.witnesses) - 1, -1, -1):
            if self._agrees(i, facts):
                return self.witnesses[i][0]
        promoted = self._promote(facts) if self.moves_kept else []
        return promoted[0] if promoted else None

    def witnesses_for(self, facts: tuple[Fact, ...]) -> list[z3.ModelRef]:
        """Every model found earlier that satisfies ``facts`` too, the most recent first.

        Kept moves that satisfy them become witnesses (`_promote`) and come first.
        """
        n = len(self.witnesses)
        found = [self.witnesses[i][0] for i in range(n - 1, -1, -1) if self._agrees(i, facts)]
        promoted = self._promote(facts) if self.moves_kept else []
        return [*promoted, *found]

    def _agrees(self, i: int, facts: tuple[Fact, ...]) -> bool:
        model, agreed = self.witnesses[i]
        k = 0
        n = min(len(agreed), len(facts))
        while k < n and agreed[k] == facts[k]:
            k += 1
        if all(self._holds_in(model, f) for f in facts[k:]):
            if len(facts) > len(agreed):
                self.witnesses[i] = (model, facts)
            return True
        return False

    def _holds_in(self, model: z3.ModelRef, fact: Fact) -> bool:
        """Whether ``model`` satisfies ``fact`` (`fact_literal`'s literal, by its value)."""
        var = fact[0]
        boolean = self.spec.record(var).kind in BOOL_KINDS
        x = value_in(model, self.term(var), boolean=boolean)
        return x is not None and self._meets(x, fact)  # None, not a value: left to a check

    def _meets(self, x: int | bool, fact: Fact) -> bool:
        """Whether ``fact`` holds where its variable's term has the value ``x``."""
        given = fact[1]
        if isinstance(given, AtMost):
            return x <= given.n
        if isinstance(given, AtLeast):
            return x >= given.n
        value = fact_value(self.spec, fact)
        return value is not None and x == value

    def moved(
        self, model: z3.ModelRef, facts: tuple[Fact, ...], var: str, value: int
    ) -> dict[str, int] | None:
        """The changes that move ``model`` (which satisfies ``facts``) to ``var == value``.

        What ``var`` determines moves with it (`factorspec_sdk.graph.moves`: a datetime's
        parts, a variable an equality defines from it); every other variable keeps its
        value in ``model``. Where that move does not hold, each of ``var``'s
        `Moves.companions` not in ``facts`` is tried moved by as much too (a shift's end
        with its start, so that a length a relation bounds is kept). Changes returned
        prove ``facts`` plus ``var == value`` feasible: the moved model satisfies the
        component's constraints (evaluated) and each fact of a variable that moved. None
        says only that this model does not move there (a check may still find another
        that does).
        """
        if self._moves is None:
            self._moves = Moves(self.spec, self.index, self.ctx, self.term)
        moves = self._moves
        changes = self._proved(model, facts, moves.changes(model, var, value))
        if changes is not None:
            return changes
        # an interval's other end moved by as much: a length a relation bounds is kept
        if self.companion_misses.spent(var):
            return None
        assigned = {f[0] for f in facts}
        others = [c for c in moves.companions(var) if c not in assigned]
        if not others:
            return None
        delta = value - cast(z3.IntNumRef, model.eval(self.term(var), True)).as_long()
        for other in others:
            x = model.eval(self.term(other), model_completion=False)
            if not z3.is_int_value(x):
                continue  # not in the model: nothing ties it to the moved value
            moved = cast(z3.IntNumRef, x).as_long() + delta
            changes = self._proved(model, facts, moves.changes(model, var, value, [(other, moved)]))
            if changes is not None:
                self.companion_misses.record(var, True)
                return changes
        self.companion_misses.record(var, False)
        return None

    def _proved(
        self, model: z3.ModelRef, facts: tuple[Fact, ...], changes: dict[str, int] | None
    ) -> dict[str, int] | None:
        """``changes`` where the model moved by them satisfies ``facts`` and the component."""
        if changes is None:
            return None
        for fact in facts:
            x = changes.get(fact[0])
            if x is not None and not self._meets(x, fact):
                return None
        return changes if self._moves is not None and self._moves.holds(model, changes) else None

    def keep_move(
        self, model: z3.ModelRef, changes: dict[str, int], facts: tuple[Fact, ...]
    ) -> None:
        """Keep a move `moved` proved, as a witness to make when a later query needs one."""
        self.moves_kept.append((model, changes, facts))
        if len(self.moves_kept) > MOVES_KEPT:
            del self.moves_kept[0]

    def _promote(self, facts: tuple[Fact, ...]) -> list[z3.ModelRef]:
        """Kept moves that satisfy ``facts``, made models and witnesses (the newest first).

        Only a move whose facts ``facts`` extend (the query picked something past them: a
        moved value), checked by value on the facts past them; at most `PROMOTED` a call,
        so that a query under fewer facts does not turn every move into a model (the model
        it moved from serves those). One that agrees becomes a copy of its model with the
        changes applied.
        """
        out: list[z3.ModelRef] = []
        kept = self.moves_kept
        for i in range(len(kept) - 1, -1, -1):
            model, changes, agreed = kept[i]
            if len(out) >= PROMOTED:
                break
            if len(facts) <= len(agreed) or facts[: len(agreed)] != agreed:
                continue
            if all(self._holds_moved(model, changes, f) for f in facts[len(agreed) :]):
                copy = model.translate(self.ctx)
                for name, x in changes.items():
                    copy.update_value(self.term(name).decl(), z3.IntVal(x, self.ctx))
                del kept[i]
                self.remember(copy, facts)
                out.append(copy)
        return out

    def _holds_moved(self, model: z3.ModelRef, changes: dict[str, int], fact: Fact) -> bool:
        x = changes.get(fact[0])
        return self._meets(x, fact) if x is not None else self._holds_in(model, fact)

    def remember(self, model: z3.ModelRef, facts: tuple[Fact, ...]) -> None:
        """Keep ``model`` (which satisfies ``facts``) as a witness for later queries."""
        self.witnesses.append((model, facts))
        if len(self.witnesses) > WITNESSES:
            del self.witnesses[0]

    def check(self, flat: z3.Solver | None = None) -> z3.ModelRef | None:
        """A model of what the solver holds, or None where it is unsatisfiable.

        ``flat``: check this copy of it instead (`flat_copy`); a check of it that restarts
        counts in the stats but is no strike against the incremental solver.

        Raises:
            OracleError: undecided within the spec's ``solver_timeout_ms``.
            QueriesStopped: the thread's planning was stopped (`factorspec_sdk.graph.stopping`).
        """
        stop_point()  # a worker thread's planning that is no longer needed stops here
        self.stats.solver_checks += 1
        solver = self.solver  # built first: it settles `tuned`
        budget = self.budget_ms
        if flat is not None:
            out = z3check.check(flat, self.spec.solver_timeout_ms, first_budget_ms=budget)
            self.stats.restarts += out.restarts
        else:
            warm = not self.stale
            out = z3check.check(
                solver, self.spec.solver_timeout_ms, warm=warm, first_budget_ms=budget
            )
            if out.restarts:
                # the query goes on with this solver and its scopes (its caller may hold the
                # solver: `backbone.determined_nodes` pushes and pops on the one it was
                # given), each later check of it in a fresh one; the next `sync` replaces
                # it, tuned again until the tuned ones got stuck `TUNED_STRIKES` times, then
                # with Z3's defaults
                self.stats.restarts += out.restarts
                if warm and self.tuned:
                    self.strikes += 1
                    self.tuned = self.strikes < TUNED_STRIKES
                self.stale = True
        if out.result == z3.unknown:
            raise OracleError(f"the solver could not decide a query: {out.reason}")
        return out.model

    @property
    def budget_ms(self) -> int:
        """The incremental solver's share of a check before it restarts fresh."""
        if self.tuned:
            return TUNED_BUDGET_MS
        if self.linear and not self.rounds:
            return z3check.FIRST_BUDGET_MS
        return NONLINEAR_BUDGET_MS

    def flat_copy(self) -> z3.Solver:
        """A fresh solver holding everything the solver holds now, at its base level.

        It runs with the solver's parameters (`TUNED_PARAMS` where it is tuned).
        """
        solver = self.solver
        flat = self._new_solver()
        copy_assertions(solver, flat)
        return flat

    def _new_solver(self) -> z3.Solver:
        """An empty solver of this context, with `TUNED_PARAMS` where the solver is tuned."""
        solver = z3.SimpleSolver(ctx=self.ctx)
        if self.tuned:
            for name, value in TUNED_PARAMS.items():
                solver.set(name, value)
        return solver

    def search(self, facts: Sequence[Fact]) -> Search:
        """A `Search` under ``facts`` (the solver is synced to them first)."""
        self.sync(facts)
        return Search(self)

    def decode(self, var: str, v: z3.ExprRef) -> Value:
        """``var``'s value from its term's value in a model."""
        if self.spec.record(var).kind in BOOL_KINDS:
            return self.value(var, bool(z3.is_true(v)))
        return self.value(var, cast(z3.IntNumRef, v).as_long())

    def value(self, var: str, x: int | bool) -> Value:
        """``var``'s value from its term's value (a str variable's is its text's code)."""
        sort = VAR_SORTS[self.spec.record(var).kind]
        if sort is Sort.BOOL:
            return bool(x)
        if sort is Sort.CODE:
            return str(self.spec.strings.strings[int(x)])
        return int(x)

    def decode_node(self, tb: TermBuilder, var: str, node: Node) -> Value:
        """`decode` for a raw value node of ``tb`` (`TermBuilder.eval`)."""
        return self.value(var, tb.value(node, boolean=self.spec.record(var).kind in BOOL_KINDS))


class Search:
    """The checks of one query under the same facts, in a scope of its own (`FLAT_AFTER`).

    Use it as a context manager: the query's additions (`add`, `push`, `pop`) go to the
    solver its checks run on, and its scope on the incremental solver is popped at the end,
    leaving the facts pushed as they were.
    """

    def __init__(self, component: ComponentSolver) -> None:
        self.component = component
        self.checks = 0
        self.depth = 0
        self.flat: z3.Solver | None = None

    def __enter__(self) -> Search:
        self.component.solver.push()
        return self

    def __exit__(self, *exc: object) -> None:
        self.flat = None
        self.component.solver.pop()

    @property
    def solver(self) -> z3.Solver:
        """The solver the next check runs on."""
        return self.component.solver if self.flat is None else self.flat

    def add(self, *formulas: z3.BoolRef) -> None:
        """Assert ``formulas`` for the rest of the query."""
        self.solver.add(*formulas)

    def push(self) -> None:
        """A scope for what is asserted until the matching `pop`."""
        self._settle()
        self.depth += 1
        self.solver.push()

    def pop(self) -> None:
        """Drop what was asserted since the matching `push`."""
        self.depth -= 1
        self.solver.pop()

    def check(self) -> z3.ModelRef | None:
        """`ComponentSolver.check` of what the query holds now (a model, or None: unsat)."""
        self._settle()
        self.checks += 1
        return self.component.check(self.flat)

    def _settle(self) -> None:
        """Move to the flat copy once `FLAT_AFTER` checks ran, on a linear component.

        Only outside the query's own scopes: a copy holds everything at its base level.
        """
        if (
            self.flat is None
            and self.depth == 0
            and self.checks >= FLAT_AFTER
            and self.component.linear
        ):
            self.flat = self.component.flat_copy()


def linear(constraints: Sequence[z3.BoolRef]) -> bool:
    """Whether ``constraints`` are linear integer arithmetic (Z3's ``is-lia`` probe).

    Under 1 ms on each of the user-models suite's components.
    """
    if not constraints:
        return True
    ctx = constraints[0].ctx
    goal = z3.Goal(ctx=ctx)
    goal.add(*constraints)
    return bool(z3.Probe("is-lia", ctx=ctx)(goal))


def small_numbers(bounds: Iterable[int | None]) -> bool:
    """Whether every one of ``bounds`` (None: none) is below `TUNED_NUMBERS` in magnitude.

    A `linear` component whose variables' bounds are small starts with `TUNED_PARAMS`
    (`Traits.tunable`). The bounds are read from the spec's records, where reading the
    constants off the terms took 10-22 ms of a record's critical path on the user-models
    suite's larger components.
    """
    return not any(b is not None and abs(b) >= TUNED_NUMBERS for b in bounds)


def fact_value(spec: CompiledSpec, fact: Fact) -> int | bool | None:
    """The value a fact gives its variable's term: an int, a bool for a Boolean variable.

    None: the fact is a bound (`AtLeast`, `AtMost`), or a text the variable can never hold.

    Raises:
        ValueError: the value's type is not the variable's.
    """
    var, value = fact
    rec = spec.record(var)
    if isinstance(value, AtLeast | AtMost):
        if rec.kind not in LENGTH_KINDS:
            name = type(value).__name__
            raise ValueError(f"{name} applies to length variables, not {var}")
        return None
    sort = VAR_SORTS[rec.kind]
    if sort is Sort.BOOL:
        if not isinstance(value, bool):
            raise ValueError(f"{var} is a bool variable, got {value!r}")
        return value
    if sort is Sort.CODE:
        if not isinstance(value, str):
            raise ValueError(f"{var} is a str variable, got {value!r}")
        code = OTHER_CODE if value == OTHER_TEXT else spec.strings.codes.get(value)
        if code is None and rec.free_str:
            code = OTHER_CODE
        return code
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{var} is an int variable, got {value!r}")
    return value


def fact_literal(spec: CompiledSpec, t: z3.ExprRef, fact: Fact, ctx: z3.Context) -> z3.BoolRef:
    """The Z3 literal of one fact, over ``t`` (the term of the fact's variable, in ``ctx``).

    Raises:
        ValueError: the value's type is not the variable's.
    """
    value = fact_value(spec, fact)
    bound = fact[1]
    if isinstance(bound, AtMost):
        return cast(z3.BoolRef, t <= bound.n)
    if isinstance(bound, AtLeast):
        return cast(z3.BoolRef, t >= bound.n)
    if value is None:  # a text the variable cannot hold
        return z3.BoolVal(False, ctx)
    if isinstance(value, bool):
        return cast(z3.BoolRef, t == z3.BoolVal(value, ctx))
    return cast(z3.BoolRef, t == value)
