"""The parts of date values: ``.year``... ``.hour``..., ``.date()``, ``.weekday()``...

The date value kind (`dates`) holds a date as its ordinal and a datetime, time or timedelta
as a count of microseconds; this module reads their parts:

- ``.year``/``.month``/``.day`` of a date field are variables of their own, ``year(d)``,
  ``month(d)``, ``day(d)``, tied to the date by the factor ``calendar of d`` (`date_links`):
  ``d == days_before_year(y) + days_before_month(y, m) + day`` with real month lengths and
  leap years, which fixes exactly one (y, m, day) per ordinal. (Z3 solves that tie 10-60x
  faster than the same parts as functions of the ordinal.) Of a computed date (``d +
  timedelta(days=1)``, a datetime's ``.date()``) they are those functions: the
  civil-from-days algorithm (H. Hinnant's; divisions by constants only, linear and exact
  for every ordinal). ``.weekday()`` is ``(ordinal + 6) % 7``, ``.isoweekday()`` one more,
  ``.toordinal()`` the ordinal. ``.hour``/``.minute``/``.second``/``.microsecond`` are
  divisions of the count by constants; a datetime's ``.date()`` and ``.time()`` split it.
  Of a datetime *field* ``t`` the split is two variables, ``date(t)`` and ``clock(t)``,
  tied by the linear factor ``clock of t`` (``t == 86400 * date(t) + clock(t)``), and its
  ``.year``/``.month``/``.day`` are tied to ``date(t)`` by ``calendar of t``: about 35x faster
  for Z3 than the divisions (18-34 s per record before, under 1 s after). Likewise
  ``.hour``/``.minute``/``.second`` of a datetime or time field (and of a datetime field's
  ``.time()``) are variables ``hour(t)``, ``minute(t)``, ``second(t)`` (`CLOCK_PARTS`), tied
  to its seconds since midnight (``clock(t)``, or a time field itself) by the linear factor
  ``time of t`` (``clock == 3600 * hour + 60 * minute + second``, each part within its
  range, which fixes one (hour, minute, second) per clock): the same exact values as
  ``clock // 3600`` and ``clock // 60 % 60``, without the divisions and modulos Z3 would
  otherwise reason about (relations that compute minutes as ``.hour * 60 + .minute``, as
  rosters do).
- A timedelta's ``.days`` (floor division, as Python normalizes), ``.seconds``,
  ``.microseconds``; ``.total_seconds()`` of whole seconds is their count (Python returns it
  as a float, exact below 2**53); of microseconds it is refused (a rounded float).

Anything else on these values raises `RelationDefinitionError` naming the construct.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, NoReturn, cast

import z3

from factorspec_sdk.relations.compiler.dates import (
    DATETIMES,
    DAY_US,
    SEC_US,
    Term,
    clock_value,
    delta_days,
    floor_div,
    is_date_like,
)
from factorspec_sdk.relations.compiler.records import VarRecord
from factorspec_sdk.relations.compiler.values import R, SClock, SDate, SDelta, SFunc, V
from factorspec_sdk.relations.kinds import LeafKind, Temporal, VarKind
from factorspec_sdk.relations.layout import Path, path_name
from factorspec_sdk.relations.temporal import CLOCK_PARTS, temporal_part
from factorspec_sdk.relations.variables import DATE_PARTS, date_part_of, part_variable

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import RelationCompiler

__all__ = ["calendar_tie", "date_attr", "date_links", "date_method", "tied_parts"]


_DAYS_BEFORE_MONTH = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)


_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _vars(cx: RelationCompiler, path: Path, parts: tuple[str, ...]) -> list[z3.ArithRef]:
    out = []
    for part in parts:
        name = f"{part}({path_name(path)})"
        out.append(cast(z3.ArithRef, cx.var(path, part_variable(part), name=name).term))
    return out


def _part_vars(cx: RelationCompiler, path: Path) -> dict[str, z3.ArithRef]:
    """``year(d)``, ``month(d)``, ``day(d)`` of the date (datetime) leaf at ``path``.

    All three at once, marked as read: the tie that defines them needs each.
    """
    parts = ("year", "month", "day")
    return dict(zip(parts, _vars(cx, path, parts), strict=True))


def _split_vars(cx: RelationCompiler, path: Path) -> tuple[z3.ArithRef, z3.ArithRef]:
    """``date(t)`` and ``clock(t)`` of the datetime leaf at ``path``: its ordinal and seconds.

    Tied to the leaf by the factor ``clock of t``: ``t == 86400 * date(t) + clock(t)``.
    """
    d, c = _vars(cx, path, ("date", "clock"))
    return d, c


def _clock_part_vars(cx: RelationCompiler, path: Path) -> dict[str, z3.ArithRef]:
    """``hour(t)``, ``minute(t)``, ``second(t)`` of the datetime or time leaf at ``path``.

    All three at once, marked as read: the tie that defines them needs each. A datetime's
    are tied to its ``clock(t)`` (read already: `_day_clock` made it), a time's to itself.
    """
    return dict(zip(CLOCK_PARTS, _vars(cx, path, CLOCK_PARTS), strict=True))


def calendar_tie(e: z3.ArithRef, y: z3.ArithRef, m: z3.ArithRef, d: z3.ArithRef) -> z3.BoolRef:
    """``e`` is the ordinal of the date (y, m, d), and (y, m, d) is a real calendar date."""
    leap = z3.Or(z3.And(y % 4 == 0, y % 100 != 0), y % 400 == 0)
    ctx = e.ctx  # the spec's context: the main one, or a server's own (`spec_from_ir`)
    before: z3.ArithRef = z3.IntVal(_DAYS_BEFORE_MONTH[-1], ctx)
    length: z3.ArithRef = z3.IntVal(_MONTH_DAYS[-1], ctx)
    for k in range(10, -1, -1):
        before = cast(z3.ArithRef, z3.If(m == k + 1, _DAYS_BEFORE_MONTH[k], before))
        days = _MONTH_DAYS[k] + (z3.If(leap, 1, 0) if k == 1 else 0)
        length = cast(z3.ArithRef, z3.If(m == k + 1, days, length))
    y1 = y - 1
    ordinal = 365 * y1 + y1 / 4 - y1 / 100 + y1 / 400 + before + z3.If(z3.And(m > 2, leap), 1, 0)
    return cast(
        z3.BoolRef,
        z3.And(y >= 1, y <= 9999, m >= 1, m <= 12, d >= 1, d <= length, e == ordinal + d),
    )


def date_links(records: Mapping[str, VarRecord]) -> list[tuple[str, frozenset[str], z3.BoolRef]]:
    """Factors that tie a date leaf to its parts where relations read them.

    Returns (factor name, variables, formula): per datetime split into its date and clock,
    ``clock of t`` (``t == 86400 * date(t) + clock(t)``, linear); per date (or datetime)
    with a year, month and day, ``calendar of d`` (on the datetime's ``date(t)``); per
    datetime or time with an hour, minute and second, ``time of t`` (``clock == 3600 *
    hour + 60 * minute + second`` on the datetime's ``clock(t)`` or the time itself).
    """
    dates = {r.path: r for r in records.values() if r.kind == VarKind.DATE}
    parts: dict[Path, dict[str, VarRecord]] = {}
    for rec in records.values():
        found = date_part_of(rec.name) if rec.kind == VarKind.DATEPART else None
        if found is not None:
            parts.setdefault(rec.path, {})[found] = rec
    out: list[tuple[str, frozenset[str], z3.BoolRef]] = []
    for path, ps in parts.items():
        leaf = dates[path]
        ordinal = cast(z3.ArithRef, leaf.term)
        below = leaf.name
        clock, seconds = ordinal, leaf.name  # a time's count is its clock
        if "date" in ps:  # a datetime: its date and clock
            day, clock = (cast(z3.ArithRef, ps[k].term) for k in ("date", "clock"))
            tie = z3.And(ordinal == 86_400 * day + clock, clock >= 0, clock <= 86_399)
            names = frozenset({leaf.name, ps["date"].name, ps["clock"].name})
            out.append((f"clock of {path_name(path)}", names, cast(z3.BoolRef, tie)))
            ordinal, below, seconds = day, ps["date"].name, ps["clock"].name
        if "hour" in ps:
            h, m, sec = (cast(z3.ArithRef, ps[k].term) for k in CLOCK_PARTS)
            tie = z3.And(
                clock == 3600 * h + 60 * m + sec,
                *(
                    z3.And(t >= DATE_PARTS[k][0], t <= DATE_PARTS[k][1])
                    for k, t in zip(CLOCK_PARTS, (h, m, sec), strict=True)
                ),
            )
            names = frozenset({seconds, *(ps[k].name for k in CLOCK_PARTS)})
            out.append((f"time of {path_name(path)}", names, cast(z3.BoolRef, tie)))
        if "year" in ps:
            y, m, d = (cast(z3.ArithRef, ps[k].term) for k in ("year", "month", "day"))
            formula = calendar_tie(ordinal, y, m, d)
            names = frozenset({below, ps["year"].name, ps["month"].name, ps["day"].name})
            out.append((f"calendar of {path_name(path)}", names, formula))
    return out


def tied_parts(parts: Collection[str], value: int) -> dict[str, int] | None:
    """The values `date_links`' ties give a temporal leaf's ``parts`` where the leaf is ``value``.

    ``parts`` are the leaf's part variables (`DATE_PARTS`' names), which tell its kind as
    `date_links` does: with ``date`` (and ``clock``), a datetime in seconds; else with
    ``hour``, a time (its seconds since midnight); else a date (its ordinal). Each part is
    `temporal_part`'s. None: no calendar date has that ordinal. A value the ties refuse (a
    time past midnight) gets parts the ties refuse too: the caller evaluates the ties, this
    only mirrors them.
    """
    kind: Temporal = LeafKind.DATE
    if "date" in parts:
        kind = LeafKind.DATETIME
    elif "hour" in parts:
        kind = LeafKind.TIME
    try:
        return {part: temporal_part(kind, value, part) for part in parts}
    except (ValueError, OverflowError):  # an ordinal outside the calendar
        return None


def _civil(e: z3.ArithRef) -> tuple[z3.ArithRef, z3.ArithRef, z3.ArithRef]:
    """(year, month, day) of the ordinal ``e`` >= 1 (H. Hinnant's civil_from_days).

    ``z`` counts days from 0000-03-01; every quantity is non-negative, so Z3's integer
    division (Euclidean) is Python's floor division here.
    """
    z = e + 305
    era = z / 146097
    doe = z - era * 146097
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    mp = (5 * doy + 2) / 153
    day = doy - (153 * mp + 2) / 5 + 1
    month = cast(z3.ArithRef, z3.If(mp < 10, mp + 3, mp - 9))
    year = yoe + era * 400 + z3.If(month <= 2, 1, 0)
    return cast(z3.ArithRef, year), month, cast(z3.ArithRef, day)


def _day_and_rest(n: Term, unit: int) -> tuple[Term, Term]:
    """The ordinal of a datetime's date and the rest of its day, in ``unit``."""
    if unit == DAY_US:
        return n, 0
    per = DAY_US // unit
    return floor_div(n, per), n % per


def _day_clock(cx: RelationCompiler, v: SClock) -> tuple[Term, Term, int]:
    """The ordinal of a datetime's date, the rest of its day and that rest's unit.

    Of a leaf, its variables ``date(t)`` and ``clock(t)`` (seconds); else divisions.
    """
    if v.path is not None and v.temporal in DATETIMES:
        day, clock = _split_vars(cx, v.path)
        return day, clock, SEC_US
    day, rest = _day_and_rest(v.n, v.unit)
    return day, rest, v.unit


def _clock_field(rest: Term, unit: int, name: str) -> Term:
    """``.hour``/``.minute``/``.second``/``.microsecond`` of ``rest`` units since midnight."""
    if name == "microsecond":
        return rest % SEC_US if unit == 1 else 0
    if unit == DAY_US:
        return 0
    scale = {"hour": 3600, "minute": 60, "second": 1}[name] * SEC_US // unit
    count = floor_div(rest, scale)
    return count if name == "hour" else count % 60


_CLOCK_FIELDS = (*CLOCK_PARTS, "microsecond")


_WALL = ("year", "month", "day", "date", "time", "weekday", "isoweekday", "toordinal")
"""A datetime's parts read off its wall clock (with `_CLOCK_FIELDS`)."""


def _zoned_fail(cx: RelationCompiler, name: str, node: ast.AST) -> NoReturn:
    cx.fail(
        f"wall clock of a datetime in another time zone (.{name})",
        "the value may come from an aware constant whose offset is not UTC, and its wall "
        "clock is not its UTC time; read the parts of an aware field, or of a UTC constant",
        node,
    )


def date_attr(cx: RelationCompiler, v: V, name: str, node: ast.AST) -> R | None:
    """``v.name`` of a symbolic date-like value (a method becomes an `SFunc`), else None."""
    if isinstance(v, SDate):
        if name in ("year", "month", "day"):
            if v.path is not None:
                return R(_part_vars(cx, v.path)[name])
            year, month, day = _civil(v.e)
            return R({"year": year, "month": month, "day": day}[name])
        if name in ("weekday", "isoweekday", "toordinal"):
            return R(SFunc(name, v))
        cx.fail(
            f"attribute .{name} of a date",
            "dates offer .year/.month/.day and .weekday()/.isoweekday()/.toordinal()",
            node,
        )
    if isinstance(v, SClock):
        if v.temporal in DATETIMES:
            if v.zoned and name in (*_WALL, *_CLOCK_FIELDS):
                _zoned_fail(cx, name, node)
            day, rest, unit = _day_clock(cx, v)
            if name in ("year", "month", "day") and v.path is not None:
                return R(_part_vars(cx, v.path)[name])  # tied to date(t)
            if name in ("year", "month", "day"):
                year, month, d = _civil(cast(z3.ArithRef, day))
                return R({"year": year, "month": month, "day": d}[name])
            if name in CLOCK_PARTS and v.path is not None:
                return R(_clock_part_vars(cx, v.path)[name])  # tied to clock(t)
            if name in _CLOCK_FIELDS:
                return R(_clock_field(rest, unit, name))
            if name in ("date", "time", "weekday", "isoweekday", "toordinal"):
                return R(SFunc(name, v))
            offers = ".year/.month/.day/.hour/.minute/.second/.microsecond and .date()/"
            offers += ".time()/.weekday()/.isoweekday()/.toordinal()"
            cx.fail(f"attribute .{name} of a datetime", f"datetimes offer {offers}", node)
        if name in CLOCK_PARTS and v.path is not None:
            return R(_clock_part_vars(cx, v.path)[name])  # tied to the time (its clock)
        if name in _CLOCK_FIELDS:
            return R(_clock_field(v.n, v.unit, name))
        cx.fail(
            f"attribute .{name} of a time",
            "times offer .hour/.minute/.second/.microsecond",
            node,
        )
    if isinstance(v, SDelta):
        if name == "days":
            return R(delta_days(v.n, v.unit))
        if name == "seconds":
            if v.unit == DAY_US:
                return R(0)
            return R(floor_div(v.n % (DAY_US // v.unit), SEC_US // v.unit))
        if name == "microseconds":
            return R(v.n % SEC_US if v.unit == 1 else 0)
        if name == "total_seconds":
            return R(SFunc(name, v))
        cx.fail(
            f"attribute .{name} of a timedelta",
            "timedeltas offer .days/.seconds/.microseconds and .total_seconds()",
            node,
        )
    return None


def date_method(cx: RelationCompiler, f: SFunc, args: list[V], node: ast.AST) -> R | None:
    """A method of a symbolic date-like value (``weekday()``...), else None."""
    v = f.bound
    if not is_date_like(v):
        return None
    if args:
        cx.fail(f"call to {f.name}()", f"{f.name}() takes no arguments", node)
    if isinstance(v, SDate):
        weekday = (v.e + 6) % 7
        return R({"weekday": weekday, "isoweekday": weekday + 1, "toordinal": v.e}[f.name])
    if isinstance(v, SClock):
        if v.zoned:
            _zoned_fail(cx, f.name, node)
        day, rest, unit = _day_clock(cx, v)
        if f.name == "date":
            return R(SDate(cast(z3.ArithRef, day), v.path))
        if f.name == "time":
            out = clock_value(rest, unit, LeafKind.TIME)
            if v.path is not None and isinstance(out.value, SClock):  # clock(t): parts too
                return R(SClock(out.value.n, out.value.unit, LeafKind.TIME, v.path), out.ok)
            return out
        weekday = (day + 6) % 7
        return R({"weekday": weekday, "isoweekday": weekday + 1, "toordinal": day}[f.name])
    assert isinstance(v, SDelta)
    if v.unit == 1:
        cx.fail(
            "total_seconds() of a timedelta with microseconds",
            "total_seconds() of microseconds is a float decided by rounding; compare the "
            "timedelta with timedelta(seconds=...) instead",
            node,
        )
    return R(v.n * (v.unit // SEC_US))
