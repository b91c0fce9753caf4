"""Errors that say what went wrong and what to write instead (issue #39, items 5 and 7).

Each refusal's message is checked for its advice, and where the advice is a rewrite, the
rewrite is compiled: an error must never suggest what does not compile.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import RelationDefinitionError, RelationRaisesError, relation
from factorspec_sdk.errors import UnsatisfiableSpecError
from factorspec_sdk.graph import compile_spec
from tests.relations.helpers import refused


def _source(base: type[BaseModel], body: str, prelude: str = "") -> str:
    """A module that subclasses ``base`` with one relation ``return body`` on line 9."""
    return (
        "import datetime as dt\n"
        "from datetime import date, datetime, time, timedelta\n"
        "from factorspec_sdk import relation\n"
        f"from {base.__module__} import {base.__name__}\n"
        f"{prelude or 'pass'}\n"
        f"class Bad({base.__name__}):\n"
        "    @relation\n"
        "    def bad(self) -> bool:\n"
        f"        return {body}\n"
    )


def _build(base: type[BaseModel], body: str, path: str, prelude: str = "") -> type[BaseModel]:
    namespace: dict[str, Any] = {}
    src = _source(base, body, prelude)
    with open(path, "w") as f:
        f.write(src)
    exec(compile(src, path, "exec"), namespace)
    model: type[BaseModel] = namespace["Bad"]
    return model


def _error(
    base: type[BaseModel], body: str, path: str, prelude: str = ""
) -> RelationDefinitionError:
    with pytest.raises(RelationDefinitionError) as err:
        compile_spec(_build(base, body, path, prelude))
    return err.value


def _compiles(base: type[BaseModel], body: str, path: str) -> None:
    """The rewrite an error advises compiles."""
    compile_spec(_build(base, body, path))


# ------------------------------------------------------------------ item 7: times


class Slot(BaseModel):
    start: dt.time
    end: dt.time


def test_a_time_plus_a_timedelta_says_what_times_support() -> None:
    err = _error(Slot, "self.end == self.start + timedelta(minutes=30)", "/tmp/fs_msg_time.py")
    assert isinstance(err, RelationRaisesError)
    assert err.exception == (
        "TypeError: unsupported operand type(s) for +: 'datetime.time' and 'datetime.timedelta'"
    )
    assert err.lineno == 9
    message = str(err)
    assert "Python has no arithmetic on times" in message
    assert ".hour/.minute/.second/.microsecond" in message
    assert "self.start.hour * 60 + self.start.minute + 30" in message
    assert "days" not in message  # not the advice for dates
    rewrite = (
        "self.end.hour * 60 + self.end.minute == self.start.hour * 60 + self.start.minute + 30"
    )
    _compiles(Slot, rewrite, "/tmp/fs_msg_time_ok.py")


def test_the_difference_of_two_times_says_how_to_count_minutes() -> None:
    err = _error(Slot, "self.end - self.start <= timedelta(hours=1)", "/tmp/fs_msg_times.py")
    assert "(self.end.hour * 60 + self.end.minute) - (self.start.hour * 60" in str(err)


# ------------------------------------------------------------------ item 7: calls


class Pair(BaseModel):
    a: int = Field(ge=0, le=10)
    b: int = Field(ge=0, le=10)


def test_a_call_to_a_helper_says_inline_it_and_where_the_builtins_are_listed() -> None:
    prelude = "def double(x):\n    return x * 2"
    err = _error(Pair, "self.b == double(self.a)", "/tmp/fs_msg_helper.py", prelude)
    assert err.construct == "call to double()"
    message = str(err)
    assert "double() is a function of your own" in message
    assert "inline it" in message
    assert "all, any, sum, len, min, max" in message
    assert "Writing relations, Supported expressions" in message
    _compiles(Pair, "self.b == self.a * 2", "/tmp/fs_msg_helper_ok.py")


@pytest.mark.parametrize(
    ("body", "advice"),
    [
        ("sorted([self.a, self.b]) == [self.a, self.b]", "all(a <= b for a, b in zip(xs, xs[1:]))"),
        ("pow(self.a, 2) > self.b", "use ** with a constant exponent"),
        ("divmod(self.a, 3)[1] == 0", "use // and %"),
    ],
)
def test_a_call_to_another_builtin_says_what_to_use(body: str, advice: str) -> None:
    message = str(_error(Pair, body, "/tmp/fs_msg_builtin.py"))
    assert advice in message
    assert "Writing relations, Supported expressions" in message


class Meet(BaseModel):
    day: dt.date
    at: dt.datetime


def test_datetime_combine_says_what_to_compare_instead() -> None:
    body = "self.at == dt.datetime.combine(self.day, dt.time(9, 0))"
    message = str(_error(Meet, body, "/tmp/fs_msg_combine.py"))
    assert "methods other than" not in message  # the sentence that read backwards
    assert ".combine() is not a method relations call" in message
    rewrite = "self.at.date() == self.day and self.at.time() == dt.time(9, 0)"
    assert rewrite in message
    assert ".startswith/.endswith of strings" in message
    _compiles(Meet, rewrite, "/tmp/fs_msg_combine_ok.py")


# ------------------------------------------------------------------ item 7: affixes


class Codes(BaseModel):
    code: str = Field(max_length=12)
    other: str = Field(max_length=12)


@pytest.mark.parametrize(
    ("body", "drop", "keep"),
    [
        (
            'self.code.startswith("EU-") and self.code != self.other',
            "Drop the comparison and keep the startswith()/endswith() of code",
            'self.code.startswith("EU-")',
        ),
        (
            'self.code.startswith("EU-") and self.code == self.other',
            "drop the startswith()/endswith() and keep code == other",
            "self.code == self.other",
        ),
    ],
)
def test_an_affix_and_a_comparison_on_one_string_says_which_to_drop(
    body: str, drop: str, keep: str
) -> None:
    err = _error(Codes, body, "/tmp/fs_msg_affix.py")
    assert err.construct == "startswith/endswith of a string compared with another"
    message = str(err)
    assert drop[1:] in message
    assert "code is read with startswith()/endswith() and compared with other" in message
    assert "@model_validator" in message
    _compiles(Codes, keep, "/tmp/fs_msg_affix_ok.py")


def test_an_affix_read_after_the_comparison_names_both_choices() -> None:
    body = 'self.code != self.other and self.code.startswith("EU-")'
    message = str(_error(Codes, body, "/tmp/fs_msg_affix_late.py"))
    assert "Where they must differ (!=), drop the comparison" in message
    assert "where equal (==), drop the startswith()/endswith()" in message


# ------------------------------------------------------------------ item 5: always raises


class Item(BaseModel):
    n: int = Field(ge=0, le=3)


class Box(BaseModel):
    xs: list[Item] = Field(max_length=3)
    k: int = Field(ge=5, le=7)


def test_a_relation_that_raises_on_every_record_is_not_an_unsat_core() -> None:
    """Folded by the compiler (an index past the list's bound): said before any solving."""
    err = _error(Box, "self.xs[5].n > 0", "/tmp/fs_msg_index.py")
    assert isinstance(err, RelationRaisesError)
    assert err.construct == "relation that raises on every record"
    assert err.exception == "IndexError: list index out of range"
    assert err.lineno == 9


def test_a_relation_the_bounds_make_raise_on_every_record_is_not_an_unsat_core() -> None:
    """Not folded (the index is a field the bounds keep past the list): found from the core."""
    err = _error(Box, "self.xs[self.k].n > 0", "/tmp/fs_msg_bounds.py")
    assert isinstance(err, RelationRaisesError)
    assert err.exception == "IndexError: list index out of range"
    assert "clashing" not in str(err)


def test_a_relation_that_raises_on_some_records_only_keeps_its_unsat_core() -> None:
    """k may be 0..2 here: the relation can hold, and the clash is the relations'."""

    class Some(BaseModel):
        xs: list[Item] = Field(max_length=3)
        k: int = Field(ge=0, le=7)

        @relation
        def indexed(self) -> bool:
            return self.xs[self.k].n > 2

        @relation
        def small(self) -> bool:
            return all(x.n < 2 for x in self.xs)

    with pytest.raises(UnsatisfiableSpecError) as err:
        compile_spec(Some)
    assert not isinstance(err.value, RelationRaisesError)
    assert set(err.value.core) >= {"indexed", "small"}


class Line(BaseModel):
    qty: int = Field(ge=1, le=5)

    @relation
    def broken(self) -> bool:
        return self.qty // 0 > 1


class Order(BaseModel):
    lines: list[Line] = Field(min_length=1, max_length=2)


def test_a_nested_relation_that_always_raises_names_its_line() -> None:
    with pytest.raises(RelationRaisesError) as err:
        compile_spec(Order)
    assert err.value.relation == "Line.broken"
    assert err.value.exception == "ZeroDivisionError: integer division or modulo by zero"


# ------------------------------------------------------------------ item 7: the other refusals


class Rec(BaseModel):
    name: str = Field(max_length=8)
    items: list[Item] = Field(max_length=3)
    opt: list[int | None] = Field(max_length=3)
    k: int = Field(ge=0, le=3)


@pytest.mark.parametrize(
    ("body", "advice"),
    [
        ("self.name < 'b'", "compare strings with == or `in`"),
        ("all(x.n > 0 for x in self.items[self.k:])", "enumerate(xs) if i < self.k"),
        ("'x' in self.name", 'self.name.startswith("x")'),
        ("{self.k, 1} == {1}", "use a tuple: self.a in (self.b, self.c)"),
        ("self.name.upper() == 'A'", "make the field a Literal of its spellings"),
        ("sum(self.opt) > 1", "give the field a default instead of None"),
        ("self.name + 'x' == 'ax'", "compare whole strings"),
        ("self.items + self.items == []", "iterate each list"),
        ("self.name[0] == 'a'", "startswith() of a constant"),
        ("max(self.items, key=len) == 1", "take the max of the key itself"),
        ("str(self.k) == '1'", "compare the value itself"),
        ("Decimal(self.k) > 1", 'Decimal() takes constants: Decimal("0.01")'),
    ],
)
def test_every_refusal_says_what_to_write_instead(body: str, advice: str) -> None:
    prelude = "from decimal import Decimal"
    assert advice in str(_error(Rec, body, "/tmp/fs_msg_refusal.py", prelude))


class WithTotal(BaseModel):
    a: int = Field(ge=0, le=3)

    @property
    def double(self) -> int:
        return self.a * 2


def test_a_property_of_the_model_says_to_inline_it() -> None:
    message = str(refused(WithTotal, "self.double > 2", "/tmp/fs_msg_property.py"))
    assert "its fields: a" in message
    assert "write its expression in the relation in place of it" in message


def test_str_of_a_constant_compiles() -> None:
    _compiles(Pair, "str(3) == '3' and self.a > 0", "/tmp/fs_msg_str_ok.py")
