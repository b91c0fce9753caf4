"""Instructor's call shape on a FactorSpec server: `from_openai`.

```python
client = factorspec_sdk.from_openai(openai.OpenAI(base_url="http://127.0.0.1:8000/v1"))
plan = client.chat.completions.create(
    model=model_id,
    messages=[{"role": "user", "content": prompt}],
    response_model=Itinerary,
    context=trip,
    max_retries=2,
)  # -> Itinerary, its relations hold
plan, completion = client.chat.completions.create_with_completion(...)  # + the raw answer
for partial in client.chat.completions.create_partial(...):  # views as the server streams
    ...
for stay in client.chat.completions.create_iterable(..., response_model=Stay):  # several
    ...
```

The same call as ``instructor.from_openai(client, mode=instructor.Mode.JSON_SCHEMA)``, with
the same meaning for ``response_model``, ``context`` (the Pydantic validation context, and
here also the context the relations are compiled for) and ``max_retries`` (re-asks after the
first request). What differs:

* The relations of ``response_model`` travel to the server as the relation IR, the way
  `factorspec_sdk.backends.remote.RemoteBackend` sends them (`WireSpec`), so the schema and
  every relation hold in the first answer. On a plain vLLM or SGLang server (asked once,
  `_Route`) the record is decoded here instead, with constrained segments
  (`factorspec_sdk.backends.connect`), and its ``ChatCompletion`` is made from it.
* A re-ask happens only when an ordinary Pydantic validator (a ``@field_validator`` or
  ``@model_validator`` that is not a ``@relation``: the compiler does not take it) rejects the
  record. The re-ask appends the record and Instructor's JSON-mode correction message with
  the validation error and the names of the failing validators. A relation that fails is a
  server bug and raises `RemoteError` at once; retries running out raise
  `RetriesExhaustedError`.
* Server errors come back as FactorSpec errors (`remote_error`): an unsatisfiable spec as
  `UnsatisfiableSpecError`, ...; a record that ran out of its token budget (a 422
  ``max_tokens_reached``) as `IncompleteGenerationError`, one that the server's time limit
  cut short (a 422 ``timeout_reached``) as `GenerationTimeoutError` (an
  `IncompleteGenerationError` too), and a ``finish_reason`` ``length`` (a server that
  still returns its cut text) as `IncompleteGenerationError`.

The re-ask loop is written once, free of I/O (`Attempts`); the sync and async clients only
send its requests.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import queue
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, get_args, overload

from pydantic import BaseModel, ValidationError, create_model

from factorspec_sdk.backends.base import Backend, GenerationRequest, RecordOutcome
from factorspec_sdk.backends.connect import ServerKind, connect, probe_server
from factorspec_sdk.backends.remote import WireSpec, check_finished, remote_error
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.errors import FactorSpecError, RemoteError, RetriesExhaustedError
from factorspec_sdk.partials import PartialText
from factorspec_sdk.relations.decorator import RelationViolation, relations_of
from factorspec_sdk.streams import RecordThread

if TYPE_CHECKING:
    from pathlib import Path

    from openai import AsyncOpenAI, OpenAI
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionChunk,
        ChatCompletionMessageParam,
    )

    from factorspec_sdk.engines.openai_server import TokenizerSource
    from factorspec_sdk.engines.protocol import ChatMessage

__all__ = [
    "REASK_PROMPT",
    "AsyncStructuredCompletions",
    "AsyncStructuredOpenAI",
    "Attempts",
    "StructuredCompletions",
    "StructuredOpenAI",
    "failing_validators",
    "from_openai",
    "iterable_model",
    "reask_message",
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
            broken = _relation_violations(exc)
            if broken:
                raise RemoteError(
                    f"the server's record breaks {'; '.join(broken)}: a FactorSpec server "
                    f"guarantees every relation, so this is a server bug; record {text[:200]!r}"
                ) from exc
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


class _Route:
    """Where a client's records are decoded: by the FactorSpec server it talks to, or here.

    A ``factorspec serve`` gets the relation IR and decodes; a plain vLLM or SGLang server
    gets FactorSpec's constrained segments from a local decoder (`connect`, one backend per
    model id), as ``Client(base_url=...)`` does. The server is asked who it is once.
    """

    def __init__(
        self,
        client: OpenAI | AsyncOpenAI,
        server: ServerKind,
        tokenizer: str | Path | TokenizerSource | None,
    ) -> None:
        self._base_url = str(client.base_url)
        self._api_key = client.api_key
        self._server = server
        self._tokenizer = tokenizer
        self._backends: dict[str, Backend] = {}
        self._lock = threading.Lock()

    def backend(self, model: str) -> Backend | None:
        """The local backend of ``model`` on a plain server; None for a FactorSpec server.

        Raises:
            EngineError: the server cannot be probed.
        """
        with self._lock:
            if self._server == "auto":
                self._server = probe_server(self._base_url, self._api_key)
            if self._server == "factorspec":
                return None
            if model not in self._backends:
                self._backends[model] = connect(
                    self._base_url,
                    model=model,
                    api_key=self._api_key,
                    server=self._server,
                    tokenizer=self._tokenizer,
                )
            return self._backends[model]

    def close(self) -> None:
        """Close the local backends (their HTTP connections)."""
        with self._lock:
            for backend in self._backends.values():
                backend.close()
            self._backends.clear()


class StructuredCompletions:
    """``client.chat.completions`` of a `StructuredOpenAI`."""

    def __init__(self, client: OpenAI, route: _Route) -> None:
        self._client = client
        self._route = route

    def create(
        self,
        *,
        model: str,
        messages: Iterable[ChatCompletionMessageParam],
        response_model: type[ModelT],
        context: object = None,
        max_retries: int = 3,
        **kwargs: Any,
    ) -> ModelT:
        """A ``response_model`` instance for ``messages``, its schema and relations satisfied.

        Args:
            model: the model id the server serves.
            messages: the chat messages (sent as they are).
            response_model: the Pydantic model of the record (with ``@relation`` methods).
            context: the relations' context, also passed to Pydantic validation.
            max_retries: re-asks when an ordinary validator rejects the record (Instructor's
                default, 3).
            **kwargs: any other ``chat.completions.create`` argument (``temperature``,
                ``max_tokens``, ``extra_body``...).

        Raises:
            SpecError: the model or its relations cannot be compiled for ``context``.
            RetriesExhaustedError: an ordinary validator still fails after the re-asks.
            IncompleteGenerationError: the record ran out of tokens (a
                `GenerationTimeoutError`: of the server's time limit).
            RemoteError: the server refused or failed the request.
        """
        return self.create_with_completion(
            model=model,
            messages=messages,
            response_model=response_model,
            context=context,
            max_retries=max_retries,
            **kwargs,
        )[0]

    def create_with_completion(
        self,
        *,
        model: str,
        messages: Iterable[ChatCompletionMessageParam],
        response_model: type[ModelT],
        context: object = None,
        max_retries: int = 3,
        **kwargs: Any,
    ) -> tuple[ModelT, ChatCompletion]:
        """As `create`, with the raw ``ChatCompletion`` of the answer the record came from."""
        from openai import OpenAIError

        attempts = Attempts.start(response_model, messages, context, max_retries, kwargs)
        backend = self._route.backend(model)
        while True:
            if backend is not None:
                completion = _decoded(backend.run([attempts.generation_request()])[0], model)
            else:
                try:
                    completion = self._client.chat.completions.create(
                        model=model, **attempts.request()
                    )
                except OpenAIError as exc:
                    raise attempts.failed(exc) from exc
            value = attempts.take(completion)
            if value is not None:
                return value, completion

    def create_partial(
        self,
        *,
        model: str,
        messages: Iterable[ChatCompletionMessageParam],
        response_model: type[ModelT],
        context: object = None,
        max_retries: int = 3,
        **kwargs: Any,
    ) -> Iterator[ModelT]:
        """Instructor's ``create_partial``: the record's partial views as the server streams it.

        Each view is an instance of ``partial_model(response_model)`` (fields ``None`` until
        written, `factorspec_sdk.partials`); the last item is the validated
        ``response_model`` instance. The server streams certain text ahead of its forwards,
        so values the relations determine appear with the choice that determines them. A
        re-ask (an ordinary validator failing) streams the new answer from its start. Errors
        as for `create`.
        """
        from openai import OpenAIError

        attempts = Attempts.start(response_model, messages, context, max_retries, kwargs)
        backend = self._route.backend(model)
        while True:
            if backend is not None:  # decoded here, the views from the decoder
                views: queue.SimpleQueue[BaseModel | RecordOutcome] = queue.SimpleQueue()
                run = RecordThread(backend, attempts.generation_request(), views.put)
                try:
                    while not isinstance(item := views.get(), RecordOutcome):
                        yield cast("ModelT", item)
                finally:
                    run.close()
                value = attempts.take(_decoded(item, model))
            else:
                answer = _Streamed(attempts.model)
                try:
                    stream = self._client.chat.completions.create(
                        model=model, stream=True, **attempts.request()
                    )
                    with stream:
                        for chunk in stream:
                            yield from answer.views(chunk)
                except OpenAIError as exc:
                    raise attempts.failed(exc) from exc
                value = attempts.take_text(answer.text, answer.finish, 0)
            if value is not None:
                yield value
                return

    def create_iterable(
        self,
        *,
        model: str,
        messages: Iterable[ChatCompletionMessageParam],
        response_model: type[ModelT],
        context: object = None,
        **kwargs: Any,
    ) -> Iterator[ModelT]:
        """Instructor's ``create_iterable``: several ``response_model`` records, each as it ends.

        The server writes ``{"tasks": [...]}`` (Instructor's ``IterableModel`` shape,
        `iterable_model`) with every item's relations enforced; each item is validated (with
        ``context``) and handed out as soon as the next one begins. Items are handed out
        before the answer ends, so there is no re-ask: an ordinary validator failing on an
        item raises `RetriesExhaustedError`. Other errors as for `create`.
        """
        items = _Items(response_model, context)
        for view in self.create_partial(
            model=model,
            messages=messages,
            response_model=items.wrapper,
            context=context,
            max_retries=0,
            **kwargs,
        ):
            yield from items.ended(view)


class AsyncStructuredCompletions:
    """``client.chat.completions`` of an `AsyncStructuredOpenAI` (as `StructuredCompletions`)."""

    def __init__(self, client: AsyncOpenAI, route: _Route) -> None:
        self._client = client
        self._route = route

    async def create(
        self,
        *,
        model: str,
        messages: Iterable[ChatCompletionMessageParam],
        response_model: type[ModelT],
        context: object = None,
        max_retries: int = 3,
        **kwargs: Any,
    ) -> ModelT:
        """As `StructuredCompletions.create`, awaited."""
        value, _ = await self.create_with_completion(
            model=model,
            messages=messages,
            response_model=response_model,
            context=context,
            max_retries=max_retries,
            **kwargs,
        )
        return value

    async def create_with_completion(
        self,
        *,
        model: str,
        messages: Iterable[ChatCompletionMessageParam],
        response_model: type[ModelT],
        context: object = None,
        max_retries: int = 3,
        **kwargs: Any,
    ) -> tuple[ModelT, ChatCompletion]:
        """As `StructuredCompletions.create_with_completion`, awaited (compiles in a thread)."""
        from openai import OpenAIError

        attempts = await asyncio.to_thread(
            Attempts.start, response_model, messages, context, max_retries, kwargs
        )
        backend = await asyncio.to_thread(self._route.backend, model)
        while True:
            if backend is not None:
                outcome = await asyncio.to_thread(backend.run, [attempts.generation_request()])
                completion = _decoded(outcome[0], model)
            else:
                try:
                    completion = await self._client.chat.completions.create(
                        model=model, **attempts.request()
                    )
                except OpenAIError as exc:
                    raise attempts.failed(exc) from exc
            value = attempts.take(completion)
            if value is not None:
                return value, completion

    async def create_partial(
        self,
        *,
        model: str,
        messages: Iterable[ChatCompletionMessageParam],
        response_model: type[ModelT],
        context: object = None,
        max_retries: int = 3,
        **kwargs: Any,
    ) -> AsyncIterator[ModelT]:
        """As `StructuredCompletions.create_partial`, with ``async for``."""
        from openai import OpenAIError

        attempts = await asyncio.to_thread(
            Attempts.start, response_model, messages, context, max_retries, kwargs
        )
        backend = await asyncio.to_thread(self._route.backend, model)
        while True:
            if backend is not None:  # decoded here, the views from the decoder
                views: asyncio.Queue[BaseModel | RecordOutcome] = asyncio.Queue()
                run = RecordThread(backend, attempts.generation_request(), _poster(views))
                try:
                    while not isinstance(item := await views.get(), RecordOutcome):
                        yield cast("ModelT", item)
                finally:
                    await asyncio.to_thread(run.close)
                value = attempts.take(_decoded(item, model))
            else:
                answer = _Streamed(attempts.model)
                try:
                    stream = await self._client.chat.completions.create(
                        model=model, stream=True, **attempts.request()
                    )
                    async with stream:
                        async for chunk in stream:
                            for view in answer.views(chunk):
                                yield view
                except OpenAIError as exc:
                    raise attempts.failed(exc) from exc
                value = attempts.take_text(answer.text, answer.finish, 0)
            if value is not None:
                yield value
                return

    async def create_iterable(
        self,
        *,
        model: str,
        messages: Iterable[ChatCompletionMessageParam],
        response_model: type[ModelT],
        context: object = None,
        **kwargs: Any,
    ) -> AsyncIterator[ModelT]:
        """As `StructuredCompletions.create_iterable`, with ``async for``."""
        items = _Items(response_model, context)
        async for view in self.create_partial(
            model=model,
            messages=messages,
            response_model=items.wrapper,
            context=context,
            max_retries=0,
            **kwargs,
        ):
            for item in items.ended(view):
                yield item


@dataclass(frozen=True, slots=True)
class _Chat:
    completions: StructuredCompletions


@dataclass(frozen=True, slots=True)
class _AsyncChat:
    completions: AsyncStructuredCompletions


class StructuredOpenAI:
    """An ``openai.OpenAI`` client in Instructor's shape (`from_openai`).

    Attributes:
        client: the wrapped client (its base URL, key, timeouts and retries apply).
        chat: ``chat.completions.create`` / ``create_with_completion``.
    """

    def __init__(
        self,
        client: OpenAI,
        *,
        server: ServerKind = "auto",
        tokenizer: str | Path | TokenizerSource | None = None,
    ) -> None:
        self.client = client
        self._route = _Route(client, server, tokenizer)
        self.chat = _Chat(StructuredCompletions(client, self._route))

    def close(self) -> None:
        """Close the local decoders of a plain server (the wrapped client stays open)."""
        self._route.close()


class AsyncStructuredOpenAI:
    """An ``openai.AsyncOpenAI`` client in Instructor's shape (`from_openai`)."""

    def __init__(
        self,
        client: AsyncOpenAI,
        *,
        server: ServerKind = "auto",
        tokenizer: str | Path | TokenizerSource | None = None,
    ) -> None:
        self.client = client
        self._route = _Route(client, server, tokenizer)
        self.chat = _AsyncChat(AsyncStructuredCompletions(client, self._route))

    def close(self) -> None:
        """Close the local decoders of a plain server (the wrapped client stays open)."""
        self._route.close()


@overload
def from_openai(
    client: AsyncOpenAI,
    *,
    server: ServerKind = "auto",
    tokenizer: str | Path | TokenizerSource | None = None,
) -> AsyncStructuredOpenAI: ...


@overload
def from_openai(
    client: OpenAI,
    *,
    server: ServerKind = "auto",
    tokenizer: str | Path | TokenizerSource | None = None,
) -> StructuredOpenAI: ...


def from_openai(
    client: OpenAI | AsyncOpenAI,
    *,
    server: ServerKind = "auto",
    tokenizer: str | Path | TokenizerSource | None = None,
) -> StructuredOpenAI | AsyncStructuredOpenAI:
    """Wrap an ``openai`` client in Instructor's call shape.

    Args:
        client: ``openai.OpenAI(base_url="http://HOST:PORT/v1", ...)`` or its async twin,
            for a ``factorspec serve`` or a plain vLLM / SGLang server.
        server: which server it is (``"auto"``: asked on the first call).
        tokenizer: for a plain vLLM / SGLang server, the model's tokenizer (a local folder)
            when the served model id is not one (FactorSpec plans the masks here).

    Raises:
        TypeError: ``client`` is neither.
    """
    from openai import AsyncOpenAI, OpenAI

    if isinstance(client, AsyncOpenAI):
        return AsyncStructuredOpenAI(client, server=server, tokenizer=tokenizer)
    if isinstance(client, OpenAI):
        return StructuredOpenAI(client, server=server, tokenizer=tokenizer)
    raise TypeError(f"from_openai takes an openai.OpenAI or openai.AsyncOpenAI, not {client!r}")


@lru_cache(maxsize=64)
def iterable_model(model: type[BaseModel]) -> type[BaseModel]:
    """The record of several ``model`` records: ``{"tasks": [...]}``, as Instructor writes it."""
    wrapper = create_model(
        f"Iterable{model.__name__}",
        __doc__=f"Several {model.__name__} records.",
        tasks=(list[model], ...),  # type: ignore[valid-type]
    )
    return cast("type[BaseModel]", wrapper)


_SAMPLING_KWARGS = {"temperature", "top_p", "seed", "max_tokens", "max_completion_tokens"}


def _decoded(outcome: RecordOutcome, model: str) -> ChatCompletion:
    """A record decoded here, as the ``ChatCompletion`` a server would have answered.

    Raises:
        FactorSpecError: the record's error (a spec that does not compile, a budget, ...).
    """
    from openai.types.chat import ChatCompletion

    if outcome.error is not None:
        if isinstance(outcome.error, FactorSpecError):
            raise outcome.error
        raise RemoteError(f"decoding on the server failed: {outcome.error}") from outcome.error
    stats = outcome.stats
    return ChatCompletion.model_validate(
        {
            "id": f"chatcmpl-factorspec-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": outcome.text},
                }
            ],
            "usage": {
                "prompt_tokens": stats.prompt_tokens,
                "completion_tokens": stats.tokens,
                "total_tokens": stats.prompt_tokens + stats.tokens,
                "prompt_tokens_details": {"cached_tokens": stats.cached_prompt_tokens},
            },
        }
    )


def _poster(
    views: asyncio.Queue[BaseModel | RecordOutcome],
) -> Callable[[BaseModel | RecordOutcome], None]:
    """Puts what a worker thread posts on ``views``, in the running event loop."""
    loop = asyncio.get_running_loop()

    def post(item: BaseModel | RecordOutcome) -> None:
        loop.call_soon_threadsafe(views.put_nowait, item)

    return post


class _Streamed(Generic[ModelT]):
    """One streamed answer: its text, its finish reason, and its views as chunks arrive."""

    def __init__(self, model: type[ModelT]) -> None:
        self._views = PartialText(model)
        self.finish: str | None = None

    @property
    def text(self) -> str:
        """The answer's text so far."""
        return self._views.text

    def views(self, chunk: ChatCompletionChunk) -> list[ModelT]:
        """The new views after ``chunk``."""
        out: list[ModelT] = []
        for choice in chunk.choices:
            view = self._views.feed(choice.delta.content or "")
            if view is not None:
                out.append(cast("ModelT", view))
            self.finish = choice.finish_reason or self.finish
        return out


class _Items(Generic[ModelT]):
    """The records of an iterable answer, each handed out once the next one begins."""

    def __init__(self, model: type[ModelT], context: object) -> None:
        self.model = model
        self.context = context
        self.wrapper = iterable_model(model)
        self._given = 0

    def ended(self, view: BaseModel) -> list[ModelT]:
        """The records that ``view`` (of the wrapper) shows ended, not handed out before."""
        tasks = getattr(view, "tasks", None)
        items: list[BaseModel] = list(tasks) if isinstance(tasks, list) else []
        done = len(items) if isinstance(view, self.wrapper) else len(items) - 1
        out = [self._item(item) for item in items[self._given : done]]
        self._given = max(self._given, done)
        return out

    def _item(self, item: BaseModel) -> ModelT:
        """A finished item, validated on its own."""
        if isinstance(item, self.model):
            return item
        data = item.model_dump(by_alias=True, exclude_unset=True)
        try:
            return self.model.model_validate(data, context=self.context)
        except ValidationError as exc:
            broken = _relation_violations(exc)
            if broken:
                raise RemoteError(
                    f"the server's record breaks {'; '.join(broken)}: a FactorSpec server "
                    "guarantees every relation, so this is a server bug"
                ) from exc
            raise RetriesExhaustedError(
                f"an item of {self.model.__name__} fails validation: {exc} (items of "
                "create_iterable are handed out as they end, so they are not re-asked)",
                attempts=1,
                last_text=json.dumps(data),
                last_error=exc,
                last_completion=None,
            ) from exc


def _from_a_validator(kind: str, ctx: dict[str, Any] | None) -> bool:
    if kind in _VALIDATOR_ERRORS:
        return not isinstance((ctx or {}).get("error"), RelationViolation)
    from pydantic_core.core_schema import ErrorType

    return kind not in get_args(ErrorType)  # a PydanticCustomError a validator raised


def _relation_violations(error: ValidationError) -> list[str]:
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
