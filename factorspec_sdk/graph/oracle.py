"""The feasibility oracle: exact answers about partial assignments, incremental and cached.

One `Oracle` serves one request. It owns a private Z3 context (so that oracles of different
requests may run in different threads) with one incremental solver per connected component
of the spec (`factorspec_sdk.graph.component_solver.ComponentSolver`). Facts are pushed one
scope each; a query first pops back to the longest common prefix of the component's facts
with the ones already pushed, then pushes the rest. Answers are cached (LRU) by the
component's facts.

Models the solver returns are kept (a few per component) as *witnesses*: a model of the
component's constraints that satisfies every fact of a later query is a completion of it, so
that query is feasible without a check, and the witness's value of the variable asked is one
of its feasible values without a check. A record's facts grow one value at a time, mostly
values some witness holds, so a value the relations determine costs one check (the proof
that no other value is feasible) instead of two checks and a model.

A component's *backbone* is what its facts determine: the variables with one value in every
completion (`factorspec_sdk.graph.backbone`: a model, then at most `BACKBONE_ROUNDS` checks
for a completion that differs). The backbone of no facts comes with the spec
(`Component.determined`: its own check finds it on the solver that checked the component,
already warm; where its rounds do not settle it, the oracle does not search again); the
oracle finds it itself at the first query of a spec whose check did not look for it. Each
later query whose answer is a single value the known backbones did not give asks what its
facts determine too. A later query whose facts extend those facts and that a witness
satisfies is answered from it without a check, and so is a feasibility query whose later
facts the backbone fixes (`ComponentSolver.decided`: a list's length the relations fix, asked
whether it may end at each item). A record its relations determine then costs
no check at all (31 -> 0 on a 5-city trip with one valid plan), and the oracle never fills
its solver (each component's constraints are copied into the private context at its first
check).

An enumeration of an integer's feasible values walks each model it gets to the values next
to its own (`Oracle._walk`): a step at a time (the greatest common divisor of the values
found so far: a clock's five-minute marks), what the variable determines moving with it (a
datetime's date, clock, hour...; the next meeting's arrival, which an equality defines from
this one's end: `factorspec_sdk.graph.moves`), each value proved by evaluating the moved
model (`ComponentSolver.moved`), not by a check. A check finds only what the walk cannot
reach: the meeting plan of the user-models suite took 204 checks a record on the scripted
engine, and takes about 35. A search of classes (a float's next characters: which ranges of
its values hold a feasible one) moves each model it gets into the classes left the same way
(`Oracle._move_into`): the expense report's amounts (an amount in euros, rounded, defined
from each) took 2.5 s of oracle time in 40 such searches a record, and take about 0.3 s.

Every answer is exact: a value is reported feasible iff some completion of the assignment
satisfies every relation and bound. A check the warm solver does not decide within a
budget restarts in a fresh solver (`factorspec_sdk.graph.z3check`), and the component's
solver is then replaced; a check undecided within the spec's ``solver_timeout_ms`` raises
`OracleError`.

A spec compiled from a Pydantic model keeps its terms in Z3's main context, which other
threads use to compile specs; a spec from the relation IR keeps them in a private one,
which the oracles of its requests read from their threads. Every copy of a spec's terms
into the oracle's context (``translate``) holds the spec's `CompiledSpec.context_lock`
(`MAIN_CONTEXT_LOCK` for the main context); everything after runs in the private context.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import z3

from factorspec_sdk.errors import OracleError
from factorspec_sdk.graph import z3check
from factorspec_sdk.graph.assemble import bound_value
from factorspec_sdk.graph.backbone import BACKBONE_ROUNDS, determined_nodes
from factorspec_sdk.graph.compiled import AtLeast, AtMost, Fact, Value
from factorspec_sdk.graph.component_solver import (
    TUNED_DIVISOR,
    WITNESSES,
    ComponentSolver,
    Search,
    fact_literal,
    fact_value,
)
from factorspec_sdk.graph.moves import Misses, finer_step, walk
from factorspec_sdk.graph.z3context import private_context
from factorspec_sdk.graph.z3raw import (
    TermBuilder,
    assert_all,
    true_under,
)
from factorspec_sdk.relations.kinds import VAR_SORTS, Sort

if TYPE_CHECKING:
    from factorspec_sdk.graph.compiled import Assignment, CompiledSpec

__all__ = ["WALK_TRIES", "Oracle", "OracleStats", "holds"]

_CACHE_SIZE = 8192
WALK_TRIES = 3
"""Walks of a variable that moved to no value before an oracle stops walking it
(`Oracle._walk`)."""
MOVE_TRIES = 2
"""Values of a class a class search moves a model to before it leaves the class to a check
(`Oracle._move_into`)."""
_NEXT_DIGITS_FAST_LIMIT = 32
_MAX_DIGITS = 18


@dataclass(slots=True)
class OracleStats:
    """Counters of one oracle.

    Attributes:
        queries: public calls answered.
        solver_checks: Z3 ``check()`` calls.
        cache_hits: answers served from the cache.
        restarts: checks answered by a fresh solver after the incremental one ran out of
            its budget (`factorspec_sdk.graph.z3check`).
        moved: feasible values an enumeration proved by moving a model's value, no check
            (`Oracle._walk`), and classes a class search settled so (`Oracle._move_into`).
        seconds: time spent in the oracle.
    """

    queries: int = 0
    solver_checks: int = 0
    cache_hits: int = 0
    restarts: int = 0
    moved: int = 0
    seconds: float = 0.0


def holds(spec: CompiledSpec, assignment: Assignment) -> bool:
    """Whether some completion of ``assignment`` satisfies ``spec``: at most a check a component.

    `Oracle.feasible` for a single question (a finished record's re-check): it works in the
    spec's own context, under `CompiledSpec.context_lock`, so it makes no private context,
    copies no term and pushes no fact. A component whose constraints evaluate to true at the
    facts' values (`z3raw.true_under`), with the variables they leave out (items a finished
    record does not have) at values within their own bounds, needs no search: that is a
    solution. Any other is one check, with the facts as its assumptions. Every Z3 object it
    makes goes before the lock is released.
    """
    groups: dict[int, list[Fact]] = {}
    for fact in assignment:
        groups.setdefault(spec.component_of(fact[0]), []).append(fact)
    with spec.context_lock:
        for index, facts in groups.items():
            comp = spec.component(index)
            values = [(spec.record(f[0]).term, fact_value(spec, f)) for f in facts]
            given = {f[0] for f in facts}
            values += [  # the items a record leaves out: any value within their bounds
                (spec.record(v).term, bound_value(spec.record(v), spec.strings))
                for v in sorted(comp.variables - given)
            ]
            if all(v is not None for _, v in values) and true_under(
                comp.constraints, cast(list[tuple[z3.ExprRef, int | bool]], values)
            ):
                continue
            ctx = spec.record(facts[0][0]).term.ctx
            lits = [fact_literal(spec, spec.record(f[0]).term, f, ctx) for f in facts]
            solver = z3.SimpleSolver(ctx=ctx)
            assert_all(solver, comp.constraints)
            out = z3check.check(solver, spec.solver_timeout_ms, lits, model=False)
            result, reason = out.result, out.reason
            del solver, lits, out  # no Z3 object outlives the lock
            if result == z3.unknown:
                raise OracleError(f"the solver could not decide a query: {reason}")
            if result == z3.unsat:
                return False
    return True


class Oracle:
    """Exact feasibility queries on partial assignments of a `CompiledSpec`.

    Attributes:
        spec: the compiled spec.
        stats: counters (queries, solver checks, cache hits, seconds).
    """

    def __init__(self, spec: CompiledSpec) -> None:
        self.spec = spec
        self.ctx = private_context()
        self.stats = OracleStats()
        self._solvers: dict[int, ComponentSolver] = {}
        self._cache: OrderedDict[Hashable, object] = OrderedDict()
        self._fruitless = Misses(WALK_TRIES)
        """Walks and class moves of a variable that moved to no value: `WALK_TRIES` stop
        them."""

    # ------------------------------------------------------------------ plumbing

    def _solver(self, index: int) -> ComponentSolver:
        s = self._solvers.get(index)
        if s is None:
            s = ComponentSolver(self, index)
            self._solvers[index] = s
        return s

    def _split(self, assignment: Assignment) -> dict[int, tuple[Fact, ...]]:
        groups: dict[int, list[Fact]] = {}
        component_of = self.spec.component_of
        for fact in assignment:
            try:
                i = component_of(fact[0])
            except KeyError:
                raise KeyError(f"unknown variable {fact[0]!r} in the assignment") from None
            groups.setdefault(i, []).append(fact)
        return {i: tuple(fs) for i, fs in groups.items()}

    def _cached(self, key: Hashable) -> tuple[bool, object]:
        if key in self._cache:
            self._cache.move_to_end(key)
            self.stats.cache_hits += 1
            return True, self._cache[key]
        return False, None

    def _store(self, key: Hashable, value: object) -> None:
        self._cache[key] = value
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)

    def _comp_feasible(self, index: int, facts: tuple[Fact, ...]) -> bool:
        key = ("sat", index, facts)
        hit, val = self._cached(key)
        if hit:
            return cast(bool, val)
        s = self._solver(index)
        told = s.decided(facts)
        if told is not None:
            ok = told
        elif s.witness(facts) is not None:
            ok = True
        else:
            s.sync(facts)
            found = s.check()
            ok = found is not None
            if found is not None:
                s.remember(found, facts)
        self._store(key, ok)
        return ok

    def _others_feasible(self, groups: dict[int, tuple[Fact, ...]], skip: int) -> bool:
        return all(self._comp_feasible(i, fs) for i, fs in groups.items() if i != skip)

    # ------------------------------------------------------------------ queries

    def feasible(self, assignment: Assignment) -> bool:
        """Whether some completion of ``assignment`` satisfies the spec."""
        t0 = time.perf_counter()
        self.stats.queries += 1
        try:
            groups = self._split(assignment)
            return all(self._comp_feasible(i, fs) for i, fs in groups.items())
        finally:
            self.stats.seconds += time.perf_counter() - t0

    def feasible_values(
        self, assignment: Assignment, var: str, limit: int = 64, span: int | None = None
    ) -> list[Value] | None:
        """The exact sorted set of feasible values of ``var``; None if more than ``limit``.

        ``span`` (an int variable's): None too where two feasible values lie more than
        ``span`` apart. One check past the first value found tells a set that wide (a value
        farther than ``span`` from it), where telling more than ``limit`` values takes
        ``limit + 1`` checks.
        """
        t0 = time.perf_counter()
        self.stats.queries += 1
        try:
            return self._feasible_values(assignment, var, limit, span)
        finally:
            self.stats.seconds += time.perf_counter() - t0

    def _feasible_values(
        self, assignment: Assignment, var: str, limit: int, span: int | None
    ) -> list[Value] | None:
        index = self.spec.component_of(var)
        groups = self._split(assignment)
        if not self._others_feasible(groups, index):
            return []
        return self._component_values(index, groups.get(index, ()), var, limit, span)

    def _component_values(
        self,
        index: int,
        facts: tuple[Fact, ...],
        var: str,
        limit: int,
        span: int | None = None,
    ) -> list[Value] | None:
        key = ("fv", index, facts, var, limit, span)
        hit, val = self._cached(key)
        if hit:
            return cast("list[Value] | None", val)
        seen = self._seen(index, facts, var)
        if seen is not None and (  # more than ``limit`` found already, or too far apart
            len(seen) > limit or (span is not None and _spread(seen) > span)
        ):
            self._store(key, None)
            return None
        result: list[Value] | None
        s = self._solver(index)
        value = s.forced(facts, var)
        if value is not None and limit >= 1:
            result = [value] if self._comp_feasible(index, facts) else []
            self._store(key, result)
            return result
        known = s.witnesses_for(facts)  # their values are feasible: no check for them
        t = s.term(var)
        found: list[Value] = []
        walks = VAR_SORTS[self.spec.record(var).kind] is Sort.INT
        moved_before = self.stats.moved
        probed = span is None
        with s.search(facts) as search:
            while True:
                if known:
                    model = known.pop(0)
                else:
                    if not probed and found:  # one check tells a set wider than ``span``
                        probed = True
                        far = self._far_value(search, t, int(cast(int, found[0])), cast(int, span))
                        if far is not None:
                            s.remember(far, facts)
                            found.append(s.decode(var, far.eval(t, model_completion=True)))
                            break
                    checked = search.check()
                    if checked is None:
                        break
                    model = checked
                    s.remember(model, facts)
                v = model.eval(t, model_completion=True)
                value = s.decode(var, v)
                if value in found:  # a known completion's value, found already
                    continue
                found.append(value)
                if len(found) > limit or (span is not None and _spread(found) > span):
                    break
                search.add(t != v)
                if walks and len(found) >= 2:
                    refine = self.stats.moved == moved_before  # no walk of this query moved yet
                    values = cast("list[int]", found)
                    search.add(*self._walk(s, facts, var, model, values, limit, refine))
                    if len(found) > limit or (span is not None and _spread(found) > span):
                        break
        wide = len(found) > limit or (span is not None and _spread(found) > span)
        result = None if wide else _sorted(found)
        self._store(key, result)
        if result is None:
            self._saw(index, facts, var, found)
        single = result is not None and len(result) == 1
        if s.backbone_at < 0 or (single and len(facts) > s.backbone_at):
            self._learn_backbone(s, index, facts)
        return result

    def _walk(
        self,
        s: ComponentSolver,
        facts: tuple[Fact, ...],
        var: str,
        model: z3.ModelRef,
        found: list[int],
        limit: int,
        refine: bool,
    ) -> list[z3.BoolRef]:
        """Values next to ``model``'s, proved feasible by moving it there: no check each.

        ``model``'s value of ``var`` is ``found``'s last. The step is the greatest common
        divisor of the differences between the values found (a clock's five-minute marks
        show theirs after two; where the model moves by no such step and no walk of the
        query moved yet, ``refine``, the largest divisor of it the model moves by:
        `finer_step`). The walk goes a step at a time each way while the model moved there
        satisfies the component (`ComponentSolver.moved`), past values found already, until
        more than ``limit`` are found (`moves.walk`). Each value it proves goes into
        ``found``: exact, it is a completion. A value it does not reach is left to the next
        check, so the enumeration stays exact and complete.

        Returns what the search must add so that its next check looks for other values:
        the run of values walked, ``lo..hi`` on the step, as one formula (``t < lo or t >
        hi or (t - lo) % step != 0``), where a division by the step does not slow the
        component (`TUNED_DIVISOR`: not a tuned component, or a step under it), and as one
        ``t != value`` a value otherwise. After `WALK_TRIES` walks of ``var`` that moved
        nowhere (its values tied to others by equalities: a quantity in a sum), it is not
        walked again in this oracle.
        """
        if self._fruitless.spent(var):
            return []
        step = math.gcd(*(x - found[0] for x in found[1:]))
        proved: dict[int, dict[str, int]] = {}

        def moves(w: int) -> bool:
            changes = s.moved(model, facts, var, w)
            if changes is not None:
                proved[w] = changes
            return changes is not None

        moved, lo, hi = walk(moves, found, limit, step)
        if not moved and refine:  # two values some multiple of the step apart: its divisors
            finer = finer_step(moves, found[-1], step)
            if finer < step:
                step = finer
                moved, lo, hi = walk(moves, found, limit, step)
        self._fruitless.record(var, bool(moved))
        if not moved:
            return []
        self.stats.moved += len(moved)
        for w in moved:  # a witness of each, made if a later query's facts pick it
            s.keep_move(model, proved[w], facts)
        t = cast(z3.ArithRef, s.term(var))
        if s.tuned and step >= TUNED_DIVISOR:
            return [t != w for w in moved]
        outside = [t < lo, t > hi]
        if step > 1:
            outside.append((t - lo) % step != 0)
        return [cast(z3.BoolRef, z3.Or(outside))]

    @staticmethod
    def _far_value(search: Search, t: z3.ExprRef, first: int, span: int) -> z3.ModelRef | None:
        """A model of ``search`` whose ``t`` is more than ``span`` from ``first`` (None: none)."""
        term = cast(z3.ArithRef, t)
        search.push()
        try:
            search.add(z3.Or(term < first - span, term > first + span))
            return search.check()
        finally:
            search.pop()

    def _learn_backbone(self, s: ComponentSolver, index: int, facts: tuple[Fact, ...]) -> None:
        """Find what ``facts`` determine, for the later queries of facts that extend them."""
        s.backbone_at = len(facts)
        try:
            found = self._determined(index, facts, BACKBONE_ROUNDS)
        except OracleError:  # a check ran out of time: later queries check for themselves
            return
        if found:
            s.backbones.append((facts, {v: value for v, (value, _) in found.items()}))
            del s.backbones[:-WITNESSES]

    def next_digits(self, assignment: Assignment, var: str, prefix: str) -> frozenset[str]:
        """Chars that may follow ``prefix`` in the canonical decimal of a feasible value.

        ``""`` in the answer means ``int(prefix)`` itself is feasible (the number may end).
        """
        t0 = time.perf_counter()
        self.stats.queries += 1
        try:
            return self._next_digits(assignment, var, prefix)
        finally:
            self.stats.seconds += time.perf_counter() - t0

    def _next_digits(self, assignment: Assignment, var: str, prefix: str) -> frozenset[str]:
        def next_char(v: int) -> str | None:
            text = str(v)
            return text[len(prefix) : len(prefix) + 1] if text.startswith(prefix) else None

        def conditions(t: z3.ArithRef, ctx: z3.Context) -> dict[Hashable, z3.BoolRef]:
            out: dict[Hashable, z3.BoolRef] = {}
            if prefix not in ("", "-"):
                out[""] = cast(z3.BoolRef, t == int(prefix))
            for c in _next_chars(prefix):
                out[c] = _prefix_cond(t, prefix + c, ctx)
            return out

        found = self._classes(assignment, var, ("nd", prefix), next_char, conditions)
        return cast(frozenset[str], found)

    def feasible_ranges(
        self, assignment: Assignment, var: str, ranges: Sequence[tuple[int, int]]
    ) -> frozenset[int]:
        """Indices of the inclusive ranges ``(lo, hi)`` that hold a feasible value of ``var``.

        The ranges must not overlap (each model the solver finds then settles one range):
        `feasible_range_sets` with one range per class.
        """
        return self.feasible_range_sets(assignment, var, [[r] for r in ranges])

    def feasible_range_sets(
        self,
        assignment: Assignment,
        var: str,
        classes: Sequence[Sequence[tuple[int, int]]],
    ) -> frozenset[int]:
        """Indices of the classes that hold a feasible value of ``var``.

        A class is a union of inclusive ranges ``(lo, hi)`` (the values a float's next
        character leaves, say). The classes must not overlap (each model the solver finds
        then settles one class); a class without ranges holds no value.
        """
        t0 = time.perf_counter()
        self.stats.queries += 1
        try:
            frozen = tuple(tuple(c) for c in classes)
            return self._feasible_range_sets(assignment, var, frozen)
        finally:
            self.stats.seconds += time.perf_counter() - t0

    def _feasible_range_sets(
        self,
        assignment: Assignment,
        var: str,
        classes: tuple[tuple[tuple[int, int], ...], ...],
    ) -> frozenset[int]:
        def class_of(v: int) -> int | None:
            return next(
                (i for i, c in enumerate(classes) if any(lo <= v <= hi for lo, hi in c)), None
            )

        def conditions(t: z3.ArithRef, ctx: z3.Context) -> dict[Hashable, z3.BoolRef]:
            return {
                i: z3.Or(*(z3.And(t >= lo, t <= hi) for lo, hi in c))
                for i, c in enumerate(classes)
                if c
            }

        def near(i: Hashable, v: int) -> list[int]:
            return _nearest_in(classes[cast(int, i)], v)

        found = self._classes(assignment, var, ("fr", classes), class_of, conditions, near)
        return cast(frozenset[int], found)

    def _classes(
        self,
        assignment: Assignment,
        var: str,
        query: Hashable,
        class_of: Callable[[int], Hashable | None],
        conditions: Callable[[z3.ArithRef, z3.Context], dict[Hashable, z3.BoolRef]],
        near: Callable[[Hashable, int], list[int]] | None = None,
    ) -> frozenset[Hashable]:
        """The classes of ``var``'s feasible values (``class_of``: a value's class, or None).

        With few feasible values, their classes; else one solver check per class found
        (plus one), each asking for a value of a class not found yet (``conditions``: each
        class's condition on the variable's term), less the classes a model moves into
        (``near``: a class's values nearest a value, to move a model to;
        `_classes_by_search`). ``query`` keys the cache.
        """
        index = self.spec.component_of(var)
        groups = self._split(assignment)
        if not self._others_feasible(groups, index):
            return frozenset()
        facts = groups.get(index, ())
        key = (query, index, facts, var)
        hit, val = self._cached(key)
        if hit:
            return cast(frozenset[Hashable], val)
        fast = _NEXT_DIGITS_FAST_LIMIT
        values = self._component_values(index, facts, var, fast, span=fast)
        if values is not None:
            result = frozenset(c for v in values if (c := class_of(int(v))) is not None)
        else:
            seen = self._seen(index, facts, var) or ()
            result = self._classes_by_search(index, facts, var, class_of, conditions, seen, near)
        self._store(key, result)
        return result

    def _seen(self, index: int, facts: tuple[Fact, ...], var: str) -> tuple[Value, ...] | None:
        """Values of ``var`` found feasible under exactly ``facts`` (None: none kept).

        An enumeration that stopped keeps what it found, a search of classes the values its
        models gave; more than that many exist, at least that far apart.
        """
        hit, val = self._cached(("seen", index, facts, var))
        return cast("tuple[Value, ...]", val) if hit else None

    def _saw(self, index: int, facts: tuple[Fact, ...], var: str, values: list[Value]) -> None:
        """Keep ``values`` (feasible under ``facts``) with the ones `_seen` has."""
        kept = self._seen(index, facts, var) or ()
        new = [v for v in values if v not in kept]
        if new:
            self._store(("seen", index, facts, var), (*kept, *new))

    def _classes_by_search(
        self,
        index: int,
        facts: tuple[Fact, ...],
        var: str,
        class_of: Callable[[int], Hashable | None],
        conditions: Callable[[z3.ArithRef, z3.Context], dict[Hashable, z3.BoolRef]],
        seen: tuple[Value, ...] = (),
        near: Callable[[Hashable, int], list[int]] | None = None,
    ) -> frozenset[Hashable]:
        """The classes of ``var``'s feasible values, a check per class not in ``seen``.

        ``seen``: values found feasible under ``facts`` already; their classes need no check.
        ``near``: where given, each model (a witness of ``facts`` first, then each check's)
        is moved to the values of the classes left nearest its own (`_move_into`); a class
        a move proves needs no check. Moves are exact (a moved model satisfies the
        component, as a check's would), and a class no move reaches is left to the checks.
        """
        s = self._solver(index)
        t = cast(z3.ArithRef, s.term(var))
        left = conditions(t, s.ctx)
        found: set[Hashable] = set()
        for v in seen:
            c = class_of(int(v))
            if c in left:
                found.add(c)
                del left[c]
        values: list[Value] = []
        if near is not None and left:
            for model in s.witnesses_for(facts)[:1]:
                self._move_into(s, facts, var, model, left, near, found, values)
        with s.search(facts) as search:
            while left:
                search.push()
                try:
                    search.add(z3.Or(*left.values()))
                    found_model = search.check()
                    if found_model is None:
                        break
                    v = cast(z3.IntNumRef, found_model.eval(t, model_completion=True)).as_long()
                finally:
                    search.pop()
                s.remember(found_model, facts)
                values.append(s.value(var, v))
                c = class_of(v)
                if c not in left:  # pragma: no cover - guarded by the conditions
                    raise OracleError(f"the search found {v} outside the classes asked of {var}")
                found.add(c)
                del left[c]
                if near is not None and left:
                    self._move_into(s, facts, var, found_model, left, near, found, values)
        self._saw(index, facts, var, values)  # the next character's classes start from them
        return frozenset(found)

    def _move_into(
        self,
        s: ComponentSolver,
        facts: tuple[Fact, ...],
        var: str,
        model: z3.ModelRef,
        left: dict[Hashable, z3.BoolRef],
        near: Callable[[Hashable, int], list[int]],
        found: set[Hashable],
        values: list[Value],
    ) -> None:
        """Settle the classes ``left`` that ``model`` moves into (`ComponentSolver.moved`).

        ``model`` satisfies ``facts``; for each class left, its values nearest ``model``'s
        value of ``var`` (``near``, at most `MOVE_TRIES`) are tried in turn. A class a move
        proves goes from ``left`` to ``found``, its value to ``values`` and the move is kept
        as a witness (`ComponentSolver.keep_move`). Moves of a variable that went nowhere
        `WALK_TRIES` times (its values tied by equalities to facts) are not tried again, as
        `_walk`'s are not.
        """
        if self._fruitless.spent(var):
            return
        t = s.term(var)
        v = cast(z3.IntNumRef, model.eval(t, model_completion=True)).as_long()
        moved = 0
        for c in list(left):
            for w in near(c, v)[:MOVE_TRIES]:
                changes = s.moved(model, facts, var, w)
                if changes is None:
                    continue
                s.keep_move(model, changes, facts)
                values.append(s.value(var, w))
                found.add(c)
                del left[c]
                moved += 1
                break
        self._fruitless.record(var, moved > 0)
        self.stats.moved += moved

    def determined(self, assignment: Assignment) -> dict[str, tuple[Value, tuple[str, ...]]]:
        """Unassigned variables whose value the assignment forces, with their relations.

        The relations are the names of the relation factors that read the variable. Only
        variables of list items that surely exist are reported. An infeasible assignment
        determines nothing (returns ``{}``).
        """
        t0 = time.perf_counter()
        self.stats.queries += 1
        try:
            groups = self._split(assignment)
            if not all(self._comp_feasible(i, fs) for i, fs in groups.items()):
                return {}
            out: dict[str, tuple[Value, tuple[str, ...]]] = {}
            for i in range(len(self.spec.components)):
                out.update(self._determined(i, groups.get(i, ())) or {})
            return out
        finally:
            self.stats.seconds += time.perf_counter() - t0

    def _determined(
        self, index: int, facts: tuple[Fact, ...], rounds: int | None = None
    ) -> dict[str, tuple[Value, tuple[str, ...]]] | None:
        """`determined` in one component; None when ``rounds`` checks did not settle it.

        Each round asks for a completion in which some candidate is missing or differs from
        the first model's value; what differs drops out. The candidates left when no such
        completion exists are the determined ones.
        """
        key = ("det", index, facts)
        hit, val = self._cached(key)
        if hit:
            return cast(dict[str, tuple[Value, tuple[str, ...]]], val)
        s = self._solver(index)
        assigned = {f[0] for f in facts if not isinstance(f[1], AtLeast | AtMost)}
        cands = [v for v in sorted(s.variables) if v not in assigned and v in self.spec.variables]
        result: dict[str, tuple[Value, tuple[str, ...]]] = {}
        model = s.witness(facts)
        s.sync(facts)
        if model is None:
            model = s.check()
            if model is None:
                self._store(key, result)
                return result
            s.remember(model, facts)
        with TermBuilder(s.ctx) as tb:  # one raw libz3 call per node: many variables
            nodes = determined_nodes(
                tb, s.solver, model, [(v, s.term(v), s.exists(v)) for v in cands], s.check, rounds
            )
            if nodes is None:
                return None
            for v, node in nodes.items():
                result[v] = (s.decode_node(tb, v, node), self.spec.relations_mentioning(v))
        self._store(key, result)
        return result


def _nearest_in(ranges: Sequence[tuple[int, int]], v: int) -> list[int]:
    """Each inclusive range's value nearest ``v``, the nearest first."""
    points = {min(max(v, lo), hi) for lo, hi in ranges if lo <= hi}
    return sorted(points, key=lambda x: (abs(x - v), x))


def _spread(values: Sequence[Value]) -> int:
    """How far apart the farthest two of ``values`` (ints) lie (0: fewer than two)."""
    ints = [int(v) for v in values]
    return max(ints) - min(ints) if ints else 0


def _sorted(values: list[Value]) -> list[Value]:
    return sorted(values, key=lambda v: (type(v).__name__, v))


def _next_chars(prefix: str) -> list[str]:
    if prefix == "":
        return ["-", *"0123456789"]
    if prefix == "-":
        return list("123456789")
    if prefix in ("0", "-0"):
        return []
    digits = len(prefix.lstrip("-"))
    if digits >= _MAX_DIGITS:
        return []
    return list("0123456789")


def _prefix_cond(t: z3.ArithRef, text: str, ctx: z3.Context) -> z3.BoolRef:
    """Values whose canonical decimal starts with ``text``."""
    if text == "-":
        return cast(z3.BoolRef, t < 0)
    neg = text.startswith("-")
    digits = text.lstrip("-")
    if digits == "0":
        return cast(z3.BoolRef, t == 0) if not neg else z3.BoolVal(False, ctx)
    d = int(digits)
    x = -t if neg else t
    parts = []
    for m in range(_MAX_DIGITS - len(digits) + 1):
        lo, hi = d * 10**m, (d + 1) * 10**m - 1
        parts.append(z3.And(x >= lo, x <= hi))
    return z3.Or(*parts)
