"""Statements of a relation body: let-bindings, ``if ...: return`` chains, ``return``.

`block` evaluates a statement list to the value it returns: an assignment binds names for the
statements after it, an ``if`` evaluates both continuations (the branch followed by the rest)
and merges them under the test. `bind` binds an assignment or loop target, unpacking tuples.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, cast

from factorspec_sdk.relations.compiler.choices import choice, ite, truthy
from factorspec_sdk.relations.compiler.terms import AND, ITE_COND
from factorspec_sdk.relations.compiler.values import R, SChoice, Scope, V, is_sym

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import RelationCompiler

__all__ = ["bind", "block"]


def block(cx: RelationCompiler, stmts: Sequence[ast.stmt], scope: Scope) -> R:
    """The value a statement list returns, and the condition that it raises nothing."""
    if not stmts:
        return R(None)
    st = stmts[0]
    cx.node = st
    if isinstance(st, ast.Return):
        if st.value is None:
            return R(None)
        return cx.eval(st.value, scope)
    if isinstance(st, (ast.Assign, ast.AnnAssign)):
        value_node = st.value
        if value_node is None:
            return block(cx, stmts[1:], scope)
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        r = cx.eval(value_node, scope)
        names: dict[str, V] = {}
        for t in targets:
            bind(cx, t, r.value, names)
        rest = block(cx, stmts[1:], scope.child(names))
        return R(rest.value, AND(r.ok, rest.ok))
    if isinstance(st, ast.If):
        c = cx.eval(st.test, scope)
        tc = truthy(cx, c.value)
        then = block(cx, [*st.body, *stmts[1:]], scope) if tc is not False else None
        other = block(cx, [*st.orelse, *stmts[1:]], scope) if tc is not True else None
        if then is None:
            assert other is not None
            return R(other.value, AND(c.ok, other.ok))
        if other is None:
            return R(then.value, AND(c.ok, then.ok))
        return R(ite(cx, tc, then.value, other.value), AND(c.ok, ITE_COND(tc, then.ok, other.ok)))
    if isinstance(st, ast.Pass):
        return block(cx, stmts[1:], scope)
    cx.fail(type(st).__name__, "statement outside the supported subset", st)


def bind(cx: RelationCompiler, target: ast.expr, value: V, names: dict[str, V]) -> None:
    """Bind ``target`` (a name or a tuple of targets) to ``value`` in ``names``."""
    if isinstance(target, ast.Name):
        names[target.id] = value
        return
    if isinstance(target, (ast.Tuple, ast.List)):
        parts = _unpack(cx, value, len(target.elts), target)
        for t, v in zip(target.elts, parts, strict=True):
            bind(cx, t, v, names)
        return
    cx.fail("assignment", "only names (and tuples of names) can be bound", target)


def _unpack(cx: RelationCompiler, value: V, n: int, node: ast.AST) -> list[V]:
    if isinstance(value, tuple):
        if len(value) != n:
            cx.fail("unpacking", f"cannot unpack {len(value)} values into {n}", node)
        return list(value)
    if not is_sym(value):
        try:
            parts = list(cast(Iterable[object], value))
        except TypeError:
            cx.fail("unpacking", f"cannot unpack {type(value).__name__}", node)
        if len(parts) != n:
            cx.fail("unpacking", f"cannot unpack {len(parts)} values into {n}", node)
        return parts
    if isinstance(value, SChoice):
        alts = [(c, _unpack(cx, v, n, node)) for c, v in value.alts]
        return [choice(cx, [(c, parts[k]) for c, parts in alts]) for k in range(n)]
    cx.fail("unpacking", "cannot unpack a value read from the record", node)
