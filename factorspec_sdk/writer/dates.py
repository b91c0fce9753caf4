"""Dates, datetimes and times written character by character: which next characters are left.

Written by hand (no grammar library decides this: the relations bound a date's *value*, and
the oracle answers about ranges of values, not about text). A date leaf's text is fixed-width
and zero-padded (`factorspec_sdk.relations.temporal`: ``YYYY-MM-DD``, ``YYYY-MM-DDTHH:MM:SS``
or ``HH:MM:SS``), so the valid values whose text starts with a prefix are one contiguous
range (`prefix_range`), and `next_date_chars` asks the oracle which next characters leave a
range that holds a feasible value. Only real calendar dates and clock times are ever written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from factorspec_sdk.relations.temporal import (
    Temporal,
    prefix_range,
    separators,
    temporal_bounds,
    text_length,
)

__all__ = ["next_date_chars"]


def next_date_chars(
    temporal: Temporal,
    prefix: str,
    ge: int | None,
    le: int | None,
    feasible: Callable[[Sequence[tuple[int, int]]], frozenset[int]] | None = None,
) -> dict[str, tuple[int, int]]:
    """The characters that may follow ``prefix``, each with the values it leaves.

    ``ge``/``le`` bound the value (None: Python's first/last one); ``feasible`` (the
    oracle's `feasible_ranges`, when a relation reads the leaf) keeps only the characters
    whose range holds a feasible value. A whole text has no next character.
    """
    lo, hi = temporal_bounds(temporal)
    lo = lo if ge is None else max(ge, lo)
    hi = hi if le is None else min(le, hi)
    if len(prefix) >= text_length(temporal):
        return {}
    fixed = separators(temporal).get(len(prefix))
    chars = fixed if fixed is not None else "0123456789"
    out: dict[str, tuple[int, int]] = {}
    for c in chars:
        r = prefix_range(temporal, prefix + c)
        if r is not None and max(r[0], lo) <= min(r[1], hi):
            out[c] = (max(r[0], lo), min(r[1], hi))
    if feasible is not None and out:
        keys = list(out)
        keep = feasible([out[c] for c in keys])
        out = {c: out[c] for i, c in enumerate(keys) if i in keep}
    return out
