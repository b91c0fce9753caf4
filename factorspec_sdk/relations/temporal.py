"""Dates, datetimes and times as ints, and the fixed-width texts the writer gives them.

A temporal leaf (`LeafLayout` of a `Temporal` kind) holds one of these Python types; each has
an int value that orders as the type does, and one text, the one Pydantic serializes (every
part zero-padded, whole seconds, no time zone):

==========  ==================================  =========================  =======================
temporal    value                               text                       range
==========  ==================================  =========================  =======================
date        ``d.toordinal()``                   ``YYYY-MM-DD``             0001-01-01..9999-12-31
datetime    ``ordinal * 86400 + seconds``       ``YYYY-MM-DDTHH:MM:SS``    whole seconds, naive
aware       the same, of the UTC time           ``YYYY-MM-DDTHH:MM:SSZ``   whole seconds, in UTC
time        ``seconds since midnight``          ``HH:MM:SS``               whole seconds, naive
==========  ==================================  =========================  =======================

An ``aware`` leaf is a time-zone-aware datetime (``AwareDatetime``, or a ``datetime`` with
aware bounds); the writer writes it in UTC (``Z``), which Pydantic reads as an aware
datetime whose offset is 0, so its wall clock is its UTC time.

A ``timedelta`` leaf (`LeafKind.DURATION`) holds its whole seconds, written as
the ISO 8601 duration ``"PT{n}S"`` (``"-PT{n}S"`` when negative), which Pydantic reads as
exactly ``n`` seconds (`duration_text`, `duration_value`) for ``|n| < 2**32``.

For such texts the order of the texts is the order of the values, so the valid values whose
text starts with a given prefix are one contiguous range (`prefix_range`): the writer asks
the oracle which next characters leave a range that holds a feasible value. Only real
calendar dates and clock times have a value (month lengths, leap years, hours 0-23).
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from factorspec_sdk.relations.kinds import TEMPORAL_KINDS, LeafKind, Temporal, kind_of_type

if TYPE_CHECKING:
    from factorspec_sdk.relations.layout import LeafLayout

__all__ = [
    "CLOCK_PARTS",
    "DATE_MAX",
    "DATE_MIN",
    "DAY_SECONDS",
    "DURATION_MAX",
    "DURATION_MIN",
    "Temporal",
    "duration_seconds",
    "duration_text",
    "duration_value",
    "from_python",
    "prefix_range",
    "separators",
    "temporal_bounds",
    "temporal_of",
    "temporal_part",
    "temporal_range",
    "temporal_text",
    "temporal_value",
    "text_length",
    "to_python",
]

DATE_MIN = dt.date.min.toordinal()
"""Ordinal (``date.toordinal()``) of the first date Python has, 0001-01-01."""

DATE_MAX = dt.date.max.toordinal()
"""Ordinal of the last date Python has, 9999-12-31."""

DAY_SECONDS = 86_400

CLOCK_PARTS = ("hour", "minute", "second")
"""The parts of a clock (a datetime's or time's seconds since midnight), in order: the part
variables of a time leaf, and those the compiler's ``time of t`` ties to a clock."""

DURATION_MAX = 2**32 - 1
"""The most seconds Pydantic parses from ``PT{n}S`` (about 136 years; more is an error)."""

DURATION_MIN = -DURATION_MAX
"""The least: ``-PT{DURATION_MAX}S``."""

_LENGTHS: dict[Temporal, int] = {
    LeafKind.DATE: 10,
    LeafKind.DATETIME: 19,
    LeafKind.AWARE: 20,
    LeafKind.TIME: 8,
}
_BOUNDS: dict[Temporal, tuple[int, int]] = {
    LeafKind.DATE: (DATE_MIN, DATE_MAX),
    LeafKind.DATETIME: (DATE_MIN * DAY_SECONDS, DATE_MAX * DAY_SECONDS + DAY_SECONDS - 1),
    LeafKind.AWARE: (DATE_MIN * DAY_SECONDS, DATE_MAX * DAY_SECONDS + DAY_SECONDS - 1),
    LeafKind.TIME: (0, DAY_SECONDS - 1),
}
_SEPARATORS: dict[Temporal, dict[int, str]] = {
    LeafKind.DATE: {4: "-", 7: "-"},
    LeafKind.DATETIME: {4: "-", 7: "-", 10: "T", 13: ":", 16: ":"},
    LeafKind.AWARE: {4: "-", 7: "-", 10: "T", 13: ":", 16: ":", 19: "Z"},
    LeafKind.TIME: {2: ":", 5: ":"},
}


def temporal_of(annotation: object) -> Temporal | None:
    """The temporal kind of a field type, or None (another type).

    ``date``, ``datetime`` (also Pydantic's ``NaiveDatetime``), ``aware`` (Pydantic's
    ``AwareDatetime``) or ``time``: exactly these classes, not subclasses
    (`factorspec_sdk.relations.kinds.PYTHON_TYPES`).
    """
    kind = kind_of_type(annotation)
    return cast(Temporal, kind) if kind in TEMPORAL_KINDS else None


def text_length(temporal: Temporal) -> int:
    """Characters of the text of every value (``YYYY-MM-DD`` has 10)."""
    return _LENGTHS[temporal]


def temporal_bounds(temporal: Temporal) -> tuple[int, int]:
    """The least and greatest values Python has (0001-01-01 ... 9999-12-31 23:59:59)."""
    return _BOUNDS[temporal]


def separators(temporal: Temporal) -> dict[int, str]:
    """The fixed characters of the text by position (``-``, ``T``, ``:``)."""
    return _SEPARATORS[temporal]


def temporal_range(node: LeafLayout) -> tuple[int, int]:
    """The values a temporal leaf may take: its bounds, within Python's first and last values."""
    lo, hi = temporal_bounds(cast(Temporal, node.kind))
    if node.ge is not None:
        lo = max(lo, node.ge)
    if node.le is not None:
        hi = min(hi, node.le)
    return lo, hi


def _clock(secs: int) -> dt.time:
    return dt.time(secs // 3600, secs // 60 % 60, secs % 60)


def _moment(value: int, zone: dt.tzinfo | None) -> dt.datetime:
    days, secs = divmod(value, DAY_SECONDS)
    return dt.datetime.combine(dt.date.fromordinal(days), _clock(secs), tzinfo=zone)


_TO_PYTHON: dict[Temporal, Callable[[int], dt.date | dt.datetime | dt.time]] = {
    LeafKind.DATE: dt.date.fromordinal,
    LeafKind.DATETIME: lambda value: _moment(value, None),
    LeafKind.AWARE: lambda value: _moment(value, dt.UTC),
    LeafKind.TIME: _clock,
}


def to_python(temporal: Temporal, value: int) -> dt.date | dt.datetime | dt.time:
    """The Python value of an int value."""
    return _TO_PYTHON[temporal](value)


def _seconds(value: dt.datetime | dt.time) -> int:
    return value.hour * 3600 + value.minute * 60 + value.second


def _from_date(value: object) -> tuple[int, bool] | None:
    return (value.toordinal(), True) if type(value) is dt.date else None


def _from_datetime(value: object) -> tuple[int, bool] | None:
    if type(value) is not dt.datetime or value.tzinfo is not None:
        return None
    return value.toordinal() * DAY_SECONDS + _seconds(value), not value.microsecond


def _from_aware(value: object) -> tuple[int, bool] | None:
    if type(value) is not dt.datetime or value.utcoffset() is None:
        return None
    return _from_datetime(value.astimezone(dt.UTC).replace(tzinfo=None))


def _from_time(value: object) -> tuple[int, bool] | None:
    if type(value) is not dt.time or value.tzinfo is not None:
        return None
    return _seconds(value), not value.microsecond


_FROM_PYTHON: dict[Temporal, Callable[[object], tuple[int, bool] | None]] = {
    LeafKind.DATE: _from_date,
    LeafKind.DATETIME: _from_datetime,
    LeafKind.AWARE: _from_aware,
    LeafKind.TIME: _from_time,
}


def from_python(temporal: Temporal, value: object) -> tuple[int, bool] | None:
    """``(whole, exact)``: the value of a Python value, or None when it is not of the type.

    ``whole`` is the value of the whole second at or before it; ``exact`` is false when
    microseconds were dropped. A ``datetime``/``time`` with a time zone is not a naive one
    (None), nor a date a datetime, nor a datetime a date; an ``aware`` value is an aware
    datetime, as its UTC time.
    """
    return _FROM_PYTHON[temporal](value)


def temporal_part(temporal: Temporal, value: int, part: str) -> int:
    """A part of a value: ``year``, ``month``, ``day``, ``date``, ``clock``, ``hour``...

    The parts are ``year``, ``month``, ``day``, ``hour``, ``minute`` and ``second``, and
    ``date`` and ``clock``: a datetime's ordinal and seconds since midnight (a time's clock
    is its value).
    """
    day, clock = (value, 0) if temporal == LeafKind.DATE else divmod(value, DAY_SECONDS)
    hms = (clock // 3600, clock // 60 % 60, clock % 60)
    clock_parts = {"date": day, "clock": clock, **dict(zip(CLOCK_PARTS, hms, strict=True))}
    if part in clock_parts:
        return clock_parts[part]
    return int(getattr(dt.date.fromordinal(day), part))


def duration_seconds(value: object) -> tuple[int, bool] | None:
    """``(whole, exact)``: a ``timedelta``'s whole seconds (floor) and whether that is all.

    None for another value.
    """
    if type(value) is not dt.timedelta:
        return None
    whole, rest = divmod(value, dt.timedelta(seconds=1))
    return whole, not rest


def duration_text(seconds: int) -> str:
    """``PT{n}S`` of ``n`` seconds (``-PT{n}S`` when negative), without the quotes."""
    return f"-PT{-seconds}S" if seconds < 0 else f"PT{seconds}S"


def duration_value(text: str) -> int | None:
    """The seconds of a duration leaf's text (without quotes), or None when not that text."""
    sign = -1 if text.startswith("-") else 1
    body = text[1:] if sign < 0 else text
    digits = body[2:-1]
    if not (body.startswith("PT") and body.endswith("S") and digits.isascii()):
        return None
    if not digits.isdigit() or (digits != "0" and digits.startswith("0")):
        return None
    n = sign * int(digits)
    return n if DURATION_MIN <= n <= DURATION_MAX and (n != 0 or sign > 0) else None


def temporal_text(temporal: Temporal, value: int) -> str:
    """The text of a value: ``YYYY-MM-DD``, ``YYYY-MM-DDTHH:MM:SS(Z)`` or ``HH:MM:SS``."""
    return to_python(temporal, value).isoformat().replace("+00:00", "Z")  # aware: in UTC


def temporal_value(temporal: Temporal, text: str) -> int | None:
    """The value of a leaf's JSON text (without quotes), or None when it is not that text.

    Only the exact text `temporal_text` writes has a value: no other ISO 8601 spelling.
    """
    if len(text) != _LENGTHS[temporal]:
        return None
    r = prefix_range(temporal, text)
    return None if r is None else r[0]


def _span(digits: str, width: int, lo: int, hi: int) -> tuple[int, int] | None:
    """Values of a ``width``-digit zero-padded field that start with ``digits``, in [lo, hi]."""
    a = max(int(digits.ljust(width, "0")), lo)
    b = min(int(digits.ljust(width, "9")), hi)
    return (a, b) if a <= b else None


def _date_range(prefix: str) -> tuple[int, int] | None:
    years = _span(prefix[:4], 4, 1, 9999)
    if years is None:
        return None
    if len(prefix) <= 5:
        return dt.date(years[0], 1, 1).toordinal(), dt.date(years[1], 12, 31).toordinal()
    year = years[0]
    months = _span(prefix[5:7], 2, 1, 12)
    if months is None:
        return None
    if len(prefix) <= 8:
        last = calendar.monthrange(year, months[1])[1]
        return dt.date(year, months[0], 1).toordinal(), dt.date(year, months[1], last).toordinal()
    month = months[0]
    days = _span(prefix[8:10], 2, 1, calendar.monthrange(year, month)[1])
    if days is None:
        return None
    return dt.date(year, month, days[0]).toordinal(), dt.date(year, month, days[1]).toordinal()


def _time_range(prefix: str) -> tuple[int, int] | None:
    hours = _span(prefix[:2], 2, 0, 23)
    if hours is None:
        return None
    if len(prefix) <= 3:
        return hours[0] * 3600, hours[1] * 3600 + 3599
    base = hours[0] * 3600
    minutes = _span(prefix[3:5], 2, 0, 59)
    if minutes is None:
        return None
    if len(prefix) <= 6:
        return base + minutes[0] * 60, base + minutes[1] * 60 + 59
    base += minutes[0] * 60
    seconds = _span(prefix[6:8], 2, 0, 59)
    if seconds is None:
        return None
    return base + seconds[0], base + seconds[1]


def _datetime_range(prefix: str) -> tuple[int, int] | None:
    days = _date_range(prefix[:10])
    if days is None:
        return None
    if len(prefix) <= 11:
        return days[0] * DAY_SECONDS, days[1] * DAY_SECONDS + DAY_SECONDS - 1
    secs = _time_range(prefix[11:])
    if secs is None:
        return None
    return days[0] * DAY_SECONDS + secs[0], days[0] * DAY_SECONDS + secs[1]


_PREFIX_RANGES: dict[Temporal, Callable[[str], tuple[int, int] | None]] = {
    LeafKind.DATE: _date_range,
    LeafKind.DATETIME: _datetime_range,
    LeafKind.AWARE: lambda prefix: _datetime_range(
        prefix[:19]
    ),  # its Z: checked with the separators
    LeafKind.TIME: _time_range,
}


def prefix_range(temporal: Temporal, prefix: str) -> tuple[int, int] | None:
    """The values of the valid texts that start with ``prefix``, as ``(least, greatest)``.

    None when no text does (a misplaced character, month 13, day 30 of February, hour 24...).
    """
    if len(prefix) > _LENGTHS[temporal]:
        return None
    fixed = _SEPARATORS[temporal]
    for i, c in enumerate(prefix):
        if (c != fixed[i]) if i in fixed else not ("0" <= c <= "9"):
            return None
    return _PREFIX_RANGES[temporal](prefix)
