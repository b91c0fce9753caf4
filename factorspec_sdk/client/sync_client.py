"""`Client`: typed, always-valid records from a backend, run in the calling thread."""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import TracebackType
from typing import Literal, Self, TypeVar, Unpack, overload

from pydantic import BaseModel

from factorspec_sdk.client.base import BaseClient, ClientRuns
from factorspec_sdk.client.results import GenerateOptions, GenerationResult, Results, deliver
from factorspec_sdk.errors import FactorSpecError
from factorspec_sdk.prompts import Prompt
from factorspec_sdk.streams import RecordStream
from factorspec_sdk.tools import Tool, ToolSpec

__all__ = ["Client"]

T = TypeVar("T", bound=BaseModel)


class Client(BaseClient):
    """Generates typed records that satisfy their schema and relations.

    Takes `BaseClient`'s arguments. Thread-safe: callers from several threads take turns
    on a local engine (use `AsyncClient`, or `generate_batch`, to decode them together).
    """

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @overload
    def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        return_result: Literal[False] = False,
        **options: Unpack[GenerateOptions],
    ) -> T: ...

    @overload
    def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        return_result: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> GenerationResult[T]: ...

    def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        return_result: bool = False,
        **options: Unpack[GenerateOptions],
    ) -> T | GenerationResult[T]:
        """Generate one record of ``model`` that satisfies its schema and relations.

        Args:
            model: the Pydantic model class (with ``@relation`` methods).
            prompt: the user's prompt, or a list of chat messages.
            context: the per-request context the relations read (e.g. a trip problem).
            return_result: return a `GenerationResult` (value, text, stats) instead of the value.
            **options: `GenerateOptions`: ``system``, ``temperature``, ``top_p``, ``seed``,
                ``max_tokens`` (or ``params``), ``speculative``, ``schema_in_prompt``.

        Raises:
            UnsatisfiableSpecError: no record satisfies the spec (before any token).
            TokenBudgetError: ``max_tokens`` is below the shortest record (before any token).
        """
        result = self.generate_batch(
            model, [prompt], contexts=[context], return_result=True, **options
        )[0]
        return result if return_result else result.value

    @overload
    def call(
        self,
        tools: Sequence[ToolSpec | Tool] | object,
        prompt: Prompt,
        *,
        context: object = None,
        parallel: Literal[False] = False,
        max_calls: int | None = None,
        **options: Unpack[GenerateOptions],
    ) -> BaseModel: ...

    @overload
    def call(
        self,
        tools: Sequence[ToolSpec | Tool] | object,
        prompt: Prompt,
        *,
        context: object = None,
        parallel: Literal[True],
        max_calls: int | None = None,
        **options: Unpack[GenerateOptions],
    ) -> list[BaseModel]: ...

    def call(
        self,
        tools: Sequence[ToolSpec | Tool] | object,
        prompt: Prompt,
        *,
        context: object = None,
        parallel: bool = False,
        max_calls: int | None = None,
        **options: Unpack[GenerateOptions],
    ) -> BaseModel | list[BaseModel]:
        """The model's call to one of ``tools``: the arguments, as the tool's model.

        ```python
        booking = client.call([GetWeather, BookRoom], "A room in Oslo, nights 3 to 5")
        if isinstance(booking, BookRoom): ...
        ```

        Args:
            tools: Pydantic models of the functions' arguments (named by the class), typed
                Python functions (their arguments come back as `FunctionArguments`, with
                ``.run()``), or a ``Union`` of models.
            prompt: the user's prompt, or a list of chat messages; the tools are listed to
                the model in a system message (`factorspec_sdk.tools.tools_prompt`).
            context: the context the arguments' relations read.
            parallel: allow several calls (a list comes back, one call at least).
            max_calls: with ``parallel``, the most calls (default `MAX_PARALLEL_CALLS`).
            **options: as for `generate`.

        The arguments satisfy the chosen tool's schema and relations; which tool is a choice
        of the model among those the relations leave feasible.
        """
        model, prompt, options = self._tool_request(tools, prompt, parallel, max_calls, options)
        record = self.generate(model, prompt, context=context, **options)
        return self._calls(record, parallel)

    def stream(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        **options: Unpack[GenerateOptions],
    ) -> RecordStream[T]:
        """Generate one record, with its partial views as it is decoded.

        ```python
        with client.stream(Itinerary, prompt, context=trip) as stream:
            for partial in stream:
                print(partial.stays)
        plan = stream.result.value
        ```

        Each view is an instance of ``partial_model(model)`` (`factorspec_sdk.partials`): the
        fields written so far, and those the constraints make certain next, ahead of the
        text; the last view is the whole record. The views depend on the tokens alone, not
        on speculation. Arguments as for `generate`; argument errors raise here, a record's
        error at the end of the iteration (and from ``result``).
        """
        request, deliver = self._streamed(model, prompt, context, options)
        return RecordStream(ClientRuns(self), request, deliver)

    @overload
    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[False] = False,
        return_exceptions: Literal[False] = False,
        **options: Unpack[GenerateOptions],
    ) -> list[T]: ...

    @overload
    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[True],
        return_exceptions: Literal[False] = False,
        **options: Unpack[GenerateOptions],
    ) -> list[GenerationResult[T]]: ...

    @overload
    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[False] = False,
        return_exceptions: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> list[T | FactorSpecError]: ...

    @overload
    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[True],
        return_exceptions: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> list[GenerationResult[T] | FactorSpecError]: ...

    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: bool = False,
        return_exceptions: bool = False,
        **options: Unpack[GenerateOptions],
    ) -> Results[T]:
        """Generate one record per prompt, decoded together in one run on the backend.

        Args:
            model: the Pydantic model class.
            prompts: one prompt (text or chat messages) per record.
            contexts: ``contexts[i]`` is the context of ``prompts[i]`` (default: None each).
            return_result: `GenerationResult` objects instead of the values.
            return_exceptions: as ``asyncio.gather(..., return_exceptions=True)``: a record
                that fails is its `FactorSpecError` in the list, in its place, and the
                others are returned; otherwise the first record's error is raised (after
                all records ran).
            **options: `GenerateOptions`, shared by every record; with a seed, record ``i``
                samples with ``seed + i``.

        Raises:
            TypeError, ValueError: bad arguments (before any work, whatever
                ``return_exceptions``).
        """
        started = time.perf_counter()
        requests = self._requests(model, prompts, contexts, options)
        outcomes = self._run(requests)
        return deliver(model, requests, outcomes, return_result, return_exceptions, started)
