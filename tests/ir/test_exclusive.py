"""`exclusive`: a proof only where no instance satisfies two branches, under jsonschema."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.protocols import Validator

from factorspec_sdk.ir.exclusive import Proof, exclusive

D4 = jsonschema.Draft4Validator
D7 = jsonschema.Draft7Validator
D2020 = jsonschema.Draft202012Validator
INT = {"type": "integer", "minimum": 0, "maximum": 9}


def proof(
    branches: list[Any],
    given_: object = True,
    root: dict[str, Any] | None = None,
    dialect: type[Validator] = D2020,
) -> Proof | None:
    doc = root or {}

    def resolve(ref: str) -> object:
        node: Any = doc
        for part in ref.removeprefix("#/").split("/") if ref != "#" else []:
            node = node[part]
        return node

    return exclusive(branches, given=given_, root=doc, dialect=dialect, resolve=resolve)


OBJ = {"type": "object"}
STR = {"type": "string"}

PROVEN: dict[str, tuple[list[Any], object, str]] = {
    # name: (branches, siblings, the rule)
    "types": ([{"type": "string"}, {"type": ["integer", "null"]}], True, "types"),
    "types of enum values": ([{"enum": ["a", 1]}, {"type": "boolean"}], True, "types"),
    "types through $ref": ([{"$ref": "#/$defs/S"}, {"type": "null"}], True, "types"),
    "types within the siblings": (
        [{"maxLength": 2}, {"type": "null"}],
        {"type": "string"},
        "types",
    ),
    "not type": ([{"not": {"type": "number"}}, {"type": "integer"}], True, "types"),
    "consts": ([{"const": "a"}, {"const": "b"}], True, "values"),
    "true is not 1": ([{"enum": [True]}, {"const": 1}], True, "values"),
    "enum and pattern": (
        [{"enum": ["red", "blue"]}, {"pattern": "^#[0-9a-f]{6}$"}],
        {"type": "string"},
        "values",
    ),
    "enum and bounds": ([{"enum": [1, 2]}, {"type": "integer", "minimum": 3}], True, "values"),
    "property values": (
        [
            {"type": "object", "required": ["k"], "properties": {"k": {"const": "a"}}},
            {"type": "object", "properties": {"k": {"enum": ["b", "c"]}}},
        ],
        True,
        "property values",
    ),
    "property values, required by the siblings": (
        [{"properties": {"k": {"const": "a"}}}, {"properties": {"k": {"type": "integer"}}}],
        {"type": "object", "required": ["k"]},
        "property values",
    ),
    "property values through allOf and $ref": (
        [
            {"allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"kind": {"enum": ["x"]}}}]},
            {"allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"kind": {"enum": ["y"]}}}]},
        ],
        True,
        "property values",
    ),
    "additionalProperties false": (
        [
            {"type": "object", "required": ["a"]},
            {"type": "object", "properties": {"b": {}}, "additionalProperties": False},
        ],
        True,
        "forbidden key",
    ),
    "properties false": (
        [{"required": ["a"]}, {"properties": {"a": False}}],
        OBJ,
        "forbidden key",
    ),
    "not required": ([{"required": ["a"]}, {"not": {"required": ["a"]}}], True, "forbidden key"),
    "maxProperties": (
        [{"required": ["a", "b"]}, {"type": "object", "maxProperties": 1}],
        OBJ,
        "property count",
    ),
    "string length": ([{"maxLength": 0}, {"minLength": 1}], {"type": "string"}, "string length"),
    "integer range": (
        [{"type": "integer", "maximum": 3}, {"type": "integer", "minimum": 4}],
        True,
        "number range",
    ),
    "no integer between": (
        [{"type": "number", "maximum": 3.5}, {"type": "integer", "minimum": 3.2}],
        True,
        "number range",
    ),
    "exclusive bound": (
        [{"type": "number", "exclusiveMaximum": 0}, {"type": "number", "minimum": 0}],
        True,
        "number range",
    ),
    "array length": (
        [{"type": "array", "maxItems": 1}, {"type": "array", "minItems": 2}],
        True,
        "array length",
    ),
    "array items": (
        [
            {"type": "array", "items": {"type": "string"}, "minItems": 1},
            {"type": "array", "items": {"type": "integer"}},
        ],
        True,
        "array items",
    ),
    "if then else": (
        [
            {"if": {"required": ["a"]}, "then": {"required": ["b"]}, "else": False},
            {"type": "object", "properties": {"b": False}},
        ],
        OBJ,
        "forbidden key",
    ),
}
DEFS = {"$defs": {"S": {"type": "string"}, "Base": {"type": "object", "required": ["kind"]}}}


@pytest.mark.parametrize("name", list(PROVEN))
def test_proven(name: str) -> None:
    branches, siblings, rule = PROVEN[name]
    found = proof(branches, siblings, DEFS)
    assert found is not None and rule in found.rules, found


OVERLAPPING: dict[str, tuple[list[Any], object, type[Validator]]] = {
    # every case has an instance that satisfies two branches
    "integer within number": ([{"type": "integer"}, {"type": "number"}], True, D2020),
    "properties accept strings": (
        [
            {"required": ["k"], "properties": {"k": {"const": "a"}}},
            {"properties": {"k": {"const": "b"}}},
        ],
        True,
        D2020,
    ),
    "an unrequired discriminator": (
        [{"properties": {"k": {"const": "a"}}}, {"properties": {"k": {"const": "b"}}}],
        OBJ,
        D2020,
    ),
    "required keys both present": ([{"required": ["a"]}, {"required": ["b"]}], OBJ, D2020),
    "a pattern key": (
        [
            {"type": "object", "required": ["ab"]},
            {"type": "object", "additionalProperties": False, "patternProperties": {"^a": {}}},
        ],
        True,
        D2020,
    ),
    "an enum value of the other": ([{"enum": ["linux"]}, {"type": "string"}], True, D2020),
    "1.0 is 1": ([{"enum": [1.0]}, {"const": 1}], True, D2020),
    "lengths meet": ([{"maxLength": 3}, {"minLength": 3}], {"type": "string"}, D2020),
    "bounds meet": ([{"maximum": 3}, {"minimum": 3}], {"type": "number"}, D2020),
    "the empty array": (
        [
            {"type": "array", "items": {"type": "string"}},
            {"type": "array", "items": {"type": "integer"}},
        ],
        True,
        D2020,
    ),
    "not integer holds 1.5": ([{"not": {"type": "integer"}}, {"type": "number"}], True, D2020),
    "draft 4: 1.0 is no integer": ([{"not": {"type": "integer"}}, {"type": "integer"}], True, D4),
    "draft 4 has no const": ([{"const": "a"}, {"const": "b"}], True, D4),
    "drafts 4 to 7 ignore $ref siblings": (
        [{"$ref": "#/$defs/S", "type": "null"}, {"type": "string"}],
        True,
        D7,
    ),
    "a recursive $ref says nothing": ([{"$ref": "#/$defs/R"}, {"type": "string"}], True, D2020),
    "true": ([True, {"type": "string"}], True, D2020),
}
OVERLAP_DEFS = {"$defs": {"S": {"type": "string"}, "R": {"anyOf": [{"$ref": "#/$defs/R"}]}}}


@pytest.mark.parametrize("name", list(OVERLAPPING))
def test_overlapping(name: str) -> None:
    branches, siblings, dialect = OVERLAPPING[name]
    assert proof(branches, siblings, OVERLAP_DEFS, dialect) is None


def test_one_branch_and_an_empty_one() -> None:
    assert proof([{"type": "string"}]) == Proof(frozenset())
    found = proof([False, {"type": "string"}])
    assert found is not None and found.rules == {"empty branch"}


# --------------------------------------------------------------------------- random schemas

KEYS = ("a", "b")
SCALARS = [None, True, False, 0, 1, 1.0, 1.5, -2, 3, "", "a", "b", "ab", "#0f"]
TYPES = ["null", "boolean", "object", "array", "number", "integer", "string"]
scalars = st.sampled_from(SCALARS)
small = st.integers(0, 2)
numbers = st.sampled_from([-1, 0, 1, 1.5, 3])
types = st.sampled_from(TYPES) | st.lists(
    st.sampled_from(TYPES), min_size=1, max_size=3, unique=True
)
FLAT: dict[str, st.SearchStrategy[Any]] = {
    "type": types,
    "enum": st.lists(scalars, min_size=1, max_size=3, unique_by=repr),
    "minLength": small,
    "maxLength": small,
    "pattern": st.sampled_from(["^a", "b$", "^#"]),
    "minimum": numbers,
    "maximum": numbers,
    "required": st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True),
    "maxProperties": small,
    "minItems": small,
    "maxItems": small,
}
NEWER = {"const": scalars, "exclusiveMinimum": numbers, "exclusiveMaximum": numbers}
DRAFT4 = {"exclusiveMinimum": st.booleans(), "exclusiveMaximum": st.booleans()}


def _pick(keywords: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Schemas with up to three of ``keywords`` (more would rarely leave any instance)."""
    names = st.tuples(
        st.lists(st.sampled_from(sorted(keywords)), max_size=3, unique=True), st.booleans()
    ).map(lambda x: [*x[0], "type"] if x[1] and "type" in keywords else x[0])
    return names.flatmap(lambda ks: st.fixed_dictionaries({k: keywords[k] for k in ks}))


def _dialect_schemas(
    dialect: type[Validator],
) -> tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]:
    """Schemas of ``dialect`` (``$ref`` to ``#/$defs/A`` or ``B``), and ``$ref``-free ones."""
    flat = {**FLAT, **(DRAFT4 if dialect is D4 else NEWER)}
    rarely_bool = st.integers(0, 9).flatmap(lambda n: st.booleans() if n == 0 else _pick(flat))
    leaves = _pick(flat) if dialect is D4 else rarely_bool

    def nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        lists = st.lists(inner, min_size=1, max_size=2)
        keywords = {
            **flat,
            "properties": st.dictionaries(st.sampled_from(KEYS), inner, max_size=2),
            "patternProperties": st.dictionaries(st.sampled_from(["^a", "b"]), inner, max_size=1),
            "additionalProperties": inner,
            "items": inner,
            "allOf": lists,
            "anyOf": lists,
            "oneOf": lists,
            "not": inner,
        }
        if dialect is not D4:
            keywords |= {"if": inner, "then": inner, "else": inner}
        return _pick(keywords)

    refs = st.sampled_from([{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}])
    return (
        st.recursive(leaves | refs, nested, max_leaves=5),
        st.recursive(leaves, nested, max_leaves=5),  # no $ref: no cycle among the defs
    )


instances = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner),
    max_leaves=6,
)


def _values(s: object) -> list[object]:
    """The enum/const values in a schema: instances more likely to pass it."""
    if isinstance(s, dict):
        own = [s["const"]] if "const" in s else list(s.get("enum", []))
        return own + [v for k, x in s.items() if k not in ("const", "enum") for v in _values(x)]
    if isinstance(s, list):
        return [v for x in s for v in _values(x)]
    return []


@st.composite
def cases(draw: st.DrawFn) -> tuple[type[Validator], list[Any], object, dict[str, Any]]:
    dialect = draw(st.sampled_from([D4, D7, D2020]))
    schemas, definitions = _dialect_schemas(dialect)
    branches = draw(st.lists(schemas, min_size=2, max_size=3))
    siblings = draw(schemas)
    root = {"$defs": {"A": draw(definitions), "B": draw(definitions)}}
    return dialect, branches, siblings, root


@st.composite
def object_cases(draw: st.DrawFn) -> tuple[type[Validator], list[Any], object, dict[str, Any]]:
    """Branches about keys: required ones, their values, closed objects, key counts."""
    dialect = draw(st.sampled_from([D7, D2020]))
    values = _pick({**FLAT, **NEWER})
    branch = st.fixed_dictionaries(
        {"properties": st.dictionaries(st.sampled_from(KEYS), values, max_size=2)},
        optional={
            "type": st.just("object"),
            "required": FLAT["required"],
            "additionalProperties": st.booleans() | values,
            "patternProperties": st.dictionaries(st.sampled_from(["^a", "b"]), values, max_size=1),
            "maxProperties": small,
            "not": st.fixed_dictionaries({"required": FLAT["required"]}),
        },
    )
    branches = draw(st.lists(branch, min_size=2, max_size=3))
    siblings = draw(st.sampled_from([True, {"type": "object"}, {"required": ["a"]}]))
    return dialect, branches, siblings, {}


Case = tuple[type[Validator], list[Any], object, dict[str, Any]]


def _check(case: Case, found: list[object]) -> None:
    dialect, branches, siblings, root = case
    try:  # as the converter, only schemas valid in their dialect
        dialect.check_schema({"allOf": [*branches, siblings], **root})
    except jsonschema.SchemaError:
        return
    if proof(branches, siblings, root, dialect) is None:
        return
    validator = dialect(root)
    values = _values([branches, siblings, root])
    pool = [*found, *values, *({k: v for k in keys} for v in values for keys in ("a", "b", KEYS))]
    pool += [[v] for v in values]
    for x in pool:
        if not validator.evolve(schema=siblings).is_valid(x):
            continue
        passing = [b for b in branches if validator.evolve(schema=b).is_valid(x)]
        assert len(passing) <= 1, (x, passing)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), found=st.lists(instances, max_size=25))
def test_no_instance_passes_two_exclusive_branches(case: Case, found: list[object]) -> None:
    _check(case, found)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=object_cases(), found=st.lists(st.dictionaries(st.sampled_from(KEYS), scalars)))
def test_no_object_passes_two_exclusive_branches(case: Case, found: list[object]) -> None:
    _check(case, found)
