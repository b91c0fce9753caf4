"""``uniqueItems``: the items differ by a factor, as `jsonschema` compares them.

Two kinds of evidence: records of a random model (several seeds) validate with `jsonschema`
(`records`), so a repeated item would fail them; and a text is written, or not, through the
real token masks (`writes`: a search over every tokenization of the text, as MaskBench
asks), so a list can hold two different items and never two equal ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from factorspec_sdk.ir import IRError, ir_from_json_schema, json_schema_validator, spec_from_ir
from factorspec_sdk.tokens.plan import Cursor, Finished, Planner
from factorspec_sdk.tokens.vocab import TokenizerInfo
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import enumerate_texts, tiny_tokenizer
from tests.ir.test_json_schema import fields, obj, records

MASKBENCH = Path(__file__).resolve().parents[2].parent / "shared" / "schemas" / "maskbench-dev"


def unique(items: object, **kw: object) -> dict[str, Any]:
    return {"type": "array", "items": items, "uniqueItems": True, **kw}


def planner(schema: dict[str, Any], tok: TokenizerInfo | None = None) -> Planner:
    return Planner(Writer(spec_from_ir(ir_from_json_schema(schema))), tok or tiny_tokenizer())


def writes(p: Planner, text: str, *, whole: bool = True) -> bool:
    """Whether some token sequence the masks allow spells ``text`` (a prefix: ``whole=False``).

    A depth-first search over every tokenization: the allowed tokens whose bytes continue
    the text, until the record is finished where the text ends.
    """
    data = text.encode()
    vocab = p.tok.vocab

    def search(cursor: Cursor, pos: int) -> bool:
        if pos == len(data) and (not whole or isinstance(cursor, Finished)):
            return True
        for t in p.allowed(cursor).tolist():
            piece = vocab[t]
            if not piece or not data.startswith(piece, pos):
                continue
            if search(p.advance(cursor, t), pos + len(piece)):
                return True
        return False

    return search(p.start(), 0)


def record(value: object) -> str:
    """The canonical text of ``{"t": value}``, as the writer spaces it."""
    return json.dumps({"t": value})


# --------------------------------------------------------------------------- any items


def test_free_strings_differ() -> None:
    schema = obj({"t": unique({"type": "string"}, minItems=2, maxItems=4)}, required=["t"])
    ir = ir_from_json_schema(schema)
    assert fields(schema)["t"]["max_length"] == 4  # was 1 item, and minItems 2 refused
    assert {"name": "same(t[0], t[1])", "path": ["t", 0], "kind": "bool", "other": ["t", 1]} in (
        ir["variables"]
    )
    p = planner(schema)
    for ok in (["a", "b"], ["", "x", "xy"], ["ab", "a", "b", "ba"]):
        assert writes(p, record(ok)), ok
    for bad in (["a", "a"], ["a", "b", "a"], ["", ""], ["ab", "a", "b", "ab"], ["x"]):
        assert not writes(p, record(bad)), bad
    out = records(schema, 6)
    assert all(len(r["t"]) >= 2 for r in out)  # type: ignore[index]


def test_strings_are_compared_by_value_not_spelling() -> None:
    """A value JSON spells two ways (an escape, or not) is one value: never written twice."""
    schema = obj({"t": unique({"type": "string"}, minItems=2, maxItems=4)}, required=["t"])
    p = planner(schema)
    same = [r'["A", "\u0041"]', r'["x\/", "x/"]', r'["\n", "\u000a"]', r'["a\"b", "a\"b"]']
    other = [r'["B", "\u0041"]', r'["x\/", "y"]', r'["\n", "\t"]', r'["a\nb", "a\\nb"]']
    for bad in same:
        assert not writes(p, '{"t": ' + bad + "}"), bad
    for ok in other:
        assert writes(p, '{"t": ' + ok + "}"), ok


def test_objects_differ_by_some_property() -> None:
    item = obj({"name": {"type": "string"}, "n": {"type": "integer", "minimum": 0, "maximum": 9}})
    schema = obj({"t": unique({**item, "required": ["name", "n"]}, maxItems=3)}, required=["t"])
    p = planner(schema)
    a1, a2, b1 = {"name": "a", "n": 1}, {"name": "a", "n": 2}, {"name": "b", "n": 1}
    for ok in ([a1, a2], [a1, b1], [a1, a2, b1]):
        assert writes(p, record(ok)), ok
    for bad in ([a1, a1], [a1, b1, a1], [b1, a2, b1]):
        assert not writes(p, record(bad)), bad
    records(schema, 4)


def test_integers_of_a_wide_range() -> None:
    schema = obj({"t": unique({"type": "integer"}, minItems=2, maxItems=3)}, required=["t"])
    p = planner(schema)
    for ok in ([1, 2], [-5, 123456789012, 0], [10, 1]):
        assert writes(p, record(ok)), ok
    for bad in ([7, 7], [1, 2, 1], [-3, -3]):
        assert not writes(p, record(bad)), bad
    wide = {"type": "integer", "minimum": 0, "maximum": 999}  # digits, not whole values
    out = records(obj({"t": unique(wide, minItems=2, maxItems=3)}, required=["t"]), 3)
    assert all(len(r["t"]) >= 2 for r in out)  # type: ignore[index]


def test_null_is_one_item_at_most() -> None:
    schema = obj({"t": unique({"type": ["string", "null"]}, maxItems=4)}, required=["t"])
    p = planner(schema)
    for ok in (["a", None], [None, "a", "b"], [None]):
        assert writes(p, record(ok)), ok
    for bad in ([None, None], ["a", None, None], [None, "a", "a"]):
        assert not writes(p, record(bad)), bad
    finite = obj({"t": unique({"enum": [1, 2, None]}, maxItems=5)}, required=["t"])
    assert fields(finite)["t"]["max_length"] == 3  # null is one of the values
    assert writes(planner(finite), record([2, None, 1]))
    assert not writes(planner(finite), record([None, 2, None]))


def test_arrays_differ_item_by_item() -> None:
    pairs = {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}
    schema = obj({"t": unique(pairs, maxItems=4)}, required=["t"])
    p = planner(schema)
    for ok in ([[True], [True, False]], [[], [False]], [[True, True], [True, False], []]):
        assert writes(p, record(ok)), ok
    for bad in ([[True], [True]], [[], []], [[True, False], [False], [True, False]]):
        assert not writes(p, record(bad)), bad
    records(schema, 4)


@pytest.mark.parametrize(
    ("items", "values", "most"),
    [
        ({"type": ["boolean", "null"]}, [True, False, None], 3),
        ({"enum": ["a", "b", 1, None], "type": ["string", "null"]}, ["a", "b", None], 3),
        ({"type": "array", "items": {"type": "boolean"}, "maxItems": 1}, [[], [True], [False]], 3),
        (
            {**obj({"x": {"type": "boolean"}, "y": {"enum": [1, 2]}}), "required": ["x", "y"]},
            [{"x": x, "y": y} for x in (True, False) for y in (1, 2)],
            2,
        ),
        (
            {"type": ["object", "null"], "properties": {"x": {"type": "boolean"}}},
            [{"x": True}, {"x": False}, None],
            3,
        ),
        (
            {"type": ["array", "null"], "items": {"enum": [7]}, "maxItems": 2},
            [[], [7], [7, 7], None],  # one value per length
            3,
        ),
    ],
)
def test_the_writer_writes_every_unique_list(
    items: object, values: list[object], most: int
) -> None:
    """Every text the writer can write, against every list of distinct values: the same set."""
    schema = obj({"t": unique(items, maxItems=most)}, required=["t"])
    written = sorted(enumerate_texts(Writer(spec_from_ir(ir_from_json_schema(schema)))))
    lists: list[list[object]] = [[]]
    for _ in range(most):
        lists += [[*xs, v] for xs in lists if len(xs) == len(lists[-1]) for v in values]
    validator = json_schema_validator(schema)
    allowed = sorted({record(xs) for xs in lists if validator.is_valid({"t": xs})})
    assert written == allowed


def test_a_string_of_one_value() -> None:
    """A string of ``maxLength`` 0 has one value: one item, and null beside it."""
    schema = obj({"t": unique({"type": ["string", "null"], "maxLength": 0})}, required=["t"])
    assert fields(schema)["t"]["max_length"] == 2
    p = planner(schema)
    assert writes(p, record(["", None])) and writes(p, record([None, ""]))
    assert not writes(p, record(["", ""]))


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
    assert max(len(r["t"]) for r in out) >= 2  # type: ignore[index]
    assert all(len(set(r["t"])) == len(r["t"]) for r in out)  # type: ignore[index]


@pytest.mark.parametrize(
    ("items", "cap"),
    [
        ({"type": "boolean"}, 2),
        ({"type": "integer", "minimum": 0, "maximum": 2}, 3),
        ({"enum": [1, 2, 3, None]}, 4),  # null is a value too
        ({"type": "string"}, 5),  # many values: the schema's bound
    ],
)
def test_bounds(items: object, cap: int) -> None:
    schema = obj({"t": unique(items, minItems=2, maxItems=5)}, required=["t"])
    node = fields(schema)["t"]
    assert node["max_length"] == cap
    out = records(schema, 6)
    assert all(len(r["t"]) >= 2 for r in out)  # type: ignore[index]


def test_a_unique_list_in_a_list() -> None:
    inner = obj({"tags": unique({"enum": ["x", "y", "z"]}, minItems=1)}, required=["tags"])
    schema = obj({"rows": {"type": "array", "items": inner, "maxItems": 3}}, required=["rows"])
    ir = ir_from_json_schema(schema)
    assert [f["name"] for f in ir["factors"]] == [
        f"uniqueItems of rows[{i}].tags" for i in range(3)
    ]
    assert {"name": "len(rows)", "path": ["rows"], "kind": "len"} in ir["variables"]
    records(schema, 6)


def test_the_solver_work_of_few_values() -> None:
    """Items of at most 64 values: no more items than values, nor than 256 values * items."""
    most = obj({"t": unique({"type": "integer", "minimum": 1, "maximum": 64}, minItems=5)})
    assert fields(most)["t"]["max_length"] == 5  # 64 values: 256 // 64 = 4 items, minItems 5
    many = obj({"t": unique({"enum": [f"v{i}" for i in range(32)]})})
    assert fields(many)["t"]["max_length"] == 8  # 32 values of 8 items: the solver's work
    wide = obj({"t": unique({"type": "integer", "minimum": 0, "maximum": 64})})  # 65 values
    assert fields(wide)["t"]["max_length"] == 16  # the default bound


# --------------------------------------------------------------------------- refused


def test_items_the_writer_cannot_compare_are_refused() -> None:
    """Grammar values and mixed enums: an error naming the place and what to write."""
    pattern = unique({"type": "string", "pattern": "^a+$"})
    with pytest.raises(IRError, match=r"#/properties/t: uniqueItems over items holding a gram"):
        ir_from_json_schema(obj({"t": pattern}))
    email = obj({"name": {"type": "string"}, "email": {"type": "string", "format": "email"}})
    with pytest.raises(IRError, match=r"grammar value at email.*write maxItems: 1"):
        ir_from_json_schema(obj({"t": unique(email)}))
    with pytest.raises(IRError, match="an enum that mixes value types"):
        ir_from_json_schema(obj({"t": unique({"enum": ["a", 1]})}))
    one = obj({"t": {**pattern, "maxItems": 1}})  # what the error says to write
    assert fields(one)["t"]["type"] == "grammar"
    records(one, 2)


def test_in_a_grammar_value() -> None:
    x = {"anyOf": [unique({"type": "string"}, maxItems=4), {"type": "integer"}]}
    with pytest.raises(IRError, match=r"#/properties/x/anyOf/0: uniqueItems .* grammar value"):
        ir_from_json_schema(obj({"x": x}, required=["x"]))
    false = obj({"x": {"type": ["array", "string"], "uniqueItems": False, "minItems": 2}})
    assert "uniqueItems" not in fields(false)["x"]["schema"]  # no constraint: dropped
    ok = obj({"x": {"type": ["array", "string"], "uniqueItems": True, "maxItems": 1}})
    assert "uniqueItems" not in fields(ok)["x"]["schema"]  # at most one item: unique
    records(ok, 4)


def test_more_items_than_values() -> None:
    """More items asked for than values: absent-only when optional, else unsatisfiable."""
    few = unique({"type": "boolean"}, minItems=3)
    assert fields(obj({"t": few, "n": {"type": "integer"}})).keys() == {"n"}
    with pytest.raises(IRError, match="minItems 3 asks for more distinct items than the 2"):
        ir_from_json_schema(obj({"t": few}, required=["t"]))


def test_limits() -> None:
    """The pairs of free strings are solver variables: past the limit, an error says so."""
    many = obj({"t": unique({"type": "string"}, maxItems=100)}, required=["t"])
    with pytest.raises(IRError, match=r"#/properties/t: uniqueItems and other keys need more "):
        ir_from_json_schema(many)


# --------------------------------------------------------------------------- MaskBench


def maskbench(name: str) -> dict[str, Any]:
    path = MASKBENCH / name
    if not path.is_file():
        pytest.skip(f"the MaskBench corpus is missing: {path} (CI places shared/ beside the repo)")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_maskbench_servicehub() -> None:
    """JsonSchemaStore's servicehub: its valid instances list two environment variables.

    Its first property is the unique list, so the masks decide a prefix of the instance:
    two different names are written, a repeated one is not (the invalid instances repeat
    one). The rest of the instances (an open object, escapes) is other work of the issue.
    """
    data = maskbench("JsonSchemaStore---servicehub.config.schema.json")
    schema = data["schema"]
    p = planner(schema)
    head = '{"controller": {"contextEnvironmentVariables": '
    valid = [t["data"] for t in data["tests"] if t["valid"]]
    for instance in valid:
        names = instance["controller"]["contextEnvironmentVariables"]
        assert len(names) == 2
        assert writes(p, head + json.dumps(names), whole=False), names
        assert not writes(p, head + json.dumps([*names, names[0]]), whole=False)
    names_of = [t["data"].get("controller", {}) for t in data["tests"] if not t["valid"]]
    lists = [c.get("contextEnvironmentVariables") for c in names_of]
    repeated = [r for r in lists if isinstance(r, list) and len(set(r)) < len(r)]
    assert repeated  # the invalid instances that repeat a name
    for r in repeated:
        assert not writes(p, head + json.dumps(r), whole=False), r
    records(schema, 2)


def test_maskbench_schema_catalog() -> None:
    """JsonSchemaStore's schema catalog: each schema's ``fileMatch`` globs are unique."""
    data = maskbench("JsonSchemaStore---schema-catalog.json")
    ir = ir_from_json_schema(data["schema"])
    assert [f["name"] for f in ir["factors"]][:2] == [
        "uniqueItems of schemas[0].fileMatch",
        "uniqueItems of schemas[1].fileMatch",
    ]
    p = planner(data["schema"])
    head = '{"schemas": [{"fileMatch": '
    assert writes(p, head + '["*.example.json", "*.sample.json"], "url": ', whole=False)
    assert not writes(p, head + '["*.example.json", "*.example.json"', whole=False)
    records(data["schema"], 2)
