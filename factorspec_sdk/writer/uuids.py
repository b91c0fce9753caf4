"""UUIDs written character by character: the canonical lowercase 8-4-4-4-12 hex text.

A UUID leaf's text is fixed-width (`factorspec_sdk.relations.uuids`), so the values whose
text starts with a prefix are one contiguous range, as a date's are (`writer.dates`): the
writer offers each next hex digit (a hyphen where the text has one) whose range holds a
value, and, when a relation reads the UUID, only those whose range the oracle finds a
feasible value in (`next_uuid_chars`). At most `FINITE_LIMIT` feasible values (a UUID a
relation fixes) are offered whole. The last digit carries the closing quote and the fact.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from factorspec_sdk.relations.layout import LeafLayout, Path
from factorspec_sdk.relations.uuids import (
    HEX_DIGITS,
    UUID_HYPHENS,
    UUID_LENGTH,
    prefix_range,
    uuid_text,
)
from factorspec_sdk.writer.base import Feasible, QuotedWriter, keep_feasible, leaf_bounds
from factorspec_sdk.writer.state import Option

if TYPE_CHECKING:
    from factorspec_sdk.graph import CompiledSpec
    from factorspec_sdk.writer.automaton import Writer
    from factorspec_sdk.writer.state import WriterState

__all__ = ["UUID_WRITER", "next_uuid_chars"]


def next_uuid_chars(
    prefix: str,
    lo: int,
    hi: int,
    feasible: Feasible | None = None,
) -> dict[str, tuple[int, int]]:
    """The characters that may follow ``prefix``, each with the values in ``[lo, hi]`` it leaves.

    ``feasible`` (the oracle's `feasible_ranges`, when a relation reads the UUID) keeps only
    the characters whose range holds a feasible value.
    """
    if len(prefix) >= UUID_LENGTH:
        return {}
    chars = "-" if len(prefix) in UUID_HYPHENS else HEX_DIGITS
    out: dict[str, tuple[int, int]] = {}
    for c in chars:
        r = prefix_range(prefix + c)
        if r is not None and max(r[0], lo) <= min(r[1], hi):
            out[c] = (max(r[0], lo), min(r[1], hi))
    return keep_feasible(out, feasible)


class _UuidWriter(QuotedWriter):
    """A UUID: whole when few values are feasible, else character by character."""

    def options(
        self, w: Writer, s: WriterState, path: Path, node: LeafLayout, var: str | None
    ) -> list[Option]:
        if s.partial is None:  # a nullable UUID: null, or its opening quote
            return w.open_quote(s, path)
        lo, hi = leaf_bounds(node, var, w.spec)
        if s.partial == "":
            values = w.whole_values(s, var, lo, hi)
            if values is not None:
                return [
                    Option(uuid_text(int(v)) + '"', w.after_leaf(s, (var, v) if var else None))
                    for v in values
                ]
        prefix = s.partial
        oracle, assignment = w.oracle, s.assignment
        chars = next_uuid_chars(
            prefix,
            lo,
            hi,
            None if var is None else (lambda rs: oracle.feasible_ranges(assignment, var, rs)),
        )
        out = []
        for c, (a, _) in chars.items():
            if len(prefix) + 1 == UUID_LENGTH:  # the last digit: one value
                out.append(Option(c + '"', w.after_leaf(s, None if var is None else (var, a))))
            else:
                out.append(Option(c, dataclasses.replace(s, partial=prefix + c)))
        return out

    def shortest(self, node: LeafLayout) -> int:
        return UUID_LENGTH + 2

    def longest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, strings: tuple[str, ...]
    ) -> int:
        return UUID_LENGTH + 2

    def shortest_rest(self, node: LeafLayout, partial: str) -> int:
        return UUID_LENGTH - len(partial) + 1

    def longest_rest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, partial: str, whole: int
    ) -> int:
        return UUID_LENGTH - len(partial) + 1


UUID_WRITER = _UuidWriter()
