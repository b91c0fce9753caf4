"""Values of the record's nodes, and attribute access.

`node_value` is the value of the layout node at a path: an `SObj` for a nested model, the
unrolled `SSeq` of a list (element ``i`` present iff ``i < len``), an `SMaybe` around an
``Optional`` node, and for a leaf the variable its value kind makes (`leaf`). Attribute
access reads a field of a model, ``.value`` of an Enum field, or an attribute of a constant
(a method of a context value becomes an `SFunc`).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, cast

import z3

from factorspec_sdk.errors import ContextError
from factorspec_sdk.relations.checks import SUPPORTED_METHODS
from factorspec_sdk.relations.compiler import codes, ints
from factorspec_sdk.relations.compiler.choices import map_choice
from factorspec_sdk.relations.compiler.terms import AND, NOT
from factorspec_sdk.relations.compiler.values import (
    UNDEF,
    Item,
    R,
    SChoice,
    SCode,
    Scope,
    SFunc,
    SMaybe,
    SObj,
    SSeq,
    V,
    is_sym,
)
from factorspec_sdk.relations.layout import (
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectLayout,
    Path,
    path_name,
)

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import ExprRule, RelationCompiler

__all__ = ["RULES", "attr", "leaf", "node_value"]


def node_value(cx: RelationCompiler, path: Path, node: LayoutNode, check_null: bool = True) -> V:
    """The value of the layout node at ``path``."""
    if check_null and node.nullable:
        null = cx.var(path, "bool", name=f"null({path_name(path)})")
        return SMaybe(cast(z3.BoolRef, null.term), lambda: node_value(cx, path, node, False))
    if isinstance(node, ObjectLayout):
        return SObj(path, node)
    if isinstance(node, ListLayout):
        return _list_value(cx, path, node)
    return leaf(cx, path, node)


def leaf(cx: RelationCompiler, path: Path, node: LeafLayout) -> V:
    """The value of a leaf, made by the module of its value kind (`ints`, `codes`)."""
    if node.kind == "bool":
        return ints.bool_leaf(cx, path)
    if node.kind == "int":
        return ints.int_leaf(cx, path, node)
    if node.kind == "str":
        return codes.str_leaf(cx, path)
    choices = node.choices
    if all(isinstance(c, bool) for c in choices):
        return ints.bool_leaf(cx, path, choices)
    if all(isinstance(c, str) for c in choices):
        return codes.str_choice_leaf(cx, path, node)
    if all(isinstance(c, int) and not isinstance(c, bool) for c in choices):
        return ints.int_choice_leaf(cx, path, node)
    cx.fail(
        "mixed Literal",
        f"field {path_name(path)} mixes value types in its Literal; relations "
        "support Literal/Enum fields whose values are all str, all int or all bool",
    )


def _list_value(cx: RelationCompiler, path: Path, node: ListLayout) -> SSeq:
    length = cx.len_var(path)
    seq = cx.seqs.get(path)
    if seq is not None:
        return seq
    items = [
        Item(cx.gt(length, i), node_value(cx, (*path, i), node.item))
        for i in range(cx.list_bound(path, node))
    ]
    seq = SSeq(items, length, True)
    cx.seqs[path] = seq
    return seq


def _e_attribute(cx: RelationCompiler, node: ast.Attribute, scope: Scope) -> R:
    base = cx.eval(node.value, scope)
    r = attr(cx, base.value, node.attr, node)
    return R(r.value, AND(base.ok, r.ok))


def attr(cx: RelationCompiler, v: V, name: str, node: ast.AST) -> R:
    """``v.name``."""
    if isinstance(v, SObj):
        try:
            f = v.layout.field(name)
        except KeyError:
            cx.fail(
                "attribute that is not a field",
                f"{v.layout.model.__name__}.{name} is not a field (methods and "
                "properties of the model cannot be compiled)",
                node,
            )
        return R(node_value(cx, (*v.path, name), f.node))
    if isinstance(v, SMaybe):
        inner = attr(cx, v.inner(), name, node)
        return R(inner.value, AND(NOT(v.null), inner.ok))
    if isinstance(v, SChoice):
        return map_choice(cx, v, lambda x: attr(cx, x, name, node))
    if isinstance(v, SCode):
        if name == "value" and v.enum_type is not None:
            return R(SCode(v.e, None, v.strs))
        cx.fail("attribute of a value", f"attribute .{name} of a field value", node)
    if isinstance(v, SFunc):
        cx.fail("attribute access on a function", f"{v.name}.{name}", node)
    if is_sym(v):
        cx.fail("attribute of a value", f"attribute .{name} of a field value", node)
    if v is UNDEF:
        return R(UNDEF, False)
    try:
        out = getattr(v, name)
    except AttributeError as exc:
        raise ContextError(
            f"{cx.where(node)}: {type(v).__name__} has no attribute {name!r} "
            "(does the context have the fields the relation reads?)"
        ) from exc
    if callable(out) and not isinstance(out, type) and not isinstance(v, type):
        if name not in SUPPORTED_METHODS:
            cx.fail(f"call to {name}()", "method calls other than get/keys/values/items", node)
        return R(SFunc(name, v))
    return R(out)


RULES: dict[type[ast.AST], ExprRule] = {ast.Attribute: _e_attribute}
"""The expressions this module evaluates."""
