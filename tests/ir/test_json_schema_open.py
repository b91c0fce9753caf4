"""`ir_from_json_schema` writes the schema's language: undeclared keys, any value, null.

An object that allows keys it does not declare (``additionalProperties`` not false,
``patternProperties``, no ``properties`` at all), a sub-schema that constrains nothing
(``{}``, ``true``), a node without ``type`` (which accepts every type its keywords do not
constrain, ``null`` included) and an array without ``items`` are grammar values: llguidance
writes every value `jsonschema` accepts there. An object a relation reads under (a
``uniqueItems`` list laid out with a factor), or whose grammar llguidance refuses, stays
native with its declared keys only, and says so (``undeclared_keys``).

MaskBench's criterion is checked as MaskBench states it: an instance is *writable* when some
token sequence the planner's masks allow (`Planner.allowed` / `advance`, the tiny vocabulary)
spells a JSON text that parses to it, in any key order and any tokenization; the search
below walks both at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.bench.maskbench import judge
from factorspec_sdk.bench.maskbench.engines import FactorSpecEngine
from factorspec_sdk.drafter.loop import DecodeJob, Decoder
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.errors import GenerationError
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import (
    IRError,
    IRLimits,
    RecordInvalidError,
    check_record,
    ir_from_json_schema,
    json_schema_validator,
    spec_from_ir,
    spec_to_ir,
)
from factorspec_sdk.tokens.plan import Cursor, Finished, GrammarCursor, planner_for
from tests.helpers import tiny_tokenizer
from tests.ir.test_json_schema import obj, open_obj, records

MASKBENCH = Path(__file__).resolve().parents[2].parent / "shared" / "schemas" / "maskbench-dev"
INT = {"type": "integer", "minimum": 0, "maximum": 9}

# --------------------------------------------------------------------------- the search

_Item = bytes | tuple[Any, ...]
_State = tuple[_Item, ...]


def _spellings(v: object) -> list[bytes]:
    """The JSON texts of a scalar (an integral float also as an integer: it parses equal)."""
    if isinstance(v, float) and v.is_integer():
        return [json.dumps(v).encode(), str(int(v)).encode()]
    return [json.dumps(v, ensure_ascii=False).encode()]


def _closure(stack: _State, any_order: bool = True) -> Iterator[_State]:
    """The states of a serialization whose next item is text (or that is done).

    A state is a stack of what is left to write, its top last: text, ``("v", value)`` or
    ``("k", object, keys left, first)``; an object's next key is any key left (every order),
    or the next one in the instance's order.
    """
    todo = [stack]
    while todo:
        st = todo.pop()
        if not st:
            yield st
            continue
        top, rest = st[-1], st[:-1]
        if isinstance(top, bytes):
            if top:
                yield st
            else:
                todo.append(rest)
        elif top[0] == "v":
            v = top[1]
            if isinstance(v, dict):
                todo.append((*rest, b"}", ("k", v, tuple(v), True), b"{"))
            elif isinstance(v, list):
                items: list[_Item] = []
                for i, x in enumerate(v):
                    items += [b", "] if i else []
                    items.append(("v", x))
                todo.append((*rest, b"]", *reversed(items), b"["))
            else:
                todo += [(*rest, s) for s in _spellings(v)]
        else:
            _, o, left, first = top
            if not left:
                todo.append(rest)
            for k in left if any_order else left[:1]:
                lead = (b"" if first else b", ") + json.dumps(k, ensure_ascii=False).encode()
                others = tuple(x for x in left if x != k)
                todo.append((*rest, ("k", o, others, False), ("v", o[k]), lead + b": "))


def _feed(states: list[_State], data: bytes, any_order: bool) -> list[_State]:
    for byte in data:
        states = [
            nxt
            for st in states
            if st and isinstance(st[-1], bytes) and st[-1][0] == byte
            for nxt in _closure((*st[:-1], st[-1][1:]), any_order)
        ]
        if not states:
            break
    return states


def writable(
    schema: dict[str, Any], value: object, limit: int = 20_000, *, any_order: bool = True
) -> bool:
    """Whether the masks of ``schema``'s planner let some tokens spell ``value``.

    In any key order, or (``any_order`` false) in the instance's own.
    """
    tok = tiny_tokenizer()
    planner = planner_for(spec_from_ir(ir_from_json_schema(schema)), tok)
    eos = tok.eos_ids[0]
    steps = 0
    failed: set[tuple[bytes, object]] = set()
    seen: list[Cursor] = []  # alive, so that no two cursors of the search share an id

    def finished(cursor: Cursor) -> bool:
        if isinstance(cursor, Finished):
            return True
        # a root grammar value that may grow (a number) ends with the end-of-text token
        return (
            isinstance(cursor, GrammarCursor)
            and eos in planner.allowed(cursor).tolist()
            and isinstance(planner.advance(cursor, eos), Finished)
        )

    def search(cursor: Cursor, states: list[_State], written: bytes) -> bool:
        nonlocal steps
        # inside a grammar value the matcher's state follows from the text, not its tokens
        seen.append(cursor)
        key = (written, id(cursor.segment) if isinstance(cursor, GrammarCursor) else id(cursor))
        if key in failed:
            return False
        steps += 1
        assert steps < limit, "the search is too long for a test"
        if any(not st for st in states) and finished(cursor):
            return True
        if not isinstance(cursor, Finished):
            for t in planner.allowed(cursor).tolist():
                text = tok.vocab[t]
                nxt = _feed(states, text, any_order) if text else []
                if nxt and search(planner.advance(cursor, t), nxt, written + text):
                    return True
        failed.add(key)
        return False

    return search(planner.start(), list(_closure((("v", value),), any_order)), b"")


def layout(schema: dict[str, Any]) -> dict[str, Any]:
    out = ir_from_json_schema(schema)["layout"]
    assert isinstance(out, dict)
    return out


def test_the_search_follows_the_masks() -> None:
    closed = obj({"a": INT, "b": {"type": "boolean"}}, required=["a", "b"])
    assert writable(closed, {"b": True, "a": 3})  # any key order
    assert not writable(closed, {"a": 3})
    assert not writable(closed, {"a": 10, "b": True})
    assert not writable(closed, {"a": 3, "b": True, "c": 1})


# --------------------------------------------------------------------------- keys not declared


OPEN_CASES: dict[str, tuple[dict[str, Any], list[object], list[object]]] = {
    # name: (schema, valid instances, invalid instances)
    "no additionalProperties": (
        open_obj({"a": INT}, required=["a"]),
        [{"a": 1, "zz": [True, None]}, {"a": 2}, {"q": {"r": "s"}, "a": 0}],
        [{"zz": 1}, {"a": 11, "b": 1}],
    ),
    "object without properties": (
        {"type": "object"},
        [{}, {"k": 1.5}, {"k": {"l": [1, "x"]}}],
        [[], "s"],
    ),
    "additionalProperties schema": (
        obj({"a": INT}, additionalProperties={"type": "string"}),
        [{"a": 1, "b": "x"}, {"b": "x", "c": "y"}],
        [{"a": 1, "b": 2}, {"a": "x"}],
    ),
    "patternProperties": (
        obj({}, patternProperties={"^x": INT}),
        [{"xa": 1, "xb": 2}, {}],
        [{"xa": "1"}, {"y": 1}],
    ),
    "unevaluatedProperties schema": (
        open_obj({"a": INT}, unevaluatedProperties={"type": "boolean"}),
        [{"a": 1, "b": True}],
        [{"a": 1, "b": 1}],
    ),
    "minProperties": (
        open_obj({"a": INT}, required=["a"], minProperties=2),
        [{"a": 1, "b": None}],
        [{"a": 1}],
    ),
    # llguidance holds counts beside optional properties of an open object in anyOf
    # branches that fix which of them are present (ir.standalone)
    "minProperties over optional keys": (
        open_obj({"a": INT, "b": INT}, minProperties=1),
        [{"b": 1}, {"z": None}, {"a": 2, "b": 3}],
        [{}, {"a": 10}],
    ),
    "maxProperties over optional keys": (
        open_obj({"a": INT}, maxProperties=1),
        [{"a": 1}, {"z": 2}, {}],
        [{"a": 1, "z": 2}],
    ),
    "nested": (
        obj({"opts": open_obj({}), "n": INT}, required=["n"]),
        [{"n": 1, "opts": {"stop": True, "k": [1]}}, {"n": 2, "opts": {}}],
        [{"n": 1, "opts": 3}],
    ),
}


@pytest.mark.parametrize("name", list(OPEN_CASES))
def test_keys_the_schema_allows_are_written(name: str) -> None:
    schema, valid, invalid = OPEN_CASES[name]
    for value in valid:
        assert writable(schema, value), value
    for value in invalid:
        assert not writable(schema, value), value
    records(schema, 3)  # each one validates with jsonschema


def test_an_object_that_allows_undeclared_keys_is_one_grammar_value() -> None:
    schema = obj({"opts": {"type": "object"}, "n": INT}, required=["n", "opts"])
    opts, n = layout(schema)["fields"]
    assert n["node"]["kind"] == "int"
    assert opts["node"] == {"type": "grammar", "schema": {"type": "object"}}
    root = layout({"type": "object", "properties": {"n": INT}})
    assert root["type"] == "grammar"  # the whole record


def test_a_grammar_object_writes_its_properties_in_schema_order() -> None:
    inner = open_obj({"zeta": INT, "alpha": INT}, required=["zeta", "alpha"])
    schema = obj({"o": inner}, required=["o"])
    assert layout(schema)["fields"][0]["node"]["type"] == "grammar"
    assert writable(schema, {"o": {"zeta": 1, "alpha": 2}}, any_order=False)
    assert not writable(schema, {"o": {"alpha": 2, "zeta": 1}}, any_order=False)


def test_a_closed_object_is_laid_out_as_before() -> None:
    # OpenAI strict: every key declared and required, additionalProperties false
    strict = obj(
        {"name": {"type": "string"}, "n": INT, "tags": {"type": "array", "items": INT}},
        required=["name", "n", "tags"],
    )
    assert layout(strict) == {
        "type": "object",
        "name": "Record",
        "nullable": False,
        "fields": [
            {"name": "name", "key": "name", "node": {**_STR}},
            {"name": "n", "key": "n", "node": {**_INT}},
            {
                "name": "tags",
                "key": "tags",
                "node": {
                    "type": "list",
                    "item": {**_INT},
                    "min_length": 0,
                    "max_length": 16,
                    "bounded_by_schema": False,
                    "nullable": False,
                },
            },
        ],
    }


_STR = {"type": "leaf", "kind": "str", "nullable": False, "min_length": 0}
_INT = {"type": "leaf", "kind": "int", "nullable": False, "ge": 0, "le": 9}


# --------------------------------------------------------------------------- restrictions


def test_an_object_a_relation_reads_under_writes_its_other_keys_natively() -> None:
    """Other keys laid out by the writer: a dict of free keys after the declared ones."""
    unique = {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True}
    schema = open_obj({"tags": unique}, required=["tags"])
    ir = ir_from_json_schema(schema)
    root = ir["layout"]
    assert isinstance(root, dict) and "undeclared_keys" not in root
    others = root["fields"][-1]
    assert others["others"] is True and others["key"] == "" and others["name"] == "*"
    assert others["node"]["mapping"] is True and others["node"]["max_length"] == 16
    assert others["node"]["item"]["fields"][1]["node"] == {"type": "grammar", "schema": {}}
    names = [f["name"] for f in ir["factors"]]  # type: ignore[index]
    assert names == ["other keys of <record>", "uniqueItems of tags"]
    spec = spec_from_ir(ir)
    found = {(r.rule, r.path) for r in spec.restrictions()}
    assert found == {("list bound", "*")}  # the bound on other keys, named
    assert writable(schema, {"tags": ["b", "a"]})
    assert writable(schema, {"tags": ["a"], "x": 1, "tagsx": {"y": [None]}, "": "q"})
    assert not writable(schema, {"tags": ["a", "a"]})
    records(schema, 3)


def test_other_keys_beside_optional_declared_keys_go_through_a_key_slot() -> None:
    """``"a"`` and ``"ab"`` begin alike: the next key is one free string whose text tells
    a declared key (its own value follows) from an other key (``additionalProperties``)."""
    unique = {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}
    schema = open_obj(
        {"a": {"type": "boolean"}, "ab": INT, "xs": unique},
        additionalProperties={"type": "string", "maxLength": 2},
    )
    for value in (
        {},
        {"a": True},
        {"ab": 3},
        {"abc": "x"},
        {"a": False, "abc": "x", "": ""},
        {"ab": 2, "a": True, "xs": [True, False]},
        {"xs": [], "q": "1", "a": True},
        {'b"q': "\n"},
    ):
        assert writable(schema, value), value
    for value in (
        {"a": "x"},  # a declared key keeps its own schema
        {"ab": "x"},
        {"abc": 1},  # an other key holds additionalProperties'
        {"abc": "xyz"},
        {"xs": [True, True]},
    ):
        assert not writable(schema, value), value
    spec = spec_from_ir(ir_from_json_schema(schema))
    assert {r.rule for r in spec.restrictions()} == {"list bound"}
    records(schema, 4)


def test_other_keys_never_repeat_a_key() -> None:
    """A JSON object with a key twice parses to fewer entries: the writer writes none."""
    unique = {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}
    schema = open_obj({"a": INT, "xs": unique}, additionalProperties={"type": "boolean"})
    engine = FactorSpecEngine(tiny_tokenizer())
    assert engine.compile(schema).status == "accepted"
    for text in (
        '{"a": 1, "k": true}',
        '{"k": true, "j": false}',
        '{"a": 1, "xs": [], "k": true, "\u006a": false}',
    ):
        assert judge(engine, [text]).verdict == "writable", text
    for text in (
        '{"a": 1, "a": 2}',
        '{"k": true, "k": false}',
        '{"a": 1, "xs": [], "xs": []}',
        '{"k": true, "\u006b": false}',  # the same key, escaped: the same text
        '{"k": true, "a": 1}',  # declared keys first, as the writer's one key order
    ):
        assert judge(engine, [text]).verdict == "unwritable", text


def test_other_keys_past_the_limits_get_fewer_then_none() -> None:
    unique = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    item = open_obj({"xs": unique}, required=["xs"], additionalProperties=False)
    schema = open_obj({"xs": unique}, required=["xs"], additionalProperties=item)
    assert layout(schema)["fields"][-1]["node"]["max_length"] == 16
    fewer = ir_from_json_schema(schema, limits=IRLimits(max_variables=1_500))
    assert fewer["layout"]["fields"][-1]["node"]["max_length"] == 8  # type: ignore[index]
    fewest = ir_from_json_schema(schema, limits=IRLimits(max_variables=1_000))
    assert fewest["layout"]["fields"][-1]["node"]["max_length"] == 4  # type: ignore[index]
    none = ir_from_json_schema(schema, limits=IRLimits(max_variables=300))
    assert none["layout"]["undeclared_keys"] is True  # type: ignore[index]
    assert [f["name"] for f in none["layout"]["fields"]] == ["xs"]  # type: ignore[index]


def test_a_record_check_reads_the_other_keys() -> None:
    unique = {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}
    schema = open_obj({"xs": unique}, required=["xs"], additionalProperties=INT)
    ir = ir_from_json_schema(schema)
    spec = spec_from_ir(ir)
    assert check_record(spec, '{"xs": [true], "k": 3, "j": 4}') == {
        "xs": [True],
        "k": 3,
        "j": 4,
    }
    with pytest.raises(RecordInvalidError, match="other keys"):
        check_record(spec, '{"xs": [true], "k": "3"}')
    with pytest.raises(RecordInvalidError):
        check_record(spec, '{"xs": [true, true], "k": 3}')
    again = spec_to_ir(spec)  # the IR round trip keeps the field and the factors' scopes
    assert again["layout"]["fields"][-1]["others"] is True  # type: ignore[index]
    scopes = {f["name"]: f["scope"] for f in again["factors"]}  # type: ignore[union-attr]
    assert scopes == {"other keys of <record>": ["*"], "uniqueItems of xs": ["xs"]}
    assert check_record(spec_from_ir(again), '{"xs": [], "k": 1}') == {"xs": [], "k": 1}


def test_an_others_field_that_breaks_its_rules_is_refused() -> None:
    unique = {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}
    ir = ir_from_json_schema(open_obj({"xs": unique}, required=["xs"]))
    fields = ir["layout"]["fields"]  # type: ignore[index]
    fields.reverse()  # others no longer last
    with pytest.raises(IRError, match="a field of others must be its object's last"):
        spec_from_ir(ir)


def test_undeclared_keys_count_where_a_schema_has_unique_items_elsewhere() -> None:
    # uniqueItems in the document: objects are laid out before they are judged; a key set
    # that needs undeclared keys is then the grammar's, never narrowed or unsatisfiable
    one = {"type": "array", "uniqueItems": True, "maxItems": 1}
    deps = open_obj({"a": INT, "t": one}, dependentRequired={"a": ["z"]}, required=["t"])
    assert layout(deps)["type"] == "grammar"
    assert writable(deps, {"a": 1, "z": None, "t": []})
    tags = {"type": "array", "items": {"enum": ["a", "b"]}}
    counts = open_obj({"tags": tags, "t": one}, required=["tags", "t"], minProperties=4)
    assert layout(counts)["type"] == "grammar"
    assert writable(counts, {"tags": ["a"], "t": [], "x": 1, "y": 2})
    assert not writable(counts, {"tags": ["a"], "t": [], "x": 1})
    # a list a factor keeps unique cannot go into the grammar: refused, by name
    unique = {**tags, "uniqueItems": True}
    with pytest.raises(IRError, match=r"#/properties/tags: uniqueItems .* in a grammar value"):
        ir_from_json_schema(open_obj({"tags": unique}, required=["tags"], minProperties=3))


def test_an_object_llguidance_refuses_keeps_its_declared_keys() -> None:
    # propertyNames: llguidance does not implement it; the declared keys it allows stay
    schema = open_obj({"ab": INT, "abc": INT}, propertyNames={"maxLength": 2})
    root = layout(schema)
    assert root["undeclared_keys"] is True
    assert [f["key"] for f in root["fields"]] == ["ab"]
    assert writable(schema, {"ab": 1}) and not writable(schema, {"abc": 1})
    # where the declared keys cannot hold what llguidance refuses, it is refused by name
    with pytest.raises(
        IRError, match=r"#/properties/o: an object.*propertyNames.*declared keys alone"
    ):
        ir_from_json_schema(
            obj({"o": open_obj({"abc": INT}, propertyNames={"maxLength": 2}, required=["abc"])})
        )


def test_closed_objects_hold_key_keywords_natively_or_as_grammar() -> None:
    # propertyNames on a closed object: a key it rejects is never written
    names = obj({"ab": INT, "abc": INT}, propertyNames={"maxLength": 2})
    assert [f["key"] for f in layout(names)["fields"]] == ["ab"]
    # dependentRequired naming an undeclared key: that key is never written
    deps = obj({"a": INT, "b": INT}, dependentRequired={"a": ["z"]}, required=["b"])
    assert [f["key"] for f in layout(deps)["fields"]] == ["b"]
    # counts over optional keys: the grammar writes the key sets that pass
    some = obj({"a": INT, "b": INT}, minProperties=1)
    assert layout(some)["type"] == "grammar"
    assert writable(some, {"b": 1}) and not writable(some, {})
    fixed = obj({"a": INT}, required=["a"], maxProperties=1)
    assert layout(fixed)["type"] == "object"  # every key required: the count is fixed
    with pytest.raises(IRError, match=r"unsatisfiable.*maxProperties 1"):
        ir_from_json_schema(obj({"a": INT, "b": INT}, required=["a", "b"], maxProperties=1))


# --------------------------------------------------------------------------- any value, null


def test_an_unconstrained_value_is_any_json_value() -> None:
    for sub in ({}, True, {"description": "anything", "title": "Any"}):
        schema = obj({"x": sub}, required=["x"])
        assert layout(schema)["fields"][0]["node"] == {"type": "grammar", "schema": {}}
        for value in (None, 1, -2.5, "s", True, [1, [None]], {"k": {"l": []}}):
            assert writable(schema, {"x": value}), value
        records(schema, 3)


def test_a_node_without_type_accepts_null_and_every_other_type() -> None:
    schema = obj({"m": {"minimum": 3}, "s": {"minLength": 2}}, required=["m", "s"])
    for value in ({"m": None, "s": None}, {"m": "x", "s": 7}, {"m": 3.5, "s": "ab"}):
        assert writable(schema, value), value
    assert not writable(schema, {"m": 2, "s": "ab"})
    assert not writable(schema, {"m": 3, "s": "a"})
    # beside a sibling type, an untyped alternative takes it (the same instance)
    typed = obj({"n": {"type": ["integer", "null"], "anyOf": [{"minimum": 1}]}}, required=["n"])
    node = layout(typed)["fields"][0]["node"]
    assert (node["kind"], node["ge"], node["nullable"]) == ("int", 1, True)
    records(schema, 3)


def test_a_list_or_object_the_schema_allows_null_for_is_written_null_too() -> None:
    # the writer writes null for a list or object only where a relation reads its
    # null-ness: elsewhere the node is a grammar value, which writes null and the value
    tags = {"type": ["array", "null"], "items": {"type": "string", "maxLength": 2}}
    point = obj({"x": INT}, required=["x"])
    schema = obj({"tags": tags, "at": {"anyOf": [point, {"type": "null"}]}}, required=["tags"])
    for value in ({"tags": None, "at": None}, {"tags": ["a"], "at": {"x": 1}}):
        assert writable(schema, value), value
    assert not writable(schema, {"tags": [None], "at": None})
    # a list a factor reads (uniqueItems) stays native: null is not written there
    unique = {**tags, "items": {"enum": ["a", "b"]}, "uniqueItems": True}
    read = obj({"tags": unique}, required=["tags"])
    node = layout(read)["fields"][0]["node"]
    assert (node["type"], node["nullable"]) == ("list", True)
    assert writable(read, {"tags": ["b", "a"]}) and not writable(read, {"tags": None})
    found = {(r.rule, r.path) for r in spec_from_ir(ir_from_json_schema(read)).restrictions()}
    assert ("null unwritten", "tags") in found
    records(schema, 3)


class _Inner(BaseModel):
    a: int = Field(ge=0, le=3)


class _Maybe(BaseModel):
    xs: list[int] | None
    inner: _Inner | None
    read: _Inner | None

    @relation
    def read_is_none_or_small(self) -> bool:
        return self.read is None or self.read.a < 2


def test_a_model_s_optional_list_or_model_names_its_null_restriction() -> None:
    # the Pydantic path lays these out natively; null only where a relation reads it
    found = {(r.rule, r.path) for r in compile_spec(_Maybe).restrictions()}
    assert {p for rule, p in found if rule == "null unwritten"} == {"xs", "inner"}


def test_an_array_without_items_holds_any_json_values() -> None:
    schema = obj({"t": {"type": "array", "maxItems": 3}}, required=["t"])
    assert layout(schema)["fields"][0]["node"]["type"] == "grammar"
    assert writable(schema, {"t": [1, {"a": None}, "x"]})
    assert not writable(schema, {"t": [1, 2, 3, 4]})
    records(schema, 3)


def test_a_property_names_enum_makes_the_object_the_closed_one_it_is() -> None:
    # propertyNames an enum (through $ref): the keys are finitely many, so the object is the
    # closed object of those names, each under its patterns or additionalProperties
    names = {"$ref": "#/$defs/names"}
    flow = {
        "type": "object",
        "propertyNames": names,
        "patternProperties": {"^p": INT},
        "additionalProperties": {"type": "boolean"},
    }
    defs = {"names": {"type": "string", "enum": ["p1", "p2", "q", 7]}}
    schema = obj({"flow": flow}, required=["flow"], **{"$defs": defs})
    node = layout(schema)["fields"][0]["node"]
    assert node["type"] == "object" and "undeclared_keys" not in node
    assert [(f["key"], f.get("optional")) for f in node["fields"]] == [
        ("p1", True),
        ("p2", True),
        ("q", True),
    ]
    assert writable(schema, {"flow": {"q": True, "p2": 3}})
    assert writable(schema, {"flow": {}})
    assert not writable(schema, {"flow": {"p1": True}})
    assert not writable(schema, {"flow": {"r": 1}})
    records(schema, 3)
    # inside a grammar value (its parent allows undeclared keys), llguidance gets the same
    # closed object, which it implements: the parent is no longer refused and narrowed
    parent = open_obj({"flow": flow}, required=["flow"], **{"$defs": defs})
    assert layout(parent)["type"] == "grammar"
    assert writable(parent, {"flow": {"p1": 1}, "x": [1]})
    assert not writable(parent, {"flow": {"r": 1}})


def test_a_value_past_llguidance_s_lexer_limit_fails_the_record_never_writes_it() -> None:
    # up to 100 words within 5,000 characters: llguidance's lexer gives up inside the string
    # ('too many expressions constructed'); the matcher stops, which read as complete wrote
    # '{"q": ' as a finished record, or failed with a bare ValueError
    words = {"type": "string", "minLength": 1, "maxLength": 5000}
    words["pattern"] = "^(?:\\S+\\s+){0,99}\\S+$"
    spec = spec_from_ir(ir_from_json_schema(obj({"q": words}, required=["q"])))
    tok = tiny_tokenizer()
    for seed in range(3):
        job = DecodeJob(
            planner_for(spec, tok), tok.encode("go"), SamplingParams(temperature=1.0, seed=seed)
        )
        (res,) = Decoder(ScriptedEngine.random(tok, seed=seed, temperature_scale=2.0)).run([job])
        assert isinstance(res.error, GenerationError), (res.text, res.error)
        assert "too many expressions" in str(res.error)


# --------------------------------------------------------------------------- MaskBench files


@pytest.mark.parametrize(
    "name",
    [
        "BFCL_java_36.json",  # "parts": an array of {} holding strings, numbers, booleans
        "BFCL_javascript_20.json",  # "options": an object with additionalProperties true
        "Github_trivial---o27032.json",  # patternProperties only
        "Github_easy---o21847.json",  # patternProperties under additionalProperties false
    ],
)
def test_maskbench_instances(name: str) -> None:
    path = MASKBENCH / name
    if not path.is_file():
        pytest.skip(f"the MaskBench files are missing: {MASKBENCH} (CI places shared/ beside)")
    data = json.loads(path.read_text(encoding="utf-8"))
    schema = data["schema"]
    validator = json_schema_validator(schema)
    for test in data["tests"]:
        assert validator.is_valid(test["data"]) == test["valid"]
        assert writable(schema, test["data"]) == test["valid"], test
