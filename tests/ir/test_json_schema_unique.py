"""``uniqueItems``: distinct items by a factor where they have a finite domain, else one item.

Records of a random model (several seeds) validate with `jsonschema` (`records`), so a
repeated item would fail them.
"""

from __future__ import annotations

from typing import Any

import pytest

from factorspec_sdk.ir import IRError, ir_from_json_schema, spec_from_ir
from tests.ir.test_json_schema import fields, obj, records


def unique(items: object, **kw: object) -> dict[str, Any]:
    return {"type": "array", "items": items, "uniqueItems": True, **kw}


def test_enum_items_are_distinct_by_a_factor() -> None:
    schema = obj({"t": unique({"enum": ["a", "b", "c", "d"]})}, required=["t"])
    ir = ir_from_json_schema(schema)
    (f,) = ir["layout"]["fields"]
    assert f["node"]["max_length"] == 4  # no more items than values
    assert ir["strings"] == ["a", "b", "c", "d"]
    (factor,) = ir["factors"]
    assert factor["name"] == "uniqueItems of t"
    assert factor["variables"] == ["len(t)", "t[0]", "t[1]", "t[2]", "t[3]"]
    out = records(schema, 12)
    assert max(len(r["t"]) for r in out) >= 2
    assert all(len(set(r["t"])) == len(r["t"]) for r in out)


@pytest.mark.parametrize(
    ("items", "cap"),
    [
        ({"type": "boolean"}, 2),
        ({"type": "integer", "minimum": 0, "maximum": 2}, 3),
        ({"enum": [1, 2, 3, None]}, 3),  # the items of a unique list are never null
    ],
)
def test_finite_items(items: object, cap: int) -> None:
    schema = obj({"t": unique(items, minItems=2, maxItems=5)}, required=["t"])
    node = fields(schema)["t"]
    assert node["max_length"] == cap and not node["item"]["nullable"]
    out = records(schema, 8)
    assert all(len(r["t"]) >= 2 and len(set(r["t"])) == len(r["t"]) for r in out)


def test_a_unique_list_in_a_list() -> None:
    inner = obj({"tags": unique({"enum": ["x", "y", "z"]}, minItems=1)}, required=["tags"])
    schema = obj({"rows": {"type": "array", "items": inner, "maxItems": 3}}, required=["rows"])
    ir = ir_from_json_schema(schema)
    assert [f["name"] for f in ir["factors"]] == [
        f"uniqueItems of rows[{i}].tags" for i in range(3)
    ]
    assert {"name": "len(rows)", "path": ["rows"], "kind": "len"} in ir["variables"]
    records(schema, 6)


def test_other_items_are_one_at_most() -> None:
    words = obj({"t": unique({"type": "string"})}, required=["t"])
    assert fields(words)["t"]["max_length"] == 1
    assert all(len(r["t"]) <= 1 for r in records(words, 4))
    objects = obj({"t": unique(obj({"a": {"type": "boolean"}}), minItems=1)}, required=["t"])
    assert fields(objects)["t"]["max_length"] == 1
    assert all(len(r["t"]) == 1 for r in records(objects, 4))
    mixed = obj({"t": unique({"enum": ["a", 1]})})  # relations read one type of values
    assert fields(mixed)["t"]["max_length"] == 1
    wide = obj({"t": unique({"type": "integer", "minimum": 0, "maximum": 64})})  # 65 values
    assert fields(wide)["t"]["max_length"] == 1
    most = obj({"t": unique({"type": "integer", "minimum": 1, "maximum": 64}, minItems=5)})
    assert fields(most)["t"]["max_length"] == 5  # 64 values: 256 // 64 = 4 items, minItems 5
    many = obj({"t": unique({"enum": [f"v{i}" for i in range(32)]})})
    assert fields(many)["t"]["max_length"] == 8  # 32 values of 8 items: the solver's work


def test_in_a_grammar_value() -> None:
    x = {"anyOf": [unique({"type": "string"}, maxItems=4), {"type": "integer"}]}
    schema = obj({"x": x}, required=["x"])
    grammar = fields(schema)["x"]["schema"]
    assert grammar["anyOf"][0] == {"type": "array", "items": {"type": "string"}, "maxItems": 1}
    records(schema, 6)
    false = obj({"x": {"type": ["array", "string"], "uniqueItems": False, "minItems": 2}})
    assert "uniqueItems" not in fields(false)["x"]["schema"]  # no constraint: dropped
    ok = obj({"x": {"type": ["array", "string"], "uniqueItems": True, "maxItems": 1}})
    assert "uniqueItems" not in fields(ok)["x"]["schema"]  # at most one item: unique


def test_refused() -> None:
    with pytest.raises(IRError, match=r"#/properties/t: uniqueItems.*minItems 2.*uniqueItems"):
        spec_from_ir(ir_from_json_schema(obj({"t": unique({"type": "string"}, minItems=2)})))
    nested = {"anyOf": [unique({"enum": ["a", "b"]}, minItems=2), {"type": "integer"}]}
    with pytest.raises(IRError, match="Unimplemented keys"):
        spec_from_ir(ir_from_json_schema(obj({"x": nested})))
    # more items asked for than values: absent-only when optional, unsatisfiable when required
    few = unique({"type": "boolean"}, minItems=3)
    assert fields(obj({"t": few, "n": {"type": "integer"}})).keys() == {"n"}
    with pytest.raises(IRError, match="minItems 3 asks for more distinct items than the 2"):
        ir_from_json_schema(obj({"t": few}, required=["t"]))
    # a unique list under a oneOf that is not proven exclusive: the grammar's one item is
    # fewer values than the branch allows, so llguidance's own proof would not hold
    one_of = {"oneOf": [unique({"type": "string"}), {"type": "array", "minItems": 2}]}
    with pytest.raises(IRError, match="oneOf is not proven exclusive"):
        spec_from_ir(ir_from_json_schema(obj({"x": one_of})))
