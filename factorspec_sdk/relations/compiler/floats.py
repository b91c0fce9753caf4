"""The number kinds ``float`` and ``Decimal``: fields and arithmetic, with Python's results.

**Decimal** (a ``decimal.Decimal`` leaf, or a Decimal constant) is exact rational arithmetic,
as Python's is while a result keeps at most the context's 28 significant digits: ``+ - *``,
``sum``, ``abs``, ``min``/``max``, comparisons (with ints, Decimals and, exactly, float
constants), ``round(x)`` and ``round(x, n)`` half to even, ``/`` by a constant whose
quotients are finite decimals. A result that could need more than 28 digits, a division that
could round, and a comparison of a Decimal with a float *field* (Python compares the float's
binary value) are refused; Decimal with float arithmetic raises ``TypeError`` in Python, which
means "violated".

**float**: Python's IEEE-754 results.

A float leaf is written as fixed-point text with at most ``places`` decimals (`Places`), so
its exact decimal value is ``n / 10**places`` for an Int variable ``n``; Python holds the
double nearest to it, ``fl(n / 10**places)``. A float expression is an `SFloat`: the exact
rational value ``R = num / den`` the same arithmetic has on the decimals (``num`` a Z3 Int
term), a bound ``mag`` on ``|R|``, a bound ``err`` on how far Python's double can be from
``R``, and whether the double is exactly ``fl(R)`` (``rounded``).

Why not Z3's floating-point theory: it is exact, but bit-blasting a double's ``*`` and ``+``
made a three-item receipt take 22 s for one check and over 120 s for the next (measured with
z3-solver 5.4 on this machine), where the oracle asks hundreds per record. Instead every outcome is
*proved* equal to the rational one, per operation, at compile time, and a relation whose
outcome the proof cannot settle is refused with `RelationDefinitionError`, never
approximated:

- ``fl`` is monotone, and one-to-one on decimals of at most 15 significant digits (each
  survives the round trip through a double). So comparing two rounded values (leaves,
  ``round(x, n)``, ints, their negations and ``abs``) is comparing their ``R`` exactly, ``==``
  included.
- A rounded value against a constant ``c``: ``fl(R) < c`` holds exactly for ``R`` below the
  midpoint between ``c`` and the double before it (at the midpoint, as round-half-even
  decides), so it is a linear comparison of ``R`` with a rational.
- Arithmetic (``+ - *``, ``sum``, ``/`` by a constant) rounds: its ``err`` grows by the
  standard bound ``|fl(s) - s| <= u |s|`` (``u = 2**-53``, plus the subnormal spacing) per
  operation. Comparing such a value with a constant ``c`` is exact when no possible ``R``
  (a multiple of ``1 / den``) lies within ``err`` of ``c``: then the double is on the same
  side of ``c`` as ``R``. ``abs(total - sum(...)) < 0.005`` over cents is such a case (``R``
  is a multiple of 0.01); ``a + b == 0.3`` is not (``0.1 + 0.2 == 0.3`` is False in Python
  while the decimals are equal), and is refused with the rewrite that compiles
  (``round(a + b, 6) == 0.3``).
- **One value excluded** (a documented narrowing). Where exactly one possible ``R`` (of two
  computed sides: of their difference) lies within ``err`` of the comparison's edge, an
  ordering (``< <= > >=``) or ``math.isclose`` is compiled exactly at every other value and
  that one is excluded: its ``ok`` is false there, as if Python raised, so no record the
  writer produces has it. At that value Python's answer depends on how the doubles round
  (``abs(0.305 - 0.1 * 3) < 0.005`` is True in Python while the decimals differ by exactly
  0.005). So ``abs(total - sum(...)) < 0.005`` over six-decimal prices compiles, and never
  writes a total exactly half a cent off. ``==`` and ``!=`` are not narrowed (the excluded
  value would be the equality itself); more than one such value (magnitudes near 15
  significant digits) is refused, saying how many and why.
- Multiplying or dividing a rounded value by a power of two (``x * 2``, ``x / 4``) is exact
  on doubles, so the result is rounded again.
- ``round(x, n)`` of a value whose ``R`` has at most ``n`` decimals and ``err < 10**-n / 2``
  is exactly ``fl(R)`` (Python rounds the double's exact value to ``n`` decimals, which is
  ``R``): a rounded value again. ``round(x)`` of a rounded value is ``R`` rounded half to
  even, an int.
- ``min``/``max`` pick by ``R``; of rounded values the result is rounded again (``fl`` is
  monotone, so ``min(fl(a), fl(b)) == fl(min(a, b))``), otherwise it is within
  ``2 (err_a + err_b)`` of the double Python picks.
- ``sum`` folds ``+`` in order, with the recursive-summation bound plus ``2u`` of the total
  magnitude as slack, which also covers Python 3.12's compensated ``sum``.

Comparisons and ``math.isclose`` (the proofs above that compare) are `float_compare`'s.

Anything else on floats and Decimals (``//``, ``%``, ``**``, ``/`` by a record value, ``math``
functions, truth of a computed float) raises `RelationDefinitionError` naming the construct.
"""

from __future__ import annotations

import ast
import decimal
import math
from fractions import Fraction
from math import lcm
from typing import TYPE_CHECKING, cast

import z3

from factorspec_sdk.relations.compiler.ints import as_int_term
from factorspec_sdk.relations.compiler.raises import (
    refuse_type_error,
    sample,
    type_name,
)
from factorspec_sdk.relations.compiler.terms import AND, NOT, OR, Cond, mk_ite
from factorspec_sdk.relations.compiler.values import UNDEF, Num, R, SFloat, V
from factorspec_sdk.relations.floats import FLOAT_LIMIT
from factorspec_sdk.relations.kinds import LeafKind
from factorspec_sdk.relations.layout import LeafLayout, Path

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import RelationCompiler

__all__ = [
    "ROUNDOFF",
    "SUBNORMAL",
    "add_floats",
    "arith_floats",
    "as_float",
    "digits15",
    "divide_float",
    "float_leaf",
    "is_float",
    "ite_floats",
    "minmax_floats",
    "neg_abs_float",
    "result_kind",
    "round_float",
    "scaled_num",
    "sum_floats",
    "to_float",
    "truncate_float",
    "truthy_float",
]

ROUNDOFF = Fraction(1, 2**53)
"""Unit roundoff of a double: ``|fl(x) - x| <= u |x|`` for normal results."""
SUBNORMAL = Fraction(1, 2**1074)
"""The spacing of subnormal doubles: a bound on the absolute error of a tiny result."""
_EXACT_INT = 2**53
"""Ints up to this magnitude convert to float exactly."""
_INT_BOUND = 10**18
"""Magnitude assumed for an int term whose bound the compiler cannot read off."""


def float_leaf(cx: RelationCompiler, path: Path, node: LeafLayout) -> SFloat:
    """The scaled Int variable of a float leaf (``fl(n / 10**places)``) or a Decimal leaf."""
    rec = cx.leaf_var(path, node)
    n = cast(z3.ArithRef, rec.term)
    assert rec.ge is not None and rec.le is not None  # a float's variable is bounded
    mag = Fraction(max(abs(rec.ge), abs(rec.le)), 10**node.places)
    if node.kind == LeafKind.DECIMAL:
        return SFloat(n, 10**node.places, mag, Fraction(0), True, Num.DECIMAL)
    return SFloat(n, 10**node.places, mag, mag * ROUNDOFF + SUBNORMAL, True)


def _const(c: float | int | decimal.Decimal) -> SFloat:
    """A Python number: a float or a Decimal exactly, an int as the float it converts to."""
    if isinstance(c, decimal.Decimal):
        q = Fraction(c)
        return SFloat(z3.IntVal(q.numerator), q.denominator, abs(q), Fraction(0), True, Num.DECIMAL)
    if isinstance(c, float):
        q = Fraction(c)
        return SFloat(z3.IntVal(q.numerator), q.denominator, abs(q), Fraction(0), True)
    err = Fraction(0) if abs(c) <= _EXACT_INT else abs(c) * ROUNDOFF  # int -> float rounds above
    return SFloat(z3.IntVal(c), 1, Fraction(abs(c)), err, err == 0, Num.INT)


def _int_bound(cx: RelationCompiler, t: z3.ExprRef) -> int:
    """A bound on ``|t|`` for an Int term, from the variables' bounds (else `_INT_BOUND`)."""
    if z3.is_int_value(t):
        return abs(int(cast(z3.IntNumRef, t).as_long()))
    if z3.is_const(t) and t.num_args() == 0:
        rec = cx.vars.get(t.decl().name())
        if rec is None or rec.ge is None or rec.le is None:
            return _INT_BOUND
        return max(abs(rec.ge), abs(rec.le))
    kids = [_int_bound(cx, k) for k in t.children() if z3.is_int(k)]
    if z3.is_add(t) or z3.is_sub(t):
        return min(sum(kids), _INT_BOUND)
    if z3.is_mul(t):
        return min(math.prod(kids), _INT_BOUND)
    if z3.is_app_of(t, z3.Z3_OP_UMINUS):
        return kids[0]
    if z3.is_app_of(t, z3.Z3_OP_ITE):
        return max(kids) if kids else 1
    return _INT_BOUND


def as_float(cx: RelationCompiler, v: V) -> SFloat | None:
    """``v`` as a float operand (an `SFloat`, a Python number, an Int/Bool term), or None."""
    if isinstance(v, SFloat):
        return v
    if isinstance(v, (bool, int, float, decimal.Decimal)):
        if isinstance(v, decimal.Decimal) and not v.is_finite():
            return None
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return _const(int(v) if isinstance(v, bool) else v)
    t = as_int_term(v)
    if t is None or isinstance(t, int):
        return None if t is None else _const(t)
    bound = _int_bound(cx, t)
    err = Fraction(0) if bound <= _EXACT_INT else bound * ROUNDOFF
    return SFloat(t, 1, Fraction(bound), err, err == 0, Num.INT)


def is_float(v: V) -> bool:
    """Whether ``v`` is a float or Decimal (an `SFloat`, or a constant of either type)."""
    return isinstance(v, (SFloat, float, decimal.Decimal))


def result_kind(x: SFloat, y: SFloat) -> Num | None:
    """The kind of ``x op y``; None when Python raises ``TypeError`` (Decimal with float)."""
    kinds = {x.kind, y.kind}
    if kinds == {Num.FLOAT, Num.DECIMAL}:
        return None
    return Num.DECIMAL if Num.DECIMAL in kinds else Num.FLOAT if Num.FLOAT in kinds else Num.INT


_DECIMAL_DIGITS = 10**28
"""Python's default Decimal context keeps 28 significant digits."""


def _exact_decimal(cx: RelationCompiler, x: SFloat, node: ast.AST) -> SFloat:
    """A Decimal result: exact while its scaled value has at most 28 digits, else refused."""
    if x.mag * x.den >= _DECIMAL_DIGITS:
        cx.fail(
            "Decimal arithmetic beyond 28 digits",
            f"{ast.unparse(node)}: the result can have more than the 28 significant digits "
            "of Python's Decimal context, which rounds it; bound the fields (max_digits)",
            node,
        )
    return SFloat(x.num, x.den, x.mag, Fraction(0), True, Num.DECIMAL)


def scaled_num(x: SFloat, den: int) -> z3.ArithRef:
    """``x.num`` on the common denominator ``den`` (a multiple of ``x.den``)."""
    k = den // x.den
    return x.num if k == 1 else cast(z3.ArithRef, x.num * k)


def _rounding(mag: Fraction, err: Fraction) -> Fraction:
    """The error one rounding of a result of magnitude at most ``mag + err`` adds."""
    return (mag + err) * ROUNDOFF + SUBNORMAL


def add_floats(a: SFloat, b: SFloat, sign: int) -> SFloat:
    """``a + b`` (``sign`` 1) or ``a - b`` (``sign`` -1), with the error one rounding adds."""
    den = lcm(a.den, b.den)
    num = scaled_num(a, den) + sign * scaled_num(b, den)
    mag = a.mag + b.mag
    exact = a.err == 0 and b.err == 0
    err = a.err + b.err + _rounding(mag, a.err + b.err)
    return SFloat(cast(z3.ArithRef, num), den, mag, err, exact)


def _power_of_two(x: SFloat) -> Fraction | None:
    """The constant ``x`` when it is ``±2**k`` (scaling by it is exact on doubles), else None."""
    if x.err != 0 or not z3.is_int_value(x.num):
        return None
    q = Fraction(int(cast(z3.IntNumRef, x.num).as_long()), x.den)
    n, d = abs(q.numerator), q.denominator
    if n == 0 or n & (n - 1) or d & (d - 1) or max(n, d).bit_length() > 64:
        return None  # not a power of two, or so far from 1 that the result could under/overflow
    return q


def _mul(a: SFloat, b: SFloat) -> SFloat:
    num = cast(z3.ArithRef, a.num * b.num)
    mag = a.mag * b.mag
    for x, y in ((a, b), (b, a)):
        k = _power_of_two(y)
        if k is not None and x.rounded:  # fl(R) * 2**k == fl(R * 2**k): exact, still rounded
            return SFloat(num, a.den * b.den, mag, x.err * abs(k), True)
    carried = a.mag * b.err + b.mag * a.err + a.err * b.err
    exact = a.err == 0 and b.err == 0
    return SFloat(num, a.den * b.den, mag, carried + _rounding(mag, carried), exact)


def arith_floats(
    cx: RelationCompiler, op: type[ast.operator], a: V, b: V, ok: Cond, node: ast.AST
) -> R | None:
    """``a op b`` when either is a float (None when neither is: another kind's rule)."""
    if not (is_float(a) or is_float(b)):
        return None
    x, y = as_float(cx, a), as_float(cx, b)
    if x is None or y is None:
        cx.fail(
            "float arithmetic",
            f"{ast.unparse(node)}: a float with a non-number; convert an int with float(n) "
            "(strings and dates do not mix with numbers)",
            node,
        )
    kind = result_kind(x, y)
    if kind is None:
        return R(UNDEF, False)  # TypeError: a Decimal and a float do not mix
    if op in (ast.Add, ast.Sub, ast.Mult):
        out = add_floats(x, y, 1 if op is ast.Add else -1) if op is not ast.Mult else _mul(x, y)
        if kind == Num.DECIMAL:
            return R(_exact_decimal(cx, out, node), ok)
        return R(out, ok)
    cx.fail(
        "float arithmetic",
        f"{ast.unparse(node)}: on floats, relations support + - * (and / by a constant, "
        "comparisons, abs, min, max, sum, round)",
        node,
    )


def divide_float(cx: RelationCompiler, a: V, b: V, ok: Cond, node: ast.AST) -> R:
    """``a / b`` (true division: a float, or a Decimal) for a non-zero constant ``b``."""
    x = as_float(cx, a)
    if x is None:
        cx.fail(
            "true division (/)",
            f"{ast.unparse(node)}: / of a {type_name(sample(a))} is not compiled; divide "
            "numbers (int, float, Decimal), or multiply the other side instead "
            "(d >= n * timedelta(hours=1) for a timedelta d)",
            node,
        )
    if isinstance(b, bool) or not isinstance(b, (int, float, decimal.Decimal)):
        cx.fail(
            "true division (/)",
            f"{ast.unparse(node)}: / by a value read from the record is not compiled (it "
            "is not linear); multiply out instead: a / b > c as a > c * b where b > 0, or "
            "divide by a constant",
            node,
        )
    y = _const(b)
    kind = result_kind(x, y)
    if kind is None:
        return R(UNDEF, False)  # TypeError: a Decimal and a float do not mix
    if b == 0:
        return R(UNDEF, False)  # ZeroDivisionError (decimal.DivisionByZero)
    c = Fraction(b) if kind == Num.DECIMAL else Fraction(float(b))
    num = x.num * (c.denominator if c > 0 else -c.denominator)
    den = x.den * abs(c.numerator)
    mag = x.mag / abs(c)
    if kind == Num.DECIMAL:
        rest = abs(c.numerator)
        for p in (2, 5):
            while rest % p == 0:
                rest //= p
        if rest != 1:
            cx.fail(
                "Decimal division",
                f"{ast.unparse(node)}: the quotient can have more digits than Python's "
                "Decimal context keeps (it rounds to 28); divide by a product of 2s and 5s "
                "(2, 4, 5, 10, 100...) or multiply instead",
                node,
            )
        out = SFloat(cast(z3.ArithRef, num), den, mag, Fraction(0), True, Num.DECIMAL)
        return R(_exact_decimal(cx, out, node), ok)
    carried = x.err / abs(c)
    if x.rounded and _power_of_two(_const(float(b))) is not None:  # halving is exact
        return R(SFloat(cast(z3.ArithRef, num), den, mag, carried, True), ok)
    err = carried + _rounding(mag, carried)
    return R(SFloat(cast(z3.ArithRef, num), den, mag, err, x.err == 0), ok)


def neg_abs_float(x: SFloat, absolute: bool) -> SFloat:
    """``-x`` or ``abs(x)``: exact on doubles (only the sign changes)."""
    if absolute:
        num = cast(z3.ArithRef, z3.If(x.num >= 0, x.num, -x.num))
    else:
        num = cast(z3.ArithRef, -x.num)
    return SFloat(num, x.den, x.mag, x.err, x.rounded, x.kind)


def digits15(x: SFloat) -> bool:
    """Whether every possible ``R`` has at most 15 significant digits (``fl`` is 1-1 there)."""
    d, k = x.den, 0
    while d % 10 == 0:
        d, k = d // 10, k + 1
    while d % 2 == 0 or d % 5 == 0:  # 1/2, 1/4, 1/5...: finite decimals with more places
        d, k = d // (2 if d % 2 == 0 else 5), k + 1
    return d == 1 and x.mag * 10**k <= FLOAT_LIMIT


def truthy_float(cx: RelationCompiler, v: SFloat) -> Cond:
    """``bool(x)``: a rounded value is 0.0 exactly when its R is 0."""
    if not v.rounded:
        cx.fail(
            "truth of a computed float",
            "a computed float can be a tiny non-zero rounding error where its decimals are 0",
        )
    return cast(z3.BoolRef, v.num != 0)


def ite_floats(cx: RelationCompiler, c: Cond, a: V, b: V) -> SFloat | None:
    """``a if c else b`` when either is an `SFloat` (None otherwise)."""
    if not (isinstance(a, SFloat) or isinstance(b, SFloat)):
        return None
    x, y = as_float(cx, a), as_float(cx, b)
    if x is None or y is None:
        return None
    kinds = {x.kind, y.kind}
    if kinds == {Num.FLOAT, Num.DECIMAL}:
        return None  # a choice between a float and a Decimal stays a choice
    den = lcm(x.den, y.den)
    num = mk_ite(c, scaled_num(x, den), scaled_num(y, den))
    return SFloat(
        cast(z3.ArithRef, num),
        den,
        max(x.mag, y.mag),
        max(x.err, y.err),
        x.rounded and y.rounded,
        Num.DECIMAL if Num.DECIMAL in kinds else Num.FLOAT if Num.FLOAT in kinds else Num.INT,
    )


def minmax_floats(
    cx: RelationCompiler, values: list[tuple[Cond, V]], is_min: bool, node: ast.AST
) -> SFloat | None:
    """``min``/``max`` of ``(present, value)`` pairs when one is a float (None otherwise)."""
    if not any(is_float(v) for _, v in values):
        return None
    best: SFloat | None = None
    seen: Cond = False
    for present, v in values:
        x = as_float(cx, v)
        if x is None:
            cx.fail(
                "min/max of floats",
                f"{ast.unparse(node)}: a float with a non-number; give min()/max() numbers",
                node,
            )
        if best is None:
            best, seen = x, present
            continue
        kind = result_kind(x, best)
        if kind is None:
            cx.fail(
                "min/max of Decimals and floats",
                f"{ast.unparse(node)}: give the values one type",
                node,
            )
        den = lcm(x.den, best.den)
        a, b = scaled_num(x, den), scaled_num(best, den)
        better = a < b if is_min else a > b
        take = AND(present, OR(NOT(seen), better))
        exact = x.rounded and best.rounded  # fl is monotone: min(fl(a), fl(b)) = fl(min(a, b))
        err = max(x.err, best.err) if exact else 2 * (x.err + best.err)
        picked = (a if take else b) if isinstance(take, bool) else z3.If(take, a, b)
        best = SFloat(
            cast(z3.ArithRef, picked),
            den,
            max(x.mag, best.mag),
            err,
            exact,
            kind,
        )
        seen = OR(seen, present)
    return best


def sum_floats(
    cx: RelationCompiler, items: list[tuple[Cond, V]], start: V, node: ast.AST
) -> SFloat | None:
    """``sum(...)`` of ``(present, value)`` pairs when one is a float (None otherwise)."""
    if not (is_float(start) or any(is_float(v) for _, v in items)):
        return None
    total = as_float(cx, start)
    if total is None:
        cx.fail(
            "sum of floats",
            f"{ast.unparse(node)}: a start that is not a number; start with 0 or 0.0",
            node,
        )
    n = 0
    for present, v in items:
        x = as_float(cx, v)
        if x is None:
            cx.fail(
                "sum of floats",
                f"{ast.unparse(node)}: a float with a non-number; sum numbers only",
                node,
            )
        if present is not True:
            num = cast(z3.ArithRef, mk_ite(present, x.num, 0))
            x = SFloat(num, x.den, x.mag, x.err, x.rounded, x.kind)
        kind = result_kind(total, x)
        if kind is None:  # Python's + raises TypeError: reported with the fix
            refuse_type_error(cx, ast.Add, total, x, node)
            cx.fail("sum of Decimals and floats", f"{ast.unparse(node)}: give them one type", node)
        if n == 0 and _zero(total):  # Python's sum starts at int 0: 0 + x is x exactly
            total = SFloat(x.num, x.den, x.mag, x.err, x.rounded, kind)
        else:
            total = add_floats(total, x, 1)
            total = _exact_decimal(cx, total, node) if kind == Num.DECIMAL else total
        n += 1
    if n >= 2 and total.kind != Num.DECIMAL:  # slack for Python 3.12's compensated sum
        total = SFloat(total.num, total.den, total.mag, total.err + 2 * ROUNDOFF * total.mag, False)
    return total


def _zero(x: SFloat) -> bool:
    return bool(z3.is_int_value(x.num)) and int(cast(z3.IntNumRef, x.num).as_long()) == 0


def truncate_float(cx: RelationCompiler, v: V, node: ast.AST) -> V | None:
    """``int(x)`` of a float or Decimal (toward zero); None for other values.

    Exact for a rounded float: a decimal of at most 15 digits and its double lie on the same
    side of every integer (the round-trip property); a Decimal is exact.
    """
    if not isinstance(v, SFloat):
        return None
    if not (v.rounded and (v.kind != Num.FLOAT or digits15(v))):
        cx.fail(
            "int() of a computed float",
            f"{ast.unparse(node)}: a computed float can round across an integer; round() it first",
            node,
        )
    if v.den == 1:
        out: V = v.num
        return out
    out = z3.If(v.num >= 0, v.num / v.den, -((-v.num) / v.den))
    return out


def to_float(cx: RelationCompiler, v: V) -> SFloat | None:
    """``float(x)`` of a number: an int converts exactly below 2**53, a Decimal rounds once."""
    x = as_float(cx, v)
    if x is None or isinstance(v, (str, bytes)):
        return None
    if x.kind == Num.FLOAT:
        return x
    if x.err == 0 and x.kind == Num.INT and x.den == 1:  # an exact int: the double is the int
        return SFloat(x.num, 1, x.mag, Fraction(0), True)
    return SFloat(x.num, x.den, x.mag, x.mag * ROUNDOFF + SUBNORMAL + x.err, x.err == 0)


def _half_even(num: z3.ArithRef, den: int) -> z3.ArithRef:
    """``num / den`` rounded half to even, as an Int term (``den > 0``)."""
    if den == 1:
        return num
    q = cast(z3.ArithRef, num / den)  # Z3's integer division floors for a positive divisor
    r = num - q * den  # 0 <= r < den
    up = OR(2 * r > den, AND(2 * r == den, q % 2 == 1))
    return cast(z3.ArithRef, q + z3.If(up, 1, 0))


def round_float(cx: RelationCompiler, v: V, ndigits: V, node: ast.AST) -> V | None:
    """``round(x)`` (an int) or ``round(x, n)`` of a float or Decimal; None for others.

    A Decimal rounds exactly, half to even (``Decimal.__round__``); a float as the module
    docstring says.
    """
    if not isinstance(v, SFloat):
        return None
    if ndigits is not None and (
        isinstance(ndigits, bool) or not isinstance(ndigits, int) or ndigits < 0
    ):
        cx.fail("round() of a float", "round(x, n) needs a constant n >= 0", node)
    scale: int = cast(int, 10 ** (ndigits or 0))
    out: V
    if v.kind == Num.DECIMAL:
        g = math.gcd(scale, v.den)  # the same quotient in lowest terms: smaller coefficients
        q = _half_even(cast(z3.ArithRef, v.num * (scale // g)), v.den // g)
        out = q if ndigits is None else SFloat(q, scale, v.mag + 1, Fraction(0), True, Num.DECIMAL)
        return out
    if ndigits is None:
        if not v.rounded or v.err * 2 * v.den >= 1:
            _unround(cx, node)
        out = _half_even(v.num, v.den)
        return out
    if scale % v.den != 0 or v.err >= Fraction(1, 2 * scale):
        _unround(cx, node)
    return SFloat(v.num, v.den, v.mag, v.mag * ROUNDOFF + SUBNORMAL, True)


def _unround(cx: RelationCompiler, node: ast.AST) -> None:
    cx.fail(
        "round() of a float decided by rounding",
        f"{ast.unparse(node)}: the value can have more decimals than it is rounded to, so "
        "Python's result can depend on how the double rounds; round a value with at most "
        "that many decimals (prices to the cent: Annotated[float, Places(2)])",
        node,
    )
