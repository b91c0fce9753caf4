"""A field's default as the text the writer writes: what a record that leaves the key out holds.

Pydantic fills a missing key with the field's default. Where relations read an optional
field, the writer may leave its key out only as that default: it commits the facts of writing
the default's text (`factorspec_sdk.relations.layout.Omission.DEFAULT`), so the oracle, the
record checks and the relations Pydantic runs on the instance all see the same value. That
needs the default as the one canonical text the writer writes for it, and a value the leaf
holds exactly as the writer would write it: `default_text` gives it (one entry per leaf kind
in `DEFAULT_TEXTS`), or None where there is none: a default outside the leaf's bounds or
choices, of another type (``x: float = 1``: Python relations would see the int), with
microseconds, an aware datetime outside UTC (written in UTC, its ``.hour`` would differ), a
string with a lone surrogate, and every object or list default (``[]``, a
model). ``None`` is ``null`` for any nullable node.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable
from typing import cast

from factorspec_sdk.relations.floats import fixed_text, scaled_value
from factorspec_sdk.relations.kinds import LeafKind, Temporal
from factorspec_sdk.relations.layout import LayoutNode, LeafLayout
from factorspec_sdk.relations.temporal import (
    duration_seconds,
    duration_text,
    from_python,
    temporal_text,
)
from factorspec_sdk.relations.uuids import uuid_text
from factorspec_sdk.relations.variables import leaf_variable

__all__ = ["DEFAULT_TEXTS", "default_text"]


def default_text(node: LayoutNode, value: object) -> str | None:
    """The text the writer writes for ``value`` at ``node``, or None where it writes none.

    ``None`` is ``null`` where ``node`` is nullable; a leaf's value goes through its kind's
    entry of `DEFAULT_TEXTS`; any other value (an object, a list, a union's model) has none.
    """
    if value is None:
        return "null" if node.nullable else None
    if not isinstance(node, LeafLayout):
        return None
    return DEFAULT_TEXTS[node.kind](node, value)


def _within(node: LeafLayout, n: int) -> bool:
    """Whether the value ``n`` of the leaf's variable lies within the leaf's bounds."""
    shape = leaf_variable(node)
    return (shape.ge is None or shape.ge <= n) and (shape.le is None or n <= shape.le)


def _quoted(text: str) -> str:
    return f'"{text}"'


def _bool(node: LeafLayout, value: object) -> str | None:
    return json.dumps(value) if type(value) is bool else None


def _int(node: LeafLayout, value: object) -> str | None:
    if type(value) is not int or not _within(node, value):
        return None
    return str(value)


def _str(node: LeafLayout, value: object) -> str | None:
    """A free str within its lengths, as JSON spells it (escapes where JSON needs them).

    Not a text with a lone surrogate: UTF-8 cannot hold one, and the writer never writes
    one (Pydantic refuses it).
    """
    if type(value) is not str:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    text = json.dumps(value, ensure_ascii=False)
    top = node.max_length
    if len(value) < node.min_length or (top is not None and len(value) > top):
        return None
    return text


def _enum(node: LeafLayout, value: object) -> str | None:
    """A Literal's value or an Enum's member (of the field's Enum: a raw value stays raw)."""
    if node.enum_type is not None:
        if not isinstance(value, node.enum_type):
            return None
        value = value.value
    if not any(type(c) is type(value) and c == value for c in node.choices):
        return None
    return json.dumps(value, ensure_ascii=False)


def _temporal(node: LeafLayout, value: object) -> str | None:
    kind = cast(Temporal, node.kind)
    if kind == LeafKind.AWARE and (
        not isinstance(value, dt.datetime) or value.utcoffset() != dt.timedelta(0)
    ):
        return None  # written in UTC: another offset would read otherwise (``.hour``)
    got = from_python(kind, value)
    if got is None or not got[1] or not _within(node, got[0]):
        return None
    return _quoted(temporal_text(kind, got[0]))


def _duration(node: LeafLayout, value: object) -> str | None:
    got = duration_seconds(value)
    if got is None or not got[1] or not _within(node, got[0]):
        return None
    return _quoted(duration_text(got[0]))


def _float(node: LeafLayout, value: object) -> str | None:
    """A float of the field's type (a Decimal for a Decimal), on the leaf's grid of places."""
    wanted = decimal.Decimal if node.kind == LeafKind.DECIMAL else float
    if type(value) is not wanted:
        return None
    n = scaled_value(value, node.places)
    if n is None or not _within(node, n):
        return None
    return fixed_text(n, node.places)


def _uuid(node: LeafLayout, value: object) -> str | None:
    return _quoted(uuid_text(value.int)) if isinstance(value, uuid.UUID) else None


DEFAULT_TEXTS: dict[LeafKind, Callable[[LeafLayout, object], str | None]] = {
    LeafKind.BOOL: _bool,
    LeafKind.INT: _int,
    LeafKind.STR: _str,
    LeafKind.ENUM: _enum,
    LeafKind.DATE: _temporal,
    LeafKind.DATETIME: _temporal,
    LeafKind.AWARE: _temporal,
    LeafKind.TIME: _temporal,
    LeafKind.DURATION: _duration,
    LeafKind.FLOAT: _float,
    LeafKind.DECIMAL: _float,
    LeafKind.UUID: _uuid,
}
"""The text of a default of each leaf kind (None: not a value the writer writes there)."""
