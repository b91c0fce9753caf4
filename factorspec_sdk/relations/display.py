"""How a spec's variables read to the user: their Python types and bounds, not their encoding.

The compiler gives each leaf an int encoding (a date its ordinal, a time its seconds since
midnight, a float its value times ``10**places``, a timedelta its seconds); a summary such as
`factorspec check` shows the user's own type and bounds instead: ``time in [00:00:00,
23:59:59]``, ``float in [-1.0, 1.0] (6 decimals)``, ``Decimal in [0.00, 100.00]``, ``date in
[2026-01-01, 2026-12-31]``. Each leaf kind has its rendering in one table (`_LEAVES`); the
variables that are not a leaf's value (lengths, a datetime's parts, a union's branch, Bools)
have theirs by variable kind (`variable_text`).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from dataclasses import dataclass

from factorspec_sdk.relations.layout import (
    LayoutNode,
    LeafKind,
    LeafLayout,
    ListLayout,
    RootLayout,
    UnionLayout,
    float_of,
    node_at,
)
from factorspec_sdk.relations.temporal import Temporal, temporal_text

__all__ = ["leaf_value_text", "variable_text"]


@dataclass(frozen=True, slots=True)
class _Shown:
    """A leaf kind's type name and the text of one of its encoded values."""

    type_name: Callable[[LeafLayout], str]
    value: Callable[[LeafLayout, int], str]
    suffix: Callable[[LeafLayout], str] = lambda node: ""


_TEMPORAL_NAMES: dict[Temporal, str] = {
    "date": "date",
    "datetime": "datetime",
    "aware": "datetime (UTC)",
    "time": "time",
}


def _int_value(node: LeafLayout, n: int) -> str:
    return f"{n} s" if node.duration else str(n)


def _float_value(node: LeafLayout, n: int) -> str:
    if node.decimal:
        return str(decimal.Decimal(n).scaleb(-node.places))
    return repr(float_of(n, node.places))


def _enum_name(node: LeafLayout) -> str:
    return node.enum_type.__name__ if node.enum_type is not None else "Literal"


_LEAVES: dict[LeafKind, _Shown] = {
    "bool": _Shown(lambda node: "bool", lambda node, n: str(bool(n))),
    "int": _Shown(lambda node: "timedelta" if node.duration else "int", _int_value),
    "str": _Shown(lambda node: "str", lambda node, n: str(n)),
    "enum": _Shown(_enum_name, lambda node, n: str(n)),
    "date": _Shown(
        lambda node: _TEMPORAL_NAMES[node.temporal],
        lambda node, n: temporal_text(node.temporal, n),
    ),
    "float": _Shown(
        lambda node: "Decimal" if node.decimal else "float",
        _float_value,
        lambda node: "" if node.decimal else f" ({node.places} decimals)",
    ),
}
"""The rendering of each leaf kind."""


def leaf_value_text(node: LeafLayout, value: int) -> str:
    """The user's spelling of a leaf's encoded value (``"09:30:00"``, ``"-1.0"``)."""
    return _LEAVES[node.kind].value(node, value)


_PARTS: dict[str, LeafLayout] = {
    "date": LeafLayout("date", temporal="date"),
    "clock": LeafLayout("date", temporal="time"),
}
"""A datetime's ``date(t)`` and ``clock(t)`` read as a date and a time (other parts: ints)."""


def variable_text(
    layout: RootLayout,
    name: str,
    path: tuple[str | int, ...],
    kind: str,
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
    node: LayoutNode | None = node_at(layout, path)
    if kind in ("bool", "same", "affix") or name.startswith("null("):
        return "bool"
    if kind == "len":
        what = "dict" if isinstance(node, ListLayout) and node.mapping else "list"
        return f"{what} length{_range(ge, le, str)}"
    if kind == "strlen":
        return f"str length{_range(ge, le, str)}"
    if kind == "datepart":
        part = _PARTS.get(name.split("(", 1)[0])
        if part is None:
            return f"int{_range(ge, le, str)}"
        node = part
    if isinstance(node, UnionLayout):
        return "one of " + " | ".join(b.model.__name__ for b in node.branches)
    if not isinstance(node, LeafLayout):
        return f"{kind}{_range(ge, le, str)}"
    shown = _LEAVES[node.kind]
    leaf = node
    bounds = _range(ge, le, lambda n: shown.value(leaf, n)) if kind != "str" else ""
    return f"{shown.type_name(node)}{bounds}{shown.suffix(node)}"


def _range(ge: int | None, le: int | None, text: Callable[[int], str]) -> str:
    if ge is None and le is None:
        return ""
    lo = "-inf" if ge is None else text(ge)
    hi = "inf" if le is None else text(le)
    return f" in [{lo}, {hi}]"
