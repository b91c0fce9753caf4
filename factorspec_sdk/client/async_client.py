"""`AsyncClient`: the async form of `Client`, whose concurrent callers are decoded together.

One background task per event loop (`_Batcher`) drains whatever requests are waiting into
one backend run, in a worker thread; requests that arrive during that run form the next.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, Self, TypeVar, Unpack, overload

from pydantic import BaseModel

from factorspec_sdk.backends.base import GenerationRequest, RecordOutcome
from factorspec_sdk.client.base import AnyEngine, BaseClient, ClientRuns
from factorspec_sdk.client.results import GenerateOptions, GenerationResult, Results, deliver
from factorspec_sdk.errors import FactorSpecError
from factorspec_sdk.prompts import Prompt
from factorspec_sdk.streams import AsyncRecordStream
from factorspec_sdk.tools import Tool, ToolSpec

__all__ = ["AsyncClient"]

T = TypeVar("T", bound=BaseModel)


@dataclass(slots=True)
class _Waiting:
    requests: list[GenerationRequest]
    future: asyncio.Future[list[RecordOutcome]]
    queued: float = field(default_factory=time.perf_counter)


@dataclass(slots=True)
class _Batcher:
    """One queue and one draining task per event loop: what waits together runs together."""

    run_batch: Callable[[Sequence[GenerationRequest]], list[RecordOutcome]]
    loop: asyncio.AbstractEventLoop | None = None
    queue: asyncio.Queue[_Waiting] | None = None
    task: asyncio.Task[None] | None = None
    batch_sizes: list[int] = field(default_factory=list)

    async def run(self, requests: list[GenerationRequest]) -> list[RecordOutcome]:
        """Queue ``requests``; their outcomes once the batch they joined has run."""
        loop = asyncio.get_running_loop()
        if self.loop is not loop or self.queue is None or self.task is None or self.task.done():
            self.loop, self.queue = loop, asyncio.Queue()
            self.task = loop.create_task(self._drain(self.queue))
        future: asyncio.Future[list[RecordOutcome]] = loop.create_future()
        self.queue.put_nowait(_Waiting(requests, future))
        return await future

    async def _drain(self, queue: asyncio.Queue[_Waiting]) -> None:
        while True:
            batch = [await queue.get()]
            await asyncio.sleep(0)  # callers woken in the same turn join this batch
            while not queue.empty():
                batch.append(queue.get_nowait())
            batch = [w for w in batch if not w.future.done()]  # cancelled callers
            if not batch:
                continue
            requests = [r for w in batch for r in w.requests]
            self.batch_sizes.append(len(requests))
            began = time.perf_counter()
            try:
                outcomes = await asyncio.to_thread(self.run_batch, requests)
            except Exception as exc:
                for w in batch:
                    if not w.future.done():
                        w.future.set_exception(exc)
                continue
            start = 0
            for w in batch:
                end = start + len(w.requests)
                for out in outcomes[start:end]:  # the wait for this batch's turn
                    out.stats.add({"queue_seconds": began - w.queued})
                if not w.future.done():
                    w.future.set_result(outcomes[start:end])
                start = end

    async def aclose(self) -> None:
        """Stop the draining task."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        self.task = None


class AsyncClient(BaseClient):
    """The async form of `Client`: concurrent callers are decoded together.

    Takes `BaseClient`'s arguments, or an existing client as ``client=`` (sharing its
    backend). Requests that are waiting when the client's background task is free (e.g.
    several ``await client.generate(...)`` under one ``asyncio.gather``) run as one batch,
    in a worker thread; requests that arrive during that run form the next batch.
    """

    def __init__(
        self,
        engine: AnyEngine | str = "embedded",
        *,
        client: BaseClient | None = None,
        **options: object,
    ) -> None:
        if client is not None:
            if options or engine != "embedded":
                raise TypeError("client= shares that client's backend: pass nothing else")
            self._share(client)
        else:
            super().__init__(engine, **options)  # type: ignore[arg-type]
        self._batcher = _Batcher(self._run)

    @property
    def batch_sizes(self) -> list[int]:
        """Requests per backend run, in order (for tests and logs)."""
        return self._batcher.batch_sizes

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the background task and release the backend (see `BaseClient.close`)."""
        await self._batcher.aclose()
        await asyncio.to_thread(self.close)

    @overload
    async def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        return_result: Literal[False] = False,
        **options: Unpack[GenerateOptions],
    ) -> T: ...

    @overload
    async def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        return_result: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> GenerationResult[T]: ...

    async def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        return_result: bool = False,
        **options: Unpack[GenerateOptions],
    ) -> T | GenerationResult[T]:
        """Generate one record (see `Client.generate`), batched with concurrent callers."""
        results = await self.generate_batch(
            model, [prompt], contexts=[context], return_result=True, **options
        )
        return results[0] if return_result else results[0].value

    async def call(
        self,
        tools: Sequence[ToolSpec | Tool] | object,
        prompt: Prompt,
        *,
        context: object = None,
        parallel: bool = False,
        max_calls: int | None = None,
        **options: Unpack[GenerateOptions],
    ) -> BaseModel | list[BaseModel]:
        """The model's call to ``tools`` (see `Client.call`), batched with concurrent callers."""
        model, prompt, options = self._tool_request(tools, prompt, parallel, max_calls, options)
        record = await self.generate(model, prompt, context=context, **options)
        return self._calls(record, parallel)

    def stream(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        **options: Unpack[GenerateOptions],
    ) -> AsyncRecordStream[T]:
        """Generate one record with its partial views (see `Client.stream`): ``async for``.

        A stream is decoded on its own, not batched with concurrent ``generate`` calls.
        Call it from a running event loop.
        """
        request, deliver = self._streamed(model, prompt, context, options)
        return AsyncRecordStream(ClientRuns(self), request, deliver)

    @overload
    async def generate_batch(
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
    async def generate_batch(
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
    async def generate_batch(
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
    async def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[True],
        return_exceptions: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> list[GenerationResult[T] | FactorSpecError]: ...

    async def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: bool = False,
        return_exceptions: bool = False,
        **options: Unpack[GenerateOptions],
    ) -> Results[T]:
        """One record per prompt (see `Client.generate_batch`), batched with concurrent callers."""
        started = time.perf_counter()
        requests = self._requests(model, prompts, contexts, options)
        outcomes = await self._batcher.run(requests)
        return deliver(model, requests, outcomes, return_result, return_exceptions, started)
