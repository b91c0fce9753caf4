"""From a request body to what the engine thread needs: the spec, the prompt and the sampling.

Owns the request side of a generation: the model check and request-model validation (a
404 / 400), the record's spec (a relation IR from the ``factorspec`` extension or the
``x-factorspec`` key of the schema sent, else the ``response_format`` or vLLM
``structured_outputs`` schema converted to one (`factorspec_sdk.server.structured`),
compiled to a `CompiledSpec`; a spec that does not compile or is unsatisfiable is a 422, and
so is a schema with an ``x-factorspec`` below its root and no IR, whose relations nobody
would read, and one whose root carries the marker of relations it does not carry, a 422
``relations_not_sent``),
the `jsonschema` validator of a schema the client sent, the prompt (chat messages through
the engine's chat template, with the schema hint when asked; a raw text or token-id
prompt), and the token budget, timeout and sampling parameters of each choice. Every
failure is an `ApiError`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pydantic import ValidationError

from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.errors import SpecError, UnsatisfiableSpecError
from factorspec_sdk.ir import (
    IRCompiler,
    IRError,
    IRLimits,
    json_schema_validator,
)
from factorspec_sdk.prompts import with_schema_hint
from factorspec_sdk.server.protocol import (
    X_FACTORSPEC,
    ApiError,
    ChatRequest,
    CompletionRequest,
    FactorSpecExtension,
    JsonObject,
    Kind,
)
from factorspec_sdk.server.structured import (
    extension,
    misplaced_extension,
    relations_not_sent,
    structured,
    unexported_relations,
)
from factorspec_sdk.server.tool_calls import ToolPlan, plan_tools
from factorspec_sdk.server.unhonoured import UNSUPPORTED_PARAMETER

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

    from factorspec_sdk.engines.protocol import ChatMessage
    from factorspec_sdk.graph import CompiledSpec
    from factorspec_sdk.tokens.vocab import TokenizerInfo

__all__ = [
    "Prepared",
    "Prompt",
    "PromptEngine",
    "parse_request",
    "prepare",
    "spec_error",
]

log = logging.getLogger("factorspec.server")


class PromptEngine(Protocol):
    """What turns a prompt into token ids: a logits `Engine` or an upstream pool."""

    @property
    def tokenizer(self) -> TokenizerInfo:
        """The vocabulary (raw text prompts are encoded with it)."""
        ...

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of chat messages with the model's chat template."""
        ...


Prompt = Callable[[PromptEngine], list[int]]
"""The prompt of a request: called on the engine thread with the engine, gives token ids."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request made ready for the engine thread.

    Attributes:
        request: the validated request body.
        spec: the record's compiled spec.
        spec_seconds: how long building the spec took.
        schema: the validator of the JSON schema the client sent (``response_format``,
            when no IR came), to hold finished records to; else None.
        prompt: the prompt, as the engine thread turns it into token ids.
        max_tokens: the token budget of each choice.
        timeout_s: the request's time limit.
        timeout_asked: the limit is the request's ``timeout_s`` (else the server's).
        speculative: the request's ``factorspec.speculative`` (None: the server's setting).
        provenance: the request's ``factorspec.provenance``: answer each complete record's
            provenance.
        bare: the answer is the record's one string (vLLM ``choice``/``regex``), not its JSON.
        tools: for a request with tools, how its record becomes ``content`` or
            ``tool_calls``; else None.
    """

    request: ChatRequest | CompletionRequest
    spec: CompiledSpec
    spec_seconds: float
    schema: Validator | None
    prompt: Prompt
    max_tokens: int
    timeout_s: float
    timeout_asked: bool = False
    speculative: bool | None = None
    provenance: bool = False
    bare: bool = False
    tools: ToolPlan | None = None

    def sampling(self, i: int) -> SamplingParams:
        """The sampling parameters of choice ``i`` (seed ``seed + i``).

        Raises:
            ApiError: 400 for parameters `SamplingParams` rejects.
        """
        req = self.request
        try:
            return SamplingParams(
                temperature=req.temperature if req.temperature is not None else 0.0,
                top_p=req.top_p if req.top_p is not None else 1.0,
                seed=None if req.seed is None else req.seed + i,
                max_tokens=self.max_tokens,
            )
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None


async def prepare(
    payload: JsonObject,
    kind: Kind,
    *,
    model_name: str,
    vocab_size: int,
    limits: IRLimits,
    solver_timeout_ms: int | None,
    default_max_tokens: int,
    request_timeout_s: float,
    compiler: IRCompiler,
) -> Prepared:
    """Validate a generation request and build its spec and prompt.

    Args:
        payload: the JSON body.
        kind: the endpoint it came to.
        model_name: the model this server serves (another one is a 404).
        vocab_size: the engine's vocabulary size (token-id prompts must lie below it).
        limits: limits on relation IRs and JSON schemas.
        solver_timeout_ms: the time limit of each oracle solver query of the spec.
        compiler: builds the spec from its IR and keeps what the checks of each document
            found (the server's).
        default_max_tokens: the token budget when the request gives none.
        request_timeout_s: the time limit when the request gives none.

    Raises:
        ApiError: 404 unknown model, 400 a body the request schema rejects, 422 a spec that
            cannot be built, 400 prompt token ids outside the vocabulary.
    """
    req = parse_request(payload, kind, model_name)
    if isinstance(req, ChatRequest) and req.uses_tools():
        return await _prepare_tools(
            req, limits, solver_timeout_ms, default_max_tokens, request_timeout_s, compiler
        )
    so = req.structured_outputs
    target = None if so is None else structured(so, limits.max_choices)
    rf = req.response_format
    if target is not None:
        sent, name, param = target.schema, target.name, "structured_outputs"
    elif rf is not None and rf.type == "json_schema" and rf.json_schema is not None:
        sent, name, param = rf.json_schema.schema_, rf.json_schema.name, "response_format"
    else:
        sent, name, param = None, "Record", "response_format"
    ext = extension(req.factorspec, None if target is not None and target.bare else sent)
    if ext.max_tool_calls is not None:  # only from an x-factorspec: the field is checked
        raise ApiError(
            400, "x-factorspec.max_tool_calls bounds tool calls, not a record", param=param
        )
    if ext.ir is None and sent is not None:
        marker = unexported_relations(sent)
        if marker is not None:
            model = marker.model
            raise relations_not_sent(
                param,
                marker,
                param,
                "factorspec_sdk.from_openai(client).chat.completions.create(response_model="
                f"{model}, context=...) or factorspec_sdk.Client(base_url=...).generate("
                f"{model}, prompt, context=...), which send the relation IR for your "
                'context, or extra_body={"factorspec": {"ir": factorspec_sdk.ir.to_ir('
                f"{model}, context)}}}}",
            )
        nested = misplaced_extension(sent)
        if nested is not None:
            raise ApiError(
                422,
                f"{X_FACTORSPEC} at {nested} of the schema is not read (only at its root), "
                "and its relations would be dropped; send the relation IR of the whole "
                'record (factorspec_sdk.ir.to_ir of the root model) in "factorspec" or at '
                "the schema's root, as factorspec_sdk.from_openai does (create_iterable "
                "included)",
                code="spec_error",
                param=param,
            )
    t_spec = time.perf_counter()
    # the meta-schema check can take 1 s
    ir = await asyncio.to_thread(_ir, ext, sent, name, param, limits, compiler)
    try:
        spec = await asyncio.to_thread(
            compiler.spec_from_ir, ir, limits, solver_timeout_ms=solver_timeout_ms
        )
    except (IRError, SpecError, RecursionError) as exc:
        raise spec_error(exc) from None
    spec_seconds = time.perf_counter() - t_spec
    # the schema `_ir` converted, when no IR came
    if ext.ir is None and sent is not None:
        schema = json_schema_validator(sent, check_schema=False)
    else:
        schema = None
    prompt = _prompt(req, ext, spec, vocab_size)
    max_tokens = (
        (req.max_completion_tokens if isinstance(req, ChatRequest) else None)
        or req.max_tokens
        or default_max_tokens
    )
    return Prepared(
        request=req,
        spec=spec,
        spec_seconds=spec_seconds,
        schema=schema,
        prompt=prompt,
        max_tokens=max_tokens,
        timeout_s=min(ext.timeout_s or request_timeout_s, 3600.0),
        timeout_asked=ext.timeout_s is not None,
        speculative=ext.speculative,
        provenance=ext.provenance,
        bare=target is not None and target.bare and ext.ir is None,
    )


async def _prepare_tools(
    req: ChatRequest,
    limits: IRLimits,
    solver_timeout_ms: int | None,
    default_max_tokens: int,
    request_timeout_s: float,
    compiler: IRCompiler,
) -> Prepared:
    """`prepare` for a request whose answer is tool calls (`factorspec_sdk.server.tool_calls`)."""
    t_spec = time.perf_counter()
    plan = await asyncio.to_thread(plan_tools, req, limits, compiler)
    try:
        spec = await asyncio.to_thread(
            compiler.spec_from_ir, plan.ir, limits, solver_timeout_ms=solver_timeout_ms
        )
    except (IRError, SpecError, RecursionError) as exc:
        raise spec_error(exc) from None
    spec_seconds = time.perf_counter() - t_spec
    ext = extension(req.factorspec, None)
    messages: list[ChatMessage] = [{"role": "system", "content": plan.system}]
    messages += _messages(req)
    # the functions in the system text describe the answer; the record hint ("Answer with
    # JSON of this form: ...", on by default for a record) would describe the calls record's
    # wrapper, and a model under "auto" copied it into its message: only when asked for
    if ext.schema_in_prompt and "schema_in_prompt" in ext.model_fields_set:
        messages = with_schema_hint(messages, spec.layout)
    return Prepared(
        request=req,
        spec=spec,
        spec_seconds=spec_seconds,
        schema=None,
        prompt=lambda engine: engine.apply_chat_template(messages),
        max_tokens=req.max_completion_tokens or req.max_tokens or default_max_tokens,
        timeout_s=min(ext.timeout_s or request_timeout_s, 3600.0),
        timeout_asked=ext.timeout_s is not None,
        speculative=ext.speculative,
        provenance=ext.provenance,
        tools=plan,
    )


def _messages(req: ChatRequest) -> list[ChatMessage]:
    """The request's messages as the chat template takes them (``developer`` is ``system``)."""
    return [
        {"role": "system" if m.role == "developer" else m.role, "content": m.text()}
        for m in req.messages
    ]


def parse_request(
    payload: JsonObject, kind: Kind, model_name: str
) -> ChatRequest | CompletionRequest:
    """The request model of ``payload``, after checking it asks for the served model.

    Fields no request model declares are ignored, as vLLM does, and named in the log.

    Raises:
        ApiError: 404 ``model_not_found`` (checked before the rest of the body), 400 for a
            body the request model rejects (its first five errors; ``code``
            ``unsupported_parameter`` and ``param`` naming it when a parameter the server
            does not honour has a value that would change the answer).
    """
    model = payload.get("model")
    if isinstance(model, str) and model != model_name:  # before the rest of the body
        raise ApiError(
            404,
            f"model {model!r} not found; this server serves {model_name!r}",
            code="model_not_found",
            param="model",
        )
    cls = ChatRequest if kind == "chat" else CompletionRequest
    try:
        req = cls.model_validate(payload)
    except ValidationError as exc:
        refused = [e for e in exc.errors() if e["type"] == UNSUPPORTED_PARAMETER]
        if refused:
            where = ".".join(str(x) for x in refused[0]["loc"])
            raise ApiError(
                400, _validation_message(exc), code=UNSUPPORTED_PARAMETER, param=where
            ) from None
        raise ApiError(400, _validation_message(exc)) from None
    unknown = sorted(set(payload) - set(cls.model_fields))
    if unknown:
        log.warning("request fields this server does not read, ignored: %s", ", ".join(unknown))
    return req


def spec_error(exc: Exception) -> ApiError:
    """The answer to an error met building a spec (re-raises any other exception).

    An `IRError` keeps its status (``invalid_relation_ir``), an unsatisfiable spec is a 422
    with its unsat core, another `SpecError` a 422, a `RecursionError` a 400.
    """
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


def _ir(
    ext: FactorSpecExtension,
    schema: JsonObject | None,
    name: str,
    param: str,
    limits: IRLimits,
    compiler: IRCompiler,
) -> object:
    if ext.ir is not None:
        return ext.ir
    # the request model lets a body through only with an IR or a schema
    assert schema is not None
    try:
        return compiler.ir_from_json_schema(schema, name=name, limits=limits)
    except (IRError, RecursionError) as exc:
        err = spec_error(exc)
        err.param = param
        raise err from None


def _prompt(
    req: ChatRequest | CompletionRequest,
    ext: FactorSpecExtension,
    spec: CompiledSpec,
    vocab_size: int,
) -> Prompt:
    if isinstance(req, ChatRequest):
        messages = _messages(req)
        if ext.schema_in_prompt:  # the sentence the client adds (factorspec_sdk.prompts)
            messages = with_schema_hint(messages, spec.layout)
        return lambda engine: engine.apply_chat_template(messages)
    prompt = req.prompt
    if isinstance(prompt, str):
        text = prompt
        return lambda engine: engine.tokenizer.encode(text)
    bad = [t for t in prompt if not 0 <= t < vocab_size]
    if bad:
        raise ApiError(
            400, f"prompt token ids {bad[:5]} are outside the vocabulary", param="prompt"
        )
    ids = list(prompt)
    return lambda engine: ids


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc or '<body>'}: {err['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "invalid request: " + "; ".join(parts) + more
