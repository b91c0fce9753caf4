"""`RecordStream` and `AsyncRecordStream`: a record's partial views as it is decoded.

```python
with client.stream(Itinerary, prompt, context=trip) as stream:
    for partial in stream:          # PartialItinerary objects, fields None until written
        print(partial.stays)
plan = stream.result.value          # the validated Itinerary
```

A stream runs its one request on the backend in a worker thread; the backend sends each new
view (`factorspec_sdk.partials`) through the request's ``on_partial``, and the stream hands
them to the caller in order. When the record ends, the stream stops; `result` is the
validated `GenerationResult` (or raises the record's error, as ``generate`` would). Leaving
early (``close``, the ``with`` block, ``break`` then garbage collection) ends the record at
its next step: its sink raises `StreamClosed`, which ends the job, and the thread is joined.

The views are typed as the model, as Instructor's ``create_partial`` types them, though they
are instances of ``partial_model(Model)`` whose fields may be ``None``.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Generic, Self, TypeVar, cast

from pydantic import BaseModel

from factorspec_sdk.backends.base import Backend, GenerationRequest, RecordOutcome
from factorspec_sdk.errors import StreamClosed

if TYPE_CHECKING:
    from factorspec_sdk.client import GenerationResult

__all__ = ["AsyncRecordStream", "RecordStream", "RecordThread", "StreamClosed"]

T = TypeVar("T", bound=BaseModel)

Deliver = Callable[[RecordOutcome], "GenerationResult[T]"]
"""Turns the record's outcome into its result, or raises its error (the client's rule)."""


class RecordThread:
    """One request decoded in a worker thread, its views and then its outcome sent to ``post``.

    ``post`` gets every view (a `BaseModel`), then the `RecordOutcome` once, from the worker
    thread. `cancel` makes the record's sink raise `StreamClosed` at its next view (the
    backend then ends the record); `close` cancels and waits for the thread.
    """

    def __init__(
        self,
        backend: Backend,
        request: GenerationRequest,
        post: Callable[[BaseModel | RecordOutcome], object],
    ) -> None:
        self._closed = threading.Event()
        self._post = post
        self.outcome: RecordOutcome | None = None
        """The record's outcome, once it ended."""
        self._request = replace(request, on_partial=self._sink)
        self._backend = backend
        self._thread = threading.Thread(target=self._work, name="factorspec-stream", daemon=True)
        self._thread.start()

    def _sink(self, view: BaseModel) -> None:
        if self._closed.is_set():
            raise StreamClosed("the stream was closed before the record was complete")
        self._post(view)

    def _work(self) -> None:
        try:
            outcome = self._backend.run([self._request])[0]
        except Exception as exc:  # a backend breaking its contract: the record's error
            outcome = RecordOutcome.failed(exc)
        self.outcome = outcome
        self._post(outcome)

    def cancel(self) -> None:
        """End the record at its next view, without waiting."""
        self._closed.set()

    def close(self) -> None:
        """End the record at its next view and wait for the thread."""
        self._closed.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()


class RecordStream(Generic[T]):
    """Partial views of one record as it is decoded (from ``Client.stream``).

    Iterate it for the views; `result` is the finished record. Use it in a ``with`` block
    (or call `close`) to end the record when leaving early.
    """

    def __init__(self, backend: Backend, request: GenerationRequest, deliver: Deliver[T]) -> None:
        self._queue: queue.SimpleQueue[BaseModel | RecordOutcome] = queue.SimpleQueue()
        self._deliver = deliver
        self._run = RecordThread(backend, request, self._queue.put)
        self._done = False

    def __iter__(self) -> Iterator[T]:
        while not self._done:
            item = self._queue.get()
            if isinstance(item, RecordOutcome):
                self._done = True
                self._deliver(item)  # the record's error, raised at the end of the views
                return
            yield cast(T, item)

    @property
    def result(self) -> GenerationResult[T]:
        """The finished record, validated (raises the record's error, as ``generate`` does).

        Raises:
            RuntimeError: the stream was neither iterated to its end nor closed.
        """
        return _result(self._done, self._run, self._deliver)

    def cancel(self) -> None:
        """End the record at its next step (if it is still running), without waiting."""
        self._run.cancel()

    def close(self) -> None:
        """End the record at its next step (if it is still running) and wait for it."""
        self._run.close()
        self._done = True  # the record has ended: its result (or error) is settled

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        self.cancel()


class AsyncRecordStream(Generic[T]):
    """`RecordStream` for asyncio (from ``AsyncClient.stream``): ``async for`` the views."""

    def __init__(self, backend: Backend, request: GenerationRequest, deliver: Deliver[T]) -> None:
        loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[BaseModel | RecordOutcome] = asyncio.Queue()

        def post(item: BaseModel | RecordOutcome) -> None:
            loop.call_soon_threadsafe(self._queue.put_nowait, item)

        self._deliver = deliver
        self._run = RecordThread(backend, request, post)
        self._done = False

    async def __aiter__(self) -> AsyncIterator[T]:
        while not self._done:
            item = await self._queue.get()
            if isinstance(item, RecordOutcome):
                self._done = True
                self._deliver(item)
                return
            yield cast(T, item)

    @property
    def result(self) -> GenerationResult[T]:
        """The finished record (see `RecordStream.result`)."""
        return _result(self._done, self._run, self._deliver)

    async def aclose(self) -> None:
        """End the record at its next step and wait for it (off the event loop)."""
        await asyncio.to_thread(self._run.close)
        self._done = True  # the record has ended: its result (or error) is settled

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _result(done: bool, run: RecordThread, deliver: Deliver[T]) -> GenerationResult[T]:
    # iterated to its end or closed, not merely finished: the rule must not depend on the
    # worker's pace
    if not done or run.outcome is None:
        raise RuntimeError("the record is not settled: iterate the stream to its end, or close it")
    return deliver(run.outcome)
