"""`ir_from_json_schema`: a sub-schema the writer does not lay out is one grammar value.

Each keyword family gets a schema whose records (a random model over the tiny vocabulary,
several seeds; SmolLM2's tokenizer where it is installed) validate with `jsonschema`, while
the fields the writer lays out stay native. The grammar schema is self-contained (copied
``$defs``, the root's recursion as ``$defs/Root``) and read in draft 2020-12 as the document's
dialect read it.
"""

from __future__ import annotations

import datetime
import itertools
import re
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from factorspec_sdk.bench.schemas import decode_records
from factorspec_sdk.ir import IRError, ir_from_json_schema, json_schema_validator, spec_from_ir
from factorspec_sdk.ir.standalone import STRICT_FORMATS
from tests.ir.test_json_schema import D4, D7, fields, obj, open_obj, records
from tests.ir.test_json_schema_corpus import vocabulary

D6 = "http://json-schema.org/draft-06/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"

INT = {"type": "integer", "minimum": 0, "maximum": 9}

FAMILIES: dict[str, tuple[dict[str, Any], str]] = {
    # name: (schema, the key that becomes a grammar value; "n" stays a native integer)
    "number": (obj({"x": {"type": "number", "minimum": -2, "maximum": 5}, "n": INT}), "x"),
    "union": (obj({"x": {"type": ["integer", "boolean"]}, "n": INT}), "x"),
    "pattern": (obj({"x": {"type": "string", "pattern": "^a[bc]{2,4}$"}, "n": INT}), "x"),
    "format": (obj({"x": {"type": "string", "format": "date"}, "n": INT}), "x"),
    "uuid": (obj({"x": {"type": "string", "format": "uuid"}, "n": INT}), "x"),
    "ipv4": (obj({"x": {"type": "string", "format": "ipv4"}, "n": INT}), "x"),
    "multipleOf": (obj({"x": {"type": "integer", "multipleOf": 7, "maximum": 99}, "n": INT}), "x"),
    "anyOf": (obj({"x": {"anyOf": [{"type": "integer"}, {"enum": ["a", "b"]}]}, "n": INT}), "x"),
    "oneOf": (obj({"x": {"oneOf": [{"type": "boolean"}, {"type": "string"}]}, "n": INT}), "x"),
    "allOf": (obj({"x": {"allOf": [{"type": "integer"}, {"maximum": 3}]}, "n": INT}), "x"),
    "anyOf beside maxLength": (
        obj({"x": {"anyOf": [{"type": "string"}, {"type": "integer"}], "maxLength": 2}, "n": INT}),
        "x",
    ),
    "prefixItems": (
        obj(
            {
                "x": {"type": "array", "prefixItems": [INT, {"enum": ["a"]}], "items": False},
                "n": INT,
            }
        ),
        "x",
    ),
    "items list": (
        obj(
            {"x": {"type": "array", "items": [INT, {"type": "boolean"}], "additionalItems": False}},
            **{"$schema": D7},
        ),
        "x",
    ),
    "array of grammar items": (
        obj({"x": {"type": "array", "items": {"type": "number"}, "maxItems": 3}, "n": INT}),
        "x",
    ),
    "minProperties": (
        obj({"x": open_obj({"a": INT}, minProperties=2, required=["a"]), "n": INT}),
        "x",
    ),
    "dependencies": (
        obj({"x": open_obj({"a": INT}, dependencies={"a": ["b"]}), "n": INT}, **{"$schema": D7}),
        "x",
    ),
    "dependentRequired": (
        obj({"x": open_obj({"a": INT}, dependentRequired={"a": ["b"]}), "n": INT}),
        "x",
    ),
    "dependentSchemas": (
        obj({"x": obj({"a": INT}, dependentSchemas={"a": {"required": ["c"]}}), "n": INT}),
        "x",
    ),
    "patternProperties": (
        obj(
            {
                "x": open_obj(
                    {"ab": {"type": "integer"}}, patternProperties={"^a": {"maximum": 3}}
                ),
                "n": INT,
            }
        ),
        "x",
    ),
    "enum of objects": (obj({"x": {"enum": [{"k": 1}, [2, 3]]}, "n": INT}), "x"),
    "not": (obj({"x": {"not": {"type": ["integer", "string", "object"]}}, "n": INT}), "x"),
    "not required": (obj({"x": obj({"a": INT}, **{"not": {"required": ["a"]}}), "n": INT}), "x"),
    "if then else": (
        obj(
            {
                "x": obj(
                    {"a": INT, "b": {"type": "boolean"}},
                    **{
                        "if": {"required": ["a"]},
                        "then": {"required": ["b"]},
                        "else": {"properties": {"b": {"const": True}}},
                    },
                ),
                "n": INT,
            }
        ),
        "x",
    ),
    "ref beside keywords": (
        obj({"x": {"$ref": "#/$defs/I", "maximum": 4}, "n": INT}, **{"$defs": {"I": INT}}),
        "x",
    ),
}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_grammar_values_validate(name: str) -> None:
    schema, key = FAMILIES[name]
    schema = {**schema, "required": [key, *(["n"] if "n" in schema["properties"] else [])]}
    f = fields(schema)
    assert f[key]["type"] == "grammar"
    if "n" in f:
        assert f["n"] == {"type": "leaf", "kind": "int", "nullable": False, "ge": 0, "le": 9}
    out = records(schema, 6)
    assert all(isinstance(r, dict) and key in r for r in out)


def test_records_validate_with_the_real_vocabulary() -> None:
    tok = vocabulary()
    if tok.vocab_size < 1000:
        pytest.skip("SmolLM2's tokenizer is not installed")
    for name in ("number", "pattern", "items list"):
        schema, key = FAMILIES[name]
        schema = {**schema, "required": [key]}
        spec = spec_from_ir(ir_from_json_schema(schema))
        checks = decode_records(spec, schema, tok, 2, model_seed=7)
        assert [c.outcome for c in checks if c.outcome != "max_tokens"], name
        assert all(c.outcome in ("valid", "max_tokens") for c in checks), (name, checks)


def test_defs_are_copied_transitively() -> None:
    schema = {
        "$defs": {
            "Point": obj({"x": {"$ref": "#/$defs/Num"}}),
            "Num": {"type": "number", "maximum": 1},
            "Unused": {"type": "string"},
        },
        "definitions": {"Num": {"type": "integer"}},
        **obj(
            {"p": {"$ref": "#/$defs/Point"}, "q": {"anyOf": [{"$ref": "#/definitions/Num"}, INT]}},
            required=["p", "q"],
        ),
    }
    f = fields(schema)
    assert f["p"]["type"] == "object"  # native: only x is a grammar value
    (x,) = f["p"]["fields"]
    assert x["node"] == {"type": "grammar", "schema": {"type": "number", "maximum": 1}}
    assert f["q"] == {
        "type": "grammar",
        "schema": {
            "anyOf": [{"$ref": "#/$defs/Num"}, INT],
            "$defs": {"Num": {"type": "integer"}},
        },
    }
    records(schema, 4)


def test_recursion_is_a_grammar_value() -> None:
    node = {
        "type": "object",
        "properties": {"v": INT, "kids": {"type": "array", "items": {"$ref": "#/$defs/N"}}},
        "required": ["v", "kids"],
        "additionalProperties": False,
    }
    schema = {"$defs": {"N": node}, **obj({"root": {"$ref": "#/$defs/N"}}, required=["root"])}
    root = fields(schema)["root"]
    assert root["type"] == "object"  # the first level is laid out; its kids are a grammar
    kids = {f["key"]: f["node"] for f in root["fields"]}["kids"]
    assert kids["type"] == "grammar"
    assert kids["schema"]["items"] == {"$ref": "#/$defs/N"}
    assert kids["schema"]["$defs"]["N"]["properties"]["kids"]["items"] == {"$ref": "#/$defs/N"}
    records(schema, 4)
    # a $ref to the root: the root becomes $defs/Root of the grammar value
    tree = obj({"v": INT, "sub": {"$ref": "#"}}, required=["v"], additionalProperties=False)
    sub = {f["key"]: f["node"] for f in fields(tree)["sub"]["fields"]}["sub"]
    assert sub["schema"]["$ref"] == "#/$defs/Root"
    assert sub["schema"]["$defs"]["Root"]["properties"]["sub"] == {"$ref": "#/$defs/Root"}
    records(tree, 4)
    # a $ref to a pointer outside $defs gets an entry named after its last part
    other = obj({"a": {"type": "number"}, "b": {"anyOf": [{"$ref": "#/properties/a"}, INT]}})
    b = fields(other)["b"]["schema"]
    assert b["anyOf"][0] == {"$ref": "#/$defs/a"} and b["$defs"]["a"] == {"type": "number"}


def test_dialects_are_translated_to_2020_12() -> None:
    d4 = {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1}
    assert fields(obj({"x": d4}, **{"$schema": D4}))["x"]["schema"] == {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1,
    }
    assert all(0 < r["x"] <= 1 for r in records(obj({"x": d4}, required=["x"], **{"$schema": D4})))
    not_exclusive = {**d4, "exclusiveMinimum": False}
    assert fields(obj({"x": not_exclusive}, **{"$schema": D4}))["x"]["schema"]["minimum"] == 0
    # before 2020-12, items as a list is a tuple and additionalItems the rest
    for dialect in (D6, D7, D2019):
        t = {"type": "array", "items": [INT], "additionalItems": {"type": "boolean"}}
        assert fields(obj({"t": t}, **{"$schema": dialect}))["t"]["schema"] == {
            "type": "array",
            "prefixItems": [INT],
            "items": {"type": "boolean"},
        }
    # drafts 4 to 7 ignore $ref's siblings; keywords the dialect does not define are dropped
    legacy = {"anyOf": [{"$ref": "#/definitions/A", "maximum": 0}, {"type": "boolean"}]}
    s = fields(obj({"x": legacy}, definitions={"A": INT}, **{"$schema": D7}))["x"]["schema"]
    assert s["anyOf"][0] == {"$ref": "#/$defs/A"}
    only7 = {"type": "number", "dependentRequired": {}, "prefixItems": [], "title": "t"}
    assert fields(obj({"x": only7}, **{"$schema": D7}))["x"]["schema"] == {"type": "number"}
    # draft 4 has no const: jsonschema ignores it there, so does the grammar
    d4const = {"anyOf": [{"type": "integer", "const": 3}, {"type": "boolean"}]}
    assert "const" not in str(fields(obj({"x": d4const}, **{"$schema": D4}))["x"]["schema"])


def test_patterns_are_searched_as_jsonschema_searches_them() -> None:
    s = {"type": "string", "pattern": "[0-9]{3}-x|y"}
    assert fields(obj({"s": s}))["s"]["schema"]["pattern"] == "[0-9]{3}-x|y"
    flagged = {"type": "string", "pattern": "(?i)ab"}
    assert fields(obj({"s": flagged}))["s"]["schema"]["pattern"] == "(?i)ab"
    for r in records(obj({"s": s, "t": flagged}, required=["s", "t"]), 4):
        assert re.search("[0-9]{3}-x|y", r["s"]) and re.search("(?i)ab", r["t"])
    # anchors only at the pattern's ends (the closing walk reads them there): a group around
    # the whole anchored pattern moves them out; anchors inside are refused, saying so
    grouped = {"type": "string", "pattern": "(^[0-9]+\\.[0-9]+$)"}
    assert fields(obj({"s": grouped}))["s"]["schema"]["pattern"] == "^([0-9]+\\.[0-9]+)$"
    with pytest.raises(IRError, match=r"\^ or \$ inside it.*\^\(\?:a\|b\)\$"):
        ir_from_json_schema(obj({"s": {"type": "string", "pattern": "^a$|^b$"}}))
    # a ] first in a class is a literal, as Python's re reads it: ( and ) there are not groups
    literal = {"type": "string", "pattern": "(^[]a)(]+$)"}
    assert fields(obj({"s": literal}))["s"]["schema"]["pattern"] == "^([]a)(]+)$"
    assert fields(obj({"s": {"type": "string", "pattern": "[$^]x"}}))["s"]["type"] == "grammar"


def test_null_alone_and_pattern_properties() -> None:
    schema = obj({"z": {"type": "null"}, "o": {"type": "null"}}, required=["z"])
    null = {"type": "grammar", "schema": {"type": "null"}}
    assert fields(schema) == {"z": null, "o": null}  # "o" is optional: null or left out
    assert all(r in ({"z": None}, {"z": None, "o": None}) for r in records(schema, 2))
    # patternProperties: keys the object does not declare, so the object is one grammar
    # value; a key the pattern's schema and its own schema both constrain; false: never
    pp = obj({"ab": INT, "ac": False, "b": INT}, patternProperties={"^a": {"maximum": 5}})
    assert ir_from_json_schema(pp)["layout"]["type"] == "grammar"  # type: ignore[index]
    for r in records({**pp, "required": ["ab"]}, 3):
        assert isinstance(r, dict) and 0 <= r["ab"] <= 5 and "ac" not in r
    # a required key not under properties takes the patterns' schemas, not additionalProperties
    undeclared = obj({}, required=["ab"], patternProperties={"^a": INT}, additionalProperties=False)
    assert all(isinstance(r, dict) and 0 <= r["ab"] <= 9 for r in records(undeclared, 3))


def test_dates_are_the_ones_jsonschema_accepts() -> None:
    s = fields(obj({"d": {"type": "string", "format": "date"}}))["d"]["schema"]
    assert s == {"type": "string", "allOf": [{"pattern": STRICT_FORMATS["date"]}]}
    pattern = re.compile(STRICT_FORMATS["date"])
    for y in (1, 4, 100, 400, 1900, 2000, 2023, 2024, 3225, 9999):
        for m, d in ((2, 28), (2, 29), (2, 30), (4, 30), (4, 31), (12, 31), (13, 1), (1, 0)):
            text = f"{y:04d}-{m:02d}-{d:02d}"
            try:
                ok = bool(datetime.date.fromisoformat(text))
            except ValueError:
                ok = False
            assert bool(pattern.match(text)) == ok, text
    assert not pattern.match("0000-01-01")


def test_formats_nobody_checks_are_irrelevant() -> None:
    s = {"type": "string", "format": "x-made-up", "maxLength": 3}
    assert fields(obj({"s": s}))["s"]["type"] == "leaf"
    anyof = {"anyOf": [s, {"type": "integer"}]}
    assert fields(obj({"s": anyof}))["s"]["schema"]["anyOf"][0] == {
        "type": "string",
        "maxLength": 3,
    }


def test_not_and_if_are_negated() -> None:
    s = fields(obj({"x": {"not": {"type": "integer"}}}))["x"]["schema"]
    assert s == {"allOf": [{"type": ["null", "boolean", "object", "array", "string"]}]}
    s = fields(obj({"x": {"not": {"allOf": [{"required": ["a"]}, {"type": "array"}]}}}))["x"]
    assert s["schema"]["allOf"] == [
        {
            "anyOf": [
                {"anyOf": [{"properties": {"a": False}}]},
                {"type": ["null", "boolean", "object", "number", "string"]},
            ]
        }
    ]
    # enum cannot be negated here: left out of the anyOf, so fewer values, all valid
    s = fields(obj({"x": {"not": {"enum": [1], "type": "string"}}}))["x"]["schema"]
    assert s["allOf"] == [{"type": ["null", "boolean", "object", "array", "number"]}]
    cond = {"if": {"enum": [1]}, "then": {"type": "integer"}, "else": {"type": "string"}}
    s = fields(obj({"x": cond}))["x"]["schema"]  # no negation of the enum: only then
    assert s["allOf"] == [{"anyOf": [{"allOf": [{"enum": [1]}, {"type": "integer"}]}]}]
    assert all(r["x"] == 1 for r in records(obj({"x": cond}, required=["x"]), 3))


def test_dependencies_become_any_of() -> None:
    s = fields(obj({"x": open_obj({"a": INT}, dependencies={"a": ["b"]})}, **{"$schema": D7}))["x"]
    assert s["schema"]["allOf"] == [
        {"anyOf": [{"properties": {"a": False}}, {"required": ["a", "b"]}]}
    ]
    # records: a present means b present
    schema = obj(
        {"x": open_obj({"a": INT}, dependencies={"a": ["b"]}, required=["a"])}, required=["x"]
    )
    for r in records({**schema, "$schema": D7}, 4):
        assert isinstance(r, dict) and "b" in r["x"]


WIDE = {"type": "array", "maxItems": 200, "items": obj({f"k{i}": INT for i in range(20)})}

ROOTS: dict[str, dict[str, Any]] = {
    # the record is one grammar value: no object the writer lays out
    "array": {"type": "array", "items": INT, "minItems": 1, "maxItems": 4},
    "string with a format": {"type": "string", "format": "date"},
    "integer": INT,
    "anyOf of objects": {"anyOf": [obj({"a": INT}, required=["a"]), obj({"b": {"enum": ["x"]}})]},
    "root with a dependency": open_obj({"a": {}}, dependencies={"a": ["c"]}, **{"$schema": D7}),
    "root with a schema dependency": obj({"a": {}}, dependentSchemas={"a": {"required": ["x"]}}),
    "a property named by the empty string": obj({"": INT}, required=[""]),
    # unrolled, the writer's layout would pass max_unrolled_nodes (200 x 20 x 16 nodes)
    "too large to lay out": obj({"rows": {"type": "array", "maxItems": 16, "items": WIDE}}),
}


@pytest.mark.parametrize("name", list(ROOTS))
def test_a_root_the_writer_does_not_lay_out_is_one_grammar_value(name: str) -> None:
    schema = ROOTS[name]
    ir = ir_from_json_schema(schema)
    assert ir["layout"]["type"] == "grammar"  # type: ignore[index]
    spec = spec_from_ir(ir)
    assert not spec.variables
    got = records(schema)
    assert got
    if name == "array":
        assert all(isinstance(r, list) and 1 <= len(r) <= 4 for r in got)
    # the IR-built model checks the whole record against the schema
    bad = {"array": [], "integer": 10, "string with a format": "2026-02-30"}.get(name)
    if bad is not None:
        with pytest.raises(ValidationError):
            spec.model.model_validate(bad)


def test_a_long_array_field_is_a_grammar_value_beside_native_fields() -> None:
    schema = obj({"xs": {"type": "array", "items": INT, "maxItems": 1000}, "n": INT})
    f = fields(schema)
    assert f["xs"]["type"] == "grammar" and f["n"]["kind"] == "int"
    records(schema)


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        # llguidance does not implement these: the refusal names the place and the keyword
        (obj({"n": {"not": {"enum": [1, 2]}}}), r"#/properties/n: 'not'.*Unimplemented"),
        (obj({"t": {"type": "array", "contains": INT}}), "#/properties/t.*contains"),
        (
            obj({"t": {"type": ["array", "string"], "uniqueItems": True, "minItems": 2}}),
            "#/properties/t: uniqueItems with room for two items in a grammar value",
        ),
        # a format jsonschema asserts and llguidance does not know
        (obj({"s": {"type": "string", "format": "idn-email"}}), "Unknown format: idn-email"),
        # oneOf whose branches llguidance cannot prove exclusive: never coerced to anyOf
        (obj({"n": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}), "coerce_one_of"),
        # readers that disagree
        (obj({"n": {"type": "number", "multipleOf": 0.1}}), "multipleOf 0.1"),
        (obj({"n": {"multipleOf": 2}}), "non-integer numbers"),
        (obj({"s": {"type": "string", "pattern": "^[[:alpha:]]+$"}}), "POSIX"),
        (obj({"s": {"type": "string", "pattern": "^(?=a)a$"}}), "look-around"),
        (
            obj({"x": {"anyOf": [{"$ref": "other.json"}, {}]}}),
            "#/properties/x: jsonschema cannot evaluate",
        ),
        (obj({"x": {"$ref": "other.json", "maximum": 1}}), "#/properties/x: only local"),
        # a root the writer does not lay out is one grammar value, which llguidance refuses
        ({"type": "array", "contains": INT}, r"#: 'contains'.*Unimplemented keys.*contains"),
        (
            {"oneOf": [obj({"a": INT}), obj({"b": INT})]},
            r"#: oneOf of several schemas.*coerce_one_of",
        ),
        (  # counts over 7 optional properties: more anyOf branches than ir.standalone writes
            open_obj({f"k{i}": INT for i in range(7)}, minProperties=9),
            "min/maxProperties only supported.*declared keys alone.*minProperties 9",
        ),
    ],
)
def test_still_refused(schema: dict[str, object], match: str) -> None:
    with pytest.raises(IRError, match=match):
        spec_from_ir(ir_from_json_schema(schema))


def test_grammar_records_hold_the_whole_schema() -> None:
    """The IR-built model checks grammar values with jsonschema (what the server relies on)."""
    schema, _ = FAMILIES["pattern"]
    spec = spec_from_ir(ir_from_json_schema(schema))
    validator = json_schema_validator(schema)
    good = {"x": "abcb", "n": 3}
    assert validator.is_valid(good)
    spec.model.model_validate(good)
    with pytest.raises(ValueError, match="JSON Schema"):
        spec.model.model_validate({"x": "zz", "n": 3})


def test_uri_templates_close_every_brace() -> None:
    # llguidance does not know uri-template; MaskBench's checker (jsonschema with the
    # uri_template package) refuses an unclosed brace, which a free string could write
    s = fields(obj({"u": {"type": "string", "format": "uri-template"}}))["u"]["schema"]
    assert s == {"type": "string", "allOf": [{"pattern": STRICT_FORMATS["uri-template"]}]}
    pattern = re.compile(STRICT_FORMATS["uri-template"])
    valid = [
        "",
        "http://example.com/{id}",
        "{+path}/here",
        "{/a,b*}",
        "{x:3}",
        "{?q,lang}",
        "{&q}",
        "{a.b}",
        "{a%41}",
        "a b",
    ]
    invalid = [
        "http://example.com/resource/{",
        "x}",
        "{}",
        "{a,}",
        "{x:0}",
        "{x:1000}",
        "{=a}",
        "{!a}",
        "{a*:3}",
        "{{a}}",
    ]
    assert [t for t in valid if not pattern.match(t)] == []
    assert [t for t in invalid if pattern.match(t)] == []
    schema = obj({"u": {"type": "string", "format": "uri-template", "maxLength": 20}})
    assert all(pattern.match(r["u"]) for r in records({**schema, "required": ["u"]}, 3))


URI_REFERENCES = {
    "valid": [
        "",
        "a",
        "a:b",
        "x:",
        "Core",
        "./src/Core",
        "../a/b?c#d",
        "/a:b",
        "a/b:c",
        "//host",
        "//user:pw@host:8080/p",
        "http://example.com/a%20b?q=1&r=/?#frag/?",
        "http://[::1]/",
        "http://[1:2:3:4:5:6:7:8]",
        "http://[::ffff:1.2.3.4]",
        "http://[v1.a:b]",
        "mailto:x@y",
        "?q",
        "#f",
        "urn:isbn:0451450523",
    ],
    "invalid": [
        "://",
        ":x",
        "1a:b",
        "a b",
        "%zz",
        "http://[::1",
        "http://[::1.2.3.256]",
        "http://[1:2:3:4:5:6:7:8:9]",
        "http://h/a b",
        "a#b#c",
        "\\",
        'a"b',
        "é",
    ],
}


def test_uri_references_are_the_ones_jsonschema_accepts() -> None:
    # llguidance does not know uri-reference, so the format was dropped and "://" (MaskBench's
    # JsonSchemaStore---bounded-context, an invalid instance) could be written
    checker = jsonschema.FormatChecker()
    assert "uri-reference" in checker.checkers  # rfc3986-validator, a dev dependency
    s = fields(obj({"u": {"type": "string", "format": "uri-reference"}}))["u"]["schema"]
    assert s == {"type": "string", "allOf": [{"pattern": STRICT_FORMATS["uri-reference"]}]}
    pattern = re.compile(STRICT_FORMATS["uri-reference"])
    for verdict, texts in URI_REFERENCES.items():
        for text in texts:
            assert checker.conforms(text, "uri-reference") == (verdict == "valid"), text
            assert bool(pattern.fullmatch(text)) == (verdict == "valid"), text
    # every text over a small alphabet: the pattern and the checker agree on each
    alphabet = ["a", "1", ":", "/", "?", "#", "@", "[", "]", "%", "%2F", " ", "::", "v1."]
    texts = ["".join(p) for n in range(5) for p in itertools.product(alphabet, repeat=n)]
    assert len(texts) == 41371
    disagree = [
        t for t in texts if checker.conforms(t, "uri-reference") != bool(pattern.fullmatch(t))
    ]
    assert disagree == []
    schema = obj({"u": {"type": "string", "format": "uri-reference", "maxLength": 12}})
    for r in records({**schema, "required": ["u"]}, 3):
        assert checker.conforms(r["u"], "uri-reference"), r


def _fanned_out(conditions: int) -> dict[str, object]:
    """``allOf`` of ``if``/``then`` pairs, each ``then`` two branches (as minecraft-recipe)."""
    defs = {f"d{j}": {"properties": {f"p{j}": {"type": "string"}}} for j in range(2)}
    pairs = [
        {
            "if": {"properties": {"type": {"const": f"t{i}"}}},
            "then": {"anyOf": [{"$ref": f"#/definitions/d{j}"} for j in range(2)]},
        }
        for i in range(conditions)
    ]
    return {
        "type": "object",
        "properties": {"type": {"type": "string"}},
        "allOf": pairs,
        "definitions": defs,
    }


def test_a_grammar_past_the_parser_limits_at_its_start_is_refused_when_built() -> None:
    # llguidance compiles the grammar of eight such pairs, and its parser then passes its
    # row limit on the record's first character: refused here, with its message, not as a
    # GenerationError at the first token of a request
    with pytest.raises(IRError, match=r"at its first character '\{'.*max is 2000"):
        ir_from_json_schema(_fanned_out(8))
    # seven pairs stay within the limits: a grammar record, and it validates
    assert ir_from_json_schema(_fanned_out(7))["layout"]["type"] == "grammar"  # type: ignore[index]
    assert len(records(_fanned_out(7), n=2)) == 2  # each validated with jsonschema


def test_the_start_probe_passes_an_ordinary_grammar() -> None:
    from factorspec_sdk.relations.grammar_check import grammar_problem

    assert grammar_problem('{"type":"object","properties":{"a":{"type":"number"}}}') == ""
    assert grammar_problem('{"type":"string","format":"date-time"}') == ""
    refused = '{"type":"object","propertyNames":{"maxLength":3}}'
    assert "Unimplemented keys" in grammar_problem(refused)
