"""The writer writes naive datetimes and times exactly: real ones only, every one allowed.

Brute force over small domains: prefix ranges are exactly the values with the prefix, and
the characters offered after each prefix are exactly those some valid record continues with.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta, timezone
from typing import Annotated

import numpy as np
import pytest
from pydantic import AwareDatetime, BaseModel, Field, TypeAdapter, ValidationError

from factorspec_sdk import relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import RecordInvalidError, check_record, record_facts, spec_from_ir, to_ir
from factorspec_sdk.relations.pydantic_layout import build_layout
from factorspec_sdk.relations.temporal import (
    DURATION_MAX,
    DURATION_MIN,
    Temporal,
    duration_text,
    duration_value,
    from_python,
    prefix_range,
    temporal_text,
    temporal_value,
)
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import Writer
from factorspec_sdk.writer.dates import next_date_chars
from tests.helpers import next_char, random_record, tiny_tokenizer, walk_to

TOK = tiny_tokenizer()


def _value(at: datetime | time) -> int:
    got = from_python("datetime" if isinstance(at, datetime) else "time", at)
    assert got is not None and got[1]
    return got[0]


def _check_prefixes(temporal: Temporal, lo: int, hi: int) -> None:
    """Every prefix of the texts of ``lo..hi``: its range, clipped, is exactly its values."""
    length = len(temporal_text(temporal, lo))
    spans: dict[str, list[int]] = {}
    for n in range(lo, hi + 1):
        text = temporal_text(temporal, n)
        assert temporal_value(temporal, text) == n
        for k in range(length + 1):
            span = spans.setdefault(text[:k], [n, n, 0])
            span[1], span[2] = n, span[2] + 1
    for p, (first, last, count) in spans.items():
        r = prefix_range(temporal, p)
        assert r is not None, p
        assert (max(r[0], lo), min(r[1], hi)) == (first, last), p
        assert last - first + 1 == count, p  # contiguous


def test_time_prefix_ranges_are_exactly_the_times_with_the_prefix() -> None:
    _check_prefixes("time", 0, 86_399)


@pytest.mark.parametrize(
    ("lo", "hi"),
    [
        (datetime(2024, 2, 28, 22), datetime(2024, 3, 1, 2)),  # a leap day and its ends
        (datetime(1999, 12, 31, 20), datetime(2000, 1, 1, 1)),  # a year end
        (datetime.min, datetime(1, 1, 1, 3)),
        (datetime(9999, 12, 31, 21), datetime.max.replace(microsecond=0)),
    ],
)
def test_datetime_prefix_ranges_are_exactly_the_datetimes_with_the_prefix(
    lo: datetime, hi: datetime
) -> None:
    _check_prefixes("datetime", _value(lo), _value(hi))


@pytest.mark.parametrize(
    ("temporal", "text"),
    [
        ("time", "24:00:00"),
        ("time", "12:60:00"),
        ("time", "12:00:60"),
        ("time", "12-00-00"),
        ("time", "1:00:00"),
        ("datetime", "2024-02-29 10:00:00"),
        ("datetime", "2023-02-29T10:00:00"),
        ("datetime", "2024-02-29T10:00:00Z"),
        ("datetime", "2024-02-29T10:00:00.5"),
        ("datetime", "2024-02-29T10:00"),
    ],
)
def test_texts_of_no_value_have_none(temporal: Temporal, text: str) -> None:
    assert temporal_value(temporal, text) is None


def test_next_chars_respect_bounds_and_the_clock() -> None:
    assert set(next_date_chars("time", "2", None, None)) == {"0", "1", "2", "3"}
    assert set(next_date_chars("time", "23:5", None, None)) == set("0123456789")
    assert set(next_date_chars("time", "23:59:", None, None)) == set("012345")
    lo, hi = _value(time(9, 30)), _value(time(10, 15))
    assert set(next_date_chars("time", "", lo, hi)) == {"0", "1"}
    assert set(next_date_chars("time", "09:", lo, hi)) == {"3", "4", "5"}
    assert set(next_date_chars("datetime", "2024-02-29", None, None)) == {"T"}
    assert next_date_chars("datetime", "2024-02-29T23:59:59", None, None) == {}


def test_bounds_with_microseconds_are_kept_exactly() -> None:
    class Window(BaseModel):
        at: datetime = Field(gt=datetime(2024, 1, 1, 9), lt=datetime(2024, 1, 1, 9, 0, 5, 1))
        clock: time = Field(ge=time(8, 0, 0, 1), le=time(8, 0, 3))

        @relation
        def read(self) -> bool:
            return self.at < datetime(2025, 1, 1) and self.clock > time(7)

    fields = {f.name: f.node for f in build_layout(Window).fields}
    at, clock = fields["at"], fields["clock"]
    assert (at.ge, at.le) == (
        _value(datetime(2024, 1, 1, 9, 0, 1)),
        _value(datetime(2024, 1, 1, 9, 0, 5)),
    )
    assert (clock.ge, clock.le) == (_value(time(8, 0, 1)), _value(time(8, 0, 3)))


def test_unread_datetimes_stay_grammar_values_and_aware_bounds_make_aware_leaves() -> None:
    class Log(BaseModel):
        at: datetime
        clock: time
        aware: datetime = Field(gt=datetime(2024, 1, 1, tzinfo=None).astimezone())
        n: int = Field(ge=0, le=3)

        @relation
        def reads_aware_only(self) -> bool:
            return self.n >= 0 and self.aware is not None

    kinds = {f.name: type(f.node).__name__ for f in build_layout(Log).fields}
    assert kinds == {
        "at": "GrammarLayout",  # no relation reads it: any ISO text the schema allows
        "clock": "GrammarLayout",
        "aware": "LeafLayout",  # an aware bound: an aware leaf, written in UTC
        "n": "LeafLayout",
    }


# ------------------------------------------------------------------ the writer, exactly


class Meeting(BaseModel):
    at: datetime = Field(ge=datetime(2024, 2, 20), le=datetime(2024, 3, 5, 23, 59, 59))
    minutes: int = Field(ge=15, le=120)
    ends: datetime
    alarm: time

    @relation
    def on_the_hour_or_half(self) -> bool:
        return self.at.minute in (0, 30) and self.at.second == 0 and 9 <= self.at.hour < 12

    @relation
    def on_weekdays(self) -> bool:
        return self.at.weekday() < 5

    @relation
    def ends_after(self) -> bool:
        return self.ends == self.at + timedelta(minutes=self.minutes)

    @relation
    def alarm_before(self) -> bool:
        return self.alarm <= self.at.time()


def _valid_starts() -> list[datetime]:
    out = []
    day = datetime(2024, 2, 20)
    while day <= datetime(2024, 3, 5):
        if day.weekday() < 5:
            out += [day.replace(hour=h, minute=m) for h in (9, 10, 11) for m in (0, 30)]
        day += timedelta(days=1)
    return out


def test_datetime_characters_are_exactly_those_some_valid_record_continues_with() -> None:
    writer = Writer(compile_spec(Meeting))
    valid = [d.isoformat() for d in _valid_starts()]
    assert len(valid) > 64  # so the start is written character by character
    for k in range(20):
        for p in sorted({v[:k] for v in valid}):
            want = {(v + '"')[k] for v in valid if v.startswith(p)}
            assert next_char(writer, '{"at": "' + p) == want, p


def test_a_datetime_the_relations_determine_is_forced_text() -> None:
    writer = Writer(compile_spec(Meeting))
    state, rest = walk_to(writer, '{"at": "2024-02-29T10:30:00", "minutes": 45')
    assert rest == ""
    choice = writer.choices(state)
    assert isinstance(choice, list)
    (option,) = choice  # 45 ends the minutes (450 is out of bounds): one option
    forced, _ = writer.forced(option.state)
    assert option.text + forced == ', "ends": "2024-02-29T11:15:00", "alarm": "'  # certain


def test_random_walks_write_only_valid_records() -> None:
    class Shift(BaseModel):
        start: datetime = Field(ge=datetime(2026, 12, 1), le=datetime(2026, 12, 31, 23, 59))
        end: datetime
        opens: time
        minutes: int = Field(ge=0, le=600)
        sync: datetime | None = None

        @relation
        def ordered(self) -> bool:
            return self.end > self.start and self.start.hour >= 9

        @relation
        def length(self) -> bool:
            return self.end - self.start == timedelta(minutes=self.minutes)

        @relation
        def office(self) -> bool:
            return self.end.time() <= time(17, 30) and self.opens <= self.start.time()

        @relation
        def synced(self) -> bool:
            return self.sync is None or self.start.date() == self.sync.date()

    planner = Planner(Writer(compile_spec(Shift)), TOK)
    rng = np.random.default_rng(0)
    seen_null = seen_sync = False
    for _ in range(10):
        s = Shift.model_validate_json(random_record(planner, TOK, rng))
        assert s.end > s.start and s.start.hour >= 9
        assert s.end - s.start == timedelta(minutes=s.minutes)
        assert s.end.time() <= time(17, 30) and s.opens <= s.start.time()
        if s.sync is None:
            seen_null = True
        else:
            seen_sync = True
            assert s.sync.date() == s.start.date()
    assert seen_null and seen_sync


# ------------------------------------------------------------------ the IR and the server


def test_the_relation_ir_round_trips_datetimes_and_times() -> None:
    spec = compile_spec(Meeting)
    ir = to_ir(Meeting)
    leaves = {f["name"]: f["node"] for f in ir["layout"]["fields"]}
    assert leaves["at"]["temporal"] == "datetime" and leaves["alarm"]["temporal"] == "time"
    served = spec_from_ir(ir)
    at = _value(datetime(2024, 2, 29, 10, 30))
    for s in (spec, served):
        oracle = s.new_oracle()
        assert oracle.feasible_values((("at", at), ("minutes", 45)), "ends") == [at + 45 * 60]
    good = {"at": "2024-02-29T10:30:00", "minutes": 45, "ends": "2024-02-29T11:15:00"}
    good["alarm"] = "07:05:00"
    facts = record_facts(served, good)
    assert ("alarm", 7 * 3600 + 5 * 60) in facts and ("at", at) in facts
    assert ("clock(at)", 10 * 3600 + 30 * 60) in facts
    assert ("date(at)", datetime(2024, 2, 29).toordinal()) in facts
    assert "clock of at" in {f.name for f in served.factors}  # derived by the server
    assert not any(f["name"] == "clock of at" for f in ir["factors"])
    text = str(good).replace("'", '"')
    check_record(served, text)
    with pytest.raises(RecordInvalidError, match="relations"):
        check_record(served, text.replace("11:15:00", "11:16:00"))
    for bad in ("2024-02-29T10:30:00Z", "2024-02-29 10:30:00", "2024-02-29T24:00:00"):
        with pytest.raises(RecordInvalidError):
            check_record(served, text.replace("2024-02-29T10:30:00", bad))


class Stamp(BaseModel):
    at: datetime

    @relation
    def leap_evening(self) -> bool:
        return self.at.month == 2 and self.at.day == 29 and self.at.hour >= 18


def test_a_datetimes_parts_are_variables_tied_to_it() -> None:
    """``date(t)``/``clock(t)`` split the seconds linearly; the year... tie to ``date(t)``."""
    spec = compile_spec(Stamp)
    assert {"date(at)", "clock(at)", "year(at)", "month(at)", "day(at)"} <= set(spec.variables)
    assert {"clock of at", "calendar of at"} <= {f.name for f in spec.factors}
    oracle = spec.new_oracle()
    evening = _value(datetime(2024, 2, 29, 19, 30))
    assert oracle.feasible_values((("at", evening),), "day(at)") == [29]
    assert oracle.feasible_values((("at", evening - 3 * 3600),), "day(at)") == []  # 16:30
    assert oracle.feasible((("year(at)", 2000),)) and not oracle.feasible((("year(at)", 1900),))
    planner = Planner(Writer(spec), TOK)
    rng = np.random.default_rng(2)
    for _ in range(3):
        at = Stamp.model_validate_json(random_record(planner, TOK, rng)).at
        assert (at.month, at.day) == (2, 29) and at.hour >= 18


class Roster(BaseModel):
    start: time
    end: time
    at: datetime

    @relation
    def quarter_hours(self) -> bool:
        return self.start.minute % 15 == 0 and self.start.second == 0 and self.end.second == 0

    @relation
    def long_enough(self) -> bool:
        return (self.end.hour * 60 + self.end.minute) - (
            self.start.hour * 60 + self.start.minute
        ) >= 90

    @relation
    def evening(self) -> bool:
        return self.at.hour >= 18 and self.at.time().minute == self.start.minute


def _roster_holds(start: time, end: time, at: datetime) -> bool:
    try:
        Roster(start=start, end=end, at=at)  # the model's own validators
    except ValidationError:
        return False
    return True


def test_clock_parts_are_variables_tied_to_the_clock_exactly() -> None:
    """``hour(t)``/``minute(t)``/``second(t)`` of a time, and of a datetime's ``clock(t)``.

    Tied by ``time of t``; the oracle's answers (compiled here and served from the IR) are
    Python's on whole records and on partial ones (some ``end`` and ``at`` exist, some
    ``start`` exists), over every edge of the clock, every minute of some hours and random
    seconds.
    """
    spec = compile_spec(Roster)
    assert {"hour(start)", "minute(end)", "second(at)", "clock(at)"} <= set(spec.variables)
    assert {"time of start", "time of end", "time of at"} <= {f.name for f in spec.factors}
    ir = to_ir(Roster)
    assert not any(f["name"].startswith("time of") for f in ir["factors"])  # derived
    rng = np.random.default_rng(7)
    edges = [0, 59, 60, 899, 900, 3599, 3600, 5400, 80_940, 81_000, 86_340, 86_399]
    seconds = [*edges, *(int(x) for x in rng.integers(0, 86_400, 40))]
    day = datetime(2024, 2, 29)
    served = spec_from_ir(ir)
    good = '{"start": "09:15:00", "end": "10:45:00", "at": "2024-02-29T18:15:00"}'
    check_record(served, good)  # the server reads the parts off the record itself
    for bad in ("10:44:00", "10:45:01"):
        with pytest.raises(RecordInvalidError, match="relations"):
            check_record(served, good.replace("10:45:00", bad))
    for s in (spec, served):
        oracle = s.new_oracle()
        seen = set()
        for i, a in enumerate(seconds):
            b = seconds[(i * 7 + 3) % len(seconds)]
            c = seconds[(i * 5 + 1) % len(seconds)]
            if i % 2:  # near a roster that holds: a quarter hour, 90 minutes, an evening
                a -= a % 900
                b = min(a + 5400 + b % 3600, 86_399)
                c = 18 * 3600 + c % (6 * 3600)
            start, end = time(a // 3600, a // 60 % 60, a % 60), time(b // 3600, b // 60 % 60)
            at = day + timedelta(seconds=c - c // 60 % 60 * 60 + start.minute * 60)
            facts = (("start", _value(start)), ("end", _value(end)), ("at", _value(at)))
            want = _roster_holds(start, end, at)
            seen.add(want)
            assert oracle.feasible(facts) == want, (start, end, at)
            some_end = a % 900 == 0 and a // 60 + 90 <= 23 * 60 + 59
            assert oracle.feasible(facts[:1]) == some_end, start
        assert seen == {True, False}
        for n in (*range(0, 3 * 3600, 60), *range(22 * 3600, 86_400, 60), 5400 + 1, 86_399):
            some_start = n % 60 == 0 and n // 60 >= 90  # a quarter hour 90 minutes before
            assert oracle.feasible((("end", n),)) == some_start, n
        assert oracle.feasible_values(
            (("at", _value(day.replace(hour=19, minute=45))),), "minute(at)"
        ) == [45]


class Leg(BaseModel):
    dep: AwareDatetime = Field(ge=datetime(2024, 2, 29, 6, tzinfo=timezone(timedelta(hours=1))))
    arr: AwareDatetime
    minutes: int = Field(ge=30, le=300)

    @relation
    def duration(self) -> bool:
        return self.arr - self.dep == timedelta(minutes=self.minutes)

    @relation
    def same_utc_day(self) -> bool:
        return self.dep.date() == self.arr.date() and self.dep.minute % 10 == 0


def test_aware_datetimes_are_written_in_utc_and_read_back_exactly() -> None:
    assert temporal_text("aware", _value(datetime(2024, 2, 29, 5))) == "2024-02-29T05:00:00Z"
    assert temporal_value("aware", "2024-02-29T05:00:00") is None  # naive text: not aware
    assert prefix_range("aware", "2024-02-29T05:00:00Z") == prefix_range(
        "datetime", "2024-02-29T05:00:00"
    )
    assert set(next_date_chars("aware", "2024-02-29T05:00:00", None, None)) == {"Z"}
    leg = build_layout(Leg).field("dep").node
    assert leg.kind == "aware" and leg.ge == _value(datetime(2024, 2, 29, 5))  # type: ignore[union-attr]
    spec = compile_spec(Leg)
    planner = Planner(Writer(spec), TOK)
    rng = np.random.default_rng(3)
    for _ in range(4):
        text = random_record(planner, TOK, rng)
        leg_record = Leg.model_validate_json(text)
        assert leg_record.dep.utcoffset() == timedelta(0) and text.count('Z"') == 2
        assert leg_record.arr - leg_record.dep == timedelta(minutes=leg_record.minutes)
        assert leg_record.dep >= datetime(2024, 2, 29, 5, tzinfo=UTC)
        served = spec_from_ir(to_ir(Leg))
        check_record(served, text)
        with pytest.raises(RecordInvalidError):
            check_record(served, text.replace('Z"', '"', 1))


class Lap(BaseModel):
    took: timedelta = Field(ge=timedelta(seconds=-30), le=timedelta(seconds=400))
    rest: timedelta | None = None

    @relation
    def odd_seconds_or_negative(self) -> bool:
        return self.took.seconds % 2 == 1 or self.took < timedelta(0)

    @relation
    def rest_shorter(self) -> bool:
        return self.rest is None or timedelta(0) <= self.rest < self.took


def test_duration_texts_are_iso_durations_pydantic_reads_exactly() -> None:
    for n in (0, 1, 59, 86_400, 90_061, -1, -90_061, DURATION_MIN, DURATION_MAX):
        text = duration_text(n)
        assert duration_value(text) == n
        assert TypeAdapter(timedelta).validate_json(f'"{text}"') == timedelta(seconds=n)
    for bad in ("PT01S", "-PT0S", "PT1.5S", "P1DT1S", "PT1M", "1", "PTS"):
        assert duration_value(bad) is None, bad
    node = build_layout(Lap).field("took").node
    assert (node.ge, node.le, node.kind == "duration") == (-30, 400, True)  # type: ignore[union-attr]


def test_duration_characters_are_exactly_those_some_valid_record_continues_with() -> None:
    writer = Writer(compile_spec(Lap))
    valid = [
        duration_text(n) for n in range(-30, 401) if n % 86_400 % 2 == 1 or n < 0
    ]  # .seconds of a negative timedelta is normalized, so the relation reads n < 0 first
    assert len(valid) > 64
    for k in range(1, 10):
        for p in sorted({v[:k] for v in valid if len(v) >= k}):
            want = {(v + '"')[k] for v in valid if v.startswith(p)}
            assert next_char(writer, '{"took": "' + p) == want, p


def test_random_walks_write_valid_durations_and_the_server_checks_them() -> None:
    planner = Planner(Writer(compile_spec(Lap)), TOK)
    served = spec_from_ir(to_ir(Lap))
    rng = np.random.default_rng(4)
    seen_rest = seen_left_out = False
    for _ in range(16):  # rest: a duration, null or left out
        text = random_record(planner, TOK, rng)
        lap = Lap.model_validate_json(text)
        seen_left_out |= '"rest"' not in text
        assert lap.took.seconds % 2 == 1 or lap.took < timedelta(0)
        if lap.rest is not None:
            seen_rest = True
            assert timedelta(0) <= lap.rest < lap.took
        check_record(served, text)
        facts = dict(record_facts(served, json.loads(text)))
        assert facts["took"] == lap.took // timedelta(seconds=1)
    assert seen_rest and seen_left_out
    with pytest.raises(RecordInvalidError):
        check_record(served, '{"took": "PT2S", "rest": null}')  # even seconds


def test_every_bound_holds_when_several_are_given() -> None:
    """Pydantic checks each ``ge``: the leaf takes the tightest, whatever their order."""

    class Shifted(BaseModel):
        clock: Annotated[time, Field(ge=time(10))] = Field(ge=time(9), le=time(17))
        late: Annotated[time, Field(ge=time(9))] = Field(ge=time(10))

        @relation
        def read(self) -> bool:
            return self.clock < self.late

    fields = {f.name: f.node for f in build_layout(Shifted).fields}
    for name in ("clock", "late"):
        assert fields[name].ge == _value(time(10)), name  # type: ignore[union-attr]
