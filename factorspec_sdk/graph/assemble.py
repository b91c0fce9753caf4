"""The one spec back end: from variables and relation formulas to a checked `CompiledSpec`.

Both entry points end here: `compile_spec` (relations lowered from a Pydantic model) and
`spec_from_ir` (relation formulas rebuilt from the relation IR). `assemble_spec` adds the
schema factors of every variable (enum choices, int bounds, string codes, list lengths, all
derived from the layout), splits the factor graph into connected components, and checks each
one: that it is satisfiable (else `UnsatisfiableSpecError` with an unsat core of factor
names), that a list without a schema bound does not need more items than its default bound, and how
long each list can be. A free ``str`` read by a relation needs no finite domain: its code
`OTHER_CODE` stands for every text no relation names, which the writer writes as a free
string that may not close at a named text the oracle rules out. On the solver that found a
component satisfiable, warm, it also finds what the constraints alone determine
(`Component.determined`, `factorspec_sdk.graph.backbone`), which the spec's oracles start
from instead of each searching for it in a solver of its own.
Every solver check is bounded by ``check_timeout_ms`` and restarts in a fresh solver where
the warm one gets stuck (`factorspec_sdk.graph.z3check`); a check the solver cannot decide
raises `OracleError`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import z3
from pydantic import BaseModel

from factorspec_sdk.errors import OracleError, SpecError, UnsatisfiableSpecError
from factorspec_sdk.graph import z3check
from factorspec_sdk.graph.backbone import BACKBONE_ROUNDS, determined_nodes
from factorspec_sdk.graph.compiled import CompiledSpec, Component, Factor
from factorspec_sdk.graph.z3context import MAIN_CONTEXT_LOCK
from factorspec_sdk.graph.z3raw import Node, TermBuilder, assert_all
from factorspec_sdk.relations.compiler import InternTable, VarRecord
from factorspec_sdk.relations.decorator import RelationSet
from factorspec_sdk.relations.kinds import BOOL_KINDS, VAR_SORTS, Sort, VarKind
from factorspec_sdk.relations.layout import ListLayout, Path, RootLayout, node_at, path_name

__all__ = [
    "RelationFactor",
    "assemble_spec",
    "bound_constraint",
    "bound_value",
    "connected_components",
    "schema_factor_name",
]


@dataclass(frozen=True, slots=True)
class RelationFactor:
    """A relation lowered to Z3: its factor name, the variables it reads and its formula.

    For a Pydantic model the name is the relation's (``stay_lengths``, or ``amount_ok
    (items[2])`` for a nested model's relation at a path); for the relation IR it is the
    IR factor's name. Unsat cores and errors name relations by it.

    ``scope`` (the relation IR's factors only): the place the relation is about, whose
    absence satisfies it; its variables lie at or under it. Where every relation that reads
    under an optional key is about a place at or under that key, the writer may leave the
    key out (`factorspec_sdk.graph.compiled.CompiledSpec.reads_under`).
    """

    name: str
    variables: frozenset[str]
    formula: z3.BoolRef
    scope: Path | None = None


_CORE_CHECK_MS = 2000
"""Time limit of each check that shrinks an unsat core (`_Checker._minimal`)."""


def schema_factor_name(rec: VarRecord) -> str:
    """The name of a variable's schema factor: ``bounds of x`` or ``length bounds of xs``."""
    if rec.kind == VarKind.LEN:
        return f"length bounds of {path_name(rec.path)}"
    return f"bounds of {rec.name}"


def assemble_spec(
    *,
    name: str,
    model: type[BaseModel],
    layout: RootLayout,
    relations: RelationSet,
    context: object,
    records: Mapping[str, VarRecord],
    strings: InternTable,
    relation_factors: Sequence[RelationFactor],
    ctx: z3.Context | None = None,
    check_timeout_ms: int | None = None,
    list_bounds: Mapping[Path, int] | None = None,
    determined: Sequence[Mapping[str, int | bool] | None] | None = None,
    solver_timeout_ms: int | None = None,
    started: float | None = None,
) -> CompiledSpec:
    """Add the schema factors, split into components, check them and build the spec.

    Args:
        name: the record type's name, for errors (the model's or the IR's).
        model: the pydantic model the spec's records validate against.
        layout: its layout (the source of every schema bound).
        relations: its relations (empty for an IR spec).
        context: the context the relations were compiled for.
        records: every variable, in the order their schema factors are listed.
        strings: the intern table of string constants (every string choice is in it).
        relation_factors: the relations lowered to Z3, in order (names unique).
        ctx: the Z3 context of the terms (None: the main one; hold `MAIN_CONTEXT_LOCK`).
        check_timeout_ms: time limit of each solver check made here (None: none).
        list_bounds: the list bounds an earlier assembly of the same spec found; given, the
            checks are skipped.
        determined: with ``list_bounds``, what that assembly's checks found each component
            determines (`Component.determined`, in component order).
        solver_timeout_ms: time limit of each query of the spec's oracles.
        started: `time.perf_counter()` when the front end began (for ``compile_seconds``).

    Raises:
        UnsatisfiableSpecError: no record satisfies the spec (the core names the factors).
        SpecError: a list needs more items than its default bound, or two factors share a
            name.
        OracleError: the solver could not decide a check (``check_timeout_ms`` ran out).
    """
    t0 = time.perf_counter() if started is None else started
    factors: list[Factor] = []
    formulas: dict[str, z3.BoolRef] = {}
    default_upper: dict[str, z3.BoolRef] = {}  # tracked apart to explain list-bound errors

    def add(factor: Factor, formula: z3.BoolRef) -> None:
        if factor.name in formulas:
            raise SpecError(f"{name}: factor name {factor.name!r} repeats")
        formulas[factor.name] = formula
        factors.append(factor)

    for rf in relation_factors:
        add(Factor(rf.name, "relation", rf.variables, rf.scope), rf.formula)
    with TermBuilder(z3.main_ctx() if ctx is None else ctx) as tb:
        for rec in records.values():
            fname = schema_factor_name(rec)
            if rec.kind == VarKind.LEN:
                node = node_at(layout, rec.path)
                if not isinstance(node, ListLayout):  # pragma: no cover - the front ends check
                    raise SpecError(f"{name}: {path_name(rec.path)} is not a list")
                t = tb.term(rec.term)
                lower = _ge(tb, t, node.min_length)
                upper = _le(tb, t, node.max_length)
                if node.bounded_by_schema:
                    both = tb.app("and", [lower, upper])
                    add(Factor(fname, "length", frozenset({rec.name})), tb.wrap(both))
                else:
                    add(Factor(fname, "length", frozenset({rec.name})), tb.wrap(lower))
                    default_upper[fname] = tb.wrap(upper)
                continue
            bc = bound_constraint(rec, strings, tb)
            if bc is not None:
                add(Factor(fname, "bounds", frozenset({rec.name})), bc)

    components = connected_components(name, records, factors, formulas, default_upper)
    if list_bounds is None:
        checker = _Checker(name, records, formulas, default_upper, factors, ctx, check_timeout_ms)
        list_bounds = checker.check(components)
    elif determined is not None:
        for cp, found in zip(components, determined, strict=True):
            cp.determined = None if found is None else dict(found)
            cp.searched = bool(cp.constraints)  # as the check that found them left it
    return CompiledSpec(
        model=model,
        layout=layout,
        relations=relations,
        context=context,
        records=records,
        strings=strings,
        factors=tuple(factors),
        components=tuple(components),
        list_bounds=list_bounds,
        compile_seconds=time.perf_counter() - t0,
        solver_timeout_ms=solver_timeout_ms,
        context_lock=MAIN_CONTEXT_LOCK if ctx is None else threading.RLock(),
    )


# --------------------------------------------------------------------------- schema factors


def bound_constraint(rec: VarRecord, strings: InternTable, tb: TermBuilder) -> z3.BoolRef | None:
    """The schema bounds of one variable (enum choices, int bounds, string codes), if any.

    Built by ``tb`` (in the Z3 context of the variable's term); every string choice must
    already be interned.
    """
    return _BOUNDS[VAR_SORTS[rec.kind]](rec, strings, tb, tb.term(rec.term))


def _bool_bounds(
    rec: VarRecord, strings: InternTable, tb: TermBuilder, t: Node
) -> z3.BoolRef | None:
    """A Literal of one bool is that bool; a Bool is otherwise unbounded."""
    if rec.choices is not None and len(set(rec.choices)) == 1:
        return tb.wrap(tb.app("eq", [t, tb.bool(bool(rec.choices[0]))]))
    return None


def _code_bounds(
    rec: VarRecord, strings: InternTable, tb: TermBuilder, t: Node
) -> z3.BoolRef | None:
    """The codes of a Literal's strs, or any code of the intern table."""
    if rec.choices is not None:
        codes = sorted({strings.code(cast(str, c)) for c in rec.choices})
        return tb.wrap(_in_set(tb, t, codes))
    return tb.wrap(tb.app("and", [_ge(tb, t, 0), tb.app("lt", [t, tb.int(len(strings))])]))


def _int_bounds(
    rec: VarRecord, strings: InternTable, tb: TermBuilder, t: Node
) -> z3.BoolRef | None:
    """A Literal's ints, or the bounds ``ge``/``le``."""
    if rec.choices is not None:
        return tb.wrap(_in_set(tb, t, sorted({cast(int, c) for c in rec.choices})))
    parts = []
    if rec.ge is not None:
        parts.append(_ge(tb, t, rec.ge))
    if rec.le is not None:
        parts.append(_le(tb, t, rec.le))
    return tb.wrap(tb.conj(parts)) if parts else None


_BOUNDS = {Sort.BOOL: _bool_bounds, Sort.CODE: _code_bounds, Sort.INT: _int_bounds}
"""The schema bounds of a variable, by how the solver holds it."""


def _int_value(rec: VarRecord) -> int:
    if rec.choices:
        return min(cast(int, c) for c in rec.choices)
    if rec.ge is not None:
        return rec.ge
    return rec.le if rec.le is not None and rec.le < 0 else 0


_BOUND_VALUES: dict[Sort, Callable[[VarRecord, InternTable], int | bool]] = {
    Sort.BOOL: lambda rec, strings: bool(rec.choices[0]) if rec.choices else False,
    Sort.CODE: lambda rec, strings: (
        strings.codes.get(cast(str, rec.choices[0]), 0) if rec.choices else 0
    ),
    Sort.INT: lambda rec, strings: _int_value(rec),
}


def bound_value(rec: VarRecord, strings: InternTable) -> int | bool:
    """A value of ``rec``'s term within its schema bounds: `bound_constraint` holds there.

    For a variable whose node a record lacks (an item past its list's length), where any
    value within the bounds will do.
    """
    return _BOUND_VALUES[VAR_SORTS[rec.kind]](rec, strings)


def _ge(tb: TermBuilder, t: Node, value: int) -> Node:
    return tb.app("ge", [t, tb.int(value)])


def _le(tb: TermBuilder, t: Node, value: int) -> Node:
    return tb.app("le", [t, tb.int(value)])


def _in_set(tb: TermBuilder, t: Node, values: list[int]) -> Node:
    if len(values) == 1:
        return tb.app("eq", [t, tb.int(values[0])])
    if values[-1] - values[0] + 1 == len(values):
        return tb.app("and", [_ge(tb, t, values[0]), _le(tb, t, values[-1])])
    return tb.disj([tb.app("eq", [t, tb.int(v)]) for v in values])


def connected_components(
    model: str,
    records: Mapping[str, VarRecord],
    factors: Sequence[Factor],
    formulas: Mapping[str, z3.BoolRef],
    default_upper: Mapping[str, z3.BoolRef],
) -> list[Component]:
    """Group variables into components connected by factors (union-find), with constraints.

    A factor over no variable is a constant: a false one raises `UnsatisfiableSpecError` at
    once.
    """
    parent: dict[str, str] = {v: v for v in records}

    def find(v: str) -> str:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for f in factors:
        vs = list(f.variables)
        for v in vs[1:]:
            ra, rb = find(vs[0]), find(v)
            if ra != rb:
                parent[rb] = ra
    groups: dict[str, set[str]] = {}
    for v in records:
        groups.setdefault(find(v), set()).add(v)
    comp_of_root = {root: i for i, root in enumerate(sorted(groups, key=lambda r: min(groups[r])))}
    comp_factors: list[list[str]] = [[] for _ in comp_of_root]
    for f in factors:
        if f.variables:
            comp_factors[comp_of_root[find(next(iter(f.variables)))]].append(f.name)
        elif z3.is_false(z3.simplify(formulas[f.name])):
            raise UnsatisfiableSpecError([f.name], model)
    out: list[Component] = []
    for root, i in sorted(comp_of_root.items(), key=lambda kv: kv[1]):
        fnames = comp_factors[i]
        cons = [formulas[n] for n in fnames] + [
            default_upper[n] for n in fnames if n in default_upper
        ]
        out.append(Component(i, frozenset(groups[root]), cons, tuple(fnames)))
    return out


# --------------------------------------------------------------------------- checks


class _Checker:
    """The checks of one spec's components (one solver per component, in context ``ctx``)."""

    def __init__(
        self,
        model: str,
        records: Mapping[str, VarRecord],
        formulas: Mapping[str, z3.BoolRef],
        default_upper: Mapping[str, z3.BoolRef],
        factors: Sequence[Factor],
        ctx: z3.Context | None,
        timeout_ms: int | None,
    ) -> None:
        self.model = model
        self.records = records
        self.formulas = formulas
        self.default_upper = default_upper
        self.factors = {f.name: f for f in factors}
        self.ctx = ctx
        self.timeout_ms = timeout_ms

    def check(self, components: Sequence[Component]) -> dict[Path, int]:
        """Check every component; the longest length the relations allow, per list."""
        list_bounds: dict[Path, int] = {}
        for cp in components:
            if not cp.constraints:  # a lone unbounded variable: nothing to check
                continue
            s = z3.SimpleSolver(ctx=self.ctx)
            assert_all(s, cp.constraints)
            witness = self._decide(s)
            if witness is None:
                self._raise_core(cp)
            cp.witness = witness
            cp.determined = self._determined(s, cp)
            cp.searched = True
            fixed = cp.determined or {}
            lists = [self.records[v] for v in sorted(cp.variables)]
            lists = [rec for rec in lists if rec.kind == VarKind.LEN]
            for rec in lists:  # a length the relations fix is its own longest
                if rec.name in fixed:
                    list_bounds[rec.path] = int(fixed[rec.name])
            rest = [rec for rec in lists if rec.name not in fixed]
            if rest:
                list_bounds.update(self._max_lengths(s, rest, cp.witness))
        return list_bounds

    def _determined(self, s: z3.Solver, cp: Component) -> dict[str, int | bool] | None:
        """What ``cp``'s constraints determine, on the solver that checked it (warm, cheap).

        The models the search finds are kept in ``cp.models``.

        None when `BACKBONE_ROUNDS` checks do not settle it or one is undecided: the oracle
        then looks for itself, as it does for a spec whose check was skipped.
        """
        assert cp.witness is not None
        recs = [self.records[v] for v in sorted(cp.variables)]
        cands = [
            (rec.name, rec.term, None if rec.exists is True else self._exists(rec)) for rec in recs
        ]
        models: list[z3.ModelRef] = []
        with TermBuilder(cp.witness.ctx) as tb:
            try:
                nodes = determined_nodes(
                    tb,
                    s,
                    cp.witness,
                    cands,
                    lambda: self._decide(s),
                    BACKBONE_ROUNDS,
                    models,
                )
            except OracleError:  # an undecided check
                return None
            finally:
                cp.models = tuple(models)
            if nodes is None:
                return None
            return {
                name: tb.value(node, boolean=self.records[name].kind in BOOL_KINDS)
                for name, node in nodes.items()
            }

    def _solver(self, s: z3.Solver) -> z3.Solver:
        if self.timeout_ms is not None:
            s.set("timeout", self.timeout_ms)
        return s

    def _decide(self, s: z3.Solver) -> z3.ModelRef | None:
        """A model of what ``s`` holds, or None where it is unsatisfiable."""
        out = z3check.check(s, self.timeout_ms)
        if out.result == z3.unknown:
            within = "" if self.timeout_ms is None else f" within {self.timeout_ms} ms"
            raise OracleError(f"the solver could not decide the spec{within} ({out.reason})")
        return out.model

    def _exists(self, rec: VarRecord) -> z3.BoolRef:
        ex = rec.exists
        return z3.BoolVal(ex, self.ctx) if isinstance(ex, bool) else ex

    def _max_lengths(
        self, s: z3.Solver, lists: Sequence[VarRecord], m: z3.ModelRef
    ) -> dict[Path, int]:
        """The longest length of each list of one component; ``m`` is a model of it.

        One proof for them all: while some list may be longer than its longest so far, a
        check finds a solution where one is, which raises the longest of each list it beats;
        the check that finds none proves every longest so far is the longest.
        """
        best: dict[str, int] = {}
        for rec in lists:
            if rec.le is None:  # pragma: no cover - length records always have a bound
                raise SpecError(f"{self.model}: {rec.name} has no upper bound")
            best[rec.name] = self._length_in(rec, m)
        while True:
            short = [rec for rec in lists if best[rec.name] < cast(int, rec.le)]
            if not short:
                break
            s.push()
            s.add(
                z3.Or(
                    *(
                        z3.And(self._exists(rec), cast(z3.ArithRef, rec.term) > best[rec.name])
                        for rec in short
                    )
                )
            )
            found = self._decide(s)
            if found is not None:
                for rec in short:
                    best[rec.name] = max(best[rec.name], self._length_in(rec, found))
            s.pop()
            if found is None:
                break
        return {rec.path: max(best[rec.name], 0) for rec in lists}

    def _length_in(self, rec: VarRecord, m: z3.ModelRef) -> int:
        """The length of ``rec``'s list in ``m`` (0 where the list does not exist)."""
        if not z3.is_true(m.eval(self._exists(rec), model_completion=True)):
            return 0
        return int(cast(z3.IntNumRef, m.eval(rec.term, model_completion=True)).as_long())

    def _raise_core(self, c: Component) -> None:
        s = self._solver(z3.Solver(ctx=self.ctx))
        tracks: dict[str, str] = {}
        lits: list[z3.BoolRef] = []
        for n in c.factor_names:
            lit = z3.Bool(f"__track_{len(tracks)}", self.ctx)
            tracks[str(lit)] = n
            s.add(z3.Implies(lit, self.formulas[n]))
            lits.append(lit)
            if n in self.default_upper:
                lit2 = z3.Bool(f"__track_{len(tracks)}", self.ctx)
                tracks[str(lit2)] = "\x00" + n
                s.add(z3.Implies(lit2, self.default_upper[n]))
                lits.append(lit2)
        r = s.check(*lits)
        if r == z3.unknown:
            raise OracleError(f"the solver could not decide the spec ({s.reason_unknown()})")
        if r != z3.unsat:  # pragma: no cover - the untracked check said unsat
            raise OracleError("inconsistent solver answers while computing an unsat core")
        core = [tracks[str(x)] for x in self._minimal(s, list(s.unsat_core()))]
        for n in core:
            if n.startswith("\x00"):
                lst = n[1:].removeprefix("length bounds of ")
                rec = next(
                    r
                    for r in self.records.values()
                    if r.kind == VarKind.LEN and path_name(r.path) == lst
                )
                others = sorted({x.lstrip("\x00") for x in core if x != n})
                raise SpecError(
                    f"list {lst} needs more than {rec.le} items (the default bound) to satisfy "
                    f"{', '.join(others)}; set Field(max_length=...) on {lst}"
                )
        names = sorted(set(core), key=lambda n: c.factor_names.index(n))
        raise UnsatisfiableSpecError(names, self.model)

    def _minimal(self, s: z3.Solver, core: list[z3.ExprRef]) -> list[z3.ExprRef]:
        """Drop the tracked literals the core does not need, one check each.

        Done here rather than by Z3's ``core.minimize``, which ran unbounded inside
        ``unsat_core()`` on a small spec (a fresh-clone run hung there): each check is limited
        to `_CORE_CHECK_MS`, and a literal whose check runs out stays in the core (still a
        core, perhaps not a minimal one).
        """
        s.set("timeout", _CORE_CHECK_MS)
        keep = list(core)
        for lit in list(core):
            trial = [x for x in keep if not x.eq(lit)]
            if s.check(*trial) == z3.unsat:
                keep = trial
        return keep
