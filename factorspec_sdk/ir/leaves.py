"""How the relation IR carries each leaf kind: its wire form, its record check, its facts.

The IR's leaf (`factorspec_sdk.ir.model.IRLeaf`) names a kind with three fields that servers
and clients of every version exchange: ``kind`` (``bool``, ``int``, ``str``, ``enum``,
``date``, ``float``, ``uuid``), ``temporal`` (which time type a ``date`` leaf holds) and
``duration`` (an ``int`` leaf that is a timedelta's seconds). This module is the one place
that maps them to and from `LeafKind` (`IR_LEAVES`): `leaf_from_ir` builds a leaf with the
constructors of `factorspec_sdk.relations.leaves` (so its bounds are checked as a Pydantic
field's are), `leaf_to_ir` writes one. A ``Decimal`` travels as a ``float`` leaf (a server
checks its value as the fixed-point number it is).

A server checks a record it did not decode itself: `leaf_annotation` is the Pydantic type of
a leaf's JSON value (its text, its bounds), `leaf_value` the value of the leaf's variable in
the JSON value (the fact the relations are checked on).
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, cast

from pydantic import (
    AfterValidator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
)

from factorspec_sdk.ir.model import IRLeaf
from factorspec_sdk.relations.floats import float_range, scaled_value
from factorspec_sdk.relations.kinds import LeafKind, Temporal
from factorspec_sdk.relations.layout import LeafLayout
from factorspec_sdk.relations.leaves import (
    LeafError,
    bool_leaf,
    duration_leaf,
    enum_leaf,
    float_leaf,
    int_leaf,
    str_leaf,
    temporal_leaf,
    uuid_leaf,
)
from factorspec_sdk.relations.temporal import (
    DURATION_MAX,
    DURATION_MIN,
    duration_value,
    temporal_range,
    temporal_text,
    temporal_value,
)
from factorspec_sdk.relations.uuids import UUID_MAX, uuid_value

__all__ = [
    "IR_LEAVES",
    "IRLeafKind",
    "leaf_annotation",
    "leaf_from_ir",
    "leaf_to_ir",
    "leaf_value",
]

JsonDict = dict[str, object]
_BOUNDS = frozenset({"ge", "le"})


@dataclass(frozen=True, slots=True)
class IRLeafKind:
    """How the IR carries one leaf kind.

    Attributes:
        kind: ``IRLeaf.kind`` on the wire.
        fields: the optional fields of ``IRLeaf`` the kind takes (``ge``/``le``,
            ``places``, ``choices``, ``min_length``/``max_length``).
        build: the leaf of an ``IRLeaf`` of the kind (raises `LeafError`).
        value: the value of the leaf's variable in a record's JSON value (None: not a value
            of the leaf).
        annotation: the Pydantic type a record's JSON value of the leaf must have.
        temporal: ``IRLeaf.temporal`` on the wire.
        duration: ``IRLeaf.duration`` on the wire.
    """

    kind: str
    fields: frozenset[str]
    build: Callable[[IRLeaf], LeafLayout]
    value: Callable[[LeafLayout, object], int | bool | str | None]
    annotation: Callable[[LeafLayout], object]
    temporal: str = LeafKind.DATE
    duration: bool = False


def _scalar(node: LeafLayout, value: object) -> int | bool | str | None:
    """A bool, int, str or enum leaf's value: the JSON value itself."""
    return value if isinstance(value, (str, int, bool)) else None


def _text_value(
    parse: Callable[[LeafLayout, str], int | None],
) -> Callable[[LeafLayout, object], int | None]:
    """The value of a leaf written as a JSON string (a date's, a duration's)."""
    return lambda node, value: parse(node, value) if isinstance(value, str) else None


def _checked(
    node: LeafLayout,
    base: object,
    value: Callable[[LeafLayout, object], int | bool | str | None],
    span: tuple[int, int],
    what: str,
) -> object:
    """``base`` whose value (by ``value``) is within ``span``; else a ValueError."""
    lo, hi = span

    def check(v: object) -> object:
        n = value(node, v)
        if n is None:
            raise ValueError(f"{v!r} is not {what}")
        if not lo <= cast(int, n) <= hi:
            raise ValueError(f"{v!r} is outside the field's bounds")
        return v

    return Annotated[base, AfterValidator(check)]


def _temporal_value(node: LeafLayout, text: str) -> int | None:
    return temporal_value(cast(Temporal, node.kind), text)


def _temporal(kind: Temporal) -> IRLeafKind:
    value = _text_value(_temporal_value)

    def annotation(node: LeafLayout) -> object:
        lo, hi = temporal_range(node)
        example = temporal_text(kind, lo)
        return _checked(node, StrictStr, value, (lo, hi), f"a {kind} written as {example!r} is")

    return IRLeafKind(
        "date",
        _BOUNDS,
        lambda leaf: temporal_leaf(kind, leaf.ge, leaf.le, nullable=leaf.nullable),
        value,
        annotation,
        temporal=kind,
    )


def _duration_annotation(node: LeafLayout) -> object:
    span = (
        DURATION_MIN if node.ge is None else node.ge,
        DURATION_MAX if node.le is None else node.le,
    )
    return _checked(node, StrictStr, _DURATION_VALUE, span, "a duration written PT<seconds>S")


_DURATION_VALUE = _text_value(lambda node, text: duration_value(text))


def _float_value(node: LeafLayout, value: object) -> int | None:
    return scaled_value(value, node.places)


def _float_annotation(node: LeafLayout) -> object:
    return _checked(
        node,
        StrictInt | StrictFloat,
        _float_value,
        float_range(node),
        f"a number with at most {node.places} decimals",
    )


_FLOAT = IRLeafKind(
    "float",
    _BOUNDS | {"places"},
    lambda leaf: float_leaf(LeafKind.FLOAT, leaf.ge, leaf.le, leaf.places, nullable=leaf.nullable),
    _float_value,
    _float_annotation,
)


def _str_annotation(node: LeafLayout) -> object:
    return Annotated[
        StrictStr, StringConstraints(min_length=node.min_length, max_length=node.max_length)
    ]


_UUID_VALUE = _text_value(lambda node, text: uuid_value(text))


def _uuid_annotation(node: LeafLayout) -> object:
    return _checked(
        node, StrictStr, _UUID_VALUE, (0, UUID_MAX), "a UUID written as its lowercase text"
    )


IR_LEAVES: dict[LeafKind, IRLeafKind] = {
    LeafKind.BOOL: IRLeafKind(
        "bool",
        frozenset(),
        lambda leaf: bool_leaf(nullable=leaf.nullable),
        _scalar,
        lambda node: StrictBool,
    ),
    LeafKind.INT: IRLeafKind(
        "int",
        _BOUNDS,
        lambda leaf: int_leaf(leaf.ge, leaf.le, nullable=leaf.nullable),
        _scalar,
        lambda node: Annotated[StrictInt, Field(ge=node.ge, le=node.le)],
    ),
    LeafKind.STR: IRLeafKind(
        "str",
        frozenset({"min_length", "max_length"}),
        lambda leaf: str_leaf(leaf.min_length, leaf.max_length, nullable=leaf.nullable),
        _scalar,
        _str_annotation,
    ),
    LeafKind.ENUM: IRLeafKind(
        "enum",
        frozenset({"choices"}),
        lambda leaf: enum_leaf(leaf.choices, nullable=leaf.nullable),
        _scalar,
        lambda node: getattr(typing, "Literal")[node.choices],  # noqa: B009 - runtime values
    ),
    LeafKind.DATE: _temporal(LeafKind.DATE),
    LeafKind.DATETIME: _temporal(LeafKind.DATETIME),
    LeafKind.AWARE: _temporal(LeafKind.AWARE),
    LeafKind.TIME: _temporal(LeafKind.TIME),
    LeafKind.DURATION: IRLeafKind(
        "int",
        _BOUNDS,
        lambda leaf: duration_leaf(leaf.ge, leaf.le, nullable=leaf.nullable),
        _DURATION_VALUE,
        _duration_annotation,
        duration=True,
    ),
    LeafKind.FLOAT: _FLOAT,
    LeafKind.DECIMAL: _FLOAT,  # travels as a float: its fixed-point value
    LeafKind.UUID: IRLeafKind(
        "uuid",
        frozenset(),
        lambda leaf: uuid_leaf(nullable=leaf.nullable),
        _UUID_VALUE,
        _uuid_annotation,
    ),
}
"""How the IR carries each leaf kind."""


_FROM_WIRE: dict[tuple[str, str, bool], LeafKind] = {
    (e.kind, e.temporal, e.duration): k for k, e in IR_LEAVES.items() if k != LeafKind.DECIMAL
}
_DEFAULTS: dict[str, object] = {
    "ge": None,
    "le": None,
    "places": 0,
    "choices": [],
    "min_length": 0,
    "max_length": None,
}


def leaf_from_ir(leaf: IRLeaf) -> LeafLayout:
    """The leaf an IR document's ``IRLeaf`` stands for.

    Raises:
        LeafError: fields the kind does not take, or bounds that cannot hold.
    """
    kind = _FROM_WIRE.get((leaf.kind, leaf.temporal, leaf.duration))
    if kind is None:
        date = IR_LEAVES[LeafKind.DATE]
        if leaf.kind != date.kind and leaf.temporal != date.temporal:
            raise LeafError("temporal applies to date leaves only")
        raise LeafError("duration applies to int leaves only")
    entry = IR_LEAVES[kind]
    extra = [
        name
        for name, default in _DEFAULTS.items()
        if name not in entry.fields and getattr(leaf, name) != default
    ]
    if extra:
        raise LeafError(f"{'/'.join(extra)} do not apply to {leaf.kind} leaves")
    return entry.build(leaf)


def leaf_to_ir(node: LeafLayout) -> JsonDict:
    """The ``IRLeaf`` of a leaf, as JSON data."""
    entry = IR_LEAVES[node.kind]
    out: JsonDict = {"type": "leaf", "kind": entry.kind, "nullable": node.nullable}
    if "ge" in entry.fields and node.ge is not None:
        out["ge"] = node.ge
    if "le" in entry.fields and node.le is not None:
        out["le"] = node.le
    if "min_length" in entry.fields:
        out["min_length"] = node.min_length
        if node.max_length is not None:
            out["max_length"] = node.max_length
    if "choices" in entry.fields:
        out["choices"] = list(node.choices)
    if "places" in entry.fields:
        out["places"] = node.places
    if entry.temporal != LeafKind.DATE:
        out["temporal"] = entry.temporal
    if entry.duration:
        out["duration"] = True
    return out


def leaf_annotation(node: LeafLayout) -> object:
    """The Pydantic type of a record's JSON value of the leaf (its text and bounds)."""
    return IR_LEAVES[node.kind].annotation(node)


def leaf_value(node: LeafLayout, value: object) -> int | bool | str | None:
    """The value of the leaf's variable in a record's JSON value (None: not a value)."""
    return IR_LEAVES[node.kind].value(node, value)
