"""From a compiled spec to the relation IR: walk the layout and the Z3 formulas.

Subterms that occur more than once, and subterms deeper than `MAX_INLINE_DEPTH`, are hoisted
into ``defs`` (a DAG in topological order), so the IR stays linear in the size of the Z3
terms and every inline tree stays shallow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import z3

from factorspec_sdk.errors import IRExportError
from factorspec_sdk.graph.z3context import MAIN_CONTEXT_LOCK
from factorspec_sdk.ir.leaves import leaf_to_ir
from factorspec_sdk.ir.model import IR_VERSION
from factorspec_sdk.ir.variables import WIRE_KINDS
from factorspec_sdk.relations.kinds import VarKind
from factorspec_sdk.relations.layout import (
    GrammarLayout,
    LayoutNode,
    ListLayout,
    ObjectField,
    ObjectLayout,
    UnionLayout,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from factorspec_sdk.graph.compiled import CompiledSpec

__all__ = ["MAX_INLINE_DEPTH", "IRExportError", "spec_to_ir", "to_ir"]

MAX_INLINE_DEPTH = 24
"""Deepest inline expression tree the exporter writes (deeper subterms become defs)."""

JsonDict = dict[str, object]

_OPS: dict[int, str] = {
    z3.Z3_OP_AND: "and",
    z3.Z3_OP_OR: "or",
    z3.Z3_OP_NOT: "not",
    z3.Z3_OP_IMPLIES: "implies",
    z3.Z3_OP_ITE: "ite",
    z3.Z3_OP_EQ: "eq",
    z3.Z3_OP_DISTINCT: "distinct",
    z3.Z3_OP_LE: "le",
    z3.Z3_OP_LT: "lt",
    z3.Z3_OP_GE: "ge",
    z3.Z3_OP_GT: "gt",
    z3.Z3_OP_ADD: "add",
    z3.Z3_OP_SUB: "sub",
    z3.Z3_OP_MUL: "mul",
    z3.Z3_OP_IDIV: "div",
    z3.Z3_OP_MOD: "mod",
    z3.Z3_OP_UMINUS: "neg",
}


def to_ir(model: type[BaseModel], context: object = None) -> JsonDict:
    """The relation IR of ``model``'s spec for ``context`` (JSON-ready dict).

    The context's values are compile-time constants: they are folded into the formulas, so
    the IR needs no context of its own.

    Raises:
        RelationDefinitionError, ContextError, UnsatisfiableSpecError, SpecError: as
            `factorspec_sdk.graph.compile_spec` (before anything is sent anywhere).
        IRExportError: a formula uses a Z3 construct outside the IR's operator set.
    """
    from factorspec_sdk.graph import compile_spec

    with MAIN_CONTEXT_LOCK:
        return spec_to_ir(compile_spec(model, context))


def spec_to_ir(spec: CompiledSpec) -> JsonDict:
    """The relation IR of a compiled spec (from `compile_spec` or `spec_from_ir`).

    Z3 contexts are not thread-safe: the walk holds `MAIN_CONTEXT_LOCK`, as `compile_spec`
    does, so that exports and compilations in other threads do not touch the main context
    at once.
    """
    with MAIN_CONTEXT_LOCK:
        return _spec_to_ir(spec)


def _spec_to_ir(spec: CompiledSpec) -> JsonDict:
    formulas = spec.factor_formulas()
    derived = {  # the ties of dates to their parts: the server derives them itself
        f"{tie} of {v.name}"
        for v in spec.variables.values()
        for tie, part in (("calendar", "year"), ("clock", "date"), ("time", "hour"))
        if v.kind == VarKind.DATE and f"{part}({v.name})" in spec.variables
    }
    relation_factors = [f for f in spec.factors if f.kind == "relation" and f.name not in derived]
    # variable order = the order of their bound/length factors (the order of the records),
    # so that the server derives those factors in the same order
    order: list[str] = []
    seen: set[str] = set()
    for f in spec.factors:
        if f.kind != "relation":
            (v,) = f.variables
            if v not in seen:
                seen.add(v)
                order.append(v)
    rest: set[str] = set()
    for f in relation_factors:
        rest |= f.variables
    order += sorted(rest - seen)
    variables: list[JsonDict] = []
    for name in order:
        rec = spec.record(name)
        # the layout (and the name) tell a list's length from a str's, a date from an int
        var: JsonDict = {"name": name, "path": list(rec.path), "kind": WIRE_KINDS[rec.kind]}
        if rec.other is not None:
            var["other"] = list(rec.other)
        if rec.affix is not None:
            var["text"] = rec.affix[1]
        variables.append(var)
    enc = _Encoder()
    roots: list[z3.ExprRef | None] = [formulas.get(f.name) for f in relation_factors]
    enc.prepare([r for r in roots if r is not None])
    factors: list[JsonDict] = []
    for f, formula in zip(relation_factors, roots, strict=True):
        expr: JsonDict = {"bool": True} if formula is None else enc.expr(formula)
        factor: JsonDict = {"name": f.name, "variables": sorted(f.variables), "formula": expr}
        if f.scope is not None:
            factor["scope"] = list(f.scope)
        factors.append(factor)
    return {
        "factorspec_ir": IR_VERSION,
        "name": spec.model.__name__,
        "layout": _layout(spec.layout),
        "strings": list(spec.strings.strings[1:]),
        "variables": variables,
        "defs": enc.defs,
        "factors": factors,
    }


def _layout(node: LayoutNode) -> JsonDict:
    if isinstance(node, ObjectLayout):
        return {
            "type": "object",
            "name": node.model.__name__,
            "fields": [_field(f) for f in node.fields],
            "nullable": node.nullable,
            **({"undeclared_keys": True} if node.undeclared_keys else {}),
        }
    if isinstance(node, ListLayout):
        return {
            "type": "list",
            "item": _layout(node.item),
            "min_length": node.min_length,
            "max_length": node.max_length,
            "bounded_by_schema": node.bounded_by_schema,
            "nullable": node.nullable,
            **({"mapping": True} if node.mapping else {}),
        }
    if isinstance(node, GrammarLayout):
        return {"type": "grammar", "schema": node.schema_dict}
    if isinstance(node, UnionLayout):
        return {
            "type": "union",
            "tag": node.tag,
            "branches": [_layout(b) for b in node.branches],
            "nullable": node.nullable,
        }
    return leaf_to_ir(node)


def _field(f: ObjectField) -> JsonDict:
    """A field; ``optional``, ``default``, ``others`` only where set (as documents before them)."""
    out: JsonDict = {"name": f.name, "key": f.key, "node": _layout(f.node)}
    if f.optional:
        out["optional"] = True
    if f.default is not None:
        out["default"] = f.default
    if f.others:
        out["others"] = True
    return out


class _Encoder:
    """Encodes Z3 terms as IR expressions, hoisting shared and deep subterms into defs."""

    def __init__(self) -> None:
        self.defs: list[JsonDict] = []
        self._def_index: dict[int, int] = {}
        self._hoist: set[int] = set()

    def prepare(self, roots: list[z3.ExprRef]) -> None:
        refs: dict[int, int] = {}
        post: list[z3.ExprRef] = []
        visited: set[int] = set()
        for root in roots:
            stack: list[tuple[z3.ExprRef, bool]] = [(root, False)]
            while stack:
                e, done = stack.pop()
                i = e.get_id()
                if done:
                    post.append(e)
                    continue
                if i in visited:
                    continue
                visited.add(i)
                stack.append((e, True))
                if _is_leaf(e):
                    continue
                for c in e.children():
                    refs[c.get_id()] = refs.get(c.get_id(), 0) + 1
                    if c.get_id() not in visited:
                        stack.append((c, False))
        height: dict[int, int] = {}
        for e in post:
            i = e.get_id()
            if _is_leaf(e):
                height[i] = 0
                continue
            h = 1 + max((height[c.get_id()] for c in e.children()), default=0)
            if refs.get(i, 0) > 1 or h >= MAX_INLINE_DEPTH:
                self._hoist.add(i)
                h = 0
            height[i] = h
        for e in post:  # defs in topological order
            if e.get_id() in self._hoist:
                self._def_index[e.get_id()] = len(self.defs)
                self.defs.append(self._inline(e))

    def expr(self, e: z3.ExprRef) -> JsonDict:
        """The expression of a root (inline unless hoisted)."""
        index = self._def_index.get(e.get_id())
        return {"def": index} if index is not None else self._inline(e)

    def _ref(self, e: z3.ExprRef) -> JsonDict:
        index = self._def_index.get(e.get_id())
        if index is not None:
            return {"def": index}
        return self._inline(e)

    def _inline(self, e: z3.ExprRef) -> JsonDict:
        if z3.is_int_value(e):
            return {"int": cast(z3.IntNumRef, e).as_long()}
        if z3.is_true(e):
            return {"bool": True}
        if z3.is_false(e):
            return {"bool": False}
        if not z3.is_app(e):
            raise IRExportError(f"the IR cannot express the Z3 term {e}")
        decl = e.decl()
        kind = decl.kind()
        if kind == z3.Z3_OP_UNINTERPRETED and e.num_args() == 0:
            return {"var": decl.name()}
        op = _OPS.get(kind)
        if op is None:
            raise IRExportError(f"the IR has no operator for {decl.name()} (in {e})")
        return {"op": op, "args": [self._ref(c) for c in e.children()]}


def _is_leaf(e: z3.ExprRef) -> bool:
    return bool(z3.is_const(e) or z3.is_int_value(e))
