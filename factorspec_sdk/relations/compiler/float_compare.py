"""Comparisons of floats and Decimals, with Python's results or refused.

`floats` holds a float expression as the exact rational value ``R`` its decimals have, with a
bound ``err`` on how far Python's double can be from it (its module docstring has the whole
argument); this module proves, per comparison, that Python's answer is the one on ``R``:

- ``fl`` is monotone, and one-to-one on decimals of at most 15 significant digits, so two
  rounded values compare as their ``R`` (`order_floats`, ``==`` included).
- A rounded value against a constant is a linear comparison of ``R`` with the midpoint
  between the constant and the double before it (`_against`).
- A computed value against a constant or another value is exact when no possible ``R`` lies
  within ``err`` of the comparison's edge; where exactly one does, an ordering excludes it
  (its ``ok`` false there), and else the comparison is refused saying what compiles instead
  (`_decided_by_rounding`). ``math.isclose`` is decided the same way (`isclose_floats`).
"""

from __future__ import annotations

import ast
import math
import struct
from fractions import Fraction
from math import lcm
from typing import TYPE_CHECKING, NoReturn, cast

import z3

from factorspec_sdk.relations.compiler.floats import (
    ROUNDOFF,
    SUBNORMAL,
    add_floats,
    as_float,
    digits15,
    is_float,
    neg_abs_float,
    result_kind,
    scaled_num,
)
from factorspec_sdk.relations.compiler.ints import ORDER_OPS
from factorspec_sdk.relations.compiler.raises import operand_texts
from factorspec_sdk.relations.compiler.terms import AND, NOT, Cond
from factorspec_sdk.relations.compiler.values import UNDEF, Num, R, SFloat, V

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import RelationCompiler

__all__ = ["isclose_floats", "order_floats"]


def _is_even(d: float) -> bool:
    """Whether the double ``d`` has an even significand (round-half-even picks it on ties)."""
    bits: int = struct.unpack("<q", struct.pack("<d", d))[0]
    return bits % 2 == 0


def _rounds_below(x: SFloat, q: Fraction) -> Cond:
    """``fl(R) < q`` for a rounded ``x`` and any rational ``q``, exactly."""
    t = float(q)  # the least double >= q: Python's float(Fraction) rounds to nearest
    if Fraction(t) < q:
        t = math.nextafter(t, math.inf)
    before = math.nextafter(t, -math.inf)  # fl(R) < t  <=>  fl(R) <= before
    mid = (Fraction(before) + Fraction(t)) / 2
    scaled = mid * x.den  # compare num / den with mid: num * mid.den vs mid.num * den
    lhs = x.num * scaled.denominator
    rhs = scaled.numerator
    if _is_even(before):  # a tie rounds down to `before`
        return cast(z3.BoolRef, lhs <= rhs)
    return cast(z3.BoolRef, lhs < rhs)


def _exact_cmp(op: type[ast.cmpop], x: SFloat, y: SFloat) -> Cond:
    den = lcm(x.den, y.den)
    a, b = scaled_num(x, den), scaled_num(y, den)
    if op is ast.Eq:
        return cast(z3.BoolRef, a == b)
    if op is ast.NotEq:
        return cast(z3.BoolRef, a != b)
    return cast(z3.BoolRef, ORDER_OPS[op](a, b))


def order_floats(
    cx: RelationCompiler, op: type[ast.cmpop], a: V, b: V, node: ast.AST
) -> tuple[Cond, Cond] | None:
    """``a op b`` (``== != < <= > >=``) when either is a float, as (result, ok); None else.

    Exact where the proof settles it. Where one grid value of the exact difference lies
    within the rounding error of the comparison's edge, an ordering (``<``...) is compiled
    with that value excluded (``ok`` false there: such a record is never written; see the
    module docstring). Raises `RelationDefinitionError` where rounding could decide more.
    """
    if not (is_float(a) or is_float(b)):
        return None
    x, y = as_float(cx, a), as_float(cx, b)
    if x is None or y is None:
        if op in (ast.Eq, ast.NotEq):
            return op is ast.NotEq, True  # a float never equals a str, a date, None...
        cx.fail(
            "float comparison",
            f"{ast.unparse(node)}: a float ordered against a non-number (Python raises "
            "TypeError); compare floats with numbers",
            node,
        )
    if x.err == 0 and y.err == 0:  # both are their R exactly (Python compares exactly)
        return _exact_cmp(op, x, y), True
    if {x.kind, y.kind} == {Num.FLOAT, Num.DECIMAL}:  # Decimal('0.1') != 0.1 in Python
        cx.fail(
            "comparison of a Decimal with a float",
            f"{ast.unparse(node)}: Python compares the Decimal with the float's exact binary "
            "value; give both fields the same type",
            node,
        )
    const = _constant(a), _constant(b)
    if const[0] is not None or const[1] is not None:
        v, q, flipped = (y, const[0], True) if const[0] is not None else (x, const[1], False)
        assert q is not None
        if v.rounded:
            return _against(op, v, q, flipped), True
        edge, num, den, err = q, v.num, v.den, v.err
    elif x.rounded and y.rounded and digits15(x) and digits15(y):
        return _exact_cmp(op, x, y), True
    else:  # compare the exact difference with 0; each double is within its own err
        den = lcm(x.den, y.den)
        edge, err = Fraction(0), x.err + y.err
        num = cast(z3.ArithRef, scaled_num(x, den) - scaled_num(y, den))
    lo = math.ceil((edge - err) * den)  # grid values num / den within err of the edge
    hi = math.floor((edge + err) * den)
    if lo > hi:  # none: the doubles are on the same side as the exact values
        return _exact_cmp(op, x, y), True
    if lo == hi and op not in (ast.Eq, ast.NotEq):  # one: excluded (never written)
        return _exact_cmp(op, x, y), cast(z3.BoolRef, num != lo)
    _decided_by_rounding(cx, op, node, x, y, edge, den, err, hi - lo + 1)


def _decided_by_rounding(
    cx: RelationCompiler,
    op: type[ast.cmpop],
    node: ast.AST,
    x: SFloat,
    y: SFloat,
    edge: Fraction,
    den: int,
    err: Fraction,
    count: int,
) -> NoReturn:
    """Refuse a comparison that rounding decides, saying why and what compiles instead."""
    places = _grid_places(den)
    step = f"1e-{places}" if places is not None else f"1/{den}"
    lhs, rhs = operand_texts(node) or ("a", "b")
    if op in (ast.Eq, ast.NotEq) and count == 1:
        if places is None:
            instead = "use Decimal fields (exact arithmetic)"
        elif x.err == 0 or y.err == 0:  # a constant or an exact value on one side
            computed, other = (rhs, lhs) if x.err == 0 else (lhs, rhs)
            instead = f"write round({computed}, {places}) == {other} (exact)"
        else:
            instead = (
                f"write abs({lhs} - {rhs}) < {5 * 10.0 ** -(places + 1)!r} (equal to within "
                f"half a step) or round({lhs}, {places}) == round({rhs}, {places}) (both "
                "exact)"
            )
        why = (
            f"its sides are multiples of {step}, and where their exact values are equal "
            "Python's doubles can still differ in the last bit (0.1 + 0.2 == 0.3 is False "
            "in Python), so == and != of computed floats are decided by rounding"
        )
    else:
        instead = (
            "give the fields fewer decimals (Annotated[float, Places(n)]) or smaller bounds, "
            "so that the rounding error stays below half a step, or use Decimal fields "
            "(exact arithmetic)"
        )
        why = (
            f"its exact values are multiples of {step} and Python's doubles can be up to "
            f"{float(err):.2g} from them, so {count} possible values within that of "
            f"{_shown(edge)} are decided by how the doubles round"
        )
    cx.fail(
        "float comparison decided by rounding",
        f"{ast.unparse(node)}: {why}; {instead}",
        node,
    )


def _grid_places(den: int) -> int | None:
    """The decimals ``k`` of a grid of step ``1 / den`` (``den`` divides ``10**k``), or None."""
    k = 0
    while 10**k % den:
        if k > 30:
            return None
        k += 1
    return k


def _shown(q: Fraction) -> str:
    """A rational as the user wrote it (a float constant's repr, an int)."""
    return str(q.numerator) if q.denominator == 1 else repr(float(q))


def _constant(v: V) -> Fraction | None:
    """The exact value of a Python number (Python compares ints and floats exactly)."""
    if isinstance(v, (bool, int, float)):
        return Fraction(v)
    return None


def _against(op: type[ast.cmpop], v: SFloat, q: Fraction, flipped: bool) -> Cond:
    """``fl(R) op q`` (or ``q op fl(R)`` when ``flipped``) for a rounded ``v``, exactly."""
    if flipped:
        op = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}.get(op, op)
    below = _rounds_below(v, q)  # fl(R) < q
    t = float(q)
    if Fraction(t) < q:
        t = math.nextafter(t, math.inf)
    # fl(R) <= q  <=>  fl(R) < the least double > q
    above = math.nextafter(t, math.inf) if Fraction(t) == q else t
    at_most = _rounds_below(v, Fraction(above))
    if op is ast.Lt:
        return below
    if op is ast.LtE:
        return at_most
    if op is ast.Gt:
        return NOT(at_most)
    if op is ast.GtE:
        return NOT(below)
    eq = AND(at_most, NOT(below))
    return eq if op is ast.Eq else NOT(eq)


def isclose_floats(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    """``math.isclose(a, b, rel_tol=..., abs_tol=...)`` of floats, exactly (or refused).

    Python computes ``d = abs(b - a)`` and answers ``d <= rel_tol * abs(b) or d <=
    rel_tol * abs(a) or d <= abs_tol`` (``a == b`` makes ``d`` 0). The relative terms are
    at most ``rel_tol * max|a, b|`` (the default 1e-09 of values up to a million: 0.001). So
    when no possible exact ``|b - a|`` lies between ``abs_tol - err`` and that bound ``+
    err``, the answer is ``|b - a| <= abs_tol`` on the exact values. When one does, and
    smaller differences are surely close, that one is excluded (``ok`` false there), as for
    an ordering (`order_floats`); else it is refused.
    """
    names = ("a", "b", "rel_tol", "abs_tol")
    given = dict(zip(names, args, strict=False)) | kwargs
    if set(given) - set(names) or not {"a", "b"} <= set(given):
        cx.fail("call to math.isclose()", "math.isclose(a, b, rel_tol=..., abs_tol=...)", node)
    rel, tol = given.get("rel_tol", 1e-09), given.get("abs_tol", 0.0)
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in (rel, tol)):
        cx.fail("call to math.isclose()", "rel_tol and abs_tol must be constants", node)
    rel_q, tol_q = Fraction(cast(float, rel)), Fraction(cast(float, tol))
    if rel_q < 0 or tol_q < 0:
        return R(UNDEF, False)  # ValueError: tolerances must be non-negative
    x, y = as_float(cx, given["a"]), as_float(cx, given["b"])
    if x is None or y is None or result_kind(x, y) != Num.FLOAT:
        cx.fail("call to math.isclose()", "math.isclose() of floats (not Decimals)", node)
    d = neg_abs_float(add_floats(y, x, -1), True)
    relative = rel_q * max(x.mag + x.err, y.mag + y.err) * (1 + 4 * ROUNDOFF) + SUBNORMAL
    lo = math.floor((tol_q - d.err) * d.den)  # grid points n / den with n <= lo: surely close
    hi = math.floor((max(tol_q, relative) + d.err) * d.den) + 1  # n >= hi: surely not
    close = cast(z3.BoolRef, d.num * tol_q.denominator <= tol_q.numerator * d.den)
    if hi - lo <= 1 or (d.err == 0 and relative <= tol_q):
        return R(close)
    if hi - lo == 2 and lo >= 0:  # one difference undecided, and smaller ones are close
        return R(close, cast(z3.BoolRef, d.num != lo + 1))
    places = _grid_places(d.den)
    step = f"1e-{places}" if places is not None else f"1/{d.den}"
    half = f"abs_tol={5 * 10.0 ** -(places + 1)!r}" if places is not None else "abs_tol"
    cx.fail(
        "math.isclose() decided by rounding",
        f"{ast.unparse(node)}: the exact differences are multiples of {step}, and "
        f"{hi - lo - 1} of them lie within the rounding error of the tolerance (up to "
        f"{float(max(tol_q, relative)):.2g}: abs_tol, or rel_tol times the values), "
        "where how the doubles round decides Python's answer; give rel_tol=0 and "
        f"{half} (equal to within half a step), or an abs_tol of at least one step, or "
        "the fields fewer decimals",
        node,
    )
