"""Checking a finished record against a spec rebuilt from the IR.

The server has no Python relations: the layout's pydantic model checks structure and
bounds, then one solver check per component (`factorspec_sdk.graph.oracle.holds`) that the record's
values satisfy every factor.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, cast

from pydantic import ValidationError

from factorspec_sdk.errors import GenerationError
from factorspec_sdk.graph.oracle import holds

if TYPE_CHECKING:
    from factorspec_sdk.graph.compiled import CompiledSpec, Fact
    from factorspec_sdk.relations.layout import LayoutNode, LeafLayout, Path, UnionLayout

__all__ = ["RecordInvalidError", "check_record", "record_facts"]


class RecordInvalidError(GenerationError):
    """A record does not pass the spec's schema or relations."""

    code = "record-invalid"


_ABSENT = object()


def _branch_of(node: UnionLayout, value: object) -> int | None:
    """The index of the branch whose tag a union's JSON value carries, or None."""
    if not isinstance(value, dict):
        return None
    for k, b in enumerate(node.branches):
        tag = b.fields[0]  # the layout writes the tag first
        if tag.key in value and value[tag.key] == cast("LeafLayout", tag.node).choices[0]:
            return k
    return None


def _value_at(layout: LayoutNode, data: object, path: Path) -> tuple[LayoutNode, object]:
    """The node at ``path`` and its value in ``data`` (`_ABSENT` when the record has none)."""
    from factorspec_sdk.relations.layout import ListLayout, ObjectLayout, UnionLayout

    node, value = layout, data
    for part in path:
        if value is None:
            return node, _ABSENT
        if isinstance(node, UnionLayout):  # a branch's nodes exist when the tag is its
            k, branch = node.branch(cast(str, part))
            if _branch_of(node, value) != k:
                return node, _ABSENT
            node = branch
            continue
        if isinstance(part, int):
            if isinstance(node, ListLayout) and node.mapping and isinstance(value, dict):
                value = [{"key": k, "value": v} for k, v in value.items()]  # its entries
            if not isinstance(node, ListLayout) or not isinstance(value, list):
                return node, _ABSENT
            if part >= len(value):
                return node, _ABSENT
            node, value = node.item, value[part]
        else:
            if not isinstance(node, ObjectLayout) or not isinstance(value, dict):
                return node, _ABSENT
            f = node.field(part)
            if f.key not in value:
                return node, _ABSENT
            node, value = f.node, value[f.key]
    return node, value


def record_facts(spec: CompiledSpec, data: object) -> tuple[Fact, ...]:
    """The oracle facts of a parsed record: every variable whose node exists in it."""
    from factorspec_sdk.relations.compiler import date_part_bounds
    from factorspec_sdk.relations.layout import LeafLayout, UnionLayout, scaled_value
    from factorspec_sdk.relations.temporal import DAY_SECONDS, duration_value, temporal_value

    facts: list[Fact] = []
    names: set[str] = set()
    for f in spec.factors:
        names |= f.variables
    for name in sorted(names):
        rec = spec.record(name)
        node, value = _value_at(spec.layout, data, rec.path)
        if value is _ABSENT:
            continue
        if rec.kind == "affix":
            if isinstance(value, str) and rec.affix is not None:
                method, text = rec.affix
                facts.append((name, bool(getattr(value, method)(text))))
        elif rec.kind == "same":  # both texts are there (the first is; the second may not)
            assert rec.other is not None
            _, second = _value_at(spec.layout, data, rec.other)
            if isinstance(value, str) and isinstance(second, str):
                facts.append((name, value == second))
        elif name.startswith("null("):
            facts.append((name, value is None))
        elif value is None:
            continue
        elif isinstance(node, UnionLayout):
            k = _branch_of(node, value)  # the branch variable
            if k is not None:
                facts.append((name, k))
        elif rec.kind == "len":
            if isinstance(value, list | dict):
                facts.append((name, len(value)))
        elif rec.kind == "strlen":
            if isinstance(value, str):
                facts.append((name, len(value)))
        elif rec.kind in ("date", "datepart"):
            assert isinstance(node, LeafLayout)
            n = temporal_value(node.temporal, value) if isinstance(value, str) else None
            if n is not None:
                if rec.kind == "date":
                    facts.append((name, n))
                elif (part := date_part_bounds(name)) is not None:
                    day, clock = (n, 0) if node.temporal == "date" else divmod(n, DAY_SECONDS)
                    parts = {"date": day, "clock": clock, "hour": clock // 3600}
                    parts |= {"minute": clock // 60 % 60, "second": clock % 60}
                    if part[0] not in parts:
                        parts[part[0]] = getattr(dt.date.fromordinal(day), part[0])
                    facts.append((name, parts[part[0]]))
        elif isinstance(node, LeafLayout) and node.duration:
            seconds = duration_value(value) if isinstance(value, str) else None
            if seconds is not None:
                facts.append((name, seconds))
        elif rec.kind == "float":
            assert isinstance(node, LeafLayout)
            n = scaled_value(value, node.places)
            if n is not None:
                facts.append((name, n))
        elif isinstance(value, (str, int, bool)):
            facts.append((name, value))
    return tuple(facts)


def check_record(spec: CompiledSpec, text: str) -> object:
    """Check a record's JSON text against the spec; returns the parsed JSON value.

    Raises:
        RecordInvalidError: the text is not JSON, breaks the layout's structure or bounds, or
            its values violate a relation.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RecordInvalidError(f"the record is not JSON: {exc}") from None
    try:
        spec.model.model_validate(data)
    except ValidationError as exc:
        raise RecordInvalidError(f"the record breaks the schema: {exc}") from None
    facts = record_facts(spec, data)
    try:
        ok = holds(spec, facts)
    except ValueError as exc:
        raise RecordInvalidError(f"the record has a value of the wrong type: {exc}") from None
    if not ok:
        raise RecordInvalidError("the record violates the spec's relations")
    return data
