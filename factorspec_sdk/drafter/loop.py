"""The speculative decoding loop, written once for every engine and for single or batched use.

Each verify step, for every active request: draft the certain tokens (plus guesses, up to the
width the request's policy picks), run ONE batched forward over ``[pending, *draft]`` for all
requests, then verify each draft under its masks, keep the accepted prefix, roll the KV cache
back past the first rejection and take the model's (masked) token there. While the forward
runs, a worker thread plans the writer segments the next step may need (oracle queries and
tokenization), so little of that work stays on the critical path. A `DecoderClock` times
every piece of the thread's work, so each record's stats say where its time went
(`factorspec_sdk.drafter.stats`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from factorspec_sdk.drafter.guess import PromptLookupGuesser
from factorspec_sdk.drafter.overlap import Prefetch
from factorspec_sdk.drafter.stats import DecoderClock, GenerationStats, RecordClock
from factorspec_sdk.drafter.verify import SamplingParams, accept_or_replace, choose_token
from factorspec_sdk.drafter.width import WidthPolicy
from factorspec_sdk.engines.protocol import (
    Engine,
    Logits,
    SequenceId,
    SettledCostCurve,
    cached_prompt_tokens,
    undo_extend,
)
from factorspec_sdk.errors import GenerationError, IncompleteGenerationError, TokenBudgetError
from factorspec_sdk.tokens.plan import Cursor, Finished, Planner

__all__ = [
    "DecodeJob",
    "DecodeOutcome",
    "Decoder",
    "DecoderConfig",
    "GenerationStats",
    "check_budget",
]
# GenerationStats lives in `factorspec_sdk.drafter.stats`; it is re-exported here, where the
# outcomes that carry it are.


@dataclass(frozen=True, slots=True)
class DecoderConfig:
    """Decoding options shared by the requests of one `Decoder`.

    Attributes:
        speculative: draft certain tokens (and guesses); False decodes one token per forward.
        max_width: most draft tokens from the first guess on in one verify step; the certain
            tokens before it are all drafted (they need no logits, only a place in the forward).
        max_guesses: most guessed tokens per draft (0: certain drafts only).
        overlap: plan the next segments in a worker thread during the forward.
    """

    speculative: bool = True
    max_width: int = 64
    max_guesses: int = 2
    overlap: bool = True

    def __post_init__(self) -> None:
        if self.max_width < 1:
            raise ValueError("max_width must be >= 1")
        if self.max_guesses < 0:
            raise ValueError("max_guesses must be >= 0")


@dataclass(slots=True)
class DecodeJob:
    """One record to decode: its planner, prompt and sampling parameters.

    Attributes:
        watch: called on the decoding thread with the record's tokens decided so far, each
            time they grow (for streaming); an exception it raises ends the job with it.
    """

    planner: Planner
    prompt_ids: list[int]
    params: SamplingParams
    watch: Callable[[Sequence[int]], None] | None = None


@dataclass(slots=True)
class DecodeOutcome:
    """The result of one job: the record text and tokens, its stats, or the error.

    The decoder's own result, for whoever drives a decoder (a backend, the server's engine
    thread); a backend hands its caller a `factorspec_sdk.backends.base.RecordOutcome`.

    Attributes:
        job: the job of a complete record (its planner explains the record, see
            `factorspec_sdk.provenance.replayed`); None for a record that failed.
    """

    text: str
    tokens: list[int]
    stats: GenerationStats
    error: Exception | None = None
    job: DecodeJob | None = None


@dataclass(slots=True)
class _Active:
    index: int
    job: DecodeJob
    seq: SequenceId
    pending: int
    cursor: Cursor
    guesser: PromptLookupGuesser
    policy: WidthPolicy
    rng: np.random.Generator
    clock: RecordClock
    record: list[int] = field(default_factory=list)

    @property
    def stats(self) -> GenerationStats:
        return self.clock.stats


@dataclass(slots=True)
class _Draft:
    """A draft: its tokens, the cursor before each (and after the last), which are certain.

    ``cursors`` lacks the cursor after the last token where that token, a guess or after
    one, leads into a segment not planned yet (`Planner.advance_is_planned`): the segment is planned
    only once the model takes the draft that far (`end`), never for a guess it rejects.
    """

    tokens: list[int]
    cursors: list[Cursor]
    certain: list[bool]

    @property
    def unplanned(self) -> int | None:
        """The last token, where the draft left the cursor after it (its segment unplanned)."""
        return self.tokens[-1] if len(self.cursors) == len(self.tokens) else None

    def end(self, planner: Planner) -> Cursor:
        """The cursor after the draft's last token (planned here, if the draft left it)."""
        if len(self.cursors) > len(self.tokens):
            return self.cursors[len(self.tokens)]
        return planner.advance(self.cursors[-1], self.tokens[-1])

    @property
    def lead(self) -> int:
        """Leading certain tokens: accepted whatever the logits, so the forward skips their rows."""
        return next((i for i, c in enumerate(self.certain) if not c), len(self.certain))

    @property
    def keep(self) -> int:
        """Logits rows the verification reads: from the first guess to the bonus token."""
        return len(self.tokens) + 1 - self.lead


def check_budget(job: DecodeJob, start: Cursor) -> None:
    """Refuse a job whose ``max_tokens`` is below the shortest record, before any token.

    The bound is walked only as far as it takes to tell (`CompletionBound.fits`), and
    counted in full for a refusal, which names it. Its time is the record's critical
    planning: the walks plan segments and ask the oracle, and the decoding thread waits for
    them (`expenses` of the user-models suite: 0.7-1 s, under a budget a little below its
    ceiling).

    Raises:
        TokenBudgetError: no record of the spec fits in ``job.params.max_tokens`` tokens.
    """
    planner = job.planner
    budget = job.params.max_tokens
    t0 = time.perf_counter()
    try:
        if budget >= planner.bound.ceiling:  # no record the masks guarantee is longer
            return
        if not planner.bound.fits(start, budget):  # walks only as far as it needs to tell
            raise TokenBudgetError(max_tokens=budget, min_tokens=planner.min_tokens(start))
    finally:
        planner.stats.critical_seconds += time.perf_counter() - t0


class Decoder:
    """Runs jobs on an engine with certain drafts, guesses and masked verification.

    Use `run` for a fixed set of jobs, or drive it as a continuous batcher (a server loop):
    `submit` jobs at any time, call `step` repeatedly (each call is one batched forward for all
    running jobs and returns the jobs that ended), `cancel` a job whose client went away, and
    `close` at the end. Not thread-safe: one thread drives a decoder.
    """

    def __init__(self, engine: Engine, config: DecoderConfig | None = None) -> None:
        self.engine = engine
        self.config = config or DecoderConfig()
        self._active: list[_Active] = []
        self._finished: list[tuple[int, DecodeOutcome]] = []
        self._next_ticket = 0
        self._pool: ThreadPoolExecutor | None = None
        self._clock = DecoderClock()
        self._ended: dict[int, RecordClock] | None = None  # during `run`: the ended records
        # choosing a width reads the engine's cost curve: drafting, on an engine that settled
        # the curve at load; another may measure it on first use, so the width is its part
        self._width_part = (
            "draft_seconds" if isinstance(engine, SettledCostCurve) else "cost_curve_seconds"
        )

    # ------------------------------------------------------------------ continuous batching

    def submit(self, job: DecodeJob) -> int:
        """Add a job; it joins the next `step`. Returns its ticket."""
        ticket = self._next_ticket
        self._next_ticket += 1
        planner = job.planner
        clock = self._clock.record(GenerationStats(), planner.stats, planner.writer.oracle.stats)
        with self._clock.part(clock, "start_seconds"):
            try:
                if not job.prompt_ids:
                    raise GenerationError("the prompt has no tokens")
                cursor = job.planner.start()
                check_budget(job, cursor)
            except Exception as exc:
                failed: Exception | None = exc
            else:
                failed = None
                a = self._start(ticket, job, cursor, clock)
        if failed is not None:
            self._finished.append((ticket, DecodeOutcome("", [], clock.stats, failed)))
            self._end(ticket, clock)
            return ticket
        if isinstance(cursor, Finished):
            self._finished.append((ticket, self._finish(a)))
        else:
            self._active.append(a)
        return ticket

    def _start(self, ticket: int, job: DecodeJob, cursor: Cursor, clock: RecordClock) -> _Active:
        """A submitted job's engine sequence and drafting state."""
        seq = self.engine.new_sequence(job.prompt_ids[:-1])
        policy = WidthPolicy(
            max_width=self.config.max_width,
            max_guesses=self.config.max_guesses if self.config.speculative else 0,
        )
        a = _Active(
            index=ticket,
            job=job,
            seq=seq,
            pending=job.prompt_ids[-1],
            cursor=cursor,
            guesser=PromptLookupGuesser(job.prompt_ids),
            policy=policy,
            rng=np.random.default_rng(job.params.seed),
            clock=clock,
        )
        a.stats.prompt_tokens = len(job.prompt_ids)
        a.stats.cached_prompt_tokens = cached_prompt_tokens(self.engine, seq)
        return a

    def _end(self, ticket: int, clock: RecordClock) -> None:
        """Close a record's clock (its wall ends now); `run` re-settles it at the run's end."""
        self._clock.close(clock)
        if self._ended is not None:
            self._ended[ticket] = clock

    @property
    def busy(self) -> bool:
        """Whether any job is running or has an outcome not yet returned by `step`."""
        return bool(self._active or self._finished)

    def tokens_so_far(self, ticket: int) -> list[int]:
        """Record tokens decided so far for a running job (for streaming)."""
        for a in self._active:
            if a.index == ticket:
                return self._decided(a, False)
        return []

    def tokens_known(self, ticket: int) -> list[int]:
        """`tokens_so_far` and the certain tokens after them (streamed ahead of the forward)."""
        for a in self._active:
            if a.index == ticket:
                left = a.job.params.max_tokens - len(a.record)
                return [*self._decided(a, False), *a.job.planner.certain_run(a.cursor, left)]
        return []

    def cancel(self, ticket: int) -> bool:
        """Stop a running job and free its sequence; False if it is not running."""
        for a in self._active:
            if a.index == ticket:
                self._active.remove(a)
                self.engine.release(a.seq)
                return True
        return False

    def step(self) -> list[tuple[int, DecodeOutcome]]:
        """One verify step for every running job; returns the jobs that ended."""
        finished, self._finished = self._finished, []
        if self._active:
            if self._pool is None and self.config.overlap:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="factorspec")
            self._active = self._step(self._active, finished, self._pool)
        return finished

    def close(self) -> None:
        """Release every running job and stop the planning worker."""
        for a in self._active:
            self.engine.release(a.seq)
        self._active = []
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def run(self, jobs: Sequence[DecodeJob]) -> list[DecodeOutcome]:
        """Decode all jobs together; every outcome is returned, errors included.

        The outcomes come back together: each record's wall is the run's, and the run's
        work for the other records (before this one started, after it ended) is its
        ``batch_seconds``.
        """
        started, busy0 = time.perf_counter(), self._clock.busy
        self._ended = {}
        results: dict[int, DecodeOutcome] = {}
        try:
            tickets = [self.submit(job) for job in jobs]
            while self.busy:
                results.update(self.step())
        finally:
            self.close()
            ended, self._ended = self._ended, None
        for clock in ended.values():
            self._clock.rebase(clock, started, busy0)
        return [results[t] for t in tickets]

    # ------------------------------------------------------------------ one step

    def _step(
        self,
        active: list[_Active],
        finished: list[tuple[int, DecodeOutcome]],
        pool: ThreadPoolExecutor | None,
    ) -> list[_Active]:
        clock = self._clock  # the decoder's; each record's is `a.clock`
        drafts: list[_Draft] = []
        still: list[_Active] = []
        for a in active:
            try:
                with clock.part(a.clock, "draft_seconds"):
                    draft = self._draft(a)
                with clock.part(a.clock, self._width_part):
                    drafts.append(self._width(a, draft))
                still.append(a)
            except Exception as exc:
                finished.append((a.index, self._fail(a, exc)))
        active = still
        if not active:
            return []
        prefetch = Prefetch(
            pool,
            [(a.job.planner, d.cursors[-1]) for a, d in zip(active, drafts, strict=True)],
            [d.unplanned for d in drafts],
        )
        if prefetch.pool_gone:  # the planning worker is gone: plan on this thread
            self._pool = None
        requests = [(a.seq, [a.pending, *d.tokens]) for a, d in zip(active, drafts, strict=True)]
        keep = [d.keep for d in drafts]
        lengths = [self.engine.length(a.seq) for a in active]
        t0 = time.perf_counter()
        try:
            try:
                logits: Sequence[Logits | Exception] = self.engine.extend(requests, keep=keep)
            except Exception:  # one bad request must not fail the batch: run each alone
                logits = self._isolate(active, requests, keep, lengths)
            dt = time.perf_counter() - t0
        finally:
            waited = prefetch.finish()
        clocks = [a.clock for a in active]
        clock.shared(dt, clocks, "forward_seconds")
        clock.shared(waited, clocks, None)  # the planners count it as critical planning
        for a, background in zip(active, prefetch.background, strict=True):
            a.stats.background_plan_seconds += background
        survivors: list[_Active] = []
        for a, d, rows in zip(active, drafts, logits, strict=True):
            if isinstance(rows, Exception):
                finished.append((a.index, self._fail(a, rows)))
                continue
            a.stats.verify_steps += 1
            try:
                with clock.part(a.clock, "verify_seconds"):
                    done = self._verify(a, d, rows)
                if a.job.watch is not None:
                    with clock.part(a.clock, "stream_seconds"):
                        a.job.watch(self._decided(a, done))
            except Exception as exc:
                finished.append((a.index, self._fail(a, exc)))
                continue
            if done:
                finished.append((a.index, self._finish(a)))
            else:
                survivors.append(a)
        return survivors

    def _isolate(
        self,
        active: list[_Active],
        requests: list[tuple[SequenceId, list[int]]],
        keep: list[int],
        lengths: list[int],
    ) -> list[Logits | Exception]:
        """After a failed batched forward: each request's forward alone, or its error."""
        out: list[Logits | Exception] = []
        for a, request, k, length in zip(active, requests, keep, lengths, strict=True):
            try:
                undo_extend(self.engine, [(a.seq, length)])
                out.append(self.engine.extend([request], keep=[k])[0])
            except Exception as exc:
                out.append(exc)
        return out

    def _draft(self, a: _Active) -> _Draft:
        planner = a.job.planner
        # record tokens so far: a.record minus the prompt's last token, plus the pending one
        budget = a.job.params.max_tokens - len(a.record) - 1
        if budget < 0:
            written = [*self._record_tokens(a), a.pending] if a.record else []
            raise IncompleteGenerationError(
                "max_tokens reached before the record was complete",
                partial_text=self._text(written),
                tokens=len(written),
            )
        tokens: list[int] = []
        cursors: list[Cursor] = [a.cursor]
        certain: list[bool] = []
        if not self.config.speculative:
            return _Draft(tokens, cursors, certain)
        cur = a.cursor
        guesses = 0
        limit = budget  # certain tokens up to the first guess are not capped by max_width
        while len(tokens) < limit and not isinstance(cur, Finished):
            left = budget + 1 - len(tokens)  # tokens left at `cur`, this one included
            t = planner.certain(cur, left)
            if t is None:
                if guesses >= a.policy.max_guesses:
                    break
                allowed = planner.allowed(cur, left)
                t = a.guesser.guess(allowed, [*a.record[1:], a.pending, *tokens])
                if t is None:
                    break
                if not guesses:
                    limit = min(budget, len(tokens) + self.config.max_width)
                guesses += 1
                certain.append(False)
            else:
                certain.append(True)
            tokens.append(t)
            if guesses and not planner.advance_is_planned(cur, t):
                break  # past a guess, a segment not planned: planned if the model goes there
            cur = planner.advance(cur, t)
            cursors.append(cur)
        return _Draft(tokens, cursors, certain)

    def _width(self, a: _Active, d: _Draft) -> _Draft:
        """The draft cut to the width the request's policy picks by the engine's cost curve."""
        if not d.tokens:
            return d
        k = a.policy.choose(d.certain, self.engine.verify_cost)
        return _Draft(d.tokens[:k], d.cursors[: k + 1], d.certain[:k])

    def _verify(self, a: _Active, d: _Draft, rows: Logits) -> bool:
        """Accept the draft's tokens up to the first rejection.

        ``rows`` are the draft's last ``d.keep`` logits rows: row ``i - d.lead`` predicts
        draft token ``i``.
        """
        planner = a.job.planner
        params = a.job.params
        left = params.max_tokens - len(a.record)  # tokens left at d.cursors[0]
        a.record.append(a.pending)
        a.stats.drafted += len(d.tokens)
        a.stats.certain_drafted += sum(d.certain)
        proposed = accepted_guesses = 0
        base = self.engine.length(a.seq) - len(d.tokens)  # length after the pending token
        lead = d.lead
        for i, drafted in enumerate(d.tokens):
            if d.certain[i]:  # the only allowed token: accepted with probability one
                a.record.append(drafted)
                continue
            cursor = d.cursors[i]
            proposed += 1
            replacement = accept_or_replace(
                rows[i - lead], planner.allowed(cursor, left - i), drafted, params, a.rng
            )
            if replacement is None:
                a.record.append(drafted)
                accepted_guesses += 1
                continue
            # first rejection: roll back and take the model's token here
            self.engine.truncate(a.seq, base + i)
            a.policy.record(proposed, accepted_guesses)
            a.stats.guesses_proposed += proposed
            a.stats.guesses_accepted += accepted_guesses
            a.pending = replacement
            a.cursor = planner.advance(cursor, replacement)
            return self._maybe_finished(a)
        a.policy.record(proposed, accepted_guesses)
        a.stats.guesses_proposed += proposed
        a.stats.guesses_accepted += accepted_guesses
        end = d.end(planner)
        if isinstance(end, Finished):
            a.cursor = end
            return True
        allowed = planner.allowed(end, left - len(d.tokens))
        bonus = choose_token(rows[len(d.tokens) - lead], allowed, params, a.rng)
        a.pending = bonus
        a.cursor = planner.advance(end, bonus)
        return self._maybe_finished(a)

    def _maybe_finished(self, a: _Active) -> bool:
        if isinstance(a.cursor, Finished):
            a.record.append(a.pending)
            return True
        return False

    # ------------------------------------------------------------------ endings

    def _text(self, tokens: Sequence[int]) -> str:
        vocab = self.engine.tokenizer.vocab
        return b"".join(vocab[t] for t in tokens).decode("utf-8", errors="replace")

    def _decided(self, a: _Active, done: bool) -> list[int]:
        """The record's tokens decided so far: the pending one too, until the record is done."""
        if done:
            return self._record_tokens(a)
        return [*self._record_tokens(a), a.pending] if a.record else []

    def _record_tokens(self, a: _Active) -> list[int]:
        # the first appended pending token is the prompt's last token, not part of the record
        return a.record[1:]

    def _finish(self, a: _Active) -> DecodeOutcome:
        self.engine.release(a.seq)
        tokens = self._record_tokens(a)
        a.stats.tokens = len(tokens)
        self._end(a.index, a.clock)
        return DecodeOutcome(self._text(tokens), tokens, a.stats, job=a.job)

    def _fail(self, a: _Active, exc: Exception) -> DecodeOutcome:
        self.engine.release(a.seq)
        tokens = self._record_tokens(a)
        a.stats.tokens = len(tokens)
        self._end(a.index, a.clock)
        return DecodeOutcome(self._text(tokens), tokens, a.stats, exc)
