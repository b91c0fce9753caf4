"""The solver variables of a layout, derived in one place: their kinds, bounds and domains.

A variable's shape (`VarShape`) follows from the layout node it belongs to, never from
anything else: the relation compiler makes its variables with these shapes, and the IR front
end checks the variables an IR document declares against them (`factorspec_sdk.ir.variables`),
so both front ends give a variable the same kind, bounds and domain.

- A leaf's value (`leaf_variable`), by its kind (`LEAF_VARIABLES`).
- An Optional's null-ness (`NULL`), a union's branch (`branch_variable`).
- A list's length (`length_variable`), a free string's (`text_length_variable`).
- A date's or datetime's parts, ``year(d)``... (`part_variable`, `DATE_PARTS`).
- Whether two free strings hold the same text (`SAME`), whether one starts or ends with a
  constant (`AFFIX`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from factorspec_sdk.relations.floats import float_range
from factorspec_sdk.relations.kinds import LeafKind, VarKind
from factorspec_sdk.relations.layout import (
    DEFAULT_MAX_STRING_LENGTH,
    INT_LIMIT,
    LeafLayout,
    UnionLayout,
)
from factorspec_sdk.relations.leaves import LeafError
from factorspec_sdk.relations.temporal import CLOCK_PARTS, DATE_MAX, DATE_MIN, temporal_range
from factorspec_sdk.relations.uuids import UUID_MAX

__all__ = [
    "AFFIX",
    "DATE_PARTS",
    "LEAF_VARIABLES",
    "NULL",
    "SAME",
    "VarShape",
    "branch_variable",
    "date_part_of",
    "leaf_variable",
    "length_variable",
    "part_variable",
    "parts_of",
    "text_length_variable",
]


@dataclass(frozen=True, slots=True)
class VarShape:
    """What a variable is before it has a term: its kind, bounds and domain.

    Attributes:
        kind: what it holds (`VarKind`).
        ge: inclusive lower bound (None: none).
        le: inclusive upper bound.
        choices: the finite domain of an enum leaf (Python values), if any.
        free_str: a free ``str`` leaf (its domain is the intern table).
        enum_type: the Enum class of an Enum leaf.
    """

    kind: VarKind
    ge: int | None = None
    le: int | None = None
    choices: tuple[object, ...] | None = None
    free_str: bool = False
    enum_type: type[enum.Enum] | None = None


NULL = VarShape(VarKind.BOOL)
"""An Optional node's null-ness, ``null(x)``."""

SAME = VarShape(VarKind.SAME)
"""Whether two free str leaves hold the same text, ``same(a, b)``."""

AFFIX = VarShape(VarKind.AFFIX)
"""Whether a free str leaf starts (ends) with a constant, ``startswith(a, "x")``."""


def _enum(node: LeafLayout) -> VarShape:
    """A Literal/Enum leaf: a Bool, a code or an Int over its choices, by their type."""
    choices = node.choices
    if all(isinstance(c, bool) for c in choices):
        return VarShape(VarKind.BOOL, choices=choices)
    if all(isinstance(c, str) for c in choices):
        return VarShape(VarKind.STR, choices=choices, enum_type=node.enum_type)
    if all(isinstance(c, int) and not isinstance(c, bool) for c in choices):
        ints = [cast(int, c) for c in choices]
        return VarShape(VarKind.INT, min(ints), max(ints), choices, enum_type=node.enum_type)
    raise LeafError("relations cannot read a Literal that mixes value types")


def _int(node: LeafLayout) -> VarShape:
    """An int leaf (or a duration's seconds): bounded by the schema or by `INT_LIMIT`."""
    ge = node.ge if node.ge is not None else -INT_LIMIT
    le = node.le if node.le is not None else INT_LIMIT
    return VarShape(VarKind.INT, ge, le)


def _temporal(node: LeafLayout) -> VarShape:
    return VarShape(VarKind.DATE, *temporal_range(node))


def _float(node: LeafLayout) -> VarShape:
    return VarShape(VarKind.FLOAT, *float_range(node))


LEAF_VARIABLES: dict[LeafKind, Callable[[LeafLayout], VarShape]] = {
    LeafKind.BOOL: lambda node: VarShape(VarKind.BOOL),
    LeafKind.INT: _int,
    LeafKind.STR: lambda node: VarShape(VarKind.STR, free_str=True),
    LeafKind.ENUM: _enum,
    LeafKind.DATE: _temporal,
    LeafKind.DATETIME: _temporal,
    LeafKind.AWARE: _temporal,
    LeafKind.TIME: _temporal,
    LeafKind.DURATION: _int,
    LeafKind.FLOAT: _float,
    LeafKind.DECIMAL: _float,
    LeafKind.UUID: lambda node: VarShape(VarKind.INT, 0, UUID_MAX),
}
"""The variable of each leaf kind's value."""


def leaf_variable(node: LeafLayout) -> VarShape:
    """The variable of a leaf's value.

    Raises:
        LeafError: relations cannot read the leaf (a Literal that mixes value types).
    """
    return LEAF_VARIABLES[node.kind](node)


def branch_variable(node: UnionLayout) -> VarShape:
    """A union's branch, ``branch(x)``: the index of the branch a record takes."""
    return VarShape(VarKind.INT, 0, len(node.branches) - 1)


def length_variable(min_length: int, bound: int) -> VarShape:
    """A list's length, ``len(xs)``: from its ``min_length`` to its unrolling bound."""
    return VarShape(VarKind.LEN, min_length, bound)


def text_length_variable(node: LeafLayout) -> VarShape:
    """A free str's length in characters, ``len(s)``.

    From its ``min_length`` to its ``max_length`` (else `DEFAULT_MAX_STRING_LENGTH`).
    """
    hi = node.max_length if node.max_length is not None else DEFAULT_MAX_STRING_LENGTH
    return VarShape(VarKind.STRLEN, node.min_length, hi)


DATE_PARTS: dict[str, tuple[int, int]] = {
    "year": (1, 9999),
    "month": (1, 12),
    "day": (1, 31),
    "date": (DATE_MIN, DATE_MAX),
    "clock": (0, 86_399),
    "hour": (0, 23),
    "minute": (0, 59),
    "second": (0, 59),
}
"""The parts of temporal leaves that are variables, with their bounds: a date's (or
datetime's) year, month and day, a datetime's ``date`` (its ordinal) and ``clock``
(seconds since midnight), and a datetime's or time's hour, minute and second."""

_PARTS_OF: dict[LeafKind, frozenset[str]] = {
    LeafKind.DATE: frozenset({"year", "month", "day"}),
    LeafKind.DATETIME: frozenset(DATE_PARTS),
    LeafKind.AWARE: frozenset(DATE_PARTS),
    LeafKind.TIME: frozenset(CLOCK_PARTS),
}


def parts_of(kind: LeafKind) -> frozenset[str]:
    """The parts of a leaf of ``kind`` that may be variables (none for most kinds)."""
    return _PARTS_OF.get(kind, frozenset())


def part_variable(part: str) -> VarShape:
    """A temporal leaf's part, ``year(d)``...: tied to the leaf by a factor."""
    lo, hi = DATE_PARTS[part]
    return VarShape(VarKind.DATEPART, lo, hi)


def date_part_of(name: str) -> str | None:
    """The part a variable's name is of (``year(...)`` -> ``year``), or None."""
    for part in DATE_PARTS:
        if name.startswith(f"{part}(") and name.endswith(")"):
            return part
    return None
