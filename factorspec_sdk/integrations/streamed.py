"""Streamed answers of a ``from_openai`` client: partial views, and items as they end.

`StreamedAnswer` reads a streamed ``ChatCompletion`` chunk by chunk into the record's
partial views (`factorspec_sdk.partials.PartialText`); `IterableItems` hands out the records
of an iterable answer (``{"tasks": [...]}``, `iterable_model`) each once the next one begins;
`poster` carries the views a decoder thread posts into an event loop's queue.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Generic, TypeVar, cast

from pydantic import BaseModel, ValidationError, create_model

from factorspec_sdk.backends.base import RecordOutcome
from factorspec_sdk.errors import RetriesExhaustedError
from factorspec_sdk.integrations.reask import broken_relations
from factorspec_sdk.partials import PartialText

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionChunk

__all__ = ["IterableItems", "StreamedAnswer", "iterable_model", "poster"]

ModelT = TypeVar("ModelT", bound=BaseModel)


@lru_cache(maxsize=64)
def iterable_model(model: type[BaseModel]) -> type[BaseModel]:
    """The record of several ``model`` records: ``{"tasks": [...]}``, as Instructor writes it."""
    wrapper = create_model(
        f"Iterable{model.__name__}",
        __doc__=f"Several {model.__name__} records.",
        tasks=(list[model], ...),  # type: ignore[valid-type]
    )
    return cast("type[BaseModel]", wrapper)


def poster(
    views: asyncio.Queue[BaseModel | RecordOutcome],
) -> Callable[[BaseModel | RecordOutcome], None]:
    """Puts what a worker thread posts on ``views``, in the running event loop."""
    loop = asyncio.get_running_loop()

    def post(item: BaseModel | RecordOutcome) -> None:
        loop.call_soon_threadsafe(views.put_nowait, item)

    return post


class StreamedAnswer(Generic[ModelT]):
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


class IterableItems(Generic[ModelT]):
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
            server_bug = broken_relations(exc)
            if server_bug is not None:
                raise server_bug from exc
            raise RetriesExhaustedError(
                f"an item of {self.model.__name__} fails validation: {exc} (items of "
                "create_iterable are handed out as they end, so they are not re-asked)",
                attempts=1,
                last_text=json.dumps(data),
                last_error=exc,
                last_completion=None,
            ) from exc
