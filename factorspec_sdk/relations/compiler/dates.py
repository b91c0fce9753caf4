"""The date value kind: ``date``, naive ``datetime`` and ``time`` fields, ``timedelta`` values.

A date is its ordinal (``date.toordinal()``: 1 is 0001-01-01) as a Z3 ``Int``, bounded by
Python's first and last dates or by the field's ``ge``/``le`` dates (`SDate`). A naive
datetime or a time is a count of microseconds (`SClock`: ``n * unit``, a leaf's ``n`` its
whole seconds): a datetime's from midnight of ordinal 0, so that its ordinal is the count
``// 86400 * 10**6``; a time's from midnight. A timedelta computed from record values is a
count of microseconds too (`SDelta`), in the coarsest unit that holds it (whole days for
date arithmetic, whole seconds, or microseconds), so that date arithmetic stays on days.
Concrete ``date``/``datetime``/``time``/``timedelta`` objects (from the context, ``date(2026,
12, 1)``, ``timedelta(hours=2)``) are plain Python values. Every rule has Python's semantics
exactly, with integer arithmetic only (no approximation anywhere):

- ``==``/``!=``/``<``... between values of one kind (to the microsecond); values of two
  kinds never equal (a date and a datetime, a naive datetime and an aware one), and ordering
  them raises ``TypeError`` (``ok`` is false), as in Python.
- ``date - date`` and ``datetime - datetime`` are timedeltas; ``date ± timedelta`` is a date
  (only the timedelta's ``days`` count, as in Python); ``datetime ± timedelta`` a datetime,
  to the microsecond; ``OverflowError`` outside years 1-9999 makes ``ok`` false; timedeltas
  add, subtract, negate, take ``abs`` and multiply by ints; times take no arithmetic.
- ``timedelta(...)`` of record ints takes any of its arguments, in microseconds exactly;
  ``date(...)``, ``datetime(...)`` and ``time(...)`` take constants only.

Their parts (``.year``, ``.hour``, ``.days``, ``.date()``, ``.weekday()``...) and the factors
that tie a field's part variables to it are `date_parts`'.

Anything else on these values raises `RelationDefinitionError` naming the construct.
"""

from __future__ import annotations

import ast
import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeAlias, cast

import z3

from factorspec_sdk.relations.compiler.ints import ORDER_OPS, as_int_term
from factorspec_sdk.relations.compiler.raises import BINARY, sample, type_name
from factorspec_sdk.relations.compiler.terms import AND, Cond, in_codes, mk_cmp, mk_eq, mk_ite
from factorspec_sdk.relations.compiler.values import (
    UNDEF,
    R,
    SClock,
    SDate,
    SDelta,
    V,
    is_sym,
)
from factorspec_sdk.relations.kinds import LeafKind
from factorspec_sdk.relations.layout import LeafLayout, Path
from factorspec_sdk.relations.temporal import DATE_MAX, DATE_MIN, from_python
from factorspec_sdk.relations.variables import parts_of

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import RelationCompiler

__all__ = [
    "DATETIMES",
    "DAY_US",
    "SEC_US",
    "Clock",
    "Term",
    "abs_delta",
    "arith_dates",
    "as_date",
    "as_numbers",
    "clock_value",
    "date_call",
    "date_leaf",
    "delta_days",
    "duration_leaf",
    "eq_dates",
    "floor_div",
    "is_date_like",
    "ite_dates",
    "member_dates",
    "neg_delta",
    "order_dates",
]

SEC_US = 10**6
"""Microseconds in a second: the unit of a datetime, time or timedelta leaf's count."""
DAY_US = 86_400 * SEC_US
"""Microseconds in a day: the unit of a date's ordinal, and of timedeltas of whole days."""
_ONE_US = dt.timedelta(microseconds=1)
_DELTA_MIN_US = dt.timedelta.min // _ONE_US
_DELTA_MAX_US = dt.timedelta.max // _ONE_US
"""``timedelta``'s range in microseconds: beyond it, ``OverflowError``."""
_CLOCK_US: dict[Clock, tuple[int, int]] = {
    LeafKind.DATETIME: (DATE_MIN * DAY_US, (DATE_MAX + 1) * DAY_US - 1),
    LeafKind.AWARE: (DATE_MIN * DAY_US, (DATE_MAX + 1) * DAY_US - 1),
    LeafKind.TIME: (0, DAY_US - 1),
}
_CMP_SYM: dict[type[ast.cmpop], str] = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
Term: TypeAlias = "z3.ArithRef | int"
Clock: TypeAlias = Literal[LeafKind.DATETIME, LeafKind.AWARE, LeafKind.TIME]
"""The kinds of a clock value (`SClock`)."""
DATETIMES = (LeafKind.DATETIME, LeafKind.AWARE)
"""The clock kinds that have a date (a naive and an aware datetime)."""
_CLOCKS: tuple[Clock, ...] = (LeafKind.DATETIME, LeafKind.AWARE, LeafKind.TIME)


def date_leaf(cx: RelationCompiler, path: Path, node: LeafLayout) -> SDate | SClock:
    """The variable of a date (its ordinal), datetime or time leaf (its whole seconds).

    Bounded by the schema or Python's first and last values.
    """
    term = cast(z3.ArithRef, cx.leaf_var(path, node).term)
    if node.kind == LeafKind.DATE:
        return SDate(term, path)
    clock = cast(Clock, node.kind)
    # a datetime's date and clock, a time's hour, minute and second may become variables
    split = bool(parts_of(node.kind))
    return SClock(term, SEC_US, clock, path if split else None)


def duration_leaf(cx: RelationCompiler, path: Path, node: LeafLayout) -> SDelta:
    """The variable of a ``timedelta`` leaf: its whole seconds (an int variable)."""
    term = cast(z3.ArithRef, cx.leaf_var(path, node).term)
    return SDelta(term, SEC_US)


def _is_date(v: V) -> bool:
    return isinstance(v, dt.date) and not isinstance(v, dt.datetime)


def as_date(v: V) -> Term | None:
    """The ordinal of a date value (symbolic or constant), or None for a non-date."""
    if isinstance(v, SDate):
        return v.e
    if _is_date(v):
        return cast(dt.date, v).toordinal()
    return None


def floor_div(t: Term, k: int) -> Term:
    """``t // k`` for ``k > 0`` (Z3's integer division is floor division then)."""
    return t // k if isinstance(t, int) else cast(z3.ArithRef, t / k)


def delta_days(n: Term, unit: int) -> Term:
    """``.days`` of a timedelta of ``n * unit`` microseconds (floor, as Python normalizes)."""
    return n if unit == DAY_US else floor_div(n, DAY_US // unit)


def _coarse(us: int) -> tuple[int, int]:
    """``(n, unit)`` of ``us`` microseconds with the coarsest unit that holds it exactly."""
    for unit in (DAY_US, SEC_US):
        if us % unit == 0:
            return us // unit, unit
    return us, 1


def _common(*parts: tuple[Term, int]) -> tuple[list[Term], int]:
    """Values ``(n, unit)`` in their finest unit (the units divide one another)."""
    u = min(unit for _, unit in parts)
    return [n if unit == u else n * (unit // u) for n, unit in parts], u


def _delta_parts(v: V) -> tuple[Term, int] | None:
    """A timedelta as ``(n, unit)``, or None for a non-timedelta."""
    if isinstance(v, SDelta):
        return v.n, v.unit
    if isinstance(v, dt.timedelta):
        return _coarse(v // _ONE_US)
    return None


def _clock_parts(v: V) -> tuple[Term, int, Clock] | None:
    """A datetime or naive time as ``(n, unit, temporal)``, or None for any other value.

    An aware datetime is ``aware``, counted as its UTC time: it never equals a naive one,
    and ordering or subtracting them raises ``TypeError``, as in Python. An aware time is
    none of these (None).
    """
    if isinstance(v, SClock):
        return v.n, v.unit, v.temporal
    if isinstance(v, (dt.datetime, dt.time)):
        for kind in _CLOCKS:
            got = from_python(kind, v)  # the leaf's value: whole seconds (UTC when aware)
            if got is None:
                continue
            micro = v.microsecond
            if kind == LeafKind.AWARE and isinstance(v, dt.datetime):  # of the UTC time
                micro = v.astimezone(dt.UTC).microsecond
            n, unit = _coarse(got[0] * SEC_US + micro)
            return n, unit, kind
    return None


def _zoned(*values: V) -> bool:
    """Whether an aware value among ``values`` may have another offset than UTC."""
    for v in values:
        if isinstance(v, SClock) and v.zoned:
            return True
        if type(v) is dt.datetime and v.utcoffset() not in (None, dt.timedelta(0)):
            return True
    return False


def is_date_like(v: V) -> bool:
    """Whether ``v`` is a symbolic date, datetime, time or timedelta (this module's values)."""
    return isinstance(v, (SDate, SClock, SDelta))


def _operands(a: V, b: V) -> tuple[Term, Term, int] | Literal[False] | None:
    """Both sides as numbers of one unit, and the unit, when they are of one kind.

    False when they are not; None when neither side is a symbolic date, datetime, time or
    timedelta. (A date's unit is a day: its numbers are ordinals.)
    """
    if isinstance(a, SDate) or isinstance(b, SDate):
        x, y = as_date(a), as_date(b)
        return False if x is None or y is None else (x, y, DAY_US)
    if isinstance(a, SClock) or isinstance(b, SClock):
        ca, cb = _clock_parts(a), _clock_parts(b)
        if ca is None or cb is None or ca[2] != cb[2]:
            return False
        (x, y), u = _common(ca[:2], cb[:2])
        return x, y, u
    if isinstance(a, SDelta) or isinstance(b, SDelta):
        da, db = _delta_parts(a), _delta_parts(b)
        if da is None or db is None:
            return False
        (x, y), u = _common(da, db)
        return x, y, u
    return None


def eq_dates(a: V, b: V) -> Cond | None:
    """``a == b`` when either side is a symbolic date, datetime, time or timedelta, else None.

    Values of two kinds (a date and a datetime, a naive and an aware datetime) are unequal.
    """
    pair = _operands(a, b)
    if pair is None or pair is False:
        return pair
    return mk_eq(pair[0], pair[1])


def order_dates(op: ast.cmpop, a: V, b: V) -> tuple[Cond, Cond] | None:
    """``a op b`` (``<``...) when either side is a symbolic date-like value: (result, ok)."""
    pair = _operands(a, b)
    if pair is None:
        return None
    if pair is False:
        return False, False  # TypeError: a date ordered against a non-date, naive vs aware
    x, y, _ = pair
    if isinstance(x, int) and isinstance(y, int):
        return bool(ORDER_OPS[type(op)](x, y)), True
    return mk_cmp(_CMP_SYM[type(op)], x, y), True


def _shift(e: Term, days: Term) -> R:
    """The date ``days`` after the ordinal ``e`` (OverflowError outside Python's dates)."""
    out = e + days
    if isinstance(out, int):
        return R(UNDEF, False) if not DATE_MIN <= out <= DATE_MAX else R(dt.date.fromordinal(out))
    return R(SDate(out), AND(mk_cmp(">=", out, DATE_MIN), mk_cmp("<=", out, DATE_MAX)))


def _delta(n: Term, unit: int = DAY_US) -> R:
    """A timedelta of ``n * unit`` microseconds (OverflowError beyond ``timedelta.max``)."""
    lo, hi = _DELTA_MIN_US // unit, _DELTA_MAX_US // unit
    if isinstance(n, int):
        return R(dt.timedelta(microseconds=n * unit)) if lo <= n <= hi else R(UNDEF, False)
    return R(SDelta(n, unit), AND(mk_cmp(">=", n, lo), mk_cmp("<=", n, hi)))


def clock_value(n: Term, unit: int, temporal: Clock, zoned: bool = False) -> R:
    """A datetime (OverflowError outside Python's) or time of ``n * unit`` microseconds."""
    lo, hi = _CLOCK_US[temporal]
    lo, hi = -(-lo // unit), hi // unit
    if isinstance(n, int):
        if not lo <= n <= hi:
            return R(UNDEF, False)
        us = n * unit if temporal == LeafKind.TIME else n * unit - DAY_US  # from 0001-01-01
        moment = dt.datetime.min + dt.timedelta(microseconds=us)
        if temporal == LeafKind.TIME:
            return R(moment.time())
        return R(moment.replace(tzinfo=dt.UTC) if temporal == LeafKind.AWARE else moment)
    ok = AND(mk_cmp(">=", n, lo), mk_cmp("<=", n, hi))
    return R(SClock(n, unit, temporal, zoned=zoned), ok)


def _date_fail(cx: RelationCompiler, op: type[ast.operator], a: V, b: V, node: ast.AST) -> R:
    """Refuse date arithmetic the rules here do not compute, saying what they do."""
    symbol = BINARY[op][0] if op in BINARY else "this operator"
    kinds = f"{type_name(sample(a))} {symbol} {type_name(sample(b))}"
    deltas = [isinstance(sample(v), dt.timedelta) for v in (a, b)]
    if deltas[0] and op in (ast.Div, ast.FloorDiv, ast.Mod):
        instead = (
            "; rather than dividing a timedelta, multiply the other side "
            "(d >= n * timedelta(hours=1)) or read d.days, d.seconds or d.total_seconds()"
        )
    elif any(deltas) and op is ast.Mult:
        instead = "; multiply a timedelta by an int (timedelta(minutes=90), not 1.5 * an hour)"
    else:
        instead = ""
    cx.fail(
        "date arithmetic",
        f"{ast.unparse(node)}: {kinds} is not compiled; relations compute date ± "
        "timedelta (its days), datetime ± timedelta, date - date and datetime - datetime "
        "(a timedelta), timedelta ± timedelta and timedelta * int, and no arithmetic on "
        f"times (Python has none){instead}",
        node,
    )


def arith_dates(
    cx: RelationCompiler, op: type[ast.operator], a: V, b: V, ok: Cond, node: ast.AST
) -> R | None:
    """``a op b`` when either side is a symbolic date-like value, else None."""
    if not (is_date_like(a) or is_date_like(b)):
        return None
    r = _arith(cx, op, a, b, node)
    return R(r.value, AND(ok, r.ok))


def _arith(cx: RelationCompiler, op: type[ast.operator], a: V, b: V, node: ast.AST) -> R:
    ca, cb = _clock_parts(a), _clock_parts(b)
    if ca is not None or cb is not None:
        return _arith_clocks(cx, op, a, b, ca, cb, node)
    da, db = as_date(a), as_date(b)
    if op is ast.Sub and da is not None and db is not None:
        return _delta(da - db)
    ta, tb = _delta_parts(a), _delta_parts(b)
    if op in (ast.Add, ast.Sub) and da is not None and tb is not None:
        days = delta_days(*tb)
        return _shift(da, days if op is ast.Add else -days)  # Python keeps only the days
    if op is ast.Add and db is not None and ta is not None:
        return _shift(db, delta_days(*ta))
    if op in (ast.Add, ast.Sub) and ta is not None and tb is not None:
        (x, y), u = _common(ta, tb)
        return _delta(x + y if op is ast.Add else x - y, u)
    if op is ast.Mult:
        for d, k in ((ta, b), (tb, a)):
            n = None if is_date_like(k) or isinstance(k, dt.timedelta) else as_int_term(k)
            if d is not None and n is not None:
                return _delta(d[0] * n, d[1])
    return _date_fail(cx, op, a, b, node)


def _arith_clocks(
    cx: RelationCompiler,
    op: type[ast.operator],
    a: V,
    b: V,
    ca: tuple[Term, int, Clock] | None,
    cb: tuple[Term, int, Clock] | None,
    node: ast.AST,
) -> R:
    """Arithmetic with a datetime or a time (``ca``/``cb``) on one side (a time takes none)."""
    ta, tb = _delta_parts(a), _delta_parts(b)
    if op is ast.Sub and ca is not None and cb is not None:
        if ca[2] == cb[2] and ca[2] in DATETIMES:  # aware ones: by their UTC times
            (x, y), u = _common(ca[:2], cb[:2])
            return _delta(x - y, u)
    elif op in (ast.Add, ast.Sub) and ca is not None and tb is not None and ca[2] in DATETIMES:
        (x, y), u = _common(ca[:2], tb)
        return clock_value(x + y if op is ast.Add else x - y, u, ca[2], _zoned(a))
    elif op is ast.Add and cb is not None and ta is not None and cb[2] in DATETIMES:
        (x, y), u = _common(ta, cb[:2])
        return clock_value(x + y, u, cb[2], _zoned(b))
    return _date_fail(cx, op, a, b, node)


def neg_delta(v: V) -> R | None:
    """``-v`` of a symbolic timedelta, else None."""
    if isinstance(v, SDelta):
        return _delta(-v.n, v.unit)
    return None


def abs_delta(v: V) -> R | None:
    """``abs(v)`` of a symbolic timedelta, else None."""
    if isinstance(v, SDelta):
        return R(SDelta(cast(z3.ArithRef, z3.If(v.n >= 0, v.n, -v.n)), v.unit))
    return None


_DELTA_SCALES = {
    "days": DAY_US,
    "seconds": SEC_US,
    "microseconds": 1,
    "milliseconds": 1000,
    "minutes": 60 * SEC_US,
    "hours": 3600 * SEC_US,
    "weeks": 7 * DAY_US,
}
"""``timedelta``'s arguments in the order of its signature, each in microseconds."""

_CONSTRUCTED = {
    dt.date: "date",
    dt.datetime: "datetime",
    dt.time: "time",
    dt.timezone: "timezone",
}


def date_call(
    cx: RelationCompiler, cls: type, args: list[V], kwargs: dict[str, V], node: ast.AST
) -> R:
    """``date(...)``, ``datetime(...)``, ``time(...)`` or ``timedelta(...)``.

    Of constants, Python's; a timedelta of record values takes ints for any of its
    arguments (positionally in its signature's order, or by name), kept exactly in
    microseconds; the others take constants only.
    """
    symbolic = any(is_sym(x) for x in [*args, *kwargs.values()])
    if not symbolic:
        if UNDEF in args or UNDEF in kwargs.values():
            return R(UNDEF, False)
        try:
            return R(cls(*args, **kwargs))
        except Exception:
            return R(UNDEF, False)
    if cls in _CONSTRUCTED:
        name = _CONSTRUCTED[cls]
        cx.fail(
            f"{name}() of record values",
            f"{name}(...) takes constants only; compare a field's .year/.month/.day "
            "(.hour/.minute) instead",
            node,
        )
    named = dict(kwargs)
    if len(args) > len(_DELTA_SCALES):
        cx.fail("timedelta() of record values", "timedelta() takes at most 7 arguments", node)
    for key, x in zip(_DELTA_SCALES, args, strict=False):
        if key in named:
            cx.fail("timedelta() of record values", f"{key}= given twice", node)
        named[key] = x
    unknown = sorted(set(named) - set(_DELTA_SCALES))
    if unknown:
        cx.fail("timedelta() of record values", f"no argument {', '.join(unknown)}=", node)
    const_us = 0
    terms: list[tuple[Term, int]] = []
    for key, x in named.items():
        if not is_sym(x):
            try:
                const_us += dt.timedelta(**{key: x}) // _ONE_US  # type: ignore[arg-type]
            except Exception:
                return R(UNDEF, False)
            continue
        t = as_int_term(x)
        if t is None:
            cx.fail("timedelta() of record values", f"{key}= of record values needs an int", node)
        terms.append((t, _DELTA_SCALES[key]))
    _, unit = _common(_coarse(const_us), *((0, _coarse(scale)[1]) for _, scale in terms))
    total: Term = const_us // unit
    for t, scale in terms:
        total = total + t * (scale // unit) if scale != unit else total + t
    return _delta(total, unit)


def ite_dates(c: Cond, a: V, b: V) -> V | None:
    """``a if c else b`` for two date-like values of one kind (one may be constant)."""
    pair = _operands(a, b) if is_date_like(a) or is_date_like(b) else None
    if pair is None or pair is False:
        return None
    x, y, unit = pair
    e = cast(z3.ArithRef, mk_ite(c, x, y))
    if isinstance(a, SDate) or isinstance(b, SDate):
        return SDate(e)
    clock = _clock_parts(a) or _clock_parts(b)
    if clock is not None:
        return SClock(e, unit, clock[2], zoned=_zoned(a, b))
    return SDelta(e, unit)


def as_numbers(
    cx: RelationCompiler, values: list[V], name: str, node: ast.AST
) -> tuple[list[Term], Callable[[Term], R]] | None:
    """Dates as ordinals, datetimes, times or timedeltas as numbers of one unit.

    For ``min``/``max``/``sum``. Returns the numbers and the function that turns a number
    back into a value of the kind (with the condition that it does not overflow), or None
    when no value is date-like. Mixing kinds, or an ``Optional`` value, raises
    `RelationDefinitionError`.
    """
    if not any(is_date_like(v) or isinstance(v, (dt.date, dt.time, dt.timedelta)) for v in values):
        return None
    dates = [as_date(v) for v in values]
    if all(d is not None for d in dates):
        return [cast(Term, d) for d in dates], _date_back
    clocks = [_clock_parts(v) for v in values]
    kinds = {c[2] for c in clocks if c is not None}
    if all(c is not None for c in clocks) and len(kinds) == 1:
        nums, unit = _common(*(cast(tuple[Term, int, Clock], c)[:2] for c in clocks))
        temporal = kinds.pop()
        zoned = _zoned(*values)
        return nums, lambda t: clock_value(t, unit, temporal, zoned)
    deltas = [_delta_parts(v) for v in values]
    if all(d is not None for d in deltas):
        nums, unit = _common(*(cast(tuple[Term, int], d) for d in deltas))
        return nums, lambda t: _delta(t, unit)
    hint = " (sum() of timedeltas needs start=timedelta())" if name == "sum" else ""
    cx.fail(
        f"{name}() of mixed values",
        f"{name}() over dates, datetimes, times or timedeltas needs all its values of one "
        f"kind, none Optional{hint}",
        node,
    )


def _date_back(t: Term) -> R:
    return R(dt.date.fromordinal(t) if isinstance(t, int) else SDate(t))


def member_dates(x: SDate | SClock, elems: list[object]) -> Cond:
    """``x in elems`` for a symbolic date, datetime or time among constants.

    Values of another kind never match, nor one finer than ``x``'s unit (a datetime with
    microseconds is never a whole second).
    """
    if isinstance(x, SDate):
        return in_codes(x.e, sorted({cast(dt.date, e).toordinal() for e in elems if _is_date(e)}))
    found: set[int] = set()
    for e in elems:
        c = _clock_parts(e)
        if c is None or c[2] != x.temporal:
            continue
        n, unit = cast(tuple[int, int, Clock], c)[:2]
        if (n * unit) % x.unit == 0:
            found.add(n * unit // x.unit)
    return in_codes(x.n, sorted(found))
