"""Differential tests: the compiled relation agrees with the Python relation on random records."""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field
from typing import Any, Literal

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from factorspec_sdk import distinct, relation
from tests.relations.helpers import compiled_truths


def assert_agree(
    model: type[BaseModel],
    context: object,
    data: dict[str, Any],
    seen: dict[str, set[bool]] | None = None,
) -> None:
    """The compiled relations give Python's truth on ``data`` (``seen`` collects the truths)."""
    for name, (py, compiled) in compiled_truths(model, context, data).items():
        assert py == compiled, f"{name}: python {py}, compiled {compiled} on {data}"
        if seen is not None:
            seen.setdefault(name, set()).add(py)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"
    GREEN = "green"


@dataclass
class Ctx:
    days: dict[str, int] = field(default_factory=lambda: {"x": 2, "y": 0, "a": 1})
    allowed: list[str] = field(default_factory=lambda: ["a", "b"])
    pairs: list[tuple[str, str]] = field(
        default_factory=lambda: [("x", "a"), ("y", "b"), ("x", "c")]
    )
    k: int = 2


class Item(BaseModel):
    a: int = Field(ge=-3, le=3)
    b: int = Field(ge=-3, le=3)
    tag: Literal["x", "y", "z"]
    flag: bool


class Box(BaseModel):
    items: list[Item] = Field(max_length=4)
    n: int = Field(ge=-4, le=4)
    m: int = Field(ge=-4, le=4)
    color: Color
    note: int | None = Field(default=None, ge=-4, le=4)
    name: str

    @relation
    def arith(self) -> bool:
        return self.n * 2 - self.m // 3 + self.n % 3 == abs(self.m) - (-self.n)

    @relation
    def neg_divisor(self) -> bool:
        return self.n // -3 == self.m % -2

    @relation
    def chained(self) -> bool:
        return -2 <= self.n < self.m <= 3

    @relation
    def short_circuit(self) -> bool:
        return len(self.items) > 0 and self.items[0].a == 1

    @relation
    def or_not_division(self) -> bool:
        return not (self.n != 0) or self.m // self.n > 1

    @relation
    def conditional(self) -> bool:
        return (self.n if self.m > 0 else -self.n) >= 1

    @relation
    def all_filtered(self) -> bool:
        return all(it.a <= it.b for it in self.items if it.flag)

    @relation
    def any_tag(self) -> bool:
        return any(it.tag == "x" and it.a > 0 for it in self.items)

    @relation
    def sums(self) -> bool:
        return sum(it.a for it in self.items) == self.n

    @relation
    def len_listcomp(self) -> bool:
        return len([it for it in self.items if it.flag]) == sum(1 for it in self.items if it.b > 0)

    @relation
    def min_max(self) -> bool:
        return min(it.a for it in self.items) < max(it.b for it in self.items)

    @relation
    def min_max_args(self) -> bool:
        return max(self.n, self.m, 0) == min((it.a for it in self.items), default=0)

    @relation
    def zipped(self) -> bool:
        return all(x.b == y.a for x, y in zip(self.items, self.items[1:]))

    @relation
    def enumerated(self) -> bool:
        return all(it.a >= i - 2 for i, it in enumerate(self.items))

    @relation
    def ranged(self) -> bool:
        return all(self.items[i].a <= self.items[i + 1].a for i in range(len(self.items) - 1))

    @relation
    def negative_index(self) -> bool:
        return self.items[-1].b == self.n

    @relation
    def symbolic_index(self) -> bool:
        return self.items[self.n].a == 0

    @relation
    def slices(self) -> bool:
        return sum(it.a for it in self.items[:-1]) == self.m or all(
            it.flag for it in self.items[-2:]
        )

    @relation
    def slice_middle(self) -> bool:
        return len(self.items[1:3]) == 2 and any(it.b == self.m for it in self.items[1:3])

    @relation
    def member(self, ctx: Ctx) -> bool:
        return self.name in ctx.allowed

    @relation
    def tuple_member(self, ctx: Ctx) -> bool:
        return len(self.items) > 0 and (self.items[0].tag, self.name) in ctx.pairs

    @relation
    def lookup(self, ctx: Ctx) -> bool:
        return ctx.days[self.name] == self.n

    @relation
    def lookup_get(self, ctx: Ctx) -> bool:
        return ctx.days.get(self.name, 0) >= self.m

    @relation
    def distinct_tags(self) -> bool:
        return distinct(it.tag for it in self.items)

    @relation
    def distinct_filtered(self) -> bool:
        return distinct(it.a for it in self.items if it.flag)

    @relation
    def enums(self) -> bool:
        return self.color == Color.RED or self.color.value == "blue"

    @relation
    def enum_vs_raw(self) -> bool:
        return self.color != "red"

    @relation
    def optional(self) -> bool:
        return self.note is None or self.note > self.n

    @relation
    def optional_eq(self) -> bool:
        return self.note == self.m

    @relation
    def lets(self) -> bool:
        k = len(self.items)
        if k == 0:
            return self.n == 0
        first = self.items[0]
        return first.a + k == self.n

    @relation
    def nested_for(self) -> bool:
        return all(x.a != y.b for x in self.items for y in self.items if x.tag != y.tag)

    @relation
    def filtered_index(self) -> bool:
        return [it.a for it in self.items if it.flag][0] == self.n  # noqa: RUF015

    @relation
    def bool_arith(self) -> bool:
        return sum(it.flag for it in self.items) == self.m

    @relation
    def in_list(self) -> bool:
        return self.n in [it.a for it in self.items]

    @relation
    def lazy_errors(self, ctx: Ctx) -> bool:
        return all(ctx.days[it.tag] > 0 for it in self.items)

    @relation
    def any_errors(self) -> bool:
        return any(it.a == 1 or 10 // it.b > 2 for it in self.items)

    @relation
    def eager_errors(self) -> bool:
        return any([it.a == 1 or 10 // it.b > 2 for it in self.items])

    @relation
    def power(self) -> bool:
        return self.n**2 == self.m + 4

    @relation
    def context_const(self, ctx: Ctx) -> bool:
        return self.n < ctx.k + len(ctx.allowed) and self.m != max(ctx.days.values())

    @relation
    def string_truthy(self) -> bool:
        return bool(self.name) and self.name != "b"

    @relation
    def in_generator(self) -> bool:
        return 2 in (it.a for it in self.items)


CTX = Ctx()
ALWAYS_TRUE = {"enum_vs_raw"}  # a plain Enum member never equals its raw value

items_st = st.lists(
    st.fixed_dictionaries(
        {
            "a": st.integers(-3, 3),
            "b": st.integers(-3, 3),
            "tag": st.sampled_from(["x", "y", "z"]),
            "flag": st.booleans(),
        }
    ),
    max_size=4,
)
box_st = st.fixed_dictionaries(
    {
        "items": items_st,
        "n": st.integers(-4, 4),
        "m": st.integers(-4, 4),
        "color": st.sampled_from(["red", "blue", "green"]),
        "note": st.one_of(st.none(), st.integers(-4, 4)),
        "name": st.sampled_from(["a", "b", "c", "x", "", "zzz"]),
    }
)


@settings(max_examples=200, deadline=None)
@given(box_st)
def test_box_relations_agree_with_python(data: dict[str, Any]) -> None:
    assert_agree(Box, CTX, data)


def random_box(rnd: random.Random) -> dict[str, Any]:
    """A random `Box` record (plain data, relations not enforced)."""
    return {
        "items": [
            {
                "a": rnd.randint(-3, 3),
                "b": rnd.randint(-3, 3),
                "tag": rnd.choice("xyz"),
                "flag": rnd.random() < 0.5,
            }
            for _ in range(rnd.randint(0, 4))
        ],
        "n": rnd.randint(-4, 4),
        "m": rnd.randint(-4, 4),
        "color": rnd.choice(["red", "blue", "green"]),
        "note": rnd.choice([None, rnd.randint(-4, 4)]),
        "name": rnd.choice(["a", "b", "c", "x", "", "zzz"]),
    }


def test_every_relation_is_exercised_both_ways() -> None:
    """Sanity check of the strategy: each relation is true on some and false on some records."""
    rnd = random.Random(0)
    seen: dict[str, set[bool]] = {}
    for _ in range(300):
        assert_agree(Box, CTX, random_box(rnd), seen)
    assert seen["enum_vs_raw"] == {True}
    assert all(v == {True, False} for k, v in seen.items() if k not in ALWAYS_TRUE), {
        k: v for k, v in seen.items() if v != {True, False}
    }


class Texts(BaseModel):
    """``len()`` of free strings: alone, beside their value, in lists, under Optional."""

    title: str = Field(max_length=8)
    body: str
    note: str | None = None
    kind: str
    n: int = Field(ge=0, le=8)
    tags: list[str] = Field(max_length=3)
    mode: Literal["on", "off", ""]

    @relation
    def title_is_n(self) -> bool:
        return len(self.title) == self.n

    @relation
    def body_vs_title(self) -> bool:
        return len(self.body) > len(self.title) or len(self.body) == 0

    @relation
    def optional_note(self) -> bool:
        return self.note is None or len(self.note) >= 2

    @relation
    def length_and_value(self) -> bool:
        return (len(self.kind) == 1 and self.kind != "a") or self.kind == "bb"

    @relation
    def tag_lengths(self) -> bool:
        return sum(len(t) for t in self.tags) <= 4

    @relation
    def length_arithmetic(self) -> bool:
        return len(self.title) % 2 == 1 and min(len(self.body), 3) == 3

    @relation
    def last_tag(self) -> bool:
        return len(self.tags[-1]) > 1

    @relation
    def truthy_and_length(self) -> bool:
        return bool(self.kind) and len(self.kind) < 3

    @relation
    def chosen_length(self) -> bool:
        return len(self.title if self.n > 3 else "xyz") + len(self.mode) == 6

    @relation
    def literal_length(self) -> bool:
        return len(self.mode) > len(self.kind)

    @relation
    def truthy_strings(self) -> bool:
        return bool(self.body) or not self.title or (self.note and self.tags[0])


text_st = st.text(alphabet='ab é😀"', max_size=10)
texts_st = st.fixed_dictionaries(
    {
        "title": st.text(alphabet="xé😀", max_size=8),
        "body": text_st,
        "note": st.one_of(st.none(), text_st),
        "kind": st.sampled_from(["a", "b", "bb", "", "ccc", "é"]),
        "n": st.integers(0, 8),
        "tags": st.lists(st.text(alphabet="t😀", max_size=3), max_size=3),
        "mode": st.sampled_from(["on", "off", ""]),
    }
)


@settings(max_examples=300, deadline=None)
@given(texts_st)
def test_string_length_relations_agree_with_python(data: dict[str, Any]) -> None:
    assert_agree(Texts, None, data)


def test_every_length_relation_is_exercised_both_ways() -> None:
    import random

    rnd = random.Random(1)

    def text(alphabet: str, most: int) -> str:
        return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, most)))

    seen: dict[str, set[bool]] = {}
    for _ in range(400):
        data = {
            "title": text("xé😀", 8),
            "body": text('ab é😀\\"', 10),
            "note": rnd.choice([None, text("ab", 4)]),
            "kind": rnd.choice(["a", "b", "bb", "", "ccc", "é"]),
            "n": rnd.randint(0, 8),
            "tags": [text("t😀", 3) for _ in range(rnd.randint(0, 3))],
            "mode": rnd.choice(["on", "off", ""]),
        }
        assert_agree(Texts, None, data, seen)
    assert all(v == {True, False} for v in seen.values()), seen


class Names(BaseModel):
    """Free strings compared by value: with constants, constant sets and each other."""

    first: str
    last: str
    nick: str | None = None
    team: list[str] = Field(max_length=3)
    mode: Literal["on", "off"]

    @relation
    def differ(self) -> bool:
        return self.first != self.last

    @relation
    def named(self) -> bool:
        return self.first in ("ann", "bo") or self.last == "x"

    @relation
    def nick_rule(self) -> bool:
        return self.nick is None or self.nick == self.first or self.nick != self.last

    @relation
    def team_distinct(self) -> bool:
        return distinct(self.team)

    @relation
    def first_in_team(self) -> bool:
        return self.first in self.team

    @relation
    def literal_vs_free(self) -> bool:
        return self.mode == self.first or self.last != "on"

    @relation
    def nobody_is_last(self) -> bool:
        return all(t != self.last for t in self.team)


name_st = st.sampled_from(["", "ann", "bo", "x", "on", "off", "a", "é😀"]) | st.text(
    "ab", max_size=3
)
names_st = st.fixed_dictionaries(
    {
        "first": name_st,
        "last": name_st,
        "nick": st.none() | name_st,
        "team": st.lists(name_st, max_size=3),
        "mode": st.sampled_from(["on", "off"]),
    }
)


@settings(max_examples=300, deadline=None)
@given(names_st)
def test_string_comparisons_agree_with_python(data: dict[str, Any]) -> None:
    assert_agree(Names, None, data)


def test_every_string_comparison_is_exercised_both_ways() -> None:
    import random

    rnd = random.Random(2)
    pool = ["", "ann", "bo", "x", "on", "off", "a", "b", "ab"]
    seen: dict[str, set[bool]] = {}
    for _ in range(400):
        data = {
            "first": rnd.choice(pool),
            "last": rnd.choice(pool),
            "nick": rnd.choice([None, *pool]),
            "team": rnd.sample(pool, rnd.randint(0, 3)) + rnd.sample(pool, rnd.randint(0, 1)),
            "mode": rnd.choice(["on", "off"]),
        }
        data["team"] = data["team"][:3]
        assert_agree(Names, None, data, seen)
    assert all(v == {True, False} for v in seen.values()), seen


class Ledger(BaseModel):
    """Dict fields: free-str keys, Literal keys; lookups, membership, iteration in order."""

    percent: dict[str, int] = Field(max_length=3)
    hours: dict[Literal["mon", "tue", "wed"], int]
    day: Literal["mon", "tue", "wed"]
    n: int = Field(ge=0, le=4)

    @relation
    def total(self) -> bool:
        return sum(self.percent.values()) == 100

    @relation
    def sized(self) -> bool:
        return len(self.percent) == self.n or not self.hours

    @relation
    def lookup(self) -> bool:
        return self.hours["mon"] > 2

    @relation
    def lookup_by_field(self) -> bool:
        return self.hours[self.day] == self.n

    @relation
    def get_default(self) -> bool:
        return self.hours.get("tue", 5) == 5

    @relation
    def has_key(self) -> bool:
        return "x" in self.percent or "wed" not in self.hours

    @relation
    def items_loop(self) -> bool:
        return all(k != "bad" or v < 0 for k, v in self.percent.items())

    @relation
    def keys_and_iteration(self) -> bool:
        return any(k == "mon" for k in self.hours) and "tue" in self.hours.keys()

    @relation
    def first_key(self) -> bool:
        return list(self.percent)[0] == "a"  # noqa: RUF015 - the indexing is tested

    @relation
    def values_in_order(self) -> bool:
        return all(a <= b for a, b in zip(self.hours.values(), list(self.hours.values())[1:]))


ledger_st = st.fixed_dictionaries(
    {
        "percent": st.dictionaries(
            st.sampled_from(["a", "b", "x", "bad", "ab"]), st.integers(-3, 100), max_size=3
        ),
        "hours": st.permutations(["mon", "tue", "wed"]).flatmap(
            lambda keys: st.integers(0, 3).flatmap(
                lambda k: st.fixed_dictionaries({d: st.integers(0, 5) for d in keys[:k]})
            )
        ),
        "day": st.sampled_from(["mon", "tue", "wed"]),
        "n": st.integers(0, 4),
    }
)


@settings(max_examples=300, deadline=None)
@given(ledger_st)
def test_dict_relations_agree_with_python(data: dict[str, Any]) -> None:
    assert_agree(Ledger, None, data)


def test_every_dict_relation_is_exercised_both_ways() -> None:
    import random

    rnd = random.Random(3)
    seen: dict[str, set[bool]] = {}
    for _ in range(400):
        keys = rnd.sample(["a", "b", "x", "bad", "ab"], rnd.randint(0, 3))
        days = rnd.sample(["mon", "tue", "wed"], rnd.randint(0, 3))
        data = {
            "percent": {k: rnd.choice([-1, 0, 30, 40, 60, 100]) for k in keys},
            "hours": {d: rnd.randint(0, 5) for d in days},
            "day": rnd.choice(["mon", "tue", "wed"]),
            "n": rnd.randint(0, 4),
        }
        assert_agree(Ledger, None, data, seen)
    assert all(v == {True, False} for v in seen.values()), seen


class Whole(BaseModel):
    """An int in a list of floats: equal where the float is a whole number, as in Python."""

    n: int = Field(ge=0, le=4)

    @relation
    def in_floats(self) -> bool:
        return self.n in [2.0, 3.5, float("inf")]

    @relation
    def not_in_floats(self) -> bool:
        return self.n not in (1.0, 0.5)


def test_int_in_whole_floats_agrees_with_python() -> None:
    seen: dict[str, set[bool]] = {}
    for n in range(5):
        assert_agree(Whole, None, {"n": n}, seen)
    assert all(v == {True, False} for v in seen.values()), seen


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class Levels(BaseModel):
    """An IntEnum field against int values: equal where the values are, as in Python."""

    level: Level
    n: int = Field(ge=0, le=4)
    xs: list[int] = Field(max_length=2)

    @relation
    def same(self) -> bool:
        return self.level == self.n

    @relation
    def among(self) -> bool:
        return self.level in self.xs or self.level != len(self.xs) + 1


def test_int_enum_against_int_values_agrees_with_python() -> None:
    seen: dict[str, set[bool]] = {}
    for level in (1, 3):
        for n in range(5):
            for xs in ([], [n], [3, n], [1]):
                assert_agree(Levels, None, {"level": level, "n": n, "xs": xs}, seen)
    assert all(v == {True, False} for v in seen.values()), seen
