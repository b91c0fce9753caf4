"""Dates, datetimes, times and durations written character by character.

Written by hand (no grammar library decides this: the relations bound a date's *value*, and
the oracle answers about ranges of values, not about text). A temporal leaf's text is
fixed-width and zero-padded (`factorspec_sdk.relations.temporal`: ``YYYY-MM-DD``,
``YYYY-MM-DDTHH:MM:SS`` or ``HH:MM:SS``), so the valid values whose text starts with a prefix
are one contiguous range (`prefix_range`), and `next_date_chars` asks the oracle which next
characters leave a range that holds a feasible value. Only real calendar dates and clock
times are ever written (`TEMPORAL_WRITER`). A duration, ``"PT{n}S"``, is an int's digits
inside its text (`DURATION_WRITER`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from factorspec_sdk.relations.kinds import Temporal
from factorspec_sdk.relations.layout import LeafLayout, Path
from factorspec_sdk.relations.temporal import (
    duration_text,
    prefix_range,
    separators,
    temporal_bounds,
    temporal_text,
    text_length,
)
from factorspec_sdk.writer.base import (
    Feasible,
    FixedWidthWriter,
    QuotedWriter,
    chars_in_range,
    leaf_bounds,
)
from factorspec_sdk.writer.digits import is_canonical_int
from factorspec_sdk.writer.scalars import int_digits
from factorspec_sdk.writer.state import Option

if TYPE_CHECKING:
    from factorspec_sdk.graph import CompiledSpec
    from factorspec_sdk.writer.automaton import Writer
    from factorspec_sdk.writer.state import WriterState

__all__ = ["DURATION_WRITER", "TEMPORAL_WRITER", "next_date_chars"]


def next_date_chars(
    temporal: Temporal,
    prefix: str,
    ge: int | None,
    le: int | None,
    feasible: Feasible | None = None,
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
    return chars_in_range(
        chars, prefix, lambda text: prefix_range(temporal, text), lo, hi, feasible
    )


class _TemporalWriter(FixedWidthWriter):
    """A date (datetime, time): whole values when few are feasible, else by characters.

    The characters come from `next_date_chars`: only real calendar dates and clock times
    within the bounds (`FixedWidthWriter` keeps the feasible ones).
    """

    def width(self, node: LeafLayout) -> int:
        return text_length(cast(Temporal, node.kind))

    def text(self, node: LeafLayout, value: int) -> str:
        return temporal_text(cast(Temporal, node.kind), value)

    def next_chars(
        self, node: LeafLayout, prefix: str, lo: int, hi: int, feasible: Feasible | None
    ) -> dict[str, tuple[int, int]]:
        return next_date_chars(cast(Temporal, node.kind), prefix, lo, hi, feasible)


class _DurationWriter(QuotedWriter):
    """A timedelta, ``"PT{n}S"``: whole when few are feasible, else digit by digit.

    The digits are an int's (`Writer.digit_options`: the oracle's `next_digits`, or the
    bounds'), written inside the duration: the first character carries ``PT`` (``-PT`` for a
    minus), the end ``S"`` and the fact.
    """

    def options(
        self, w: Writer, s: WriterState, path: Path, node: LeafLayout, var: str | None
    ) -> list[Option]:
        if s.partial is None:
            return w.open_quote(s, path)
        lo, hi = leaf_bounds(node, var, w.spec)
        if s.partial == "":
            values = w.whole_values(s, var, lo, hi)
            if values is not None:
                return [
                    Option(duration_text(int(v)) + '"', w.after_leaf(s, (var, v) if var else None))
                    for v in values
                ]
        return w.digit_options(
            s, var, lo, hi, end='S"', lead=lambda c: "-PT" if c == "-" else "PT" + c
        )

    def shortest(self, node: LeafLayout) -> int:
        return len('"PT0S"')

    def longest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, strings: tuple[str, ...]
    ) -> int:
        return int_digits(node) + len('""PTS')

    def shortest_rest(self, node: LeafLayout, partial: str) -> int:
        return 2 if partial and is_canonical_int(partial) else 3  # S" and maybe a digit


TEMPORAL_WRITER = _TemporalWriter()
DURATION_WRITER = _DurationWriter()
