# ruff: noqa: UP045  (Optional: the spelling users write)
"""Token budgets over grammar values: records with floats, nulls, lists and strings finish.

The budget counts a grammar segment by its closing walk (single-byte tokens that close
strings, lists and numbers first). These tests walk records at random over SmolLM2's real
vocabulary (its tokenizer only) under tight budgets, check that every allowed token leaves a
record that finishes within the budget and validates, that the walk after its first token is
the rest of it (the invariant the masks rest on), that the in-string rule counts what the
walk counts, and that greedy decoding is the same with and without speculation.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any, Literal, Optional

import jsonschema
import numpy as np
import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import TokenBudgetError
from factorspec_sdk.bench.schemas import load_hf_tokenizer
from factorspec_sdk.drafter.loop import DecodeJob, DecodeOutcome, Decoder, DecoderConfig
from factorspec_sdk.drafter.segments import SegmentDecoder
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.completion import ConstraintStyle
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import ir_from_json_schema, spec_from_ir
from factorspec_sdk.relations.layout import GrammarLayout
from factorspec_sdk.tokens.grammar import GrammarCursor, lex_value
from factorspec_sdk.tokens.plan import Cursor, Finished, Planner
from factorspec_sdk.tokens.vocab import TokenizerInfo
from factorspec_sdk.tools import Tool, calls_model
from factorspec_sdk.writer.automaton import Writer
from factorspec_sdk.writer.closing import ClosingBound, closing_bound, closing_bytes
from factorspec_sdk.writer.closing_strings import STRING_SLACK
from tests.helpers import GuidedEngine


class Reading(BaseModel):
    """Grammar values the budget bounds: floats, an optional float, a list, a free string."""

    label: str
    value: float
    error: Optional[float] = None
    samples: list[float]
    ok: Optional[bool] = None


class Area(BaseModel):
    shape: Literal["circle", "square"]
    size: float


class Volume(BaseModel):
    depth: float
    unit: str = Field(max_length=8)


class Node(BaseModel):
    """A recursive model."""

    name: str = Field(max_length=8)
    kids: list[Node]


class Loose(BaseModel):
    """Values of any depth: no bound for the whole value, one per prefix of it."""

    extra: dict[str, Any]
    value: float
    anything: Any
    tree: list[Node]


class Unreadable(BaseModel):
    """A pattern Python's ``re`` cannot read (llguidance can): no closing bound at all."""

    word: str = Field(pattern=r"^\p{L}+$")


CALLS = calls_model([Tool("area", "", Area), Tool("volume", "", Volume)], 3)
MODELS: dict[str, type[BaseModel]] = {"reading": Reading, "calls": CALLS, "loose": Loose}


@pytest.fixture(scope="module")
def tok() -> TokenizerInfo:
    return TokenizerInfo.from_hf(load_hf_tokenizer())


@cache
def planner_of(name: str, tok: TokenizerInfo) -> Planner:
    return Planner(Writer(compile_spec(MODELS[name], None)), tok)


def schema(text: str) -> GrammarLayout:
    return GrammarLayout(text)


@pytest.mark.parametrize(
    ("text", "bound"),
    [
        ('{"type":"number"}', 1),
        ('{"type":"integer","title":"N"}', 1),
        ('{"anyOf":[{"type":"number"},{"type":"null"}]}', 4),
        ('{"type":["boolean","null"]}', 5),
        ('{"type":"string","minLength":3,"maxLength":9}', 11),
        ('{"items":{"type":"number"},"type":"array"}', 5),
        ('{"enum":[1,200,null]}', 4),
        ('{"type":"string","pattern":"^a+$"}', 9),  # "a" and the quotes, at most
        ('{"type":"string","format":"date"}', 18),
        ('{"type":"number","minimum":0}', 8),
        ('{"enum":["a","b"]}', 3),
        (
            '{"type":"object","properties":{"a":{"type":"null"}},"required":["a"],'
            '"additionalProperties":false}',
            2 + 3 + 2 + 2 + 4,
        ),
        ('{"type":"string","format":"date","pattern":"^2024-"}', 10 + 8),  # both: 2024-01-01
        ('{"allOf":[{"type":"string","pattern":"^a"},{"type":"string","pattern":"z$"}]}', 2 + 8),
        ('{"anyOf":[{"allOf":[{"type":"string"},{"type":"null"}]},{"type":"null"}]}', 4),
        (  # the items of both: integers of 100 to 999
            '{"allOf":[{"type":"array","items":{"type":"integer","minimum":100}},'
            '{"type":"array","items":{"maximum":999},"minItems":1}]}',
            2 + 2 * (2 * 3 + 6 + 2),
        ),
        ('{"allOf":[{"enum":["a","bbb"]},{"enum":["bbb","cc"]}]}', 5),
        (  # "a" names a property on one side, the other's extra properties are booleans
            '{"allOf":[{"type":"object","properties":{"a":{}},"required":["a"],'
            '"additionalProperties":false},{"type":"object","additionalProperties":'
            '{"type":"boolean"}}]}',
            2 + 3 + 2 + 2 + 5,
        ),
        ('{"allOf":[{"type":"string"},{"not":{"const":""}}]}', None),
        ('{"type":"object","properties":{}}', None),  # extra properties of any depth
        ('{"type":"array"}', None),
        ('{"$ref":"#/$defs/X"}', None),
        (
            '{"$defs":{"N":{"properties":{"n":{"$ref":"#/$defs/N"}},"type":"object"}},'
            '"$ref":"#/$defs/N"}',
            None,
        ),  # recursive
    ],
)
def test_closing_bytes(text: str, bound: int | None) -> None:
    assert closing_bytes(schema(text)) == bound


@pytest.mark.parametrize(
    ("text", "bound"),
    [
        ('{"type":"number"}', ClosingBound(1, 1)),  # bounded: one number from every prefix
        ("{}", ClosingBound(5, 0 + STRING_SLACK + 2 + 5, 2)),
        ('{"type":"object","additionalProperties":true}', ClosingBound(5, 15, 2)),
        ('{"type":"array"}', ClosingBound(5, 15, 2)),
        ('{"minLength":3}', ClosingBound(5, 15, 2)),  # every type: arrays of anything too
        (  # a tree: a node's shape per level (its properties, a literal each); a child
            # pending in the list of children
            '{"$defs":{"N":{"type":"object","properties":{"n":{"type":"string"},'
            '"k":{"type":"array","items":{"$ref":"#/$defs/N"}}},"required":["n","k"]}},'
            '"$ref":"#/$defs/N"}',
            ClosingBound(2 + 2 * (3 + 4 + 5), 2 + 2 + 2 * (3 + 4 + 5), 2 + 2 * (3 + 4 + 5)),
        ),
        (  # a chain that must go on: null ends it
            '{"$defs":{"C":{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#/$defs/C"},'
            '{"type":"null"}]}},"required":["next"]}},"$ref":"#/$defs/C"}',
            ClosingBound(2 + 6 + 4 + 5, 6 + STRING_SLACK + 2 + 5, 2 + 6 + 4 + 5),
        ),
        (  # every way on nests again: no bound
            '{"$defs":{"C":{"type":"object","properties":{"next":{"$ref":"#/$defs/C"}},'
            '"required":["next"]}},"$ref":"#/$defs/C"}',
            None,
        ),
        (  # a list that may be null: its items are any of the same
            '{"anyOf":[{"type":"array","minItems":1,"items":{"$ref":"#"}},{"type":"null"}]}',
            ClosingBound(5, 2 + 5, 2 + 5 + 2),
        ),
        (r'{"type":"array","items":{"type":"string","pattern":"\\p{L}"}}', None),
        ('{"not":{"type":"null"}}', None),
    ],
)
def test_closing_bound(text: str, bound: ClosingBound | None) -> None:
    assert closing_bound(schema(text)) == bound


@pytest.mark.parametrize(
    ("text", "bytes_", "bound"),
    [
        ('{"oneOf":[{"type":"boolean"},{"type":"null"}]}', 5, ClosingBound(5, 5)),
        (  # a $ref beside other keywords: both merged
            '{"$defs":{"S":{"type":"string","maxLength":9}},"$ref":"#/$defs/S","minLength":3}',
            11,
            ClosingBound(11, 11),
        ),
        (
            '{"$defs":{"S":{"type":"string","maxLength":9}},'
            '"allOf":[{"$ref":"#/$defs/S","minLength":3},{"maxLength":5}]}',
            11,
            ClosingBound(11, 11),
        ),
        (  # a required key no property names: its value follows additionalProperties
            '{"type":"object","required":["x"],"additionalProperties":{"type":"null"}}',
            29,
            ClosingBound(29, 29),
        ),
        (
            '{"type":"object","properties":{"a":{"type":"null"}},"patternProperties":'
            '{"^b+$":{"type":"boolean"}},"additionalProperties":false,"minProperties":2}',
            67,
            ClosingBound(67, 67),
        ),
        ('{"anyOf":[]}', None, None),
        ('{"enum":[]}', None, None),
        ('{"type":{"a":1}}', None, None),
        (  # unbounded nesting from here on: the per-prefix reading
            '{"anyOf":[{"type":"array","items":{"$ref":"#"}},{"enum":["abcdef",null]}]}',
            None,
            ClosingBound(5, 8, 2),
        ),
        (
            '{"type":"object","properties":{"e":{"enum":["abcdef"]}},"required":["e"]}',
            None,
            ClosingBound(17, 21, 17, opened=2),  # inside it, only untyped objects open: {}
        ),
        (
            '{"oneOf":[{"$ref":"#/$defs/N","required":["k"]},{"type":"null"}],'
            '"$defs":{"N":{"type":"object"}}}',
            None,
            ClosingBound(5, 18, 14, opened=2),
        ),
        ('{"type":"object","required":["xy"]}', None, ClosingBound(15, 19, 15, opened=2)),
        (
            '{"type":"object","properties":{"n":{"type":"number","minimum":10}},"required":["n"]}',
            None,
            ClosingBound(19, 23, 19, opened=2),
        ),
        (  # two long required strings: their object's shape is behind an open container,
            # what is under way inside it is one entry (key, separator, 30 characters)
            '{"type":"object","properties":{"a":{"type":"string","minLength":30},'
            '"b":{"type":"string","minLength":30}},"required":["a","b"]}',
            None,
            ClosingBound(92, 92, 92, inner=51, opened=2),
        ),
        (  # the same, nothing required: the walk closes it with its entry done
            '{"type":"object","properties":{"a":{"type":"string","minLength":30},'
            '"b":{"type":"string","minLength":30}}}',
            None,
            ClosingBound(5, 51, 2),
        ),
    ],
)
def test_both_readings_agree_on_refs_unions_enums_and_keys(
    text: str, bytes_: int | None, bound: ClosingBound | None
) -> None:
    """The bounded reading (`closing_bytes`) and the per-prefix one share these parts."""
    assert closing_bytes(schema(text)) == bytes_
    assert closing_bound(schema(text)) == bound


def test_the_lexer_knows_when_it_is_inside_a_string() -> None:
    assert lex_value(b'"ab', 0) == (None, True)
    assert lex_value(b'"a\\', 0) == (None, False)  # an escape is due
    assert lex_value(b'"a\\u12', 0) == (None, False)
    assert lex_value(b'"a\\u1234', 0) == (None, True)
    assert lex_value('"\u00e9'.encode()[:2], 0) == (None, False)  # half a character
    assert lex_value(b'[1, "x', 0) == (None, True)
    assert lex_value(b'[1, "x"], "k"', 0) == (8, False)
    assert lex_value(b"12, ", 0) == (2, False)
    assert lex_value(b"nul", 0) == (None, False)


def test_values_of_unbounded_nesting_are_bounded_per_cursor(tok: TokenizerInfo) -> None:
    p = planner_of("loose", tok)
    assert p.bound.enforced and p.bound.nested  # masks, but no budget is roomy everywhere
    assert p.bound.ceiling > 1 << 30
    for name in ("reading", "calls"):
        assert planner_of(name, tok).bound.enforced and not planner_of(name, tok).bound.nested


def test_a_grammar_value_without_a_bound_turns_the_budget_off(tok: TokenizerInfo) -> None:
    p = Planner(Writer(compile_spec(Unreadable, None)), tok)
    assert not p.bound.enforced and p.bound.ceiling == 0


def walk(p: Planner, budget: int, rng: np.random.Generator) -> list[int]:
    """A record drawn uniformly among the tokens the budget masks allow at each step."""
    cursor: Cursor = p.start()
    ids: list[int] = []
    while not isinstance(cursor, Finished):
        allowed = p.allowed(cursor, budget - len(ids))
        assert len(allowed), "the budget mask left no token"
        token = int(rng.choice(allowed))
        ids.append(token)
        cursor = p.advance(cursor, token)
    return ids


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("extra", [0, 1, 4, 12])
def test_random_records_under_a_tight_budget_finish_and_validate(
    name: str, extra: int, tok: TokenizerInfo
) -> None:
    p = planner_of(name, tok)
    budget = min(p.min_tokens(p.start()) + extra, p.bound.ceiling - 1)  # the masks at work
    rng = np.random.default_rng(extra)
    for _ in range(6):
        ids = walk(p, budget, rng)
        assert len(ids) <= budget
        MODELS[name].model_validate_json(tok.decode(ids))


def grammar_cursors(p: Planner, rng: np.random.Generator, n: int) -> list[GrammarCursor]:
    """Grammar cursors met on ``n`` random records (no budget)."""
    out: list[GrammarCursor] = []
    for _ in range(n):
        cursor: Cursor = p.start()
        steps = 0
        while not isinstance(cursor, Finished) and steps < 120:
            if isinstance(cursor, GrammarCursor):
                out.append(cursor)
            cursor = p.advance(cursor, int(rng.choice(p.allowed(cursor))))
            steps += 1
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_the_walk_after_its_first_token_is_the_rest_of_it(name: str, tok: TokenizerInfo) -> None:
    p = planner_of(name, tok)
    fresh = Planner(p.writer, tok)  # nothing memoized: each walk counted from its own cursor
    for cursor in grammar_cursors(p, np.random.default_rng(1), 4)[::3]:
        g = fresh.bound.greedy(cursor)
        walk = cursor.segment.closing(cursor.tokens, 10_000)
        assert walk is not None
        if walk:
            other = Planner(p.writer, tok)  # fresh again: the next cursor's own walk
            assert other.bound.greedy(p.advance(cursor, walk[0])) == g - 1


@pytest.mark.parametrize("name", list(MODELS))
def test_the_in_string_rule_counts_what_the_walk_counts(name: str, tok: TokenizerInfo) -> None:
    p = planner_of(name, tok)
    rng = np.random.default_rng(2)
    tables = p.free_tables()
    checked = 0
    inside = [c for c in grammar_cursors(p, rng, 6) if c.segment.in_string(c.tokens)]
    for i in rng.choice(len(inside), size=min(4, len(inside)), replace=False).tolist():
        cursor = inside[i]
        g = p.bound.greedy(cursor)
        ids = p.allowed(cursor)
        plain = ids[np.isin(ids, tables.safe_ids)]
        for t in rng.choice(plain, size=min(5, len(plain)), replace=False).tolist():
            after = p.bound.greedy(p.advance(cursor, t))
            assert after <= g  # a plain token never makes the closing longer
            checked += 1
        budget = g + 1
        allowed = p.allowed(cursor, budget)
        sample = rng.choice(allowed, size=min(12, len(allowed)), replace=False)
        for t in sample.tolist():  # tokens the rule lets in fit, counted exactly
            assert 1 + p.bound.greedy(p.advance(cursor, t)) <= budget
    assert checked


@pytest.mark.parametrize("name", list(MODELS))
def test_every_token_a_budget_allows_in_a_segment_fits(name: str, tok: TokenizerInfo) -> None:
    """Each budget mask in a grammar segment, from one token of room to the whole segment's
    (where tokens are allowed by the segment's bound, without a walk), lets in only tokens
    after which the greedy completion fits."""
    p = planner_of(name, tok)
    rng = np.random.default_rng(3)
    counter = Planner(p.writer, tok)  # counts each token's completion from scratch
    all_allowed = 0
    for cursor in grammar_cursors(p, rng, 4)[::4]:
        g = p.bound.greedy(cursor)
        for slack in (1, 2, 8, 40, 400):
            budget = g + slack
            if budget >= p.bound.ceiling:
                continue
            allowed = p.allowed(cursor, budget)
            assert len(allowed), "the budget mask left no token"
            all_allowed += len(allowed) == len(p.allowed(cursor))
            sample = rng.choice(allowed, size=min(8, len(allowed)), replace=False)
            for t in sample.tolist():
                assert 1 + counter.bound.greedy(p.advance(cursor, t)) <= budget
    assert all_allowed  # some budget was roomy enough to allow every token


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_speculative_equals_plain_under_a_tight_budget(
    seed: int, tok: TokenizerInfo
) -> None:
    p = planner_of("calls", tok)
    budget = p.min_tokens(p.start()) + 6
    engine = ScriptedEngine.random(tok, seed=seed, temperature_scale=3.0)
    prompt = tok.encode("call the tools")
    outs = []
    for config in (
        DecoderConfig(speculative=False),
        DecoderConfig(max_guesses=0),
        DecoderConfig(max_guesses=2),
    ):
        job = DecodeJob(p, prompt, SamplingParams(temperature=0.0, seed=seed, max_tokens=budget))
        [o] = Decoder(engine, config).run([job])
        assert o.error is None, o.error
        assert len(o.tokens) <= budget
        CALLS.model_validate_json(o.text)
        outs.append((o.text, o.tokens))
    assert outs[0] == outs[1] == outs[2]


def test_sampled_records_under_a_tight_budget_validate(tok: TokenizerInfo) -> None:
    p = planner_of("reading", tok)
    budget = p.min_tokens(p.start()) + 2
    engine = ScriptedEngine.random(tok, seed=5, temperature_scale=3.0)
    prompt = tok.encode("a reading")
    jobs = [
        DecodeJob(p, prompt, SamplingParams(temperature=1.0, seed=s, max_tokens=budget))
        for s in range(6)
    ]
    for o in Decoder(engine).run(jobs):
        assert o.error is None, o.error
        assert len(o.tokens) <= budget
        Reading.model_validate_json(o.text)


def test_a_budget_below_the_bound_is_refused_before_any_token(tok: TokenizerInfo) -> None:
    p = planner_of("reading", tok)
    need = p.min_tokens(p.start())
    engine = ScriptedEngine.random(tok, seed=0)
    job = DecodeJob(p, tok.encode("a reading"), SamplingParams(max_tokens=need - 1))
    [o] = Decoder(engine).run([job])
    assert isinstance(o.error, TokenBudgetError) and o.error.min_tokens == need
    assert engine.forward_calls == 0


def json_depth(data: bytes) -> int:
    """Arrays and objects open at the end of ``data`` (outside strings), counted plainly."""
    depth, in_str, escape = 0, False, False
    for b in data:
        if in_str:
            if escape:
                escape = False
            elif b == ord("\\"):
                escape = True
            elif b == ord('"'):
                in_str = False
        elif b == ord('"'):
            in_str = True
        elif b in b"[{":
            depth += 1
        elif b in b"]}":
            depth -= 1
    return depth


def deep_cursors(p: Planner, rng: np.random.Generator, n: int) -> list[GrammarCursor]:
    """Grammar cursors of records whose tokens open arrays and objects where they may."""
    tok = p.tok
    opens = np.asarray([raw.count(b"[") + raw.count(b"{") for raw in tok.vocab])
    out: list[GrammarCursor] = []
    for _ in range(n):
        cursor: Cursor = p.start()
        steps = 0
        while not isinstance(cursor, Finished) and steps < 90:
            ids = p.allowed(cursor)
            if isinstance(cursor, GrammarCursor):
                out.append(cursor)
                deep = ids[opens[ids] > 0]
                ids = deep if len(deep) and rng.random() < 0.6 else ids
            cursor = p.advance(cursor, int(rng.choice(ids)))
            steps += 1
    return out


def test_the_walk_from_a_deep_prefix_fits_its_bound(tok: TokenizerInfo) -> None:
    """From any prefix of a value of unbounded nesting, the closing walk writes at most the
    bound of its depth (`ClosingBound.at`), and one token later at most what the roomy check
    counted for it. The depth the segment keeps as it is asked (cursors out of order, so it
    rolls back) is the plain count."""
    p = planner_of("loose", tok)
    rng = np.random.default_rng(4)
    cursors = deep_cursors(p, rng, 3)
    deepest = 0
    for i in rng.permutation(len(cursors))[:60].tolist():
        cursor = cursors[i]
        segment = cursor.segment
        k, depth = segment.nesting(cursor.tokens)
        data = b"".join(tok.vocab[t] for t in cursor.tokens)
        start = len(segment.texts[0].encode())
        if k < len(segment.values) and depth:
            assert segment.value_index(cursor.tokens) == k
            assert depth == json_depth(data[start:])  # one value in these segments
        deepest = max(deepest, depth)
        assert_walks_fit(p, cursor, rng, 3)
    assert deepest >= 4


def assert_walks_fit(p: Planner, cursor: GrammarCursor, rng: np.random.Generator, n: int) -> None:
    """The closing walk from ``cursor`` writes at most its bound, and from ``n`` random
    tokens on (in the segment) at most what the roomy check counted for one token more."""
    segment = cursor.segment
    walk = segment.closing(cursor.tokens, 10_000)
    assert walk is not None
    written = sum(len(p.tok.vocab[t]) for t in walk)
    assert written <= p.bound.grammar.rest_bytes_at(cursor, token=False)
    for t in rng.choice(p.allowed(cursor), size=n).tolist():
        after = p.advance(cursor, t, critical=False)
        if isinstance(after, GrammarCursor) and after.segment is segment:
            walk = segment.closing(after.tokens, 10_000)
            assert walk is not None
            written = sum(len(p.tok.vocab[t]) for t in walk)
            assert written <= p.bound.grammar.rest_bytes_at(cursor, token=True)


OPEN_RECORDS = {
    # JSONSchemaBench's Github_medium/o20375 (shortened): every key required, any other
    # key beside them (no additionalProperties), long patterned values
    "required": {
        "type": "object",
        "properties": {
            "key": {"type": "string", "pattern": "^[0-9a-f]{40}$"},
            "url": {"type": "string", "pattern": "^https?://"},
            "tag": {"type": "string"},
            "when": {"type": "string", "pattern": r"^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}$"},
        },
        "required": ["key", "url", "tag", "when"],
    },
    # Github_easy/o30004: nothing required, enums, any other key
    "optional": {
        "type": "object",
        "properties": {
            "alertonly": {"enum": ["ON", "OFF"], "type": "string"},
            "comment": {"type": "string"},
            "cookieconsistency": {"type": "string"},
            "isautodeployed": {"enum": ["AUTODEPLOYED", "NOTAUTODEPLOYED"], "type": "string"},
            "isregex": {"enum": ["REGEX", "NOTREGEX"], "type": "string"},
            "name": {"type": "string"},
            "state": {"enum": ["ENABLED", "DISABLED"], "type": "string"},
        },
    },
}


@cache
def open_planner(name: str, tok: TokenizerInfo) -> Planner:
    return Planner(Writer(spec_from_ir(ir_from_json_schema(OPEN_RECORDS[name]))), tok)


@pytest.mark.parametrize("name", list(OPEN_RECORDS))
def test_the_walk_from_a_prefix_of_an_open_record_fits_its_bound(
    name: str, tok: TokenizerInfo
) -> None:
    """The bound inside an open container (``inner``, ``opened``, an object that needs no
    key counted by its braces) holds for the walk from random prefixes, and one token on."""
    p = open_planner(name, tok)
    assert p.bound.nested
    rng = np.random.default_rng(7)
    cursors = deep_cursors(p, rng, 4)
    for i in rng.permutation(len(cursors))[:60].tolist():
        assert_walks_fit(p, cursors[i], rng, 4)


@pytest.mark.parametrize("name", list(OPEN_RECORDS))
def test_a_budget_far_above_the_shortest_record_narrows_nothing(
    name: str, tok: TokenizerInfo
) -> None:
    """512 tokens for a record whose shortest completion takes a few dozen: every token
    the schema allows stays allowed as the record opens and a key starts. The bound used
    to count the root object's shape again for every level and for what a token may open
    inside it, and left only the closing walk's own tokens there (``{"": ""}`` for
    ``optional``, a checksum of zeros for ``required``)."""
    p = open_planner(name, tok)
    cursor: Cursor = p.start()
    rest = b'{"key": "2023' if name == "required" else b'{"alert'
    left = 512
    while rest:
        allowed = p.allowed(cursor)
        assert np.array_equal(p.allowed(cursor, left), allowed)
        token = max(
            (t for t in allowed.tolist() if tok.vocab[t] and rest.startswith(tok.vocab[t])),
            key=lambda t: len(tok.vocab[t]),
        )
        cursor = p.advance(cursor, token)
        rest, left = rest[len(tok.vocab[token]) :], left - 1


# ------------------------------------------------------------------ one request per span


def spans_like_logits(
    p: Planner, prompt: list[int], params: SamplingParams, seed: int
) -> tuple[GuidedEngine, DecodeOutcome]:
    """The record by spans (vLLM's guidance backend, `GuidedEngine`) on a random model,
    asserted to be the logits decoder's on the same model, token for token."""
    engine = ScriptedEngine.random(p.tok, seed=seed, temperature_scale=3.0)
    [by_logits] = Decoder(engine).run([DecodeJob(p, prompt, params)])
    spans = GuidedEngine(ScriptedEngine.random(p.tok, seed=seed, temperature_scale=3.0))
    [by_spans] = SegmentDecoder(spans).run([DecodeJob(p, prompt, params)])
    assert by_spans.error is None, by_spans.error
    assert by_spans.tokens == by_logits.tokens
    return spans, by_spans


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_spans_equal_the_logits_decoder_under_a_tight_budget(
    seed: int, tok: TokenizerInfo
) -> None:
    """A grammar segment as one request (vLLM's guidance backend) under a tight budget.

    The engine knows nothing of the budget: FactorSpec takes its reply while the budget
    masks allow each token and asks the first token they refuse alone, so the record is the
    logits decoder's, token for token, on SmolLM2's vocabulary (byte tokens included).
    """
    p = planner_of("calls", tok)
    budget = p.min_tokens(p.start()) + 6
    prompt = tok.encode("call the tools")
    params = SamplingParams(temperature=0.0, seed=seed, max_tokens=budget)
    spans, by_spans = spans_like_logits(p, prompt, params, seed)
    assert len(by_spans.tokens) <= budget
    assert any(r.grammar is not None for r in spans.requests)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_patterned_open_record_goes_as_a_span_until_its_masks_may_narrow(
    seed: int, tok: TokenizerInfo
) -> None:
    """o20375's shape at a budget where the roomy bound before ``{"`` is loose (a first
    token might open containers) and the room after it is not: the record starts as one
    grammar request, ``max_tokens`` the room (past it the tight masks keep little besides
    the closing walk's tokens, and a refused reply would be decoded on to its end); it
    started one token per request. The record is the logits decoder's, token for token."""
    p = open_planner("required", tok)
    start = p.start()
    first = p.certain(start, 300)
    assert first is not None
    after = p.advance(start, first)
    assert isinstance(start, GrammarCursor) and isinstance(after, GrammarCursor)
    assert p.bound.room(start, 300) <= 0 < (room := p.bound.room(after, 299))
    prompt = tok.encode("a record")
    spans, _ = spans_like_logits(p, prompt, SamplingParams(temperature=0.0, max_tokens=300), seed)
    head = spans.requests[0]
    assert head.grammar is not None and head.max_tokens == room
    assert all(r.max_tokens <= room for r in spans.requests)


@pytest.mark.parametrize("style", ["spans", "regex"])
@pytest.mark.parametrize("name", ["reading", "calls"])
def test_random_span_replies_under_a_tight_budget_finish_and_validate(
    style: ConstraintStyle, name: str, tok: TokenizerInfo
) -> None:
    """Replies of random tokens the engine's grammar allows: cut, closed, valid, in budget."""
    p = planner_of(name, tok)
    budget = min(p.min_tokens(p.start()) + 3, p.bound.ceiling - 1)
    prompt = tok.encode("a record")
    for seed in range(3):
        rng = np.random.default_rng(seed)
        engine = GuidedEngine(ScriptedEngine.random(tok, seed=seed), style, rng=rng)
        job = DecodeJob(p, prompt, SamplingParams(temperature=1.0, seed=seed, max_tokens=budget))
        [o] = SegmentDecoder(engine).run([job])
        assert o.error is None, o.error
        assert len(o.tokens) <= budget
        MODELS[name].model_validate_json(o.text)


# ------------------------------------------------------------------ a record that is one value

ROOTS: dict[str, dict[str, Any]] = {
    "number": {"type": "number"},
    "unit": {"type": "number", "minimum": 0, "maximum": 1},
    "count": {"type": "integer", "minimum": 1},
    "word or number": {"anyOf": [{"type": "string", "maxLength": 6}, {"type": "number"}]},
}
"""JSON Schemas whose whole record is a grammar value that may end or go on (a number)."""


@cache
def root_planner(name: str, tok: TokenizerInfo) -> Planner:
    return Planner(Writer(spec_from_ir(ir_from_json_schema(ROOTS[name]))), tok)


def test_a_root_number_ends_with_an_end_token_where_it_is_complete(tok: TokenizerInfo) -> None:
    """After ``0.5`` the record may end (an end-of-sequence token) or the number go on; the
    end token leads to `Finished`, and the shortest record counts it (``0``, then the end)."""
    p = root_planner("unit", tok)
    cursor: Cursor = p.start()
    assert not np.isin(tok.eos_ids, p.allowed(cursor)).any()  # nothing written: no end yet
    for token in tok.encode("0.5"):
        cursor = p.advance(cursor, token)
    allowed = p.allowed(cursor)
    assert set(tok.eos_ids) <= set(allowed.tolist())
    assert len(allowed) > len(tok.eos_ids)  # more digits too
    assert isinstance(p.advance(cursor, tok.eos_ids[0]), Finished)
    assert p.allowed(cursor, 1).tolist() == sorted(tok.eos_ids)  # one token left: the end
    assert p.min_tokens(p.start()) == 2


def test_a_root_value_that_cannot_go_on_ends_on_its_last_token(tok: TokenizerInfo) -> None:
    """A value complete and stopped (``true``) needs no end token: its token finishes it."""
    p = Planner(Writer(spec_from_ir(ir_from_json_schema({"type": "boolean"}))), tok)
    cursor: Cursor = p.start()
    for token in tok.encode("true"):
        cursor = p.advance(cursor, token)
    assert isinstance(cursor, Finished)
    assert p.min_tokens(p.start()) == len(tok.encode("true"))


@pytest.mark.parametrize("name", list(ROOTS))
@pytest.mark.parametrize("extra", [0, 1, 4, 12])
def test_root_values_under_a_tight_budget_end_and_validate(
    name: str, extra: int, tok: TokenizerInfo
) -> None:
    p = root_planner(name, tok)
    budget = min(p.min_tokens(p.start()) + extra, p.bound.ceiling - 1)
    rng = np.random.default_rng(extra)
    for _ in range(6):
        ids = walk(p, budget, rng)
        assert len(ids) <= budget
        jsonschema.validate(json.loads(tok.decode(ids)), ROOTS[name])


@pytest.mark.parametrize("name", list(ROOTS))
def test_every_token_a_budget_allows_at_a_root_value_fits(name: str, tok: TokenizerInfo) -> None:
    p = root_planner(name, tok)
    counter = Planner(p.writer, tok)  # counts each token's completion from scratch
    for cursor in grammar_cursors(p, np.random.default_rng(4), 3):
        g = p.bound.greedy(cursor)
        for slack in (1, 2, 8):
            budget = g + slack
            if budget >= p.bound.ceiling:
                continue
            allowed = p.allowed(cursor, budget)
            assert len(allowed), "the budget mask left no token"
            for t in allowed.tolist()[:16]:
                assert 1 + counter.bound.greedy(p.advance(cursor, t)) <= budget


@pytest.mark.parametrize("name", list(ROOTS))
@pytest.mark.parametrize("max_tokens", [6, 200])
def test_greedy_speculative_equals_plain_on_a_root_value(
    name: str, max_tokens: int, tok: TokenizerInfo
) -> None:
    """The record ends where the model picks the end token (or the budget makes it), the
    same with and without drafts; on ``main`` it never ended before ``max_tokens``."""
    p = root_planner(name, tok)
    prompt = tok.encode("a value")
    outs = []
    for seed in range(2):
        engine = ScriptedEngine.random(tok, seed=seed, temperature_scale=3.0)
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
        for config in (
            DecoderConfig(speculative=False),
            DecoderConfig(max_guesses=0),
            DecoderConfig(max_guesses=2),
        ):
            [o] = Decoder(engine, config).run([DecodeJob(p, prompt, params)])
            assert o.error is None, o.error
            assert len(o.tokens) <= max_tokens
            jsonschema.validate(json.loads(o.text), ROOTS[name])
            outs.append((seed, o.text, o.tokens))
    for seed in range(2):
        mine = [(text, tokens) for s, text, tokens in outs if s == seed]
        assert mine[0] == mine[1] == mine[2]


@pytest.mark.parametrize("style", ["spans", "regex"])
@pytest.mark.parametrize("name", ["unit", "word or number"])
def test_span_replies_at_a_root_value_end_and_validate(
    style: ConstraintStyle, name: str, tok: TokenizerInfo
) -> None:
    """An engine that ends the value with its end token (vLLM's guidance backend) ends the
    record there; greedy, the record is the logits decoder's, end token included."""
    p = root_planner(name, tok)
    prompt = tok.encode("a value")
    for seed in range(3):
        params = SamplingParams(temperature=0.0, seed=seed, max_tokens=40)
        engine = ScriptedEngine.random(tok, seed=seed, temperature_scale=3.0)
        [by_logits] = Decoder(engine).run([DecodeJob(p, prompt, params)])
        spans = GuidedEngine(ScriptedEngine.random(tok, seed=seed, temperature_scale=3.0), style)
        [o] = SegmentDecoder(spans).run([DecodeJob(p, prompt, params)])
        assert o.error is None, o.error
        assert len(o.tokens) <= params.max_tokens
        jsonschema.validate(json.loads(o.text), ROOTS[name])
        if style == "spans":
            assert o.tokens == by_logits.tokens
