"""Floats written character by character: which scaled values a prefix of fixed-point text allows.

Written by hand (no grammar library decides this: the relations bound a float's *value*, and
the oracle answers about ranges of scaled integers, not about text). A float leaf with
``places`` decimals is written as canonical fixed-point text: an optional ``-`` (never
``-0``), the integer part without leading zeros, then, when the fraction is not zero, ``.``
and the fraction's digits without trailing zeros (``12.5``, ``-0.05``, ``3``; never ``12.50``,
``012``, ``-0`` or ``1.``). Its value is the *scaled* integer ``n = x * 10**places``, at most
`FLOAT_LIMIT` in magnitude, and each ``n`` has exactly one text (`fixed_text`).

Unlike a date's, these texts are not ordered like their values (``12`` comes before ``120``
and ``12.5``), so the values whose text starts with a prefix are a union of a few ranges of
``n``, one per length of the integer part: `char_classes` computes them exactly for each
next character, and the writer asks the oracle which of them hold a feasible value
(`next_float_chars`; `FLOAT_WRITER`, the writer of float and Decimal leaves).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from factorspec_sdk.relations.floats import FLOAT_LIMIT, fixed_text, float_range
from factorspec_sdk.relations.layout import LeafLayout, Path
from factorspec_sdk.writer.base import LeafWriter, leaf_bounds
from factorspec_sdk.writer.state import WHOLE_SPAN, Option

if TYPE_CHECKING:
    from factorspec_sdk.graph import CompiledSpec
    from factorspec_sdk.writer.automaton import Writer
    from factorspec_sdk.writer.state import WriterState

__all__ = [
    "FLOAT_WRITER",
    "fixed_text",
    "fixed_value",
    "char_classes",
    "next_float_chars",
    "longest_text_length",
    "shortest_text_length",
]

Ranges = list[tuple[int, int]]
"""Sorted, disjoint, non-adjacent inclusive ranges of scaled values."""

_CHARS = "-0123456789."
_DIGITS = frozenset("0123456789")
_MAX_TEXT = 2 * len(str(FLOAT_LIMIT)) + 2
"""More characters than any canonical text has (sign, 15 digits, point, leading ``0``)."""


def fixed_value(text: str, places: int) -> int | None:
    """The scaled value whose canonical text is ``text``, or None when no value's text is.

    Only values of magnitude at most `FLOAT_LIMIT` count.
    """
    if len(text) > _MAX_TEXT:
        return None
    body = text[1:] if text.startswith("-") else text
    whole, dot, frac = body.partition(".")
    if not _is_digits(whole) or (dot and not _is_digits(frac)) or len(frac) > places:
        return None
    magnitude: int = int(whole) * 10**places + int(frac.ljust(places, "0") or "0")
    n = -magnitude if text.startswith("-") else magnitude
    if abs(n) > FLOAT_LIMIT or fixed_text(n, places) != text:
        return None
    return n


def _is_digits(text: str) -> bool:
    return bool(text) and all(c in _DIGITS for c in text)


def _magnitudes(body: str, places: int) -> Ranges:
    """The magnitudes ``m`` in ``[0, FLOAT_LIMIT]`` whose unsigned text starts with ``body``."""
    if body == "":
        return [(0, FLOAT_LIMIT)]
    whole, dot, frac = body.partition(".")
    if not _is_digits(whole) or (len(whole) > 1 and whole[0] == "0"):
        return []
    unit = 10**places
    if dot:  # the integer part is complete: one range of fractions
        if (frac and not _is_digits(frac)) or len(frac) > places:
            return []
        if not frac:  # a point is written only before a non-zero fraction
            a, b = 1, unit - 1
        else:
            step = 10 ** (places - len(frac))
            a = int(frac) * step
            b = a + step - 1
            if frac[-1] == "0":  # the text would end in a zero unless a later digit follows
                a += 1
        base = int(whole) * unit
        return (
            [(base + a, min(base + b, FLOAT_LIMIT))] if a <= b and base + a <= FLOAT_LIMIT else []
        )
    if whole == "0":
        return [(0, unit - 1)]
    # integer parts that start with `whole`: whole * 10**k .. (whole + 1) * 10**k - 1
    out: Ranges = []
    lo, hi = int(whole) * unit, (int(whole) + 1) * unit - 1
    while lo <= FLOAT_LIMIT:
        out.append((lo, min(hi, FLOAT_LIMIT)))
        lo, hi = lo * 10, hi * 10 + 9
    return out


def _prefix_values(text: str, places: int) -> Ranges:
    """The scaled values (all of them, bounds aside) whose canonical text starts with ``text``."""
    if not text.startswith("-"):
        return _magnitudes(text, places)
    return [(-b, -max(a, 1)) for a, b in reversed(_magnitudes(text[1:], places)) if b >= 1]


def _clip(ranges: Ranges, lo: int, hi: int) -> Ranges:
    """``ranges`` within ``[lo, hi]``, adjacent ones merged."""
    out: Ranges = []
    for a, b in ranges:
        a, b = max(a, lo), min(b, hi)
        if a > b:
            continue
        if out and out[-1][1] + 1 >= a:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def char_classes(prefix: str, places: int, lo: int, hi: int) -> dict[str, Ranges]:
    """The characters that may follow ``prefix``, each with the scaled values it leaves.

    For each character ``c`` of ``-0123456789.``, the values ``n`` in ``[lo, hi]`` (and
    within `FLOAT_LIMIT`) whose canonical text starts with ``prefix + c``, as sorted,
    disjoint, non-adjacent ranges; characters that leave none are left out. The key ``""``
    holds ``[(v, v)]`` when ``prefix`` is itself the text of a value ``v`` in range (the
    number may end). The classes are disjoint: each value's text settles one of them.
    """
    lo, hi = max(lo, -FLOAT_LIMIT), min(hi, FLOAT_LIMIT)
    out: dict[str, Ranges] = {}
    v = fixed_value(prefix, places)
    if v is not None and lo <= v <= hi:
        out[""] = [(v, v)]
    if len(prefix) >= _MAX_TEXT:
        return out
    for c in _CHARS:
        ranges = _clip(_prefix_values(prefix + c, places), lo, hi)
        if ranges:
            out[c] = ranges
    return out


def next_float_chars(
    prefix: str,
    places: int,
    lo: int,
    hi: int,
    feasible: Callable[[Sequence[Sequence[tuple[int, int]]]], frozenset[int]] | None = None,
) -> dict[str, Ranges]:
    """The `char_classes` of ``prefix`` that hold a feasible value.

    ``feasible`` (the oracle's `feasible_range_sets`, when a relation reads the float) takes
    the classes' range lists and returns the indices of those that hold a feasible value;
    without it every class within ``[lo, hi]`` is kept.
    """
    out = char_classes(prefix, places, lo, hi)
    if feasible is not None and out:
        keys = list(out)
        keep = feasible([out[c] for c in keys])
        out = {c: out[c] for i, c in enumerate(keys) if i in keep}
    return out


def _magnitude_range(lo: int, hi: int, negative: bool) -> tuple[int, int] | None:
    """The non-zero magnitudes of the values of one sign in ``[lo, hi]``, if any."""
    lo, hi = max(lo, -FLOAT_LIMIT), min(hi, FLOAT_LIMIT)
    a, b = (max(1, -hi), -lo) if negative else (max(1, lo), hi)
    return (a, b) if a <= b else None


def longest_text_length(lo: int, hi: int, places: int) -> int:
    """Characters of the longest canonical text of a value in ``[lo, hi]`` (0 when empty).

    Per sign, the largest magnitude ``b`` has the widest integer part, and ``b`` or ``b - 1``
    (whose last digit is not 0) the longest fraction besides.
    """
    best = 1 if max(lo, -FLOAT_LIMIT) <= 0 <= min(hi, FLOAT_LIMIT) else 0
    for negative in (False, True):
        r = _magnitude_range(lo, hi, negative)
        if r is not None:
            a, b = r
            best = max(best, *(len(fixed_text(m, places)) + negative for m in {b, max(a, b - 1)}))
    return best


def shortest_text_length(lo: int, hi: int, places: int) -> int:
    """Characters of the shortest canonical text of a value in ``[lo, hi]`` (0 when empty).

    Per sign, for each ``j <= places`` the least magnitude that is a multiple of ``10**j``:
    any other value has as many integer digits and at least as many decimals as one of them.
    """
    if max(lo, -FLOAT_LIMIT) <= 0 <= min(hi, FLOAT_LIMIT):
        return 1
    lengths: list[int] = []
    for negative in (False, True):
        r = _magnitude_range(lo, hi, negative)
        if r is None:
            continue
        a, b = r
        for j in range(places + 1):
            step = 10**j
            m = -(-a // step) * step
            if m <= b:
                lengths.append(len(fixed_text(m, places)) + negative)
    return min(lengths, default=0)


class _FloatWriter(LeafWriter):
    """A float (Decimal): whole values when few are feasible, else character by character.

    At the start, at most `FINITE_LIMIT` feasible scaled values are offered whole, as their
    canonical fixed-point text (a value the relations fix is one option: certain tokens),
    and ``null`` when the leaf is nullable. More are written character by character, from
    `next_float_chars`: only canonical texts of values within the bounds, and, when a
    relation reads the float, only prefixes whose values the oracle finds a feasible one
    among. The empty option ends the number with its fact.
    """

    def options(
        self, w: Writer, s: WriterState, path: Path, node: LeafLayout, var: str | None
    ) -> list[Option]:
        lo, hi = leaf_bounds(node, var, w.spec)
        if s.partial is not None:
            return self._chars(w, s, node, var, lo, hi)
        values = w.whole_values(s, var, lo, hi, WHOLE_SPAN)
        if values is None:
            options = self._chars(w, dataclasses.replace(s, partial=""), node, var, lo, hi)
        else:
            options = [
                Option(
                    fixed_text(int(v), node.places),
                    w.after_leaf(s, None if var is None else (var, v)),
                )
                for v in values
            ]
        return options + w.null_options(s, node, path)

    @staticmethod
    def _chars(
        w: Writer, s: WriterState, node: LeafLayout, var: str | None, lo: int, hi: int
    ) -> list[Option]:
        """The characters that may follow the float text ``s.partial`` (``""``: it ends)."""
        prefix = s.partial or ""
        oracle, assignment = w.oracle, s.assignment
        chars = next_float_chars(
            prefix,
            node.places,
            lo,
            hi,
            None if var is None else (lambda cs: oracle.feasible_range_sets(assignment, var, cs)),
        )
        options = []
        for c in sorted(chars):
            if c == "":
                ((n, _),) = chars[c]
                options.append(Option("", w.after_leaf(s, None if var is None else (var, n))))
            else:
                options.append(Option(c, dataclasses.replace(s, partial=prefix + c)))
        return options

    def shortest(self, node: LeafLayout) -> int:
        return shortest_text_length(*float_range(node), node.places)

    def longest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, strings: tuple[str, ...]
    ) -> int:
        return longest_text_length(*leaf_bounds(node, spec.variable_for(path), spec), node.places)

    def shortest_rest(self, node: LeafLayout, partial: str) -> int:
        return 1 if fixed_value(partial, node.places) is None else 0  # a whole number yet?


FLOAT_WRITER = _FloatWriter()
