"""The int and bool value kind: Z3 ``Int`` and ``Bool`` terms.

The rules of one value kind: its leaf variables (`bool_leaf`, `int_leaf`, `int_choice_leaf`),
how a value of the kind becomes a term (`as_bool_term`, `as_int_term`), and its equality
(`eq_terms`), ordering (`order_terms`) and arithmetic (`arith_terms`) with Python semantics.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import z3

from factorspec_sdk.relations.compiler.terms import AND, Cond, mk_cmp, mk_eq, to_bool
from factorspec_sdk.relations.compiler.values import UNDEF, R, SCode, V
from factorspec_sdk.relations.layout import LeafLayout, Path

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import RelationCompiler

__all__ = [
    "ORDER_OPS",
    "arith_terms",
    "as_bool_term",
    "as_int_term",
    "bool_leaf",
    "eq_terms",
    "int_choice_leaf",
    "int_leaf",
    "order_terms",
]


def bool_leaf(cx: RelationCompiler, path: Path, node: LeafLayout) -> V:
    """The Bool variable of a bool leaf (or a Literal of bools)."""
    return cx.leaf_var(path, node).term


def int_leaf(cx: RelationCompiler, path: Path, node: LeafLayout) -> V:
    """The Int variable of an int leaf, bounded by the schema or by `INT_LIMIT`."""
    return cx.leaf_var(path, node).term


def int_choice_leaf(cx: RelationCompiler, path: Path, node: LeafLayout) -> V:
    """A Literal/Enum leaf of ints: an Int term (an int Enum is an `SCode` of its values)."""
    rec = cx.leaf_var(path, node)
    if node.enum_type is not None:
        return SCode(cast(z3.ArithRef, rec.term), node.enum_type, False)
    return rec.term


def as_bool_term(v: V) -> z3.BoolRef | None:
    """``v`` as a Z3 Bool term, or None when it is not a bool."""
    if isinstance(v, bool):
        return z3.BoolVal(v)
    if isinstance(v, z3.BoolRef):
        return v
    return None


def as_int_term(v: V) -> z3.ArithRef | int | None:
    """``v`` as an int or an Int term (bools count as 0/1), or None."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, z3.BoolRef):
        return cast(z3.ArithRef, z3.If(v, 1, 0))
    if isinstance(v, z3.ArithRef):
        return v
    return None


def eq_terms(a: V, b: V) -> Cond:
    """``a == b`` on bools and ints (False across other types, as Python's ``==``)."""
    if isinstance(a, (z3.BoolRef, bool)) and isinstance(b, (z3.BoolRef, bool)):
        return (
            mk_eq(a, to_bool(b))
            if not isinstance(a, bool)
            else (mk_eq(to_bool(a), b) if not isinstance(b, bool) else a == b)
        )
    x, y = as_int_term(a), as_int_term(b)
    if x is not None and y is not None:
        if isinstance(x, int) and isinstance(y, int):
            return x == y
        return mk_eq(x, y)
    return False  # e.g. an int field compared with a str


ORDER_OPS: dict[type[ast.cmpop], Callable[[Any, Any], object]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
"""Python's ordering comparisons, by AST operator."""

_CMP_SYM: dict[type[ast.cmpop], str] = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def order_terms(op: ast.cmpop, a: V, b: V) -> Cond | None:
    """``a op b`` for ``<``, ``<=``, ``>``, ``>=`` on ints, or None when not both ints."""
    x, y = as_int_term(a), as_int_term(b)
    if x is None or y is None:
        return None
    if isinstance(x, int) and isinstance(y, int):
        return bool(ORDER_OPS[type(op)](x, y))
    return mk_cmp(_CMP_SYM[type(op)], x, y)


def arith_terms(
    cx: RelationCompiler,
    op: type[ast.operator],
    x: z3.ArithRef | int,
    y: z3.ArithRef | int,
    ok: Cond,
    node: ast.AST,
) -> R:
    """``x op y`` on int terms, with Python's floor semantics for ``//`` and ``%``."""
    if op is ast.Add:
        return R(x + y, ok)
    if op is ast.Sub:
        return R(x - y, ok)
    if op is ast.Mult:
        return R(x * y, ok)
    if op is ast.Pow:
        if not isinstance(y, int) or y < 0 or y > 8:
            cx.fail(
                "power with a non-constant exponent",
                "** needs a constant exponent between 0 and 8",
                node,
            )
        out: z3.ArithRef | int = 1
        for _ in range(y):
            out = out * x
        return R(out, ok)
    # floor division and modulo with Python's (floor) semantics
    if isinstance(y, int):
        if y == 0:
            return R(UNDEF, False)
        xx = cast(z3.ArithRef, x)
        if y > 0:
            q = xx / y
        else:
            q = (-xx) / (-y)
        if op is ast.FloorDiv:
            return R(q, ok)
        return R(xx - y * q, ok)
    yy = cast(z3.ArithRef, y)
    q2 = z3.If(yy > 0, x / yy, (-x) / (-yy))
    if op is ast.FloorDiv:
        return R(q2, AND(ok, yy != 0))
    return R(x - yy * q2, AND(ok, yy != 0))
