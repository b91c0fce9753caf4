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
   (a regex; on ``"spans"``, with the *run* of short texts, choices and strings after it:
   `factorspec_sdk.drafter.runs`) or of a grammar segment (its llguidance Lark grammar,
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
   spans resume (a grammar segment's from inside a value with a superset of its rest,
   `GrammarSegment.rest_grammar`; a segment whose span was refused by the budget or at
   its first token, or where the budget's masks are already tight, goes on one token per
   request); one that does not has the rest of the reply tokenized canonically, and a
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

from factorspec_sdk.drafter.free_regex import close_tail, free_regex
from factorspec_sdk.drafter.loop import DecodeJob, DecodeOutcome, DecoderConfig, check_budget
from factorspec_sdk.drafter.overlap import Prefetch
from factorspec_sdk.drafter.runs import continuations, free_run
from factorspec_sdk.drafter.stats import DecoderClock, GenerationStats, RecordClock
from factorspec_sdk.engines.completion import (
    TAKES_TOKENS,
    Completion,
    CompletionEngine,
    CompletionReply,
    ConstraintStyle,
    regex_alternatives,
)
from factorspec_sdk.errors import EngineError, GenerationError, IncompleteGenerationError
from factorspec_sdk.tokens.grammar import GrammarSegment
from factorspec_sdk.tokens.plan import Cursor, Finished, FreeCursor, GrammarCursor, TrieNode

__all__ = ["SegmentDecoder", "continuations"]

_free_regex = free_regex
"""`free_regex` under the name it had when it lived here (tests import it so)."""
_close_tail = close_tail
"""`close_tail` under the name it had when it lived here (tests import it so)."""


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
    by_token: GrammarSegment | None = None  # goes on one token per request: `_by_token`
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
                        before = (len(a.record), a.cursor)
                        self._apply(a, reply)
                        self._check_progress(a, reply, before)
                    if a.job.watch is not None:
                        with clock.part(a.clock, "stream_seconds"):
                            a.job.watch(list(a.record))
                except Exception as exc:
                    results[a.index] = self._fail(a, exc, clock)
                    continue
                active.append(a)
        return [results[i] for i in range(len(jobs))]

    def _check_progress(
        self, a: _Active, reply: CompletionReply, before: tuple[int, Cursor]
    ) -> None:
        """Fail a record that a reply moved by nothing, so the next request is the same one.

        An engine that answers it the same way would be asked forever.

        Raises:
            GenerationError: nothing of the reply was taken and nothing else changed.
        """
        if len(a.record) == before[0] and a.cursor is before[1] and not a.exact:
            raise GenerationError(
                f"the {self.engine.name} engine replied {reply.text!r} (tokens "
                f"{reply.token_ids!r}), of which FactorSpec could take nothing, and the next "
                "request would be the same one; this is a bug in the span protocol, please "
                "report it with the schema"
            )

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
        if isinstance(cursor, GrammarCursor) and self._by_token(a, cursor):
            return "token"
        kind = _KINDS[style][type(cursor)]
        if isinstance(cursor, FreeCursor) and cursor.free.escape and TAKES_TOKENS[style]:
            return "token"  # a regex starts between characters: finish the escape first
        if isinstance(cursor, GrammarCursor) and cursor.segment.rest_grammar(cursor.tokens) is None:
            if TAKES_TOKENS[style]:
                return "token"  # inside an escape or a character: finish it first
            raise GenerationError(
                f"the {self.engine.name} engine's reply left {cursor.segment.where} "
                "unfinished inside an escape or a character, where no grammar of the rest "
                "exists, and the engine takes no token constraints to finish it; use an "
                "engine with token constraints (vLLM, the embedded engine)"
            )
        return kind

    def _keeps_for_span(self, a: _Active, token: int) -> bool:
        """Whether certain ``token`` is left to the grammar span the next request sends.

        A grammar segment goes as one request from the layout text before a value, where
        its rest grammar is exact (`GrammarSegment.rest_grammar`): certain tokens of that
        text are appended as usual, the first one that enters a value is the engine's to
        write under the same mask. Inside a value (after a refused reply) the rest grammar
        is a superset of the masks, so its certain tokens are appended, never left to it.
        """
        cursor = a.cursor
        if not isinstance(cursor, GrammarCursor) or a.exact:
            return False
        if _KINDS[self.engine.constraint_style][GrammarCursor] != "grammar":
            return False
        segment = cursor.segment
        return (
            segment.layout_left(cursor.tokens) is not None
            and segment.layout_left((*cursor.tokens, token)) is None
            and not self._by_token(a, cursor)
        )

    def _by_token(self, a: _Active, cursor: GrammarCursor) -> bool:
        """Whether the grammar segment goes on one token per request.

        Where a span of it was refused by the budget (a token the masks allow, the budget
        masks not: the model writes on where the record must close, and a span of the rest
        would be refused again, its decode steps lost), or refused at its first token
        (it took nothing), or, on an engine that takes token constraints, where the
        budget's masks are the tight ones already at ``cursor`` (`CompletionBound.room`)
        in a segment whose strings are not all plain (patterns, keys, enumerated texts:
        `ClosingGuides.plain`). There the tight masks keep few tokens besides the closing
        walk's own (`GrammarSegmentBudget.allowed`), so a span would be refused at the
        first token off the walk, and the engine would decode on to its ``max_tokens``
        (`Github_medium/o20375` at ``max_tokens=512`` on vLLM-CPU took 89 tokens of a
        512-token reply, 20.5 s for the record, against 5.1 s one token per request for
        the same record). A span of such a segment is capped at the room
        (`_grammar_request`), so it ends where this starts; a room of one token is asked
        as one token (the exact mask, not the rest grammar). Other refusals (a token the
        engine's tokenizer or the rest grammar's superset allows, the masks not) go on as
        a span of the rest.
        """
        if cursor.segment is a.by_token:
            return True
        if (
            TAKES_TOKENS[self.engine.constraint_style]
            and not cursor.segment.guides.plain
            and self._room(a, cursor) <= 1  # a span of one token: ask it exactly
        ):
            a.by_token = cursor.segment
            return True
        return False

    def _room(self, a: _Active, cursor: GrammarCursor) -> int:
        """`CompletionBound.room` at ``cursor``, or after its certain token in the layout.

        In the layout text before a value the next token is certain (the masks allow it
        alone), so the masks that can refuse a span start after it. The roomy bound is
        loose at a value's start (a token there might open containers, `roomy`):
        `Github_medium/o20375` at ``max_tokens=512`` has room -518 before its ``{"`` and
        88 after it.
        """
        planner = a.job.planner
        left = self._left(a)
        if cursor.segment.layout_left(cursor.tokens) is not None:
            token = planner.certain(cursor, left)
            after = None if token is None else planner.advance(cursor, token)
            if isinstance(after, GrammarCursor):
                return planner.bound.room(after, left - 1)
        return planner.bound.room(cursor, left)

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

        An engine that takes token constraints gets the string's whole language and the run
        after it (its replies are cut by FactorSpec's budget masks, then asked one token);
        one that does not, the lengths the budget leaves room for (`_slack`), and the text
        after the quote as far as one token reaches into it.
        """
        cursor = a.cursor
        assert isinstance(cursor, FreeCursor)
        planner = a.job.planner
        if TAKES_TOKENS[self.engine.constraint_style]:
            # the string and the run after it (`factorspec_sdk.drafter.runs`): the reply is
            # taken by its token ids, so texts past the quote need not tokenize canonically
            regex = free_run(planner, cursor)
        else:
            regex = free_regex(cursor, self._slack(a)) + close_tail(cursor, planner.free_tables())
        return self._completion(a, prompt, budget, seed, regex=regex)

    def _grammar_request(
        self, a: _Active, prompt: list[int], budget: int, seed: int | None
    ) -> Completion:
        """A grammar segment's rest as one request with its llguidance Lark grammar.

        ``max_tokens`` is what the segment can still take: the budget left less the
        fewest tokens after the segment (the budget masks take no more of the reply), and
        no more than the most bytes the segment can still write, where its values are
        bounded (`GrammarSegment.most_bytes_left`: a token holds a byte at least). On an
        engine that takes token constraints, a segment whose strings are not all plain is
        capped where the budget's masks may first narrow it (`_room`): past that point the
        tight masks keep little besides the closing walk's tokens, a reply there would be
        refused at the model's first other token and decoded on to its ``max_tokens``
        (`Github_medium/o20375` at 512 tokens: 89 tokens taken of a 512-token reply), and
        the segment goes on one token per request from there (`_by_token`). A plain
        segment is not capped: a reply cut inside a value would go on with a rest grammar
        wider than the masks, which they may refuse at its first token.
        """
        cursor = a.cursor
        assert isinstance(cursor, GrammarCursor)
        segment = cursor.segment
        grammar = segment.rest_grammar(cursor.tokens)
        assert grammar is not None  # `_kind` asks one token where there is none
        planner = a.job.planner
        # the fewest tokens after it: a completion that stops needs no end token after it
        after = planner.exit_after(segment, stopped=True, critical=False)
        limit = budget - planner.min_tokens(after)
        most = segment.most_bytes_left(cursor.tokens)
        if most is not None:
            limit = min(limit, most)
        if TAKES_TOKENS[self.engine.constraint_style] and not segment.guides.plain:
            limit = min(limit, self._room(a, cursor))  # `_by_token`: then the tight masks
        return self._completion(a, prompt, max(1, limit), seed, grammar=grammar)

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
        self._take_span(a, reply, ended=not cut)

    def _take_span(self, a: _Active, reply: CompletionReply, ended: bool) -> None:
        """Take a span's reply by the engine's token ids, while FactorSpec's masks allow them.

        ``ended``: the engine stopped the reply itself, before its ``max_tokens``.

        On an engine that takes token constraints the span is a run (`_within`): its
        tokens are taken on past the string's quote, through the texts and choices after it.
        Elsewhere, past the span's end (a free string's closing quote) the rest of the reply
        is forced text, which the planner's certain tokens write. A refused token where the
        masks allow one token only (the engine wrote a forced text in other tokens) ends the
        run there: the certain tokens write that text. At another token the masks refuse
        (under the budget), an engine that takes token constraints is asked that position
        as one token next (`_Active.exact`): what is taken is then the embedded engine's
        greedy choice, token for token. On an engine that does not, a token cut by the
        budget closes the span the cheapest way, and a token the masks refuse (or a reply
        without token ids) has the rest of its text tokenized canonically (`_take_text`).
        """
        planner = a.job.planner
        within = _within(a.cursor, runs=TAKES_TOKENS[self.engine.constraint_style])
        ids = reply.token_ids
        rest: bytes = reply.text.encode("utf-8")
        if ids is not None:
            for k, token in enumerate(ids):
                if not within(a.cursor):
                    return
                if token in planner.allowed(a.cursor, self._left(a)):
                    self._take(a, token)
                    continue
                takes_tokens = TAKES_TOKENS[self.engine.constraint_style]
                if (
                    takes_tokens
                    and k
                    and not isinstance(a.cursor, GrammarCursor)
                    and planner.certain(a.cursor, self._left(a)) is not None
                ):
                    return  # another tokenization of a forced text: its certain tokens write it
                if takes_tokens:
                    a.exact = True
                    if isinstance(a.cursor, GrammarCursor) and (
                        k == 0 or token in planner.allowed(a.cursor)
                    ):
                        a.by_token = a.cursor.segment  # see `_by_token`
                elif token in planner.allowed(a.cursor):
                    self._close_span(a, within)  # cut by the budget
                else:
                    rest = planner.tok.decode(ids[k:])
                    break
                return
            else:
                if a.request is not None and a.request.grammar is not None:
                    self._end_span(a, within, ended)
                return
        try:
            text = rest.decode("utf-8")
        except UnicodeDecodeError:
            raise GenerationError(
                f"the {self.engine.name} engine's reply {reply.text!r} leaves FactorSpec's "
                "masks inside a character, where it cannot be tokenized again"
            ) from None
        self._take_text(a, text, within)

    def _end_span(self, a: _Active, within: _Within, ended: bool) -> None:
        """After a reply taken whole: where the engine ended a grammar segment, it ends.

        ``ended``: the engine stopped the reply itself (before its ``max_tokens``). An end
        token where a value may end or grow ends the segment on an engine that takes no
        token constraints; one that does is asked the position where it stopped as one
        token (a span request of the segment's rest would stop there again, taking nothing).
        A reply cut by its ``max_tokens`` goes on as the segment's rest.
        """
        cursor = a.cursor
        if not (isinstance(cursor, GrammarCursor) and within(cursor)):
            return
        if TAKES_TOKENS[self.engine.constraint_style]:
            a.exact = a.exact or ended
        elif cursor.step().accepting:
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


def _within(span: Cursor, *, runs: bool) -> _Within:
    """The test of still being inside the span a request was sent for at ``span``.

    A grammar segment's span is that segment. With ``runs`` (an engine whose reply is taken
    by token ids: `factorspec_sdk.drafter.runs`), a span from a free string goes on as far
    as the reply's tokens are allowed, until the record ends; without, a free string's span
    is the string.
    """
    if isinstance(span, GrammarCursor):
        segment = span.segment
        return lambda c: isinstance(c, GrammarCursor) and c.segment is segment
    if runs:
        return lambda c: not isinstance(c, Finished)
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
