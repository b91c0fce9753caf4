"""`ir_from_json_schema`: what it writes validates with `jsonschema`; what it cannot, it refuses."""

from __future__ import annotations

import json

import pytest

from factorspec_sdk.bench.maskbench import candidate_texts, judge
from factorspec_sdk.bench.maskbench.engines import FactorSpecEngine
from factorspec_sdk.drafter.loop import DecodeJob, Decoder
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.errors import IncompleteGenerationError
from factorspec_sdk.ir import (
    IRError,
    RecordInvalidError,
    check_json_schema_record,
    ir_from_json_schema,
    json_schema_validator,
    spec_from_ir,
)
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import tiny_tokenizer

D4 = "http://json-schema.org/draft-04/schema#"
D7 = "http://json-schema.org/draft-07/schema#"


def obj(props: dict[str, object], **kw: object) -> dict[str, object]:
    """An object schema, closed unless ``kw`` says otherwise (``additionalProperties``).

    Closed, as an object that allows keys it does not declare is one grammar value: the
    tests that look at the layout of the values below need a root the writer lays out.
    """
    return {"type": "object", "properties": props, "additionalProperties": False, **kw}


def open_obj(props: dict[str, object], **kw: object) -> dict[str, object]:
    """An object schema that allows keys it does not declare (no ``additionalProperties``)."""
    return {"type": "object", "properties": props, **kw}


def fields(schema: dict[str, object]) -> dict[str, dict[str, object]]:
    layout = ir_from_json_schema(schema)["layout"]
    assert isinstance(layout, dict) and isinstance(layout["fields"], list)
    return {f["key"]: f["node"] for f in layout["fields"]}


def records(schema: dict[str, object], n: int = 6) -> list[object]:
    """``n`` records decoded by a random model; each one validated with `jsonschema`."""
    spec = spec_from_ir(ir_from_json_schema(schema))
    validator = json_schema_validator(schema)
    tok = tiny_tokenizer()
    out: list[object] = []
    for seed in range(n):
        job = DecodeJob(
            Planner(Writer(spec), tok),
            tok.encode("go"),
            SamplingParams(temperature=1.0, seed=seed, max_tokens=400),
        )
        (res,) = Decoder(ScriptedEngine.random(tok, seed=seed, temperature_scale=2.0)).run([job])
        if isinstance(res.error, IncompleteGenerationError):
            continue
        assert res.error is None, res.error
        check_json_schema_record(validator, res.text)
        out.append(json.loads(res.text))
    assert out, "every record ran out of tokens"
    return out


# --------------------------------------------------------------------------- the issue's three


def test_required_keys_not_under_properties_are_written() -> None:
    # the object allows keys it does not declare: one grammar value, which writes them
    schema = open_obj({"FXCPath": {"type": "string"}}, required=["FXCPath", "OutputDirectory"])
    assert ir_from_json_schema(schema)["layout"]["type"] == "grammar"  # type: ignore[index]
    for r in records(schema):
        assert isinstance(r, dict) and "OutputDirectory" in r
    typed = open_obj({}, required=["n"], additionalProperties={"type": "integer", "minimum": 3})
    assert all(isinstance(r, dict) and r["n"] >= 3 for r in records(typed))
    with pytest.raises(IRError, match=r"unsatisfiable.*'OutputDirectory'.*additionalProperties"):
        ir_from_json_schema({**schema, "additionalProperties": False})


def test_enum_is_intersected_with_type_and_siblings() -> None:
    kerberos = {"enum": ["X509", "Kerberos"], "type": "object"}
    assert list(fields(obj({"a": {"type": "integer"}, "auth": kerberos}))) == ["a"]  # absent-only
    with pytest.raises(IRError, match=r"unsatisfiable.*#/properties/auth.*required"):
        ir_from_json_schema(obj({"auth": kerberos}, required=["auth"]))
    mixed = {"type": "string", "enum": ["a", 1, "bb", True, None], "maxLength": 1}
    assert fields(obj({"x": mixed}))["x"]["choices"] == ["a"]
    email = {"type": "string", "format": "email", "enum": ["a@b.co", "nope"]}
    assert fields(obj({"x": email}))["x"]["choices"] == ["a@b.co"]
    via_ref = {
        "$defs": {"Small": {"type": "integer", "maximum": 2}},
        **obj({"x": {"allOf": [{"$ref": "#/$defs/Small"}], "enum": [1, 2, 3, "2"]}}),
    }
    assert fields(via_ref)["x"]["choices"] == [1, 2]
    assert fields(obj({"x": {"const": 2.0, "type": "integer"}}))["x"]["choices"] == [2]
    for r in records(obj({"x": mixed, "y": email}, required=["x", "y"])):
        assert r == {"x": "a", "y": "a@b.co"}


def test_null_only_where_every_keyword_allows_it() -> None:
    kind = {"type": ["string", "null"], "enum": ["StorageClass"]}
    assert fields(obj({"kind": kind}))["kind"]["nullable"] is False
    listed = {"type": ["string", "null"], "enum": ["StorageClass", None]}
    assert fields(obj({"kind": listed}))["kind"]["nullable"] is True
    # OpenAPI's nullable is not JSON Schema: jsonschema rejects null there, so do we
    assert fields(obj({"s": {"type": "string", "nullable": True}}))["s"]["nullable"] is False
    assert fields(obj({"s": {"type": ["string", "null"]}}))["s"]["nullable"] is True
    one = {"oneOf": [{"type": "integer"}, {"type": "null"}]}
    assert fields(obj({"n": one}))["n"]["nullable"] is True
    # both alternatives accept null, so oneOf rejects it
    both = {"oneOf": [{"type": ["integer", "null"]}, {"type": "null"}]}
    assert fields(obj({"n": both}))["n"]["nullable"] is False
    # kind is not required: written as its one value, or left out
    assert all(r in ({"kind": "StorageClass"}, {}) for r in records(obj({"kind": kind})))


# --------------------------------------------------------------------------- keywords


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        (obj({"a": {"type": "integer"}}, minProperties=2), "minProperties 2"),
        (obj({"a": {}, "b": {}}, required=["a", "b"], maxProperties=1), "maxProperties 1"),
        (obj({"abc": {}}, propertyNames={"maxLength": 2}, required=["abc"]), "propertyNames"),
        (obj({}, required=["k"], unevaluatedProperties=False), "unsatisfiable"),
        (obj({"t": {"type": "array", "contains": {"type": "integer"}}}), "contains"),
        (
            obj({"t": {"type": "array", "uniqueItems": True, "items": {"format": "email"}}}),
            "uniqueItems over items holding a grammar value",
        ),
        (  # items: any JSON value, which the writer does not lay out (a grammar value)
            obj({"t": {"type": "array", "uniqueItems": True, "minItems": 2}}),
            "uniqueItems over items holding a grammar value",
        ),
        (obj({"n": {"$dynamicRef": "#meta"}}), "dynamicRef"),
        (obj({"n": {"type": "integer", "anyOf": [{"type": "string"}]}}), "do not fit type"),
        (obj({"n": {"$ref": "other.json#/A"}}), "only local"),
        (obj({"n": {"$ref": "#/$defs/Nope"}}), "does not resolve"),
        (
            obj({"n": {"$id": "http://x/n", "properties": {"m": {"$ref": "#/$defs/A"}}}}),
            "embedded",
        ),
        (obj({"s": {"type": "string", "maxItems": "many"}}), "not a valid Draft202012"),
        (
            obj(
                {"n": {"type": "integer", "minimum": 0}},
                **{"$schema": "http://json-schema.org/draft-03/schema#"},
            ),
            "draft 3",
        ),
        (
            {"type": "object", "properties": {}, "required": ["a"], "additionalProperties": False},
            "unsatisfiable",
        ),
        ({"$defs": {"A": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"}, "cycle of \\$refs"),
        (obj({"n": {"type": "integer", "minimum": 5, "maximum": 4}}, required=["n"]), "in bounds"),
    ],
)
def test_refused(schema: dict[str, object], match: str) -> None:
    with pytest.raises(IRError, match=match):
        spec_from_ir(ir_from_json_schema(schema))


@pytest.mark.parametrize(
    "schema",
    [
        obj({"a": {"type": "integer"}}, minProperties=1, maxProperties=1),
        obj({"ab": {}}, propertyNames={"maxLength": 2}),
        obj({"a": {}, "b": {}}, maxProperties=1),  # optional keys: a grammar value
        obj({"abc": {}, "n": {"type": "integer"}}, propertyNames={"maxLength": 2}),  # never abc
        obj(
            {"a": {}, "b": {}},
            dependencies={"a": ["b"], "z": {"required": ["q"]}},
            **{"$schema": D7},
        ),
        # dependencies is not a keyword of draft 2020-12: jsonschema ignores it
        obj({"a": {}}, dependencies={"a": ["c"]}),
        obj({"ab": {}}, patternProperties={"^x": {"type": "integer"}}),
        obj({"t": {"type": "array", "items": {"type": "integer"}, "additionalItems": False}}),
        obj({"t": {"type": "array", "uniqueItems": True, "maxItems": 1}}),
        obj({"t": {"type": "array"}}),  # items: any value
        obj({"n": {"type": "integer", "minLength": 3, "pattern": "x"}}),  # string keywords
        obj({"s": {"type": "string", "contentEncoding": "base64", "x-foo": 1}}),
        obj(
            {"n": {"$ref": "#/definitions/A", "maximum": 1}},
            definitions={"A": {}},
            **{"$schema": D7},
        ),
        obj({"n": {"title": "anything"}, "f": False, "t": {"type": "null"}}),
        obj({"tree": {"$ref": "#"}}),  # recursion: one level laid out, then a grammar value
        obj({}, required=["ab"], patternProperties={"b$": {}}, additionalProperties=False),
        obj({"n": {"type": ["integer", "null"], "oneOf": [{"minimum": 1}, {"type": "null"}]}}),
        obj({"e": {"type": "string", "allOf": [{"enum": ["a", 1]}]}}, required=["e"]),
    ],
)
def test_accepted_and_valid(schema: dict[str, object]) -> None:
    records(schema)


def test_integer_bounds() -> None:
    d4 = {"type": "integer", "minimum": 0, "exclusiveMinimum": True, "maximum": 9}
    assert fields(obj({"n": d4}, **{"$schema": D4}))["n"] == {
        "type": "leaf",
        "kind": "int",
        "nullable": False,
        "ge": 1,
        "le": 9,
    }
    d7 = {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 9.5}
    n = fields(obj({"n": d7}, **{"$schema": D7}))["n"]
    assert (n["ge"], n["le"]) == (1, 9)
    # draft 4's Boolean exclusiveMinimum is not a number in draft 7
    with pytest.raises(IRError, match="not a valid Draft7"):
        ir_from_json_schema(obj({"n": d4}, **{"$schema": D7}))
    assert "ge" not in fields(obj({"n": {"type": "integer", "minimum": -1e30}}))["n"]


def test_empty_items_make_an_empty_array() -> None:
    schema = obj({"t": {"type": "array", "items": {"enum": ["a"], "type": "integer"}}})
    assert fields(schema)["t"]["max_length"] == 0
    assert all(r in ({"t": []}, {}) for r in records(schema, 3))  # t is not required
    with pytest.raises(IRError, match="minItems 1"):
        ir_from_json_schema(
            obj({"t": {**schema["properties"]["t"], "minItems": 1}}, required=["t"])
        )  # type: ignore[index, dict-item]


def test_check_json_schema_record() -> None:
    validator = json_schema_validator(obj({"a": {"type": "integer"}}, required=["a"]))
    check_json_schema_record(validator, '{"a": 1}')
    with pytest.raises(RecordInvalidError, match=r"required"):
        check_json_schema_record(validator, "{}")
    with pytest.raises(RecordInvalidError, match=r"\$\['a'\].*integer"):
        check_json_schema_record(validator, '{"a": "x"}')
    with pytest.raises(RecordInvalidError, match="not JSON"):
        check_json_schema_record(validator, '{"a": ')


# --------------------------------------------------------------------------- optional keys


def texts_of(schema: dict[str, object]) -> list[str]:
    """Every record the writer can write for ``schema``, each validated with `jsonschema`."""
    from tests.helpers import enumerate_texts

    texts = enumerate_texts(Writer(spec_from_ir(ir_from_json_schema(schema))))
    validator = json_schema_validator(schema)
    for t in texts:
        check_json_schema_record(validator, t)
    return texts


def test_a_property_not_required_is_written_or_left_out() -> None:
    schema = obj(
        {"a": {"type": "integer", "minimum": 0, "maximum": 2}, "b": {"type": "boolean"}},
        required=["b"],
    )
    layout = ir_from_json_schema(schema)["layout"]
    assert [f.get("optional", False) for f in layout["fields"]] == [True, False]  # type: ignore[index]
    texts = texts_of(schema)
    want = [
        ({"b": b} if a is None else {"a": a, "b": b})
        for a in (None, 0, 1, 2)
        for b in (False, True)
    ]
    assert sorted(texts) == sorted(json.dumps(d) for d in want)
    assert all('"b"' in t for t in texts)


def test_keys_a_dependency_or_min_properties_counts_on_are_the_grammars() -> None:
    # a dependency or a count over keys the model may leave out holds for some key sets
    # only: the object is a grammar value, which writes exactly the key sets that hold
    # (writing such keys always would narrow the language: {"c": true} is valid here)
    deps = obj(
        {"a": {"type": "boolean"}, "b": {"type": "boolean"}, "c": {"type": "boolean"}},
        dependentRequired={"a": ["b"]},
    )
    counted = obj({"a": {"type": "boolean"}, "b": {"type": "boolean"}}, minProperties=1)
    for schema in (deps, counted):
        layout = ir_from_json_schema(schema)["layout"]
        assert isinstance(layout, dict) and layout["type"] == "grammar"
        records(schema, 3)  # each validates with jsonschema


def test_an_optional_unique_list_is_written_or_left_out() -> None:
    """A ``uniqueItems`` factor is about its list only (its IR ``scope``): leaving out the
    list's key, or an optional key above it, leaves no items to repeat, so the writer
    offers both; the factor still holds wherever the list is written."""
    unique = {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True}
    texts = texts_of(obj({"xs": unique}))
    assert set(texts) == {
        "{}",
        '{"xs": []}',
        '{"xs": [false]}',
        '{"xs": [true]}',
        '{"xs": [false, true]}',
        '{"xs": [true, false]}',
    }
    nested = obj({"o": obj({"xs": unique}), "b": {"type": "boolean"}})
    texts = texts_of(nested)
    assert "{}" in texts and '{"o": {}}' in texts and '{"b": true}' in texts
    assert '{"o": {"xs": [true, false]}, "b": false}' in texts
    assert not any("[true, true]" in t or "[false, false]" in t for t in texts)
    spec = spec_from_ir(ir_from_json_schema(nested))
    assert not [r for r in spec.restrictions() if r.rule == "optional key written"]


def test_an_optional_property_unique_items_compare_is_written_and_named() -> None:
    """Items of a unique list differ by some property: one left out of both items would
    make them equal where the factor sees them differ, so such a key is always written
    (the named restriction), while the list's own key may still be left out."""
    item = obj({"a": {"type": "boolean"}})
    schema = obj({"ys": {"type": "array", "items": item, "uniqueItems": True}})
    texts = texts_of(schema)
    assert "{}" in texts and '{"ys": [{"a": true}, {"a": false}]}' in texts
    assert not any("{}]" in t or "[{}" in t for t in texts)
    found = {(r.rule, r.path) for r in spec_from_ir(ir_from_json_schema(schema)).restrictions()}
    assert ("optional key written", "ys[].a") in found
    assert ("optional key written", "ys") not in found


def test_a_scope_a_variable_lies_outside_is_refused() -> None:
    ir = ir_from_json_schema(
        obj(
            {
                "xs": {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True},
                "b": {"type": "boolean"},
            }
        )
    )
    factors = ir["factors"]
    assert isinstance(factors, list) and factors[0]["scope"] == ["xs"]
    factors[0]["scope"] = ["b"]
    with pytest.raises(IRError, match="not at or under its scope b"):
        spec_from_ir(ir)


def test_an_optional_property_only_null_satisfies_is_written_as_null_or_left_out() -> None:
    """``{"type": "null"}`` under a key not required: ``null`` is written where `jsonschema`
    accepts it (MaskBench's Github_hard---o21202 writes ``"base_path": null``); the key was
    dropped from the layout, so only its absence could be written."""
    schema = obj({"a": {"type": "null"}, "b": {"type": "integer", "minimum": 0, "maximum": 9}})
    assert fields(schema)["a"] == {"type": "grammar", "schema": {"type": "null"}}
    engine = FactorSpecEngine(tiny_tokenizer())
    assert engine.compile(schema).status == "accepted"
    for value in ({"a": None, "b": 1}, {"b": 1}, {"a": None}, {}):
        assert judge(engine, candidate_texts(value, schema)).verdict == "writable", value
    for value in ({"a": 0}, {"a": "null"}, {"a": None, "b": None}):
        assert judge(engine, candidate_texts(value, schema)).verdict == "unwritable", value
    assert list(fields(obj({"c": False, "b": {"type": "integer"}}))) == ["b"]  # no value at all
