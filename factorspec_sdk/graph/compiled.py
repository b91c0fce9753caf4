"""The compiled spec: the factor graph of a record type, its variables, factors and components.

`CompiledSpec` is what both spec entry points produce (`compile_spec` from a Pydantic model,
`spec_from_ir` from the relation IR), through one assembly (`factorspec_sdk.graph.assemble`):
variables by name with their bounds and domains, relation/bound/length factors, connected
components with their Z3 constraints, and the list bounds the relations allow. An `Oracle`
(`CompiledSpec.new_oracle`) answers feasibility queries on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, cast

import z3
from pydantic import BaseModel

from factorspec_sdk.graph.z3context import MAIN_CONTEXT_LOCK
from factorspec_sdk.relations.compiler import InternTable, VarRecord
from factorspec_sdk.relations.decorator import RelationSet
from factorspec_sdk.relations.display import variable_text
from factorspec_sdk.relations.kinds import BOOL_KINDS, VarKind
from factorspec_sdk.relations.layout import (
    ListLayout,
    ObjectLayout,
    Path,
    RootLayout,
    UnionLayout,
    branch_part,
    node_at,
    path_name,
)
from factorspec_sdk.relations.restrictions import Restriction, restrictions

if TYPE_CHECKING:
    from factorspec_sdk.graph.moves import MoveIndex
    from factorspec_sdk.graph.oracle import Oracle

__all__ = [
    "Assignment",
    "AtLeast",
    "AtMost",
    "CompiledSpec",
    "Component",
    "Fact",
    "Factor",
    "FactorKind",
    "Traits",
    "Value",
    "VarInfo",
    "VarKind",
]

Value = int | bool | str
FactorKind = Literal["relation", "bounds", "length"]


@dataclass(frozen=True, slots=True)
class AtLeast:
    """A fact about a length variable: ``len >= n`` (the list or string has ``n`` or more)."""

    n: int


@dataclass(frozen=True, slots=True)
class AtMost:
    """A fact about a length variable: ``len <= n``."""

    n: int


Fact = tuple[str, "Value | AtLeast | AtMost"]
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
    """A constraint over variables: a relation, the bounds of a leaf or of a list length.

    ``scope``: a relation about one place of the record (a ``uniqueItems`` list): a record
    without that place (an optional key at or above it left out) satisfies it, and its
    variables lie at or under it (`RelationFactor.scope`). None: the relation reads the
    record as Pydantic fills it, defaults included.
    """

    name: str
    kind: FactorKind
    variables: frozenset[str]
    scope: Path | None = None


@dataclass(slots=True)
class Traits:
    """What an oracle finds of a component's constraints at its first solver, kept for later ones.

    The specs rebuilt from one IR document share their components' traits
    (`factorspec_sdk.ir.build.CheckedIR`): a request for a document served before finds
    them without walking the constraints again.

    Attributes:
        linear: the constraints are linear integer arithmetic (Z3's ``is-lia`` probe:
            products and divisions by constants only;
            `factorspec_sdk.graph.component_solver.linear`; None: not found yet); such a
            component's long searches go on in flat copies of the solver
            (`factorspec_sdk.graph.component_solver.FLAT_AFTER`).
        tunable: ``linear``, over variables whose bounds fit in 32 bits
            (`factorspec_sdk.graph.component_solver.small_numbers`), dividing by no constant
            of `factorspec_sdk.graph.component_solver.TUNED_DIVISOR` or more, found with it;
            such a component's oracle solvers start tuned
            (`factorspec_sdk.graph.component_solver.TUNED_PARAMS`).
        rounds: the constraints divide by a constant of
            `factorspec_sdk.graph.component_solver.TUNED_DIVISOR` or more (a rounding to a
            unit: an amount to the cent); such a component's checks restart fresh after
            `factorspec_sdk.graph.component_solver.NONLINEAR_BUDGET_MS`, as a nonlinear
            one's do.
    """

    linear: bool | None = None
    tunable: bool | None = None
    rounds: bool | None = None


@dataclass(slots=True)
class Component:
    """One connected component: its variables, constraints and the names of its factors.

    The constraints live in the spec's Z3 context: the main one for `compile_spec`, a private
    one for `spec_from_ir`.

    Attributes:
        witness: a model of the constraints, found when the spec was checked (None: the
            check was skipped, its result cached); an oracle's first completion.
        determined: what the constraints alone determine, found by the same check on the
            same solver (`factorspec_sdk.graph.backbone`): each variable with one value in
            every solution, as its term's value (an int, a bool, a str variable's code).
            None: not known (the check was skipped, or its rounds did not settle it).
        models: the other models of the constraints that search found (each differs from
            the witness somewhere): more completions an oracle knows without a check.
        searched: the spec's check searched for ``determined``. Where that search did not
            settle it, an oracle does not search again at no facts (the same search from
            the same model, a few of the hardest checks of a record); where the check was
            skipped, an oracle finds it itself at its first query.
        traits: whether the constraints are linear and whether the component's solvers start
            tuned, found at an oracle's first solver of the component (`Traits`).
        moves: what a move of a model of the component reads of its constraints
            (`factorspec_sdk.graph.moves.MoveIndex`), found at an oracle's first move (None:
            not yet).
    """

    index: int
    variables: frozenset[str]
    constraints: list[z3.BoolRef]
    factor_names: tuple[str, ...]
    witness: z3.ModelRef | None = None
    determined: dict[str, int | bool] | None = None
    searched: bool = False
    models: tuple[z3.ModelRef, ...] = ()
    traits: Traits = field(default_factory=Traits)
    moves: MoveIndex | None = None


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
        context_lock: held by whoever reads the spec's terms while other threads may too (an
            oracle copying them into its own context): `MAIN_CONTEXT_LOCK` for a spec in
            Z3's main context, a lock of the spec's own for one in a private context (so
            requests' oracles in different threads do not wait on each other).
    """

    def __init__(
        self,
        *,
        model: type[BaseModel],
        layout: RootLayout,
        relations: RelationSet,
        context: object,
        records: Mapping[str, VarRecord],
        strings: InternTable,
        factors: tuple[Factor, ...],
        components: tuple[Component, ...],
        list_bounds: Mapping[Path, int],
        compile_seconds: float,
        solver_timeout_ms: int | None = None,
        context_lock: AbstractContextManager[object] = MAIN_CONTEXT_LOCK,
    ) -> None:
        self.context_lock = context_lock
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
        self._strlen_by_path: dict[Path, str] = {}
        self._null_by_path: dict[Path, str] = {}
        self._same_by_path: dict[Path, list[tuple[str, Path]]] = {}
        self._affix_by_path: dict[Path, list[tuple[str, str, str]]] = {}
        for n, r in visible.items():
            if n.startswith("null("):
                self._null_by_path[r.path] = n
            else:
                self._INDEX.get(r.kind, CompiledSpec._index_leaf)(self, n, r)
        mentions: dict[str, list[str]] = {}
        below: dict[str, int] = {}  # per variable: the shortest prefix of its path read
        for f in factors:
            if f.kind == "relation":
                depth = 0 if f.scope is None else len(f.scope) + 1
                for v in f.variables:
                    mentions.setdefault(v, []).append(f.name)
                    below[v] = min(below.get(v, depth), depth)
        self._mentions = {v: tuple(ns) for v, ns in mentions.items()}
        self._reads = tuple(
            (p, r.kind) for r in self._records.values() for p in (r.path, r.other) if p is not None
        )
        self._read_under = {
            p[:k]
            for n, r in self._records.items()
            for p in (r.path, r.other)
            if p is not None
            for k in range(below.get(n, 0), len(p) + 1)
        }

    # ------------------------------------------------------------------ lookups

    def _index_leaf(self, n: str, r: VarRecord) -> None:
        self._by_path[r.path] = n

    def _index_length(self, n: str, r: VarRecord) -> None:
        self._len_by_path[r.path] = n

    def _index_text_length(self, n: str, r: VarRecord) -> None:
        self._strlen_by_path[r.path] = n

    def _index_affix(self, n: str, r: VarRecord) -> None:  # listed under its leaf
        assert r.affix is not None
        self._affix_by_path.setdefault(r.path, []).append((n, *r.affix))

    def _index_same(self, n: str, r: VarRecord) -> None:  # listed under both leaves
        assert r.other is not None
        self._same_by_path.setdefault(r.path, []).append((n, r.other))
        self._same_by_path.setdefault(r.other, []).append((n, r.path))

    _INDEX: Mapping[VarKind, Callable[[CompiledSpec, str, VarRecord], None]] = {
        VarKind.LEN: _index_length,
        VarKind.STRLEN: _index_text_length,
        VarKind.DATEPART: lambda self, n, r: None,  # year(d)...: the date's variable is d's
        VarKind.AFFIX: _index_affix,
        VarKind.SAME: _index_same,
    }
    """Where each kind of variable is listed by path (a leaf's value: `_index_leaf`)."""

    def _within_bounds(self, path: Path) -> bool:
        for k, part in enumerate(path):
            if isinstance(part, int) and part >= self.max_length(path[:k]):
                return False
        return True

    def _var_info(self, r: VarRecord) -> VarInfo:
        domain: tuple[Value, ...] | None = None
        if r.choices is not None:
            domain = tuple(cast(Value, c) for c in r.choices)
        elif r.kind in BOOL_KINDS:
            domain = (False, True)
        return VarInfo(r.name, r.path, r.kind, r.ge, r.le, domain)

    def variable_for(self, path: Path) -> str | None:
        """The variable of the leaf at ``path`` (concrete indices), if relations read it."""
        return self._by_path.get(tuple(path))

    def same_variables(self, path: Path) -> tuple[tuple[str, Path], ...]:
        """The ``same(a, b)`` variables of the free str leaf at ``path``, with the other leaf.

        See `codes.same_text`: each says whether the two leaves hold the same text.
        """
        return tuple(self._same_by_path.get(tuple(path), ()))

    def affix_variables(self, path: Path) -> tuple[tuple[str, str, str], ...]:
        """The affix variables of the free str leaf at ``path`` (see `codes.affix`).

        Each is (variable, ``startswith`` or ``endswith``, constant).
        """
        return tuple(self._affix_by_path.get(tuple(path), ()))

    def length_variable(self, path: Path) -> str | None:
        """The length variable of the list at ``path`` (``len(stays)``), if relations read it."""
        return self._len_by_path.get(tuple(path))

    def string_length_variable(self, path: Path) -> str | None:
        """The length variable of the free str at ``path`` (``len(title)``), if read."""
        return self._strlen_by_path.get(tuple(path))

    def null_variable(self, path: Path) -> str | None:
        """The Bool variable ``null(path)`` of an Optional node, if relations read it."""
        return self._null_by_path.get(tuple(path))

    def reads_under(self, path: Path) -> bool:
        """Whether a relation reads a variable at or under ``path`` (concrete indices).

        Where none does, the writer may leave an optional key there out freely
        (`factorspec_sdk.relations.layout.omission`). A relation about one place of the record
        (`Factor.scope`, a ``uniqueItems`` list) reads only under that place: leaving out
        the key at or above it leaves the place absent, which satisfies the relation (its
        variables, all under the key, stay free).
        """
        return tuple(path) in self._read_under

    def restrictions(self) -> list[Restriction]:
        """Where the writer writes less than the schema allows (`relations.restrictions`)."""
        return restrictions(self.layout, self._reads, self._read_under)

    def max_length(self, path: Path) -> int:
        """The effective bound of the list at ``path`` (schema, default or tightened)."""
        path = tuple(path)
        bound = self._list_bounds.get(path)
        if bound is not None:
            return bound
        node = node_at(self.layout, path)
        if not isinstance(node, ListLayout):
            raise KeyError(f"{path_name(path)} is not a list")
        return node.max_length

    @property
    def list_bounds(self) -> Mapping[Path, int]:
        """The longest length the relations allow, per list read by a relation."""
        return dict(self._list_bounds)

    @property
    def determined(self) -> list[dict[str, int | bool] | None]:
        """What the relations alone determine, per component (`Component.determined`)."""
        return [None if c.determined is None else dict(c.determined) for c in self._components]

    def component_of(self, var: str) -> int:
        """Index of the component holding ``var``.

        Raises:
            KeyError: ``var`` is no variable of the spec.
        """
        try:
            return self._comp_of[var]
        except KeyError:
            raise KeyError(f"unknown variable {var!r}") from None

    def component(self, index: int) -> Component:
        """The component at ``index`` (0 to ``len(components) - 1``; `component_of` a variable's).

        Its constraints (in the spec's Z3 context: read them under ``context_lock``) and what
        the spec's check found (witness, models, determined values), for the oracle.
        """
        return self._components[index]

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
            text = variable_text(self.layout, v.name, v.path, v.kind, v.ge, v.le)
            if v.domain is not None and v.kind not in BOOL_KINDS:
                shown = ", ".join(map(repr, v.domain[:8])) + (", ..." if len(v.domain) > 8 else "")
                text += f" in {{{shown}}}"
            lines.append(f"  {v.name}: {text}")
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
        found = self.restrictions()
        lines.append(f"restrictions ({len(found)}): where the writer writes less than the schema")
        for r in found:
            lines.append(f"  {r.path}: {r.what}")
            lines.append(f"    to lift it: {r.lift}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"CompiledSpec({self.model.__name__}, {len(self.variables)} variables, "
            f"{len(self.factors)} factors, {len(self.components)} components)"
        )


def _order(r: VarRecord) -> tuple[object, ...]:
    parts = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in r.path)
    return (parts, r.name)


def _list_paths(node: object, path: Path) -> list[Path]:
    out: list[Path] = []
    if isinstance(node, ObjectLayout):
        for f in node.fields:
            out += _list_paths(f.node, (*path, f.name))
    elif isinstance(node, ListLayout):
        out.append(path)
    elif isinstance(node, UnionLayout):
        for b in node.branches:
            out += _list_paths(b, (*path, branch_part(b.model)))
    return out
