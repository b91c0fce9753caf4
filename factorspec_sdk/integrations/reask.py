"""The re-ask loop of Instructor's call shape, free of I/O (`Attempts`).

One call of ``chat.completions.create(response_model=..., max_retries=...)`` is a few
requests: `Attempts` says what to send next (`Attempts.request` to a FactorSpec server,
`Attempts.generation_request` to a local decoder) and what an answer means (`Attempts.take`:
the record, a re-ask queued, or an error). A re-ask happens only when an ordinary Pydantic
validator rejects the record; it appends the record and Instructor's JSON-mode correction
message (`reask_message`: `REASK_PROMPT`, the error and the names of the failing validators,
`failing_validators`). A relation that fails is a server bug (`relation_violations` finds
it). The sync and async clients of `factorspec_sdk.integrations.openai_compat` only send the
requests.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, get_args

from pydantic import BaseModel, ValidationError

from factorspec_sdk.backends.base import GenerationRequest
from factorspec_sdk.backends.remote import WireSpec, check_finished, remote_error
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.errors import FactorSpecError, RemoteError, RetriesExhaustedError
from factorspec_sdk.relations.decorator import RelationViolation, relations_of

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

    from factorspec_sdk.engines.protocol import ChatMessage

__all__ = [
    "REASK_PROMPT",
    "Attempts",
    "broken_relations",
    "failing_validators",
    "reask_message",
    "relation_violations",
]

ModelT = TypeVar("ModelT", bound=BaseModel)


REASK_PROMPT = "Correct your JSON ONLY RESPONSE, based on the following errors:\n"
"""The first line of a re-ask: Instructor's, for its JSON modes (``reask_md_json``)."""


_TOOLS = "response_model is the answer; for tool calls, send tools= with the openai client"


_REFUSED = {
    "response_format": "the response format is response_model's JSON schema",
    "stream": "create_partial and create_iterable stream; create answers whole",
    "n": "one record per call",
    "tools": _TOOLS,
    "tool_choice": _TOOLS,
    "functions": _TOOLS,
}


_VALIDATOR_ERRORS = {"value_error", "assertion_error"}


def failing_validators(model: type[BaseModel], error: ValidationError) -> list[str]:
    """The validators of ``model`` (and its nested models) that may have raised ``error``.

    An error a validator raised carries no validator name, only the place: the field
    validators of that field (``Model.name`` for ``@field_validator("name")`` or ``"*"``), or
    the model validators of that model when the place is a whole model. Relations are left
    out; so are errors of Pydantic's own checks (types, bounds).
    """
    names: list[str] = []
    for err in error.errors():
        if not _from_a_validator(err["type"], err.get("ctx")):
            continue
        owner, name = _owner(model, err["loc"])
        if owner is None:
            continue
        if name is None:
            names += _model_validators(owner)
            continue
        names += [
            f"{owner.__name__}.{v}"
            for v, d in owner.__pydantic_decorators__.field_validators.items()
            if name in d.info.fields or "*" in d.info.fields
        ]
        inner = _model_in(owner.model_fields[name].annotation)
        if inner is not None:  # the place is a nested model (or a list of them)
            names += _model_validators(inner)
    return list(dict.fromkeys(names))


def _model_validators(model: type[BaseModel]) -> list[str]:
    relations = {r.name for r in relations_of(model)}
    return [
        f"{model.__name__}.{v}"
        for v in model.__pydantic_decorators__.model_validators
        if v not in relations
    ]


def reask_message(model: type[BaseModel], error: ValidationError) -> str:
    """The user message of a re-ask: Instructor's text, the error, the failing validators."""
    names = failing_validators(model, error)
    named = f"\nFailing validators: {', '.join(names)}" if names else ""
    return f"{REASK_PROMPT}{error}{named}"


@dataclass(slots=True)
class Attempts(Generic[ModelT]):
    """The re-ask loop of one call, free of I/O: what to send next, and what an answer means.

    Attributes:
        wire: the response model and context as the request carries them.
        context: the Pydantic validation context (also the relations' context).
        messages: the conversation so far (re-asks are appended).
        kwargs: the other arguments of ``chat.completions.create``.
        max_retries: re-asks allowed after the first request.
        made: requests answered so far.
    """

    wire: WireSpec
    context: object
    messages: list[ChatCompletionMessageParam]
    kwargs: dict[str, Any]
    max_retries: int
    made: int = field(default=0)

    @classmethod
    def start(
        cls,
        response_model: type[ModelT],
        messages: Iterable[ChatCompletionMessageParam],
        context: object,
        max_retries: int,
        kwargs: dict[str, Any],
    ) -> Attempts[ModelT]:
        """Check the arguments and compile the spec (Z3: off the event loop when async).

        Raises:
            TypeError: an argument this shape sets itself (``response_format``, ``stream``,
                ``n``, ``tools``...).
            ValueError: a negative ``max_retries``.
            SpecError: the model, its relations or the context cannot be compiled.
        """
        for name, why in _REFUSED.items():
            if name in kwargs:
                raise TypeError(f"from_openai clients do not take {name}=: {why}")
        if not (inspect.isclass(response_model) and issubclass(response_model, BaseModel)):
            raise TypeError(
                f"response_model must be a pydantic model class, not {response_model!r}"
            )
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, not {max_retries}")
        wire = WireSpec.build(response_model, context)
        return cls(wire, context, list(messages), dict(kwargs), max_retries)

    @property
    def model(self) -> type[ModelT]:
        """The response model."""
        return cast("type[ModelT]", self.wire.model)

    def request(self) -> dict[str, Any]:
        """The keyword arguments of the next ``chat.completions.create``."""
        return {
            **self.kwargs,
            "messages": list(self.messages),
            "response_format": self.wire.response_format(),
            "extra_body": self.wire.extra_body(self.kwargs.get("extra_body")),
        }

    def generation_request(self) -> GenerationRequest:
        """The next request as a local decoder takes it (a plain vLLM / SGLang server).

        Raises:
            TypeError: an argument a plain server's segments cannot carry.
        """
        unknown = sorted(set(self.kwargs) - _SAMPLING_KWARGS)
        if unknown:
            raise TypeError(
                f"on a plain vLLM or SGLang server FactorSpec decodes the record itself: "
                f"{', '.join(unknown)} cannot be sent (it takes "
                f"{', '.join(sorted(_SAMPLING_KWARGS))})"
            )
        default = SamplingParams()
        budget = self.kwargs.get("max_completion_tokens") or self.kwargs.get("max_tokens")
        params = SamplingParams(
            temperature=self.kwargs.get("temperature", default.temperature),
            top_p=self.kwargs.get("top_p", default.top_p),
            seed=self.kwargs.get("seed"),
            max_tokens=budget if isinstance(budget, int) else default.max_tokens,
        )
        messages = cast("list[ChatMessage]", [dict(m) for m in self.messages])
        return GenerationRequest(self.model, messages, self.context, params, schema_in_prompt=False)

    def failed(self, exc: Exception) -> FactorSpecError:
        """The FactorSpec error an ``openai`` exception of a request means.

        An answer with an error status, or an error event that ended a stream (its body is
        the server's error), is read by `remote_error`.
        """
        from openai import APIError, APIStatusError

        if isinstance(exc, APIStatusError) or (
            isinstance(exc, APIError) and isinstance(exc.body, dict)
        ):
            budget = self.kwargs.get("max_completion_tokens") or self.kwargs.get("max_tokens")
            return remote_error(
                exc, self.model.__name__, budget if isinstance(budget, int) else None
            )
        return RemoteError(f"request failed: {exc}")

    def take(self, completion: ChatCompletion) -> ModelT | None:
        """The record of ``completion``, or None when a re-ask was queued (`request` again).

        Raises:
            IncompleteGenerationError: the server stopped before the record was complete.
            RemoteError: the record breaks a relation (the server broke its guarantee).
            RetriesExhaustedError: an ordinary validator still fails after ``max_retries``.
        """
        if not completion.choices:
            self.made += 1
            raise RemoteError("the server answered no choice")
        choice = completion.choices[0]
        text = choice.message.content or ""
        tokens = completion.usage.completion_tokens if completion.usage else 0
        return self.take_text(text, choice.finish_reason, tokens, completion)

    def take_text(
        self,
        text: str,
        finish_reason: str | None,
        tokens: int,
        completion: ChatCompletion | None = None,
    ) -> ModelT | None:
        """As `take`, for an answer's text (a streamed one has no ``ChatCompletion``)."""
        self.made += 1
        check_finished(finish_reason, text, tokens)
        try:
            return self.model.model_validate_json(text, context=self.context)
        except ValidationError as exc:
            server_bug = broken_relations(exc, text)
            if server_bug is not None:
                raise server_bug from exc
            if self.made > self.max_retries:
                raise RetriesExhaustedError(
                    f"{self.model.__name__} still fails validation after {self.made} "
                    f"request(s): {exc}",
                    attempts=self.made,
                    last_text=text,
                    last_error=exc,
                    last_completion=completion,
                ) from exc
            self.messages.append({"role": "assistant", "content": text})
            self.messages.append({"role": "user", "content": reask_message(self.model, exc)})
            return None


_SAMPLING_KWARGS = {"temperature", "top_p", "seed", "max_tokens", "max_completion_tokens"}


def _from_a_validator(kind: str, ctx: dict[str, Any] | None) -> bool:
    if kind in _VALIDATOR_ERRORS:
        return not isinstance((ctx or {}).get("error"), RelationViolation)
    from pydantic_core.core_schema import ErrorType

    return kind not in get_args(ErrorType)  # a PydanticCustomError a validator raised


def broken_relations(error: ValidationError, record: str | None = None) -> RemoteError | None:
    """The error of a record that breaks a relation (a server bug); None when none is broken.

    ``record``, when given, is shown (its first 200 characters) in the message.
    """
    broken = relation_violations(error)
    if not broken:
        return None
    shown = "" if record is None else f"; record {record[:200]!r}"
    return RemoteError(
        f"the server's record breaks {'; '.join(broken)}: a FactorSpec server guarantees "
        f"every relation, so this is a server bug{shown}"
    )


def relation_violations(error: ValidationError) -> list[str]:
    """The relations ``error`` says do not hold (each `RelationViolation`'s text)."""
    return [
        str(err["ctx"]["error"])
        for err in error.errors()
        if isinstance((err.get("ctx") or {}).get("error"), RelationViolation)
    ]


def _owner(
    model: type[BaseModel], loc: Sequence[int | str]
) -> tuple[type[BaseModel] | None, str | None]:
    """The model the place ``loc`` lies in, and the field (None: the model itself)."""
    current: type[BaseModel] = model
    name: str | None = None
    for part in loc:
        if isinstance(part, int):
            continue
        if name is not None:
            inner = _model_in(current.model_fields[name].annotation)
            if inner is None:
                return None, None
            current = inner
        if part not in current.model_fields:
            return None, None
        name = part
    return current, name


def _model_in(annotation: object) -> type[BaseModel] | None:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
