"""The OpenAI-compatible FastAPI app of `factorspec serve`: the app factory and its routes.

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``,
``GET /health``, ``GET /metrics``. See `factorspec_sdk.server` for the protocol. A generation
request goes through `factorspec_sdk.server.auth` (API key, body limits),
`factorspec_sdk.server.specs` (request to spec and prompt), `factorspec_sdk.server.dispatch`
(the engine thread) and `factorspec_sdk.server.render` (the OpenAI answer); this module
wires them together and keeps the request metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request  # noqa: TID253 - the server package is imported on demand
from fastapi.responses import (  # noqa: TID253
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.exceptions import HTTPException

from factorspec_sdk.drafter.loop import DecoderConfig
from factorspec_sdk.engines.openai_server import OpenAIServerEngine
from factorspec_sdk.engines.shared import EngineProxy
from factorspec_sdk.errors import EngineError
from factorspec_sdk.ir import DEFAULT_IR_COMPILER, DEFAULT_MAX_SPECS, IRCompiler, IRLimits
from factorspec_sdk.server import render
from factorspec_sdk.server.auth import check_api_key, read_body
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
from factorspec_sdk.server.dispatch import Dispatcher
from factorspec_sdk.server.metrics import Metrics, MetricsSnapshot
from factorspec_sdk.server.protocol import ApiError, Kind
from factorspec_sdk.server.records import upstream_metrics
from factorspec_sdk.server.specs import prepare

if TYPE_CHECKING:
    from factorspec_sdk.engines.protocol import Engine

__all__ = ["ServerOptions", "create_app", "served_model_name"]

log = logging.getLogger("factorspec.server")


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Server settings.

    Attributes:
        request_timeout_s: longest time a record may take from when its request is queued,
            unless the request sets ``factorspec.timeout_s``; a record not finished by then
            is a 422 ``timeout_reached``.
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
        kept_specs: the specs the app's IR compiler keeps for documents sent again
            (`IRCompiler.max_specs`; 0: none, every request builds its own), where
            `create_app` is given no compiler: the default uses the process's shared
            `DEFAULT_IR_COMPILER`, another number a compiler of the app's own. Each kept
            spec holds a Z3 context of about 16 MB, in each planning worker.
    """

    request_timeout_s: float = 300.0
    max_batch: int = 64
    max_queue: int = 4096
    max_body_bytes: int = 8 * 2**20
    default_max_tokens: int = 2048
    api_key: str | None = None
    validate_records: bool = True
    solver_timeout_ms: int | None = None
    kept_specs: int = DEFAULT_MAX_SPECS


def create_app(
    engine: Engine | OpenAIServerEngine,
    *,
    model_name: str | None = None,
    config: DecoderConfig | None = None,
    limits: IRLimits | None = None,
    options: ServerOptions | None = None,
    compiler: IRCompiler | None = None,
) -> FastAPI:
    """The FastAPI app serving ``engine`` under the OpenAI API.

    Args:
        engine: the engine; only the app's engine thread calls it. An upstream, an
            `OpenAIServerEngine` over a router in front of vLLM / SGLang servers or over one
            server (``factorspec serve --upstream``), makes the app the relation-aware
            front of the engine tier: it plans, the servers run the forwards.
        model_name: the model id clients pass as ``model`` (default: the engine's model
            folder name, else the engine name).
        config: decoder options (width, guesses, overlap).
        limits: limits on relation IRs and JSON schemas.
        options: timeouts, batch and queue sizes, body size, API key.
        compiler: builds each request's spec from its relation IR (or converts its JSON
            schema first) and keeps the specs, conversions and what the checks of each
            document found, so a document sent again is not built again (None: as
            ``options.kept_specs`` says, by default `factorspec_sdk.ir.DEFAULT_IR_COMPILER`,
            shared with `factorspec_sdk.ir.spec_from_ir` in this process; a planning worker
            is a process of its own, with its own). ``app.state.compiler`` is the one used.
    """
    name = served_model_name(engine, model_name)
    ir_limits = limits or IRLimits()
    opts = options or ServerOptions()
    if compiler is not None:
        ir_compiler = compiler
    elif opts.kept_specs == DEFAULT_MAX_SPECS:
        ir_compiler = DEFAULT_IR_COMPILER
    else:
        ir_compiler = IRCompiler(max_specs=opts.kept_specs)  # ValueError below 0
    counters = Metrics()
    dispatcher = Dispatcher(
        engine,
        config or DecoderConfig(),
        counters,
        max_batch=opts.max_batch,
        max_queue=opts.max_queue,
        validate_records=opts.validate_records,
    )
    card = render.model_card(name, int(time.time()))

    async def generate(request: Request, kind: Kind) -> Response:
        received = time.perf_counter()
        check_api_key(request, opts.api_key)
        payload = await read_body(
            request, max_bytes=opts.max_body_bytes, max_depth=ir_limits.max_json_depth
        )
        prepared = await prepare(
            payload,
            kind,
            model_name=name,
            vocab_size=engine.tokenizer.vocab_size,
            limits=ir_limits,
            solver_timeout_ms=opts.solver_timeout_ms,
            default_max_tokens=opts.default_max_tokens,
            request_timeout_s=opts.request_timeout_s,
            compiler=ir_compiler,
        )
        batch = await dispatcher.submit(prepared)
        meta = render.Meta.new(kind, name, prepared.spec_seconds, received)
        req = prepared.request
        if req.stream:
            include_usage = bool(req.stream_options and req.stream_options.include_usage)
            return StreamingResponse(
                dispatcher.stream(batch, meta, include_usage),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache"},
            )
        answers = await dispatcher.answers(request, batch)
        if answers is None:
            return Response(status_code=499)  # the client went away
        choices = [render.choice(i, d, a, meta) for i, (d, a) in enumerate(answers)]
        return JSONResponse(render.body(meta, choices, [d for d, _ in answers]))

    async def handle(request: Request, kind: Kind) -> Response:
        t0 = time.perf_counter()
        route = "/v1/chat/completions" if kind == "chat" else "/v1/completions"
        counters.in_flight += 1
        response: Response
        try:
            response = await generate(request, kind)
        except ApiError as exc:
            response = _error(exc)
        except Exception:  # a bug: answer, log, keep serving
            log.exception("internal error")
            response = _error(ApiError(500, "internal server error", type="server_error"))
        finally:
            counters.in_flight -= 1
        counters.request(route, response.status_code, time.perf_counter() - t0)
        return response

    async def shared_counters() -> Metrics:
        """This process's counters, or with planning workers every worker's, summed."""
        if not isinstance(engine, EngineProxy):
            return counters
        board = await asyncio.to_thread(engine.post, counters.snapshot())
        return Metrics.merged(
            (p.value, p.live) for p in board if isinstance(p.value, MetricsSnapshot)
        )

    async def post_counters() -> None:
        """A planning worker's counters on the engine host's board, every second."""
        while True:
            await asyncio.sleep(1.0)
            with contextlib.suppress(EngineError):
                await shared_counters()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        poster = asyncio.create_task(post_counters()) if isinstance(engine, EngineProxy) else None
        yield
        if poster is not None:
            poster.cancel()
        dispatcher.close()

    app = FastAPI(title="FactorSpec", version="1", lifespan=lifespan)
    app.state.compiler = ir_compiler  # what it keeps: `IRCompiler.specs`, `.schemas`

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        # unknown routes and methods answer in the same OpenAI shape as every other error
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        body = ApiError(exc.status_code, str(exc.detail), code=code).body()
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.post("/v1/chat/completions", **chat_route())
    async def chat_completions(request: Request) -> Response:
        """Generate a record that satisfies the schema and the relations (chat messages)."""
        return await handle(request, "chat")

    @app.post("/v1/completions", **completion_route())
    async def completions(request: Request) -> Response:
        """Generate a record from a raw prompt (text or token ids; no chat template)."""
        return await handle(request, "completion")

    @app.get("/v1/models", **models_route())
    async def models() -> JSONResponse:
        """The model this server serves."""
        return JSONResponse({"object": "list", "data": [card]})

    @app.get("/v1/models/{model_id:path}", **model_route())
    async def model(model_id: str) -> JSONResponse:
        """One model by id (404 unless it is the served one)."""
        if model_id != name:
            return _error(ApiError(404, f"model {model_id!r} not found", code="model_not_found"))
        return JSONResponse(card)

    @app.get("/health", **health_route())
    async def health() -> JSONResponse:
        """Whether the engine thread runs (200) or has stopped (503).

        With an upstream: its URL and counters (its servers' health is its router's).
        """
        ok = dispatcher.alive
        status = "ok" if ok else "engine thread stopped"
        body: dict[str, object] = {
            "model": name,
            "engine": engine.name,
            "active": counters.active,
            "queued": counters.queue_depth,
        }
        if isinstance(engine, OpenAIServerEngine):
            body["upstream"] = {
                "url": engine.root,
                "requests": engine.requests,
                "failures": engine.failures,
                "last_error": engine.last_error,
            }
        return JSONResponse({"status": status, **body}, status_code=200 if ok else 503)

    @app.get("/metrics", **metrics_route())
    async def metrics() -> PlainTextResponse:
        """Counters in the Prometheus text format."""
        text = (await shared_counters()).render()
        if isinstance(engine, OpenAIServerEngine):
            text += upstream_metrics(engine, counters)
        return PlainTextResponse(text, media_type=METRICS_MEDIA_TYPE)

    def openapi() -> dict[str, object]:
        if app.openapi_schema is None:
            app.openapi_schema = openapi_document(
                app,
                model_name=name,
                vocab_size=engine.tokenizer.vocab_size,
                api_key=opts.api_key is not None,
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def served_model_name(engine: Engine | OpenAIServerEngine, model_name: str | None = None) -> str:
    """The model id clients pass: ``model_name``, else the engine's model folder, else its name."""
    if model_name:
        return model_name
    path = getattr(engine, "model_path", None)
    if isinstance(path, (str, Path)) and str(path):
        return Path(path).name
    return engine.name


def _error(exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)
