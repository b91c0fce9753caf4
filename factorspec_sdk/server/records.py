"""The record threads of ``factorspec serve --upstream``: one record per thread.

With an upstream (`factorspec_sdk.engines.openai_server.OpenAIServerEngine` over a router in
front of vLLM / SGLang servers, or over one server) the front plans the masks and the
servers run the forwards; a record is a short conversation of completion requests, so the
front decodes many records at once, each on its own thread
(`factorspec_sdk.backends.upstreams.decode_record`, which restarts a record when a server
fails under it). `RecordWorker` has `EngineWorker`'s contract towards
`factorspec_sdk.server.dispatch`: jobs in, text deltas and exactly one `Done` out per job,
cancellation (client gone, timeout, shutdown) honoured before the record's next request.
The choices of one request share its spec, whose solvers serve one thread at a time, so
they decode one after another.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

from factorspec_sdk.backends.upstreams import RecordRun, decode_record
from factorspec_sdk.drafter.loop import DecodeJob, DecoderConfig
from factorspec_sdk.engines.openai_server import OpenAIServerEngine
from factorspec_sdk.errors import EngineError, IncompleteGenerationError
from factorspec_sdk.server.metrics import Metrics
from factorspec_sdk.server.worker import Delta, Done, Job, PromptError, StopReason
from factorspec_sdk.tokens.plan import planner_for

__all__ = ["RecordWorker", "upstream_metrics"]


class _Stopped(Exception):
    """Raised in a record's thread to end it (cancelled, timed out, shutting down)."""


@dataclass(eq=False, slots=True)
class _State:
    job: Job
    started: bool = False
    stop: StopReason | None = None
    sent: bytes = b""


class RecordWorker:
    """Decodes each job as one record on the upstream, up to ``max_batch`` at once.

    Args:
        upstream: the engine tier (the worker does not close it).
        config: decoder options.
        metrics: counters to update.
        max_batch: most records decoded at once (capped by the upstream's
            ``max_concurrency``); the rest wait in a queue.
    """

    def __init__(
        self,
        upstream: OpenAIServerEngine,
        config: DecoderConfig,
        metrics: Metrics,
        *,
        max_batch: int,
    ) -> None:
        self.upstream = upstream
        self.config = config
        self.metrics = metrics
        self.threads = max(1, min(max_batch, upstream.max_concurrency))
        self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="factorspec-record")
        self._lock = threading.Lock()
        self._states: dict[int, _State] = {}  # unanswered jobs, by job id
        self._specs: dict[int, tuple[threading.Lock, int]] = {}  # by id(spec): lock, users
        self._closed = False

    # ------------------------------------------------------------------ asyncio side

    def submit(self, job: Job) -> None:
        """Queue a job (thread-safe)."""
        with self._lock:
            if self._closed:
                job.post(Done("shutdown"))
                return
            state = _State(job)
            self._states[job.id] = state
            self._gauges()
        self._executor.submit(self._run, state)

    def cancel(self, job: Job, reason: StopReason = "cancelled") -> None:
        """Stop a job: a waiting one ends now, a running one before its next request."""
        with self._lock:
            state = self._states.get(job.id)
            if state is None or state.stop is not None:
                return  # answered already, or stopping
            state.stop = reason
            if state.started:
                return
            del self._states[job.id]
            self._gauges()
        job.post(Done(reason, queue_seconds=time.perf_counter() - job.enqueued))

    @property
    def alive(self) -> bool:
        """Whether the worker takes jobs."""
        return not self._closed

    def close(self, timeout: float = 10.0) -> None:
        """Answer every unanswered job with ``shutdown``.

        Running records stop before their next request.
        """
        with self._lock:
            self._closed = True
            states = list(self._states.values())
            self._states.clear()
            for state in states:
                state.stop = "shutdown"
        for state in states:
            state.job.post(Done("shutdown"))
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ record threads

    def _gauges(self) -> None:
        running = sum(s.started for s in self._states.values())
        self.metrics.active = running
        self.metrics.queue_depth = len(self._states) - running

    def _run(self, state: _State) -> None:
        job = state.job
        with self._lock:
            if self._states.get(job.id) is not state:
                return  # cancelled while waiting
            state.started = True
            job.admitted = time.perf_counter()
            self._gauges()
        done = self._decode(state)
        with self._lock:
            if self._states.pop(job.id, None) is None:
                return  # answered by close()
            self._gauges()
        job.post(done)

    def _decode(self, state: _State) -> Done:
        job = state.job
        queued = max(job.admitted - job.enqueued, 0.0)
        upstream = self.upstream
        try:
            try:
                ids = job.prompt(upstream)
            except Exception as exc:
                raise PromptError(str(exc)) from exc
            job.prompt_seconds = time.perf_counter() - job.admitted
            if not ids:
                raise PromptError("the prompt has no tokens")

            def fresh() -> DecodeJob:
                return DecodeJob(planner_for(job.spec, upstream.tokenizer), ids, job.params)

            config = self.config
            if config.speculative != job.speculative:
                config = DecoderConfig(
                    job.speculative, config.max_width, config.max_guesses, config.overlap
                )
            with self._spec_lock(job):
                run = decode_record(upstream, fresh, config, watch=lambda t: self._watch(state, t))
        except Exception as exc:
            return Done("error", error=exc, queue_seconds=queued)
        return self._done(state, run, queued)

    @contextmanager
    def _spec_lock(self, job: Job) -> Iterator[None]:
        """Hold the lock of the job's spec.

        A spec's solvers serve one thread at a time, and the choices of one request (``n`` >
        1) share their spec, so they decode in turn.
        """
        key = id(job.spec)
        with self._lock:
            lock, users = self._specs.get(key, (threading.Lock(), 0))
            self._specs[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._specs[key]
                if users == 1:
                    del self._specs[key]
                else:
                    self._specs[key] = (lock, users - 1)

    def _watch(self, state: _State, tokens: Sequence[int]) -> None:
        if state.stop is not None:
            raise _Stopped(state.stop)
        if state.job.stream:
            self._stream(state, tokens)

    def _stream(self, state: _State, tokens: Sequence[int]) -> None:
        """Post the text past what was sent; after a restart, only once it passes it."""
        data = self.upstream.tokenizer.decode(tokens)
        if len(data) <= len(state.sent) or not data.startswith(state.sent):
            return
        text = state.job.decoder_utf8.decode(data[len(state.sent) :])
        state.sent = data
        if text:
            state.job.post(Delta(text))

    def _done(self, state: _State, run: RecordRun, queued: float) -> Done:
        out = run.outcome
        out.stats.add({"queue_seconds": queued, "prompt_seconds": state.job.prompt_seconds})
        if run.restarts:
            self.metrics.add("upstream_restarts", run.restarts)
        if isinstance(out.error, _Stopped) and state.stop is not None:  # cancelled mid-record
            self.metrics.add("timeouts" if state.stop == "timeout" else "cancelled")
            return Done(state.stop, text=out.text, tokens=len(out.tokens), queue_seconds=queued)
        self.metrics.generation(out.stats)
        if out.error is None:
            streamed = state.sent
            decoded = self.upstream.tokenizer.decode(out.tokens)
            if run.restarts and not decoded.startswith(streamed):
                error = EngineError(
                    f"the record was restarted after a server failed under it "
                    f"({run.failures[-1]}), and the restart differs from the text already "
                    "streamed; retry the request"
                )
                return Done("error", error=error, queue_seconds=queued)
            return Done("complete", out, queue_seconds=queued)
        reason: StopReason = (
            "max_tokens" if isinstance(out.error, IncompleteGenerationError) else "error"
        )
        return Done(
            reason,
            out,
            text=out.text,
            tokens=len(out.tokens),
            error=out.error,
            queue_seconds=queued,
        )


def upstream_metrics(upstream: OpenAIServerEngine, metrics: Metrics) -> str:
    """The upstream's counters in the Prometheus text format (appended to ``/metrics``)."""
    lines: list[str] = []
    for name, help_, value in (
        ("upstream_requests_total", "Segment requests sent to the upstream.", upstream.requests),
        ("upstream_failures_total", "Requests the upstream failed (5xx, 429, unreachable).",
         upstream.failures),
        ("upstream_restarts_total", "Records restarted after the upstream failed under them.",
         metrics.totals["upstream_restarts"]),
    ):  # fmt: skip
        lines.append(f"# HELP factorspec_{name} {help_}")
        lines.append(f"# TYPE factorspec_{name} counter")
        lines.append(f'factorspec_{name}{{url="{upstream.root}"}} {value:g}')
    return "\n".join(lines) + "\n"
