"""The compiled spec: variables, factors, connected components and their Z3 constraints.

`compile_spec` lowers a model's relations (for one context) with
`factorspec_sdk.relations.compiler.RelationCompiler`, adds the schema bounds of every
variable as factors, splits the factor graph into connected components, checks that the spec
is satisfiable (raising `UnsatisfiableSpecError` with an unsat core of factor names) and
tightens list bounds to the longest length the relations allow.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

import z3
from pydantic import BaseModel

from factorspec_sdk.errors import (
    ContextError,
    OracleError,
    SpecError,
    UnsatisfiableSpecError,
)
from factorspec_sdk.relations.compiler import (
    AND,
    OTHER_CODE,
    CompiledRelation,
    InternTable,
    RelationCompiler,
    VarRecord,
    to_bool,
)
from factorspec_sdk.relations.decorator import RelationSet, relations_of
from factorspec_sdk.relations.layout import (
    ListLayout,
    ObjectLayout,
    Path,
    build_layout,
    path_name,
)

if TYPE_CHECKING:
    from factorspec_sdk.graph.oracle import Oracle

__all__ = [
    "AtLeast",
    "Assignment",
    "CompiledSpec",
    "Fact",
    "Factor",
    "FactorKind",
    "Value",
    "VarInfo",
    "VarKind",
    "compile_spec",
]

Value = int | bool | str
VarKind = Literal["int", "bool", "str", "len"]
FactorKind = Literal["relation", "bounds", "length"]


@dataclass(frozen=True, slots=True)
class AtLeast:
    """A fact about a length variable: ``len >= n`` (the list has at least ``n`` items)."""

    n: int


Fact = tuple[str, "Value | AtLeast"]
Assignment = tuple[Fact, ...]


@dataclass(frozen=True, slots=True)
class VarInfo:
    """A variable of the factor graph.

    Attributes:
        name: ``stays[2].city``, ``len(stays)``, ``null(note)``.
        path: layout path of the leaf (or of the list, for a length; of the node, for null).
        kind: ``int``, ``bool``, ``str`` or ``len``.
        ge: inclusive lower bound (ints and lengths).
        le: inclusive upper bound (ints and lengths).
        domain: the finite set of values the schema allows (enum leaves; for a free str,
            the strings the relations mention), else None.
    """

    name: str
    path: Path
    kind: VarKind
    ge: int | None
    le: int | None
    domain: tuple[Value, ...] | None


@dataclass(frozen=True, slots=True)
class Factor:
    """A constraint over variables: a relation, the bounds of a leaf or of a list length."""

    name: str
    kind: FactorKind
    variables: frozenset[str]


@dataclass(slots=True)
class _Component:
    """One connected component: its variables and constraints (main Z3 context)."""

    index: int
    variables: frozenset[str]
    constraints: list[z3.BoolRef]
    factor_names: tuple[str, ...]


class CompiledSpec:
    """A model's relations lowered to a factor graph with Z3 constraints (for one context).

    Attributes:
        model: the model class.
        layout: its layout.
        relations: its relations.
        variables: variables by name.
        factors: relation, bound and length factors.
        components: connected components (sets of variable names).
        compile_seconds: time spent compiling.
        solver_timeout_ms: time limit of each solver query of this spec's oracles (None:
            none); a query that runs out raises `OracleError`. Per spec, never process-wide.
    """

    def __init__(
        self,
        *,
        model: type[BaseModel],
        layout: ObjectLayout,
        relations: RelationSet,
        context: object,
        records: Mapping[str, VarRecord],
        strings: InternTable,
        factors: tuple[Factor, ...],
        components: tuple[_Component, ...],
        list_bounds: Mapping[Path, int],
        compile_seconds: float,
        solver_timeout_ms: int | None = None,
    ) -> None:
        if solver_timeout_ms is not None and solver_timeout_ms < 1:
            raise ValueError(f"solver_timeout_ms must be >= 1, got {solver_timeout_ms}")
        self.solver_timeout_ms = solver_timeout_ms
        self.model = model
        self.layout = layout
        self.relations = relations
        self.context = context
        self.factors = factors
        self.compile_seconds = compile_seconds
        self._records = dict(records)
        self.strings = strings
        self._components = components
        self._list_bounds = dict(list_bounds)
        self._comp_of: dict[str, int] = {}
        for comp in components:
            for v in comp.variables:
                self._comp_of[v] = comp.index
        self.components: tuple[frozenset[str], ...] = tuple(c.variables for c in components)
        visible = {n: r for n, r in self._records.items() if self._within_bounds(r.path)}
        self.variables: Mapping[str, VarInfo] = {
            n: self._var_info(r) for n, r in sorted(visible.items(), key=lambda kv: _order(kv[1]))
        }
        self._by_path: dict[Path, str] = {}
        self._len_by_path: dict[Path, str] = {}
        self._null_by_path: dict[Path, str] = {}
        for n, r in visible.items():
            if r.kind == "len":
                self._len_by_path[r.path] = n
            elif n.startswith("null("):
                self._null_by_path[r.path] = n
            else:
                self._by_path[r.path] = n
        mentions: dict[str, list[str]] = {}
        for f in factors:
            if f.kind == "relation":
                for v in f.variables:
                    mentions.setdefault(v, []).append(f.name)
        self._mentions = {v: tuple(ns) for v, ns in mentions.items()}

    # ------------------------------------------------------------------ lookups

    def _within_bounds(self, path: Path) -> bool:
        for k, part in enumerate(path):
            if isinstance(part, int) and part >= self.max_length(path[:k]):
                return False
        return True

    def _var_info(self, r: VarRecord) -> VarInfo:
        domain: tuple[Value, ...] | None = None
        if r.choices is not None:
            domain = tuple(cast(Value, c) for c in r.choices)
        elif r.free_str:
            domain = tuple(sorted(self.strings.strings[1:]))
        elif r.kind == "bool":
            domain = (False, True)
        return VarInfo(r.name, r.path, r.kind, r.ge, r.le, domain)

    def variable_for(self, path: Path) -> str | None:
        """The variable of the leaf at ``path`` (concrete indices), if relations read it."""
        return self._by_path.get(tuple(path))

    def length_variable(self, path: Path) -> str | None:
        """The length variable of the list at ``path`` (``len(stays)``), if relations read it."""
        return self._len_by_path.get(tuple(path))

    def null_variable(self, path: Path) -> str | None:
        """The Bool variable ``null(path)`` of an Optional node, if relations read it."""
        return self._null_by_path.get(tuple(path))

    def max_length(self, path: Path) -> int:
        """The effective bound of the list at ``path`` (schema, default or tightened)."""
        path = tuple(path)
        bound = self._list_bounds.get(path)
        if bound is not None:
            return bound
        node = _node_at(self.layout, path)
        if not isinstance(node, ListLayout):
            raise KeyError(f"{path_name(path)} is not a list")
        return node.max_length

    def component_of(self, var: str) -> int:
        """Index of the component holding ``var``."""
        try:
            return self._comp_of[var]
        except KeyError:
            raise KeyError(f"unknown variable {var!r}") from None

    def record(self, var: str) -> VarRecord:
        """The Z3-level record of a variable."""
        return self._records[var]

    def relations_mentioning(self, var: str) -> tuple[str, ...]:
        """Names of the relation factors that read ``var``."""
        return self._mentions.get(var, ())

    def factor_formulas(self) -> dict[str, z3.BoolRef]:
        """The Z3 formula of each factor, by name (for export, e.g. the relation IR).

        A list without a schema bound also has a default upper bound on its length in its
        component; that bound is implied by the layout and is not part of the factor's formula.
        Factors over no variable (constant relations that hold) have no formula here.
        """
        out: dict[str, z3.BoolRef] = {}
        for comp in self._components:
            out.update(zip(comp.factor_names, comp.constraints))
        return out

    def new_oracle(self) -> Oracle:
        """A fresh oracle (one per request; not thread-safe; it owns its Z3 context)."""
        from factorspec_sdk.graph.oracle import Oracle

        return Oracle(self)

    # ------------------------------------------------------------------ text

    def describe(self) -> str:
        """A human-readable account of the graph."""
        lines = [f"spec of {self.model.__name__}: compiled in {self.compile_seconds * 1000:.1f} ms"]
        lines.append(f"variables ({len(self.variables)}):")
        for v in self.variables.values():
            extra = ""
            if v.kind in ("int", "len"):
                extra = f" in [{v.ge}, {v.le}]"
            if v.domain is not None and v.kind != "bool":
                shown = ", ".join(map(repr, v.domain[:8])) + (", ..." if len(v.domain) > 8 else "")
                extra += f" in {{{shown}}}"
            lines.append(f"  {v.name}: {v.kind}{extra}")
        rel = [f for f in self.factors if f.kind == "relation"]
        lines.append(f"factors: {len(rel)} relations, {len(self.factors) - len(rel)} bounds")
        for f in rel:
            lines.append(f"  {f.name}: {len(f.variables)} variables")
        lines.append(f"components ({len(self.components)}):")
        for i, c in enumerate(self._components):
            names = ", ".join(n for n in c.factor_names)
            lines.append(f"  #{i}: {len(c.variables)} variables; {names}")
        lists = _list_paths(self.layout, ())
        if lists:
            lines.append("list bounds:")
            for p in lists:
                lines.append(f"  {path_name(p)}: at most {self.max_length(p)} items")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"CompiledSpec({self.model.__name__}, {len(self.variables)} variables, "
            f"{len(self.factors)} factors, {len(self.components)} components)"
        )


def _order(r: VarRecord) -> tuple[object, ...]:
    parts = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in r.path)
    return (parts, r.name)


def _node_at(layout: ObjectLayout, path: Path) -> object:
    node: object = layout
    for part in path:
        if isinstance(part, int):
            if not isinstance(node, ListLayout):
                raise KeyError(path_name(path))
            node = node.item
        else:
            if not isinstance(node, ObjectLayout):
                raise KeyError(path_name(path))
            node = node.field(part).node
    return node


def _nested_relations(node: object, path: Path) -> list[tuple[Path, RelationSet]]:
    """Relations of nested models, at every concrete path (list items up to the bound)."""
    out: list[tuple[Path, RelationSet]] = []
    if isinstance(node, ObjectLayout):
        if path:
            rs = relations_of(node.model)
            if len(rs):
                out.append((path, rs))
        for f in node.fields:
            out += _nested_relations(f.node, (*path, f.name))
    elif isinstance(node, ListLayout):
        for i in range(node.max_length):
            out += _nested_relations(node.item, (*path, i))
    return out


def _list_paths(node: object, path: Path) -> list[Path]:
    out: list[Path] = []
    if isinstance(node, ObjectLayout):
        for f in node.fields:
            out += _list_paths(f.node, (*path, f.name))
    elif isinstance(node, ListLayout):
        out.append(path)
    return out


# --------------------------------------------------------------------------- compile


_CACHE: OrderedDict[Hashable, CompiledSpec] = OrderedDict()
_CACHE_SIZE = 64
_LOCK = threading.RLock()


def compile_spec(model: type[BaseModel], context: object = None) -> CompiledSpec:
    """Compile ``model``'s relations for ``context`` (cached per model and context value).

    Raises:
        RelationDefinitionError: a relation uses a construct outside the supported subset.
        ContextError: a relation needs a context and none is given, or it lacks a value.
        UnsatisfiableSpecError: no record satisfies the spec (the core names the factors).
        SpecError: a list needs more items than its bound, or a str field read by a relation
            has no finite domain.
    """
    try:
        key: Hashable = (model, _freeze(context, 0))
        hash(key)
    except (TypeError, _Unfreezable):
        key = None
    with _LOCK:
        if key is not None and key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
        spec = _compile(model, context)
        if key is not None:
            _CACHE[key] = spec
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        return spec


class _Unfreezable(Exception):
    pass


def _freeze(obj: object, depth: int) -> Hashable:
    if depth > 20:
        raise _Unfreezable
    if obj is None or isinstance(obj, (bool, int, float, str, bytes, enum.Enum)):
        return (type(obj).__name__, obj)
    if isinstance(obj, BaseModel):
        fields = type(obj).model_fields
        return (
            type(obj),
            tuple((n, _freeze(getattr(obj, n), depth + 1)) for n in fields),
        )
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (
            type(obj),
            tuple(
                (f.name, _freeze(getattr(obj, f.name), depth + 1)) for f in dataclasses.fields(obj)
            ),
        )
    if isinstance(obj, Mapping):
        return (
            "map",
            tuple((_freeze(k, depth + 1), _freeze(v, depth + 1)) for k, v in obj.items()),
        )
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(_freeze(x, depth + 1) for x in obj))
    if isinstance(obj, (set, frozenset)):
        return ("set", frozenset(_freeze(x, depth + 1) for x in obj))
    if hasattr(obj, "__dict__"):
        return (type(obj), _freeze(vars(obj), depth + 1))
    raise _Unfreezable


def bound_constraint(
    rec: VarRecord, strings: InternTable, ctx: z3.Context | None = None
) -> z3.BoolRef | None:
    """The schema bounds of one variable (enum choices, int bounds, string codes), if any.

    Shared by `compile_spec` and the relation IR's rebuild (`factorspec_sdk.ir.build`), which
    builds in a private Z3 context ``ctx``; every string choice must already be interned.
    """
    t = rec.term
    if rec.kind == "bool":
        if rec.choices is not None and len(set(rec.choices)) == 1:
            return cast(z3.BoolRef, t == z3.BoolVal(bool(rec.choices[0]), ctx))
        return None
    if rec.kind == "str":
        if rec.choices is not None:
            codes = sorted({strings.code(cast(str, c)) for c in rec.choices})
            return _in_set(cast(z3.ArithRef, t), codes)
        return z3.And(t >= 0, t < len(strings))
    if rec.choices is not None:
        return _in_set(cast(z3.ArithRef, t), sorted({cast(int, c) for c in rec.choices}))
    parts = []
    if rec.ge is not None:
        parts.append(t >= rec.ge)
    if rec.le is not None:
        parts.append(t <= rec.le)
    if not parts:
        return None
    return z3.And(*parts) if len(parts) > 1 else parts[0]


def _in_set(t: z3.ArithRef, values: list[int]) -> z3.BoolRef:
    if len(values) == 1:
        return cast(z3.BoolRef, t == values[0])
    if values[-1] - values[0] + 1 == len(values):
        return z3.And(t >= values[0], t <= values[-1])
    return z3.Or(*(t == v for v in values))


def _check(solver: z3.Solver) -> z3.CheckSatResult:
    r = solver.check()
    if r == z3.unknown:
        raise OracleError(f"the solver could not decide the spec: {solver.reason_unknown()}")
    return r


def _compile(model: type[BaseModel], context: object) -> CompiledSpec:
    t0 = time.perf_counter()
    layout = build_layout(model)
    rels = relations_of(model)
    if rels.needs_context and context is None:
        names = ", ".join(r.qualname for r in rels if r.takes_context)
        raise ContextError(
            f"{model.__name__} has relations that read a context ({names}); pass context=..."
        )
    comp = RelationCompiler(layout, context)
    compiled: list[CompiledRelation] = [comp.compile(r) for r in rels]
    relation_names = [r.name for r in rels]
    for path, nested in _nested_relations(layout, ()):
        if nested.needs_context and context is None:
            raise ContextError(
                f"{nested.model.__name__} (at {path_name(path)}) has relations that read a "
                "context; pass context=..."
            )
        for r in nested:
            compiled.append(comp.compile(r, path))
            relation_names.append(f"{r.name} ({path_name(path)})")
    records = comp.vars
    strings = comp.strings

    # -- factors
    factors: list[Factor] = []
    formulas: dict[str, z3.BoolRef] = {}
    default_upper: dict[str, z3.BoolRef] = {}  # tracked apart to explain list-bound errors
    for c, name in zip(compiled, relation_names, strict=True):
        factors.append(Factor(name, "relation", c.variables))
        formulas[name] = c.formula
    for rec in records.values():
        if rec.kind == "len":
            fname = f"length bounds of {path_name(rec.path)}"
            node = _node_at(layout, rec.path)
            assert isinstance(node, ListLayout)
            t = cast(z3.ArithRef, rec.term)
            lower = t >= node.min_length
            upper = t <= node.max_length
            if node.bounded_by_schema:
                formulas[fname] = z3.And(lower, upper)
            else:
                formulas[fname] = lower
                default_upper[fname] = upper
            factors.append(Factor(fname, "length", frozenset({rec.name})))
            continue
        bc = bound_constraint(rec, strings)
        if bc is not None:
            fname = f"bounds of {rec.name}"
            formulas[fname] = bc
            factors.append(Factor(fname, "bounds", frozenset({rec.name})))

    # -- components (union-find over relation factors)
    components = connected_components(model.__name__, records, factors, formulas, default_upper)

    # -- satisfiability, unsat cores, list bounds, str domains
    list_bounds: dict[Path, int] = {}
    for cp in components:
        s = z3.SimpleSolver()
        s.add(*cp.constraints)
        if _check(s) == z3.unsat:
            _raise_core(model, cp, formulas, default_upper, records)
        m = s.model()
        _check_str_domains(s, cp, records, compiled, strings)
        for v in sorted(cp.variables):
            rec = records[v]
            if rec.kind != "len":
                continue
            list_bounds[rec.path] = _max_length(s, rec, m)
    # list bounds of lists that exist only under a parent beyond its own bound are moot.
    seconds = time.perf_counter() - t0
    return CompiledSpec(
        model=model,
        layout=layout,
        relations=rels,
        context=context,
        records=records,
        strings=strings,
        factors=tuple(factors),
        components=tuple(components),
        list_bounds=list_bounds,
        compile_seconds=seconds,
    )


def _max_length(s: z3.Solver, rec: VarRecord, m: z3.ModelRef) -> int:
    t = cast(z3.ArithRef, rec.term)
    exists = to_bool(rec.exists)
    best = 0
    if z3.is_true(m.eval(exists, model_completion=True)):
        best = cast(z3.IntNumRef, m.eval(t, model_completion=True)).as_long()
    assert rec.le is not None
    while best < rec.le:
        s.push()
        s.add(exists, t > best)
        r = _check(s)
        if r == z3.sat:
            best = cast(z3.IntNumRef, s.model().eval(t, model_completion=True)).as_long()
        s.pop()
        if r == z3.unsat:
            break
    return max(best, 0)


def _raise_core(
    model: type[BaseModel],
    c: _Component,
    formulas: Mapping[str, z3.BoolRef],
    default_upper: Mapping[str, z3.BoolRef],
    records: Mapping[str, VarRecord],
) -> None:
    s = z3.Solver()
    s.set("core.minimize", True)
    tracks: dict[str, str] = {}
    for n in c.factor_names:
        lit = z3.Bool(f"__track_{len(tracks)}")
        tracks[str(lit)] = n
        s.assert_and_track(formulas[n], lit)
        if n in default_upper:
            lit2 = z3.Bool(f"__track_{len(tracks)}")
            tracks[str(lit2)] = "\x00" + n
            s.assert_and_track(default_upper[n], lit2)
    if _check(s) != z3.unsat:  # pragma: no cover - the untracked check said unsat
        raise OracleError("inconsistent solver answers while computing an unsat core")
    core = [tracks[str(x)] for x in s.unsat_core()]
    for n in core:
        if n.startswith("\x00"):
            lst = n[1:].removeprefix("length bounds of ")
            rec = next(r for r in records.values() if r.kind == "len" and path_name(r.path) == lst)
            others = sorted({x.lstrip("\x00") for x in core if x != n})
            raise SpecError(
                f"list {lst} needs more than {rec.le} items (the default bound) to satisfy "
                f"{', '.join(others)}; set Field(max_length=...) on {lst}"
            )
    names = sorted(set(core), key=lambda n: c.factor_names.index(n))
    raise UnsatisfiableSpecError(names, model.__name__)


def _check_str_domains(
    s: z3.Solver,
    c: _Component,
    records: Mapping[str, VarRecord],
    compiled: list[CompiledRelation],
    strings: InternTable,
) -> None:
    free = [records[v] for v in sorted(c.variables) if records[v].free_str]
    if not free:
        return
    s.push()
    s.add(z3.Or(*(to_bool(AND(r.exists, cast(z3.BoolRef, r.term == OTHER_CODE))) for r in free)))
    r = _check(s)
    if r == z3.sat:
        m = s.model()
        bad = next(
            x
            for x in free
            if z3.is_true(
                m.eval(to_bool(AND(x.exists, cast(z3.BoolRef, x.term == OTHER_CODE))), True)
            )
        )
        rels = [cr.info.qualname for cr in compiled if bad.name in cr.variables]
        s.pop()
        raise SpecError(
            f"field {bad.name} takes part in relation {', '.join(rels)} but has no finite "
            "domain: the relations allow strings they never name. Give it a finite domain "
            "(a Literal or Enum type, or a relation like `x in context.values`)"
        )
    s.pop()


def connected_components(
    model: str,
    records: Mapping[str, VarRecord],
    factors: Sequence[Factor],
    formulas: Mapping[str, z3.BoolRef],
    default_upper: Mapping[str, z3.BoolRef],
) -> list[_Component]:
    """Group variables into components connected by factors (union-find), with constraints.

    A factor over no variable is a constant: a false one raises `UnsatisfiableSpecError` at
    once. Shared by `compile_spec` and the relation IR's rebuild (`factorspec_sdk.ir.build`).
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
    out: list[_Component] = []
    for root, i in sorted(comp_of_root.items(), key=lambda kv: kv[1]):
        fnames = comp_factors[i]
        cons = [formulas[n] for n in fnames] + [
            default_upper[n] for n in fnames if n in default_upper
        ]
        out.append(_Component(i, frozenset(groups[root]), cons, tuple(fnames)))
    return out
