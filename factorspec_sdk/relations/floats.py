"""Floats and Decimals a relation reads, as scaled ints: their places, range and values.

A float leaf (`LeafKind.FLOAT`) or a Decimal leaf (`LeafKind.DECIMAL`) is written as
fixed-point text with at most ``places`` decimals, and its variable holds the *scaled* value
``n``: the text of ``n / 10**places`` (``12.5``, ``-0.25``, ``3``). A float's value is the
double that text parses to (`float_of`), a Decimal's the decimal itself. `scaled_value` is
the inverse, `least_scaled` turns a bound of the field into a bound of ``n`` exactly, and
`float_range` gives the values a leaf may take.
"""

from __future__ import annotations

import decimal
import fractions
import math
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from factorspec_sdk.relations.layout import LeafLayout

__all__ = [
    "FLOAT_LIMIT",
    "FLOAT_PLACES",
    "MAX_PLACES",
    "Places",
    "fixed_text",
    "float_of",
    "float_range",
    "least_scaled",
    "scaled_value",
]

FLOAT_PLACES = 6
"""Decimal places of a float a relation reads, unless `Places` says otherwise."""

MAX_PLACES = 12
"""The most decimal places a float or Decimal leaf may have."""

FLOAT_LIMIT = 10**15 - 1
"""Largest scaled value of a float leaf: at most 15 significant digits, so that every value
the writer can write is a different double (15-digit decimals survive the round trip)."""


@dataclass(frozen=True, slots=True)
class Places:
    """``Annotated[float, Places(2)]``: a float a relation reads has at most 2 decimals.

    The writer writes such a float as fixed-point text (``12.5``, ``-0.25``, ``3``) with at
    most ``places`` digits after the point (default `FLOAT_PLACES`), and the relations over it
    compile against that grid of values: prices to the cent take ``Places(2)``. Pydantic
    ignores the marker; validation is unchanged.
    """

    places: int

    def __post_init__(self) -> None:
        if not 0 <= self.places <= MAX_PLACES:
            raise ValueError(f"Places({self.places}): decimal places must be in 0..{MAX_PLACES}")


def fixed_text(n: int, places: int) -> str:
    """The canonical fixed-point text of the scaled value ``n`` (``n / 10**places``).

    The writer writes this text (`factorspec_sdk.writer.floats`); so does a field's default
    (`factorspec_sdk.relations.defaults`).
    """
    sign = "-" if n < 0 else ""
    whole, frac = divmod(abs(n), 10**places)
    if not frac:
        return f"{sign}{whole}"
    return f"{sign}{whole}." + str(frac).zfill(places).rstrip("0")


def float_of(scaled: int, places: int) -> float:
    """The float that the text of ``scaled / 10**places`` parses to (correctly rounded)."""
    return scaled / typing.cast(int, 10**places)


def scaled_value(x: object, places: int) -> int | None:
    """The scaled value ``n`` of a float leaf's value ``x`` (``float_of(n, places) == x``).

    None when ``x`` is not a number with at most ``places`` decimals and 15 significant
    digits (`FLOAT_LIMIT`), i.e. not a value the writer writes; a JSON integer counts, and a
    ``Decimal`` counts when it is exactly ``n / 10**places``.
    """
    scale = typing.cast(int, 10**places)
    if isinstance(x, decimal.Decimal):  # a Decimal leaf's value: exactly n / 10**places
        if not x.is_finite() or (fractions.Fraction(x) * scale).denominator != 1:
            return None
        n = int(fractions.Fraction(x) * scale)
        return n if abs(n) <= FLOAT_LIMIT else None
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    n = round(fractions.Fraction(x) * scale)
    if abs(n) > FLOAT_LIMIT or float_of(n, places) != x:
        return None
    return n


def least_scaled(c: fractions.Fraction, strict: bool, places: int, exact: bool) -> int:
    """The least ``n`` whose value is ``> c`` (strict) or ``>= c``, clamped to the limit.

    A value is a Decimal's ``n / 10**places`` (``exact``), else the double its text parses
    to. ``-least_scaled(-c, ...)`` is the greatest ``n`` with its value ``< c`` / ``<= c``
    (negation is exact on floats, Decimals and the scaled texts alike).
    """
    scale = typing.cast(int, 10**places)
    n = math.floor(c * scale)
    n = max(min(n, FLOAT_LIMIT + 1), -FLOAT_LIMIT - 2)

    def holds(k: int) -> bool:
        x = fractions.Fraction(k, scale) if exact else fractions.Fraction(float_of(k, places))
        return x > c if strict else x >= c

    while n > -FLOAT_LIMIT - 1 and holds(n - 1):
        n -= 1
    while n <= FLOAT_LIMIT and not holds(n):
        n += 1
    return n


def float_range(node: LeafLayout) -> tuple[int, int]:
    """The scaled values a float leaf may take (its bounds, set by the layout)."""
    assert node.ge is not None and node.le is not None  # `float_leaf` sets both
    return node.ge, node.le
