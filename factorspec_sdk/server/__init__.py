"""`factorspec serve`: an OpenAI-compatible server for always-valid structured records.

Imported only by the server command (it imports FastAPI and uvicorn); ``import
factorspec_sdk`` never imports it.

Protocol
--------
``POST /v1/chat/completions`` (and ``/v1/completions`` with a raw prompt) takes the usual
OpenAI body. The record's shape comes from either

* ``response_format={"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}``:
  a plain JSON schema (objects, arrays with ``minItems``/``maxItems``, integer bounds,
  booleans, strings with length bounds, ``enum``/``const``, ``null`` in ``type`` or as an
  ``anyOf``/``oneOf`` alternative, local ``$ref``; `factorspec_sdk.ir.jsonschema` lists
  every keyword), decoded with no relations, as on vLLM; or
* the extension field ``"factorspec": {"ir": <relation IR>}`` (``extra_body`` in the
  official client): the schema *and* the relations, built on the client by
  ``factorspec_sdk.ir.to_ir(Model, context)``. The per-request context is folded into the
  IR there (its values are compile-time constants), so there is no separate context field.
  When both are given the IR wins. Other extension keys: ``timeout_s`` (the request's
  time limit, else the server's), ``speculative`` (False: one token per forward) and
  ``schema_in_prompt`` (default True, as in ``Client.generate``: append a picture of the
  JSON to the last user message; False sends the messages as written).

Sampling: ``temperature`` (default 0: greedy), ``top_p``, ``seed`` (choice ``i`` uses
``seed + i``), ``n`` (up to 16), ``max_tokens``/``max_completion_tokens`` (default 2048),
``stream`` (SSE; the record text as it grows, then a chunk with ``finish_reason`` and the
stats; ``stream_options.include_usage`` adds a usage chunk). A parameter the server does
not honour (``stop``, ``logit_bias``, the penalties, ``logprobs``, vLLM's ``top_k``...)
takes only its neutral values (``null``, ``0``, ``[]``, ``{}``: what clients send by
default); another value is a 400 ``unsupported_parameter`` naming it, never dropped.
Metadata (``user``, ``metadata``, ``store``, ``service_tier``...) is ignored.

Answers: ``choices[i].message.content`` is the canonical JSON record; ``finish_reason`` is
``stop`` for a complete record (always valid: it is re-checked against the schema and every
factor before it is sent, and against a ``response_format`` JSON schema as sent, with
`jsonschema`; a record that fails is a logged 500). No record cut short is ever
``content``: ``max_tokens`` never cuts one (the masks finish it within the budget, a budget
below the shortest record is a 422 ``token_budget`` naming ``min_tokens``, and a record of a
spec the budget masks cannot bound that runs out of tokens is a 422 ``max_tokens_reached``),
and a record its time limit cuts is a 422 ``timeout_reached`` naming the limit; streamed,
either is an error event before ``[DONE]``. ``usage`` has ``prompt_tokens`` and
``completion_tokens``; ``factorspec`` (top level and per choice) has the decoding stats:
tokens, verify steps, tokens per step, drafted/certain tokens, guesses, forward / oracle
time, queue time, spec build time, token ids.

Errors are OpenAI-style ``{"error": {"message", "type", "param", "code"}}``: 400 for a body
that is not JSON or does not match the request schema of ``/openapi.json`` (which states
every reason for a 400, ``unsupported_parameter`` among them), 401 bad API key, 404
unknown model or route (405 other methods), 413 body too large, 422 for a body the schema
accepts whose content cannot be served (a JSON schema or IR that does not compile or
exceeds the limits, an unsatisfiable spec -- ``error.factorspec.unsat_core`` names the
clashing factors -- a spec or an oracle query the solver cannot decide in time, a prompt
the engine cannot tokenize, a record cut short), 429 queue full, 500 an internal error
(e.g. the engine failed on this request's forward; the other requests go on), 503
shutting down (with ``--upstream``, also a record the engine tier failed on every attempt:
``upstreams_unavailable``). A client that disconnects frees its decoder slot.
The OpenAPI document is built in `factorspec_sdk.server.contract` from the models of
`factorspec_sdk.server.protocol` (requests) and `factorspec_sdk.server.answers`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

if TYPE_CHECKING:
    from factorspec_sdk.engines.openai_server import OpenAIServerEngine, ServerKind
    from factorspec_sdk.engines.protocol import Engine
    from factorspec_sdk.server.app import create_app as create_app

__all__ = ["create_app", "serve", "upstream_engine"]


def __getattr__(name: str) -> object:
    """`factorspec_sdk.server.app.create_app`, imported on first use.

    (So that importing a light part of the package, such as `factorspec_sdk.server.protocol`,
    does not import FastAPI.)
    """
    if name == "create_app":
        from factorspec_sdk.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def serve(
    engine: Engine | str = "embedded",
    model: str | Path | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    model_name: str | None = None,
    api_key: str | None = None,
    max_batch: int = 64,
    request_timeout_s: float = 300.0,
    log_level: str = "info",
    upstream: str | None = None,
    upstream_server: ServerKind | Literal["auto"] = "auto",
    upstream_records: int = 32,
    planning_workers: int | None = None,
    kept_specs: int | None = None,
    **engine_options: object,
) -> None:
    """Run the OpenAI-compatible server until interrupted (``factorspec serve``).

    Args:
        engine: an `Engine`, or an engine name (``"embedded"``).
        model: model folder for a named engine (default: SmolLM2-135M-Instruct); with
            ``upstream``, the local folder of the served model's tokenizer.
        host: interface to listen on (loopback by default).
        port: TCP port.
        model_name: the model id clients pass (default: the model folder's name).
        api_key: require ``Authorization: Bearer <api_key>``.
        max_batch: most generations decoded together.
        request_timeout_s: longest time a record may take (then a 422 ``timeout_reached``).
        log_level: uvicorn's log level.
        upstream: the URL of the engine tier that runs the forwards: a router in front of
            vLLM / SGLang servers (vllm-router, sglang-router, a Kubernetes gateway) or one
            server. This server becomes its relation-aware front
            (`factorspec_sdk.engines.openai_server.OpenAIServerEngine`, records restarted
            by `factorspec_sdk.backends.upstreams`); ``engine`` stays unset.
        upstream_server: the servers' family, ``"vllm"`` or ``"sglang"``; ``"auto"`` reads
            ``/v1/models`` (sglang-router does not say: name ``"sglang"`` behind it).
        upstream_records: with ``upstream``, records decoded at once (one thread and one
            HTTP connection each).
        planning_workers: N >= 1 runs N server processes that plan for the engine kept in
            this one (`factorspec_sdk.server.planning_workers`), so that FactorSpec's CPU
            work uses N cores; 0 serves from this process; None (the default): one per
            core (`default_planning_workers`: at most 8, 0 on one core), 0 with
            ``upstream``.
        kept_specs: the specs each server process keeps for documents sent again
            (`ServerOptions.kept_specs`; 0: none; None: its default, 16).
        **engine_options: passed to the named engine's constructor.

    Raises:
        TypeError: engine options with an `Engine` object or with ``upstream``; planning
            workers with ``upstream``.
        ValueError: a negative number of planning workers; several URLs in ``upstream``
            (put a router in front of the servers and pass its URL).
        EngineError: the upstream does not answer ``/v1/models`` at start.
    """
    import sys

    import uvicorn

    from factorspec_sdk.graph.z3_gil import keep_gil_in_short_calls
    from factorspec_sdk.server.app import ServerOptions, create_app, served_model_name
    from factorspec_sdk.server.gc_policy import tune_gc
    from factorspec_sdk.server.serving_log import ReadyServer, log, log_config, serving_line

    served: Engine | OpenAIServerEngine
    tier: OpenAIServerEngine | None = None
    if planning_workers is None:
        from factorspec_sdk.server.planning_workers import default_planning_workers

        planning_workers = 0 if upstream is not None else default_planning_workers()
    if planning_workers < 0:
        raise ValueError(f"planning_workers must be >= 0, got {planning_workers}")
    if upstream is not None:
        if planning_workers:
            raise TypeError("planning workers serve a local engine, not upstream servers")
        if engine != "embedded" or engine_options:
            raise TypeError(
                "upstream replaces the local engine: pass no engine, device or dtype with it"
            )
        served = tier = upstream_engine(
            upstream, model, server=upstream_server, records=upstream_records
        )
        max_batch = max(max_batch, tier.max_concurrency)
    elif isinstance(engine, str):
        from factorspec_sdk.engines import create_logits_engine

        if model is not None:
            engine_options["model"] = model
        served = create_logits_engine(engine, **engine_options)
    elif model is not None or engine_options:
        raise TypeError("model and engine options are only accepted with an engine name")
    else:
        served = engine
    options = ServerOptions(
        request_timeout_s=request_timeout_s,
        max_batch=max_batch,
        api_key=api_key,
        solver_timeout_ms=30_000,
    )
    if kept_specs is not None:
        options = dataclasses.replace(options, kept_specs=kept_specs)
    if planning_workers and tier is None:
        from factorspec_sdk.server.planning_workers import serve_workers

        serve_workers(
            cast("Engine", served),  # no upstream was given
            workers=planning_workers,
            host=host,
            port=port,
            model_name=model_name,
            options=options,
            log_level=log_level,
        )
        return
    app = create_app(served, model_name=model_name, options=options)
    line = serving_line(served_model_name(served, model_name), host, port)
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, log_config=log_config(log_level)
    )
    server = ReadyServer(config, on_ready=lambda: log.info(line))
    tune_gc()  # this process is the server's: start-up's objects need no more collections
    keep_gil_in_short_calls()  # its planning threads would trade the GIL at every Z3 call
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        if tier is not None:
            tier.close()
    if not server.started:  # as uvicorn.run: a server that never listened exits with 3
        from uvicorn.config import STARTUP_FAILURE

        sys.exit(STARTUP_FAILURE)


def upstream_engine(
    url: str,
    model: str | Path | None = None,
    *,
    server: ServerKind | Literal["auto"] = "auto",
    records: int = 32,
) -> OpenAIServerEngine:
    """The engine tier at ``url`` as ``factorspec serve --upstream`` drives it.

    Args:
        url: a router in front of vLLM / SGLang servers, or one server.
        model: the local folder of the served model's tokenizer (default:
            SmolLM2-135M-Instruct's).
        server: the servers' family (``"auto"``: from ``/v1/models``).
        records: records decoded at once (HTTP connections).

    Raises:
        ValueError: several URLs: the router is the one place that spreads records over
            servers, so put one in front of them and pass its URL.
        EngineError: the upstream cannot be reached or the tokenizer found.
    """
    from factorspec_sdk.engines.openai_server import OpenAIServerEngine

    urls = [u for u in url.split(",") if u.strip()]
    if len(urls) != 1:
        raise ValueError(
            f"--upstream takes one URL, got {len(urls)}: put a router in front of the "
            "servers and pass its URL, e.g. `vllm-router --policy consistent_hash "
            "--worker-urls http://a:8001 http://b:8001 --port 8100` then `--upstream "
            "http://127.0.0.1:8100` (see the serving docs, 'Past one machine')"
        )
    if model is None:
        from factorspec_sdk.engines.model_store import default_model_path

        model = default_model_path()
    return OpenAIServerEngine(
        urls[0],
        tokenizer=model,
        server=server,
        max_concurrency=records,
        max_retries=0,  # a failed request restarts its record (backends.upstreams)
    )
