"""How a number of a grammar value closes: the digits its range needs, its guide.

For the closing bound (`factorspec_sdk.writer.closing`): the most bytes a number's completion
takes (`number_bound`: the digits of its bounds plus `NUMBER_SLACK`), and whether a value is
in a range (`in_range`). For the closing walk (`factorspec_sdk.writer.closing_guides`): a
`NumberGuide` (a range, an enumerated number) and the shortest text that completes a number
in its range (`number_completion`), exact in rationals.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

__all__ = [
    "NUMBER_SLACK",
    "NumberGuide",
    "in_range",
    "number_bound",
    "number_completion",
    "number_guide",
]

NUMBER_SLACK = 6
"""Bytes a number's closing walk may write beyond its range's digits: a sign, a point, a
fraction digit between two exclusive bounds, exponent digits llguidance lets in."""


def number_bound(s: Mapping[str, Any]) -> int:
    """Most bytes a number of ``s`` closes with: 1 with no range, else its bounds' digits."""
    texts = [
        _plain(v)
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
        if isinstance((v := s.get(k)), int | float) and not isinstance(v, bool)
    ]
    if not texts:
        return 1
    return 2 * max(len(t) for t in texts) + NUMBER_SLACK


def _plain(x: float) -> str:
    """A number's digits written out, without an exponent (``1e-9`` -> ``0.000000001``)."""
    return format(Decimal(repr(x)), "f") if isinstance(x, float) else str(x)


@dataclass(frozen=True, slots=True)
class NumberGuide:
    """A number's range (or one literal text): see `number_completion`.

    Attributes:
        integer: only integers.
        lo: the lower bound, or None.
        hi: the upper bound, or None.
        lo_open: the lower bound is exclusive.
        hi_open: the upper bound is exclusive.
        multiple: ``multipleOf``, or None.
        literal: the one text the number is (an enumerated number).
    """

    integer: bool = False
    lo: Fraction | None = None
    hi: Fraction | None = None
    lo_open: bool = False
    hi_open: bool = False
    multiple: Fraction | None = None
    literal: str | None = None

    def completion(self, text: str) -> str | None:
        """The shortest text after ``text`` that makes it a number of this guide."""
        if self.literal is not None:
            return self.literal[len(text) :] if self.literal.startswith(text) else None
        return number_completion(text, self)


def number_guide(s: Mapping[str, Any], *, integer: bool) -> NumberGuide:
    """The `NumberGuide` of a number schema's range keywords (``integer``: only integers)."""

    def num(key: str) -> Fraction | None:
        v = s.get(key)
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        return Fraction(repr(v)) if isinstance(v, float) else Fraction(v)

    lo, hi = num("minimum"), num("maximum")
    xlo, xhi = num("exclusiveMinimum"), num("exclusiveMaximum")
    lo_open = xlo is not None and (lo is None or xlo >= lo)
    hi_open = xhi is not None and (hi is None or xhi <= hi)
    return NumberGuide(
        integer=integer,
        lo=xlo if lo_open else lo,
        hi=xhi if hi_open else hi,
        lo_open=lo_open,
        hi_open=hi_open,
        multiple=num("multipleOf"),
    )


_NUMBER_PREFIX = re.compile(r"(-?)(0|[1-9][0-9]*)?(?:(\.)([0-9]*))?(?:([eE])([+-]?)([0-9]*))?")
_MOST_DIGITS = 40


def number_completion(text: str, guide: NumberGuide) -> str | None:
    """The shortest text that makes ``text`` a JSON number in ``guide``'s range, or None.

    ``text`` is a prefix of a JSON number. Digits are appended to its integer part, or a
    point and fraction digits (not for an integer), or to its fraction or exponent; of the
    completions of least length, the least text. Exact in rationals: the range's bounds are
    the decimal texts of the schema's numbers, as llguidance reads them.
    """
    m = _NUMBER_PREFIX.fullmatch(text)
    if m is None:
        return None
    sign, whole, dot, frac, e, esign, exp = m.groups(default="")
    if e:
        return _exponent_completion(text, esign, exp, guide)
    if dot and guide.integer:
        return None
    for extra in range(_MOST_DIGITS):
        found = [s for s in _completions(sign, whole, dot, frac, extra, guide) if s is not None]
        if not text and extra >= 2:  # a minus sign, then the rest
            found += [
                "-" + s for s in _completions("-", "", "", "", extra - 1, guide) if s is not None
            ]
        if found:
            return min(found)
    return None


def _completions(
    sign: str, whole: str, dot: str, frac: str, extra: int, guide: NumberGuide
) -> Iterator[str | None]:
    """Completions of exactly ``extra`` characters (see `number_completion`)."""
    negative = sign == "-"
    if dot:
        if extra == 0 and not frac:
            return
        yield _digits(whole + frac, extra, len(frac) + extra, negative, guide, lead=False)
        return
    # more integer digits
    if whole == "0":
        if extra == 0:
            yield _digits("0", 0, 0, negative, guide, lead=False)
    elif whole or extra:
        yield _digits(whole, extra, 0, negative, guide, lead=not whole)
    if guide.integer:
        return
    for k1 in range(extra - 1):  # k1 integer digits, a point, k2 >= 1 fraction digits
        k2 = extra - 1 - k1
        if whole == "0" and k1:
            continue
        if not whole and not k1:
            continue
        head = _digits_split(whole, k1, k2, negative, guide)
        if head is not None:
            yield head


def _digits(
    base: str, k: int, scale: int, negative: bool, guide: NumberGuide, *, lead: bool
) -> str | None:
    """The least ``k`` digits after ``base`` that put the number in range.

    ``scale`` of the digits are decimals; ``lead``: the first digit starts the integer part.
    """
    b = int(base) if base else 0
    lo, hi = b * 10**k, b * 10**k + 10**k - 1
    if lead and k > 1:
        lo = max(lo, 10 ** (k - 1))
    found = _least(lo, hi, scale, negative, guide)
    if found is None:
        return None
    return str(found - b * 10**k).zfill(k) if k else ""


def _digits_split(whole: str, k1: int, k2: int, negative: bool, guide: NumberGuide) -> str | None:
    b = int(whole) if whole else 0
    k = k1 + k2
    lo, hi = b * 10**k, b * 10**k + 10**k - 1
    if not whole and k1 > 1:
        lo = max(lo, 10 ** (k - 1))
    found = _least(lo, hi, k2, negative, guide)
    if found is None:
        return None
    digits = str(found - b * 10**k).zfill(k)
    return digits[:k1] + "." + digits[k1:]


def _least(lo: int, hi: int, scale: int, negative: bool, guide: NumberGuide) -> int | None:
    """The least magnitude ``M`` in ``lo..hi`` with ``±M / 10**scale`` in the guide's range."""
    unit = Fraction(1, 10**scale)
    below, above = guide.lo, guide.hi
    lo_open, hi_open = guide.lo_open, guide.hi_open
    if negative:  # -M in [below, above]  <=>  M in [-above, -below]
        below, above = (
            (None if guide.hi is None else -guide.hi),
            (None if guide.lo is None else -guide.lo),
        )
        lo_open, hi_open = guide.hi_open, guide.lo_open
    if below is not None:
        q = below / unit
        first = math.floor(q) + 1 if lo_open and q.denominator == 1 else math.ceil(q)
        lo = max(lo, first)
    if above is not None:
        q = above / unit
        last = math.ceil(q) - 1 if hi_open and q.denominator == 1 else math.floor(q)
        hi = min(hi, last)
    step = 1
    if guide.multiple is not None and guide.multiple > 0:
        step_q = guide.multiple / unit
        step = step_q.numerator
    lo = max(lo, 0)
    first = -(-lo // step) * step
    return first if first <= hi else None


def _exponent_completion(text: str, esign: str, exp: str, guide: NumberGuide) -> str | None:
    """Complete an exponent with up to three digits (and a sign): the least in range."""
    free = guide.lo is None and guide.hi is None and guide.multiple is None
    if free and not guide.integer:
        return "" if exp else "0"
    if len(exp) > 3:
        return None  # no range of a schema holds such a power (nor does llguidance's)
    tails = [""] if exp else []
    for n in range(1, 4 - len(exp)):
        for v in range(10**n):
            tails.append(str(v).zfill(n))
            if not esign and not exp:
                tails.append("-" + str(v).zfill(n))
    for tail in sorted(tails, key=lambda t: (len(t), t)):
        mantissa, _, power = (text + tail).lower().partition("e")
        try:
            value = Fraction(mantissa) * Fraction(10) ** int(power)
        except (ValueError, ZeroDivisionError):
            continue
        if in_range(value, guide):
            return tail
    return None


def in_range(value: Fraction, guide: NumberGuide) -> bool:
    """Whether ``value`` is a number of ``guide``'s range (and integer, and multiple)."""
    if guide.integer and value.denominator != 1:
        return False
    if guide.lo is not None and (value < guide.lo or (guide.lo_open and value == guide.lo)):
        return False
    if guide.hi is not None and (value > guide.hi or (guide.hi_open and value == guide.hi)):
        return False
    return not (guide.multiple and (value / guide.multiple).denominator != 1)
