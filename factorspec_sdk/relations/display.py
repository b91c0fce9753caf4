"""How a spec's variables read to the user: their Python types and bounds, not their encoding.

The compiler gives each leaf an int encoding (a date its ordinal, a time its seconds since
midnight, a float its value times ``10**places``, a timedelta its seconds); a summary such as
`factorspec check` shows the user's own type and bounds instead: ``time in [00:00:00,
23:59:59]``, ``float in [-1.0, 1.0] (6 decimals)``, ``Decimal in [0.00, 100.00]``, ``date in
[2026-01-01, 2026-12-31]``. Each leaf kind has its rendering in one table (`LEAF_DISPLAY`); the
variables that are not a leaf's value (lengths, a datetime's parts, a union's branch, Bools)
have theirs by variable kind (`variable_text`).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from factorspec_sdk.relations.floats import float_of
from factorspec_sdk.relations.kinds import LeafKind, Temporal, VarKind
from factorspec_sdk.relations.layout import (
    LayoutNode,
    LeafLayout,
    ListLayout,
    RootLayout,
    UnionLayout,
    node_at,
)
from factorspec_sdk.relations.temporal import temporal_text
from factorspec_sdk.relations.uuids import uuid_text

__all__ = ["LEAF_DISPLAY", "VARIABLE_DISPLAY", "leaf_value_text", "variable_text"]


@dataclass(frozen=True, slots=True)
class _Shown:
    """A leaf kind's type name, the text of one of its encoded values, and what follows."""

    type_name: Callable[[LeafLayout], str]
    value: Callable[[LeafLayout, int], str]
    suffix: Callable[[LeafLayout], str] = lambda node: ""
    bounded: bool = True
    """Whether its bounds are shown (a free str's or a UUID's say nothing)."""


def _temporal(name: str) -> _Shown:
    return _Shown(lambda node: name, lambda node, n: temporal_text(cast(Temporal, node.kind), n))


def _enum_name(node: LeafLayout) -> str:
    return node.enum_type.__name__ if node.enum_type is not None else "Literal"


LEAF_DISPLAY: dict[LeafKind, _Shown] = {
    LeafKind.BOOL: _Shown(lambda node: "bool", lambda node, n: str(bool(n))),
    LeafKind.INT: _Shown(lambda node: "int", lambda node, n: str(n)),
    LeafKind.STR: _Shown(lambda node: "str", lambda node, n: str(n)),
    LeafKind.ENUM: _Shown(_enum_name, lambda node, n: str(n)),
    LeafKind.DATE: _temporal("date"),
    LeafKind.DATETIME: _temporal("datetime"),
    LeafKind.AWARE: _temporal("datetime (UTC)"),
    LeafKind.TIME: _temporal("time"),
    LeafKind.DURATION: _Shown(lambda node: "timedelta", lambda node, n: f"{n} s"),
    LeafKind.FLOAT: _Shown(
        lambda node: "float",
        lambda node, n: repr(float_of(n, node.places)),
        lambda node: f" ({node.places} decimals)",
    ),
    LeafKind.DECIMAL: _Shown(
        lambda node: "Decimal", lambda node, n: str(decimal.Decimal(n).scaleb(-node.places))
    ),
    LeafKind.UUID: _Shown(lambda node: "UUID", lambda node, n: uuid_text(n), bounded=False),
}
"""The rendering of each leaf kind."""


def leaf_value_text(node: LeafLayout, value: int) -> str:
    """The user's spelling of a leaf's encoded value (``"09:30:00"``, ``"-1.0"``)."""
    return LEAF_DISPLAY[node.kind].value(node, value)


_PARTS: dict[str, LeafLayout] = {
    "date": LeafLayout(LeafKind.DATE),
    "clock": LeafLayout(LeafKind.TIME),
}
"""A datetime's ``date(t)`` and ``clock(t)`` read as a date and a time (other parts: ints)."""


@dataclass(frozen=True, slots=True)
class _Variable:
    """A variable as `variable_text` shows it: its node, name, kind and bounds."""

    node: LayoutNode | None
    name: str
    kind: str
    ge: int | None
    le: int | None

    def bounds(self, text: Callable[[int], str] = str) -> str:
        return _range(self.ge, self.le, text)


def _value(v: _Variable) -> str:
    """A leaf's value (or a union's branch): the leaf kind's type and bounds."""
    node = v.node
    if isinstance(node, UnionLayout):
        return "one of " + " | ".join(b.model.__name__ for b in node.branches)
    if not isinstance(node, LeafLayout):
        return f"{v.kind}{v.bounds()}"
    shown = LEAF_DISPLAY[node.kind]
    shows = shown.bounded and v.kind != VarKind.STR
    bounds = v.bounds(lambda n: shown.value(node, n)) if shows else ""
    return f"{shown.type_name(node)}{bounds}{shown.suffix(node)}"


def _list_length(v: _Variable) -> str:
    what = "dict" if isinstance(v.node, ListLayout) and v.node.mapping else "list"
    return f"{what} length{v.bounds()}"


def _part(v: _Variable) -> str:
    part = _PARTS.get(v.name.split("(", 1)[0])
    if part is None:
        return f"int{v.bounds()}"
    return _value(_Variable(part, v.name, v.kind, v.ge, v.le))


VARIABLE_DISPLAY: dict[VarKind, Callable[[_Variable], str]] = {
    VarKind.INT: _value,
    VarKind.BOOL: lambda v: "bool",
    VarKind.STR: _value,
    VarKind.LEN: _list_length,
    VarKind.STRLEN: lambda v: f"str length{v.bounds()}",
    VarKind.DATE: _value,
    VarKind.DATEPART: _part,
    VarKind.FLOAT: _value,
    VarKind.SAME: lambda v: "bool",
    VarKind.AFFIX: lambda v: "bool",
}
"""The rendering of each variable kind."""


def variable_text(
    layout: RootLayout,
    name: str,
    path: tuple[str | int, ...],
    kind: VarKind,
    ge: int | None,
    le: int | None,
) -> str:
    """A variable's type and bounds in the user's terms: ``time in [00:00:00, 23:59:59]``.

    Args:
        layout: the spec's layout (the source of each leaf's type).
        name: the variable's name (``year(d)``, ``len(xs)``, ``branch(action)``...).
        path: its layout path.
        kind: its kind (``int``, ``date``, ``len``, ``datepart``...).
        ge: its least encoded value (None: unbounded).
        le: its greatest.
    """
    return VARIABLE_DISPLAY[kind](_Variable(node_at(layout, path), name, kind, ge, le))


def _range(ge: int | None, le: int | None, text: Callable[[int], str]) -> str:
    if ge is None and le is None:
        return ""
    lo = "-inf" if ge is None else text(ge)
    hi = "inf" if le is None else text(le)
    return f" in [{lo}, {hi}]"
