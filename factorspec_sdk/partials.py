"""Typed partial records: what a record being written says so far.

``client.stream(Itinerary, prompt, context=trip)`` yields instances of ``partial_model(Itinerary)``
(Instructor's ``Partial`` semantics): the same fields, each optional and ``None`` until its
value is written, with nested models, list items and dict values partial too. A string being
written is there as far as it goes; a number, ``true``/``false``/``null`` only once it is
complete; a value its type refuses so far (a date half written, a ``Literal`` half spelled) is
left out until it passes. Field constraints and validators (relations included) are not
checked on partials; the final record is validated in full.

`PartialStream` turns a record's decided tokens into views. At every point of decoding, the
view is the text decided so far **plus the certain run after it**: the tokens the masks allow
alone, which the decoder will take whatever the model says. So fields the relations determine
(a day range once the cities are chosen) appear as soon as decoding reaches them, ahead of the
forward that writes them. A view changes only after a token the model chose; the views are a
function of the token sequence alone, so they are the same with and without speculation.
`PartialText` is the same without a planner: views of streamed text (from a server).

Parsing a JSON prefix is pydantic-core's (``from_json(..., allow_partial="trailing-strings")``);
this module adds the partial models, the cut of an unfinished number, and dropping what a
type refuses.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

if typing.TYPE_CHECKING:
    from factorspec_sdk.tokens.plan import Cursor, Planner

__all__ = [
    "PartialSink",
    "PartialStream",
    "PartialText",
    "partial_model",
    "partial_value",
    "settled",
]

_PARTIAL_CONFIG = ConfigDict(extra="ignore", populate_by_name=True, arbitrary_types_allowed=True)
_UNFINISHED_SCALAR = re.compile(r"[-+0-9.eE]+$|[a-z]+$")


@lru_cache(maxsize=256)
def partial_model(model: type[BaseModel]) -> type[BaseModel]:
    """The partial form of ``model``: every field optional (default ``None``), recursively.

    Field aliases are kept (the JSON keys); constraints, validators and relations are not.
    """
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        annotation = _partial_annotation(info.annotation)
        fields[name] = (annotation | None, Field(default=None, alias=info.alias))
    partial = create_model(
        f"Partial{model.__name__}",
        __config__=_PARTIAL_CONFIG,
        __module__=model.__module__,
        __doc__=f"{model.__name__} as written so far: fields not written yet are None.",
        **fields,
    )
    return typing.cast(type[BaseModel], partial)


def _partial_annotation(annotation: object) -> Any:
    """``annotation`` with every model in it partial and its constraints dropped."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return partial_model(annotation)
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:  # constraints and discriminators are for complete values
        return _partial_annotation(args[0])
    if origin is Literal or not args:
        return annotation
    if origin in (Union, types.UnionType):
        return Union[tuple(_partial_annotation(a) for a in args)]  # noqa: UP007
    if origin in (list, set, frozenset, tuple) or origin is typing.Sequence:
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return list[_partial_annotation(args[0])]  # type: ignore[misc]
        if origin is tuple:  # a fixed tuple so far is a list of its items written
            return list[Union[tuple(_partial_annotation(a) for a in args)]]  # type: ignore[misc]  # noqa: UP007
        return list[_partial_annotation(args[0])]  # type: ignore[misc]
    if origin is dict or origin is typing.Mapping:
        return dict[args[0], _partial_annotation(args[1])]  # type: ignore[misc,valid-type]
    return annotation


def settled(text: str) -> str:
    """``text`` without an unfinished number or literal at its end (outside a string).

    ``{"days": 1`` may go on as ``{"days": 12``: the ``1`` is not a value yet.
    """
    in_string = escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = in_string
        elif ch == '"':
            in_string = not in_string
    if in_string:
        return text
    return _UNFINISHED_SCALAR.sub("", text)


def partial_value(partial: type[BaseModel], text: str) -> BaseModel:
    """The partial record of the JSON prefix ``text`` (``partial`` from `partial_model`).

    What the partial model's types refuse (a value half written) is left out.
    """
    text = settled(text)
    data: object = pydantic_core.from_json(text, allow_partial="trailing-strings") if text else {}
    if not isinstance(data, dict):
        return partial()
    for _ in range(64):  # each round drops what failed; a record has few unfinished values
        try:
            return partial.model_validate(data)
        except ValidationError as exc:
            dropped = False
            # deepest and last first, so that dropping a list item shifts no other location
            for loc in sorted((e["loc"] for e in exc.errors()), key=_loc_key, reverse=True):
                dropped = _drop(data, loc) or dropped
            if not dropped:
                return partial()
    return partial()


def _loc_key(loc: tuple[int | str, ...]) -> tuple[tuple[int, str], ...]:
    return tuple((p, "") if isinstance(p, int) else (-1, p) for p in loc)


def _drop(data: object, loc: Sequence[int | str]) -> bool:
    """Remove the deepest value of ``data`` that ``loc`` reaches; whether one was removed."""
    parent: object = None
    key: int | str | None = None
    node = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            parent, key, node = node, part, node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            parent, key, node = node, part, node[part]
        else:
            continue  # a union branch's name in the location: the value is where we are
    if isinstance(parent, dict) and key in parent:
        del parent[key]
        return True
    if isinstance(parent, list) and isinstance(key, int):
        del parent[key]
        return True
    return False


class PartialText:
    """Views of a record whose JSON text arrives in pieces (a server's stream).

    Args:
        model: the record's model.
    """

    def __init__(self, model: type[BaseModel]) -> None:
        self.partial = partial_model(model)
        self.text = ""
        self._last: dict[str, Any] | None = None

    def feed(self, delta: str) -> BaseModel | None:
        """Add ``delta``; the new view, or None when the record says nothing new."""
        self.text += delta
        return self._view(self.text)

    def _view(self, text: str) -> BaseModel | None:
        value = partial_value(self.partial, text)
        dump = value.model_dump()
        if dump == self._last:
            return None
        self._last = dump
        return value


class PartialStream(PartialText):
    """Views of a record decoded token by token, each ahead of the text by its certain run.

    Args:
        model: the record's model.
        planner: the record's token planner (the same one the decoder uses).
        max_tokens: the record's token budget.
    """

    def __init__(self, model: type[BaseModel], planner: Planner, max_tokens: int) -> None:
        super().__init__(model)
        self._planner = planner
        self._max_tokens = max_tokens
        self._cursor: Cursor = planner.start()
        self._tokens: list[int] = []
        self._bytes = bytearray()

    def start(self) -> BaseModel | None:
        """The view before the first token: the record's certain opening."""
        return self._ahead()

    def feed_tokens(self, tokens: Sequence[int]) -> list[BaseModel]:
        """The new views after the record's tokens grew to ``tokens`` (all decided so far)."""
        planner = self._planner
        views: list[BaseModel] = []
        for token in tokens[len(self._tokens) :]:
            left = self._max_tokens - len(self._tokens)
            chosen = planner.certain(self._cursor, left) is None
            self._cursor = planner.advance(self._cursor, token, critical=False)
            self._tokens.append(token)
            self._bytes += planner.tok.vocab[token]
            if chosen:  # a certain token was in the last view already
                view = self._ahead()
                if view is not None:
                    views.append(view)
        return views

    def _ahead(self) -> BaseModel | None:
        """The view of the tokens so far and the certain run after them."""
        planner = self._planner
        left = self._max_tokens - len(self._tokens)
        text = bytearray(self._bytes)
        for token in planner.certain_run(self._cursor, left):
            text += planner.tok.vocab[token]
        self.text = text.decode("utf-8", errors="ignore")
        return self._view(self.text)


PartialSink = Callable[[BaseModel], None]
"""Where a backend sends the partial views of a record it decodes (see `GenerationRequest`)."""
