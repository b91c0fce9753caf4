"""The bodies `factorspec serve` accepts, as Pydantic models (its OpenAPI contract's requests).

Requests: every OpenAI parameter (and vLLM's sampling extras) is declared. Those the server
honours change the answer (``temperature``, ``top_p``, ``seed``, ``n``, ``max_tokens``,
``tools``...); those it does not (``stop``, ``logit_bias``, the penalties, ``logprobs``,
``top_k``...) are `Unhonoured` (`factorspec_sdk.server.unhonoured`): their neutral values
(``null``, ``0``, ``[]``, ``{}``, the defaults clients send) pass, any other is a 400
``unsupported_parameter`` naming the parameter and what to do instead, never silently dropped;
pure metadata (``user``, ``metadata``, ``store``, ``service_tier``...) is accepted and ignored.
Parameters nobody declared are ignored, as vLLM does, and named in the server's log. Every
reason for a 400 is stated by the request models' JSON schema (``/openapi.json``; the rules a
whole request follows are `factorspec_sdk.server.request_rules`'); a body the schema accepts is
answered 200, or 404 (unknown model), or 422 when its *content* cannot be served (a relation IR
or JSON schema that does not compile, an unsatisfiable spec, a prompt the engine cannot
tokenize, a record cut short), or 429/503 (busy, shutting down).

Two dialects of other servers are read too: an ``x-factorspec`` key at the root of a
``response_format`` JSON schema (the extension field's content, as llguidance reads
``x-guidance``), and vLLM's ``structured_outputs`` (`StructuredOutputs`: ``json``, ``regex`` or
``choice``), so code written for vLLM runs unchanged.

The answers' bodies are `factorspec_sdk.server.answers`'; an error answer is raised as
`ApiError`.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)

from factorspec_sdk.relations.schema import UNEXPORTED
from factorspec_sdk.server.request_rules import (
    CALLS_WITHOUT_TOOLS,
    CHAT_RULES,
    CHOICE_WITHOUT_TOOLS,
    NEEDS_A_SPEC,
    ONE_CALL,
    REQUEST_RULES,
    TOOLS_AND_SPEC,
    TWO_SPECS,
)
from factorspec_sdk.server.unhonoured import (
    BIAS,
    GUIDED,
    LENGTH,
    LOGPROBS,
    ONE_SAMPLE,
    PENALTY,
    STOP,
    TEXT,
    TOP_P,
    Unhonoured,
)
from factorspec_sdk.tools import X_FACTORSPEC

__all__ = [
    "DEFAULT_TOOL_CALLS",
    "MAX_TOOL_CALLS",
    "X_FACTORSPEC",
    "ApiError",
    "ChatMessageIn",
    "ChatRequest",
    "CompletionRequest",
    "FactorSpecExtension",
    "FunctionCallIn",
    "FunctionIn",
    "JsonObject",
    "JsonSchemaFormat",
    "Kind",
    "NamedFunction",
    "NamedToolChoice",
    "ResponseFormat",
    "StreamOptions",
    "StructuredOutputs",
    "TextPart",
    "ToolCallIn",
    "ToolIn",
]

JsonObject = dict[str, object]
DEFAULT_TOOL_CALLS = 4
"""The most calls in one answer with parallel calls (``parallel_tool_calls`` true, its
default unless ``tool_choice`` names a function), unless the ``factorspec`` field's
``max_tool_calls`` says otherwise."""
MAX_TOOL_CALLS = 64
"""The most ``max_tool_calls`` may allow."""
Kind = Literal["chat", "completion"]
"""The generation endpoint a request came to: ``/v1/chat/completions`` or ``/v1/completions``."""


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
    """One chat message: text, an assistant's tool calls, or a tool's result."""

    model_config = _LENIENT
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: StrictStr | list[TextPart] | None = None
    name: StrictStr | None = None
    tool_calls: Annotated[list[ToolCallIn], Field(max_length=128)] | None = None
    tool_call_id: StrictStr | None = None

    def text(self) -> str:
        """The message text (text parts joined); an assistant's calls as the JSON it wrote."""
        if isinstance(self.content, str):
            return self.content
        if self.content is not None:
            return "".join(p.text for p in self.content)
        if self.tool_calls:
            calls = [{"name": c.function.name, "arguments": c.arguments()} for c in self.tool_calls]
            return json.dumps({"calls": calls}, ensure_ascii=False)
        return ""


class FunctionCallIn(BaseModel):
    """``tool_calls[i].function`` of an assistant message: a name and its arguments' JSON."""

    model_config = _LENIENT
    name: StrictStr
    arguments: StrictStr = "{}"


class ToolCallIn(BaseModel):
    """One tool call of an assistant message (a model's earlier answer sent back)."""

    model_config = _LENIENT
    id: StrictStr | None = None
    type: Literal["function"] = "function"
    function: FunctionCallIn

    def arguments(self) -> object:
        """The arguments as JSON data (their text when it is not JSON)."""
        try:
            return json.loads(self.function.arguments)
        except ValueError:
            return self.function.arguments


class FunctionIn(BaseModel):
    """``tools[i].function``: a function the model may call."""

    model_config = _LENIENT
    name: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
    description: StrictStr | None = None
    parameters: JsonObject | None = Field(
        default=None,
        description="A JSON Schema of the arguments, of the subset `factorspec serve` "
        "compiles (a 422 otherwise); none: no arguments. An `x-factorspec` key at its root, "
        '`{"ir": {...}}`, carries the relation IR of the arguments, which the calls of '
        "the function then satisfy (the IR wins over the schema).",
        json_schema_extra={
            "properties": {
                X_FACTORSPEC: {
                    "type": "object",
                    "required": ["ir"],
                    "properties": {"ir": {"$ref": "#/components/schemas/RelationIR"}},
                    "additionalProperties": False,
                }
            }
        },
    )
    strict: StrictBool | None = None


class ToolIn(BaseModel):
    """One of ``tools``: ``{"type": "function", "function": {...}}``."""

    model_config = _LENIENT
    type: Literal["function"]
    function: FunctionIn


class NamedFunction(BaseModel):
    """The function a ``tool_choice`` names."""

    model_config = _LENIENT
    name: StrictStr


class NamedToolChoice(BaseModel):
    """``tool_choice`` naming one function: ``{"type": "function", "function": {"name": ...}}``."""

    model_config = _LENIENT
    type: Literal["function"]
    function: NamedFunction


class JsonSchemaFormat(BaseModel):
    """``response_format.json_schema``: a name and a JSON Schema."""

    model_config = _LENIENT
    name: StrictStr = "Record"
    schema_: JsonObject = Field(
        alias="schema",
        description="A JSON Schema of the subset `factorspec serve` compiles (a 422 otherwise). "
        f"An `{X_FACTORSPEC}` key at its root carries the `factorspec` extension field "
        "(the relation IR, ...); the extension field itself overrides it key by key.",
        json_schema_extra={
            "properties": {
                X_FACTORSPEC: {
                    "allOf": [
                        {"$ref": "#/components/schemas/FactorSpecExtension"},
                        {
                            "description": "max_tool_calls bounds tool calls, not a record",
                            "not": {
                                "required": ["max_tool_calls"],
                                "properties": {"max_tool_calls": {"type": "integer"}},
                            },
                        },
                    ]
                }
            }
        },
    )
    description: StrictStr | None = None
    strict: StrictBool | None = None

    @model_validator(mode="after")
    def _extension_shaped(self) -> JsonSchemaFormat:
        """The schema's ``x-factorspec`` is what the OpenAPI document says, wherever it is.

        Checked here, not only where the schema is the request's spec: a request whose
        spec comes from elsewhere (``factorspec.ir``) still may not carry a malformed one.
        """
        raw = self.schema_.get(X_FACTORSPEC)
        if isinstance(raw, dict) and UNEXPORTED in raw:  # a model's marker (`relations.schema`)
            raw = {k: v for k, v in raw.items() if k != UNEXPORTED} or None
        if raw is None:
            return self
        try:
            ext = FactorSpecExtension.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in (X_FACTORSPEC, *first["loc"]))
            raise ValueError(f"schema.{where}: {first['msg']}") from None
        if ext.max_tool_calls is not None:
            raise ValueError(
                f"schema.{X_FACTORSPEC}.max_tool_calls bounds tool calls, not a record"
            )
        return self


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
        timeout_s: the time limit of the request's records, from when it is queued (else the
            server's, ``--request-timeout``); a record not finished by then is a 422
            ``timeout_reached``, never a partial record.
        speculative: draft certain tokens and guesses (False: one token per forward, the
            baseline the speed-ups compare against); None: the server's setting.
        schema_in_prompt: append a compact picture of the expected JSON to the last user
            message of a chat request (`factorspec_sdk.prompts.hint_sentence`); on by
            default for a record, as in `Client.generate`, so the same messages give the
            same prompt; off by default for a request with ``tools`` (the functions listed
            in its system text describe the answer), where only ``true`` said explicitly
            appends it.
        max_tool_calls: with ``tools`` and ``parallel_tool_calls`` not false, the most calls
            in one answer (default `DEFAULT_TOOL_CALLS`; with a named ``tool_choice``, one
            unless this or ``parallel_tool_calls`` true asks for more); the model closes the
            list of calls when it wants, this only bounds it.
        provenance: send each complete record's provenance in its ``factorspec`` stats
            (``factorspec_sdk.provenance``: which values the model chose, which the
            relations determined); off by default (a few milliseconds of the oracle and a
            few kB per record).
    """

    model_config = _STRICT
    ir: JsonObject | None = Field(
        default=None,
        description="A relation IR (the FactorSpecRelationIR schema); one that does not "
        "compile is a 422.",
    )
    timeout_s: Annotated[float, Field(gt=0, le=3600)] | None = Field(
        default=None,
        description="Seconds a record may take from when the request is queued (default: "
        "the server's --request-timeout); a record not finished by then is a 422 "
        "timeout_reached, never a partial record.",
    )
    speculative: StrictBool | None = None
    schema_in_prompt: StrictBool = Field(
        default=True,
        description="Append 'Answer with JSON of this form: ...' to the last user message "
        "(as Client.generate does by default); false sends the messages as written. A "
        "request with tools gets it only when this is true explicitly (its functions, "
        "listed in the system text, describe the answer).",
    )
    max_tool_calls: Annotated[StrictInt, Field(ge=1, le=MAX_TOOL_CALLS)] | None = None
    provenance: StrictBool = False


_ONE_CONSTRAINT = "structured_outputs takes exactly one of json, regex, choice"


def _refuse(value: object, info: ValidationInfo) -> object:
    if value is not None:
        raise ValueError(
            f"structured_outputs.{info.field_name} is not supported (use json, regex or choice)"
        )
    return value


_Refused = Annotated[
    object | None,
    AfterValidator(_refuse),
    WithJsonSchema({"type": "null", "description": "not supported (a 400)"}),
]


class StructuredOutputs(BaseModel):
    r"""vLLM's ``structured_outputs`` (``extra_body={"structured_outputs": {...}}``).

    Exactly one constraint: ``json`` (a JSON schema, or its text; the record comes back as
    with ``response_format``), ``regex`` (the answer is text that matches it in full) or
    ``choice`` (the answer is one of these strings). vLLM's other options (whitespace,
    fallback, backend) do not change which answers are valid and are ignored; ``grammar``,
    ``json_object`` and ``structural_tag`` are a 400.

    A regex is served when its language is finite and has at most ``IRLimits.max_choices``
    strings (``[0-9]{2}``, ``(cat|dog)s?``); an unbounded one (``\d+``) is a 422.
    """

    model_config = ConfigDict(
        extra="ignore",
        strict=True,
        json_schema_extra={
            "description": _ONE_CONSTRAINT,
            # as vLLM counts them: a null constraint is one not given
            "oneOf": [
                {"required": [k], "properties": {k: {"not": {"type": "null"}}}}
                for k in ("json", "regex", "choice")
            ],
        },
    )
    json_: (
        Annotated[
            JsonObject | StrictStr,
            WithJsonSchema(
                {
                    "anyOf": [{"type": "object"}, {"type": "string"}],
                    "description": "a JSON schema, or its JSON text",
                }
            ),
        ]
        | None
    ) = Field(default=None, alias="json")
    regex: (
        Annotated[
            StrictStr,
            Field(min_length=1, max_length=4096),
            WithJsonSchema(
                {"type": "string", "minLength": 1, "maxLength": 4096, "format": "regex"}
            ),
        ]
        | None
    ) = None
    choice: (
        Annotated[
            list[Annotated[StrictStr, Field(max_length=1024)]],
            Field(min_length=1, max_length=1024),
            WithJsonSchema(
                {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 1024,
                    "items": {"type": "string", "maxLength": 1024},
                }
            ),
        ]
        | None
    ) = None
    grammar: _Refused = None
    json_object: _Refused = None
    structural_tag: _Refused = None

    @model_validator(mode="after")
    def _one(self) -> StructuredOutputs:
        # vLLM's StructuredOutputsParams counts the constraints that are not None: a client
        # that serializes every field sends nulls beside the one it sets
        given = [k for k in ("json_", "regex", "choice") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(_ONE_CONSTRAINT)
        return self


class StreamOptions(BaseModel):
    """OpenAI's ``stream_options``."""

    model_config = _LENIENT
    include_usage: StrictBool = False


class _Common(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, json_schema_extra=REQUEST_RULES)
    model: StrictStr
    max_tokens: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    seed: Annotated[StrictInt, Field(ge=0, le=2**63 - 1)] | None = None
    n: Annotated[StrictInt, Field(ge=1, le=16)] = 1
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    response_format: ResponseFormat | None = None
    factorspec: FactorSpecExtension | None = None
    structured_outputs: StructuredOutputs | None = None
    logprobs: Annotated[object, Unhonoured((None, False), LOGPROBS)] = None
    echo: Annotated[
        object, Unhonoured((None, False), "the answer is the record alone; leave echo out")
    ] = None
    stop: Annotated[object, Unhonoured((None, []), STOP)] = None
    logit_bias: Annotated[object, Unhonoured((None, {}), BIAS)] = None
    frequency_penalty: Annotated[object, Unhonoured((None, 0), PENALTY)] = None
    presence_penalty: Annotated[object, Unhonoured((None, 0), PENALTY)] = None
    best_of: Annotated[object, Unhonoured((None, 1), ONE_SAMPLE)] = None
    # vLLM's sampling extras (extra_body), which code written for vLLM sends
    top_k: Annotated[object, Unhonoured((None, -1, 0), TOP_P)] = None
    min_p: Annotated[object, Unhonoured((None, 0), TOP_P)] = None
    repetition_penalty: Annotated[object, Unhonoured((None, 1), PENALTY)] = None
    length_penalty: Annotated[object, Unhonoured((None, 1), ONE_SAMPLE)] = None
    use_beam_search: Annotated[object, Unhonoured((None, False), ONE_SAMPLE)] = None
    min_tokens: Annotated[object, Unhonoured((None, 0), LENGTH)] = None
    ignore_eos: Annotated[object, Unhonoured((None, False), STOP)] = None
    stop_token_ids: Annotated[object, Unhonoured((None, []), STOP)] = None
    bad_words: Annotated[object, Unhonoured((None, []), BIAS)] = None
    allowed_token_ids: Annotated[object, Unhonoured((None,), BIAS)] = None
    prompt_logprobs: Annotated[object, Unhonoured((None, 0), LOGPROBS)] = None
    guided_json: Annotated[object, Unhonoured((None,), GUIDED)] = None
    guided_regex: Annotated[object, Unhonoured((None,), GUIDED)] = None
    guided_choice: Annotated[object, Unhonoured((None,), GUIDED)] = None
    guided_grammar: Annotated[object, Unhonoured((None,), GUIDED)] = None
    # metadata: accepted and ignored (they do not change the answer)
    user: object = Field(default=None, description="Metadata; accepted and ignored.")
    metadata: object = Field(default=None, description="Metadata; accepted and ignored.")
    store: object = Field(
        default=None, description="Accepted and ignored: this server stores no answer."
    )
    service_tier: object = Field(
        default=None, description="Accepted and ignored: this server has one tier."
    )
    safety_identifier: object = Field(default=None, description="Metadata; accepted and ignored.")
    prompt_cache_key: object = Field(
        default=None,
        description="Accepted and ignored: the engine's prefix cache needs no key.",
    )
    prompt_cache_retention: object = Field(
        default=None,
        description="Accepted and ignored: the engine's prefix cache needs no key.",
    )

    def uses_tools(self) -> bool:
        """Whether the answer is tool calls (``tools`` given, ``tool_choice`` not none)."""
        return False

    @model_validator(mode="after")
    def _servable(self) -> _Common:
        if self.uses_tools():
            rf = self.response_format
            given = []
            if rf is not None and rf.type == "json_schema" and rf.json_schema is not None:
                given.append("response_format")
            if self.structured_outputs is not None:
                given.append("structured_outputs")
            if self.factorspec is not None and self.factorspec.ir is not None:
                given.append("factorspec.ir")
            if given:
                raise ValueError(TOOLS_AND_SPEC.format(", ".join(given)))
            if self.stream and self.n > 1:
                raise ValueError("streaming supports n=1 only")
            return self
        if self.factorspec is not None and self.factorspec.max_tool_calls is not None:
            raise ValueError(CALLS_WITHOUT_TOOLS)
        rf = self.response_format
        if self.structured_outputs is not None and rf is not None and rf.type == "json_schema":
            raise ValueError(TWO_SPECS)
        if (self.factorspec is None or self.factorspec.ir is None) and (
            self.structured_outputs is None
        ):
            if rf is None or rf.type == "text":
                raise ValueError(NEEDS_A_SPEC)
            if rf.type == "json_object":
                raise ValueError(
                    'response_format "json_object" is not supported: pass a json_schema'
                )
            if rf.json_schema is None:
                raise ValueError("response_format.json_schema is missing")
        if self.stream and self.n > 1:
            raise ValueError("streaming supports n=1 only")
        return self


class ChatRequest(_Common):
    """``POST /v1/chat/completions``."""

    model_config = ConfigDict(extra="ignore", strict=True, json_schema_extra=CHAT_RULES)
    messages: Annotated[list[ChatMessageIn], Field(min_length=1, max_length=256)]
    max_completion_tokens: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    tools: Annotated[list[ToolIn], Field(max_length=128)] | None = Field(
        default=None,
        description='Functions the model may call; with tool_choice not "none" the answer '
        "is tool calls whose arguments are valid for the function's parameters.",
    )
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = Field(
        default=None,
        description='"auto" (the default with tools): a message or calls; "required": '
        "calls; a named function: one call to it (several with parallel_tool_calls true); "
        '"none": no calls.',
    )
    parallel_tool_calls: StrictBool | None = Field(
        default=None,
        description="Allow several calls in one answer (default true, but false with a "
        "named tool_choice, which OpenAI answers with one call).",
    )
    top_logprobs: Annotated[object, Unhonoured((None, 0), LOGPROBS)] = None
    functions: Annotated[
        object, Unhonoured((None, []), "the deprecated functions are not read: pass tools")
    ] = None
    function_call: Annotated[
        object,
        Unhonoured(
            (None, "none", "auto"),
            "the deprecated function_call is not read: pass tools and tool_choice",
        ),
    ] = None
    modalities: Annotated[object, Unhonoured((None, ["text"]), TEXT)] = None
    audio: Annotated[object, Unhonoured((None,), TEXT)] = None
    reasoning_effort: Annotated[
        object,
        Unhonoured(
            (None, "none"),
            "the served model writes the record with no reasoning step; leave reasoning_effort out",
        ),
    ] = None
    verbosity: Annotated[object, Unhonoured((None,), LENGTH)] = None
    web_search_options: Annotated[
        object, Unhonoured((None,), "this server does not search the web")
    ] = None
    prediction: object = Field(
        default=None,
        description="Accepted and ignored: a latency hint that does not change the answer "
        "(FactorSpec drafts the tokens the schema and the relations determine).",
    )

    def uses_tools(self) -> bool:
        """Whether the answer is tool calls (``tools`` given, ``tool_choice`` not none)."""
        return bool(self.tools) and self.tool_choice != "none"

    def max_tool_calls(self) -> int:
        """The most calls in one answer: 1 without parallel calls, else the bound asked for.

        A named ``tool_choice`` means one call of that function, as OpenAI and vLLM answer
        it (Instructor's TOOLS mode sends one and reads the first call), unless the request
        asks for several: ``parallel_tool_calls`` true, or ``factorspec.max_tool_calls``.
        """
        asked = None if self.factorspec is None else self.factorspec.max_tool_calls
        if self.parallel_tool_calls is False:
            return 1
        named = isinstance(self.tool_choice, NamedToolChoice)
        if named and self.parallel_tool_calls is None and asked is None:
            return 1
        return asked or DEFAULT_TOOL_CALLS

    @model_validator(mode="after")
    def _one_call(self) -> ChatRequest:
        asked = None if self.factorspec is None else self.factorspec.max_tool_calls
        if self.parallel_tool_calls is False and asked is not None and asked > 1:
            raise ValueError(ONE_CALL)
        calls = self.tool_choice == "required" or isinstance(self.tool_choice, NamedToolChoice)
        if calls and not self.tools:
            raise ValueError(CHOICE_WITHOUT_TOOLS)
        return self


class CompletionRequest(_Common):
    """``POST /v1/completions``: a raw prompt (text or token ids), no chat template."""

    prompt: (
        Annotated[StrictStr, Field(min_length=1)]
        | Annotated[list[Annotated[StrictInt, Field(ge=0)]], Field(min_length=1)]
    )
    suffix: Annotated[
        object, Unhonoured((None,), "a record has no suffix; put the text in the prompt")
    ] = None
