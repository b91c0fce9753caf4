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
  `Route`) the record is decoded here instead, with constrained segments
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

The re-ask loop is written once, free of I/O (`Attempts`, in
`factorspec_sdk.integrations.reask`, with `failing_validators` and `REASK_PROMPT`, which are
imported from here too); the sync and async clients only send its requests. Where a record
is decoded is `factorspec_sdk.integrations.route`'s, and reading a streamed answer
`factorspec_sdk.integrations.streamed`'s.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from pydantic import BaseModel

from factorspec_sdk.backends.base import RecordOutcome
from factorspec_sdk.backends.connect import ServerKind
from factorspec_sdk.integrations.reask import (
    REASK_PROMPT,
    Attempts,
    failing_validators,
    reask_message,
)
from factorspec_sdk.integrations.route import Route, decoded_completion
from factorspec_sdk.integrations.streamed import (
    IterableItems,
    StreamedAnswer,
    iterable_model,
    poster,
)
from factorspec_sdk.streams import RecordThread

if TYPE_CHECKING:
    from pathlib import Path

    from openai import AsyncOpenAI, OpenAI
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionMessageParam,
    )

    from factorspec_sdk.engines.openai_server import TokenizerSource

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


class StructuredCompletions:
    """``client.chat.completions`` of a `StructuredOpenAI`."""

    def __init__(self, client: OpenAI, route: Route) -> None:
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
                completion = decoded_completion(
                    backend.run([attempts.generation_request()])[0], model
                )
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
                value = attempts.take(decoded_completion(item, model))
            else:
                answer = StreamedAnswer(attempts.model)
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
        items = IterableItems(response_model, context)
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

    def __init__(self, client: AsyncOpenAI, route: Route) -> None:
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
                completion = decoded_completion(outcome[0], model)
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
                run = RecordThread(backend, attempts.generation_request(), poster(views))
                try:
                    while not isinstance(item := await views.get(), RecordOutcome):
                        yield cast("ModelT", item)
                finally:
                    await asyncio.to_thread(run.close)
                value = attempts.take(decoded_completion(item, model))
            else:
                answer = StreamedAnswer(attempts.model)
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
        items = IterableItems(response_model, context)
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
        self._route = Route(client, server, tokenizer)
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
        self._route = Route(client, server, tokenizer)
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
