# ruff: noqa: UP045  (Optional: the spelling users write)
"""Token budgets close every kind of value, whatever the model wants to write.

The model here never wants to stop: a scripted engine that prefers one repeating token (a
letter, a digit, a hyphen) above all others and the tokens that close a string, a list, an
object or a number below all others. Greedy decoding under budget masks must still finish
every record within ``max_tokens``, valid, for every kind of value: free strings with and
without ``max_length``, patterns, formats (e-mail, URI, date, time, date-time, UUID),
``Optional``, lists with and without ``max_length``, nested objects and unions as grammar
values, numbers with and without ranges, enums, dicts, values relations read, and values of
unbounded nesting (``Any``, ``dict[str, Any]``, an untyped list, ``JsonValue``, recursive
models), where a model that prefers ``[`` or ``{`` would nest for ever. The budgets are the
least the bound allows (``min_tokens``) and a few tokens more.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import json
import re
import uuid
from functools import cache
from typing import Any, Literal, Optional

import numpy as np
import numpy.typing as npt
import pytest
from pydantic import AnyUrl, BaseModel, Field, JsonValue, TypeAdapter

from factorspec_sdk import TokenBudgetError
from factorspec_sdk.drafter.loop import DecodeJob, Decoder, DecoderConfig
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.graph import CompiledSpec, compile_spec
from factorspec_sdk.ir import ir_from_json_schema, json_schema_validator, spec_from_ir
from factorspec_sdk.ir.standalone import STRICT_FORMATS
from factorspec_sdk.relations.layout import RFC3339_PATTERNS
from factorspec_sdk.tokens.plan import Cursor, Finished, Planner
from factorspec_sdk.tokens.vocab import TokenizerInfo
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import Post, tiny_tokenizer

EMAIL = r"^[\w.+-]+@[\w-]+\.[\w.]+$"


class Contact(BaseModel):
    """The issue's contact card: a bounded name, a patterned e-mail, lists of free tags."""

    name: str = Field(max_length=40)
    email: str = Field(pattern=EMAIL)
    phone: Optional[str] = None
    tags: list[str] = Field(max_length=4)


class Texts(BaseModel):
    """Free strings the writer writes itself (no grammar value in the spec)."""

    title: str = Field(max_length=30)
    body: str
    note: Optional[str] = None
    words: list[str]


class Times(BaseModel):
    at: datetime.time
    when: datetime.datetime
    day: datetime.date
    took: datetime.timedelta
    ref: uuid.UUID
    site: AnyUrl
    code: str = Field(pattern=r"^[A-Z]{3}-[0-9]+$")


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Inner(BaseModel):
    key: str = Field(pattern=r"^k[0-9]+$")
    level: int = Field(ge=1, le=5)


class Other(BaseModel):
    label: str
    score: float


class Numbers(BaseModel):
    count: int
    small: int = Field(ge=-3, le=1000)
    ratio: float
    unit: float = Field(gt=0, lt=1)
    money: decimal.Decimal = Field(max_digits=6, decimal_places=2)
    maybe: Optional[float] = None
    scores: list[float]
    few: list[float] = Field(max_length=3)


class Shapes(BaseModel):
    color: Color
    kind: Literal["a", "b", "long-kind"]
    pair: tuple[Inner, int]
    either: Inner | Other
    mixed: int | str
    table: dict[str, int]
    nested: dict[str, list[Inner]]
    flags: list[bool] = Field(min_length=1)


class Tree(BaseModel):
    """A recursive model: a tree of children."""

    name: str
    children: list[Tree]


class Chain(BaseModel):
    """A recursive model whose recursion is required: it ends only with ``null``."""

    value: int
    next: Optional[Chain]


class Anything(BaseModel):
    value: Any


class Table(BaseModel):
    table: dict[str, Any]


class Untyped(BaseModel):
    items: list  # type: ignore[type-arg]  # a list without an item type, as users write it


class Document(BaseModel):
    data: JsonValue


class Garden(BaseModel):
    """Every value of unbounded nesting in one record, between bounded ones."""

    label: str = Field(max_length=12)
    tree: Tree
    extra: dict[str, Any]
    chain: Chain
    score: float = Field(ge=0, le=10)
    anything: Any


NESTING: dict[str, type[BaseModel]] = {
    "any": Anything,
    "table": Table,
    "untyped": Untyped,
    "json": Document,
    "tree": Tree,
    "chain": Chain,
    "garden": Garden,
}
"""Specs with a value of unbounded nesting: no budget is roomy for every prefix."""

MODELS: dict[str, type[BaseModel]] = {
    "contact": Contact,
    "texts": Texts,
    "times": Times,
    "numbers": Numbers,
    "shapes": Shapes,
    "relations": Post,
    **NESTING,
}

STUBBORN = ["a", "7", "-"]
"""The token each model prefers: a letter, a digit, a hyphen."""


def stubborn_engine(tok: TokenizerInfo, favourite: str, second: str = "") -> ScriptedEngine:
    """A model that always prefers ``favourite`` (then ``second``) and least wants to close
    anything."""
    row = np.zeros(tok.vocab_size, dtype=np.float32)
    for i, raw in enumerate(tok.vocab):
        if any(c in raw for c in b'"]},'):
            row[i] = -8.0  # closing a string, a list, an object, or a number
        elif raw[:1].isalnum():
            row[i] = 1.0 + len(raw) / 8  # longer texts rather than stopping
    if second:
        (two,) = tok.encode(second)
        row[two] = 5.0
    (fav,) = tok.encode(favourite)
    row[fav] = 10.0

    def logits(prefix: object) -> npt.NDArray[np.float32]:
        del prefix
        return row

    return ScriptedEngine(tok, logits)


@cache
def planner_of(name: str) -> Planner:
    return Planner(Writer(compile_spec(MODELS[name], None)), tiny_tokenizer())


def decode(p: Planner, budget: int, favourite: str, second: str = "") -> tuple[str, int]:
    """A record of the stubborn model under ``budget``, greedily: its text and tokens."""
    tok = p.tok
    job = DecodeJob(p, tok.encode("go"), SamplingParams(temperature=0.0, max_tokens=budget))
    (out,) = Decoder(stubborn_engine(tok, favourite, second), DecoderConfig()).run([job])
    assert out.error is None, repr(out.error)
    return out.text, len(out.tokens)


@pytest.mark.parametrize("name", list(MODELS))
def test_every_value_is_under_budget_masks(name: str) -> None:
    bound = planner_of(name).bound
    assert bound.enforced and bound.ceiling > 0


@pytest.mark.parametrize("favourite", STUBBORN)
@pytest.mark.parametrize("extra", [0, 1, 3, 8])
@pytest.mark.parametrize("name", list(MODELS))
def test_a_model_that_never_stops_finishes_within_the_budget(
    name: str, extra: int, favourite: str
) -> None:
    p = planner_of(name)
    budget = p.min_tokens(p.start()) + extra
    assert budget < p.bound.ceiling  # the masks at work
    text, used = decode(p, budget, favourite)
    assert used <= budget
    MODELS[name].model_validate_json(text)


@pytest.mark.parametrize("extra", [0, 2, 10])
@pytest.mark.parametrize("name", list(MODELS))
def test_random_tokens_under_a_tight_budget_finish_and_validate(name: str, extra: int) -> None:
    """Tokens drawn uniformly among those the budget masks allow (escapes, odd characters,
    long numbers): every prefix they make still finishes within the budget, valid."""
    p = planner_of(name)
    budget = p.min_tokens(p.start()) + extra
    rng = np.random.default_rng(extra)
    for _ in range(4):
        cursor: Cursor = p.start()
        ids: list[int] = []
        while not isinstance(cursor, Finished):
            allowed = p.allowed(cursor, budget - len(ids))
            assert len(allowed), "the budget mask left no token"
            token = int(rng.choice(allowed))
            ids.append(token)
            cursor = p.advance(cursor, token)
        assert len(ids) <= budget
        MODELS[name].model_validate_json(p.tok.decode(ids))


NESTERS = ["[", "{", "a", "7"]
"""What a model that never stops prefers where a value may nest: an array, an object, a letter
(a key or a string), a digit."""


@pytest.mark.parametrize("favourite", NESTERS)
@pytest.mark.parametrize("extra", [0, 1, 3, 8, 30])
@pytest.mark.parametrize("name", list(NESTING))
def test_values_of_unbounded_nesting_close_in_time(name: str, extra: int, favourite: str) -> None:
    """A model that would open arrays and objects for ever is closed within the budget: every
    token it takes leaves a completion that fits, however deep it has gone."""
    p = planner_of(name)
    assert p.bound.nested
    budget = p.min_tokens(p.start()) + extra
    text, used = decode(p, budget, favourite)
    assert used <= budget
    NESTING[name].model_validate_json(text)


@pytest.mark.parametrize(
    ("name", "budget"),
    [("any", 40), ("any", 100), ("untyped", 40), ("json", 64), ("garden", 100), ("garden", 140)],
)
def test_a_fixed_budget_ends_a_deep_record_in_time(name: str, budget: int) -> None:
    """Without masks for such values (as before), the model nests until ``max_tokens`` runs
    out and the record ends in `IncompleteGenerationError`; with them it closes in time."""
    p = planner_of(name)
    text, used = decode(p, budget, "[")
    assert used <= budget
    NESTING[name].model_validate_json(text)
    if name != "garden":
        assert "[[[" in text  # it did nest while the budget let it


def test_a_budget_below_the_shortest_nested_record_is_refused_before_any_token() -> None:
    p = planner_of("garden")
    need = p.min_tokens(p.start())
    engine = stubborn_engine(p.tok, "[")
    job = DecodeJob(p, p.tok.encode("go"), SamplingParams(max_tokens=need - 1))
    (out,) = Decoder(engine).run([job])
    assert isinstance(out.error, TokenBudgetError) and out.error.min_tokens == need
    assert engine.forward_calls == 0
    text, used = decode(p, need, "[")  # the least budget works
    assert used <= need
    Garden.model_validate_json(text)


def test_a_roomy_budget_lets_the_model_write_on() -> None:
    """Where the budget is roomy, the masks are the unconstrained ones: the name runs on."""
    p = planner_of("contact")
    text, used = decode(p, p.bound.ceiling + 40, "a")
    record = Contact.model_validate_json(text)
    assert len(record.name) >= 30 and used <= p.bound.ceiling + 40


def test_a_budget_below_the_shortest_contact_card_is_refused_before_any_token() -> None:
    p = planner_of("contact")
    need = p.min_tokens(p.start())
    tok = p.tok
    engine = stubborn_engine(tok, "a")
    job = DecodeJob(p, tok.encode("go"), SamplingParams(max_tokens=need - 1))
    (out,) = Decoder(engine).run([job])
    assert isinstance(out.error, TokenBudgetError) and out.error.min_tokens == need
    assert str(need) in str(out.error) and engine.forward_calls == 0


# ---------------------------------------------------------------- the JSON Schema path

TIME_SCHEMA = {
    "type": "object",
    "properties": {
        "at": {"type": "string", "format": "time"},
        "when": {"type": "string", "format": "date-time"},
        "site": {"type": "string", "format": "uri"},
        "mail": {"type": "string", "format": "email"},
    },
    "required": ["at", "when", "site", "mail"],
    "additionalProperties": False,
}


@cache
def ir_spec() -> CompiledSpec:
    return spec_from_ir(ir_from_json_schema(TIME_SCHEMA))


@pytest.mark.parametrize("extra", [0, 2, 30])
def test_a_time_from_a_response_format_ends_within_the_budget(extra: int) -> None:
    """The issue's record: ``format: time`` and no budget worth the name, a model that
    writes ``0`` for ever. Its fraction has six digits at most, and the record finishes."""
    p = Planner(Writer(ir_spec()), tiny_tokenizer())
    budget = p.min_tokens(p.start()) + extra
    text, used = decode(p, budget, "0")
    assert used <= budget
    json_schema_validator(TIME_SCHEMA).validate(json.loads(text))


def test_times_have_microseconds_at_most_and_no_leap_second() -> None:
    p = Planner(Writer(ir_spec()), tiny_tokenizer())
    text, _ = decode(p, 400, "0", ".")  # roomy: a fraction as long as the format lets it
    record = json.loads(text)
    assert record["at"].startswith("00:00:00.000000") and len(record["at"]) == 16
    for fmt, samples in {
        "time": ["23:59:59.999999Z", "00:00:00+01:00"],
        "date-time": ["2024-02-29t23:59:59.5z", "1999-12-31T00:00:00-12:00"],
    }.items():
        pattern = re.compile(STRICT_FORMATS[fmt])
        assert STRICT_FORMATS[fmt] == RFC3339_PATTERNS[fmt]
        for s in samples:
            assert pattern.match(s), s
        prefix = "2024-01-01T" if fmt == "date-time" else ""
        for bad in ("23:59:60Z", "20:00:00.1234567Z", "20:00:00"):
            assert not pattern.match(prefix + bad), bad


@pytest.mark.parametrize("model", [datetime.time, datetime.datetime])
def test_pydantic_reads_every_time_the_writer_writes(model: type) -> None:
    """The writer's times are Pydantic's: six fractional digits are what it keeps."""
    value = "2024-01-01T20:00:00.123456+01:00" if model is datetime.datetime else "20:00:00.123456Z"
    parsed = TypeAdapter(model).validate_json(f'"{value}"')
    assert parsed.microsecond == 123456


NESTED_SCHEMA = {
    "type": "object",
    "properties": {
        "meta": {},
        "tags": {"type": "array"},
        "tree": {"$ref": "#/$defs/node"},
    },
    "required": ["meta", "tags", "tree"],
    "additionalProperties": False,
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "label": {"type": "string"},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["label", "kids"],
            "additionalProperties": False,
        }
    },
}
"""A response format with any value (``{}``), an untyped array and a recursive ``$ref``."""


@cache
def nested_ir_planner() -> Planner:
    return Planner(Writer(spec_from_ir(ir_from_json_schema(NESTED_SCHEMA))), tiny_tokenizer())


@pytest.mark.parametrize("favourite", NESTERS)
@pytest.mark.parametrize("extra", [0, 3, 30])
def test_a_response_format_of_unbounded_nesting_ends_within_the_budget(
    extra: int, favourite: str
) -> None:
    """The JSON Schema path, as the server builds it: ``{}`` and a recursive ``$ref``."""
    p = nested_ir_planner()
    budget = p.min_tokens(p.start()) + extra
    text, used = decode(p, budget, favourite)
    assert used <= budget
    json_schema_validator(NESTED_SCHEMA).validate(json.loads(text))


@pytest.mark.parametrize("favourite", ["[", "{"])
def test_a_deep_response_format_record_ends_at_a_fixed_budget(favourite: str) -> None:
    """Without masks for such values, the model nests until ``max_tokens=80`` runs out
    (`IncompleteGenerationError`, a 422 ``max_tokens_reached`` on the server)."""
    text, used = decode(nested_ir_planner(), 80, favourite)
    assert used <= 80
    json_schema_validator(NESTED_SCHEMA).validate(json.loads(text))


TYPELESS_SCHEMA = {
    "type": "object",
    "properties": {
        "x": {"anyOf": [{"minLength": 3}, {"type": "integer"}]},
        "n": {"type": "integer", "minimum": 0, "maximum": 9},
    },
    "required": ["x", "n"],
    "additionalProperties": False,
}
"""A sub-schema without ``type``: ``minLength`` binds strings only, so it takes any value."""


@pytest.mark.parametrize("budget", [40, 60, 100])
def test_a_schema_without_type_is_every_type(budget: int) -> None:
    """llguidance reads ``{"minLength": 3}`` as every type (arrays of anything too); a bound
    that took it for a string let a model nest while the budget looked roomy, and the record
    was stranded ("no token is allowed at this position")."""
    p = Planner(Writer(spec_from_ir(ir_from_json_schema(TYPELESS_SCHEMA))), tiny_tokenizer())
    assert p.bound.nested
    text, used = decode(p, budget, "[")
    assert used <= budget
    json_schema_validator(TYPELESS_SCHEMA).validate(json.loads(text))


INTERSECTIONS_SCHEMA = {
    "type": "object",
    "properties": {
        "mail": {"type": "string", "format": "email", "pattern": ".*@example\\.org"},
        "both": {
            "allOf": [{"type": "string", "pattern": "a.*"}, {"type": "string", "pattern": ".*z"}]
        },
        "list": {
            "allOf": [
                {"type": "array", "items": {"type": "integer", "minimum": 0}},
                {"type": "array", "items": {"type": "integer", "maximum": 99}, "minItems": 2},
            ]
        },
        "pick": {"allOf": [{"enum": ["x", "yy", "zzz"]}, {"enum": ["yy", "zzz", "w"]}]},
        "step": {
            "allOf": [
                {"type": "integer", "multipleOf": 4},
                {"type": "integer", "multipleOf": 6, "minimum": 1},
            ]
        },
        "either": {
            "allOf": [
                {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "integer"}]},
                {"anyOf": [{"type": "string", "minLength": 2}, {"type": "null"}]},
            ]
        },
        "obj": {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"type": "object", "additionalProperties": {"type": "integer", "minimum": 10}},
            ]
        },
    },
    "required": ["mail", "both", "list", "pick", "step", "either", "obj"],
    "additionalProperties": False,
}
"""A pattern and a format on one string, and ``allOf`` parts that llguidance intersects: two
patterns, two item schemas, two enums, two ``multipleOf``, two ``anyOf``, a property one part
names and the other's extra properties bind."""


@cache
def intersections_planner() -> Planner:
    spec = spec_from_ir(ir_from_json_schema(INTERSECTIONS_SCHEMA))
    return Planner(Writer(spec), tiny_tokenizer())


@pytest.mark.parametrize("favourite", ["a", "7", "["])
@pytest.mark.parametrize("extra", [0, 3, 30])
def test_patterns_with_formats_and_allof_end_within_the_budget(extra: int, favourite: str) -> None:
    p = intersections_planner()
    budget = p.min_tokens(p.start()) + extra
    text, used = decode(p, budget, favourite)
    assert used <= budget
    json_schema_validator(INTERSECTIONS_SCHEMA).validate(json.loads(text))


@pytest.mark.parametrize("extra", [0, 10])
def test_random_tokens_in_intersections_finish_and_validate(extra: int) -> None:
    p = intersections_planner()
    budget = p.min_tokens(p.start()) + extra
    rng = np.random.default_rng(extra)
    for _ in range(3):
        cursor: Cursor = p.start()
        ids: list[int] = []
        while not isinstance(cursor, Finished):
            allowed = p.allowed(cursor, budget - len(ids))
            assert len(allowed), "the budget mask left no token"
            ids.append(int(rng.choice(allowed)))
            cursor = p.advance(cursor, ids[-1])
        assert len(ids) <= budget
        json_schema_validator(INTERSECTIONS_SCHEMA).validate(json.loads(p.tok.decode(ids)))


def test_a_pattern_with_a_format_ends_at_a_fixed_budget() -> None:
    """Without a bound for such a string (as before), a model that writes letters for ever
    never closes the e-mail, and ``max_tokens=120`` ends in `IncompleteGenerationError`."""
    text, used = decode(intersections_planner(), 120, "a")
    assert used <= 120
    json_schema_validator(INTERSECTIONS_SCHEMA).validate(json.loads(text))
