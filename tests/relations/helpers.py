"""Test helpers: build model instances without validation, and check compiled truth."""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any

import pytest
import z3
from pydantic import BaseModel

from factorspec_sdk import RelationDefinitionError
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.graph.params import (
    ParameterLeak,
    parameters,
    reading_guarded,
    split_context,
    with_parameters,
)
from factorspec_sdk.relations.compiler import OTHER_CODE, RelationCompiler
from factorspec_sdk.relations.decorator import RelationInfo, relations_of
from factorspec_sdk.relations.floats import scaled_value
from factorspec_sdk.relations.layout import (
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectLayout,
    UnionLayout,
    branch_part,
    is_branch_part,
    node_at,
)
from factorspec_sdk.relations.pydantic_layout import build_layout
from factorspec_sdk.relations.temporal import from_python, temporal_of


def construct(node: LayoutNode, data: Any) -> Any:
    """An instance from plain data, skipping validation (so relations may be violated)."""
    if data is None:
        return None
    if isinstance(node, ObjectLayout):
        kwargs = {f.name: construct(f.node, data[f.name]) for f in node.fields}
        return node.model.model_construct(**kwargs)
    if isinstance(node, ListLayout) and node.mapping:  # a dict: its entries' keys, values
        assert isinstance(node.item, ObjectLayout)
        key, value = (f.node for f in node.item.fields)
        return {construct(key, k): construct(value, v) for k, v in data.items()}
    if isinstance(node, ListLayout):
        return [construct(node.item, x) for x in data]
    if isinstance(node, UnionLayout):  # a branch's instance, as given
        assert isinstance(data, BaseModel)
        return data
    assert isinstance(node, LeafLayout)
    if node.enum_type is not None:
        return node.enum_type(data)
    return data


def value_at(instance: Any, path: tuple[str | int, ...]) -> tuple[bool, Any]:
    """(exists, value) of the node at ``path`` in an instance."""
    cur = instance
    for part in path:
        if cur is None:
            return False, None
        if isinstance(part, int):
            if part >= len(cur):
                return False, None
            if isinstance(cur, dict):  # a dict's entry: its key and value by name
                key = list(cur)[part]
                cur = {"key": key, "value": cur[key]}
            else:
                cur = cur[part]
        elif is_branch_part(part):  # a union's branch: there when the instance is of it
            if branch_part(type(cur)) != part:
                return False, None
        elif isinstance(cur, dict):
            cur = cur[part]
        else:
            cur = getattr(cur, part)
    return True, cur


def compiled_truths(
    model: type[BaseModel], context: object, data: dict[str, Any], *, bound: bool = False
) -> dict[str, tuple[bool, bool]]:
    """Per relation: (python truth, compiled truth) on one record.

    ``bound``: each relation is lowered with the context's ints and dates as parameters
    (guarded, as `compile_spec` lowers a context shape) and their values substituted back; a
    relation whose lowering reads a parameter's value is left out (it would be compiled per
    context).
    """
    from factorspec_sdk.relations.decorator import evaluate

    key = (model, id(context), bound)
    if key not in _COMPILED:
        layout = build_layout(model)
        if bound:
            rels = [_bound_relation(layout, context, info) for info in relations_of(model)]
            _COMPILED[key] = (layout, [r for r in rels if r is not None], context)
        else:
            comp = RelationCompiler(layout, context)
            rels_ = [(info, comp, comp.compile(info).formula) for info in relations_of(model)]
            _COMPILED[key] = (layout, rels_, context)
    layout, compiled, _ = _COMPILED[key]
    instance = construct(layout, data)
    out: dict[str, tuple[bool, bool]] = {}
    for info, comp, formula in compiled:
        py = evaluate(info, instance, context)
        out[info.name] = (py, _decide(comp, formula, instance, info))
    return out


def _bound_relation(
    layout: ObjectLayout, context: object, info: RelationInfo
) -> tuple[RelationInfo, RelationCompiler, z3.BoolRef] | None:
    _, values = split_context(context)
    params = parameters(len(values))
    comp = RelationCompiler(layout, with_parameters(context, params))
    try:
        with reading_guarded(params) as guard:
            formula = comp.compile(info).formula
    except (ParameterLeak, RelationDefinitionError):
        return None
    if guard.leak is not None:
        return None
    pairs = [(p, z3.IntVal(v)) for p, v in zip(params, values, strict=True)]
    return info, comp, z3.substitute(formula, *pairs) if pairs else formula


_COMPILED: dict[tuple[type[BaseModel], int, bool], Any] = {}


def _decide(comp: RelationCompiler, formula: z3.BoolRef, instance: Any, info: RelationInfo) -> bool:
    pairs: list[tuple[z3.ExprRef, z3.ExprRef]] = []
    for rec in comp.vars.values():
        if rec.name.startswith("null("):
            ok, v = value_at(instance, rec.path)
            if ok:
                pairs.append((rec.term, z3.BoolVal(v is None)))
            continue
        ok, v = value_at(instance, rec.path)
        if not ok or v is None:
            continue
        if rec.kind == "affix":  # whether a free str leaf starts / ends with a constant
            assert rec.affix is not None
            pairs.append((rec.term, z3.BoolVal(bool(getattr(v, rec.affix[0])(rec.affix[1])))))
        elif rec.kind == "same":  # whether two free str leaves hold the same text
            assert rec.other is not None
            ok, w = value_at(instance, rec.other)
            if ok and w is not None:
                pairs.append((rec.term, z3.BoolVal(v == w)))
        elif rec.name.startswith("branch("):  # a union's branch variable: the branch's index
            union = comp.node_at(rec.path)
            assert isinstance(union, UnionLayout)
            index = [branch_part(b.model) for b in union.branches].index(branch_part(type(v)))
            pairs.append((rec.term, z3.IntVal(index)))
        elif rec.kind in ("len", "strlen"):
            pairs.append((rec.term, z3.IntVal(len(v))))
        elif isinstance(v, enum.Enum):
            v = v.value
            code = comp.strings.codes.get(v, OTHER_CODE) if isinstance(v, str) else v
            pairs.append((rec.term, z3.IntVal(code)))
        elif rec.kind == "str":
            pairs.append((rec.term, z3.IntVal(comp.strings.codes.get(v, OTHER_CODE))))
        elif rec.kind == "bool":
            pairs.append((rec.term, z3.BoolVal(bool(v))))
        elif rec.kind == "date":  # a date's ordinal, a datetime's or time's seconds
            temporal = temporal_of(type(v))
            assert temporal is not None, v
            if temporal == "datetime" and v.tzinfo is not None:
                temporal = "aware"
            got = from_python(temporal, v)
            assert got is not None and got[1], f"{v!r} is not a whole-second naive value"
            pairs.append((rec.term, z3.IntVal(got[0])))
        elif rec.kind == "datepart":  # year(d), month(d), day(d); a datetime's date(t), clock(t)
            part = rec.name.split("(")[0]
            if part == "date":
                got = v.toordinal()
            elif part == "clock":
                got = v.hour * 3600 + v.minute * 60 + v.second
            else:
                got = getattr(v, part)
            pairs.append((rec.term, z3.IntVal(got)))
        elif isinstance(v, dt.timedelta):  # a duration leaf: its whole seconds
            pairs.append((rec.term, z3.IntVal(v // dt.timedelta(seconds=1))))
        elif rec.kind == "float":
            pairs.append((rec.term, z3.IntVal(scaled(comp, rec.path, v))))
        else:
            pairs.append((rec.term, z3.IntVal(v)))
    reduced = z3.simplify(z3.substitute(formula, *pairs)) if pairs else z3.simplify(formula)
    if z3.is_true(reduced):
        return True
    if z3.is_false(reduced):
        return False
    s = z3.SimpleSolver()
    s.add(*(a == b for a, b in pairs))
    s.push()
    s.add(z3.Not(formula))
    can_be_false = s.check() == z3.sat
    s.pop()
    s.add(formula)
    can_be_true = s.check() == z3.sat
    assert can_be_true != can_be_false, (
        f"{info.name}: the compiled formula is not decided by the record "
        f"(true possible: {can_be_true}, false possible: {can_be_false})"
    )
    return can_be_true


def scaled(comp: RelationCompiler, path: tuple[str | int, ...], v: float) -> int:
    """A float leaf's value as its scaled int."""
    node = node_at(comp.layout, path)
    assert isinstance(node, LeafLayout)
    n = scaled_value(v, node.places)
    assert n is not None, (path, v)
    return n


def constants_of(e: z3.ExprRef) -> set[str]:
    """Names of the variables (uninterpreted constants) a Z3 term holds."""
    seen: set[int] = set()
    out: set[str] = set()
    stack = [e]
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(t.decl().name())
        else:
            stack.extend(t.children())
    return out


def refused(base: type[BaseModel], body: str, path: str) -> RelationDefinitionError:
    """The error of a relation ``return {body}`` on a subclass of ``base``, written to ``path``.

    The relation is on line 7 of that file; the error comes at ``@relation`` or at compile
    time. Names from ``datetime`` are imported for the body.
    """
    namespace: dict[str, Any] = {}
    src = (
        "from datetime import date, datetime, time, timedelta, timezone\n"
        "from factorspec_sdk import relation\n"
        f"from {base.__module__} import {base.__name__}\n"
        f"class Bad({base.__name__}):\n"
        "    @relation\n"
        "    def bad(self) -> bool:\n"
        f"        return {body}\n"
    )
    with open(path, "w") as f:
        f.write(src)
    with pytest.raises(RelationDefinitionError) as info:
        exec(compile(src, path, "exec"), namespace)
        compile_spec(namespace["Bad"])
    return info.value
