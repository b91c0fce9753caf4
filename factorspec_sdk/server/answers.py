"""The bodies `factorspec serve` answers, as Pydantic models (its OpenAPI contract's answers).

`ChatCompletion` and `Completion` (with their choices, `Usage` and the `RecordStats` of each
record), the streamed chunks (`ChatCompletionChunk`, `CompletionChunk`), `ModelList`,
`ModelCard`, `Health`, and `ErrorResponse` for every error status. `render` builds these
shapes as JSON; `contract` states them in ``/openapi.json``. The request bodies are in
`factorspec_sdk.server.protocol`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from factorspec_sdk.provenance import Provenance
from factorspec_sdk.server.protocol import JsonObject

__all__ = [
    "AssistantMessage",
    "ChatChoice",
    "ChatChunkChoice",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChoiceStats",
    "ChunkDelta",
    "Completion",
    "CompletionChoice",
    "CompletionChunk",
    "CompletionChunkChoice",
    "ErrorDetail",
    "ErrorResponse",
    "FinishReason",
    "FunctionCallOut",
    "Health",
    "ModelCard",
    "ModelList",
    "PromptTokensDetails",
    "RecordStats",
    "ToolCallDelta",
    "ToolCallOut",
    "UpstreamStatus",
    "Usage",
]


class ErrorDetail(BaseModel):
    """The ``error`` object of an error answer (OpenAI's shape).

    Attributes:
        message: what went wrong, and how to fix it.
        type: ``invalid_request_error``, ``rate_limit_error`` or ``server_error``.
        param: the request field at fault, if one is.
        code: a stable code (``model_not_found``, ``unsatisfiable_spec``, ...), if any.
        factorspec: evidence, e.g. ``{"unsat_core": [...]}`` for an unsatisfiable spec.
    """

    message: str
    type: str
    param: str | None
    code: str | None
    factorspec: JsonObject | None = None


class ErrorResponse(BaseModel):
    """The body of every error answer: ``{"error": {...}}``."""

    error: ErrorDetail


class RecordStats(BaseModel):
    """The ``factorspec`` stats of one choice.

    A record has its decoding counts and where the server's time went: the ``*_seconds``
    parts of ``factorspec_sdk.drafter.stats.GenerationStats`` (``PARTS``), which add up to
    ``wall_seconds``, the server's time from the request's arrival to this answer.

    Attributes:
        valid: the record is complete and was checked against the spec.
        stop_reason: ``complete`` (a record cut short, by ``max_tokens`` or by the time
            limit, is an error answer, a 422 ``max_tokens_reached`` or ``timeout_reached``,
            never a choice).
        tokens: completion tokens.
        oracle_seconds: ``plan_seconds`` under its older name.
        critical_oracle_seconds: ``critical_plan_seconds`` under its older name.
        provenance: the record's provenance, when the request asked for it
            (``factorspec.provenance``) and the record is complete.
    """

    valid: bool
    stop_reason: Literal["complete"]
    queue_seconds: float
    spec_seconds: float
    tokens: int
    verify_steps: int | None = None
    tokens_per_step: float | None = None
    drafted: int | None = None
    certain_drafted: int | None = None
    guesses_proposed: int | None = None
    guesses_accepted: int | None = None
    load_seconds: float | None = None
    prompt_seconds: float | None = None
    network_seconds: float | None = None
    start_seconds: float | None = None
    forward_seconds: float | None = None
    cost_curve_seconds: float | None = None
    critical_plan_seconds: float | None = None
    grammar_seconds: float | None = None
    draft_seconds: float | None = None
    verify_seconds: float | None = None
    stream_seconds: float | None = None
    batch_seconds: float | None = None
    validate_seconds: float | None = None
    explain_seconds: float | None = None
    other_seconds: float | None = None
    wall_seconds: float | None = None
    plan_seconds: float | None = None
    background_plan_seconds: float | None = None
    oracle_seconds: float | None = None
    critical_oracle_seconds: float | None = None
    token_ids: list[int] | None = None
    provenance: Provenance | None = None


class ChoiceStats(BaseModel):
    """The top-level ``factorspec`` field when ``n > 1``: the stats of every choice."""

    choices: list[RecordStats]


class PromptTokensDetails(BaseModel):
    """``usage.prompt_tokens_details``: how the prompt's tokens were served."""

    cached_tokens: int


class Usage(BaseModel):
    """Token counts of an answer.

    ``prompt_tokens_details.cached_tokens``: prompt tokens served from the engine's prefix
    cache (0 on an engine without one).
    """

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None = None


class FunctionCallOut(BaseModel):
    """A call's function: its name and its arguments as JSON text."""

    name: str
    arguments: str


class ToolCallOut(BaseModel):
    """One of ``message.tool_calls``."""

    id: str
    type: Literal["function"]
    function: FunctionCallOut


class ToolCallDelta(ToolCallOut):
    """One of a chunk's ``delta.tool_calls``: a whole call, with its index."""

    index: int


class AssistantMessage(BaseModel):
    """``choices[i].message``: the record as canonical JSON text, or the tool calls."""

    role: Literal["assistant"]
    content: str | None
    tool_calls: list[ToolCallOut] | None = None


FinishReason = Literal["stop", "length", "tool_calls"]


class ChatChoice(BaseModel):
    """One choice of a chat completion."""

    index: int
    finish_reason: FinishReason
    logprobs: None
    message: AssistantMessage
    factorspec: RecordStats


class CompletionChoice(BaseModel):
    """One choice of a text completion."""

    index: int
    finish_reason: FinishReason
    logprobs: None
    text: str
    factorspec: RecordStats


class ChatCompletion(BaseModel):
    """The answer of ``POST /v1/chat/completions`` (without ``stream``)."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    factorspec: RecordStats | ChoiceStats


class Completion(BaseModel):
    """The answer of ``POST /v1/completions`` (without ``stream``)."""

    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage
    factorspec: RecordStats | ChoiceStats


class ChunkDelta(BaseModel):
    """``choices[0].delta`` of a chat chunk: more record text (the role on the first).

    Tool calls come whole in the last chunk.
    """

    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChatChunkChoice(BaseModel):
    """The one choice of a chat completion chunk."""

    index: int
    finish_reason: FinishReason | None
    logprobs: None
    delta: ChunkDelta


class CompletionChunkChoice(BaseModel):
    """The one choice of a text completion chunk."""

    index: int
    finish_reason: FinishReason | None
    logprobs: None
    text: str


class ChatCompletionChunk(BaseModel):
    """One server-sent event of a streamed chat completion.

    The last chunk with a choice has its ``finish_reason`` and the ``factorspec`` stats;
    with ``stream_options.include_usage`` one more chunk has no choice and the ``usage``.
    """

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: Usage | None = None
    factorspec: RecordStats | None = None


class CompletionChunk(BaseModel):
    """One server-sent event of a streamed text completion (as `ChatCompletionChunk`)."""

    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChunkChoice]
    usage: Usage | None = None
    factorspec: RecordStats | None = None


class ModelCard(BaseModel):
    """One served model (``GET /v1/models/{model_id}``)."""

    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(BaseModel):
    """``GET /v1/models``: the one model this server serves."""

    object: Literal["list"]
    data: list[ModelCard]


class UpstreamStatus(BaseModel):
    """The engine tier behind ``factorspec serve --upstream`` (a router, or one server)."""

    url: str
    requests: int
    failures: int
    last_error: str | None


class Health(BaseModel):
    """``GET /health``: 200 while the engine thread runs, else 503."""

    status: str
    model: str
    engine: str
    active: int
    queued: int
    upstream: UpstreamStatus | None = None
