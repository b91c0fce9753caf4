"""Z3 term helpers: conditions that fold Python booleans, and terms built through the C API.

A *condition* (`Cond`) is a Z3 Bool term or a Python ``bool``; the connectives here fold the
Python booleans away (``AND(True, c)`` is ``c``), so formulas stay small and a relation whose
truth is known at compile time never reaches Z3. Comparisons and ``If`` are built directly
through the C API (much faster than the Python wrappers on the hot path). The length helpers
at the end build ``max(length - k, 0)`` and friends on list-length terms.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import TypeAlias, cast

import z3
from z3 import z3core as _C

__all__ = [
    "AND",
    "IMPLIES",
    "ITE_COND",
    "NOT",
    "OR",
    "Cond",
    "cmp_eq",
    "cmp_ge0",
    "cmp_lt",
    "in_codes",
    "max0",
    "min2",
    "min_len",
    "mk_cmp",
    "mk_eq",
    "mk_ite",
    "num",
    "sub_len",
    "to_bool",
]

Cond: TypeAlias = "z3.BoolRef | bool"
"""A condition: a Z3 Bool term, or a Python bool when it is known at compile time."""

_CTX = z3.main_ctx()
_NUMS: dict[int, z3.IntNumRef] = {}
_TRUE = z3.BoolVal(True)
_FALSE = z3.BoolVal(False)


def num(v: int) -> z3.IntNumRef:
    """A cached Z3 integer numeral."""
    n = _NUMS.get(v)
    if n is None:
        n = z3.IntVal(v)
        if len(_NUMS) < 100_000:
            _NUMS[v] = n
    return n


def _arr(xs: Sequence[z3.ExprRef]) -> ctypes.Array[z3.Ast]:
    arr: ctypes.Array[z3.Ast] = (z3.Ast * len(xs))()
    for i, x in enumerate(xs):
        arr[i] = x.as_ast()
    return arr


def _bool(a: z3.Ast) -> z3.BoolRef:
    return z3.BoolRef(a, _CTX)


def _term(x: z3.ExprRef | int) -> z3.ExprRef:
    return num(x) if isinstance(x, int) else x


def mk_eq(a: z3.ExprRef | int, b: z3.ExprRef | int) -> z3.BoolRef:
    """``a == b`` built directly through the C API (fast)."""
    return _bool(_C.Z3_mk_eq(_CTX.ref(), _term(a).as_ast(), _term(b).as_ast()))


def mk_cmp(op: str, a: z3.ExprRef | int, b: z3.ExprRef | int) -> z3.BoolRef:
    """``a op b`` for op in <, <=, >, >= (fast)."""
    fn = {"<": _C.Z3_mk_lt, "<=": _C.Z3_mk_le, ">": _C.Z3_mk_gt, ">=": _C.Z3_mk_ge}[op]
    return _bool(fn(_CTX.ref(), _term(a).as_ast(), _term(b).as_ast()))


def _connective(cs: Sequence[Cond], absorbing: bool, mk: Callable[..., z3.Ast]) -> Cond:
    """And (``absorbing=False``) or Or (``absorbing=True``) of ``cs``, folding Python bools."""
    out: list[z3.BoolRef] = []
    for c in cs:
        if c is absorbing:
            return absorbing
        if c is (not absorbing):
            continue
        out.append(cast(z3.BoolRef, c))
    if not out:
        return not absorbing
    if len(out) == 1:
        return out[0]
    return _bool(mk(_CTX.ref(), len(out), _arr(out)))


def AND(*cs: Cond) -> Cond:
    """Conjunction that folds Python booleans."""
    return _connective(cs, False, _C.Z3_mk_and)


def OR(*cs: Cond) -> Cond:
    """Disjunction that folds Python booleans."""
    return _connective(cs, True, _C.Z3_mk_or)


def NOT(c: Cond) -> Cond:
    """Negation that folds Python booleans."""
    if c is True:
        return False
    if c is False:
        return True
    return _bool(_C.Z3_mk_not(_CTX.ref(), c.as_ast()))


def IMPLIES(a: Cond, b: Cond) -> Cond:
    """Implication that folds Python booleans."""
    if a is False or b is True:
        return True
    if a is True:
        return b
    if b is False:
        return NOT(a)
    return _bool(_C.Z3_mk_implies(_CTX.ref(), a.as_ast(), b.as_ast()))


def to_bool(c: Cond) -> z3.BoolRef:
    """A Z3 Bool term for a condition."""
    if isinstance(c, bool):
        return _TRUE if c else _FALSE
    return c


def mk_ite(c: Cond, a: z3.ExprRef | int, b: z3.ExprRef | int) -> z3.ExprRef:
    """``If(c, a, b)`` (fast)."""
    r = _C.Z3_mk_ite(_CTX.ref(), to_bool(c).as_ast(), _term(a).as_ast(), _term(b).as_ast())
    return z3.z3._to_expr_ref(r, _CTX)


def ITE_COND(c: Cond, a: Cond, b: Cond) -> Cond:
    """If-then-else on conditions."""
    if c is True:
        return a
    if c is False:
        return b
    if a is b:
        return a
    if a is True:
        return OR(c, b)
    if a is False:
        return AND(NOT(c), b)
    if b is True:
        return OR(NOT(c), a)
    if b is False:
        return AND(c, a)
    return cast(z3.BoolRef, mk_ite(c, a, b))


def cmp_eq(a: z3.ExprRef | int, b: z3.ExprRef | int) -> Cond:
    """``a == b``, a Python bool when both are ints."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return mk_eq(a, b)


def cmp_lt(a: z3.ExprRef | int, b: z3.ExprRef | int) -> Cond:
    """``a < b``, a Python bool when both are ints."""
    if isinstance(a, int) and isinstance(b, int):
        return a < b
    return mk_cmp("<", a, b)


def cmp_ge0(a: z3.ExprRef | int) -> Cond:
    """``a >= 0``, a Python bool when ``a`` is an int."""
    if isinstance(a, int):
        return a >= 0
    return mk_cmp(">=", a, 0)


def in_codes(e: z3.ArithRef, codes: list[int]) -> Cond:
    """``e`` is one of the sorted ``codes`` (an interval test when they are consecutive)."""
    if not codes:
        return False
    if len(codes) == 1:
        return mk_eq(e, codes[0])
    if codes[-1] - codes[0] + 1 == len(codes):
        return AND(mk_cmp(">=", e, codes[0]), mk_cmp("<=", e, codes[-1]))
    return OR(*(mk_eq(e, c) for c in codes))


# --------------------------------------------------------------------------- lengths


def sub_len(length: z3.ArithRef | int, k: int) -> z3.ArithRef | int:
    """max(length - k, 0)."""
    if k == 0:
        return length
    if isinstance(length, int):
        return max(length - k, 0)
    return cast(z3.ArithRef, mk_ite(mk_cmp(">", length, k), length - k, 0))


def min_len(length: z3.ArithRef | int, k: int) -> z3.ArithRef | int:
    """min(length, k)."""
    if isinstance(length, int):
        return min(length, k)
    return cast(z3.ArithRef, mk_ite(mk_cmp("<", length, k), length, k))


def max0(e: z3.ArithRef | int) -> z3.ArithRef | int:
    """max(e, 0)."""
    if isinstance(e, int):
        return max(e, 0)
    return cast(z3.ArithRef, z3.If(e > 0, e, 0))


def min2(a: z3.ArithRef | int, b: z3.ArithRef | int) -> z3.ArithRef | int:
    """min(a, b) of two lengths."""
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    if a is b:
        return a
    return cast(z3.ArithRef, z3.If(a <= b, a, b))
