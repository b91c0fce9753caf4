"""Dates written character by character: which dates a prefix of ``YYYY-MM-DD`` still allows.

Written by hand (no grammar library decides this: the relations bound a date's *value*, and
the oracle answers about ordinal ranges, not about text). A date is written as Pydantic
serializes a ``datetime.date``: ten characters ``YYYY-MM-DD``, every part zero-padded. For
such fixed-width, zero-padded text, the order of the texts is the order of the dates, so the
valid dates whose text starts with a given prefix are one contiguous range of ordinals
(``date.toordinal()``): `prefix_range` computes it, and the writer asks the oracle which
next characters leave a range that holds a feasible value (`next_date_chars`). Only real
calendar dates are ever written (month lengths, leap years).
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Callable, Sequence

from factorspec_sdk.relations.layout import DATE_MAX, DATE_MIN

__all__ = [
    "DATE_TEXT_LENGTH",
    "date_text",
    "next_date_chars",
    "prefix_range",
]

DATE_TEXT_LENGTH = 10
"""Characters of ``YYYY-MM-DD``."""

_DASHES = (4, 7)


def date_text(ordinal: int) -> str:
    """``YYYY-MM-DD`` of the date with this ordinal."""
    return dt.date.fromordinal(ordinal).isoformat()


def _span(digits: str, width: int, lo: int, hi: int) -> tuple[int, int] | None:
    """Values of a ``width``-digit zero-padded field that start with ``digits``, in [lo, hi]."""
    a = max(int(digits.ljust(width, "0")), lo)
    b = min(int(digits.ljust(width, "9")), hi)
    return (a, b) if a <= b else None


def prefix_range(prefix: str) -> tuple[int, int] | None:
    """The ordinals of the valid dates whose ``YYYY-MM-DD`` text starts with ``prefix``.

    None when no date does (a misplaced character, month 13, day 30 of February...).
    """
    if len(prefix) > DATE_TEXT_LENGTH:
        return None
    for i, c in enumerate(prefix):
        if (c != "-") if i in _DASHES else not ("0" <= c <= "9"):
            return None
    years = _span(prefix[:4], 4, 1, 9999)
    if years is None:
        return None
    if len(prefix) <= 5:
        return dt.date(years[0], 1, 1).toordinal(), dt.date(years[1], 12, 31).toordinal()
    year = years[0]
    months = _span(prefix[5:7], 2, 1, 12)
    if months is None:
        return None
    if len(prefix) <= 8:
        last = calendar.monthrange(year, months[1])[1]
        return dt.date(year, months[0], 1).toordinal(), dt.date(year, months[1], last).toordinal()
    month = months[0]
    days = _span(prefix[8:10], 2, 1, calendar.monthrange(year, month)[1])
    if days is None:
        return None
    return dt.date(year, month, days[0]).toordinal(), dt.date(year, month, days[1]).toordinal()


def next_date_chars(
    prefix: str,
    ge: int | None,
    le: int | None,
    feasible: Callable[[Sequence[tuple[int, int]]], frozenset[int]] | None = None,
) -> dict[str, tuple[int, int]]:
    """The characters that may follow ``prefix``, each with the ordinals it leaves.

    ``ge``/``le`` bound the ordinal (None: Python's first/last date); ``feasible`` (the
    oracle's `feasible_ranges`, when a relation reads the date) keeps only the characters
    whose range holds a feasible value. A prefix of all ten characters has no next one.
    """
    lo = DATE_MIN if ge is None else max(ge, DATE_MIN)
    hi = DATE_MAX if le is None else min(le, DATE_MAX)
    if len(prefix) >= DATE_TEXT_LENGTH:
        return {}
    chars = "-" if len(prefix) in _DASHES else "0123456789"
    out: dict[str, tuple[int, int]] = {}
    for c in chars:
        r = prefix_range(prefix + c)
        if r is not None and max(r[0], lo) <= min(r[1], hi):
            out[c] = (max(r[0], lo), min(r[1], hi))
    if feasible is not None and out:
        keys = list(out)
        keep = feasible([out[c] for c in keys])
        out = {c: out[c] for i, c in enumerate(keys) if i in keep}
    return out
