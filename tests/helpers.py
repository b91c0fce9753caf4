"""Small shared test fixtures: a hand-made vocabulary and toy models."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from factorspec_sdk import distinct, relation
from factorspec_sdk.engines.completion import Completion, CompletionReply, ConstraintStyle
from factorspec_sdk.engines.protocol import ChatMessage
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.graph import CompiledSpec
from factorspec_sdk.tokens.grammar import GrammarCursor, GrammarSegment, grammar_tables
from factorspec_sdk.tokens.plan import Finished, FreeCursor, Planner, planner_for
from factorspec_sdk.tokens.vocab import TokenizerInfo
from factorspec_sdk.writer.automaton import Writer, WriterState

CHARS = sorted({chr(c) for c in range(32, 127)} | {"\n"})
MULTI = [
    '{"',
    '": ',
    ', "',
    '"}',
    '",',
    "}, {",
    "true",
    "false",
    "null",
    "city",
    "Paris",
    "Par",
    "Berlin",
    "Rome",
    "ma",
    "first_day",
    "last_day",
]


def tiny_tokenizer() -> TokenizerInfo:
    """~90 pieces: every single character plus a few merges (greedy longest match)."""
    return TokenizerInfo.tiny(CHARS + MULTI)


class Pick(BaseModel):
    """A toy record with a small space of valid values (12 records)."""

    letter: Literal["x", "y", "z"]
    n: int = Field(ge=0, le=3)
    big: bool

    @relation
    def big_means_n_above_one(self) -> bool:
        return self.big == (self.n > 1)


class Leg(BaseModel):
    city: str
    first_day: int
    last_day: int


class Trip(BaseModel):
    """A toy trip: every city once, consecutive days, fixed stay lengths."""

    legs: list[Leg] = Field(max_length=4)

    @relation
    def cities(self, ctx: dict[str, int]) -> bool:
        return len(self.legs) == len(ctx) and all(leg.city in ctx for leg in self.legs)

    @relation
    def chain(self, ctx: dict[str, int]) -> bool:
        return (
            self.legs[0].first_day == 1
            and all(b.first_day == a.last_day for a, b in zip(self.legs, self.legs[1:]))
            and all(leg.last_day - leg.first_day + 1 == ctx[leg.city] for leg in self.legs)
        )

    @relation
    def once(self) -> bool:
        return distinct(leg.city for leg in self.legs)


TRIP_CONTEXT = {"Paris": 3, "Rome": 2, "Parma": 4}


class Product(BaseModel):
    """An invoice line whose amount is a product of two fields (nonlinear arithmetic)."""

    quantity: int = Field(ge=1, le=20)
    price: int = Field(ge=1, le=20)
    amount: int = Field(ge=1, le=400)

    @relation
    def amount_is_product(self) -> bool:
        return self.amount == self.quantity * self.price


class Post(BaseModel):
    """A title of odd length fixed by ``n``, a body longer than the title, an optional note."""

    title: str = Field(max_length=12)
    n: int = Field(ge=0, le=9)
    body: str
    note: str | None = None

    @relation
    def title_length(self) -> bool:
        return len(self.title) == 2 * self.n + 1 and self.n >= 2

    @relation
    def body_longer(self) -> bool:
        return len(self.body) > len(self.title) and len(self.body) % 3 == 0

    @relation
    def note_short(self) -> bool:
        return self.note is None or 1 <= len(self.note) <= 2


class Signup(BaseModel):
    """Free strings compared by value: with constants, a constant set and each other."""

    username: str = Field(max_length=4)
    password: str = Field(min_length=2, max_length=4)
    again: str = Field(max_length=4)
    role: str = Field(max_length=5)

    @relation
    def not_reserved(self) -> bool:
        return self.username not in ("ab", "a", "root") and self.username != ""

    @relation
    def confirmed(self) -> bool:
        return self.again == self.password and self.password != self.username

    @relation
    def admins_have_long_names(self) -> bool:
        return (self.role == "admin") == (len(self.username) == 4)


def random_record(
    planner: Planner, tok: TokenizerInfo, rng: np.random.Generator, close: float = 0.3
) -> str:
    """A record sampled uniformly among the tokens the masks allow at each step.

    In a free string the walk takes a token with a quote with probability ``close`` (when
    one is allowed), so that both short and long strings occur.
    """
    cursor, ids = planner.start(), []
    while not isinstance(cursor, Finished):
        allowed = planner.allowed(cursor)
        assert len(allowed), "the mask left no token"
        if isinstance(cursor, FreeCursor) and rng.random() < close:
            quote = [t for t in allowed.tolist() if '"' in tok.vocab[t].decode()]
            if quote:
                allowed = np.asarray(quote)
        t = int(rng.choice(allowed))
        ids.append(t)
        cursor = planner.advance(cursor, t)
    return tok.decode(ids).decode()


def enumerate_texts(writer: Writer, limit: int = 10_000) -> list[str]:
    """Every complete text the writer can produce (depth-first over options)."""
    out: list[str] = []

    def walk(state: WriterState, text: str) -> None:
        forced, at = writer.forced(state)
        text += forced
        if at.done:
            out.append(text)
            return
        choice = writer.choices(at)
        assert isinstance(choice, list)
        texts = [o.text for o in choice]
        assert all(texts), "options are never empty"
        for a in texts:
            for b in texts:
                assert a == b or not b.startswith(a), "options are prefix-free"
        for o in choice:
            assert len(out) < limit
            walk(o.state, text + o.text)

    walk(writer.start(), "")
    return out


def walk_to(writer: Writer, text: str) -> tuple[WriterState, str]:
    """Write ``text`` (options must match it): the state at the last choice point reached and
    the text after it; ``("", state)`` when ``text`` ends right at a choice point."""
    state, pos = writer.start(), 0
    while True:
        mark = state
        forced, state = writer.forced(state)
        if not text[pos:].startswith(forced):
            assert forced.startswith(text[pos:]), (text, forced)
            return mark, text[pos:]
        pos += len(forced)
        if pos == len(text):
            return state, ""
        choice = writer.choices(state)
        assert isinstance(choice, list)
        matches = [o for o in choice if text[pos:].startswith(o.text)]
        if not matches:  # the text ends inside an option (a date's last digit and quote)
            assert any(o.text.startswith(text[pos:]) for o in choice), (text, pos)
            return state, text[pos:]
        (option,) = matches
        pos += len(option.text)
        state = option.state


def next_char(writer: Writer, text: str) -> set[str]:
    """The characters the writer allows right after ``text``."""
    state, rest = walk_to(writer, text)
    forced, at = writer.forced(state)
    if len(forced) > len(rest):
        return {forced[len(rest)]}
    rest = rest[len(forced) :]
    choice = writer.choices(at)
    assert isinstance(choice, list)
    return {o.text[len(rest)] for o in choice if o.text.startswith(rest)}


def sampled_record(spec: CompiledSpec, seed: int) -> str:
    """A record of ``spec`` sampled on the scripted engine (random logits, ``seed``)."""
    from factorspec_sdk.drafter.loop import DecodeJob, Decoder
    from factorspec_sdk.drafter.verify import SamplingParams
    from factorspec_sdk.engines.scripted import ScriptedEngine

    tok = tiny_tokenizer()
    engine = ScriptedEngine.random(tok, seed=seed, temperature_scale=2.0)
    job = DecodeJob(
        planner_for(spec, tok), tok.encode("plan"), SamplingParams(temperature=1.0, seed=seed)
    )
    (out,) = Decoder(engine).run([job])
    assert out.error is None, out.error
    return out.text


class GuidedEngine:
    """A `CompletionEngine` over a scripted logits engine, constrained as vLLM constrains.

    A one-token request (``allowed_ids``) takes the best allowed token; a regex or grammar
    request is decoded token by token under the real llguidance matcher of its regex or Lark
    grammar, end token included where the matcher accepts (what vLLM's ``guidance``
    structured-output backend does), up to ``max_tokens``. Greedy unless ``rng`` is given
    (then a uniformly random allowed token). ``ids=False`` answers text only (a server that
    returns no token ids). Every request is recorded.
    """

    def __init__(
        self,
        engine: ScriptedEngine,
        style: ConstraintStyle = "spans",
        *,
        rng: np.random.Generator | None = None,
        ids: bool = True,
    ) -> None:
        self.engine = engine
        self.style: ConstraintStyle = style
        self.rng = rng
        self.ids = ids
        self.requests: list[Completion] = []
        self.replies: list[CompletionReply] = []

    @property
    def name(self) -> str:
        return "guided"

    @property
    def tokenizer(self) -> TokenizerInfo:
        return self.engine.tokenizer

    @property
    def constraint_style(self) -> ConstraintStyle:
        return self.style

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        return self.engine.apply_chat_template(messages)

    def close(self) -> None:
        pass

    def complete(self, requests: Sequence[Completion]) -> list[CompletionReply]:
        out = [self._one(r) for r in requests]
        self.requests.extend(requests)
        self.replies.extend(out)
        return out

    def _pick(self, prefix: list[int], allowed: np.ndarray) -> int:
        if self.rng is not None:
            return int(self.rng.choice(allowed))
        seq = self.engine.new_sequence(prefix[:-1])
        try:
            row = self.engine.extend([(seq, prefix[-1:])])[0][-1]
        finally:
            self.engine.release(seq)
        return int(allowed[np.argmax(row[allowed])])

    def _one(self, r: Completion) -> CompletionReply:
        tok = self.tokenizer
        if r.allowed_ids is not None:
            token = self._pick(list(r.prompt_ids), np.asarray(r.allowed_ids))
            return CompletionReply(tok.decode([token]).decode("utf-8", "replace"), [token], 1)
        import llguidance

        grammar = (
            llguidance.grammar_from("regex", r.regex)
            if r.regex is not None
            else llguidance.grammar_from("lark", r.grammar or "")
        )
        matcher = llguidance.LLMatcher(grammar_tables(tok).tokenizer, grammar, log_level=0)
        assert not matcher.is_error(), matcher.get_error()
        eos = tok.eos_ids[0]
        out: list[int] = []
        forwards = 0
        while len(out) < r.max_tokens and not matcher.is_stopped():
            bits = np.unpackbits(
                np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8), bitorder="little"
            )[: tok.vocab_size]
            allowed = np.flatnonzero(bits)
            token = self._pick([*r.prompt_ids, *out], allowed)
            forwards += 1
            if token == eos:
                break
            assert matcher.consume_token(token), matcher.get_error()
            out.append(token)
        text = tok.decode(out).decode("utf-8", "replace")
        return CompletionReply(text, list(out) if self.ids else None, max(1, forwards))


def spans_and_choices(planner: Planner, tokens: Sequence[int]) -> int:
    """The free spans (free strings, grammar segments) and genuine choices of a record.

    Its tokens are walked through a fresh ``planner``: a position outside a span where the
    mask allows more than one token is a choice; each free string and grammar segment
    entered is one span, whatever its length. The ``"spans"`` style asks a completion
    engine once for each (`factorspec_sdk.drafter.segments`).
    """
    cursor = planner.start()
    count = 0
    inside: GrammarSegment | str | None = None
    for token in tokens:
        span: GrammarSegment | str | None = None
        if isinstance(cursor, GrammarCursor):
            span = cursor.segment
        elif isinstance(cursor, FreeCursor):
            span = "free"
        if span is not None and span is not inside:
            count += 1
        elif span is None and len(planner.allowed(cursor)) > 1:
            count += 1
        inside = span
        cursor = planner.advance(cursor, token)
    return count
