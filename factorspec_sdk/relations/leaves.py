"""The leaves of a layout, made in one place: one constructor per leaf kind.

Both front ends make their leaves here: the Pydantic one
(`factorspec_sdk.relations.pydantic_layout`, from a field's type and metadata) and the IR one
(`factorspec_sdk.ir.leaves`, from an IR document's leaf). So a leaf's bounds are checked once,
the same way for both; a bound that cannot hold raises `LeafError`, which each front end
turns into its own error (`UnsupportedFieldTypeError`, `IRError`) with the field's name.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from factorspec_sdk.relations.floats import FLOAT_LIMIT, MAX_PLACES
from factorspec_sdk.relations.kinds import LeafKind, Temporal
from factorspec_sdk.relations.layout import JsonScalar, LeafLayout
from factorspec_sdk.relations.temporal import (
    DURATION_MAX,
    DURATION_MIN,
    temporal_bounds,
    temporal_range,
)

__all__ = [
    "LeafError",
    "bool_leaf",
    "duration_leaf",
    "enum_leaf",
    "float_leaf",
    "int_leaf",
    "str_leaf",
    "temporal_leaf",
    "uuid_leaf",
]


class LeafError(ValueError):
    """A leaf's bounds cannot hold: an empty range, a bound outside the kind's values."""


def bool_leaf(*, nullable: bool = False) -> LeafLayout:
    """A bool."""
    return LeafLayout(LeafKind.BOOL, nullable=nullable)


def int_leaf(ge: int | None, le: int | None, *, nullable: bool = False) -> LeafLayout:
    """An int within ``[ge, le]`` (None: unbounded on that side).

    Raises:
        LeafError: ``le < ge``.
    """
    if ge is not None and le is not None and le < ge:
        raise LeafError(f"empty range [{ge}, {le}]")
    return LeafLayout(LeafKind.INT, nullable=nullable, ge=ge, le=le)


def str_leaf(
    min_length: int = 0, max_length: int | None = None, *, nullable: bool = False
) -> LeafLayout:
    """A free string of ``min_length`` to ``max_length`` characters (None: no most).

    Raises:
        LeafError: a negative ``min_length``, or ``max_length`` below it.
    """
    if min_length < 0 or (max_length is not None and max_length < min_length):
        raise LeafError("need 0 <= min_length <= max_length")
    return LeafLayout(LeafKind.STR, nullable=nullable, min_length=min_length, max_length=max_length)


def enum_leaf(
    choices: Sequence[JsonScalar],
    *,
    enum_type: type[enum.Enum] | None = None,
    nullable: bool = False,
) -> LeafLayout:
    """One of ``choices`` (a ``Literal``'s values, an ``Enum``'s member values).

    Raises:
        LeafError: no choice, or one that repeats (``1`` and ``True`` are different).
    """
    values = tuple(choices)
    if not values:
        raise LeafError("an enum leaf needs at least one choice")
    if len({(type(c).__name__, c) for c in values}) != len(values):
        raise LeafError("choices repeat")
    return LeafLayout(LeafKind.ENUM, nullable=nullable, choices=values, enum_type=enum_type)


def temporal_leaf(
    kind: Temporal, ge: int | None, le: int | None, *, nullable: bool = False
) -> LeafLayout:
    """A date, datetime, aware datetime or time within ``[ge, le]`` (values of the kind).

    Raises:
        LeafError: no value within the bounds, or a bound outside Python's values.
    """
    leaf = LeafLayout(kind, nullable=nullable, ge=ge, le=le)
    lo, hi = temporal_range(leaf)
    if hi < lo:
        raise LeafError(f"empty range of {kind} values [{ge}, {le}]")
    first, last = temporal_bounds(kind)
    if (ge is not None and ge < first) or (le is not None and le > last):
        raise LeafError(f"{kind} bounds must be values with {first} <= ge <= le <= {last}")
    return leaf


def duration_leaf(ge: int | None, le: int | None, *, nullable: bool = False) -> LeafLayout:
    """A ``timedelta``'s whole seconds within ``[ge, le]``, ``|n| < 2**32`` (Pydantic's limit).

    None: the limit on that side.

    Raises:
        LeafError: no value within the bounds, or a bound beyond the limit.
    """
    first = DURATION_MIN if ge is None else ge
    last = DURATION_MAX if le is None else le
    if last < first:
        raise LeafError(f"empty range of durations [{first}, {last}] (seconds)")
    if not DURATION_MIN <= first <= last <= DURATION_MAX:
        raise LeafError(f"duration bounds must be seconds in [{DURATION_MIN}, {DURATION_MAX}]")
    return LeafLayout(LeafKind.DURATION, nullable=nullable, ge=first, le=last)


def float_leaf(
    kind: LeafKind, ge: int | None, le: int | None, places: int, *, nullable: bool = False
) -> LeafLayout:
    """A float or Decimal with at most ``places`` decimals, its scaled value in ``[ge, le]``.

    None: `FLOAT_LIMIT` on that side.

    Raises:
        LeafError: ``places`` outside 0..12, no value within the bounds, or a bound beyond
            `FLOAT_LIMIT`.
    """
    assert kind in (LeafKind.FLOAT, LeafKind.DECIMAL)
    lo = -FLOAT_LIMIT if ge is None else ge
    hi = FLOAT_LIMIT if le is None else le
    if not 0 <= places <= MAX_PLACES:
        raise LeafError(f"decimal places must be in 0..{MAX_PLACES}, got {places}")
    if hi < lo:
        raise LeafError(f"no value with {places} decimal places lies within its bounds")
    if not -FLOAT_LIMIT <= lo <= hi <= FLOAT_LIMIT:
        raise LeafError(
            f"a float leaf needs -{FLOAT_LIMIT} <= ge <= le <= {FLOAT_LIMIT} (scaled values)"
        )
    return LeafLayout(kind, nullable=nullable, ge=lo, le=hi, places=places)


def uuid_leaf(*, nullable: bool = False) -> LeafLayout:
    """A ``uuid.UUID``: any of its 128-bit values (`factorspec_sdk.relations.uuids`)."""
    return LeafLayout(LeafKind.UUID, nullable=nullable)
