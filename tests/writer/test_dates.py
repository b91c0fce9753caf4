"""The writer writes dates exactly: real calendar dates only, and every one a relation allows.

Brute force over small date domains: the characters offered after each prefix are exactly
those that some valid record continues with.
"""

from __future__ import annotations

import datetime as dt
import random
from datetime import date, timedelta

import numpy as np
import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import RecordInvalidError, check_record, record_facts, spec_from_ir, to_ir
from factorspec_sdk.relations.temporal import DATE_MAX, DATE_MIN, temporal_text, temporal_value
from factorspec_sdk.relations.temporal import prefix_range as temporal_prefix_range
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import FreeString, Option, Writer
from factorspec_sdk.writer.dates import next_date_chars
from tests.helpers import next_char, random_record, tiny_tokenizer, walk_to

TOK = tiny_tokenizer()


def date_text(n: int) -> str:
    return temporal_text("date", n)


def date_ordinal(text: str) -> int | None:
    return temporal_value("date", text)


def prefix_range(prefix: str) -> tuple[int, int] | None:
    return temporal_prefix_range("date", prefix)


# ------------------------------------------------------------------ prefixes, by brute force


def _brute(prefix: str, days: range) -> list[int]:
    return [n for n in days if date_text(n).startswith(prefix)]


@pytest.mark.parametrize(
    ("lo", "hi"),
    [
        (date(1999, 12, 1), date(2001, 3, 31)),  # century leap year 2000, month and year ends
        (date(1899, 12, 1), date(1900, 3, 31)),  # 1900 is not a leap year
        (date.min, date(1, 3, 1)),
        (date(9999, 11, 1), date.max),
    ],
)
def test_prefix_ranges_are_exactly_the_dates_with_the_prefix(lo: date, hi: date) -> None:
    days = range(lo.toordinal(), hi.toordinal() + 1)
    prefixes = {date_text(n)[:k] for n in days for k in range(11)}
    for p in sorted(prefixes):
        r = prefix_range(p)
        assert r is not None, p
        got = [n for n in range(max(r[0], days[0]), min(r[1], days[-1]) + 1)]
        assert got == _brute(p, days), p


@pytest.mark.parametrize(
    "prefix", ["2023-02-29", "2023-02-3", "2024-13", "2024-00", "0000", "2024-1-", "2024/", "x"]
)
def test_prefixes_of_no_date_have_no_range(prefix: str) -> None:
    assert prefix_range(prefix) is None
    assert date_ordinal(prefix) is None


def test_next_chars_respect_bounds_and_the_calendar() -> None:
    lo, hi = date(2024, 2, 27).toordinal(), date(2024, 3, 2).toordinal()
    assert set(next_date_chars("date", "2024-0", lo, hi)) == {"2", "3"}
    assert set(next_date_chars("date", "2024-02-", lo, hi)) == {"2"}
    assert set(next_date_chars("date", "2024-02-2", lo, hi)) == {"7", "8", "9"}
    assert set(next_date_chars("date", "2023-02-2", None, None)) == set("0123456789") - {"9"}
    assert set(next_date_chars("date", "2024", None, None)) == {"-"}
    assert next_date_chars("date", "2024-02-29", None, None) == {}
    assert date_ordinal("0001-01-01") == DATE_MIN and date_ordinal("9999-12-31") == DATE_MAX


# ------------------------------------------------------------------ the writer, exactly


class Meeting(BaseModel):
    day: date = Field(ge=date(2024, 1, 1), le=date(2025, 12, 31))
    follow_up: date = Field(ge=date(2024, 1, 1), le=date(2025, 12, 31))
    weeks: int = Field(ge=1, le=3)

    @relation
    def on_a_monday_not_in_august(self) -> bool:
        return self.day.weekday() == 0 and self.day.month != 8

    @relation
    def follow_up_in_weeks(self) -> bool:
        return self.follow_up == self.day + dt.timedelta(weeks=self.weeks)

    @relation
    def same_year(self) -> bool:
        return self.follow_up.year == self.day.year


def _valid(day: date, follow_up: date, weeks: int) -> bool:
    return (
        day.weekday() == 0
        and day.month != 8
        and follow_up == day + timedelta(weeks=weeks)
        and follow_up.year == day.year
    )


def test_date_characters_are_exactly_those_some_valid_record_continues_with() -> None:
    writer = Writer(compile_spec(Meeting))
    lo, hi = date(2024, 1, 1).toordinal(), date(2025, 12, 31).toordinal()
    days = [date.fromordinal(n) for n in range(lo, hi + 1)]
    valid = [d for d in days if any(_valid(d, d + timedelta(weeks=w), w) for w in (1, 2, 3))]
    assert len(valid) > 64  # so the day is written character by character, not as values
    for k in range(11):
        for p in sorted({d.isoformat()[:k] for d in valid}):
            want = {(d.isoformat() + '"')[k] for d in valid if d.isoformat().startswith(p)}
            assert next_char(writer, '{"day": "' + p) == want, p


def test_a_date_the_relations_determine_is_forced_text() -> None:
    """Monday 2024-12-23: only one week keeps the follow-up in 2024, so the rest is certain."""
    writer = Writer(compile_spec(Meeting))
    state, rest = walk_to(writer, '{"day": "2024-12-2')
    assert rest == ""
    choice = writer.choices(state)
    assert isinstance(choice, list)
    (option,) = [o for o in choice if o.text.startswith("3")]
    forced, at = writer.forced(option.state)
    assert option.text + forced == '3", "follow_up": "2024-12-30", "weeks": 1}'
    assert at.done


def test_random_walks_write_only_valid_records() -> None:
    class Trip(BaseModel):
        name: str = Field(max_length=6)
        leave: date
        back: date | None = None
        nights: int = Field(ge=0, le=40)

        @relation
        def nights_match(self) -> bool:
            return self.back is None or (self.back - self.leave).days == self.nights

        @relation
        def leave_late_2026(self) -> bool:
            return self.leave >= date(2026, 11, 20) and self.leave.month in (11, 12)

    planner = Planner(Writer(compile_spec(Trip)), TOK)
    rng = np.random.default_rng(0)
    seen_null = seen_back = False
    for _ in range(12):
        trip = Trip.model_validate_json(random_record(planner, TOK, rng, close=0.5))
        assert trip.leave >= date(2026, 11, 20) and trip.leave.month in (11, 12)
        if trip.back is None:
            seen_null = True
        else:
            seen_back = True
            assert (trip.back - trip.leave).days == trip.nights
    assert seen_null and seen_back


def test_unread_dates_are_written_without_the_oracle() -> None:
    class Note(BaseModel):
        when: date
        n: int = Field(ge=0, le=3)

    writer = Writer(compile_spec(Note))
    rng = random.Random(1)
    for _ in range(20):
        state, text = writer.start(), ""
        while not state.done:
            forced, state = writer.forced(state)
            text += forced
            if state.done:
                break
            choice = writer.choices(state)
            assert not isinstance(choice, FreeString)
            assert isinstance(choice, list)
            option: Option = rng.choice(choice)
            text += option.text
            state = option.state
        Note.model_validate_json(text)
    assert writer.oracle.stats.queries == 0


# ------------------------------------------------------------------ the oracle and the IR


def test_feasible_ranges_match_brute_force() -> None:
    spec = compile_spec(Meeting)
    oracle = spec.new_oracle()
    lo = date(2024, 1, 1).toordinal()
    ranges = [(lo + 30 * k, lo + 30 * k + 29) for k in range(24)]
    mondays = {
        d.toordinal()
        for n in range(lo, date(2025, 12, 31).toordinal() + 1)
        if (d := date.fromordinal(n)).weekday() == 0
        and d.month != 8
        and any(_valid(d, d + timedelta(weeks=w), w) for w in (1, 2, 3))
    }
    want = {i for i, (a, b) in enumerate(ranges) if any(a <= n <= b for n in mondays)}
    assert oracle.feasible_ranges((), "day", ranges) == want
    fixed = (("weeks", 3),)
    want3 = {
        i
        for i, (a, b) in enumerate(ranges)
        if any(
            a <= n <= b and _valid(date.fromordinal(n), date.fromordinal(n + 21), 3)
            for n in mondays
        )
    }
    assert oracle.feasible_ranges(fixed, "day", ranges) == want3


def test_the_relation_ir_round_trips_dates() -> None:
    spec = compile_spec(Meeting)
    ir = to_ir(Meeting)
    kinds = {v["name"]: v["kind"] for v in ir["variables"]}
    assert kinds["day"] == "int" and kinds["month(day)"] == "int"
    assert not any(f["name"].startswith("calendar of") for f in ir["factors"])  # derived
    served = spec_from_ir(ir)
    assert served.variables["day"].kind == "date"
    assert served.variables["year(day)"].kind == "datepart"
    assert {f.name for f in served.factors} == {f.name for f in spec.factors}
    day = date(2024, 12, 23).toordinal()
    for s in (spec, served):
        assert s.new_oracle().feasible_values((("day", day),), "weeks") == [1]
        assert s.new_oracle().feasible_values((("day", day),), "follow_up") == [day + 7]
    good = '{"day": "2024-12-23", "follow_up": "2024-12-30", "weeks": 1}'
    bad = '{"day": "2024-12-23", "follow_up": "2025-01-06", "weeks": 2}'  # not the same year
    facts = record_facts(served, {"day": "2024-12-23", "follow_up": "2024-12-30", "weeks": 1})
    assert ("year(follow_up)", 2024) in facts and ("day", day) in facts
    check_record(served, good)
    with pytest.raises(RecordInvalidError, match="relations"):
        check_record(served, bad)
    with pytest.raises(RecordInvalidError):
        check_record(served, good.replace("2024-12-30", "2024-12-32"))  # no such day


def test_a_server_refuses_date_parts_of_a_non_date() -> None:
    from factorspec_sdk.ir import IRError

    ir = to_ir(Meeting)
    ir["variables"].append({"name": "year(weeks)", "path": ["weeks"], "kind": "int"})
    with pytest.raises(IRError, match="not a date"):
        spec_from_ir(ir)
