"""The OpenAI-compatible FastAPI app of `factorspec serve`.

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``,
``GET /health``, ``GET /metrics``. See `factorspec_sdk.server` for the protocol.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from fastapi import FastAPI, Request  # noqa: TID253 - the server package is imported on demand
from fastapi.responses import (  # noqa: TID253
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from pydantic import ValidationError

from factorspec_sdk.drafter.loop import DecoderConfig
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.errors import OracleError, SpecError, TokenBudgetError, UnsatisfiableSpecError
from factorspec_sdk.ir import (
    IRError,
    IRLimits,
    RecordInvalidError,
    check_record,
    ir_from_json_schema,
    json_depth,
    spec_from_ir,
)
from factorspec_sdk.server.metrics import Metrics
from factorspec_sdk.server.protocol import (
    ApiError,
    ChatRequest,
    CompletionRequest,
    FactorSpecExtension,
)
from factorspec_sdk.server.worker import Delta, Done, EngineWorker, Job, PromptError

if TYPE_CHECKING:
    from factorspec_sdk.engines.protocol import ChatMessage, Engine
    from factorspec_sdk.graph.spec import CompiledSpec

__all__ = ["ServerOptions", "create_app"]

log = logging.getLogger("factorspec.server")

JsonObject = dict[str, object]
Kind = Literal["chat", "completion"]


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Server settings.

    Attributes:
        request_timeout_s: longest time a generation may take (then finish_reason ``length``).
        max_batch: most generations decoded together; the others wait in a queue.
        max_queue: most generations waiting; beyond that requests get a 429.
        max_body_bytes: largest request body (413 beyond).
        default_max_tokens: token budget when a request gives none.
        api_key: if set, requests need ``Authorization: Bearer <api_key>``.
        validate_records: re-check every finished record against the spec (schema + factors).
        solver_timeout_ms: if set, a process-wide Z3 timeout for every solver query (an
            oracle query that runs out is a 422), so that no IR can stall the engine thread.
    """

    request_timeout_s: float = 300.0
    max_batch: int = 64
    max_queue: int = 4096
    max_body_bytes: int = 8 * 2**20
    default_max_tokens: int = 2048
    api_key: str | None = None
    validate_records: bool = True
    solver_timeout_ms: int | None = None


def create_app(
    engine: Engine,
    *,
    model_name: str | None = None,
    config: DecoderConfig | None = None,
    limits: IRLimits | None = None,
    options: ServerOptions | None = None,
) -> FastAPI:
    """The FastAPI app serving ``engine`` under the OpenAI API.

    Args:
        engine: the engine; only the app's engine thread calls it.
        model_name: the model id clients pass as ``model`` (default: the engine's model
            folder name, else the engine name).
        config: decoder options (width, guesses, overlap).
        limits: limits on relation IRs and JSON schemas.
        options: timeouts, batch and queue sizes, body size, API key.
    """
    server = _Server(
        engine,
        model_name or _default_model_name(engine),
        config or DecoderConfig(),
        limits or IRLimits(),
        options or ServerOptions(),
    )
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        server.worker.close()

    app = FastAPI(title="FactorSpec", version="1", lifespan=lifespan)
    app.state.factorspec = server

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await server.handle(request, "chat")

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await server.handle(request, "completion")

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [server.model_card()]})

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str) -> JSONResponse:
        if model_id != server.model_name:
            return _error(ApiError(404, f"model {model_id!r} not found", code="model_not_found"))
        return JSONResponse(server.model_card())

    @app.get("/health")
    async def health() -> JSONResponse:
        ok = server.worker.alive
        body = {
            "status": "ok" if ok else "engine thread stopped",
            "model": server.model_name,
            "engine": engine.name,
            "active": server.metrics.active,
            "queued": server.metrics.queue_depth,
        }
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(
            server.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    return app


def _default_model_name(engine: Engine) -> str:
    path = getattr(engine, "model_path", None)
    if isinstance(path, (str, Path)) and str(path):
        return Path(path).name
    return engine.name


def _error(exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


def _spec_error(exc: Exception) -> ApiError:
    if isinstance(exc, IRError):
        return ApiError(exc.status, exc.message, code="invalid_relation_ir", param="factorspec.ir")
    if isinstance(exc, UnsatisfiableSpecError):
        return ApiError(
            422, exc.message, code="unsatisfiable_spec", extra={"unsat_core": list(exc.core)}
        )
    if isinstance(exc, SpecError):
        return ApiError(422, exc.message, code="spec_error")
    if isinstance(exc, RecursionError):
        return ApiError(400, "the request nests too deeply")
    raise exc


class _Server:
    def __init__(
        self,
        engine: Engine,
        model_name: str,
        config: DecoderConfig,
        limits: IRLimits,
        options: ServerOptions,
    ) -> None:
        self.engine = engine
        self.model_name = model_name
        self.limits = limits
        self.options = options
        self.metrics = Metrics()
        self.worker = EngineWorker(engine, config, self.metrics, max_batch=options.max_batch)
        self.created = int(time.time())
        if options.solver_timeout_ms is not None:
            import z3

            z3.set_param("timeout", options.solver_timeout_ms)

    def model_card(self) -> JsonObject:
        return {
            "id": self.model_name,
            "object": "model",
            "created": self.created,
            "owned_by": "factorspec",
        }

    # ------------------------------------------------------------------ request plumbing

    async def handle(self, request: Request, kind: Kind) -> Response:
        t0 = time.perf_counter()
        route = "/v1/chat/completions" if kind == "chat" else "/v1/completions"
        self.metrics.in_flight += 1
        response: Response
        try:
            self._auth(request)
            payload = await self._payload(request)
            response = await self._generate(request, payload, kind)
        except ApiError as exc:
            response = _error(exc)
        except Exception:  # a bug: answer, log, keep serving
            log.exception("internal error")
            response = _error(ApiError(500, "internal server error", type="server_error"))
        finally:
            self.metrics.in_flight -= 1
        self.metrics.request(route, response.status_code, time.perf_counter() - t0)
        return response

    def _auth(self, request: Request) -> None:
        key = self.options.api_key
        if key is None:
            return
        if request.headers.get("authorization") != f"Bearer {key}":
            raise ApiError(401, "invalid or missing API key", code="invalid_api_key")

    async def _payload(self, request: Request) -> JsonObject:
        limit = self.options.max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ApiError(413, f"the request body is larger than {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"the request body is larger than {limit} bytes")
            chunks.append(chunk)
        try:
            data = json.loads(b"".join(chunks))
        except (ValueError, RecursionError) as exc:
            raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ApiError(400, "the request body must be a JSON object")
        if json_depth(data, self.limits.max_json_depth) > self.limits.max_json_depth:
            raise ApiError(400, f"the request nests deeper than {self.limits.max_json_depth}")
        return data

    # ------------------------------------------------------------------ generation

    async def _generate(self, request: Request, payload: JsonObject, kind: Kind) -> Response:
        req: ChatRequest | CompletionRequest
        try:
            if kind == "chat":
                req = ChatRequest.model_validate(payload)
            else:
                req = CompletionRequest.model_validate(payload)
        except ValidationError as exc:
            raise ApiError(400, _validation_message(exc)) from None
        if req.model != self.model_name:
            raise ApiError(
                404,
                f"model {req.model!r} not found; this server serves {self.model_name!r}",
                code="model_not_found",
                param="model",
            )
        if req.logprobs:
            raise ApiError(400, "logprobs are not supported", param="logprobs")
        if isinstance(req, ChatRequest) and req.tools:
            raise ApiError(400, "tools are not supported", param="tools")
        if req.stream and req.n > 1:
            raise ApiError(400, "streaming supports n=1 only", param="n")
        ext = req.factorspec or FactorSpecExtension()
        t_spec = time.perf_counter()
        ir = self._ir(req, ext)
        try:
            spec = await asyncio.to_thread(spec_from_ir, ir, self.limits)
        except (IRError, SpecError, RecursionError) as exc:
            raise _spec_error(exc) from None
        spec_seconds = time.perf_counter() - t_spec
        prompt = self._prompt(req, ext, spec)
        max_tokens = (
            (req.max_completion_tokens if isinstance(req, ChatRequest) else None)
            or req.max_tokens
            or self.options.default_max_tokens
        )
        loop = asyncio.get_running_loop()
        jobs: list[Job] = []
        if self.metrics.queue_depth + req.n > self.options.max_queue:
            raise ApiError(429, "the server queue is full; retry later", type="rate_limit_error")
        for i in range(req.n):
            try:
                params = SamplingParams(
                    temperature=req.temperature if req.temperature is not None else 0.0,
                    top_p=req.top_p if req.top_p is not None else 1.0,
                    seed=None if req.seed is None else req.seed + i,
                    max_tokens=max_tokens,
                )
            except ValueError as exc:
                raise ApiError(400, str(exc)) from None
            jobs.append(Job(spec, prompt, params, loop, asyncio.Queue(), stream=req.stream))
        timeout = min(ext.timeout_s or self.options.request_timeout_s, 3600.0)
        deadline = loop.time() + timeout
        for job in jobs:
            self.worker.submit(job)
        meta = _Meta(
            id=("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex,
            created=int(time.time()),
            kind=kind,
            spec_seconds=spec_seconds,
        )
        if req.stream:
            include_usage = bool(req.stream_options and req.stream_options.include_usage)
            return StreamingResponse(
                self._stream(jobs[0], spec, meta, deadline, include_usage),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache"},
            )
        try:
            dones = await self._wait_all(request, jobs, deadline)
        finally:
            for job in jobs:
                self.worker.cancel(job)  # no-op for finished jobs
        if dones is None:
            return Response(status_code=499)  # the client went away
        choices = [await self._choice(i, d, spec, meta) for i, d in enumerate(dones)]
        return JSONResponse(self._body(meta, choices, dones))

    def _ir(self, req: ChatRequest | CompletionRequest, ext: FactorSpecExtension) -> object:
        if ext.ir is not None:
            return ext.ir
        rf = req.response_format
        if rf is None or rf.type == "text":
            raise ApiError(
                400,
                "factorspec serve writes structured records: pass response_format="
                '{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}} '
                'or a relation IR in the "factorspec" extension field',
                param="response_format",
            )
        if rf.type == "json_object":
            raise ApiError(
                400,
                'response_format "json_object" is not supported: pass a json_schema',
                param="response_format",
            )
        if rf.json_schema is None or rf.json_schema.schema_ is None:
            raise ApiError(
                400, "response_format.json_schema.schema is missing", param="response_format"
            )
        try:
            return ir_from_json_schema(
                rf.json_schema.schema_, name=rf.json_schema.name, limits=self.limits
            )
        except (IRError, RecursionError) as exc:
            err = _spec_error(exc)
            err.param = "response_format"
            raise err from None

    def _prompt(
        self, req: ChatRequest | CompletionRequest, ext: FactorSpecExtension, spec: CompiledSpec
    ) -> Callable[[Engine], list[int]]:
        if isinstance(req, ChatRequest):
            messages: list[ChatMessage] = []
            for m in req.messages:
                role = "system" if m.role == "developer" else m.role
                messages.append({"role": role, "content": m.text()})
            if ext.schema_in_prompt:
                from factorspec_sdk.client import schema_hint

                for m2 in reversed(messages):
                    if m2["role"] == "user":
                        m2["content"] += "\n\nAnswer with JSON of this form: " + schema_hint(
                            spec.layout
                        )
                        break
            return lambda engine: engine.apply_chat_template(messages)
        prompt = req.prompt
        if isinstance(prompt, str):
            text = prompt
            return lambda engine: engine.tokenizer.encode(text)
        size = self.engine.tokenizer.vocab_size
        bad = [t for t in prompt if not 0 <= t < size]
        if bad:
            raise ApiError(400, f"prompt token ids {bad[:5]} are outside the vocabulary")
        ids = list(prompt)
        return lambda engine: ids

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

    async def _wait_all(
        self, request: Request, jobs: list[Job], deadline: float
    ) -> list[Done] | None:
        task = asyncio.ensure_future(asyncio.gather(*(self._wait_done(j, deadline) for j in jobs)))
        try:
            while True:
                finished, _ = await asyncio.wait({task}, timeout=0.5)
                if finished:
                    return task.result()
                if await request.is_disconnected():
                    for job in jobs:
                        self.worker.cancel(job)
                    return None
        finally:
            if not task.done():
                task.cancel()

    # ------------------------------------------------------------------ answers

    async def _finish(self, done: Done, spec: CompiledSpec) -> tuple[str, str, bool]:
        """(text, finish_reason, valid) of a job, or an ApiError."""
        if done.reason == "complete":
            assert done.outcome is not None
            text = done.outcome.text
            if self.options.validate_records:
                try:
                    await asyncio.to_thread(check_record, spec, text)
                except RecordInvalidError as exc:
                    log.error("generated record failed validation: %s; text %r", exc, text)
                    raise ApiError(
                        500,
                        f"internal error: the generated record failed validation ({exc})",
                        type="server_error",
                    ) from None
            return text, "stop", True
        if done.reason in ("max_tokens", "timeout"):
            return done.text, "length", False
        if done.reason == "shutdown":
            raise ApiError(503, "the server is shutting down", type="server_error")
        if done.reason == "cancelled":
            return done.text, "length", False
        err = done.error
        if isinstance(err, PromptError):
            raise ApiError(400, f"the prompt cannot be tokenized: {err}", param="messages")
        if isinstance(err, TokenBudgetError):
            raise ApiError(
                400,
                err.message,
                code="token_budget",
                param="max_tokens",
                extra={"min_tokens": err.min_tokens},
            )
        if isinstance(err, OracleError):
            raise ApiError(422, f"the spec is too hard to decide: {err}", code="oracle")
        log.error("generation failed: %r", err)
        raise ApiError(500, f"generation failed: {err}", type="server_error")

    def _stats(self, done: Done, meta: _Meta, valid: bool) -> JsonObject:
        out: JsonObject = {
            "valid": valid,
            "stop_reason": done.reason,
            "queue_seconds": round(done.queue_seconds, 6),
            "spec_seconds": round(meta.spec_seconds, 6),
        }
        if done.outcome is not None:
            s = done.outcome.stats
            out.update(
                tokens=s.tokens,
                verify_steps=s.verify_steps,
                tokens_per_step=round(s.tokens_per_step, 4),
                drafted=s.drafted,
                certain_drafted=s.certain_drafted,
                guesses_proposed=s.guesses_proposed,
                guesses_accepted=s.guesses_accepted,
                forward_seconds=round(s.forward_seconds, 6),
                oracle_seconds=round(s.plan_seconds, 6),
                critical_oracle_seconds=round(s.critical_plan_seconds, 6),
                wall_seconds=round(s.wall_seconds, 6),
                token_ids=list(done.outcome.tokens),
            )
        else:
            out["tokens"] = done.tokens
        return out

    async def _choice(self, i: int, done: Done, spec: CompiledSpec, meta: _Meta) -> JsonObject:
        text, finish, valid = await self._finish(done, spec)
        choice: JsonObject = {"index": i, "finish_reason": finish, "logprobs": None}
        if meta.kind == "chat":
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        choice["factorspec"] = self._stats(done, meta, valid)
        return choice

    @staticmethod
    def _usage(dones: list[Done]) -> JsonObject:
        prompt = max((d.outcome.stats.prompt_tokens for d in dones if d.outcome), default=0)
        completion = sum(len(d.outcome.tokens) if d.outcome else d.tokens for d in dones)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _body(self, meta: _Meta, choices: list[JsonObject], dones: list[Done]) -> JsonObject:
        stats = [c["factorspec"] for c in choices]
        return {
            "id": meta.id,
            "object": "chat.completion" if meta.kind == "chat" else "text_completion",
            "created": meta.created,
            "model": self.model_name,
            "choices": choices,
            "usage": self._usage(dones),
            "factorspec": stats[0] if len(stats) == 1 else {"choices": stats},
        }

    def _chunk(self, meta: _Meta, delta: str | None, finish: str | None, role: bool) -> JsonObject:
        choice: JsonObject = {"index": 0, "finish_reason": finish, "logprobs": None}
        if meta.kind == "chat":
            d: JsonObject = {}
            if role:
                d["role"] = "assistant"
            if delta is not None:
                d["content"] = delta
            choice["delta"] = d
        else:
            choice["text"] = delta or ""
        return {
            "id": meta.id,
            "object": "chat.completion.chunk" if meta.kind == "chat" else "text_completion",
            "created": meta.created,
            "model": self.model_name,
            "choices": [choice],
        }

    async def _stream(
        self, job: Job, spec: CompiledSpec, meta: _Meta, deadline: float, include_usage: bool
    ) -> AsyncIterator[str]:
        def sse(obj: JsonObject) -> str:
            return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"

        finished = False
        sent = ""
        try:
            yield sse(self._chunk(meta, "", None, role=True))
            while True:
                ev = await self._next(job, deadline)
                if isinstance(ev, Delta):
                    sent += ev.text
                    yield sse(self._chunk(meta, ev.text, None, role=False))
                    continue
                finished = True
                try:
                    text, finish, valid = await self._finish(ev, spec)
                except ApiError as exc:
                    yield sse(exc.body())
                    yield "data: [DONE]\n\n"
                    return
                rest = text[len(sent) :] if text.startswith(sent) else ""
                chunk = self._chunk(meta, rest, finish, role=False)
                chunk["factorspec"] = self._stats(ev, meta, valid)
                yield sse(chunk)
                if include_usage:
                    usage = self._chunk(meta, None, None, role=False)
                    usage["choices"] = []
                    usage["usage"] = self._usage([ev])
                    yield sse(usage)
                yield "data: [DONE]\n\n"
                return
        finally:
            if not finished:
                self.worker.cancel(job)


@dataclass(frozen=True, slots=True)
class _Meta:
    id: str
    created: int
    kind: Kind
    spec_seconds: float


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc or '<body>'}: {err['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "invalid request: " + "; ".join(parts) + more
