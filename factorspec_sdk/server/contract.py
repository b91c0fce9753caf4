"""The OpenAPI document of `factorspec serve`: every route's bodies and status codes.

The request and answer bodies are the Pydantic models of `factorspec_sdk.server.protocol` and
`factorspec_sdk.server.answers`; this module says which route takes and answers which, with
which status codes, and builds the ``/openapi.json`` of one server (its model id and
vocabulary size are part of the contract: another ``model`` is a 404, a token id beyond the
vocabulary a 400).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, TypedDict

from fastapi.openapi.utils import get_openapi  # noqa: TID253 - the server package only
from fastapi.responses import PlainTextResponse  # noqa: TID253
from pydantic.json_schema import models_json_schema

from factorspec_sdk.ir.model import RelationIR
from factorspec_sdk.server.answers import (
    ChatCompletion,
    ChatCompletionChunk,
    Completion,
    CompletionChunk,
    ErrorResponse,
    Health,
    ModelCard,
    ModelList,
)
from factorspec_sdk.server.protocol import ChatRequest, CompletionRequest

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = [
    "METRICS_MEDIA_TYPE",
    "RouteDoc",
    "chat_route",
    "completion_route",
    "health_route",
    "metrics_route",
    "model_route",
    "models_route",
    "openapi_document",
]

JsonObject = dict[str, object]

METRICS_MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The content type of ``/metrics`` (Prometheus text format 0.0.4)."""

_REF = "#/components/schemas/{model}"


class RouteDoc(TypedDict, total=False):
    """The documentation arguments of one FastAPI route (``app.get(path, **doc)``)."""

    responses: dict[int | str, dict[str, Any]]
    openapi_extra: dict[str, Any]
    response_class: type[PlainTextResponse]


_ERRORS: dict[int, str] = {
    400: "The body is not JSON, or does not match the request schema.",
    401: "A missing or wrong API key (only when the server has one).",
    404: "The `model` is not the one this server serves.",
    413: "The body is larger than the server's limit.",
    422: "The body matches the schema but its content cannot be served: the relation IR or "
    "JSON schema does not compile (or exceeds the server's limits), the spec is "
    "unsatisfiable (`error.factorspec.unsat_core`), the solver cannot decide it in time, "
    "the engine cannot tokenize the prompt, `max_tokens` is below the shortest record "
    "(`token_budget`), or the record did not finish within `max_tokens` "
    "(`max_tokens_reached`) or within its time limit (`factorspec.timeout_s`, else the "
    "server's: `timeout_reached`); no partial record is returned as content.",
    429: "The queue is full; retry later.",
    500: "An internal error (a bug); the other requests are not affected.",
    503: "The server is shutting down, or its engine stopped.",
}


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": ErrorResponse, "description": _ERRORS[s]} for s in statuses}


_GENERATION_ERRORS = (400, 401, 404, 413, 422, 429, 500, 503)

_PICK_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "letter": {"enum": ["x", "y", "z"]},
        "n": {"type": "integer", "minimum": 0, "maximum": 3},
    },
    "required": ["letter", "n"],
}
_PICK_FORMAT: JsonObject = {
    "type": "json_schema",
    "json_schema": {"name": "Pick", "schema": _PICK_SCHEMA},
}


def _request_body(model: str, examples: dict[str, JsonObject]) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {"$ref": _REF.format(model=model)},
                    "examples": {k: {"value": v} for k, v in examples.items()},
                }
            },
        }
    }


def _event_schema(chunk: str) -> JsonObject:
    """One server-sent event: a chunk, an error (a failure after the stream began), or DONE."""
    json_data = {
        "type": "string",
        "contentMediaType": "application/json",
        "contentSchema": {
            "anyOf": [
                {"$ref": _REF.format(model=chunk)},
                {"$ref": _REF.format(model="ErrorResponse")},
            ]
        },
    }
    return {
        "type": "object",
        "required": ["data"],
        "properties": {"data": {"anyOf": [{"const": "[DONE]"}, json_data]}},
    }


def _generation_route(
    model: type[ChatCompletion | Completion],
    chunk: type[ChatCompletionChunk | CompletionChunk],
    body: dict[str, Any],
) -> RouteDoc:
    ok: dict[str, Any] = {
        "model": model,
        "description": "The record (`finish_reason` `stop`: complete and valid; with "
        "`tools`, `tool_calls`, or `length` for a message cut at its bound). With "
        f"`stream`, server-sent events: chunks (`{chunk.__name__}`), then `data: [DONE]` "
        "(after an error event when the record fails, e.g. `max_tokens_reached` or "
        "`timeout_reached`).",
        "content": {"text/event-stream": {"schema": _event_schema(chunk.__name__)}},
    }
    return {"responses": {200: ok, **_errors(*_GENERATION_ERRORS)}, "openapi_extra": body}


def chat_route() -> RouteDoc:
    """The FastAPI route arguments of ``POST /v1/chat/completions``."""
    messages = [{"role": "user", "content": "Pick a letter and a number."}]
    body = _request_body(
        "ChatRequest",
        {
            "json_schema": {"model": "", "messages": messages, "response_format": _PICK_FORMAT},
            "stream": {
                "model": "",
                "messages": messages,
                "response_format": _PICK_FORMAT,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
            "sampled": {
                "model": "",
                "messages": messages,
                "response_format": _PICK_FORMAT,
                "n": 2,
                "temperature": 1.0,
                "seed": 7,
                "max_tokens": 64,
            },
        },
    )
    return _generation_route(ChatCompletion, ChatCompletionChunk, body)


def completion_route() -> RouteDoc:
    """The FastAPI route arguments of ``POST /v1/completions``."""
    body = _request_body(
        "CompletionRequest",
        {"text": {"model": "", "prompt": "Pick one:", "response_format": _PICK_FORMAT}},
    )
    return _generation_route(Completion, CompletionChunk, body)


def models_route() -> RouteDoc:
    """The FastAPI route arguments of ``GET /v1/models``."""
    return {"responses": {200: {"model": ModelList}}}


def model_route() -> RouteDoc:
    """The FastAPI route arguments of ``GET /v1/models/{model_id}``."""
    return {"responses": {200: {"model": ModelCard}, **_errors(404)}}


def health_route() -> RouteDoc:
    """The FastAPI route arguments of ``GET /health``."""
    return {
        "responses": {
            200: {"model": Health},
            503: {
                "model": Health,
                "description": (
                    "The engine thread stopped, or the upstream failed a record on every attempt."
                ),
            },
        }
    }


def metrics_route() -> RouteDoc:
    """The FastAPI route arguments of ``GET /metrics``."""
    return {
        "response_class": PlainTextResponse,
        "responses": {
            200: {
                "description": "Counters in the Prometheus text format.",
                "content": {METRICS_MEDIA_TYPE: {"schema": {"type": "string"}}},
            },
        },
    }


def _no_defaults(schema: object) -> object:
    if isinstance(schema, dict):
        return {k: _no_defaults(v) for k, v in schema.items() if not (k == "default" and v is None)}
    if isinstance(schema, list):
        return [_no_defaults(v) for v in schema]
    return schema


def openapi_document(
    app: FastAPI, *, model_name: str, vocab_size: int, api_key: bool
) -> JsonObject:
    """The OpenAPI document of one server.

    Args:
        app: the server's app (its routes carry the answers and status codes).
        model_name: the model id requests must name.
        vocab_size: the engine's vocabulary size (prompt token ids are below it).
        api_key: whether requests need ``Authorization: Bearer <key>``.
    """
    doc: JsonObject = get_openapi(
        title=app.title,
        version=app.version,
        description=(
            "The OpenAI API subset `factorspec serve` speaks, plus the `factorspec` extension "
            "field (a relation IR, a timeout). Every record answered with `finish_reason` "
            "`stop` satisfies its schema and every relation."
        ),
        routes=app.routes,
    )
    components = doc.setdefault("components", {})
    assert isinstance(components, dict)
    schemas = components.setdefault("schemas", {})
    assert isinstance(schemas, dict)
    _, defs = models_json_schema(
        [
            (ChatRequest, "validation"),
            (CompletionRequest, "validation"),
            (RelationIR, "validation"),
            (ChatCompletionChunk, "serialization"),
            (CompletionChunk, "serialization"),
        ],
        ref_template=_REF,
    )
    requests = copy.deepcopy(defs["$defs"])
    # FastAPI drops ``default: null`` from the answer models both documents share
    clash = sorted(
        k for k in set(requests) & set(schemas) if _no_defaults(requests[k]) != schemas[k]
    )
    if clash:  # pragma: no cover - a renamed model would shadow another
        raise RuntimeError(f"OpenAPI component names used twice: {clash}")
    requests = {k: v for k, v in requests.items() if k not in schemas}
    ext = requests["FactorSpecExtension"]["properties"]["ir"]
    ext["anyOf"] = [{"$ref": _REF.format(model="RelationIR")}, {"type": "null"}]
    for name in ("ChatRequest", "CompletionRequest"):
        requests[name]["properties"]["model"] = {
            "type": "string",
            "enum": [model_name],
            "description": "The served model (`GET /v1/models`); another id is a 404.",
        }
    for option in requests["CompletionRequest"]["properties"]["prompt"]["anyOf"]:
        if option.get("type") == "array":
            option["items"]["maximum"] = vocab_size - 1
    schemas.update(requests)
    paths = doc["paths"]
    assert isinstance(paths, dict)
    for item in paths.values():
        for operation in item.values():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            for example in (body or {}).get("examples", {}).values():
                example["value"]["model"] = model_name
    # a path parameter that is any string never fails FastAPI's own validation
    paths["/v1/models/{model_id}"]["get"]["responses"].pop("422", None)
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    paths["/metrics"]["get"]["responses"]["200"]["content"].pop("text/plain", None)
    # the API key guards the generation routes only (models, health and metrics are open)
    for path in ("/v1/chat/completions", "/v1/completions"):
        operation = paths[path]["post"]
        if api_key:
            operation["security"] = [{"bearer": []}]
        else:
            operation["responses"].pop("401", None)
    if api_key:
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return doc
