"""Where concrete values come from: literals, names, and displays (tuple, list, set, dict).

A name is a local (a let-binding or a comprehension target), else a closure variable, a
module global or a builtin of the relation's function; a supported builtin becomes an
`SFunc`, any other callable is refused. Displays of constants are constants; a tuple or
list display may hold record values.
"""

from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING, cast

from factorspec_sdk.relations.checks import SUPPORTED_CALLS, call_refusal
from factorspec_sdk.relations.compiler.terms import AND, Cond
from factorspec_sdk.relations.compiler.values import UNDEF, Item, R, Scope, SFunc, SSeq, V, is_sym
from factorspec_sdk.relations.decorator import distinct

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import ExprRule, RelationCompiler

__all__ = ["RULES", "builtin_name", "eval_each"]

_FUNCTIONS: dict[int, str] = {
    id(distinct if name == "distinct" else getattr(builtins, name)): name
    for name in SUPPORTED_CALLS
}


def builtin_name(value: object) -> str | None:
    """The name of a supported builtin (``value`` is the function object), else None."""
    return _FUNCTIONS.get(id(value))


def _e_constant(cx: RelationCompiler, node: ast.Constant, scope: Scope) -> R:
    return R(node.value)


def _e_name(cx: RelationCompiler, node: ast.Name, scope: Scope) -> R:
    found, value = scope.lookup(node.id)
    if found:
        return R(value)
    func = cx.info.func
    code = getattr(func, "__code__", None)
    closure = getattr(func, "__closure__", None)
    if code is not None and closure and node.id in code.co_freevars:
        cell = closure[code.co_freevars.index(node.id)]
        try:
            return R(_wrap_const(cx, cell.cell_contents))
        except ValueError:
            pass
    globs = getattr(func, "__globals__", {})
    if node.id in globs:
        return R(_wrap_const(cx, globs[node.id]))
    if hasattr(builtins, node.id):
        return R(_wrap_const(cx, getattr(builtins, node.id)))
    cx.fail(
        "unknown name",
        f"name {node.id!r} is not defined: a relation reads self, its context parameter, "
        "its own local names and the module's names (constants, imports)",
        node,
    )


def _wrap_const(cx: RelationCompiler, value: object) -> V:
    name = builtin_name(value)
    if name is not None:
        return SFunc(name)
    if callable(value) and not isinstance(value, type):
        name = getattr(value, "__name__", "?")
        cx.fail(f"call to {name}()", call_refusal(name, value))
    return value


def eval_each(
    cx: RelationCompiler, nodes: list[ast.expr], scope: Scope
) -> tuple[list[V], list[Cond]]:
    """The values of the items of a display or the arguments of a call, and their oks."""
    vals: list[V] = []
    oks: list[Cond] = []
    for e in nodes:
        if isinstance(e, ast.Starred):
            cx.fail("starred expression", "*args are not supported", e)
        r = cx.eval(e, scope)
        vals.append(r.value)
        oks.append(r.ok)
    return vals, oks


def _e_tuple(cx: RelationCompiler, node: ast.Tuple | ast.List | ast.Set, scope: Scope) -> R:
    vals, oks = eval_each(cx, node.elts, scope)
    return R(tuple(vals), AND(*oks))


def _e_list(cx: RelationCompiler, node: ast.List, scope: Scope) -> R:
    r = _e_tuple(cx, node, scope)
    vals = cast(tuple[V, ...], r.value)
    if not is_sym(vals):
        return R(list(vals), r.ok)
    return R(SSeq([Item(True, v) for v in vals], len(vals), True), r.ok)


def _e_set(cx: RelationCompiler, node: ast.Set, scope: Scope) -> R:
    r = _e_tuple(cx, node, scope)
    vals = cast(tuple[V, ...], r.value)
    if not is_sym(vals):
        try:
            return R(set(vals), r.ok)
        except TypeError:
            return R(UNDEF, False)
    cx.fail("set of record values", "set displays must hold constants", node)


def _e_dict(cx: RelationCompiler, node: ast.Dict, scope: Scope) -> R:
    out: dict[object, object] = {}
    oks: list[Cond] = []
    for k, v in zip(node.keys, node.values, strict=True):
        if k is None:
            cx.fail("dict unpacking", "** in dict displays is not supported", node)
        rk, rv = cx.eval(k, scope), cx.eval(v, scope)
        if is_sym(rk.value) or is_sym(rv.value):
            cx.fail("dict of record values", "dict displays must hold constants", node)
        oks += [rk.ok, rv.ok]
        try:
            out[rk.value] = rv.value
        except TypeError:
            return R(UNDEF, False)
    return R(out, AND(*oks))


RULES: dict[type[ast.AST], ExprRule] = {
    ast.Constant: _e_constant,
    ast.Name: _e_name,
    ast.Tuple: _e_tuple,
    ast.List: _e_list,
    ast.Set: _e_set,
    ast.Dict: _e_dict,
}
"""The expressions this module evaluates."""
