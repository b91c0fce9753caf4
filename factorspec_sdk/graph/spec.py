"""The Pydantic-model front end of the spec back end: `compile_spec` and its cache.

`compile_spec` walks a model into its layout, lowers its relations (and those of nested
models, at every concrete path) for one context with
`factorspec_sdk.relations.compiler.RelationCompiler`, and hands the variables and relation
formulas to the one assembly (`factorspec_sdk.graph.assemble.assemble_spec`), which adds the
schema factors, splits the graph into components and checks them. Compiled specs are kept
in `SPEC_CACHE`, a `SpecCache` keyed by model and context value; every Z3 term of such a
spec lives in Z3's main context, under `MAIN_CONTEXT_LOCK`.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Hashable, Mapping

from pydantic import BaseModel

from factorspec_sdk.errors import ContextError
from factorspec_sdk.graph.assemble import RelationFactor, assemble_spec
from factorspec_sdk.graph.cache import SpecCache
from factorspec_sdk.graph.compiled import CompiledSpec
from factorspec_sdk.graph.z3context import MAIN_CONTEXT_LOCK
from factorspec_sdk.graph.z3raw import substitute_all
from factorspec_sdk.relations.compiler import (
    RelationCompiler,
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
    UnionLayout,
    branch_part,
    build_layout,
    path_name,
)

__all__ = [
    "SPEC_CACHE",
    "compile_spec",
]

SPEC_CACHE: SpecCache[Hashable, CompiledSpec] = SpecCache(max_size=64)
"""The compiled specs of `compile_spec`, by (model, context value): an LRU of 64 specs.

``SPEC_CACHE.clear()`` forgets them (a benchmark that wants each compile cold);
``hits``/``misses`` count the lookups. A context that cannot be frozen into a hashable
value (see `compile_spec`) is compiled every time and never cached.
"""


def compile_spec(model: type[BaseModel], context: object = None) -> CompiledSpec:
    """Compile ``model``'s relations for ``context`` (cached per model and context value).

    The context is keyed by value: pydantic models, dataclasses, mappings, sequences, sets
    and plain objects are frozen field by field; anything else is compiled uncached. The
    compilation holds `MAIN_CONTEXT_LOCK` (its terms live in Z3's main context).

    Raises:
        RelationDefinitionError: a relation uses a construct outside the supported subset.
        ContextError: a relation needs a context and none is given, or it lacks a value.
        UnsatisfiableSpecError: no record satisfies the spec (the core names the relations).
        SpecError: a list needs more items than its bound.
    """
    try:
        key: Hashable = (model, _freeze(context, 0))
        hash(key)
    except (TypeError, _Unfreezable):
        key = None
    with MAIN_CONTEXT_LOCK:
        if key is None:
            return _compile(model, context)
        return SPEC_CACHE.get_or_compile(key, lambda: _compile(model, context))


def _compile(model: type[BaseModel], context: object) -> CompiledSpec:
    """Compile uncached (the caller holds `MAIN_CONTEXT_LOCK`)."""
    t0 = time.perf_counter()
    layout = build_layout(model)
    rels = relations_of(model)
    if rels.needs_context and context is None:
        names = ", ".join(r.qualname for r in rels if r.takes_context)
        raise ContextError(
            f"{model.__name__} has relations that read a context ({names}); pass context=..."
        )
    comp = RelationCompiler(layout, context)
    lowered: list[RelationFactor] = []
    for r in rels:
        c = comp.compile(r)
        lowered.append(RelationFactor(r.name, c.variables, c.formula))
    for path, nested in _nested_relations(layout, ()):
        if nested.needs_context and context is None:
            raise ContextError(
                f"{nested.model.__name__} (at {path_name(path)}) has relations that read a "
                "context; pass context=..."
            )
        for r in nested:
            c = comp.compile(r, path)
            lowered.append(RelationFactor(f"{r.name} ({path_name(path)})", c.variables, c.formula))
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
    return assemble_spec(
        name=model.__name__,
        model=model,
        layout=layout,
        relations=rels,
        context=context,
        records=records,
        strings=comp.strings,
        relation_factors=lowered,
        started=t0,
    )


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
