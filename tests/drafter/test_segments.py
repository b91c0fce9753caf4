"""The segment decoder (completion engines) on a scripted model: fast, no vLLM.

Test doubles turn the scripted logits engine into completion engines: a tokens-style one that
takes the masked argmax, and `tests.helpers.GuidedEngine`, which decodes regex and grammar
requests under llguidance's real matcher as vLLM's ``guidance`` backend does. The segment
decoder's records are compared token for token with the logits decoder's on the same model.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from collections.abc import Sequence

import numpy as np
import pytest
from pydantic import BaseModel, Field

from examples.booking import FLEXIBLE_CONTEXT, Booking
from examples.invoice import SAMPLE_CONTEXT as INVOICE_CONTEXT
from examples.invoice import Invoice
from factorspec_sdk import Client, GenerationError
from factorspec_sdk.bench.schemas import load_hf_tokenizer
from factorspec_sdk.drafter.loop import DecodeJob, DecoderConfig
from factorspec_sdk.drafter.segments import (
    SegmentDecoder,
    _close_tail,
    _free_regex,
    continuations,
)
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.completion import (
    FREE_STRING_REGEX,
    Completion,
    CompletionEngine,
    CompletionReply,
    ConstraintStyle,
    is_completion_engine,
    regex_alternatives,
    regex_escape,
)
from factorspec_sdk.engines.openai_server import DIALECTS, detect_server
from factorspec_sdk.engines.protocol import ChatMessage
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.errors import EngineError
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.graph.stopping import stoppable
from factorspec_sdk.tokens.plan import (
    Cursor,
    Finished,
    FreeCursor,
    Planner,
    TrieNode,
    planner_for,
)
from factorspec_sdk.tokens.vocab import TokenizerInfo
from factorspec_sdk.writer.automaton import FreeString, Writer
from tests.helpers import (
    TRIP_CONTEXT,
    GuidedEngine,
    Pick,
    Post,
    Signup,
    Trip,
    tiny_tokenizer,
)
from tests.helpers import spans_and_choices as count_spans_and_choices

TOK = tiny_tokenizer()


def scripted(seed: int = 2) -> ScriptedEngine:
    return ScriptedEngine.random(TOK, seed=seed, temperature_scale=2.0)


class MaskedArgmax:
    """A tokens-style `CompletionEngine` over a logits engine (greedy), recording requests."""

    def __init__(self, engine: ScriptedEngine, lie: bool = False) -> None:
        self.engine = engine
        self.lie = lie
        self.requests: list[Completion] = []

    @property
    def name(self) -> str:
        return "masked-argmax"

    @property
    def tokenizer(self) -> TokenizerInfo:
        return self.engine.tokenizer

    @property
    def constraint_style(self) -> ConstraintStyle:
        return "tokens"

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        return self.engine.apply_chat_template(messages)

    def complete(self, requests: Sequence[Completion]) -> list[CompletionReply]:
        out = []
        for r in requests:
            self.requests.append(r)
            assert r.allowed_ids is not None and r.max_tokens == 1
            seq = self.engine.new_sequence(r.prompt_ids[:-1])
            try:
                row = self.engine.extend([(seq, r.prompt_ids[-1:])])[0][-1]
            finally:
                self.engine.release(seq)
            allowed = np.asarray(r.allowed_ids)
            token = int(allowed[np.argmax(row[allowed])])
            if self.lie:
                token = next(t for t in range(self.tokenizer.vocab_size) if t not in allowed)
            text = self.tokenizer.decode([token]).decode("utf-8", "replace")
            out.append(CompletionReply(text, [token], 1))
        return out

    def close(self) -> None:
        pass


class Note(BaseModel):
    """A record with a free string (the model picks every character)."""

    title: str = Field(min_length=2, max_length=12)
    stars: int = Field(ge=1, le=5)


CASES: list[tuple[type[BaseModel], object]] = [
    (Pick, None),
    (Trip, TRIP_CONTEXT),
    (Note, None),
    (Invoice, INVOICE_CONTEXT),
    (Booking, FLEXIBLE_CONTEXT),  # a date written digit by digit, the oracle deciding
]


class Review(BaseModel):
    """A free string and a float no relation reads: grammar values both (a spec with grammar
    values writes its free strings as grammar values too)."""

    body: str = Field(max_length=300)
    rating: float = Field(ge=0, le=5)


class Comment(BaseModel):
    """A free string the writer writes itself, and a choice."""

    body: str = Field(max_length=300)
    stars: int = Field(ge=1, le=5)


class Memo(BaseModel):
    """Grammar values between free strings and choices: a float, a date, a list of floats."""

    title: str = Field(max_length=20)
    score: float = Field(ge=-10, le=10)
    due: dt.date
    stars: int = Field(ge=1, le=5)
    weights: list[float] = Field(max_length=3)
    note: str


BODY = "the jar arrived cracked, the blade works, and the motor is quiet enough for mornings"

SPAN_CASES: list[tuple[type[BaseModel], object]] = [
    *CASES,
    (Review, None),
    (Comment, None),
    (Memo, None),
]


def kinds(requests: Sequence[Completion]) -> list[str]:
    """What each request asked: ``token``, ``regex`` or ``grammar``."""
    return [
        "token" if r.allowed_ids is not None else "regex" if r.regex is not None else "grammar"
        for r in requests
    ]


def spans_and_choices(model: type[BaseModel], context: object, tokens: Sequence[int]) -> int:
    """`tests.helpers.spans_and_choices` of a record of ``model`` on the tiny vocabulary."""
    return count_spans_and_choices(planner_for(compile_spec(model, context), TOK), tokens)


def test_a_free_span_is_one_request() -> None:
    """An 84-token free string is one request, and so is a grammar segment, not a token each.

    Review's record (a free string and a float, both grammar values) is one grammar segment
    from its first byte to its last: one request. Comment's free string is one regex
    request, its stars one token among five.
    """
    assert len(TOK.encode(BODY)) >= 50
    for model, value, asked in [
        (Review, {"body": BODY, "rating": 4.5}, ["grammar"]),
        (Comment, {"body": BODY, "stars": 4}, ["regex", "token"]),
    ]:
        script = json.dumps(value)
        spans = GuidedEngine(ScriptedEngine.from_script(TOK, script))
        result = Client(spans).generate(model, "go", return_result=True, max_tokens=500)
        assert result.value == model.model_validate(value)
        assert kinds(spans.requests) == asked
        assert len(spans.requests) == spans_and_choices(model, None, result.tokens)
        # max_tokens is the budget left
        prompt = result.stats.prompt_tokens
        assert [r.max_tokens for r in spans.requests if r.allowed_ids is None] == [
            500 - (len(r.prompt_ids) - prompt) for r in spans.requests if r.allowed_ids is None
        ]
        per_token = MaskedArgmax(ScriptedEngine.from_script(TOK, script))
        same = Client(per_token).generate(model, "go", return_result=True, max_tokens=500)
        assert same.tokens == result.tokens
        assert len(per_token.requests) >= len(TOK.encode(BODY))  # the tokens style's cost
    # a free string's regex: its rest, then as far into the text after it as a token reaches
    assert spans.requests[0].regex is not None and spans.requests[0].regex.endswith('"(,)?')


@pytest.mark.parametrize(("model", "context"), SPAN_CASES, ids=lambda c: getattr(c, "__name__", ""))
@pytest.mark.parametrize("seed", [2, 5])
def test_greedy_spans_equal_the_logits_decoder(
    model: type[BaseModel], context: object, seed: int
) -> None:
    """One request per free span and per genuine choice, and the logits decoder's tokens.

    The engine's regex or grammar allows every token FactorSpec's mask allows, and the reply
    is taken while the masks allow it, so greedy records are the same token for token.
    """
    by_logits = Client(scripted(seed)).generate(
        model, "go", context=context, return_result=True, max_tokens=900
    )
    spans = GuidedEngine(scripted(seed))
    by_spans = Client(spans).generate(
        model, "go", context=context, return_result=True, max_tokens=900
    )
    assert by_spans.tokens == by_logits.tokens
    # a run takes the choices and strings after a string in one request (`drafter.runs`)
    assert len(spans.requests) <= spans_and_choices(model, context, by_spans.tokens)
    one_token = [r for r in spans.requests if r.allowed_ids is not None]
    assert all(len(r.allowed_ids or ()) > 1 for r in one_token)  # genuine choices only
    assert by_spans.stats.verify_steps == sum(r.forwards for r in spans.replies)


def test_a_refused_reply_asks_that_token_alone() -> None:
    """Where a span's reply leaves FactorSpec's masks, that position is one token request.

    On a byte-level vocabulary without a token for ``é``, the engine's regex allows its two
    UTF-8 bytes as two tokens; FactorSpec's masks never allow a token that splits a
    character. The record takes the string up to them, asks the next token within its mask
    (as the embedded engine would choose it), and sends the rest of the string as a span.
    """
    tok = TokenizerInfo.tiny_bytes(['{"', '": ', ', "', '",'])
    script = json.dumps({"body": "café au lait", "stars": 2}, ensure_ascii=False)
    engine = GuidedEngine(ScriptedEngine.from_script(tok, script))
    result = Client(engine).generate(Comment, "go", return_result=True, max_tokens=60)
    assert result.value.body.startswith("caf") and "é" not in result.value.body
    assert kinds(engine.requests)[:3] == ["regex", "token", "regex"]
    assert engine.replies[0].text.startswith("café")  # the engine wrote it; it was refused
    logits = Client(ScriptedEngine.from_script(tok, script)).generate(
        Comment, "go", return_result=True, max_tokens=60
    )
    assert result.tokens == logits.tokens


def test_regex_engines_take_grammar_segments_as_one_request() -> None:
    """SGLang's style: choices as regex alternatives, a grammar segment as its grammar."""
    for ids in (True, False):  # token ids back (SGLang's output_ids) or text only
        for model, value, asked in [
            (Review, {"body": BODY, "rating": 4.5}, ["grammar"]),
            (Comment, {"body": BODY, "stars": 4}, ["regex", "regex"]),
        ]:
            script = json.dumps(value)
            engine = GuidedEngine(ScriptedEngine.from_script(TOK, script), "regex", ids=ids)
            result = Client(engine).generate(model, "go", return_result=True)
            assert result.value == model.model_validate(value)
            assert kinds(engine.requests) == asked
    for seed in (2, 5):
        engine = GuidedEngine(scripted(seed), "regex")
        record = Client(engine).generate(Memo, "go", max_tokens=900)
        Memo.model_validate(record.model_dump())
        assert "grammar" in kinds(engine.requests)


def test_a_string_left_inside_an_escape_is_asked_a_token_at_a_time() -> None:
    """A regex starts between characters: where the one-token answer to a refused reply
    opens an escape (``\\``), its next token is asked alone too, then the string's rest goes
    as a span again; the record is the logits decoder's."""
    tok = TokenizerInfo.tiny_bytes(['{"', '": ', ', "', '",'])
    target = b'{"body": "ab\\nc", "stars": 2}'
    eos = tok.eos_ids[0]

    def logits(prefix: Sequence[int]) -> np.ndarray:
        row = np.zeros(tok.vocab_size, dtype=np.float32)
        text = tok.decode(list(prefix))
        if b'{"body": "' not in text:
            return row
        record = b'{"body": "' + text.rsplit(b'{"body": "', 1)[1]
        if record == b'{"body": "ab':
            row[0xC3], row[ord("\\")] = 10.0, 5.0  # the start of an "é", else an escape
        elif record == target:
            row[eos] = 10.0
        elif target.startswith(record):
            row[target[len(record)]] = 10.0
        return row

    engine = GuidedEngine(ScriptedEngine(tok, logits))
    result = Client(engine).generate(Comment, "go", return_result=True, max_tokens=60)
    assert result.value == Comment(body="ab\nc", stars=2)
    assert kinds(engine.requests)[:4] == ["regex", "token", "token", "regex"]
    by_logits = Client(ScriptedEngine(tok, logits)).generate(
        Comment, "go", return_result=True, max_tokens=60
    )
    assert result.tokens == by_logits.tokens


class Fetch(BaseModel):
    """o20375's shape: an object of strings, then a float: one grammar segment."""

    headers: dict[str, str]
    size: float


FETCH = {
    "headers": {"note": BODY, "etag": "5d41402abc4b2a76b9719d911017c592", "type": "text/html"},
    "size": 1234.5,
}


class Misreads(GuidedEngine):
    """A `GuidedEngine` whose grammar replies have, at the given token of each (by reply,
    -1 for none), a token its grammar allowed and FactorSpec's masks refuse (a control
    byte in a string: a tokenizer the engine reads differently, as vLLM's may), the reply
    cut there."""

    def __init__(self, engine: ScriptedEngine, at: Sequence[int]) -> None:
        super().__init__(engine)
        self.at = list(at)

    def _one(self, r: Completion) -> CompletionReply:
        reply = super()._one(r)
        if r.grammar is None or not self.at or reply.token_ids is None:
            return reply
        at = self.at.pop(0)
        if at < 0:
            return reply
        ids = [*reply.token_ids[:at], 1]  # b"\x01"
        return CompletionReply(self.tokenizer.decode(ids).decode(), ids, len(ids))


def test_a_grammar_value_refused_inside_goes_on_as_a_span_of_its_rest() -> None:
    """A grammar segment whose reply is refused inside a value: that position is asked as
    one token, then the segment's rest goes as one request again (the rest of the open
    string, the object's members and the number as any JSON, then the segment's own text),
    where it went one token per request (125 requests for this record); the record is the
    logits decoder's."""
    tok = TokenizerInfo.tiny_bytes(['{"', '": ', ', "', '",', '"}', "the ", "and "])
    script = json.dumps(FETCH)
    engine = Misreads(ScriptedEngine.from_script(tok, script), [20])
    result = Client(engine).generate(Fetch, "go", return_result=True, max_tokens=400)
    assert result.value == Fetch.model_validate(FETCH)
    assert kinds(engine.requests) == ["grammar", "token", "grammar"]
    assert engine.requests[2].grammar is not None
    assert "STRING_REST" in engine.requests[2].grammar  # it starts inside the note
    by_logits = Client(ScriptedEngine.from_script(tok, script)).generate(
        Fetch, "go", return_result=True, max_tokens=400
    )
    assert result.tokens == by_logits.tokens


def test_a_span_refused_by_the_budget_or_at_once_leaves_the_rest_to_the_masks() -> None:
    """A grammar span refused by the budget (the model writes on where the budget masks
    must close the value) or at its first token goes on one token per request, as before
    rest spans existed, not a span and a token in turn (a span of the rest would be refused
    again, its decode steps lost); where the budget masks are tight from the segment's
    first token (50 tokens here) and its strings are not plain (its keys are guides), no
    span is sent at all. The records are the logits decoder's."""
    script = json.dumps({"headers": {"note": BODY, "etag": "abc"}, "size": 7})
    for max_tokens in (80, 50):
        engine = GuidedEngine(ScriptedEngine.from_script(TOK, script))
        result = Client(engine).generate(Fetch, "go", return_result=True, max_tokens=max_tokens)
        asked = kinds(engine.requests)
        if max_tokens == 80:
            assert asked[0] == "grammar" and set(asked[1:]) == {"token"}
        else:
            assert set(asked) == {"token"}
        assert len(asked) > 10
        by_logits = Client(ScriptedEngine.from_script(TOK, script)).generate(
            Fetch, "go", return_result=True, max_tokens=max_tokens
        )
        assert result.tokens == by_logits.tokens
    tok = TokenizerInfo.tiny_bytes(['{"', '": ', ', "', '",', '"}', "the ", "and "])
    script = json.dumps(FETCH)
    engine = Misreads(ScriptedEngine.from_script(tok, script), [20, 0])
    result = Client(engine).generate(Fetch, "go", return_result=True, max_tokens=400)
    asked = kinds(engine.requests)
    assert asked[:4] == ["grammar", "token", "grammar", "token"]
    assert set(asked[4:]) == {"token"}
    by_logits = Client(ScriptedEngine.from_script(tok, script)).generate(
        Fetch, "go", return_result=True, max_tokens=400
    )
    assert result.tokens == by_logits.tokens


class Stamp(BaseModel):
    """Bounded grammar values (a pair of booleans, a string of at most 8 characters), then
    a choice."""

    pair: tuple[bool, bool]
    code: str = Field(max_length=8)
    stars: int = Field(ge=1, le=5)


def test_a_grammar_spans_max_tokens_is_what_the_segment_can_still_take() -> None:
    """A grammar span's ``max_tokens`` is not the record's whole budget: at most the bytes
    the segment can still write where its values are bounded (two booleans, 8 characters
    of at most 12 bytes each, and the texts after them, the space owed to the stars aside),
    and at most the budget less the fewest tokens after it (the space, the digit, the
    brace), so a reply the model runs on with stops there."""
    script = json.dumps({"pair": [True, False], "code": "ab12", "stars": 4})
    by_logits = Client(ScriptedEngine.from_script(TOK, script)).generate(
        Stamp, "go", return_result=True, max_tokens=500
    )
    longest = len("[false, false]" + ', "code": ' + '"' + "x" * 12 * 8 + '"' + ', "stars":')
    for budget, most in [(500, longest), (40, 40 - 6 - 3)]:
        engine = GuidedEngine(ScriptedEngine.from_script(TOK, script))
        result = Client(engine).generate(Stamp, "go", return_result=True, max_tokens=budget)
        assert kinds(engine.requests) == ["grammar", "token"]
        prompt = result.stats.prompt_tokens
        assert len(engine.requests[0].prompt_ids) - prompt == len(TOK.encode('{"pair": '))
        assert engine.requests[0].max_tokens == most
        assert result.tokens == by_logits.tokens


@pytest.mark.parametrize(("model", "context"), [(Comment, None), (Post, None), (Signup, None)])
def test_a_free_strings_regex_allows_every_token_the_mask_allows(
    model: type[BaseModel], context: object
) -> None:
    """On SmolLM2's vocabulary, as vLLM's guidance backend masks a regex (llguidance's
    tokenizer built from the Hugging Face one): every token FactorSpec's mask allows in a
    free string, its closing tokens (``",``, and ``"],`` into the options after it) included,
    is one the string's regex allows.
    That is what makes a span's greedy reply the embedded engine's. Strings read by length
    (Post) and by value (Signup) too; those read with ``startswith`` are the documented
    exception (their regex is a subset)."""
    import llguidance
    import llguidance.hf

    hf = load_hf_tokenizer()
    tok = TokenizerInfo.from_hf(hf)
    as_vllm = llguidance.hf.from_tokenizer(hf, len(tok.vocab))
    planner = planner_for(compile_spec(model, context), tok)
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(3):
        cursor = planner.start()
        while not isinstance(cursor, Finished):
            allowed = planner.allowed(cursor)
            if isinstance(cursor, FreeCursor):
                rests = planner.close_rests(cursor.free, critical=False)
                regex = _free_regex(cursor) + _close_tail(cursor, planner.free_tables(), rests)
                m = llguidance.LLMatcher(as_vllm, llguidance.grammar_from("regex", regex))
                bits = np.unpackbits(
                    np.frombuffer(m.compute_bitmask(), dtype=np.uint8), bitorder="little"
                )
                assert bits[allowed].all(), [tok.vocab[t] for t in allowed if not bits[t]][:5]
                checked += 1
                closing = [t for t in allowed.tolist() if b'"' in tok.vocab[t]]
                if closing and rng.random() < 0.2:
                    allowed = np.asarray(closing)
            cursor = planner.advance(cursor, int(rng.choice(allowed)))
    assert checked


def test_the_double_is_a_completion_engine() -> None:
    fake = MaskedArgmax(scripted())
    assert isinstance(fake, CompletionEngine) and is_completion_engine(fake)
    assert not is_completion_engine(scripted())


@pytest.mark.parametrize(("model", "context"), CASES, ids=lambda c: getattr(c, "__name__", ""))
@pytest.mark.parametrize("seed", [2, 5])
def test_greedy_segments_equal_the_logits_decoder(
    model: type[BaseModel], context: object, seed: int
) -> None:
    by_logits = Client(scripted(seed)).generate(
        model, "go", context=context, return_result=True, max_tokens=900
    )
    fake = MaskedArgmax(scripted(seed))
    by_segments = Client(fake).generate(
        model, "go", context=context, return_result=True, max_tokens=900
    )
    assert by_segments.tokens == by_logits.tokens
    assert by_segments.value == by_logits.value
    stats = by_segments.stats
    # the engine is asked only where the mask leaves a choice; certain tokens are appended
    assert all(r.allowed_ids is not None and len(r.allowed_ids) > 1 for r in fake.requests)
    assert stats.verify_steps == len(fake.requests)
    assert stats.certain_drafted + len(fake.requests) == stats.tokens == len(by_segments.tokens)
    # every request's prompt is the chat prompt plus the record so far
    for r in fake.requests:
        assert (
            r.prompt_ids[stats.prompt_tokens :]
            == by_segments.tokens[: len(r.prompt_ids) - stats.prompt_tokens]
        )


@pytest.mark.parametrize(("model", "context"), CASES[1:3], ids=lambda c: getattr(c, "__name__", ""))
def test_streams_and_provenance_equal_the_logits_decoder(
    model: type[BaseModel], context: object
) -> None:
    """A segment decoder's record streams the same views and explains itself the same."""
    streams = [
        Client(engine).stream(model, "go", context=context, max_tokens=900)
        for engine in (scripted(), MaskedArgmax(scripted()))
    ]
    views = [[v.model_dump() for v in stream] for stream in streams]
    assert views[0] == views[1] and len(views[0]) >= 2
    results = [stream.result for stream in streams]
    assert results[0].provenance == results[1].provenance


class UnstoppedPlanner(Planner):
    """A planner whose prefetch plans every option even after the reply is back.

    The scripted engine answers at once, before a real prefetch would plan anything; this
    one fixes which thread plans what, whatever the timing (its queries run under an event
    of its own, never set, so the decoder's does not stop them either).
    """

    def prefetch(self, cursor: Cursor, depth: int = 1, stop: threading.Event | None = None) -> None:
        with stoppable(threading.Event()):
            super().prefetch(cursor, depth)


@pytest.mark.parametrize(("model", "context"), CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_overlap_plans_the_next_segments_during_the_request(
    model: type[BaseModel], context: object
) -> None:
    """With overlap, a worker plans ahead while the engine answers; no token changes."""
    spec = compile_spec(model, context)
    runs = {}
    for overlap in (False, True):
        planner = UnstoppedPlanner(Writer(spec), TOK)
        job = DecodeJob(planner, TOK.encode("go"), SamplingParams(max_tokens=900))
        decoder = SegmentDecoder(MaskedArgmax(scripted()), DecoderConfig(overlap=overlap))
        [outcome] = decoder.run([job])
        assert outcome.error is None
        runs[overlap] = (outcome.tokens, planner.stats)
    (tokens_off, off), (tokens_on, on) = runs[False], runs[True]
    assert tokens_on == tokens_off
    assert off.critical_segments == off.segments > 1
    # the prefetch ends before the reply is read, so which thread planned what is fixed
    assert 1 <= on.critical_segments < off.critical_segments


def test_a_prefetch_cut_short_changes_no_token() -> None:
    """The scripted engine answers at once: prefetches stop early; the record is the same."""
    spec = compile_spec(Invoice, INVOICE_CONTEXT)
    runs = []
    for overlap in (False, True):
        planner = Planner(Writer(spec), TOK)
        job = DecodeJob(planner, TOK.encode("go"), SamplingParams(max_tokens=900))
        [outcome] = SegmentDecoder(MaskedArgmax(scripted()), DecoderConfig(overlap=overlap)).run(
            [job]
        )
        assert outcome.error is None
        runs.append(outcome.tokens)
    assert runs[0] == runs[1]


def test_speculation_off_asks_for_every_token() -> None:
    fake = MaskedArgmax(scripted())
    on = Client(MaskedArgmax(scripted())).generate(
        Trip, "go", context=TRIP_CONTEXT, return_result=True
    )
    off = Client(fake, speculative=False).generate(
        Trip, "go", context=TRIP_CONTEXT, return_result=True
    )
    assert off.tokens == on.tokens
    assert len(fake.requests) == off.stats.verify_steps == len(off.tokens)


def test_batches_send_one_request_per_active_record() -> None:
    fake = MaskedArgmax(scripted())
    client = Client(fake)
    batch = client.generate_batch(Note, ["a", "b", "c"], return_result=True)
    singles = [
        Client(MaskedArgmax(scripted())).generate(Note, p, return_result=True) for p in "abc"
    ]
    assert [r.tokens for r in batch] == [r.tokens for r in singles]


def test_an_engine_that_ignores_the_mask_is_an_error() -> None:
    with pytest.raises(GenerationError, match="ignored the constraint"):
        Client(MaskedArgmax(scripted(), lie=True)).generate(Note, "go")


def test_budget_and_style_errors() -> None:
    from factorspec_sdk import TokenBudgetError

    with pytest.raises(TokenBudgetError) as info:
        Client(MaskedArgmax(scripted())).generate(Trip, "go", context=TRIP_CONTEXT, max_tokens=5)
    assert info.value.max_tokens == 5 and info.value.min_tokens > 5

    class RegexOnly(MaskedArgmax):
        @property
        def constraint_style(self) -> ConstraintStyle:
            return "regex"

    with pytest.raises(EngineError, match="token constraints"):
        SegmentDecoder(
            RegexOnly(scripted()), Client(scripted()).config.__class__(speculative=False)
        )


# ------------------------------------------------------------------ regex constraints


def test_regex_alternatives_match_exactly_the_texts() -> None:
    texts = ['Paris", "days": ', "Rome", "a.b|c (d)* [e] {f} /g\\h"]
    pattern = regex_alternatives(texts)
    for t in texts:
        assert re.fullmatch(pattern, t)
    for t in ["Pari", "Romee", "a.b", "aXb|c (d)* [e] {f} /g\\h"]:
        assert not re.fullmatch(pattern, t)
    assert regex_escape("a b") == "a b"  # no escaped spaces: some grammar compilers reject them
    assert regex_escape("\n") == "\\x0a"
    with pytest.raises(ValueError):
        regex_alternatives([])


def test_continuations_are_the_option_texts() -> None:
    spec = compile_spec(Trip, TRIP_CONTEXT)
    planner = Planner(Writer(spec), TOK)
    cursor = planner.start()
    while (token := planner.certain(cursor)) is not None:
        cursor = planner.advance(cursor, token)
    assert isinstance(cursor, TrieNode)
    paths = continuations(cursor, TOK.vocab)
    assert len(paths) == len(cursor.ids) or len(paths) > 1
    for text, ids in paths:
        assert TOK.decode(ids).decode() == text
        node = cursor
        for t in ids:
            node = planner.advance(node, t)  # type: ignore[assignment]
    # each continuation is a feasible city and the forced text up to the next choice, less
    # the space before the next value (tokenized with that value: `` 3``, `` -``)
    assert {t.split('"')[0] for t, _ in paths} <= set(TRIP_CONTEXT)
    assert all(t.endswith('":') for t, _ in paths)


def test_free_string_regex_bounds() -> None:
    free = FreeString(state=None, written="ab", min_length=4, max_length=6, close_suffix="")  # type: ignore[arg-type]
    pattern = _free_regex(FreeCursor(free))
    assert re.fullmatch(pattern, 'cd"') and re.fullmatch(pattern, 'cdef"')
    assert not re.fullmatch(pattern, 'c"') and not re.fullmatch(pattern, 'cdefg"')
    assert not re.fullmatch(pattern, 'c\\d"') and not re.fullmatch(pattern, 'c"d"')
    open_ended = FreeString(state=None, written="", min_length=0, max_length=None, close_suffix="")  # type: ignore[arg-type]
    assert _free_regex(FreeCursor(open_ended)) == FREE_STRING_REGEX


# ------------------------------------------------------------------ server dialects


def test_dialects_put_the_constraint_where_each_server_reads_it() -> None:
    tokens = Completion([1, 2], 1, allowed_ids=[5, 6], session="rec-1")
    regex = Completion([1, 2], 9, regex="(a|b)", seed=4)
    vllm, sglang = DIALECTS["vllm"], DIALECTS["sglang"]
    assert vllm.route == "/v1/completions" and sglang.route == "/generate"
    assert vllm.request(tokens, "m") == {
        "model": "m",
        "prompt": [1, 2],
        "max_tokens": 1,
        "temperature": 0.0,
        "top_p": 1.0,
        "skip_special_tokens": False,
        "return_token_ids": True,
        "allowed_token_ids": [5, 6],
    }
    assert vllm.request(regex, "m")["structured_outputs"] == {"regex": "(a|b)"}
    assert vllm.request(regex, "m")["seed"] == 4
    assert sglang.request(regex, "m") == {
        "input_ids": [1, 2],
        "sampling_params": {
            "max_new_tokens": 9,
            "temperature": 0.0,
            "top_p": 1.0,
            "regex": "(a|b)",
            "skip_special_tokens": False,
            "sampling_seed": 4,
        },
    }
    with pytest.raises(EngineError):
        sglang.request(tokens, "m")
    grammar = Completion([1, 2], 9, grammar='start: "a"\n')
    assert vllm.request(grammar, "m")["structured_outputs"] == {"grammar": 'start: "a"\n'}
    assert sglang.request(grammar, "m")["sampling_params"]["ebnf"] == 'start: "a"\n'
    assert "regex" not in sglang.request(grammar, "m")["sampling_params"]
    assert vllm.reply(
        {"choices": [{"text": "x", "token_ids": [7, 2]}], "usage": {"completion_tokens": 2}}
    ) == ("x", [7, 2], 2)
    assert sglang.reply(
        {"text": "ab", "output_ids": [3, 4], "meta_info": {"completion_tokens": 2}}
    ) == ("ab", [3, 4], 2)
    assert detect_server("vllm") == "vllm" and detect_server("sglang") == "sglang"
    assert detect_server("factorspec") == "factorspec" and detect_server("openai") == "unknown"
    with pytest.raises(ValueError):
        Completion([1], 1)
    with pytest.raises(ValueError):
        Completion([1], 1, regex="a", grammar='start: "a"')
    with pytest.raises(ValueError):
        Completion([1], 0, regex="a")


def test_every_request_of_a_record_carries_the_records_affinity_key() -> None:
    """A router keys on it (X-Session-ID, X-SMG-Routing-Key): one key per record, never shared."""
    fake = MaskedArgmax(scripted())
    client = Client(fake)
    prompts = [f"trip {i}" for i in range(3)]
    client.generate_batch(Trip, prompts, contexts=[TRIP_CONTEXT] * 3)
    client.generate(Trip, "trip 0", context=TRIP_CONTEXT)  # the same prompt again: a new key
    firsts: dict[str | None, list[int]] = {}
    for r in fake.requests:  # every later request of a key extends its first one's prompt
        first = firsts.setdefault(r.session, r.prompt_ids)
        assert r.prompt_ids[: len(first)] == first
    assert None not in firsts and len(firsts) == 4
