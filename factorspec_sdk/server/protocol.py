"""The OpenAI-compatible request bodies `factorspec serve` accepts, and its error answers.

Unknown OpenAI parameters are ignored (as vLLM does); the ones that would change the meaning
of the answer and are not supported (``tools``, ``logprobs``...) are a 400.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

__all__ = [
    "ApiError",
    "ChatMessageIn",
    "ChatRequest",
    "CompletionRequest",
    "FactorSpecExtension",
    "JsonSchemaFormat",
    "ResponseFormat",
    "StreamOptions",
    "TextPart",
]

JsonObject = dict[str, object]


class ApiError(Exception):
    """An error answer: HTTP ``status`` with an OpenAI-style error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        extra: JsonObject | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.extra = extra

    def body(self) -> JsonObject:
        """The JSON body: ``{"error": {"message", "type", "param", "code", ...}}``."""
        err: JsonObject = {
            "message": self.message,
            "type": self.type,
            "param": self.param,
            "code": self.code,
        }
        if self.extra:
            err["factorspec"] = self.extra
        return {"error": err}


_LENIENT = ConfigDict(extra="ignore", strict=True)
_STRICT = ConfigDict(extra="forbid", strict=True)


class TextPart(BaseModel):
    """A text part of a message's content."""

    model_config = _STRICT
    type: Literal["text"]
    text: StrictStr


class ChatMessageIn(BaseModel):
    """One chat message (text only)."""

    model_config = _LENIENT
    role: Literal["system", "developer", "user", "assistant"]
    content: StrictStr | list[TextPart]
    name: StrictStr | None = None

    def text(self) -> str:
        """The message text (text parts joined)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content)


class JsonSchemaFormat(BaseModel):
    """``response_format.json_schema``: a name and a JSON Schema."""

    model_config = _LENIENT
    name: StrictStr = "Record"
    schema_: JsonObject | None = Field(default=None, alias="schema")
    description: StrictStr | None = None
    strict: StrictBool | None = None


class ResponseFormat(BaseModel):
    """OpenAI's ``response_format``."""

    model_config = _STRICT
    type: Literal["json_schema", "json_object", "text"]
    json_schema: JsonSchemaFormat | None = None


class FactorSpecExtension(BaseModel):
    """The ``factorspec`` extension field (``extra_body={"factorspec": {...}}``).

    Attributes:
        ir: the relation IR (``factorspec_sdk.ir.to_ir(Model, context)``); the context of the
            relations is already folded into it.
        timeout_s: give up after this many seconds (finish_reason ``length``).
        speculative: draft certain tokens and guesses (False: one token per forward).
        schema_in_prompt: append a compact picture of the expected JSON to the last user
            message.
    """

    model_config = _STRICT
    ir: JsonObject | None = None
    timeout_s: Annotated[float, Field(gt=0, le=3600)] | None = None
    schema_in_prompt: StrictBool = False


class StreamOptions(BaseModel):
    """OpenAI's ``stream_options``."""

    model_config = _LENIENT
    include_usage: StrictBool = False


class _Common(BaseModel):
    model_config = _LENIENT
    model: StrictStr
    max_tokens: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    seed: StrictInt | None = None
    n: Annotated[StrictInt, Field(ge=1, le=16)] = 1
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    response_format: ResponseFormat | None = None
    factorspec: FactorSpecExtension | None = None
    logprobs: StrictBool | None = None


class ChatRequest(_Common):
    """``POST /v1/chat/completions``."""

    messages: Annotated[list[ChatMessageIn], Field(min_length=1, max_length=256)]
    max_completion_tokens: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    tools: list[JsonObject] | None = None


class CompletionRequest(_Common):
    """``POST /v1/completions``: a raw prompt (text or token ids), no chat template."""

    prompt: StrictStr | Annotated[list[StrictInt], Field(min_length=1)]
    echo: StrictBool = False
