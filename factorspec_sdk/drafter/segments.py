"""Decoding on engines that sample constrained continuations (vLLM, SGLang, servers).

`factorspec_sdk.drafter.loop.Decoder` needs logits; engines such as vLLM keep their forward,
sampler and KV cache to themselves (see `factorspec_sdk.engines.completion`). This decoder
gives them the same guarantee with one request per genuine choice or free span:

1. every token the spec determines (the planner's certain tokens) is appended to the record
   by FactorSpec, without asking the model: such a token is the only one the mask allows,
   so any verifier accepts it. The next request's prompt carries them, and the engine's
   prefix cache runs them all in that request's single prefill forward;
2. at a choice point, one request asks the engine for what comes next, by the engine's
   style (`ConstraintStyle`, `_KINDS`): the next token within FactorSpec's mask
   (``"tokens"``; ``"spans"`` at a choice among planned options), the next value among the
   feasible continuations (``"regex"``), or, in a *span*, the whole rest of a free string
   (a regex) or of a grammar segment (its llguidance Lark grammar,
   `factorspec_sdk.tokens.grammar.GrammarSegment.rest_grammar`) with ``max_tokens`` the
   budget left (``"spans"`` and ``"regex"``). A grammar segment goes from its first text:
   its certain tokens there are appended, the first certain token inside a value is left
   to the engine, whose grammar allows only it;
3. the reply is checked against what was allowed and the planner advances over it. A
   span's reply is taken by the engine's token ids while FactorSpec's own masks (under the
   budget) allow each, so what is taken is exactly what the engine sampled; the engine's
   constraint allows every token the masks allow, so greedy decoding takes the embedded
   engine's tokens. At the first token the masks refuse, an engine that takes token
   constraints is asked that position as one token (the embedded engine's choice), then
   spans resume; one that does not has the rest of the reply tokenized canonically, and a
   span the budget cut is closed the cheapest way.

All active requests of a batch send their next completion together, so the engine batches
them. Every request of one record carries the same affinity key (`Completion.session`, a
fresh one per decoded record), so that a router in front of several servers keeps the
record on the server whose prefix cache holds it. ``speculative=False`` sends every token
through the engine (one forward each), the baseline the tokens-per-forward figures compare
against.

With ``DecoderConfig.overlap`` (the default), a worker thread plans the segments each reply
can lead to while the engine answers the requests (`Planner.prefetch`, as the logits decoder
does during its forward), so the decoding thread finds them planned when the reply comes.
Everything here is FactorSpec's own: the engine enforces the mask, regex or grammar it is
sent.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from factorspec_sdk.drafter.loop import DecodeJob, DecodeOutcome, DecoderConfig, check_budget
from factorspec_sdk.drafter.overlap import Prefetch
from factorspec_sdk.drafter.stats import DecoderClock, GenerationStats, RecordClock
from factorspec_sdk.engines.completion import (
    STRING_CHAR_REGEX,
    TAKES_TOKENS,
    Completion,
    CompletionEngine,
    CompletionReply,
    ConstraintStyle,
    regex_alternatives,
    regex_escape,
)
from factorspec_sdk.errors import EngineError, GenerationError, IncompleteGenerationError
from factorspec_sdk.tokens.free import FreeTables
from factorspec_sdk.tokens.plan import Cursor, Finished, FreeCursor, GrammarCursor, TrieNode
from factorspec_sdk.writer.escapes import json_body

__all__ = ["SegmentDecoder", "continuations"]


def continuations(cursor: TrieNode, vocab: Sequence[bytes]) -> list[tuple[str, list[int]]]:
    """Every way to finish the planned segment from ``cursor``: (text, canonical token ids).

    Raises:
        GenerationError: a continuation is not whole UTF-8 (the previous token split a
            character), so it cannot be written as a text constraint.
    """
    out: list[tuple[str, list[int]]] = []
    stack: list[tuple[TrieNode, list[int]]] = [(cursor, [])]
    while stack:
        node, path = stack.pop()
        for token, child in node.children.items():
            ids = [*path, token]
            if child.terminal is not None or not child.children:
                raw = b"".join(vocab[t] for t in ids)
                try:
                    out.append((raw.decode("utf-8"), ids))
                except UnicodeDecodeError:
                    raise GenerationError(
                        f"a continuation starts inside a UTF-8 character ({raw!r}); a regex "
                        "constraint cannot express it, use an engine with token constraints"
                    ) from None
            else:
                stack.append((child, ids))
    out.sort()
    return out


@dataclass(slots=True)
class _Active:
    index: int
    job: DecodeJob
    cursor: Cursor
    clock: RecordClock
    record: list[int] = field(default_factory=list)
    requests: int = 0
    request: Completion | None = None
    paths: list[tuple[str, list[int]]] | None = None
    exact: bool = False  # the next request asks one token: a span's reply was refused
    session: str = field(default_factory=lambda: uuid.uuid4().hex)  # the record's affinity key

    @property
    def stats(self) -> GenerationStats:
        return self.clock.stats


class SegmentDecoder:
    """Decodes `DecodeJob` s on a `CompletionEngine`; ``run`` has `Decoder.run`'s contract."""

    def __init__(self, engine: CompletionEngine, config: DecoderConfig | None = None) -> None:
        self.engine = engine
        self.config = config or DecoderConfig()
        if not self.config.speculative and not TAKES_TOKENS[engine.constraint_style]:
            raise EngineError(
                f"speculative=False sends one token per request, which needs token "
                f"constraints; the {engine.name!r} engine constrains by regex"
            )

    def run(self, jobs: Sequence[DecodeJob]) -> list[DecodeOutcome]:
        """Decode all jobs together; every outcome is returned, errors included."""
        if not self.config.overlap:
            return self._run(jobs, None)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="factorspec-plan")
        try:
            return self._run(jobs, pool)
        finally:
            pool.shutdown(wait=True)

    def _run(
        self, jobs: Sequence[DecodeJob], pool: ThreadPoolExecutor | None
    ) -> list[DecodeOutcome]:
        started = time.perf_counter()
        clock = DecoderClock()
        clocks: list[RecordClock] = []
        results: dict[int, DecodeOutcome] = {}
        active: list[_Active] = []
        for i, job in enumerate(jobs):
            stats = GenerationStats(prompt_tokens=len(job.prompt_ids))
            planner = job.planner
            clocks.append(clock.record(stats, planner.stats, planner.writer.oracle.stats))
            try:
                with clock.part(clocks[i], "start_seconds"):
                    cursor = job.planner.start()
                    check_budget(job, cursor)
            except Exception as exc:
                clock.close(clocks[i])
                results[i] = DecodeOutcome("", [], stats, exc)
                continue
            active.append(_Active(i, job, cursor, clocks[i]))
        try:
            return self._decode(jobs, pool, clock, active, results)
        finally:
            for record in clocks:  # the outcomes come back together: the run is their wall
                clock.rebase(record, started, 0.0)

    def _decode(
        self,
        jobs: Sequence[DecodeJob],
        pool: ThreadPoolExecutor | None,
        clock: DecoderClock,
        active: list[_Active],
        results: dict[int, DecodeOutcome],
    ) -> list[DecodeOutcome]:
        while active:
            waiting: list[_Active] = []
            for a in active:
                try:
                    with clock.part(a.clock, "draft_seconds"):
                        done = self._prepare(a)
                    if done and a.job.watch is not None:
                        with clock.part(a.clock, "stream_seconds"):
                            a.job.watch(list(a.record))
                except Exception as exc:
                    results[a.index] = self._fail(a, exc, clock)
                    continue
                if done:
                    results[a.index] = self._finish(a, clock)
                else:
                    waiting.append(a)
            if not waiting:
                break
            ahead = [a for a in waiting if isinstance(a.cursor, TrieNode)]
            prefetch = Prefetch(pool, [(a.job.planner, a.cursor) for a in ahead])
            t0 = time.perf_counter()
            try:
                replies = self.engine.complete([a.request for a in waiting if a.request])
                seconds = time.perf_counter() - t0
            except Exception as exc:
                failed = time.perf_counter() - t0
                clock.shared(failed, [a.clock for a in waiting], "forward_seconds")
                for a in waiting:
                    results[a.index] = self._fail(a, exc, clock)
                break
            finally:
                waited = prefetch.finish()
                clock.shared(waited, [a.clock for a in ahead], None)  # the planners count it
                for a, background in zip(ahead, prefetch.background, strict=True):
                    a.stats.background_plan_seconds += background
            clock.shared(seconds, [a.clock for a in waiting], "forward_seconds")
            active = []
            for a, reply in zip(waiting, replies, strict=True):
                a.stats.verify_steps += reply.forwards
                try:
                    with clock.part(a.clock, "verify_seconds"):
                        self._apply(a, reply)
                    if a.job.watch is not None:
                        with clock.part(a.clock, "stream_seconds"):
                            a.job.watch(list(a.record))
                except Exception as exc:
                    results[a.index] = self._fail(a, exc, clock)
                    continue
                active.append(a)
        return [results[i] for i in range(len(jobs))]

    # ------------------------------------------------------------------ one request

    def _prepare(self, a: _Active) -> bool:
        """Append certain tokens; build the next request. True when the record is done."""
        planner = a.job.planner
        params = a.job.params
        if self.config.speculative:
            while (token := planner.certain(a.cursor, self._left(a))) is not None:
                if self._keeps_for_span(a, token):
                    break
                self._take(a, token)
                a.stats.drafted += 1
                a.stats.certain_drafted += 1
        if isinstance(a.cursor, Finished):
            return True
        budget = self._left(a)
        if budget <= 0:  # unreachable with budget masks; kept as a guard
            raise IncompleteGenerationError(
                "max_tokens reached before the record was complete",
                partial_text=self._text(a.record),
                tokens=len(a.record),
            )
        seed = None if params.seed is None else params.seed + a.requests
        prompt = [*a.job.prompt_ids, *a.record]
        a.paths = None
        a.request = _REQUESTS[self._kind(a)](self, a, prompt, budget, seed)
        a.exact = False
        a.requests += 1
        return False

    def _kind(self, a: _Active) -> str:
        """What the next request asks: ``token``, ``choice``, ``free`` or ``grammar``."""
        style = self.engine.constraint_style
        if not self.config.speculative or a.exact:
            return "token"
        cursor = a.cursor
        kind = _KINDS[style][type(cursor)]
        if isinstance(cursor, FreeCursor) and cursor.free.escape and TAKES_TOKENS[style]:
            return "token"  # a regex starts between characters: finish the escape first
        if isinstance(cursor, GrammarCursor) and cursor.segment.head_left(cursor.tokens) is None:
            if TAKES_TOKENS[style]:
                return "token"  # inside a value the segment's rest has no grammar
            raise GenerationError(
                f"the {self.engine.name} engine's reply left {cursor.segment.where} "
                "unfinished inside a value, where no grammar of the rest exists, and the "
                "engine takes no token constraints to finish it; use an engine with token "
                "constraints (vLLM, the embedded engine)"
            )
        return kind

    def _keeps_for_span(self, a: _Active, token: int) -> bool:
        """Whether certain ``token`` is left to the grammar span the next request sends.

        A grammar segment goes as one request from the layout text before its first value
        (`GrammarSegment.rest_grammar`): certain tokens of that text are appended as usual,
        the first one that enters a value is the engine's to write under the same mask.
        """
        cursor = a.cursor
        if not isinstance(cursor, GrammarCursor) or a.exact:
            return False
        if _KINDS[self.engine.constraint_style][GrammarCursor] != "grammar":
            return False
        segment = cursor.segment
        return (
            segment.head_left(cursor.tokens) is not None
            and segment.head_left((*cursor.tokens, token)) is None
        )

    def _completion(
        self, a: _Active, prompt: list[int], max_tokens: int, seed: int | None, **constraint: Any
    ) -> Completion:
        params = a.job.params
        return Completion(
            prompt,
            max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=seed,
            session=a.session,
            **constraint,
        )

    def _token_request(
        self, a: _Active, prompt: list[int], budget: int, seed: int | None
    ) -> Completion:
        """One token within FactorSpec's exact mask (under the budget)."""
        allowed = [int(t) for t in a.job.planner.allowed(a.cursor, budget)]
        return self._completion(a, prompt, 1, seed, allowed_ids=allowed)

    def _choice_request(
        self, a: _Active, prompt: list[int], budget: int, seed: int | None
    ) -> Completion:
        """The next value among the planned continuations, as a regex of alternatives."""
        assert isinstance(a.cursor, TrieNode)
        a.paths = [
            (text, ids)
            for text, ids in continuations(a.cursor, a.job.planner.tok.vocab)
            if self._fits(a, ids)
        ]
        longest = max(len(text.encode("utf-8")) for text, _ in a.paths)
        regex = regex_alternatives([t for t, _ in a.paths])
        return self._completion(a, prompt, min(budget, longest) + 1, seed, regex=regex)

    def _free_request(
        self, a: _Active, prompt: list[int], budget: int, seed: int | None
    ) -> Completion:
        """A free string's rest as one regex request.

        An engine that takes token constraints gets the string's whole language (its
        replies are cut by FactorSpec's budget masks, then asked one token); one that does
        not, the lengths the budget leaves room for (`_slack`).
        """
        cursor = a.cursor
        assert isinstance(cursor, FreeCursor)
        slack = None if TAKES_TOKENS[self.engine.constraint_style] else self._slack(a)
        regex = _free_regex(cursor, slack) + _close_tail(cursor, a.job.planner.free_tables())
        return self._completion(a, prompt, budget, seed, regex=regex)

    def _grammar_request(
        self, a: _Active, prompt: list[int], budget: int, seed: int | None
    ) -> Completion:
        """A grammar segment's rest as one request with its llguidance Lark grammar."""
        cursor = a.cursor
        assert isinstance(cursor, GrammarCursor)
        grammar = cursor.segment.rest_grammar(cursor.tokens)
        assert grammar is not None  # `_kind` asks one token where there is none
        return self._completion(a, prompt, budget, seed, grammar=grammar)

    def _apply(self, a: _Active, reply: CompletionReply) -> None:
        request = a.request
        assert request is not None
        name = self.engine.name
        if request.allowed_ids is not None:
            ids = reply.token_ids
            if ids is None or len(ids) != 1 or ids[0] not in request.allowed_ids:
                raise GenerationError(
                    f"the {name} engine returned tokens {ids!r} ({reply.text!r}) where one of "
                    f"{len(request.allowed_ids)} allowed tokens was asked for: it ignored "
                    "the constraint"
                )
            self._take(a, ids[0])
            return
        if a.paths is not None:
            for text, ids in a.paths:
                if text == reply.text:
                    for token in ids:
                        self._take(a, token)
                    return
            raise GenerationError(
                f"the {name} engine returned {reply.text!r}, which is none of the "
                f"{len(a.paths)} continuations its regex allowed: it ignored the constraint"
            )
        cut = reply.token_ids is not None and len(reply.token_ids) >= request.max_tokens
        if request.regex is not None and not cut and not re.fullmatch(request.regex, reply.text):
            raise GenerationError(
                f"the {name} engine returned {reply.text!r} for a free string, which its "
                f"regex {request.regex!r} does not match: it ignored the constraint"
            )
        self._take_span(a, reply)

    def _take_span(self, a: _Active, reply: CompletionReply) -> None:
        """Take a span's reply by the engine's token ids, while FactorSpec's masks allow them.

        Past the span's end (a free string's closing quote) the rest of the reply is forced
        text, which the planner's certain tokens write. At the first token the masks refuse
        (under the budget), an engine that takes token constraints is asked that position
        as one token next (`_Active.exact`): what is taken is then the embedded engine's
        greedy choice, token for token. On an engine that does not, a token cut by the
        budget closes the span the cheapest way, and a token the masks refuse (or a reply
        without token ids) has the rest of its text tokenized canonically (`_take_text`).
        """
        planner = a.job.planner
        within = _within(a.cursor)
        ids = reply.token_ids
        rest: bytes = reply.text.encode("utf-8")
        if ids is not None:
            for k, token in enumerate(ids):
                if not within(a.cursor):
                    return
                if token in planner.allowed(a.cursor, self._left(a)):
                    self._take(a, token)
                    continue
                if TAKES_TOKENS[self.engine.constraint_style]:
                    a.exact = True
                elif token in planner.allowed(a.cursor):
                    self._close_span(a, within)  # cut by the budget
                else:
                    rest = planner.tok.decode(ids[k:])
                    break
                return
            else:
                self._end_span(a, within)
                return
        try:
            text = rest.decode("utf-8")
        except UnicodeDecodeError:
            raise GenerationError(
                f"the {self.engine.name} engine's reply {reply.text!r} leaves FactorSpec's "
                "masks inside a character, where it cannot be tokenized again"
            ) from None
        self._take_text(a, text, within)

    def _end_span(self, a: _Active, within: _Within) -> None:
        """After a reply taken whole: where the engine ended a grammar segment, it ends.

        An end token where a value may end or grow ends the segment on an engine that takes
        no token constraints; one that does is asked that position as one token.
        """
        cursor = a.cursor
        if (
            isinstance(cursor, GrammarCursor)
            and within(cursor)
            and not TAKES_TOKENS[self.engine.constraint_style]
            and cursor.step().accepting
        ):
            a.cursor = a.job.planner.segment_exit(cursor)

    def _take_text(self, a: _Active, text: str, within: _Within) -> None:
        """Take a span's text tokenized canonically; where the budget cuts it, close the span.

        Raises:
            GenerationError: a token of the text is outside FactorSpec's mask.
        """
        planner = a.job.planner
        for token in planner.tok.encode(text):
            if not within(a.cursor):
                return  # the span ended
            if token not in planner.allowed(a.cursor):
                raise GenerationError(
                    f"the {self.engine.name} engine's text {text!r} does not tokenize within "
                    f"the mask (token {token})"
                )
            if token not in planner.allowed(a.cursor, self._left(a)):
                break
            self._take(a, token)
        self._close_span(a, within)

    def _close_span(self, a: _Active, within: _Within) -> None:
        """Finish a span the budget cut, the cheapest way (`CompletionBound.cheapest`)."""
        planner = a.job.planner
        while within(cursor := a.cursor):
            if isinstance(cursor, GrammarCursor) and cursor.step().accepting:
                a.cursor = planner.segment_exit(cursor)
            else:
                assert isinstance(cursor, FreeCursor | GrammarCursor)
                self._take(a, planner.bound.cheapest(cursor))

    def _take(self, a: _Active, token: int) -> None:
        a.cursor = a.job.planner.advance(a.cursor, token)
        a.record.append(token)

    def _left(self, a: _Active) -> int:
        """Tokens the record may still take."""
        return a.job.params.max_tokens - len(a.record)

    def _slack(self, a: _Active) -> int | None:
        """Tokens left beyond the cheapest completion; None when the budget is loose."""
        planner, left = a.job.planner, self._left(a)
        if left >= planner.bound.ceiling:
            return None
        return left - planner.min_tokens(a.cursor)

    def _fits(self, a: _Active, ids: Sequence[int]) -> bool:
        """Whether a segment's continuation leaves a completion within the budget."""
        planner = a.job.planner
        cursor, left = a.cursor, self._left(a)
        for token in ids:
            if token not in planner.allowed(cursor, left):
                return False
            cursor = planner.advance(cursor, token, critical=False)
            left -= 1
        return True

    # ------------------------------------------------------------------ outcomes

    def _text(self, tokens: Sequence[int]) -> str:
        return self.engine.tokenizer.decode(tokens).decode("utf-8", errors="replace")

    def _close_stats(self, a: _Active, clock: DecoderClock) -> GenerationStats:
        a.stats.tokens = len(a.record)
        clock.close(a.clock)
        return a.stats

    def _finish(self, a: _Active, clock: DecoderClock) -> DecodeOutcome:
        text, stats = self._text(a.record), self._close_stats(a, clock)
        return DecodeOutcome(text, list(a.record), stats, job=a.job)

    def _fail(self, a: _Active, exc: Exception, clock: DecoderClock) -> DecodeOutcome:
        stats = self._close_stats(a, clock)
        return DecodeOutcome(self._text(a.record), list(a.record), stats, exc)


_Within = Callable[[Cursor], bool]
"""Whether a cursor is still inside the span a request was sent for."""


def _within(span: Cursor) -> _Within:
    """The test of still being inside ``span`` 's free string or grammar segment."""
    if isinstance(span, GrammarCursor):
        segment = span.segment
        return lambda c: isinstance(c, GrammarCursor) and c.segment is segment
    return lambda c: isinstance(c, FreeCursor)


_Request = Callable[[SegmentDecoder, _Active, list[int], int, "int | None"], Completion]

_REQUESTS: dict[str, _Request] = {
    "token": SegmentDecoder._token_request,
    "choice": SegmentDecoder._choice_request,
    "free": SegmentDecoder._free_request,
    "grammar": SegmentDecoder._grammar_request,
}
"""How each kind of request is built (`SegmentDecoder._kind` names the kind)."""

_KINDS: dict[ConstraintStyle, dict[type[Cursor], str]] = {
    "tokens": {TrieNode: "token", FreeCursor: "token", GrammarCursor: "token"},
    "spans": {TrieNode: "token", FreeCursor: "free", GrammarCursor: "grammar"},
    "regex": {TrieNode: "choice", FreeCursor: "free", GrammarCursor: "grammar"},
}
"""The request each style sends at each kind of cursor (see the module docstring)."""


def _close_tail(cursor: FreeCursor, tables: FreeTables) -> str:
    """What a free string's regex allows after its closing quote.

    The start of the forced text after the string, as far as one token with a quote reaches
    into it (``",`` or ``", "``): FactorSpec's mask allows such a token to close the string,
    so the engine's constraint allows it too. The reply's tokens past the quote are left to
    the planner, whose certain tokens write that text.
    """
    suffix = cursor.free.close_suffix
    closers = [*tables.quote_after, *tables.moves("").after]  # plain, and after an escape
    reach = max((len(t) for t in closers if suffix.startswith(t)), default=0)
    tail = ""
    for ch in reversed(suffix[:reach]):
        tail = "(" + regex_escape(ch) + tail + ")?"
    return tail


def _free_regex(cursor: FreeCursor, slack: int | None = None) -> str:
    """The rest of a free string: its length bounds, then the closing quote.

    A character is one of the value's: raw, or any JSON escape (`STRING_CHAR_REGEX`), so the
    bounds count the value's characters. ``slack`` is the budget beyond the cheapest
    completion (None: the budget is loose); the string may grow by that many characters
    past its minimum, which is about what fits (a reply that does not fit anyway is cut and
    closed by `SegmentDecoder`).

    Raises:
        GenerationError: the string is inside an escape (a request starts between
            characters: after an option, or after the text a reply left closed).
    """
    free = cursor.free
    if free.escape:
        raise GenerationError(
            f"string at {free.state.pending!r}: a regex request cannot start inside the escape "
            f"{free.escape!r} (an internal error: please report it)"
        )
    n = len(free.written)
    if free.texts is not None and free.texts.affixes is not None:
        return _affix_regex(cursor, slack)
    if free.texts is not None:
        return _texts_regex(cursor, slack)
    if free.lengths is not None:
        return _lengths_regex(cursor, slack)
    low = max(0, free.min_length - n)
    high = None if free.max_length is None else max(low, free.max_length - n)
    if slack is not None:
        high = low + max(0, slack) if high is None else min(high, low + max(0, slack))
    if high is None:
        body = "{" + str(low) + ",}" if low else "*"
    else:
        body = "{" + f"{low},{high}" + "}"
    return _CHAR + body + '"'


def _lengths_regex(cursor: FreeCursor, slack: int | None) -> str:
    """The rest of a free string whose ``len()`` a relation reads: exactly its feasible lengths.

    One alternative per run of consecutive feasible lengths (`StringLengths.lengths_from`
    asks the oracle once per length up to the longest).
    """
    free = cursor.free
    assert free.lengths is not None
    n = len(free.written)
    rest = [k - n for k in free.lengths.lengths_from(n)]
    if not rest:
        raise GenerationError(f"string at {free.state.pending!r} has no feasible length")
    if slack is not None:
        rest = [k for k in rest if k <= rest[0] + max(0, slack)]
    return _repeat(_CHAR, rest, None) + '"'


_CHAR = STRING_CHAR_REGEX
"""One character of a free string's value, raw or escaped, as a regex group."""

_SHORT_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
"""The one-letter escapes and the characters they stand for."""


def _other_char(excluded: frozenset[str]) -> str:
    r"""One character of a value, not one of ``excluded``, as a regex group.

    Raw, or a one-letter escape, or ``\u00XX`` for a control character: the other ``\u``
    spellings are left out (a character a regex class of its own names cannot be told from
    its ``\u`` spelling without spelling each one out), so this is a subset of what the
    masks allow with the same values but for control characters where ``excluded`` holds one.
    """
    raw = "".join(_class_escape(c) for c in sorted(excluded) if c not in '"\\' and ord(c) >= 0x20)
    alts = ['[^"\\\\\\x00-\\x1f' + raw + "]"]
    letters = "".join(_class_escape(k) for k, c in _SHORT_ESCAPES.items() if c not in excluded)
    if letters:
        alts.append("\\\\[" + letters + "]")
    if not any(ord(c) < 0x20 for c in excluded):
        alts.append("\\\\u00[01][0-9a-fA-F]")
    return "(" + "|".join(alts) + ")"


def _literal(text: str) -> str:
    """Characters of a value as they are written in JSON (escaped where JSON needs it)."""
    return regex_escape(json_body(text))


def _repeat(char: str, counts: list[int], open_from: int | None) -> str:
    """``char`` repeated any of ``counts`` times, or ``open_from`` times or more.

    One alternative per run of consecutive counts. Empty when no count is allowed.
    """
    runs: list[tuple[int, int]] = []
    for k in sorted(c for c in counts if open_from is None or c < open_from):
        if runs and runs[-1][1] == k - 1:
            runs[-1] = (runs[-1][0], k)
        else:
            runs.append((k, k))
    alts = [char + ("{" + f"{a}}}" if a == b else "{" + f"{a},{b}}}") for a, b in runs]
    if open_from is not None:
        alts.append(char + "{" + f"{open_from},}}")
    if len(alts) <= 1:
        return "".join(alts)
    return "(" + "|".join(alts) + ")"


def _texts_regex(cursor: FreeCursor, slack: int | None) -> str:
    """The rest of a free string whose value a relation reads: exactly where it may close.

    A text no relation names closes at a feasible length of such texts, and a named text
    only if it is feasible (`StringTexts`). The regex walks the trie of the banned named
    texts that start with what is written: off the trie any character leads to any text of
    a feasible length; on it, the string may close only where no banned text ends. The
    feasible named texts are alternatives of their own. ``slack`` bounds the lengths as in
    `_free_regex`. Off the trie, characters take any spelling (`_CHAR`) but the one that
    leaves it (`_other_char`), and characters along it are spelled as JSON must
    (`_literal`): the same values as the masks, in fewer spellings.
    """
    free = cursor.free
    texts = free.texts
    assert texts is not None
    n = len(free.written)
    open_from: int | None = None
    if not texts.other:
        rests: list[int] = []
    elif free.lengths is not None:
        rests = [k - n for k in free.lengths.lengths_from(n)]
    else:
        low = max(0, free.min_length - n)
        if free.max_length is not None:
            rests = list(range(low, free.max_length - n + 1))
        elif slack is not None:
            rests = list(range(low, low + max(0, slack) + 1))
        else:
            rests, open_from = [], low
    if slack is not None and rests:
        rests = [k for k in rests if k <= rests[0] + max(0, slack)]
    trie: dict[str, Any] = {}
    for t in texts.named_from(free.written):
        if t not in texts.banned:
            continue
        node = trie
        for ch in t[n:]:
            node = node.setdefault(ch, {})
        node[""] = {}  # a banned text ends here

    def walk(node: dict[str, Any], depth: int) -> list[str]:
        alts: list[str] = []
        if (depth in rests or (open_from is not None and depth >= open_from)) and "" not in node:
            alts.append('"')
        later = [k - depth - 1 for k in rests if k > depth]
        start = None if open_from is None else max(0, open_from - depth - 1)
        if later or start is not None:
            children = frozenset(ch for ch in node if ch)
            char = _other_char(children) if children else _CHAR
            alts.append(char + _repeat(_CHAR, later, start) + '"')
        for ch in sorted(node):
            if ch:
                inner = walk(node[ch], depth + 1)
                if inner:
                    alts.append(_literal(ch) + _group(inner))
        return alts

    alts = walk(trie, 0)
    alts += [_literal(t[n:]) + '"' for t in texts.extending(free.written)]
    if not alts:
        raise GenerationError(f"string at {free.state.pending!r} has no feasible completion")
    return _group(alts)


def _affix_regex(cursor: FreeCursor, slack: int | None) -> str:
    """The rest of a string read with ``startswith``/``endswith``: texts it may close as.

    A subset of what the masks allow (`factorspec_sdk.writer.affixes`), never empty while
    the string can close: each text of constants that closes, as itself, and each
    ``m + X + e`` whose profile some length allows, with ``X`` of characters outside every
    constant (so its affixes are exactly those of ``m`` and ``e``). ``slack`` bounds ``X``
    as it bounds a free string's length in `_free_regex`.
    """
    free = cursor.free
    texts = free.texts
    assert texts is not None and texts.affixes is not None
    aff = texts.affixes
    w, n = free.written, len(free.written)
    alts = [
        _literal(t[n:]) + '"'
        for t in dict.fromkeys([*aff.tight(w), *texts.extending(w)])
        if free.closes(t)
    ]
    if texts.other:
        char = _other_char(texts.constant_chars())
        for m, e, least in aff.open_forms(w):
            lengths = aff.lengths(aff.open_profile(m, e)).lengths_from(least)
            xs = [k - least + 1 for k in lengths]  # characters of X
            if not xs:
                continue
            if slack is not None:
                xs = [x for x in xs if x <= xs[0] + max(0, slack)]
            body = char + _repeat(char, [x - 1 for x in xs], None)
            alts.append(_literal(m[n:]) + body + _literal(e) + '"')
    if not alts:
        raise GenerationError(f"string at {free.state.pending!r} has no feasible completion")
    return _group(alts)


def _class_escape(ch: str) -> str:
    """``ch`` inside a regex character class (``-`` and ``]`` too), as `regex_escape` would."""
    return "\\" + ch if ch in "\\]^-[" else regex_escape(ch)


def _group(alts: list[str]) -> str:
    """One regex for any of ``alts``."""
    return alts[0] if len(alts) == 1 else "(" + "|".join(alts) + ")"
