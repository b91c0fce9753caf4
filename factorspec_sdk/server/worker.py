"""The engine thread: ONE thread drives a `Decoder` as a continuous batcher.

Requests (on the asyncio side) hand it `Job` objects through a thread-safe inbox and await
events on an asyncio queue: text deltas for streaming, then exactly one `Done`. Between two
decoder steps the thread admits waiting jobs (up to ``max_batch`` in the batch), cancels the
jobs whose clients left or timed out, and runs one batched verify step; no request waits for
another to finish.
"""

from __future__ import annotations

import asyncio
import codecs
import itertools
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from factorspec_sdk.drafter.loop import DecodeJob, DecodeOutcome, Decoder, DecoderConfig
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.tokens.plan import Planner, planner_for

if TYPE_CHECKING:
    from factorspec_sdk.engines.protocol import Engine
    from factorspec_sdk.graph import CompiledSpec
    from factorspec_sdk.server.metrics import Metrics
    from factorspec_sdk.server.specs import Prompt

__all__ = ["Delta", "Done", "EngineWorker", "Job", "PromptError"]

StopReason = Literal["complete", "max_tokens", "timeout", "cancelled", "error", "shutdown"]


class PromptError(Exception):
    """The prompt cannot be turned into tokens (a 400)."""


@dataclass(frozen=True, slots=True)
class Delta:
    """More record text (streaming)."""

    text: str


@dataclass(frozen=True, slots=True)
class Done:
    """The end of a job: its outcome, or why it stopped early with the text so far."""

    reason: StopReason
    outcome: DecodeOutcome | None = None
    text: str = ""
    tokens: int = 0
    error: Exception | None = None
    queue_seconds: float = 0.0


Event = Delta | Done


@dataclass(eq=False)
class Job:
    """One record to generate, as the asyncio side submits it."""

    spec: CompiledSpec
    prompt: Prompt
    params: SamplingParams
    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue[Event]
    stream: bool = False
    speculative: bool = True
    planner: Planner | None = None
    """The record's planner, started before the job was queued (`EngineWorker.plan_ahead`);
    None: the engine thread makes and starts one when it admits the job."""
    id: int = field(default_factory=itertools.count().__next__)
    enqueued: float = field(default_factory=time.perf_counter)
    """When the job was queued (`EngineWorker.submit`): its queue time counts from it."""
    admitted: float = 0.0
    prompt_seconds: float = 0.0
    """How long the prompt's token ids took (chat template, tokenization) at admission."""
    ticket: int | None = None
    sent_bytes: int = 0
    decoder_utf8: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )

    def post(self, event: Event) -> None:
        """Deliver an event to the awaiting request (thread-safe)."""
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)
        except RuntimeError:  # the event loop is closed: nobody is waiting
            pass


@dataclass(frozen=True, slots=True)
class _Submit:
    job: Job


@dataclass(frozen=True, slots=True)
class _Cancel:
    job: Job
    reason: StopReason


class EngineWorker:
    """Owns the engine and its decoders; all engine calls happen on this thread.

    Args:
        engine: the engine.
        config: decoder options (speculative requests).
        metrics: counters to update.
        max_batch: most jobs decoded together; the rest wait in a queue.
    """

    def __init__(
        self,
        engine: Engine,
        config: DecoderConfig,
        metrics: Metrics,
        *,
        max_batch: int = 64,
    ) -> None:
        self.engine = engine
        self.config = config
        self.metrics = metrics
        self.max_batch = max_batch
        self._inbox: queue.SimpleQueue[_Submit | _Cancel | None] = queue.SimpleQueue()
        self._waiting: deque[Job] = deque()
        self._running: dict[int, Job] = {}  # by ticket
        self._decoders: dict[bool, Decoder] = {}  # one per speculative setting
        self._ticket_decoder: dict[int, bool] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="factorspec-engine", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ asyncio side

    def plan_ahead(self, spec: CompiledSpec) -> Planner | None:
        """A planner for a record of ``spec`` with its first segment planned, or None.

        Call it off the engine thread, before queueing the job that takes it. Planning the
        first segment (the writer, the oracle's first queries and, for a record its
        relations determine, the whole record) is most of a small record's CPU; done here,
        the engine thread only admits the record, and the batch's next forward does not
        wait on it (`Decoder.submit` starts the planner again: a started one answers from
        its plan cache). A planner whose first segment fails is dropped (None): the engine
        thread then makes its own at admission, as without planning ahead, and reports
        the error as the job's.
        """
        try:
            planner = planner_for(spec, self.engine.tokenizer)
            planner.start()
        except Exception:
            return None
        return planner

    def submit(self, job: Job) -> None:
        """Queue a job (thread-safe)."""
        job.enqueued = time.perf_counter()
        self._inbox.put(_Submit(job))

    def cancel(self, job: Job, reason: StopReason = "cancelled") -> None:
        """Stop a job: its `Done` carries the text so far (thread-safe; idempotent)."""
        self._inbox.put(_Cancel(job, reason))

    @property
    def alive(self) -> bool:
        """Whether the engine thread runs."""
        return self._thread.is_alive()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread; waiting and running jobs end with reason ``shutdown``."""
        self._stop.set()
        self._inbox.put(None)
        self._thread.join(timeout)

    # ------------------------------------------------------------------ engine thread

    def _decoder(self, speculative: bool) -> Decoder:
        d = self._decoders.get(speculative)
        if d is None:
            c = self.config
            d = Decoder(
                self.engine, DecoderConfig(speculative, c.max_width, c.max_guesses, c.overlap)
            )
            self._decoders[speculative] = d
        return d

    def _busy(self) -> bool:
        return any(d.busy for d in self._decoders.values())

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                block = not self._busy() and not self._waiting
                self._drain(block)
                if self._stop.is_set():
                    break
                self._admit()
                self._step()
        finally:
            self._shutdown()

    def _drain(self, block: bool) -> None:
        while True:
            try:
                cmd = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
            except queue.Empty:
                return
            block = False
            if cmd is None:
                return
            if isinstance(cmd, _Submit):
                self._waiting.append(cmd.job)
            else:
                self._cancel(cmd.job, cmd.reason)
            self._gauges()

    def _gauges(self) -> None:
        self.metrics.queue_depth = len(self._waiting)
        self.metrics.active = len(self._running)

    def _cancel(self, job: Job, reason: StopReason) -> None:
        if job in self._waiting:
            self._waiting.remove(job)
            job.post(Done(reason, queue_seconds=time.perf_counter() - job.enqueued))
            return
        if job.ticket is None or self._running.get(job.ticket) is not job:
            return  # already finished
        decoder = self._decoder(self._ticket_decoder[job.ticket])
        tokens = decoder.tokens_so_far(job.ticket)
        text = self._text(tokens)
        if decoder.cancel(job.ticket):
            del self._running[job.ticket]
            self._ticket_decoder.pop(job.ticket, None)
            self.metrics.add("timeouts" if reason == "timeout" else "cancelled")
            job.post(Done(reason, text=text, tokens=len(tokens), queue_seconds=self._queued(job)))

    @staticmethod
    def _queued(job: Job) -> float:
        return max(job.admitted - job.enqueued, 0.0) if job.admitted else 0.0

    def _admit(self) -> None:
        while self._waiting and len(self._running) < self.max_batch:
            job = self._waiting.popleft()
            job.admitted = time.perf_counter()
            try:
                try:
                    ids = job.prompt(self.engine)
                except Exception as exc:
                    raise PromptError(str(exc)) from exc
                job.prompt_seconds = time.perf_counter() - job.admitted
                if not ids:
                    raise PromptError("the prompt has no tokens")
                planner = job.planner or planner_for(job.spec, self.engine.tokenizer)
                ticket = self._decoder(job.speculative).submit(DecodeJob(planner, ids, job.params))
            except Exception as exc:
                job.post(Done("error", error=exc, queue_seconds=self._queued(job)))
                continue
            job.ticket = ticket
            self._running[ticket] = job
            self._ticket_decoder[ticket] = job.speculative
        self._gauges()

    def _step(self) -> None:
        for speculative, decoder in list(self._decoders.items()):
            if not decoder.busy:
                continue
            try:
                finished = decoder.step()
            except Exception as exc:  # the engine failed: fail this decoder's batch
                for ticket, spec_flag in list(self._ticket_decoder.items()):
                    if spec_flag == speculative:
                        job = self._running.pop(ticket)
                        del self._ticket_decoder[ticket]
                        job.post(Done("error", error=exc, queue_seconds=self._queued(job)))
                decoder.close()
                del self._decoders[speculative]
                continue
            self.metrics.add("engine_steps")
            for ticket, outcome in finished:
                done_job = self._running.pop(ticket, None)
                self._ticket_decoder.pop(ticket, None)
                if done_job is None:
                    continue
                job = done_job
                outcome.stats.add(
                    {"queue_seconds": self._queued(job), "prompt_seconds": job.prompt_seconds}
                )
                self.metrics.generation(outcome.stats)
                if outcome.error is None:
                    job.post(Done("complete", outcome, queue_seconds=self._queued(job)))
                else:
                    from factorspec_sdk.errors import IncompleteGenerationError

                    reason: StopReason = (
                        "max_tokens"
                        if isinstance(outcome.error, IncompleteGenerationError)
                        else "error"
                    )
                    job.post(
                        Done(
                            reason,
                            outcome,
                            text=outcome.text,
                            tokens=len(outcome.tokens),
                            error=outcome.error,
                            queue_seconds=self._queued(job),
                        )
                    )
            for ticket, job in self._running.items():
                if job.stream and self._ticket_decoder.get(ticket) == speculative:
                    self._stream(decoder, job)
        self._gauges()

    def _stream(self, decoder: Decoder, job: Job) -> None:
        assert job.ticket is not None
        tokens = decoder.tokens_known(job.ticket)  # ahead by the certain run: it cannot change
        vocab = self.engine.tokenizer.vocab
        data = b"".join(vocab[t] for t in tokens)
        if len(data) <= job.sent_bytes:
            return
        text = job.decoder_utf8.decode(data[job.sent_bytes :])
        job.sent_bytes = len(data)
        if text:
            job.post(Delta(text))

    def _text(self, tokens: list[int]) -> str:
        vocab = self.engine.tokenizer.vocab
        return b"".join(vocab[t] for t in tokens).decode("utf-8", errors="replace")

    def _shutdown(self) -> None:
        for job in list(self._waiting):
            job.post(Done("shutdown"))
        self._waiting.clear()
        for job in self._running.values():
            job.post(Done("shutdown"))
        self._running.clear()
        for d in self._decoders.values():
            d.close()
        self._decoders.clear()
