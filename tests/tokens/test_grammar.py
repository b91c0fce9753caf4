# ruff: noqa: UP007, UP042, UP045  (Optional, Union and str+Enum: the spellings users write)
"""Grammar values (llguidance segments): records of every field kind validate with Pydantic.

Records are decoded with a random scripted model over SmolLM2's real vocabulary (its
tokenizer only, no weights), sampling at temperature 1 on many seeds so every branch of the
grammars is exercised.
"""

from __future__ import annotations

import datetime as dt
import decimal
import ipaddress
import json
import re
import uuid
from collections.abc import Callable
from enum import Enum
from typing import Annotated, Literal, Optional, Union

import numpy as np
import pytest
from pydantic import AnyUrl, BaseModel, EmailStr, Field, HttpUrl, TypeAdapter, conint, constr

from factorspec_sdk.bench.schemas import ClosingModel, load_hf_tokenizer
from factorspec_sdk.drafter.loop import DecodeJob, Decoder, DecoderConfig
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.errors import RelationDefinitionError
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.relations import relation
from factorspec_sdk.relations.grammar_schema import FORMAT_PATTERNS, decimal_pattern
from factorspec_sdk.relations.layout import GrammarLayout, LeafLayout
from factorspec_sdk.relations.pydantic_layout import build_layout
from factorspec_sdk.tokens.grammar import GrammarCursor, grammar_tables
from factorspec_sdk.tokens.plan import Cursor, Finished, FreeCursor, Planner
from factorspec_sdk.tokens.vocab import TokenizerInfo
from factorspec_sdk.writer.automaton import Writer


@pytest.fixture(scope="module")
def tok() -> TokenizerInfo:
    return TokenizerInfo.from_hf(load_hf_tokenizer())


class Sentiment(BaseModel):
    label: Literal["positive", "negative", "neutral"]
    confidence: float = Field(ge=0, le=1)


class Contact(BaseModel):
    name: str = Field(max_length=30)
    email: EmailStr
    phone: Optional[str] = Field(None, pattern=r"^\+?[0-9]{7,12}$")


class Booking(BaseModel):
    hotel: str = Field(max_length=20)
    check_in: dt.date
    check_out: dt.date
    guests: int = Field(ge=1, le=8)


class Receipt(BaseModel):
    prices: list[float] = Field(max_length=4)
    total: float


class Order(BaseModel):
    amount: decimal.Decimal = Field(max_digits=8, decimal_places=2, ge=0)
    tax: decimal.Decimal = Field(max_digits=5, decimal_places=3)


class Search(BaseModel):
    action: Literal["search"]
    query: str = Field(max_length=20)


class Book(BaseModel):
    action: Literal["book"]
    hotel: str = Field(max_length=20)
    nights: int = Field(ge=1, le=14)


class Step(BaseModel):
    call: Union[Search, Book] = Field(discriminator="action")


class Tally(BaseModel):
    counts: dict[str, int] = Field(max_length=3)


class Quote(BaseModel):
    text: str
    author: str = Field(max_length=20)
    lines: tuple[str, ...] = Field(max_length=2)  # a grammar value: free strings get escapes


class Slot(BaseModel):
    start: dt.time
    end: dt.time
    when: dt.datetime
    length: dt.timedelta


class Category(str, Enum):
    FOOD = "food"
    RENT = "rent"


class Budget(BaseModel):
    limits: dict[Category, int]
    note: Optional[str] = None


class Comment(BaseModel):
    text: str = Field(max_length=12)
    replies: list[Comment] = Field(default=[], max_length=2)


class Thread(BaseModel):
    root: Comment


class Misc(BaseModel):
    id: uuid.UUID
    site: HttpUrl
    any_url: AnyUrl
    v4: ipaddress.IPv4Address
    v6: ipaddress.IPv6Address
    pair: tuple[int, str]
    many: tuple[int, ...] = Field(max_length=3)
    tags: set[str] = Field(max_length=3)
    frozen: frozenset[Literal["a", "b", "c"]]
    either: int | str
    maybe: Optional[float] = None
    step: conint(multiple_of=5, ge=0, le=100)  # type: ignore[valid-type]
    code: constr(pattern=r"^[A-Z]{3}-[0-9]{2}$")  # type: ignore[valid-type]
    flag: Annotated[bool, Field(description="a flag")]


MODELS: list[type[BaseModel]] = [
    Sentiment,
    Contact,
    Booking,
    Receipt,
    Order,
    Step,
    Tally,
    Quote,
    Slot,
    Budget,
    Thread,
    Misc,
]


def _decode(model: type[BaseModel], tok: TokenizerInfo, seeds: range) -> list[str]:
    spec = compile_spec(model)
    jobs = [
        DecodeJob(
            Planner(Writer(spec), tok),
            tok.encode("Answer with JSON:"),
            SamplingParams(temperature=1.0, seed=seed, max_tokens=1200),
        )
        for seed in seeds
    ]
    engine = ScriptedEngine(tok, ClosingModel(tok, seed=7))
    texts = []
    for out in Decoder(engine, DecoderConfig()).run(jobs):
        assert out.error is None, f"{model.__name__}: {out.error!r} after {out.text[:300]!r}"
        texts.append(out.text)
    return texts


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_records_validate_with_pydantic(model: type[BaseModel], tok: TokenizerInfo) -> None:
    for text in _decode(model, tok, range(6)):
        model.model_validate_json(text)  # raises on an invalid record
        json.loads(text)


def test_grammar_fields_are_grammar_layouts() -> None:
    fields = {f.name: f.node for f in build_layout(Booking).fields}
    assert fields["check_in"] == LeafLayout("date")  # the writer writes dates itself
    assert isinstance(fields["guests"], LeafLayout)  # a relation may still read it
    receipt = {f.name: f.node for f in build_layout(Receipt).fields}
    assert isinstance(receipt["total"], GrammarLayout)
    assert isinstance(receipt["prices"], GrammarLayout)  # one value, never unrolled
    assert json.loads(receipt["prices"].schema)["maxItems"] == 4
    comment = {f.name: f.node for f in build_layout(Comment).fields}
    assert "$defs" in json.loads(comment["replies"].schema)  # recursion through $defs


def test_a_relation_over_a_grammar_field_names_it() -> None:
    class Priced(BaseModel):
        price: float = Field(multiple_of=0.5)  # a float with multiple_of stays a grammar value
        qty: int

        @relation
        def positive(self) -> bool:
            return self.price > 0

    with pytest.raises(RelationDefinitionError, match="price"):
        compile_spec(Priced)


def test_relations_beside_grammar_fields_still_hold(tok: TokenizerInfo) -> None:
    class Stay(BaseModel):
        nights: int = Field(ge=1, le=9)
        rate: float = Field(ge=0)
        arrive: dt.date
        leave_day: int = Field(ge=1, le=20)
        arrive_day: int = Field(ge=1, le=10)

        @relation
        def leaves_after_nights(self) -> bool:
            return self.leave_day == self.arrive_day + self.nights

    for text in _decode(Stay, tok, range(8)):
        s = Stay.model_validate_json(text)
        assert s.leave_day == s.arrive_day + s.nights


def test_escapes_round_trip(tok: TokenizerInfo) -> None:
    """Strings may hold every JSON escape in a spec with grammar values; they parse back."""
    spec = compile_spec(Quote)
    planner = Planner(Writer(spec), tok)
    line = 'He said "hi"\\ \n\t/\b\f\r \u00e9 \u2603 \x01'
    body = {"text": line, "author": 'A "B"', "lines": [line, "\\/"]}
    text = json.dumps(body, ensure_ascii=False)
    cursor = planner.start()
    for token in tok.encode(text):
        assert token in planner.allowed(cursor).tolist(), (text, token)
        cursor = planner.advance(cursor, token)
    quote = Quote.model_validate_json(text)
    assert (quote.text, quote.author, quote.lines) == (line, 'A "B"', (line, "\\/"))


class Lines(BaseModel):
    ratio: float  # a grammar value: the spec's free strings are grammar values too...
    lines: list[str] = Field(max_length=3)  # ...but a list's items stay the writer's


def test_a_lists_free_strings_are_the_writers_and_take_escapes(tok: TokenizerInfo) -> None:
    """In a spec with grammar values, a list's items are native free strings: escapes too."""
    planner = Planner(Writer(compile_spec(Lines)), tok)
    lines = ['a\nb "c"', "\\/\u00e9\t"]
    # raw, a character split across tokens is not written (SmolLM2 has no token for the
    # emoji): escaped, it is (``\ud83d\ude00``)
    for ensure_ascii, more in ((False, []), (True, ["\U0001f600"])):
        lines = [*lines, *more]
        text = json.dumps({"ratio": 0.5, "lines": lines}, ensure_ascii=ensure_ascii)
        cursor, native, rest = planner.start(), 0, text.encode()
        while rest:  # the longest token the masks allow that writes on the text
            allowed = [t for t in planner.allowed(cursor).tolist() if tok.vocab[t]]
            token = max((t for t in allowed if rest.startswith(tok.vocab[t])), key=len_of(tok))
            cursor = planner.advance(cursor, token)
            rest = rest[len(tok.vocab[token]) :]
            native += isinstance(cursor, FreeCursor)
        assert isinstance(cursor, Finished) and native > 0
        assert Lines.model_validate_json(text).lines == lines


def len_of(tok: TokenizerInfo) -> Callable[[int], int]:
    return lambda t: len(tok.vocab[t])


def test_cursors_roll_back_exactly(tok: TokenizerInfo) -> None:
    """Masks at old cursors are unchanged after decoding past them (speculative rollback)."""
    spec = compile_spec(Receipt)
    planner = Planner(Writer(spec), tok)
    cursors = [planner.start()]
    text = '{"prices": [1.5, 20, -3e2], "total": 0.25}'
    masks = []
    for token in tok.encode(text):
        masks.append(planner.allowed(cursors[-1]).copy())
        cursors.append(planner.advance(cursors[-1], token))
    assert any(isinstance(c, GrammarCursor) for c in cursors)
    for cursor, mask in reversed(list(zip(cursors, masks, strict=False))):
        assert np.array_equal(planner.allowed(cursor), mask)


def test_format_patterns_stay_within_pydantic() -> None:
    """Every pattern's samples parse with Pydantic; dates have month lengths and leap years."""
    date = re.compile(FORMAT_PATTERNS["date"])
    assert date.match("2024-02-29") and not date.match("2023-02-29")
    assert date.match("2000-02-29") and not date.match("1900-02-29")
    assert not date.match("0000-01-01") and not date.match("2024-04-31")
    ta = TypeAdapter(dt.timedelta)
    for sample in ("P1D", "PT5M", "P2DT3H4M5.5S", "-PT1S"):
        assert re.match(FORMAT_PATTERNS["duration"], sample)
        ta.validate_python(sample)
    for bad in ("P", "PT", "P1DT"):
        assert not re.match(FORMAT_PATTERNS["duration"], bad)
    places = re.compile(f"^{decimal_pattern(5, 2)}$")
    assert places.match("123.45") and not places.match("12345.6") and not places.match("1.456")
    assert not places.match("01") and not places.match("1.50")


def test_the_canonical_tokenization_crosses_every_boundary(tok: TokenizerInfo) -> None:
    """Tokens span trie options, grammar values and the layout between them (`` "``, `` true``,
    ``", "``): the canonical tokens of a whole record are allowed one after the other."""

    class Stay(BaseModel):
        nights: int = Field(ge=1, le=9)
        arrive: dt.date
        note: str
        tags: list[float]
        ok: bool
        rate: float

        @relation
        def more_than_one(self) -> bool:
            return self.nights > 1

    planner = Planner(Writer(compile_spec(Stay)), tok)
    record = {"nights": 3, "arrive": "2026-01-02", "note": 'a "b"', "tags": [1.5, -2]}
    text = json.dumps({**record, "ok": True, "rate": 0.5})
    cursor = planner.start()
    for token in tok.encode(text):
        assert token in planner.allowed(cursor).tolist(), (text, tok.vocab[token])
        cursor = planner.advance(cursor, token)
    assert not len(planner.allowed(cursor))


@pytest.mark.parametrize("model", [Booking, Step, Slot, Misc], ids=lambda m: m.__name__)
def test_speculative_greedy_equals_one_token_per_forward(
    model: type[BaseModel], tok: TokenizerInfo
) -> None:
    """Certain tokens inside grammar segments (forced text, single-token masks) drafted and
    verified give the tokens that plain masked greedy decoding gives, and fewer forwards."""
    spec = compile_spec(model)
    engine = ScriptedEngine(tok, ClosingModel(tok, seed=11))

    def run(config: DecoderConfig) -> list[tuple[list[int], int]]:
        jobs = [
            DecodeJob(
                Planner(Writer(spec), tok),
                tok.encode(f"Record {i}:"),
                SamplingParams(temperature=0.0, max_tokens=800),
            )
            for i in range(3)
        ]
        outs = Decoder(engine, config).run(jobs)
        assert all(o.error is None for o in outs), [o.error for o in outs]
        return [(o.tokens, o.stats.verify_steps) for o in outs]

    plain = run(DecoderConfig(speculative=False))
    fast = run(DecoderConfig(max_guesses=2))
    assert [t for t, _ in fast] == [t for t, _ in plain]
    assert sum(s for _, s in fast) < sum(s for _, s in plain)


class Visit(BaseModel):
    """Grammar segments after trie choices: their first text starts mid-record."""

    nights: int = Field(ge=1, le=9)
    arrive: dt.date
    note: str = Field(max_length=16)
    rates: list[float] = Field(max_length=2)
    paid: bool
    total: float

    @relation
    def long_stays_are_paid(self) -> bool:
        return self.nights < 5 or self.paid


class Nested(BaseModel):
    """A grammar value that nests objects and lists with strings and numbers in them."""

    meta: dict[str, list[float]] = Field(max_length=3)
    tags: dict[str, str] = Field(max_length=2)
    score: float


@pytest.mark.parametrize(
    "model", [Visit, Receipt, Quote, Slot, Misc, Nested], ids=lambda m: m.__name__
)
def test_the_rest_of_a_segment_has_a_grammar_of_its_own(
    model: type[BaseModel], tok: TokenizerInfo
) -> None:
    """`GrammarSegment.rest_grammar`: a fresh llguidance matcher on the rest of a segment
    after any of its tokens, and it takes the record's tokens to the segment's end. In the
    layout text before a value it allows exactly what the segment's matcher allows there;
    inside a value (the rest of the value as any JSON) every token the segment's matcher
    allows, and more. An engine that decodes a segment as one request (vLLM's guidance
    backend) is then allowed what FactorSpec's masks allow (exactly, where the segment goes
    from a layout text): the same holds with llguidance's tokenizer built as vLLM builds it,
    from the Hugging Face tokenizer (``llguidance.hf.from_tokenizer``). Only inside an
    escape or a UTF-8 character is there none."""
    import llguidance
    import llguidance.hf

    planner = Planner(Writer(compile_spec(model)), tok)
    tables = grammar_tables(tok)
    as_vllm = llguidance.hf.from_tokenizer(load_hf_tokenizer(), len(tok.vocab))
    rng = np.random.default_rng(3)
    exact = inside = 0
    for _ in range(4):
        cursor = planner.start()
        walked: list[tuple[Cursor, int]] = []
        while not isinstance(cursor, Finished) and len(walked) < 150:
            allowed = planner.allowed(cursor)
            closing = [t for t in allowed.tolist() if b'"' in tok.vocab[t]]
            pick = closing if closing and rng.random() < 0.3 else allowed
            token = int(rng.choice(pick))
            walked.append((cursor, token))
            cursor = planner.advance(cursor, token)
        for i, (at, _) in enumerate(walked):
            if not isinstance(at, GrammarCursor):
                continue
            grammar = at.segment.rest_grammar(at.tokens)
            if grammar is None:
                assert at.segment.layout_left(at.tokens) is None
                data = b"".join(tok.vocab[t] for t in at.tokens)
                assert b"\\" in data or not data.decode("utf-8", "ignore").encode() == data
                continue
            ours = at.step().ids
            m = llguidance.LLMatcher(tables.tokenizer, llguidance.grammar_from("lark", grammar))
            assert not m.is_error(), (m.get_error(), grammar)
            theirs = llguidance.LLMatcher(as_vllm, llguidance.grammar_from("grammar", grammar))
            for matcher in (m, theirs):
                rest = tables.ids(matcher.compute_bitmask())
                if at.segment.layout_left(at.tokens) is not None:
                    assert np.array_equal(rest, ours)
                else:
                    assert np.isin(ours, rest).all(), grammar
            if at.segment.layout_left(at.tokens) is None:
                inside += 1
            else:
                exact += 1
            for later, token in walked[i:]:
                if not (isinstance(later, GrammarCursor) and later.segment is at.segment):
                    assert m.is_accepting()  # the segment ended where the record left it
                    break
                assert m.consume_token(token), (m.get_error(), grammar)
    assert exact and inside, (exact, inside)  # between values and inside them
