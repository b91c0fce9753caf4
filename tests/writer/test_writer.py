"""The canonical writer: exact text, prefix-free options, oracle-determined values."""

from enum import Enum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.writer.automaton import Option, Writer
from tests.helpers import TRIP_CONTEXT, Pick, Trip, enumerate_texts


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


def test_schema_only_texts_are_canonical_and_complete() -> None:
    texts = enumerate_texts(Writer(compile_spec(Shape)))
    # note: null, 0, 1 or left out (its default, None)
    assert len(texts) == len(set(texts)) == 2 * 3 * 2 * 2 * 2 * 4
    for t in texts:
        obj = Shape.model_validate_json(t)
        dumped = obj.model_dump_json(exclude_unset=True)
        assert t == dumped.replace(",", ", ").replace(":", ": ")
    assert sum('"note"' not in t for t in texts) == 2 * 3 * 2 * 2 * 2


def test_wide_int_is_written_digit_by_digit() -> None:
    writer = Writer(compile_spec(Num))
    forced, at = writer.forced(writer.start())
    assert forced == "{"  # the optional key is written, or left out (its default, None)
    keys = writer.choices(at)
    assert isinstance(keys, list)
    assert sorted(o.text for o in keys) == ['"note": ', "}"]
    forced, at = writer.forced(next(o for o in keys if o.text == '"note": ').state)
    assert forced == ""
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
    # a left out is its default, None: as feasible as a null, with the same facts (b == 0)
    assert sorted(texts) == sorted(
        [
            '{"a": null, "b": 0}',
            '{"b": 0}',
            '{"a": 0, "b": 1}',
            '{"a": 1, "b": 2}',
            '{"a": 2, "b": 3}',
        ]
    )


def test_option_type() -> None:
    writer = Writer(compile_spec(Pick))
    _, at = writer.forced(writer.start())
    choice = writer.choices(at)
    assert isinstance(choice, list) and all(isinstance(o, Option) for o in choice)
    assert sorted(o.text for o in choice) == ['"x", "n": ', '"y", "n": ', '"z", "n": ']


class Gap(BaseModel):
    xs: list[Literal["a"]] = Field(min_length=1, max_length=8)

    @relation
    def not_four(self) -> bool:
        return len(self.xs) != 4


def test_a_list_asks_whether_it_may_end_and_go_on_not_for_every_length() -> None:
    """Each item's decision asks two questions (`list_options`): at most two checks, where
    enumerating the feasible lengths took one check for each of them and one more."""
    texts = enumerate_texts(Writer(compile_spec(Gap)))
    assert sorted(len(Gap.model_validate_json(t).xs) for t in texts) == [1, 2, 3, 5, 6, 7, 8]
    writer = Writer(compile_spec(Gap))
    checks = writer.oracle.stats
    _, at = writer.forced(writer.start())  # '{"xs": ["a"' (it has one item at least)
    options = writer.choices(at)
    assert isinstance(options, list) and sorted(o.text for o in options) == [", ", "]}"]
    assert checks.solver_checks <= 4  # two decisions; enumerating the lengths took 7
    at = writer.forced(next(o for o in options if o.text == ", ").state)[1]
    for n in (2, 3):  # 2 and 3 items may end the list, 4 must go on: forced to the fifth
        options = writer.choices(at)
        assert isinstance(options, list) and sorted(o.text for o in options) == [", ", "]}"]
        forced, at = writer.forced(next(o for o in options if o.text == ", ").state)
        assert forced == ('"a", "a"' if n == 3 else '"a"')


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


class Notes(BaseModel):
    """An Optional list and an Optional model whose null-ness relations read."""

    class Point(BaseModel):
        x: int = Field(ge=0, le=2)

    xs: list[Annotated[int, Field(ge=0, le=1)]] | None = Field(default=None, max_length=3)
    k: int = Field(ge=0, le=2)
    at: Point | None = None

    @relation
    def rules(self) -> bool:
        return (
            (self.xs is None or len(self.xs) == self.k + 1)
            and (self.at is None or self.at.x == self.k)
            and (self.xs is None) != (self.at is None)
        )


def test_optional_lists_and_models_are_null_exactly_where_relations_allow() -> None:
    """The writer decides the null-ness a relation reads before it opens the list or object."""
    import itertools
    import json

    expect = set()
    for k in range(3):
        for xs in [
            None,
            *([list(v) for n in range(4) for v in itertools.product([0, 1], repeat=n)]),
        ]:
            for at in [None, {"x": 0}, {"x": 1}, {"x": 2}]:
                data = {"xs": xs, "k": k, "at": at}
                try:
                    Notes.model_validate(data)
                except ValueError:
                    continue
                expect.add(json.dumps(data))
                for key in [k for k in ("xs", "at") if data[k] is None]:  # left out: None
                    expect.add(json.dumps({k: v for k, v in data.items() if k != key}))
    assert set(enumerate_texts(Writer(compile_spec(Notes)))) == expect
