"""Running prepared requests on the engine thread and waiting for their results.

Owns the asyncio side of `factorspec_sdk.server.worker.EngineWorker`: the queue limit (a
429), one `Job` per choice, the request's deadline (a job past it is cancelled with reason
``timeout``), waiting for every choice, or for a stream's deltas, while watching for a client
that went away (its jobs are cancelled, freeing their decoder slots), and turning a job's
`Done` into its answer: the record re-checked against the spec and the JSON schema sent (the
bare string of a vLLM ``choice``/``regex`` request, `factorspec_sdk.server.structured`), or
the `ApiError` its failure maps to. A record cut short, by its token budget or by its time
limit, is such an error (422 ``max_tokens_reached`` or ``timeout_reached``), never content:
it is no record of the spec.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from factorspec_sdk.engines.openai_server import OpenAIServerEngine
from factorspec_sdk.errors import OracleError, TokenBudgetError, UpstreamsUnavailableError
from factorspec_sdk.ir import RecordInvalidError, check_json_schema_record, check_record
from factorspec_sdk.provenance import provenance_of
from factorspec_sdk.server import render
from factorspec_sdk.server.protocol import ApiError, JsonObject
from factorspec_sdk.server.records import RecordWorker
from factorspec_sdk.server.render import Answer, Meta
from factorspec_sdk.server.structured import bare_text
from factorspec_sdk.server.worker import Delta, Done, EngineWorker, Job, PromptError

if TYPE_CHECKING:
    from fastapi import Request

    from factorspec_sdk.drafter.loop import DecoderConfig
    from factorspec_sdk.engines.protocol import Engine
    from factorspec_sdk.server.metrics import Metrics
    from factorspec_sdk.server.specs import Prepared

__all__ = ["Batch", "Dispatcher"]

log = logging.getLogger("factorspec.server")


@dataclass(frozen=True, slots=True)
class Batch:
    """The jobs of one request (one per choice), submitted, and their deadline.

    Attributes:
        prepared: the request.
        jobs: its jobs, choice ``i`` at index ``i``.
        deadline: the event-loop time by which they must finish.
    """

    prepared: Prepared
    jobs: list[Job]
    deadline: float


class Dispatcher:
    """Submits requests to the engine thread and awaits their answers.

    Args:
        engine: the engine; only the engine thread calls it. An upstream (an
            `OpenAIServerEngine`: a router or a server) is driven by record threads instead
            (`factorspec_sdk.server.records`).
        config: decoder options.
        metrics: counters to update.
        max_batch: most generations decoded together.
        max_queue: most generations waiting; beyond that a request is a 429.
        validate_records: re-check every finished record before it is answered.
    """

    def __init__(
        self,
        engine: Engine | OpenAIServerEngine,
        config: DecoderConfig,
        metrics: Metrics,
        *,
        max_batch: int,
        max_queue: int,
        validate_records: bool,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.max_queue = max_queue
        self.validate_records = validate_records
        self.worker: EngineWorker | RecordWorker
        if isinstance(engine, OpenAIServerEngine):
            self.worker = RecordWorker(engine, config, metrics, max_batch=max_batch)
        else:
            self.worker = EngineWorker(engine, config, metrics, max_batch=max_batch)

    @property
    def alive(self) -> bool:
        """Whether the engine thread runs."""
        return self.worker.alive

    def close(self) -> None:
        """Stop the engine thread (waiting and running jobs end with reason ``shutdown``)."""
        self.worker.close()

    async def submit(self, prepared: Prepared) -> Batch:
        """Queue one job per choice of ``prepared``, its first segment planned in a thread.

        Raises:
            ApiError: 429 when the queue cannot take them all; 400 for sampling parameters
                the decoder rejects.
        """
        req = prepared.request
        loop = asyncio.get_running_loop()
        if self.metrics.queue_depth + req.n > self.max_queue:
            raise ApiError(429, "the server queue is full; retry later", type="rate_limit_error")
        speculative = prepared.speculative
        if speculative is None:
            speculative = self.config.speculative
        jobs = [
            Job(
                prepared.spec,
                prepared.prompt,
                prepared.sampling(i),
                loop,
                asyncio.Queue(),
                stream=req.stream,
                speculative=speculative,
            )
            for i in range(req.n)
        ]
        if isinstance(self.worker, EngineWorker):  # off the engine thread (`plan_ahead`)
            for job in jobs:
                job.planner = await asyncio.to_thread(self.worker.plan_ahead, prepared.spec)
        deadline = loop.time() + prepared.timeout_s
        for job in jobs:
            self.worker.submit(job)
        return Batch(prepared, jobs, deadline)

    async def answers(self, request: Request, batch: Batch) -> list[tuple[Done, Answer]] | None:
        """Every choice's end and answer; None when the client went away first.

        The jobs are cancelled on the way out, whatever happens (a no-op for finished ones).

        Raises:
            ApiError: the first choice whose failure maps to an error answer.
        """
        try:
            dones = await self._wait_all(request, batch)
        finally:
            for job in batch.jobs:
                self.worker.cancel(job)  # no-op for finished jobs
        if dones is None:
            return None
        return [(d, await self.finish(d, batch.prepared)) for d in dones]

    async def stream(self, batch: Batch, meta: Meta, include_usage: bool) -> AsyncIterator[str]:
        """The SSE events of choice 0: a role chunk, the deltas, the last chunk, ``[DONE]``.

        An error answer at the end is sent as an error event; a stream closed before its
        job ended (the client went away) cancels the job. A bare answer (vLLM ``choice`` /
        ``regex``) comes whole in the last chunk: its record's text is not the answer.
        """
        job = batch.jobs[0]
        finished = False
        sent = ""
        try:
            yield render.sse(render.chunk(meta, "", None, role=True))
            while True:
                ev = await self._next(job, batch.deadline)
                if isinstance(ev, Delta):
                    if batch.prepared.bare or batch.prepared.tools is not None:
                        continue  # a bare string or tool calls come whole in the last chunk
                    sent += ev.text
                    yield render.sse(render.chunk(meta, ev.text, None, role=False))
                    continue
                finished = True
                try:
                    answer = await self.finish(ev, batch.prepared)
                except ApiError as exc:
                    yield render.sse(exc.body())
                    yield render.SSE_DONE
                    return
                yield render.sse(render.last_chunk(meta, ev, answer, sent))
                if include_usage:
                    yield render.sse(render.usage_chunk(meta, ev))
                yield render.SSE_DONE
                return
        finally:
            if not finished:
                self.worker.cancel(job)

    async def finish(self, done: Done, prepared: Prepared) -> Answer:
        """The answer of a job that ended (``prepared``: its request).

        A record cut short is an error, never content: one that ran out of ``max_tokens``
        (`_incomplete`) or of its time limit (`_timed_out`). A complete record's stats add
        the re-check (``validate_seconds``) and, when the request asked for it, the
        provenance it carries (``explain_seconds``).

        Raises:
            ApiError: 500 for a record that fails the re-check (logged), 503 shutting down
                or the upstream failed a record on every attempt, 422 for a prompt that
                cannot be tokenized, a token budget below the shortest record, a record that did not
                finish within its token budget (``max_tokens_reached``) or its time limit
                (``timeout_reached``), or an oracle query the solver cannot decide, 499 a
                request whose client went away, 500 another failure.
        """
        spec, schema = prepared.spec, prepared.schema
        if done.reason == "complete":
            assert done.outcome is not None
            text = done.outcome.text
            t0 = time.perf_counter()
            if self.validate_records:
                try:
                    await asyncio.to_thread(check_record, spec, text)
                    if schema is not None:  # the JSON schema the client sent
                        await asyncio.to_thread(check_json_schema_record, schema, text)
                except RecordInvalidError as exc:
                    log.error("generated record failed validation: %s; text %r", exc, text)
                    raise ApiError(
                        500,
                        f"internal error: the generated record failed validation ({exc})",
                        type="server_error",
                    ) from None
            t1 = time.perf_counter()
            provenance, explaining = None, 0.0  # not asked: no time, exactly
            if prepared.provenance:
                provenance = await asyncio.to_thread(_explained, done)
                explaining = time.perf_counter() - t1
            done.outcome.stats.add({"validate_seconds": t1 - t0, "explain_seconds": explaining})
            if prepared.tools is not None:  # a message (cut at its bound: length) or calls
                answer = prepared.tools.answer(text)
            else:
                answer = Answer(bare_text(text) if prepared.bare else text, "stop", True)
            return answer._replace(provenance=provenance)
        if done.reason == "max_tokens":
            raise _incomplete(done, prepared)
        if done.reason == "timeout":
            raise _timed_out(done, prepared)
        if done.reason == "cancelled":  # no one reads it: the client went away
            raise ApiError(499, "the request was cancelled: its client went away")
        if done.reason == "shutdown":
            raise ApiError(503, "the server is shutting down", type="server_error")
        err = done.error
        if isinstance(err, PromptError):
            raise ApiError(
                422,
                f"the prompt cannot be tokenized: {err}",
                code="prompt_not_tokenizable",
                param="messages",
            )
        if isinstance(err, TokenBudgetError):
            raise ApiError(
                422,
                err.message,
                code="token_budget",
                param="max_tokens",
                extra={"min_tokens": err.min_tokens},
            )
        if isinstance(err, UpstreamsUnavailableError):
            log.warning("the upstream failed a record: %s", err.message)
            raise ApiError(
                503,
                err.message,
                type="server_error",
                code="upstreams_unavailable",
                extra={"upstreams": err.upstreams},
            )
        if isinstance(err, OracleError):
            raise ApiError(422, f"the spec is too hard to decide: {err}", code="oracle")
        log.error("generation failed: %r", err)
        raise ApiError(500, f"generation failed: {err}", type="server_error")

    async def _next(self, job: Job, deadline: float) -> Delta | Done:
        loop = asyncio.get_running_loop()
        remaining = deadline - loop.time()
        try:
            return await asyncio.wait_for(job.events.get(), timeout=max(remaining, 0.0))
        except TimeoutError:
            self.worker.cancel(job, "timeout")
        try:  # the engine thread answers a cancel within one step
            while True:
                ev = await asyncio.wait_for(job.events.get(), timeout=120.0)
                if isinstance(ev, Done):
                    return ev
        except TimeoutError:
            return Done("error", error=RuntimeError("the engine thread did not answer"))

    async def _wait_done(self, job: Job, deadline: float) -> Done:
        while True:
            ev = await self._next(job, deadline)
            if isinstance(ev, Done):
                return ev

    async def _wait_all(self, request: Request, batch: Batch) -> list[Done] | None:
        waits = (self._wait_done(j, batch.deadline) for j in batch.jobs)
        task = asyncio.ensure_future(asyncio.gather(*waits))
        try:
            while True:
                finished, _ = await asyncio.wait({task}, timeout=0.5)
                if finished:
                    return task.result()
                if await request.is_disconnected():
                    for job in batch.jobs:
                        self.worker.cancel(job)
                    return None
        finally:
            if not task.done():
                task.cancel()


def _incomplete(done: Done, prepared: Prepared) -> ApiError:
    """The answer to a record that ran out of its token budget: a 422, not its text as content.

    A record cut by ``max_tokens`` is no record of the spec (it is not even JSON), so it is
    never returned as ``content`` with ``finish_reason`` ``length``: the error names the
    budget (the request's ``max_tokens``, or the server's default when it gave none), the
    tokens written and how the text ends; ``error.factorspec`` holds ``max_tokens``,
    ``tokens`` and the ``partial_text``. Only a spec whose values the token budget cannot
    bound gets here: for the others the masks finish the record within the budget or the
    request is refused before decoding (``token_budget``).
    """
    req = prepared.request
    asked = req.max_tokens is not None or getattr(req, "max_completion_tokens", None) is not None
    budget = prepared.max_tokens
    within = (
        f"max_tokens={budget}"
        if asked
        else f"the server's default budget of {budget} tokens (the request gave no max_tokens)"
    )
    tail = done.text[-60:]
    return ApiError(
        422,
        f"the record did not finish within {within}: {done.tokens} tokens were written "
        f"and it ends in {'...' if len(done.text) > len(tail) else ''}{tail!r}, so no "
        "record is returned. Give a larger max_tokens, or bound the values that grow "
        "(maxLength, maxItems, a pattern with bounded repetitions); a spec whose values are "
        "all bounded is finished within max_tokens or refused before decoding "
        "(code token_budget).",
        code="max_tokens_reached",
        param="max_tokens",
        extra={"max_tokens": budget, "tokens": done.tokens, "partial_text": done.text},
    )


def _explained(done: Done) -> JsonObject | None:
    """The provenance of ``done``'s complete record as JSON data, replayed from its planner."""
    outcome = done.outcome
    assert outcome is not None
    job = outcome.job
    if job is None:
        return None
    return provenance_of(job.planner, outcome.tokens, job.params.max_tokens).to_json()


def _timed_out(done: Done, prepared: Prepared) -> ApiError:
    """The answer to a record its time limit cut: a 422, not its text as content.

    As a record cut by ``max_tokens`` (`_incomplete`), a record cut by the time limit is no
    record of the spec, so it is never returned as ``content`` with ``finish_reason``
    ``length``. The limit is the request's (``factorspec.timeout_s``), else the server's
    (``--request-timeout``, 300 s by default); it runs from the moment the request is
    queued. The error names the limit, how to raise it and the tokens written;
    ``error.factorspec`` holds ``timeout_s``, ``tokens``, ``queue_seconds`` (how much of
    the limit the request waited for a decoding slot) and the ``partial_text``.

    A 422 rather than a 408 or a 504: the limit is the request's, as ``max_tokens`` is, and
    the server did not fail; the ``openai`` client retries a 408 or a 5xx twice by default,
    which would only repeat the wait for the same cut.
    """
    limit = prepared.timeout_s
    within = (
        f"factorspec.timeout_s={limit:g} s"
        if prepared.timeout_asked
        else f"the server's time limit of {limit:g} s (the request gave no factorspec.timeout_s)"
    )
    queued = (
        f"; it waited {done.queue_seconds:.1f} s of it for a decoding slot"
        if done.queue_seconds >= 0.05
        else ""
    )
    tail = done.text[-60:]
    ends = f"{'...' if len(done.text) > len(tail) else ''}{tail!r}"
    return ApiError(
        422,
        f"the record did not finish within {within}: {done.tokens} tokens were written"
        f"{queued}, and it ends in {ends}, so no record is returned. Raise the limit with "
        '"factorspec": {"timeout_s": SECONDS} in the request (at most 3600; '
        'extra_body={"factorspec": {"timeout_s": ...}} with the openai client) or start '
        "the server with a larger --request-timeout; or ask for a shorter record (a "
        "smaller max_tokens, maxLength, maxItems).",
        code="timeout_reached",
        param="factorspec.timeout_s",
        extra={
            "timeout_s": limit,
            "tokens": done.tokens,
            "queue_seconds": round(done.queue_seconds, 6),
            "partial_text": done.text,
        },
    )
