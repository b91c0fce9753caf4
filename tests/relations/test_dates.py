"""Relations over ``datetime.date`` fields and timedeltas: compiled exactly, or refused clearly.

Differential (hypothesis): every construct, with leap days, month ends, year ends, the first
and last dates Python has (``OverflowError`` when a shift leaves them) and timedelta carry,
against the Python relation on the same record.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from factorspec_sdk import RelationDefinitionError, relation
from factorspec_sdk.graph import compile_spec
from tests.relations.helpers import refused
from tests.relations.test_differential import assert_agree


@dataclass
class Season:
    opens: date = date(2024, 2, 1)
    closes: date = date(2024, 3, 31)
    blackout: list[date] = field(default_factory=lambda: [date(2024, 2, 29), date(2024, 3, 1)])
    grace: timedelta = timedelta(days=2, hours=12)
    when: dt.datetime = dt.datetime(2024, 2, 10, 8, 0)


class Stay(BaseModel):
    start: date
    end: date
    nights: int = Field(ge=-3, le=40)
    late: date | None = None

    @relation
    def nights_match(self) -> bool:
        return (self.end - self.start).days == self.nights

    @relation
    def shifted(self) -> bool:
        return self.start + dt.timedelta(days=self.nights) == self.end

    @relation
    def shifted_weeks(self) -> bool:
        return self.end - timedelta(weeks=self.nights // 7) >= self.start

    @relation
    def ordered(self) -> bool:
        return self.start < self.end and self.end <= date(2024, 3, 31)

    @relation
    def in_season(self, season: Season) -> bool:
        return season.opens <= self.start and self.end <= season.closes

    @relation
    def not_blackout(self, season: Season) -> bool:
        return self.start not in season.blackout and self.end not in [season.closes, season.opens]

    @relation
    def weekdays(self) -> bool:
        return self.start.weekday() < 5 and self.end.isoweekday() != 7

    @relation
    def parts(self) -> bool:
        return self.start.year == 2024 and (self.start.month == 2 or self.end.day >= 29)

    @relation
    def computed_parts(self) -> bool:
        return (self.start + timedelta(days=1)).month == self.start.month

    @relation
    def with_grace(self, season: Season) -> bool:
        return self.end - self.start > season.grace  # 2.5 days: compared to the microsecond

    @relation
    def leap_day(self) -> bool:
        return (self.start.month == 2 and self.start.day == 29) or self.end.toordinal() % 2 == 0

    @relation
    def delta_ops(self) -> bool:
        d = self.end - self.start
        return abs(-d) * 2 >= timedelta(days=3) and (d + d).total_seconds() > 86400 and bool(d)

    @relation
    def optional_date(self) -> bool:
        return self.late is None or self.late > self.end

    @relation
    def never_a_datetime(self, season: Season) -> bool:
        return self.start != season.when

    @relation
    def extremes(self) -> bool:
        first = min(self.start, self.end)
        last = max([self.start, self.end, date(2024, 2, 15)])
        total = sum([self.end - self.start, timedelta(days=1)], timedelta())
        return last - first >= timedelta(days=self.nights % 5) and total != timedelta(days=3)

    @relation
    def chosen(self) -> bool:
        first = self.start if self.nights > 5 else self.end
        return first.day != 1


_DATES = st.one_of(
    st.dates(min_value=date(2023, 12, 25), max_value=date(2024, 4, 5)),
    st.sampled_from([date(2024, 2, 28), date(2024, 2, 29), date(2024, 3, 1), date(2024, 3, 31)]),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    start=_DATES,
    end=_DATES,
    nights=st.integers(-3, 40),
    late=st.one_of(st.none(), _DATES),
)
def test_compiled_date_relations_agree_with_python(
    start: date, end: date, nights: int, late: date | None
) -> None:
    data: dict[str, Any] = {"start": start, "end": end, "nights": nights, "late": late}
    assert_agree(Stay, Season(), data)


def test_every_date_relation_is_seen_both_true_and_false() -> None:
    """The hypothesis test above is not vacuous: each relation takes both truth values."""
    seen: dict[str, set[bool]] = {}
    day = date(2024, 2, 1)
    for k in range(60):
        for n in (0, 1, 29):
            start = day + timedelta(days=k)
            data = {"start": start, "end": start + timedelta(days=n), "nights": n, "late": None}
            assert_agree(Stay, Season(), data, seen)
            assert_agree(Stay, Season(), {**data, "nights": n + 1, "late": start}, seen)
            assert_agree(Stay, Season(), {**data, "start": data["end"], "end": start}, seen)
    one_sided = {name for name, truths in seen.items() if truths != {True, False}}
    assert one_sided == {"never_a_datetime"}  # a date never equals a datetime: always true


class Edge(BaseModel):
    """Shifts that leave Python's dates raise OverflowError: the relation is then false."""

    d: date
    n: int = Field(ge=-5, le=5)

    @relation
    def shift(self) -> bool:
        return self.d + timedelta(days=self.n) > self.d or self.n <= 0

    @relation
    def back(self) -> bool:
        return (self.d - timedelta(days=self.n)).year >= 1


@pytest.mark.parametrize("d", [date.min, date(1, 1, 3), date.max, date(9999, 12, 29)])
@pytest.mark.parametrize("n", [-5, -1, 0, 1, 5])
def test_overflow_at_the_ends_of_the_calendar(d: date, n: int) -> None:
    assert_agree(Edge, None, {"d": d, "n": n})


class LeapDay(BaseModel):
    d: date

    @relation
    def leap_day(self) -> bool:
        return self.d.month == 2 and self.d.day == 29


def test_year_month_day_are_variables_tied_to_the_date() -> None:
    spec = compile_spec(LeapDay)
    assert spec.variables["d"].kind == "date"
    assert spec.variables["year(d)"].kind == "datepart"
    assert "calendar of d" in {f.name for f in spec.factors}
    oracle = spec.new_oracle()
    feb29 = date(2024, 2, 29).toordinal()
    assert oracle.feasible_values((("d", feb29),), "day(d)") == [29]
    assert oracle.feasible_values((("d", feb29 + 1),), "day(d)") == []
    assert oracle.feasible((("year(d)", 2000),)) and not oracle.feasible((("year(d)", 1900),))
    assert oracle.feasible_values((("year(d)", 2024),), "d") == [feb29]


class Refused(BaseModel):
    d: date
    e: date
    n: int = Field(ge=0, le=5)


def _refused(body: str) -> RelationDefinitionError:
    return refused(Refused, body, "/tmp/factorspec_refused_dates.py")


@pytest.mark.parametrize(
    ("body", "construct"),
    [
        ("self.d + self.n > self.e", "date + int"),  # a TypeError: RelationRaisesError
        ("date(2024, self.n + 1, 1) == self.d", "date() of record values"),
        ("timedelta(days=self.d) < self.e - self.d", "timedelta() of record values"),
        ("self.d.isoformat() == '2024-01-01'", "call to self.d.isoformat()"),
        ("self.d.quarter == 1", "attribute .quarter of a date"),
        ("min(self.d, self.n) == self.d", "min() of mixed values"),
        ("sum([self.e - self.d]) == self.n", "sum() of mixed values"),
        ("sum([self.e, self.d], date(2024, 1, 1)) == self.d", "sum() of dates"),
        ("(self.e - self.d).hours == 1", "attribute .hours of a timedelta"),
    ],
)
def test_unsupported_date_constructs_are_refused_with_place(body: str, construct: str) -> None:
    err = _refused(body)
    assert err.construct == construct, str(err)
    assert err.relation.endswith("Bad.bad") and err.lineno == 7
    assert err.filename.endswith("factorspec_refused_dates.py")
