"""A UUID's text and value: the canonical 8-4-4-4-12 lowercase hex text of a 128-bit int.

A UUID leaf's value is its 128-bit int (``uuid.UUID.int``), in ``[0, UUID_MAX]``; its JSON text
is the one Pydantic writes (``str(uuid)``: 32 lowercase hex digits, hyphens after the 8th,
12th, 16th and 20th), fixed-width and zero-padded, so the values whose text starts with a
prefix are one contiguous range (`prefix_range`), as a date's are
(`factorspec_sdk.relations.temporal`). Only that text has a value (`uuid_value`): no other
spelling Pydantic also parses (upper case, no hyphens, braces).
"""

from __future__ import annotations

import uuid

__all__ = [
    "HEX_DIGITS",
    "UUID_HYPHENS",
    "UUID_LENGTH",
    "UUID_MAX",
    "prefix_range",
    "uuid_text",
    "uuid_value",
]

UUID_MAX = 2**128 - 1
"""The greatest UUID value (``ffffffff-ffff-ffff-ffff-ffffffffffff``)."""

UUID_LENGTH = 36
"""Characters of every UUID's text."""

UUID_HYPHENS = frozenset({8, 13, 18, 23})
"""The positions of the hyphens in the text."""

HEX_DIGITS = "0123456789abcdef"


def uuid_text(value: int) -> str:
    """The text of a UUID's value (without quotes): ``str(uuid.UUID(int=value))``."""
    return str(uuid.UUID(int=value))


def prefix_range(prefix: str) -> tuple[int, int] | None:
    """The values of the texts that start with ``prefix``, as ``(least, greatest)``.

    None when no text does (a misplaced hyphen, an upper-case or non-hex digit).
    """
    if len(prefix) > UUID_LENGTH:
        return None
    digits = ""
    for i, c in enumerate(prefix):
        if i in UUID_HYPHENS:
            if c != "-":
                return None
        elif c in HEX_DIGITS:
            digits += c
        else:
            return None
    rest = 4 * (32 - len(digits))
    head = int(digits, 16) if digits else 0
    return head << rest, ((head + 1) << rest) - 1


def uuid_value(text: str) -> int | None:
    """The value of a UUID leaf's text (without quotes), or None when it is not that text."""
    if len(text) != UUID_LENGTH:
        return None
    r = prefix_range(text)
    return None if r is None else r[0]
