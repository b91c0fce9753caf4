"""One record of a layout, built without solving, and what a relation raises on it.

When the compiler proves that a relation raises on every record (its definedness condition
is false: folded by the compiler, or unsatisfiable within the schema's bounds where the spec
is unsatisfiable), `raises_everywhere` reports it with Python's own exception and line, never
as an unsat core: `sample_record` builds one record the schema allows (each leaf at the value
nearest zero within its bounds, each list and string at its least length, a union's first
branch; `model_construct`, so no validator runs) and `raised_on` runs the relation on it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Callable
from typing import Any, cast

from pydantic import BaseModel

from factorspec_sdk.errors import RelationRaisesError
from factorspec_sdk.relations.decorator import RelationInfo
from factorspec_sdk.relations.floats import float_of
from factorspec_sdk.relations.kinds import LeafKind, Temporal
from factorspec_sdk.relations.layout import (
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectLayout,
    UnionLayout,
)
from factorspec_sdk.relations.temporal import temporal_range, to_python

__all__ = ["SAMPLE_VALUES", "raised_on", "raises_everywhere", "sample_record"]


def _near_zero(lo: int | None, hi: int | None) -> int:
    """The value nearest 0 within ``[lo, hi]`` (either may be open)."""
    if lo is not None and lo > 0:
        return lo
    if hi is not None and hi < 0:
        return hi
    return 0


def _temporal(node: LeafLayout) -> object:
    return to_python(cast(Temporal, node.kind), temporal_range(node)[0])


def _enum(node: LeafLayout) -> object:
    value = node.choices[0]
    return value if node.enum_type is None else node.enum_type(value)


SAMPLE_VALUES: dict[LeafKind, Callable[[LeafLayout], object]] = {
    LeafKind.BOOL: lambda node: False,
    LeafKind.INT: lambda node: _near_zero(node.ge, node.le),
    LeafKind.STR: lambda node: "a" * node.min_length,
    LeafKind.ENUM: _enum,
    LeafKind.DATE: _temporal,
    LeafKind.DATETIME: _temporal,
    LeafKind.AWARE: _temporal,
    LeafKind.TIME: _temporal,
    LeafKind.DURATION: lambda node: dt.timedelta(seconds=_near_zero(node.ge, node.le)),
    LeafKind.FLOAT: lambda node: float_of(_near_zero(node.ge, node.le), node.places),
    LeafKind.DECIMAL: lambda node: decimal.Decimal(_near_zero(node.ge, node.le)).scaleb(
        -node.places
    ),
    LeafKind.UUID: lambda node: uuid.UUID(int=0),
}
"""The sample value of each leaf kind."""


def sample_record(node: LayoutNode) -> object:
    """A value of ``node`` that its schema allows (a model instance for an object)."""
    if isinstance(node, ObjectLayout):
        values: dict[str, Any] = {f.name: sample_record(f.node) for f in node.fields}
        return node.model.model_construct(**values)
    if isinstance(node, ListLayout):
        items = [sample_record(node.item) for _ in range(node.min_length)]
        if node.mapping:  # a dict: entries with distinct keys
            return {_key(entry, k): getattr(entry, "value", None) for k, entry in enumerate(items)}
        return items
    if isinstance(node, UnionLayout):
        return sample_record(node.branches[0])
    if isinstance(node, LeafLayout):
        return SAMPLE_VALUES[node.kind](node)
    return None  # a grammar value: no relation reads it


def _key(entry: object, k: int) -> object:
    key = getattr(entry, "key", None)
    if isinstance(key, str):
        return key + str(k) if k else key
    return key


def raised_on(info: RelationInfo, instance: BaseModel | object, context: object) -> tuple[str, int]:
    """Python's exception (``"TypeError: ..."``) and its line when ``info`` runs on ``instance``.

    ``("", info.lineno)`` when it does not raise there.
    """
    try:
        if info.takes_context:
            info.func(instance, context)
        else:
            info.func(instance)
    except Exception as exc:
        line = info.lineno
        tb = exc.__traceback__
        while tb is not None:  # the deepest frame in the relation's own source
            if tb.tb_frame.f_code.co_filename == info.filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        return f"{type(exc).__name__}: {exc}", line
    return "", info.lineno


def raises_everywhere(info: RelationInfo, node: LayoutNode, context: object) -> RelationRaisesError:
    """The error for a relation that raises on every record of ``node`` (its model's layout).

    Python's exception and line come from running it on a sample record; without them, the
    error points at the relation.
    """
    exception, line = raised_on(info, sample_record(node), context)
    if exception:
        shown = f"on a sample record Python raises {exception} at line {line}"
    else:
        shown = "no sample record showed the exception"
    return RelationRaisesError(
        f"evaluating it raises an exception on every record the schema allows ({shown}), "
        "and an exception means the relation is violated, so no record can satisfy it; fix "
        "the expression that raises (an index past the list's bound, a key the dict lacks, "
        "a division by zero...)",
        relation=info.qualname,
        filename=info.filename,
        lineno=line,
        construct="relation that raises on every record",
        exception=exception,
    )
