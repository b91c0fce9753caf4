"""Budget-feasible records: with ``max_tokens``, every record finishes within the budget.

For every bundled example (and toy models that exercise free strings, wide numbers, optional
leaves and list minimums) the shortest record's token count ``S`` is the planner's bound at the
start; decoding with budgets ``S``, ``S + 1`` and ``S + 5`` must give valid, complete records,
greedy and sampled, on the logits decoder and the segment decoder; ``S - 1`` is refused before
any token.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Literal

import numpy as np
import pytest
from pydantic import BaseModel, Field

from examples import invoice, itinerary, meeting
from factorspec_sdk import TokenBudgetError, relation
from factorspec_sdk.domains.trip import Itinerary
from factorspec_sdk.drafter.loop import DecodeJob, DecodeOutcome, Decoder, DecoderConfig
from factorspec_sdk.drafter.segments import SegmentDecoder
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.completion import Completion, CompletionReply, ConstraintStyle
from factorspec_sdk.engines.protocol import ChatMessage
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import Cursor, Finished, Planner, TrieNode
from factorspec_sdk.tokens.vocab import TokenizerInfo
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import TRIP_CONTEXT, Pick, Post, Signup, Trip, tiny_tokenizer
from tests.writer.test_string_affixes import Tagged

TOK = tiny_tokenizer()
PROMPT = TOK.encode("write the record")


class Memo(BaseModel):
    """Free strings with a minimum, a wide int, an optional leaf and a list minimum."""

    title: str = Field(min_length=3, max_length=12)
    code: int
    note: str | None
    tags: list[bool] = Field(min_length=2, max_length=4)


class Options(BaseModel):
    """Optional keys: one whose default the relation reads, one it does not, one it forbids."""

    a: int = Field(default=0, ge=0, le=3)
    b: bool | None = None
    c: Literal["x", "y"] = "x"

    @relation
    def a_or_y(self) -> bool:
        return self.a != 0 or self.c == "y"  # both left out (0, "x") is no record


EXAMPLES: dict[str, tuple[type[BaseModel], object]] = {
    "itinerary": (Itinerary, itinerary.SAMPLE_CONTEXT),
    "invoice": (invoice.Invoice, invoice.SAMPLE_CONTEXT),
    "meeting": (meeting.Meeting, meeting.SAMPLE_CONTEXT),
    "trip": (Trip, TRIP_CONTEXT),
    "pick": (Pick, None),
    "memo": (Memo, None),
    "post": (Post, None),  # free strings closed at lengths the relations allow
    "signup": (Signup, None),  # free strings compared by value, one copying another
    "tagged": (Tagged, None),  # free strings read with startswith / endswith
    "options": (Options, None),  # optional keys left out, as their defaults
}
# the shortest record of each, in tiny-vocabulary tokens (exhaustive search agrees where
# it is feasible: test_the_bound_is_the_true_shortest_record)
SHORTEST = {
    "itinerary": 315,
    "invoice": 120,
    "meeting": 42,
    "trip": 62,
    "pick": 27,
    "memo": 37,
    "post": 24,  # the note left out (its default, None): 7 tokens of `, "note": null` fewer
    "signup": 45,
    "tagged": 17,
    "options": 6,  # {"a": 1}: a left out is 0, and c then must be written "y"
}


@cache
def planner(name: str) -> Planner:
    """One planner per example, shared by the tests (cursors and bounds are immutable)."""
    model, context = EXAMPLES[name]
    return Planner(Writer(compile_spec(model, context)), TOK)


def check(name: str, outcome: DecodeOutcome, budget: int) -> None:
    model, context = EXAMPLES[name]
    assert outcome.error is None, outcome.error
    assert len(outcome.tokens) <= budget
    model.model_validate_json(outcome.text, context=context)


def true_shortest(p: Planner) -> int:
    """Tokens of the shortest record, by breadth-first search over the planner's cursors."""
    frontier: list[Cursor] = [p.start()]
    seen: set[Cursor] = set()
    depth = 0
    while frontier:
        nxt: list[Cursor] = []
        for c in frontier:
            if isinstance(c, Finished):
                return depth
            for t in p.allowed(c).tolist():
                child = p.advance(c, t)
                if child not in seen:
                    seen.add(child)
                    nxt.append(child)
        frontier, depth = nxt, depth + 1
    raise AssertionError("no record")


# ------------------------------------------------------------------ the bound


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_the_shortest_record(name: str) -> None:
    p = planner(name)
    assert p.min_tokens(p.start()) == SHORTEST[name]
    assert p.bound.ceiling > SHORTEST[name]


@pytest.mark.parametrize("name", ["itinerary", "meeting", "trip", "pick", "options"])
def test_the_bound_is_the_true_shortest_record(name: str) -> None:
    p = planner(name)
    assert true_shortest(p) == p.min_tokens(p.start())


@pytest.mark.parametrize("name", ["trip", "memo", "invoice", "post", "signup", "tagged", "options"])
@pytest.mark.parametrize("extra", [0, 1, 5])
def test_random_walks_under_a_budget_always_finish(name: str, extra: int) -> None:
    """Any token the budget mask allows leads to a complete record within the budget."""
    p = planner(name)
    budget = SHORTEST[name] + extra
    rng = np.random.default_rng(extra)
    for _ in range(1 if name == "invoice" else 12):
        cursor, left, ids = p.start(), budget, []
        while not isinstance(cursor, Finished):
            allowed = p.allowed(cursor, left)
            assert len(allowed), "the budget mask left no token"
            assert set(allowed.tolist()) <= set(p.allowed(cursor).tolist())
            # the bound at the cursor fits what is left (the invariant the masks keep)
            assert p.min_tokens(cursor) <= left
            t = int(rng.choice(allowed))
            ids.append(t)
            cursor, left = p.advance(cursor, t), left - 1
        model, context = EXAMPLES[name]
        model.model_validate_json(TOK.decode(ids).decode(), context=context)
        assert len(ids) <= budget


def test_a_loose_budget_changes_no_mask_and_no_certain_token() -> None:
    p = planner("memo")
    rng = np.random.default_rng(0)
    cursor = p.start()
    assert p.bound.ceiling <= 2048
    while not isinstance(cursor, Finished):
        for budget in (p.bound.ceiling, 2048):
            assert np.array_equal(p.allowed(cursor, budget), p.allowed(cursor))
            assert p.certain(cursor, budget) == p.certain(cursor)
        cursor = p.advance(cursor, int(rng.choice(p.allowed(cursor))))


def test_a_middling_budget_walks_only_near_its_end() -> None:
    """A token whose longest rest fits what is left needs no greedy walk."""
    p = Planner(Writer(compile_spec(Trip, TRIP_CONTEXT)), TOK)
    cursor, left = p.start(), p.bound.ceiling - 1  # below the ceiling: the bound is on
    rng = np.random.default_rng(1)
    steps, first_walk = 0, None
    while not isinstance(cursor, Finished):
        allowed = p.allowed(cursor, left)
        if first_walk is None and p.bound.walked:
            first_walk = steps
        cursor, left, steps = p.advance(cursor, int(rng.choice(allowed))), left - 1, steps + 1
    # the budget (276 tokens) is far above this record (62 tokens): no walk at all
    assert first_walk is None and steps >= SHORTEST["trip"]


def test_a_tight_budget_makes_more_tokens_certain() -> None:
    p = planner("memo")
    cursor = p.start()
    while p.certain(cursor) is not None:  # to the title, a free string
        cursor = p.advance(cursor, p.certain(cursor))  # type: ignore[arg-type]
    assert p.certain(cursor) is None
    # with exactly the shortest record's budget, the title (min_length=3) must be one token
    left = SHORTEST["memo"] - len(TOK.encode('{"title": "'))
    allowed = p.allowed(cursor, left)
    assert 0 < len(allowed) < len(p.allowed(cursor))
    assert all(3 <= len(TOK.vocab[t]) <= 12 for t in allowed.tolist())


# ------------------------------------------------------------------ the logits decoder


def decode(
    name: str, budget: int, *, temperature: float, seeds: Sequence[int], config: DecoderConfig
) -> list[DecodeOutcome]:
    engine = ScriptedEngine.random(TOK, seed=seeds[0], temperature_scale=3.0)
    params = [SamplingParams(temperature=temperature, seed=s, max_tokens=budget) for s in seeds]
    jobs = [DecodeJob(planner(name), PROMPT, ps) for ps in params]
    return Decoder(engine, config).run(jobs)


@pytest.mark.parametrize("name", list(EXAMPLES))
@pytest.mark.parametrize("extra", [0, 1, 5])
def test_tight_budgets_give_valid_records(name: str, extra: int) -> None:
    budget = SHORTEST[name] + extra
    seeds = [0, 1] if name == "invoice" else list(range(6))
    for config in (DecoderConfig(), DecoderConfig(speculative=False)):
        for o in decode(name, budget, temperature=0.0, seeds=seeds[:1], config=config):
            check(name, o, budget)
        for o in decode(name, budget, temperature=1.0, seeds=seeds, config=config):
            check(name, o, budget)


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_a_budget_below_the_shortest_record_is_refused(name: str) -> None:
    engine = ScriptedEngine.random(TOK, seed=0)
    job = DecodeJob(planner(name), PROMPT, SamplingParams(max_tokens=SHORTEST[name] - 1))
    [outcome] = Decoder(engine).run([job])
    assert isinstance(outcome.error, TokenBudgetError)
    assert outcome.error.max_tokens == SHORTEST[name] - 1
    assert outcome.error.min_tokens == SHORTEST[name]
    assert engine.forward_calls == 0 and outcome.tokens == []


@pytest.mark.parametrize("name", ["trip", "memo", "pick", "post"])
@pytest.mark.parametrize("seed", range(4))
def test_greedy_speculative_equals_plain_under_a_tight_budget(name: str, seed: int) -> None:
    budget = SHORTEST[name] + 3
    outs = []
    for config in (
        DecoderConfig(speculative=False),
        DecoderConfig(max_guesses=0),
        DecoderConfig(max_guesses=2),
    ):
        [o] = decode(name, budget, temperature=0.0, seeds=[seed], config=config)
        check(name, o, budget)
        outs.append((o.text, o.tokens))
    assert outs[0] == outs[1] == outs[2]


# ------------------------------------------------------------------ the segment decoder


_REPLY_CHARS = [*"abcxyz ro", "\\n", '\\"', "\\u00e9"]
"""Characters of a random reply's free string: letters, and a few escapes."""


class RandomCompleter:
    """A `CompletionEngine` that answers each request with a random text it allows."""

    def __init__(self, style: ConstraintStyle, seed: int) -> None:
        self.style = style
        self.rng = np.random.default_rng(seed)

    @property
    def name(self) -> str:
        return "random"

    @property
    def tokenizer(self) -> TokenizerInfo:
        return TOK

    @property
    def constraint_style(self) -> ConstraintStyle:
        return self.style

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        return TOK.encode(" ".join(m["content"] for m in messages))

    def close(self) -> None:
        pass

    def complete(self, requests: Sequence[Completion]) -> list[CompletionReply]:
        return [self._one(r) for r in requests]

    def _one(self, r: Completion) -> CompletionReply:
        if r.allowed_ids is not None:
            token = int(self.rng.choice(r.allowed_ids))
            return CompletionReply(TOK.decode([token]).decode(), [token], 1)
        assert r.regex is not None
        if '[^"' in r.regex:  # a free string's rest: letters, then the quote
            # its lengths: `*`, `{low,}`, `{low,high}`, or runs `({a,b}|{c}|...)`
            # (a string compared by value: characters of its named texts, a few more of them)
            runs = re.findall(r"\{(\d+)(,?)(\d*)\}", r.regex) or [("0", ",", "")]
            tries = []
            for _ in range(200):
                low, comma, high = runs[int(self.rng.integers(len(runs)))]
                n = int(low) + int(self.rng.integers(0, 20)) if comma else int(low)
                n = min(n, int(high)) if high else n
                n += int(self.rng.integers(0, 3))
                chars = self.rng.choice(_REPLY_CHARS, size=n).tolist()  # escapes among them
                tries.append("".join(chars) + '"')
            text = next(t for t in tries if re.fullmatch(r.regex, t))
        else:  # one of the alternatives
            body, parts, part, escaped = r.regex[1:-1], [], "", False
            for ch in body:
                if escaped or ch == "\\":
                    part, escaped = part + ch, not escaped
                elif ch == "|":
                    parts, part = [*parts, part], ""
                else:
                    part += ch
            parts.append(part)
            text = re.sub(r"\\(.)", r"\1", parts[int(self.rng.integers(len(parts)))])
        assert re.fullmatch(r.regex, text), (r.regex, text)
        return CompletionReply(text, None, 1)


@pytest.mark.parametrize("style", ["tokens", "regex"])
@pytest.mark.parametrize(
    "name", ["trip", "memo", "meeting", "invoice", "post", "signup", "tagged", "options"]
)
@pytest.mark.parametrize("extra", [0, 1, 5])
def test_the_segment_decoder_keeps_tight_budgets(
    style: ConstraintStyle, name: str, extra: int
) -> None:
    budget = SHORTEST[name] + extra
    for seed in range(1 if name == "invoice" else 4):
        engine = RandomCompleter(style, seed)
        jobs = [DecodeJob(planner(name), PROMPT, SamplingParams(max_tokens=budget))]
        [o] = SegmentDecoder(engine).run(jobs)
        check(name, o, budget)
    refused = DecodeJob(planner(name), PROMPT, SamplingParams(max_tokens=SHORTEST[name] - 1))
    [o] = SegmentDecoder(RandomCompleter(style, 0)).run([refused])
    assert isinstance(o.error, TokenBudgetError) and o.error.min_tokens == SHORTEST[name]


def test_planner_bound_is_built_once() -> None:
    p = planner("trip")
    assert p.bound is p.bound and isinstance(p.start(), TrieNode)
