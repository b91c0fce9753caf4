"""Checking a finished record against a spec rebuilt from the IR.

The server has no Python relations: the layout's pydantic model checks structure and
bounds, then one solver check per component (`factorspec_sdk.graph.oracle.holds`) that the record's
values satisfy every factor.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from pydantic import ValidationError

from factorspec_sdk.errors import RecordInvalidError
from factorspec_sdk.graph.oracle import holds
from factorspec_sdk.ir.leaves import leaf_value
from factorspec_sdk.relations.kinds import Temporal, VarKind
from factorspec_sdk.relations.layout import (
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectLayout,
    Path,
    UnionLayout,
)
from factorspec_sdk.relations.temporal import temporal_part
from factorspec_sdk.relations.variables import date_part_of

if TYPE_CHECKING:
    from factorspec_sdk.graph.compiled import CompiledSpec, Fact, Value
    from factorspec_sdk.relations.compiler import VarRecord

__all__ = ["FACTS", "RecordInvalidError", "check_record", "record_facts"]


_ABSENT = object()


def _branch_of(node: UnionLayout, value: object) -> int | None:
    """The index of the branch whose tag a union's JSON value carries, or None."""
    if not isinstance(value, dict):
        return None
    for k, b in enumerate(node.branches):
        tag = b.fields[0]  # the layout writes the tag first
        if tag.key in value and value[tag.key] == cast(LeafLayout, tag.node).choices[0]:
            return k
    return None


def _value_at(layout: LayoutNode, data: object, path: Path) -> tuple[LayoutNode, object]:
    """The node at ``path`` and its value in ``data`` (`_ABSENT` when the record has none).

    A key the record leaves out holds its field's default (`ObjectField.default`), as
    Pydantic fills it and as the writer commits its facts.
    """
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
            if f.others:  # the keys no other field declares, as a dict
                declared = {g.key for g in node.fields}
                node, value = f.node, {k: v for k, v in value.items() if k not in declared}
            elif f.key in value:
                node, value = f.node, value[f.key]
            elif f.default is not None:  # a key left out holds the field's default
                node, value = f.node, json.loads(f.default)
            else:
                return node, _ABSENT
    return node, value


_Fact = Callable[["CompiledSpec", object, "VarRecord", "LayoutNode", object], "Value | None"]
"""The value of one kind of variable in a record: (spec, record, variable, node, its JSON
value) -> the fact's value (None: the record gives it none)."""


def _leaf_fact(
    spec: CompiledSpec, data: object, rec: VarRecord, node: LayoutNode, value: object
) -> Value | None:
    """A leaf's value (`factorspec_sdk.ir.leaves.leaf_value`), or a union's branch."""
    if isinstance(node, UnionLayout):
        return _branch_of(node, value)
    assert isinstance(node, LeafLayout)
    return leaf_value(node, value)


def _length_fact(
    spec: CompiledSpec, data: object, rec: VarRecord, node: LayoutNode, value: object
) -> Value | None:
    return len(value) if isinstance(value, list | dict) else None


def _text_length_fact(
    spec: CompiledSpec, data: object, rec: VarRecord, node: LayoutNode, value: object
) -> Value | None:
    return len(value) if isinstance(value, str) else None


def _part_fact(
    spec: CompiledSpec, data: object, rec: VarRecord, node: LayoutNode, value: object
) -> Value | None:
    """A temporal leaf's part (``year(d)``...), of the leaf's value."""
    assert isinstance(node, LeafLayout)
    n, part = leaf_value(node, value), date_part_of(rec.name)
    if not isinstance(n, int) or part is None:
        return None
    return temporal_part(cast(Temporal, node.kind), n, part)


def _affix_fact(
    spec: CompiledSpec, data: object, rec: VarRecord, node: LayoutNode, value: object
) -> Value | None:
    if not isinstance(value, str) or rec.affix is None:
        return None
    method, text = rec.affix
    return bool(getattr(value, method)(text))


def _same_fact(
    spec: CompiledSpec, data: object, rec: VarRecord, node: LayoutNode, value: object
) -> Value | None:
    """Whether two free strings hold the same text (where the second is there too)."""
    assert rec.other is not None
    _, second = _value_at(spec.layout, data, rec.other)
    return value == second if isinstance(value, str) and isinstance(second, str) else None


FACTS: dict[VarKind, _Fact] = {
    VarKind.INT: _leaf_fact,
    VarKind.BOOL: _leaf_fact,
    VarKind.STR: _leaf_fact,
    VarKind.LEN: _length_fact,
    VarKind.STRLEN: _text_length_fact,
    VarKind.DATE: _leaf_fact,
    VarKind.DATEPART: _part_fact,
    VarKind.FLOAT: _leaf_fact,
    VarKind.SAME: _same_fact,
    VarKind.AFFIX: _affix_fact,
}
"""The value of each kind of variable in a record."""


def record_facts(spec: CompiledSpec, data: object) -> tuple[Fact, ...]:
    """The oracle facts of a parsed record: every variable whose node exists in it."""
    facts: list[Fact] = []
    names: set[str] = set()
    for f in spec.factors:
        names |= f.variables
    for name in sorted(names):
        rec = spec.record(name)
        node, value = _value_at(spec.layout, data, rec.path)
        if value is _ABSENT:
            continue
        if name.startswith("null("):
            got: Value | None = value is None
        elif value is None:
            continue
        else:
            got = FACTS[rec.kind](spec, data, rec, node, value)
        if got is not None:
            facts.append((name, got))
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
