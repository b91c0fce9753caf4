"""Relations over naive ``datetime`` and ``time`` fields: compiled exactly, or refused clearly.

Differential (hypothesis): every construct, with midnights, leap days, month and year ends,
the last second Python has (``OverflowError`` when a shift leaves it), timedeltas with
seconds and microseconds (carry into days, negative ones normalized as Python does), and
constants with microseconds or a time zone, against the Python relation on the same record.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from typing import Any

import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import AwareDatetime, BaseModel, Field

from factorspec_sdk import RelationDefinitionError, relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.graph.z3raw import true_under
from factorspec_sdk.relations.compiler import tied_parts
from factorspec_sdk.relations.variables import date_part_of
from tests.relations.helpers import refused
from tests.relations.test_differential import assert_agree


@dataclass
class Office:
    opens: time = time(9, 0)
    closes: time = time(17, 30, 0, 500)  # microseconds: a whole second never equals it
    launch: datetime = datetime(2024, 2, 29, 12, 0, 0, 250_000)
    aware: datetime = datetime(2024, 2, 29, 12, 0, tzinfo=dt.UTC)
    holidays: list[datetime] = field(
        default_factory=lambda: [datetime(2024, 3, 1, 0, 0), datetime(2024, 2, 29, 23, 59, 59)]
    )
    slack: timedelta = timedelta(minutes=90, microseconds=1)


class Shift(BaseModel):
    start: datetime
    end: datetime
    lunch: time
    minutes: int = Field(ge=-30, le=3000)
    sync: datetime | None = None

    @relation
    def ordered(self) -> bool:
        return self.start < self.end and self.start >= datetime(2024, 2, 28)

    @relation
    def length(self) -> bool:
        return self.end - self.start == timedelta(minutes=self.minutes)

    @relation
    def shifted(self) -> bool:
        return self.start + timedelta(hours=self.minutes // 60, seconds=30) <= self.end

    @relation
    def delta_parts(self) -> bool:
        d = self.start - self.end  # negative: Python normalizes days to floor, seconds >= 0
        return d.days == -1 or d.seconds > 3600 or d.microseconds != 0

    @relation
    def total(self) -> bool:
        return (self.end - self.start).total_seconds() <= 8 * 3600

    @relation
    def clock_parts(self) -> bool:
        return self.start.hour >= 8 and self.end.minute % 15 == 0 and self.start.second == 0

    @relation
    def calendar_parts(self) -> bool:
        return self.start.year == 2024 and (self.start.month == 2 or self.end.day == 1)

    @relation
    def same_day(self) -> bool:
        return self.start.date() == self.end.date() or self.end.date().weekday() == 4

    @relation
    def in_hours(self, office: Office) -> bool:
        return office.opens <= self.start.time() and self.end.time() < office.closes

    @relation
    def lunch_break(self, office: Office) -> bool:
        return self.lunch != office.closes and time(11, 30) <= self.lunch <= time(14)

    @relation
    def lunch_parts(self) -> bool:
        return self.lunch.minute in (0, 30) and self.lunch.microsecond == 0

    @relation
    def after_launch(self, office: Office) -> bool:
        return self.start > office.launch or self.end == office.launch

    @relation
    def never_aware(self, office: Office) -> bool:
        return self.start != office.aware

    @relation
    def not_a_holiday(self, office: Office) -> bool:
        return self.end not in office.holidays

    @relation
    def slack(self, office: Office) -> bool:
        return self.end - self.start > office.slack

    @relation
    def milliseconds(self) -> bool:
        d = timedelta(milliseconds=self.minutes)
        return d.microseconds == 0 or (self.start + d).microsecond > 400_000

    @relation
    def extremes(self) -> bool:
        first = min(self.start, self.end)
        last = max([self.start, self.end, datetime(2024, 3, 1, 6)])
        total = sum([self.end - self.start, timedelta(seconds=self.minutes)], timedelta())
        return last - first >= timedelta(hours=2) and total != timedelta(hours=1)

    @relation
    def earliest_time(self) -> bool:
        return min(self.lunch, self.start.time()) >= time(8)

    @relation
    def optional_sync(self) -> bool:
        return self.sync is None or self.start <= self.sync <= self.end

    @relation
    def chosen(self) -> bool:
        at = self.start if self.minutes > 60 else self.end
        return at.hour != 0

    @relation
    def delta_ops(self) -> bool:
        d = self.end - self.start
        return abs(-d) * 2 >= timedelta(hours=3) and not (d - d)


def _moments(lo: datetime, hi: datetime) -> st.SearchStrategy[datetime]:
    return st.datetimes(min_value=lo, max_value=hi).map(lambda d: d.replace(microsecond=0))


_EDGES = [
    datetime(2024, 2, 28, 23, 59, 59),
    datetime(2024, 2, 29, 0, 0),
    datetime(2024, 2, 29, 12, 0),
    datetime(2024, 2, 29, 23, 59, 59),
    datetime(2024, 3, 1, 0, 0),
    datetime(2024, 3, 1, 8, 30),
]
_DATETIMES = st.one_of(
    _moments(datetime(2024, 2, 27), datetime(2024, 3, 2)),
    st.sampled_from(_EDGES),
    st.builds(
        lambda base, minutes: base + timedelta(minutes=minutes),
        st.sampled_from(_EDGES),
        st.integers(-600, 600),
    ),
)
_TIMES = st.one_of(
    st.times().map(lambda t: t.replace(microsecond=0)),
    st.sampled_from([time(0), time(11, 30), time(14), time(17, 30), time(23, 59, 59)]),
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    start=_DATETIMES,
    end=_DATETIMES,
    lunch=_TIMES,
    minutes=st.integers(-30, 3000),
    sync=st.one_of(st.none(), _DATETIMES),
)
def test_compiled_datetime_relations_agree_with_python(
    start: datetime, end: datetime, lunch: time, minutes: int, sync: datetime | None
) -> None:
    data: dict[str, Any] = {
        "start": start,
        "end": end,
        "lunch": lunch,
        "minutes": minutes,
        "sync": sync,
    }
    assert_agree(Shift, Office(), data)


def test_every_datetime_relation_is_seen_both_true_and_false() -> None:
    """The hypothesis test above is not vacuous: each relation takes both truth values."""
    seen: dict[str, set[bool]] = {}
    lunches = [time(12), time(11, 45, 10), time(15)]
    for k, base in enumerate(_EDGES):
        for minutes in (0, 45, 90, 600, 1441, -30):
            start = base + timedelta(minutes=7 * k)
            end = start + timedelta(minutes=minutes)
            data: dict[str, Any] = {
                "start": start,
                "end": end,
                "lunch": lunches[k % 3],
                "minutes": minutes,
                "sync": None,
            }
            assert_agree(Shift, Office(), data, seen)
            assert_agree(Shift, Office(), {**data, "minutes": minutes + 7, "sync": end}, seen)
            assert_agree(Shift, Office(), {**data, "start": end, "end": start}, seen)
    assert_agree(Shift, Office(), {**data, "end": datetime(2024, 3, 1)}, seen)
    assert_agree(Shift, Office(), {**data, "start": datetime(2024, 2, 29, 12, 0, 1)}, seen)
    one_sided = {name for name, truths in seen.items() if truths != {True, False}}
    assert one_sided == {"never_aware"}  # a naive datetime never equals an aware one


class Edge(BaseModel):
    """Shifts that leave Python's datetimes raise OverflowError: the relation is then false."""

    at: datetime
    n: int = Field(ge=-5, le=5)

    @relation
    def shift(self) -> bool:
        return self.at + timedelta(seconds=self.n) > self.at or self.n <= 0

    @relation
    def back(self) -> bool:
        return (self.at - timedelta(hours=self.n)).year >= 1


@pytest.mark.parametrize(
    "at",
    [datetime.min, datetime(1, 1, 1, 0, 0, 3), datetime.max.replace(microsecond=0)],
)
@pytest.mark.parametrize("n", [-5, -1, 0, 1, 5])
def test_overflow_at_the_ends_of_the_calendar(at: datetime, n: int) -> None:
    assert_agree(Edge, None, {"at": at, "n": n})


class Refused(BaseModel):
    a: datetime
    b: datetime
    t: time
    n: int = Field(ge=0, le=5)


def _refused(body: str) -> RelationDefinitionError:
    return refused(Refused, body, "/tmp/factorspec_refused_datetimes.py")


@pytest.mark.parametrize(
    ("body", "construct"),
    [
        ("self.t - time(9) > timedelta(0)", "time - time"),
        ("self.t + timedelta(hours=1) > time(9)", "time + timedelta"),
        ("self.a - self.a.date() > timedelta(0)", "datetime - date"),
        ("self.a + self.n > self.b", "datetime + int"),
        ("datetime(2024, 1, self.n + 1) == self.a", "datetime() of record values"),
        ("time(self.n) == self.t", "time() of record values"),
        ("self.a.timestamp() > 0", "call to self.a.timestamp()"),
        ("self.a.tzinfo is None", "attribute .tzinfo of a datetime"),
        ("self.t.isoformat() == '09:00:00'", "call to self.t.isoformat()"),
        ("self.t.tzinfo is None", "attribute .tzinfo of a time"),
        (
            "timedelta(microseconds=self.n).total_seconds() > 0",
            "total_seconds() of a timedelta with microseconds",
        ),
        ("timedelta(hours=self.a) > timedelta(0)", "timedelta() of record values"),
        ("min(self.a, self.t) == self.a", "min() of mixed values"),
        ("sum([self.a, self.b], timedelta()) == self.a", "sum() of mixed values"),
        ("sum([self.a, self.b], datetime(2024, 1, 1)) == self.a", "sum() of dates"),
    ],
)
def test_unsupported_datetime_constructs_are_refused_with_place(body: str, construct: str) -> None:
    err = _refused(body)
    assert err.construct == construct, str(err)
    assert err.relation.endswith("Bad.bad") and err.lineno == 7
    assert err.filename.endswith("factorspec_refused_datetimes.py")


# ------------------------------------------------------------------ aware datetimes

_PARIS = dt.timezone(dt.timedelta(hours=1))
_DELHI = dt.timezone(dt.timedelta(hours=5, minutes=30))


@dataclass
class Airport:
    gate_opens: datetime = datetime(2024, 2, 29, 7, 0, tzinfo=_PARIS)  # 06:00 UTC
    curfew: datetime = datetime(2024, 3, 1, 4, 30, tzinfo=_DELHI)  # 23:00 UTC the day before
    naive: datetime = datetime(2024, 2, 29, 12, 0)
    day: dt.date = dt.date(2024, 2, 29)


class Flight(BaseModel):
    dep: AwareDatetime
    arr: AwareDatetime
    minutes: int = Field(ge=0, le=900)

    @relation
    def duration(self) -> bool:
        return self.arr - self.dep == timedelta(minutes=self.minutes)

    @relation
    def after_the_gate_opens(self, port: Airport) -> bool:
        return self.dep >= port.gate_opens + timedelta(minutes=30)

    @relation
    def before_curfew(self, port: Airport) -> bool:
        return max(self.arr, port.gate_opens) < port.curfew

    @relation
    def utc_wall_clock(self, port: Airport) -> bool:
        return self.dep.hour >= 6 and self.dep.date() == port.day and self.arr.minute % 5 == 0

    @relation
    def never_naive(self, port: Airport) -> bool:
        return self.dep != port.naive and self.arr not in [port.naive, port.curfew]

    @relation
    def chosen(self, port: Airport) -> bool:
        first = self.dep if self.minutes > 60 else port.curfew
        return first < port.curfew or self.minutes == 0


_UTC_MOMENTS = st.builds(
    lambda base, minutes: (base + timedelta(minutes=minutes)).replace(tzinfo=dt.UTC),
    st.sampled_from([datetime(2024, 2, 29, 5, 30), datetime(2024, 2, 29, 22, 0)]),
    st.integers(-120, 600),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(dep=_UTC_MOMENTS, arr=_UTC_MOMENTS, minutes=st.integers(0, 900))
def test_compiled_aware_relations_agree_with_python(
    dep: datetime, arr: datetime, minutes: int
) -> None:
    assert_agree(Flight, Airport(), {"dep": dep, "arr": arr, "minutes": minutes})


def test_every_aware_relation_is_seen_both_true_and_false() -> None:
    seen: dict[str, set[bool]] = {}
    for h in (5, 6, 7, 21, 22, 23):
        for minutes in (0, 45, 90, 180):
            dep = datetime(2024, 2, 29, h, 35, tzinfo=dt.UTC)
            arr = dep + timedelta(minutes=minutes)
            data = {"dep": dep, "arr": arr, "minutes": minutes}
            assert_agree(Flight, Airport(), data, seen)
            assert_agree(Flight, Airport(), {**data, "minutes": minutes + 1}, seen)
    at_curfew = datetime(2024, 2, 29, 23, 0, tzinfo=dt.UTC)  # equals the +05:30 curfew
    assert_agree(Flight, Airport(), {"dep": at_curfew, "arr": at_curfew, "minutes": 0}, seen)
    one_sided = {name for name, truths in seen.items() if truths != {True, False}}
    assert one_sided == set()


class Zoned(BaseModel):
    dep: AwareDatetime


def test_the_wall_clock_of_a_value_in_another_zone_is_refused() -> None:
    err = refused(
        Zoned,
        "max(self.dep, datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=2)))).hour > 6",
        "/tmp/factorspec_refused_zoned.py",
    )
    assert err.construct == "wall clock of a datetime in another time zone (.hour)"


# ------------------------------------------------------------------ timedelta fields


class Task(BaseModel):
    start: datetime
    took: timedelta
    budget: timedelta = Field(ge=timedelta(0), le=timedelta(hours=10))
    pause: timedelta | None = None

    @relation
    def within_budget(self) -> bool:
        return self.took <= self.budget

    @relation
    def ends_before_six(self) -> bool:
        return (self.start + self.took).hour < 18

    @relation
    def whole_minutes(self) -> bool:
        return self.took.total_seconds() % 60 == 0 or self.took.days < 0

    @relation
    def pause_is_short(self) -> bool:
        return self.pause is None or self.pause * 2 < self.took

    @relation
    def parts(self) -> bool:
        return self.took.seconds > 100 and abs(self.took) > timedelta(minutes=5)

    @relation
    def usual(self) -> bool:
        return self.took in [timedelta(hours=1), timedelta(minutes=90)] or self.took > self.budget

    @relation
    def total(self) -> bool:
        return sum([self.took, self.budget], timedelta()) < timedelta(hours=12)


_DURATIONS = st.one_of(
    st.integers(-2 * 86_400, 12 * 3600).map(lambda s: timedelta(seconds=s)),
    st.sampled_from(
        [timedelta(0), timedelta(hours=1), timedelta(minutes=90), timedelta(seconds=-1)]
    ),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    start=_DATETIMES,
    took=_DURATIONS,
    budget=st.integers(0, 10 * 3600).map(lambda s: timedelta(seconds=s)),
    pause=st.one_of(st.none(), _DURATIONS),
)
def test_compiled_timedelta_field_relations_agree_with_python(
    start: datetime, took: timedelta, budget: timedelta, pause: timedelta | None
) -> None:
    data = {"start": start, "took": took, "budget": budget, "pause": pause}
    assert_agree(Task, None, data)


def test_every_timedelta_field_relation_is_seen_both_true_and_false() -> None:
    seen: dict[str, set[bool]] = {}
    for took_s in (-90, 0, 60, 3600, 5400, 5401, 40_000):
        for budget_s in (0, 3600, 36_000):
            for pause in (None, timedelta(minutes=1), timedelta(hours=5)):
                data = {
                    "start": datetime(2024, 2, 29, 9),
                    "took": timedelta(seconds=took_s),
                    "budget": timedelta(seconds=budget_s),
                    "pause": pause,
                }
                assert_agree(Task, None, data, seen)
    one_sided = {name for name, truths in seen.items() if truths != {True, False}}
    assert one_sided == set()


class Parts(BaseModel):
    t: datetime
    c: time
    d: dt.date

    @relation
    def reads_every_part(self) -> bool:
        return (
            self.t.year + self.t.month + self.t.day + self.t.hour + self.t.minute >= 0
            and self.t.second + self.c.hour + self.c.minute + self.c.second >= 0
            and self.d.year + self.d.month + self.d.day >= 0
        )


def test_tied_parts_are_the_values_the_ties_give_the_parts() -> None:
    """`tied_parts` mirrors `date_links`' ties (the oracle moves a model's datetime with
    them): at random values of the three leaves, the spec's constraints (the ties, the
    bounds, a relation true for any parts) hold with the parts it gives, and fail with an
    hour or a day one off."""
    spec = compile_spec(Parts)
    leaves = {"t": spec.record("t"), "c": spec.record("c"), "d": spec.record("d")}
    parts = {
        leaf: {str(date_part_of(n)): n for n in spec.variables if n.endswith(f"({leaf})")}
        for leaf in leaves
    }
    assert set(parts["t"]) == {"date", "clock", "year", "month", "day", "hour", "minute", "second"}
    assert set(parts["c"]) == {"hour", "minute", "second"} and set(parts["d"]) == {
        "year",
        "month",
        "day",
    }
    (comp,) = {spec.component_of(n) for n in spec.variables}
    constraints = spec.component(comp).constraints
    rnd = random.Random(3)
    for _ in range(200):
        values = {
            leaf: rnd.randint(int(rec.ge or 0), int(rec.le or 0)) for leaf, rec in leaves.items()
        }
        given: list[tuple[z3.ExprRef, int]] = []
        for leaf, value in values.items():
            given.append((leaves[leaf].term, value))
            tied = tied_parts(parts[leaf].keys(), value)
            assert tied is not None
            given += [(spec.record(parts[leaf][p]).term, x) for p, x in tied.items()]
        with spec.context_lock:
            assert true_under(constraints, given)
            for off in ("hour(c)", "day(t)"):
                wrong = [(term, x + 1 if str(term) == off else x) for term, x in given]
                assert not true_under(constraints, wrong)
    assert tied_parts({"year", "month", "day"}, 0) is None  # no calendar date
