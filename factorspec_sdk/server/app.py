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
from starlette.exceptions import HTTPException

from factorspec_sdk.drafter.loop import DecoderConfig
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.errors import OracleError, SpecError, TokenBudgetError, UnsatisfiableSpecError
from factorspec_sdk.ir import (
    IRError,
    IRLimits,
    RecordInvalidError,
    check_json_schema_record,
    check_record,
    ir_from_json_schema,
    json_depth,
    json_schema_validator,
    spec_from_ir,
)
from factorspec_sdk.server.contract import (
    METRICS_MEDIA_TYPE,
    chat_route,
    completion_route,
    health_route,
    metrics_route,
    model_route,
    models_route,
    openapi_document,
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
    from jsonschema.protocols import Validator

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
        validate_records: re-check every finished record against the spec (schema + factors)
            and, for a ``response_format`` JSON schema, against that schema with `jsonschema`.
        solver_timeout_ms: if set, the time limit of each oracle solver query of each
            request's spec (one that runs out is a 422 for that request only), so that no IR
            can stall the engine thread. Set per solver, never process-wide; the checks
            that build a spec have their own limit, ``IRLimits.solver_timeout_ms``.
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

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        # unknown routes and methods answer in the same OpenAI shape as every other error
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        body = ApiError(exc.status_code, str(exc.detail), code=code).body()
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.post("/v1/chat/completions", **chat_route())
    async def chat_completions(request: Request) -> Response:
        """Generate a record that satisfies the schema and the relations (chat messages)."""
        return await server.handle(request, "chat")

    @app.post("/v1/completions", **completion_route())
    async def completions(request: Request) -> Response:
        """Generate a record from a raw prompt (text or token ids; no chat template)."""
        return await server.handle(request, "completion")

    @app.get("/v1/models", **models_route())
    async def models() -> JSONResponse:
        """The model this server serves."""
        return JSONResponse({"object": "list", "data": [server.model_card()]})

    @app.get("/v1/models/{model_id:path}", **model_route())
    async def model(model_id: str) -> JSONResponse:
        """One model by id (404 unless it is the served one)."""
        if model_id != server.model_name:
            return _error(ApiError(404, f"model {model_id!r} not found", code="model_not_found"))
        return JSONResponse(server.model_card())

    @app.get("/health", **health_route())
    async def health() -> JSONResponse:
        """Whether the engine thread runs (200) or has stopped (503)."""
        ok = server.worker.alive
        body = {
            "status": "ok" if ok else "engine thread stopped",
            "model": server.model_name,
            "engine": engine.name,
            "active": server.metrics.active,
            "queued": server.metrics.queue_depth,
        }
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics", **metrics_route())
    async def metrics() -> PlainTextResponse:
        """Counters in the Prometheus text format."""
        return PlainTextResponse(server.metrics.render(), media_type=METRICS_MEDIA_TYPE)

    def openapi() -> dict[str, object]:
        if app.openapi_schema is None:
            app.openapi_schema = openapi_document(
                app,
                model_name=server.model_name,
                vocab_size=engine.tokenizer.vocab_size,
                api_key=server.options.api_key is not None,
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _default_model_name(engine: Engine) -> str:
    path = getattr(engine, "model_path", None)
    if isinstance(path, (str, Path)) and str(path):
        return Path(path).name
    return engine.name


def _json_number(text: str) -> float | int:
    """A JSON number with a fraction or exponent; an integral one is an int, as in JSON Schema.

    (``16.0`` is an integer to JSON Schema, so the documented schema allows ``"n": 2.0``.)
    """
    value = float(text)
    return int(value) if value.is_integer() else value


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
            data = json.loads(b"".join(chunks), parse_float=_json_number)
        except (ValueError, RecursionError) as exc:
            raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ApiError(400, "the request body must be a JSON object")
        if json_depth(data, self.limits.max_json_depth) > self.limits.max_json_depth:
            raise ApiError(400, f"the request nests deeper than {self.limits.max_json_depth}")
        return data

    # ------------------------------------------------------------------ generation

    async def _generate(self, request: Request, payload: JsonObject, kind: Kind) -> Response:
        model = payload.get("model")
        if isinstance(model, str) and model != self.model_name:  # before the rest of the body
            raise ApiError(
                404,
                f"model {model!r} not found; this server serves {self.model_name!r}",
                code="model_not_found",
                param="model",
            )
        req: ChatRequest | CompletionRequest
        try:
            if kind == "chat":
                req = ChatRequest.model_validate(payload)
            else:
                req = CompletionRequest.model_validate(payload)
        except ValidationError as exc:
            raise ApiError(400, _validation_message(exc)) from None
        ext = req.factorspec or FactorSpecExtension()
        t_spec = time.perf_counter()
        ir = await asyncio.to_thread(self._ir, req, ext)  # the meta-schema check can take 1 s
        try:
            spec = await asyncio.to_thread(
                spec_from_ir, ir, self.limits, solver_timeout_ms=self.options.solver_timeout_ms
            )
        except (IRError, SpecError, RecursionError) as exc:
            raise _spec_error(exc) from None
        spec_seconds = time.perf_counter() - t_spec
        rf = req.response_format  # the schema `_ir` converted, when no IR came
        sent = rf.json_schema.schema_ if ext.ir is None and rf and rf.json_schema else None
        schema = None if sent is None else json_schema_validator(sent, check_schema=False)
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
            schema=schema,
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
        # the request model let the body through only with a json_schema response format
        assert rf is not None and rf.json_schema is not None
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
            raise ApiError(
                400, f"prompt token ids {bad[:5]} are outside the vocabulary", param="prompt"
            )
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

    async def _finish(
        self, done: Done, spec: CompiledSpec, schema: Validator | None
    ) -> tuple[str, str, bool]:
        """(text, finish_reason, valid) of a job, or an ApiError."""
        if done.reason == "complete":
            assert done.outcome is not None
            text = done.outcome.text
            if self.options.validate_records:
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
            return text, "stop", True
        if done.reason in ("max_tokens", "timeout"):
            return done.text, "length", False
        if done.reason == "shutdown":
            raise ApiError(503, "the server is shutting down", type="server_error")
        if done.reason == "cancelled":
            return done.text, "length", False
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
        text, finish, valid = await self._finish(done, spec, meta.schema)
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
                    text, finish, valid = await self._finish(ev, spec, meta.schema)
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
    schema: Validator | None = None


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc or '<body>'}: {err['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "invalid request: " + "; ".join(parts) + more
