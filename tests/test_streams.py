"""Typed partial records: partial models, views of JSON prefixes, and ``client.stream``."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import AsyncClient, Client, TokenBudgetError
from factorspec_sdk.backends.base import GenerationRequest, RecordOutcome
from factorspec_sdk.drafter.loop import GenerationStats
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.partials import partial_model, partial_value, settled
from factorspec_sdk.streams import StreamClosed
from tests.helpers import TRIP_CONTEXT, Pick, Post, Trip, tiny_tokenizer

TOK = tiny_tokenizer()


def engine() -> ScriptedEngine:
    return ScriptedEngine.random(TOK, seed=2, temperature_scale=2.0)


class Tag(BaseModel):
    kind: Literal["a", "b"]
    weight: float


class Note(BaseModel):
    title: str = Field(min_length=8)
    when: dt.date
    count: int = Field(ge=0, alias="n")
    tags: list[Tag]
    scores: dict[str, int]
    extra: Tag | None = None


NOTE_TEXT = (
    '{"title": "Minutes of \\"May\\"", "when": "2026-05-17", "n": 120, '
    '"tags": [{"kind": "a", "weight": 1.25}, {"kind": "b", "weight": -3.5}], '
    '"scores": {"x": 1, "y": 22}, "extra": null}'
)


def consistent(view: Any, final: Any) -> bool:
    """Whether a partial view says nothing the final record contradicts."""
    if view is None:
        return True
    if isinstance(view, dict):
        return isinstance(final, dict) and all(
            k in final and consistent(v, final[k]) for k, v in view.items()
        )
    if isinstance(view, list):
        return (
            isinstance(final, list)
            and len(view) <= len(final)
            and all(consistent(v, f) for v, f in zip(view, final, strict=False))
        )
    if isinstance(view, str) and isinstance(final, str):
        return final.startswith(view)
    return bool(view == final)


def dump(value: BaseModel) -> Any:
    return value.model_dump(mode="json", by_alias=True)


def test_partial_model_makes_every_field_optional_and_keeps_aliases() -> None:
    partial = partial_model(Note)
    assert partial.__name__ == "PartialNote"
    empty = partial()
    assert all(getattr(empty, name) is None for name in Note.model_fields)
    view = partial.model_validate({"title": "x", "n": 3, "tags": [{"kind": "a"}]})
    assert view.title == "x"  # type: ignore[attr-defined]  # min_length is for the whole record
    assert view.count == 3  # type: ignore[attr-defined]
    assert view.tags[0].weight is None  # type: ignore[attr-defined]
    assert partial_model(Note) is partial  # made once per model


def test_every_prefix_is_a_consistent_view_and_the_whole_text_is_the_record() -> None:
    final = dump(Note.model_validate_json(NOTE_TEXT))
    partial = partial_model(Note)
    for i in range(len(NOTE_TEXT) + 1):
        view = dump(partial_value(partial, NOTE_TEXT[:i]))
        assert consistent(view, final), (NOTE_TEXT[:i], view)
    assert dump(partial_value(partial, NOTE_TEXT)) == final


def test_unfinished_values_wait_until_they_are_whole() -> None:
    partial = partial_model(Note)
    assert partial_value(partial, '{"n": 12').count is None  # type: ignore[attr-defined]
    assert partial_value(partial, '{"n": 12,').count == 12  # type: ignore[attr-defined]
    assert partial_value(partial, '{"title": "Min').title == "Min"  # type: ignore[attr-defined]
    assert partial_value(partial, '{"when": "2026-0').when is None  # type: ignore[attr-defined]
    half = partial_value(partial, '{"tags": [{"kind": "a"}, {"kind": "')
    assert [t.kind for t in half.tags] == ["a", None]  # type: ignore[attr-defined]
    assert settled('{"a": "x1') == '{"a": "x1'  # inside a string: kept
    assert settled('{"a": tr') == '{"a": '


def views(client: Client, model: type[BaseModel], ctx: object, **kw: Any) -> list[Any]:
    with client.stream(model, "go", context=ctx, **kw) as stream:
        out = [dump(v) for v in stream]
    assert dump(stream.result.value) == out[-1]  # the last view is the record
    return out


def test_stream_views_are_consistent_and_end_with_the_record() -> None:
    client = Client(engine())
    seen = views(client, Trip, TRIP_CONTEXT)
    assert len(seen) >= 3
    for view in seen:
        assert consistent(view, seen[-1])
    assert all(a != b for a, b in itertools.pairwise(seen))  # each view says something new


def test_determined_days_come_with_their_city_ahead_of_the_text() -> None:
    """A leg's days follow from its city: they are in the first view that has the city."""
    seen = views(Client(engine()), Trip, TRIP_CONTEXT)
    for k in range(len(TRIP_CONTEXT)):
        first = next(
            v for v in seen if len(v["legs"] or []) > k and v["legs"][k]["city"] in TRIP_CONTEXT
        )
        leg = first["legs"][k]
        assert leg["first_day"] is not None and leg["last_day"] is not None


def test_stream_views_are_the_same_with_and_without_speculation() -> None:
    eng = engine()
    on = views(Client(eng), Trip, TRIP_CONTEXT)
    off = views(Client(eng, speculative=False), Trip, TRIP_CONTEXT)
    assert on == off
    # free strings with lengths the relations tie: views every few tokens
    posts = [views(Client(eng, speculative=s), Post, None) for s in (True, False)]
    assert posts[0] == posts[1]
    assert len(posts[0]) > 5


def test_stream_raises_the_record_error_at_the_end() -> None:
    client = Client(engine())
    with pytest.raises(TokenBudgetError):
        list(client.stream(Pick, "go", max_tokens=2))
    stream = client.stream(Pick, "go", max_tokens=2)
    time.sleep(0.3)  # the refused record has ended in its worker; the rule does not change
    with pytest.raises(RuntimeError, match="iterate"):
        _ = stream.result
    stream.close()
    with pytest.raises(TokenBudgetError):  # settled by close: the record's own error
        _ = stream.result
    with pytest.raises(TypeError):
        client.stream(Pick, "go", nonsense=1)  # type: ignore[call-arg]


def test_async_stream_gives_the_same_views() -> None:
    eng = engine()
    expected = views(Client(eng), Trip, TRIP_CONTEXT)

    async def main() -> list[Any]:
        async with AsyncClient(eng) as client:
            async with client.stream(Trip, "go", context=TRIP_CONTEXT) as stream:
                out = [dump(v) async for v in stream]
            assert dump(stream.result.value) == out[-1]
            return out

    assert asyncio.run(main()) == expected


class _GatedBackend:
    """Sends one view, waits for the test, then tries a second: closing in between ends it."""

    name = "gated"

    def __init__(self) -> None:
        self.sent_first = threading.Event()
        self.go_on = threading.Event()
        self.error: Exception | None = None

    def run(self, requests: Sequence[GenerationRequest]) -> list[RecordOutcome]:
        sink = requests[0].on_partial
        assert sink is not None
        partial = partial_model(requests[0].model)
        sink(partial_value(partial, '{"letter": "x"'))
        self.sent_first.set()
        self.go_on.wait(10)
        try:
            sink(partial_value(partial, '{"letter": "x", "n": 1,'))
        except Exception as exc:
            self.error = exc
            return [RecordOutcome("", [], GenerationStats(), exc)]
        return [RecordOutcome('{"letter": "x", "n": 1, "big": false}', [], GenerationStats())]

    def close(self) -> None:
        pass


def test_closing_a_stream_ends_its_record() -> None:
    backend = _GatedBackend()
    stream = Client(backend=backend).stream(Pick, "go")
    first = next(iter(stream))
    assert first.letter == "x"
    stream.cancel()
    backend.go_on.set()
    stream.close()
    assert isinstance(backend.error, StreamClosed)
    with pytest.raises(StreamClosed):
        _ = stream.result
