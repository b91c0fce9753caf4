"""UUIDs written character by character: the canonical lowercase 8-4-4-4-12 hex text.

A UUID leaf's text is fixed-width (`factorspec_sdk.relations.uuids`), so the values whose
text starts with a prefix are one contiguous range, as a date's are (`writer.dates`): the
writer offers each next hex digit (a hyphen where the text has one) whose range holds a
value, and, when a relation reads the UUID, only those whose range the oracle finds a
feasible value in (`next_uuid_chars`). At most `FINITE_LIMIT` feasible values (a UUID a
relation fixes) are offered whole. The last digit carries the closing quote and the fact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from factorspec_sdk.relations.layout import LeafLayout
from factorspec_sdk.relations.uuids import (
    HEX_DIGITS,
    UUID_HYPHENS,
    UUID_LENGTH,
    prefix_range,
    uuid_text,
)
from factorspec_sdk.writer.base import (
    Feasible,
    FixedWidthWriter,
    chars_in_range,
)

if TYPE_CHECKING:
    pass

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
    return chars_in_range(chars, prefix, prefix_range, lo, hi, feasible)


class _UuidWriter(FixedWidthWriter):
    """A UUID: whole when few values are feasible, else character by character."""

    def width(self, node: LeafLayout) -> int:
        return UUID_LENGTH

    def text(self, node: LeafLayout, value: int) -> str:
        return uuid_text(value)

    def next_chars(
        self, node: LeafLayout, prefix: str, lo: int, hi: int, feasible: Feasible | None
    ) -> dict[str, tuple[int, int]]:
        return next_uuid_chars(prefix, lo, hi, feasible)


UUID_WRITER = _UuidWriter()
