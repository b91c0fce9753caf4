"""Decoding on engines that sample constrained continuations (vLLM, SGLang, servers).

`factorspec_sdk.drafter.loop.Decoder` needs logits; engines such as vLLM keep their forward,
sampler and KV cache to themselves (see `factorspec_sdk.engines.completion`). This decoder
gives them the same guarantee with one request per genuine choice:

1. every token the spec determines (the planner's certain tokens) is appended to the record
   by FactorSpec, without asking the model: such a token is the only one the mask allows,
   so any verifier accepts it. The next request's prompt carries them, and the engine's
   prefix cache runs them all in that request's single prefill forward;
2. at a choice point, one request asks the engine for the next token within FactorSpec's mask
   (``"tokens"`` style), or for the next value among the feasible continuations
   (``"regex"`` style);
3. the reply is checked against what was allowed and the planner advances over it.

All active requests of a batch send their next completion together, so the engine batches
them. Every request of one record carries the same affinity key (`Completion.session`, a
fresh one per decoded record), so that a router in front of several servers keeps the
record on the server whose prefix cache holds it. ``speculative=False`` sends every token
through the engine (one forward each), the baseline the tokens-per-forward figures compare
against.

With ``DecoderConfig.overlap`` (the default), a worker thread plans the segments each reply
can lead to while the engine answers the requests (`Planner.prefetch`, as the logits decoder
does during its forward), so the decoding thread finds them planned when the reply comes.
Everything here is FactorSpec's own: the engine enforces the mask or regex it is sent.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from factorspec_sdk.drafter.loop import DecodeJob, DecodeOutcome, DecoderConfig, check_budget
from factorspec_sdk.drafter.overlap import Prefetch
from factorspec_sdk.drafter.stats import DecoderClock, GenerationStats, RecordClock
from factorspec_sdk.engines.completion import (
    STRING_CHAR_REGEX,
    Completion,
    CompletionEngine,
    CompletionReply,
    regex_alternatives,
    regex_escape,
)
from factorspec_sdk.errors import EngineError, GenerationError, IncompleteGenerationError
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
    session: str = field(default_factory=lambda: uuid.uuid4().hex)  # the record's affinity key

    @property
    def stats(self) -> GenerationStats:
        return self.clock.stats


class SegmentDecoder:
    """Decodes `DecodeJob` s on a `CompletionEngine`; ``run`` has `Decoder.run`'s contract."""

    def __init__(self, engine: CompletionEngine, config: DecoderConfig | None = None) -> None:
        self.engine = engine
        self.config = config or DecoderConfig()
        if not self.config.speculative and engine.constraint_style != "tokens":
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
        if self.engine.constraint_style == "tokens":
            allowed = [int(t) for t in planner.allowed(a.cursor, budget)]
            a.request = Completion(
                prompt,
                1,
                allowed_ids=allowed,
                temperature=params.temperature,
                top_p=params.top_p,
                seed=seed,
                session=a.session,
            )
        elif isinstance(a.cursor, TrieNode):
            a.paths = [
                (text, ids)
                for text, ids in continuations(a.cursor, planner.tok.vocab)
                if self._fits(a, ids)
            ]
            longest = max(len(text.encode("utf-8")) for text, _ in a.paths)
            a.request = Completion(
                prompt,
                min(budget, longest) + 1,
                regex=regex_alternatives([t for t, _ in a.paths]),
                temperature=params.temperature,
                top_p=params.top_p,
                seed=seed,
                session=a.session,
            )
        elif isinstance(a.cursor, GrammarCursor):
            raise GenerationError(
                f"{a.cursor.segment.where} is generated by a grammar (its type is not one the "
                f"writer lays out), and the {self.engine.name} engine takes regex constraints "
                "only; use an engine with token constraints (vLLM, the embedded engine)"
            )
        else:
            assert isinstance(a.cursor, FreeCursor)
            a.request = Completion(
                prompt,
                budget,
                regex=_free_regex(a.cursor, self._slack(a)),
                temperature=params.temperature,
                top_p=params.top_p,
                seed=seed,
                session=a.session,
            )
        a.requests += 1
        return False

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
        assert isinstance(a.cursor, FreeCursor) and request.regex is not None
        if not re.fullmatch(request.regex, reply.text):
            raise GenerationError(
                f"the {name} engine returned {reply.text!r} for a free string, which its "
                f"regex {request.regex!r} does not match: it ignored the constraint"
            )
        self._take_string(a, reply.text)

    def _take_string(self, a: _Active, text: str) -> None:
        """Take a free string's tokens; where the budget ends it, close it the cheapest way."""
        planner = a.job.planner
        name = self.engine.name
        for token in planner.tok.encode(text):
            cursor = a.cursor
            if not isinstance(cursor, FreeCursor):
                break  # the string closed
            if token not in planner.allowed(cursor):
                raise GenerationError(
                    f"the {name} engine's string {text!r} does not tokenize within the "
                    f"mask (token {token})"
                )
            if token not in planner.allowed(cursor, self._left(a)):
                break
            self._take(a, token)
        cursor = a.cursor
        while isinstance(cursor, FreeCursor):  # cut by the budget
            self._take(a, planner.bound.cheapest(cursor))
            cursor = a.cursor

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
