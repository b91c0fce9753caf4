"""The canonical writer: exact text, prefix-free options, oracle-determined values."""

from enum import Enum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.writer.automaton import FreeString, Option, Writer, WriterState
from tests.helpers import TRIP_CONTEXT, Pick, Trip


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Inner(BaseModel):
    ok: bool
    color: Color


class Shape(BaseModel):
    name: Literal["a", "b"]
    count: int = Field(ge=0, le=2)
    inner: Inner
    tags: list[Literal["t"]] = Field(max_length=1)
    note: int | None = Field(default=None, ge=0, le=1)


class Num(BaseModel):
    note: int | None = Field(default=None, ge=-5, le=500)


def enumerate_texts(writer: Writer, limit: int = 10_000) -> list[str]:
    """Every complete text the writer can produce (depth-first over options)."""
    out: list[str] = []

    def walk(state: WriterState, text: str) -> None:
        forced, at = writer.forced(state)
        text += forced
        if at.done:
            out.append(text)
            return
        choice = writer.choices(at)
        assert not isinstance(choice, FreeString)
        texts = [o.text for o in choice]
        assert all(texts), "options are never empty"
        for a in texts:
            for b in texts:
                assert a == b or not b.startswith(a), "options are prefix-free"
        for o in choice:
            assert len(out) < limit
            walk(o.state, text + o.text)

    walk(writer.start(), "")
    return out


def test_schema_only_texts_are_canonical_and_complete() -> None:
    texts = enumerate_texts(Writer(compile_spec(Shape)))
    assert len(texts) == len(set(texts)) == 2 * 3 * 2 * 2 * 2 * 3
    for t in texts:
        obj = Shape.model_validate_json(t)
        assert t == obj.model_dump_json().replace(",", ", ").replace(":", ": ")


def test_wide_int_is_written_digit_by_digit() -> None:
    writer = Writer(compile_spec(Num))
    forced, at = writer.forced(writer.start())
    assert forced == '{"note": '
    choice = writer.choices(at)
    assert isinstance(choice, list)
    assert sorted(o.text[0] for o in choice) == sorted("-0123456789n")
    minus = next(o for o in choice if o.text == "-")
    after = writer.choices(writer.forced(minus.state)[1])
    assert isinstance(after, list)
    assert sorted(o.text for o in after) == ["1", "2", "3", "4", "5"]
    five = next(o for o in choice if o.text == "5")
    # 5, 50..59, 500 are in range: the number may end (text "}") or go on with any digit
    nxt = writer.choices(writer.forced(five.state)[1])
    assert isinstance(nxt, list)
    assert sorted(o.text for o in nxt) == sorted([*"0123456789", "}"])


def test_relation_fixes_values() -> None:
    writer = Writer(compile_spec(Pick))
    texts = enumerate_texts(writer)
    assert len(texts) == 12
    for t in texts:
        Pick.model_validate_json(t)


def test_trip_enumeration_is_exactly_the_valid_records() -> None:
    writer = Writer(compile_spec(Trip, TRIP_CONTEXT))
    texts = enumerate_texts(writer)
    # 3 cities, every order is allowed: 3! records, all valid
    assert len(texts) == 6
    for t in texts:
        Trip.model_validate_json(t, context=TRIP_CONTEXT)


class Opt(BaseModel):
    a: int | None = Field(default=None, ge=0, le=3)
    b: int = Field(ge=0, le=3)

    @relation
    def b_tracks_a(self) -> bool:
        return (self.a is None and self.b == 0) or (self.a is not None and self.b == self.a + 1)


def test_optional_leaf_read_by_a_relation() -> None:
    texts = enumerate_texts(Writer(compile_spec(Opt)))
    assert sorted(texts) == sorted(
        ['{"a": null, "b": 0}', '{"a": 0, "b": 1}', '{"a": 1, "b": 2}', '{"a": 2, "b": 3}']
    )


def test_option_type() -> None:
    writer = Writer(compile_spec(Pick))
    _, at = writer.forced(writer.start())
    choice = writer.choices(at)
    assert isinstance(choice, list) and all(isinstance(o, Option) for o in choice)
    assert sorted(o.text for o in choice) == ['"x", "n": ', '"y", "n": ', '"z", "n": ']


class Bounded(BaseModel):
    xs: list[Annotated[int, Field(ge=0, le=12)]] = Field(min_length=1, max_length=3)


def test_list_items_that_begin_one_another_are_joined_to_what_follows() -> None:
    writer = Writer(compile_spec(Bounded))
    records = enumerate_texts(writer, limit=20_000)  # checks every choice is prefix-free
    assert len(records) == len(set(records)) == 13 + 13**2 + 13**3
    for t in records:
        assert t == Bounded.model_validate_json(t).model_dump_json().replace(",", ", ").replace(
            ":", ": "
        )
    first = writer.choices(writer.forced(writer.start())[1])
    assert isinstance(first, list)
    texts = {o.text for o in first}
    assert {"1, ", "1]}", "10", "12", "2"} <= texts  # only "1" begins another value
    assert "1" not in texts
