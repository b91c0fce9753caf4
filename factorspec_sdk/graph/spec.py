"""The Pydantic-model front end of the spec back end: `SpecCompiler` and its caches.

`SpecCompiler.compile_spec` walks a model into its layout, lowers its relations (and those
of nested models, at every concrete path) for one context (or, for a context shape seen
before, binds the context's ints and dates into that shape's lowering: the compiler's
``forms``) with `factorspec_sdk.relations.compiler.RelationCompiler`, and hands the variables
and relation formulas to the one assembly (`factorspec_sdk.graph.assemble.assemble_spec`),
which adds the schema factors, splits the graph into components and checks them. The
compiler owns its caches, as XGrammar's ``GrammarCompiler`` owns its cache of compiled
grammars: compiled specs by model and context value (``specs``), lowerings by context shape
(``forms``) and what that tier did (``form_stats``). A client or server owns one, or shares
`DEFAULT_SPEC_COMPILER`, which the module-level `compile_spec` and `clear_spec_caches` use.
Every Z3 term of such a spec lives in Z3's main context, under `MAIN_CONTEXT_LOCK`.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence

import z3
from pydantic import BaseModel

from factorspec_sdk.errors import ContextError, SpecError, UnsatisfiableSpecError
from factorspec_sdk.graph.assemble import RelationFactor, assemble_spec, bound_constraint
from factorspec_sdk.graph.cache import SpecCache
from factorspec_sdk.graph.compiled import CompiledSpec
from factorspec_sdk.graph.params import (
    ParameterLeak,
    Unfreezable,
    parameters,
    reading_guarded,
    split_context,
    with_parameters,
)
from factorspec_sdk.graph.z3context import MAIN_CONTEXT_LOCK
from factorspec_sdk.graph.z3raw import TermBuilder, substitute_all
from factorspec_sdk.relations.compiler import (
    CompiledRelation,
    InternTable,
    RelationCompiler,
    VarRecord,
    affix_links,
    date_links,
    decided_by_codes,
    dict_key_factors,
    length_links,
    text_links,
)
from factorspec_sdk.relations.decorator import RelationSet, relations_of
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
from factorspec_sdk.relations.pydantic_layout import build_layout
from factorspec_sdk.relations.sample import raises_everywhere

__all__ = [
    "DEFAULT_SPEC_COMPILER",
    "FormStats",
    "SpecCompiler",
    "clear_spec_caches",
    "compile_spec",
]


@dataclasses.dataclass
class FormStats:
    """What a `SpecCompiler`'s shape tier did since it was made (see `SpecCompiler.forms`).

    Attributes:
        made: lowerings kept for a shape (its ints and dates as parameters).
        declined: shapes whose guarded lowering failed or read a parameter's value; they
            are compiled as before, per context (``last_declined`` says why, the last time).
        bound: specs made by binding a context's values into a kept lowering.
        recompiled: bindings whose assembly raised, compiled again from the model so that
            the error is the one a compile would raise.
        diverged: of those, the ones the compile from the model found satisfiable (a bug;
            the lowering is dropped and a `RuntimeWarning` says so).
    """

    made: int = 0
    declined: int = 0
    bound: int = 0
    recompiled: int = 0
    diverged: int = 0
    last_declined: str | None = None


@dataclasses.dataclass(frozen=True)
class _Lowered:
    """A model's relations lowered for one context: everything `assemble_spec` takes.

    ``compiled``: each relation factor's compiled relation and its model's path, by factor
    name (to tell, where the spec is unsatisfiable, a relation that raises on every record).
    """

    layout: RootLayout
    relations: RelationSet
    records: Mapping[str, VarRecord]
    strings: InternTable
    factors: tuple[RelationFactor, ...]
    compiled: Mapping[str, tuple[CompiledRelation, Path]]


_RAISES_CHECK_MS = 2000
"""Time limit of each check of `_raising_relation` (one that runs out blames nothing)."""


@dataclasses.dataclass(frozen=True)
class _Form:
    """A shape's lowering with its ints and dates as `params` (bound by substitution)."""

    lowered: _Lowered
    params: tuple[z3.ArithRef, ...]


class _Seen:
    """A shape compiled once: the next context of that shape makes its `_Form`."""


class _Declined:
    """A shape whose lowering cannot take its ints and dates as parameters."""


_Shape = _Form | _Seen | _Declined
"""What a compiler keeps for a context shape (`SpecCompiler.forms`)."""


class SpecCompiler:
    """Compiles Pydantic models with relations into `CompiledSpec` objects, and caches them.

    As XGrammar's ``GrammarCompiler`` owns its cache of compiled grammars, a compiler owns
    what it compiled: two compilers share no spec. A `factorspec_sdk.Client` (``compiler=``)
    or a program owns one, or shares `DEFAULT_SPEC_COMPILER` (what the module-level
    `compile_spec` uses).

    Args:
        max_specs: the most compiled specs kept (``specs``).
        max_shapes: the most context shapes kept (``forms``).

    Attributes:
        specs: compiled specs by (model, context value): an LRU; ``hits``/``misses`` count
            the lookups. A context that cannot be frozen into a hashable value (see
            `compile_spec`) is compiled every time and never cached.
        forms: the second tier, by (model, context shape): an LRU. A shape's first context
            compiles as a new one; its second makes the shape's lowering with the ints and
            dates as parameters (under `reading_guarded`), and that one and every later
            one of the shape binds its values and assembles.
        form_stats: what the shape tier did.
    """

    def __init__(self, *, max_specs: int = 64, max_shapes: int = 64) -> None:
        self.specs: SpecCache[Hashable, CompiledSpec] = SpecCache(max_size=max_specs)
        self.forms: SpecCache[Hashable, _Shape] = SpecCache(max_size=max_shapes)
        self.form_stats = FormStats()

    def compile_spec(self, model: type[BaseModel], context: object = None) -> CompiledSpec:
        """Compile ``model``'s relations for ``context`` (cached per model and context value).

        The context is keyed by value: pydantic models, dataclasses, mappings, sequences,
        sets and plain objects are frozen field by field; anything else is compiled
        uncached. A context whose shape (everything but its ints and dates,
        `factorspec_sdk.graph.params`) was seen before with other values binds them into
        that shape's lowering (``forms``) and only assembles and checks the spec. The
        compilation holds `MAIN_CONTEXT_LOCK` (its terms live in Z3's main context).

        Raises:
            RelationDefinitionError: a relation uses a construct outside the supported subset.
            ContextError: a relation needs a context and none is given, or it lacks a value.
            UnsatisfiableSpecError: no record satisfies the spec (the core names the
                relations).
            SpecError: a list needs more items than its bound.
        """
        try:
            shape, values = split_context(context)
            hash(shape)
        except (TypeError, Unfreezable):
            with MAIN_CONTEXT_LOCK:
                return _compile(model, context)
        with MAIN_CONTEXT_LOCK:
            return self.specs.get_or_compile(
                (model, shape, values), lambda: self._compile_new(model, context, shape, values)
            )

    def clear(self) -> None:
        """Forget every compiled spec and context shape: the next compile of each is cold.

        The counters of ``specs`` and ``form_stats`` stay.
        """
        with MAIN_CONTEXT_LOCK:  # dropping specs frees main-context Z3 terms
            self.specs.clear()
            self.forms.clear()

    def __repr__(self) -> str:
        return f"SpecCompiler(specs={self.specs!r}, forms={self.forms!r})"

    def _compile_new(
        self, model: type[BaseModel], context: object, shape: Hashable, values: tuple[int, ...]
    ) -> CompiledSpec:
        """A context not in ``specs``: bind it into its shape's form, or compile it."""
        if not values:
            return _compile(model, context)
        stats = self.form_stats
        key = (model, shape)
        form = self.forms.get(key)
        if form is None:
            self.forms.put(key, _Seen())
            return _compile(model, context)
        if isinstance(form, _Seen):
            form = self._make_form(model, context, len(values))
            self.forms.put(key, form)
        if isinstance(form, _Declined):
            return _compile(model, context)
        t0 = time.perf_counter()
        pairs = [(p, z3.IntVal(v)) for p, v in zip(form.params, values, strict=True)]
        lowered = form.lowered
        bound = substitute_all([f.formula for f in lowered.factors], pairs)
        factors = [
            RelationFactor(f.name, f.variables, g)
            for f, g in zip(lowered.factors, bound, strict=True)
        ]
        try:
            spec = _assemble(model, context, lowered, factors, t0)
        except SpecError:
            stats.recompiled += 1
            spec = _compile(model, context)  # raises the compile's own error
            stats.diverged += 1
            self.forms.put(key, _Declined())
            warnings.warn(
                f"{model.__name__}: the spec bound into its context shape failed where the "
                "compile from the model succeeds; the shape is compiled per context from now on",
                RuntimeWarning,
                stacklevel=3,
            )
            return spec
        stats.bound += 1
        return spec

    def _make_form(self, model: type[BaseModel], context: object, n: int) -> _Form | _Declined:
        """Lower ``model`` against ``context`` with its ``n`` slots as parameters, guarded."""
        params = parameters(n)
        stats = self.form_stats
        why: str
        try:
            with reading_guarded(params) as guard:
                lowered = _lower(model, with_parameters(context, params))
                leak = guard.leak or _leak_in(lowered, guard.mentions)
        except ParameterLeak as exc:
            why = str(exc)
        except Exception as exc:  # any failure keeps the shape on plain compiles
            why = f"{type(exc).__name__}: {exc}"
        else:
            if leak is None:
                stats.made += 1
                return _Form(lowered, params)
            why = f"{leak} of a context parameter"
        stats.declined += 1
        stats.last_declined = f"{model.__name__}: {why}"
        return _Declined()


DEFAULT_SPEC_COMPILER = SpecCompiler()
"""The compiler that the module-level `compile_spec` uses, and a client given none.

One shared instance: a program that wants specs of its own (a second client, a test, a
benchmark that wants each compile cold) makes a `SpecCompiler` of its own.
"""


def compile_spec(model: type[BaseModel], context: object = None) -> CompiledSpec:
    """`SpecCompiler.compile_spec` of `DEFAULT_SPEC_COMPILER` (see there).

    Raises:
        RelationDefinitionError: a relation uses a construct outside the supported subset.
        ContextError: a relation needs a context and none is given, or it lacks a value.
        UnsatisfiableSpecError: no record satisfies the spec (the core names the relations).
        SpecError: a list needs more items than its bound.
    """
    return DEFAULT_SPEC_COMPILER.compile_spec(model, context)


def clear_spec_caches() -> None:
    """Forget every spec and context shape of `DEFAULT_SPEC_COMPILER` (`SpecCompiler.clear`)."""
    DEFAULT_SPEC_COMPILER.clear()


def _leak_in(lowered: _Lowered, mentions: Callable[[z3.AstRef], bool]) -> str | None:
    """A parameter in what is not substituted (the variables' terms), named; else None."""
    for rec in lowered.records.values():
        for term in (rec.term, rec.exists):
            if isinstance(term, z3.AstRef) and mentions(term):
                return f"the variable {rec.name}"
    return None


def _compile(model: type[BaseModel], context: object) -> CompiledSpec:
    """Compile uncached (the caller holds `MAIN_CONTEXT_LOCK`)."""
    t0 = time.perf_counter()
    lowered = _lower(model, context)
    try:
        return _assemble(model, context, lowered, lowered.factors, t0)
    except UnsatisfiableSpecError as err:
        _raising_relation(lowered, context, err.core)
        raise


def _raising_relation(lowered: _Lowered, context: object, core: Sequence[str]) -> None:
    """Raise `RelationRaisesError` for a relation of ``core`` that raises on every record.

    Such a relation clashes with everything, and its error is the exception, not the core:
    it applies to some record within the schema's bounds, and on none of them does its
    evaluation finish without an exception.
    """
    for name in core:
        found = lowered.compiled.get(name)
        if found is None:
            continue
        relation, root = found
        s = z3.Solver()
        s.set("timeout", _RAISES_CHECK_MS)
        with TermBuilder(z3.main_ctx()) as tb:
            for v in sorted(relation.variables):
                rec = lowered.records.get(v)
                bounds = None if rec is None else bound_constraint(rec, lowered.strings, tb)
                if bounds is not None:
                    s.add(bounds)
        s.add(relation.applies)
        if s.check() == z3.sat and s.check(relation.defined) == z3.unsat:
            node = node_at(lowered.layout, root)
            assert node is not None  # the path of a relation's model
            raise raises_everywhere(relation.info, node, context)


def _assemble(
    model: type[BaseModel],
    context: object,
    lowered: _Lowered,
    factors: Sequence[RelationFactor],
    started: float,
) -> CompiledSpec:
    return assemble_spec(
        name=model.__name__,
        model=model,
        layout=lowered.layout,
        relations=lowered.relations,
        context=context,
        records=lowered.records,
        strings=lowered.strings,
        relation_factors=factors,
        started=started,
    )


def _lower(model: type[BaseModel], context: object) -> _Lowered:
    """Lower ``model``'s relations (and the text, length and date links) for ``context``."""
    layout = build_layout(model)
    rels = relations_of(model)
    if rels.needs_context and context is None:
        names = ", ".join(r.qualname for r in rels if r.takes_context)
        raise ContextError(
            f"{model.__name__} has relations that read a context ({names}); pass context=..."
        )
    comp = RelationCompiler(layout, context)
    lowered: list[RelationFactor] = []
    compiled: dict[str, tuple[CompiledRelation, Path]] = {}
    for r in rels:
        c = comp.compile(r)
        lowered.append(RelationFactor(r.name, c.variables, c.formula))
        compiled[r.name] = (c, ())
    for path, nested in _nested_relations(layout, ()):
        if nested.needs_context and context is None:
            raise ContextError(
                f"{nested.model.__name__} (at {path_name(path)}) has relations that read a "
                "context; pass context=..."
            )
        for r in nested:
            c = comp.compile(r, path)
            name = f"{r.name} ({path_name(path)})"
            lowered.append(RelationFactor(name, c.variables, c.formula))
            compiled[name] = (c, path)
    for name, variables, formula in dict_key_factors(comp):
        lowered.append(RelationFactor(name, variables, formula))
    decided = decided_by_codes(comp, [(f.variables, f.formula) for f in lowered])
    if decided:  # same(a, b) of a leaf that is always a named text: code equality
        swap = [(comp.vars[n].term, f) for n, f in decided.items()]
        swapped = substitute_all([f.formula for f in lowered], swap)
        lowered = [  # the codes are read already (`eq_code`)
            RelationFactor(f.name, f.variables - decided.keys(), g)
            for f, g in zip(lowered, swapped, strict=True)
        ]
    texts = text_links(comp)  # before the records: it adds the variables of its groups
    texts += affix_links(comp)
    records = comp.records()
    links = texts + length_links(comp.strings, records) + date_links(records)
    for name, variables, formula in links:
        lowered.append(RelationFactor(name, variables, formula))
    return _Lowered(layout, rels, records, comp.strings, tuple(lowered), compiled)


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
    elif isinstance(node, UnionLayout):  # a branch's relations hold when it is chosen
        for b in node.branches:
            out += _nested_relations(b, (*path, branch_part(b.model)))
    return out
