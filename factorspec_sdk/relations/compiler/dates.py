"""The date value kind: ``datetime.date`` fields and whole-day ``timedelta`` values.

A date is its ordinal (``date.toordinal()``: 1 is 0001-01-01) as a Z3 ``Int``, bounded by
Python's first and last dates or by the field's ``ge``/``le`` dates (`SDate`); a timedelta
computed from record values has whole days only, its ``days`` as an ``Int`` (`SDelta`).
Concrete ``date`` and ``timedelta`` objects (from the context, ``date(2026, 12, 1)``,
``timedelta(days=2)``) are plain Python values. Every rule has Python's semantics exactly,
with integer arithmetic only (no approximation anywhere):

- ``==``/``!=``/``<``... between dates, and between timedeltas (a constant one compared to
  the microsecond); a date never equals a non-date (a ``datetime`` included), and ordering a
  date against a non-date raises ``TypeError`` (``ok`` is false), as in Python.
- ``date - date`` is a timedelta; ``date + timedelta`` / ``date - timedelta`` is a date (only
  the timedelta's ``days`` count, as in Python; ``OverflowError`` outside years 1-9999 makes
  ``ok`` false); timedeltas add, subtract, negate, take ``abs`` and multiply by ints.
- ``.year``/``.month``/``.day`` of a date field are variables of their own, ``year(d)``,
  ``month(d)``, ``day(d)``, tied to the date by the factor ``calendar of d`` (`date_links`):
  ``d == days_before_year(y) + days_before_month(y, m) + day`` with real month lengths and
  leap years, which fixes exactly one (y, m, day) per ordinal. (Z3 solves that tie 10-60x
  faster than the same parts as functions of the ordinal.) Of a computed date (``d +
  timedelta(days=1)``) they are those functions: the civil-from-days algorithm (H. Hinnant's;
  divisions by constants only, linear and exact for every ordinal). ``.weekday()`` is
  ``(ordinal + 6) % 7``, ``.isoweekday()`` one more, ``.toordinal()`` the ordinal.
- A timedelta's ``.days``; ``.seconds`` and ``.microseconds`` are 0; ``.total_seconds()`` is
  ``days * 86400`` (Python returns that as a float, which is exact below 2**53).
- ``timedelta(days=..., weeks=...)`` of record ints makes an `SDelta`; ``date(y, m, d)``
  takes constants only.

Anything else on these values raises `RelationDefinitionError` naming the construct.
"""

from __future__ import annotations

import ast
import datetime as dt
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeAlias, cast

import z3

from factorspec_sdk.relations.compiler.ints import ORDER_OPS, as_int_term
from factorspec_sdk.relations.compiler.records import VarRecord
from factorspec_sdk.relations.compiler.terms import AND, Cond, in_codes, mk_cmp, mk_eq, mk_ite
from factorspec_sdk.relations.compiler.values import UNDEF, R, SDate, SDelta, SFunc, V
from factorspec_sdk.relations.layout import (
    DATE_MAX,
    DATE_MIN,
    LeafLayout,
    Path,
    date_range,
    path_name,
)

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import RelationCompiler

__all__ = [
    "abs_delta",
    "arith_dates",
    "as_numbers",
    "as_date",
    "date_attr",
    "date_call",
    "date_leaf",
    "date_links",
    "calendar_tie",
    "date_part_bounds",
    "date_method",
    "eq_dates",
    "is_date_like",
    "ite_dates",
    "member_dates",
    "neg_delta",
    "order_dates",
]

_DAY_US = 86_400 * 10**6
_MAX_DAYS = 999_999_999
"""``timedelta.max.days``: a timedelta beyond it raises ``OverflowError``."""
_CMP_SYM: dict[type[ast.cmpop], str] = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
Term: TypeAlias = "z3.ArithRef | int"


_PART_BOUNDS = {"year": (1, 9999), "month": (1, 12), "day": (1, 31)}
_DAYS_BEFORE_MONTH = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def date_part_bounds(name: str) -> tuple[str, int, int] | None:
    """``(part, lo, hi)`` when ``name`` is ``year(...)``, ``month(...)`` or ``day(...)``."""
    for part, (lo, hi) in _PART_BOUNDS.items():
        if name.startswith(f"{part}(") and name.endswith(")"):
            return part, lo, hi
    return None


def date_leaf(cx: RelationCompiler, path: Path, node: LeafLayout) -> SDate:
    """The ordinal variable of a date leaf, bounded by the schema or Python's dates."""
    ge, le = date_range(node)
    return SDate(cast(z3.ArithRef, cx.var(path, "date", ge=ge, le=le).term), path)


def _part_vars(cx: RelationCompiler, path: Path) -> dict[str, z3.ArithRef]:
    """``year(d)``, ``month(d)``, ``day(d)`` of the date leaf at ``path``, marked as read.

    All three at once: the tie that defines them needs each.
    """
    out = {}
    for part, (lo, hi) in _PART_BOUNDS.items():
        name = f"{part}({path_name(path)})"
        out[part] = cast(z3.ArithRef, cx.var(path, "datepart", name=name, ge=lo, le=hi).term)
    return out


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
    """Factors that tie a date leaf to its year, month and day where relations read them.

    Returns (factor name, variables, formula) per date: ``calendar of d``.
    """
    dates = {r.path: r for r in records.values() if r.kind == "date"}
    parts: dict[Path, dict[str, VarRecord]] = {}
    for rec in records.values():
        found = date_part_bounds(rec.name) if rec.kind == "datepart" else None
        if found is not None:
            parts.setdefault(rec.path, {})[found[0]] = rec
    out: list[tuple[str, frozenset[str], z3.BoolRef]] = []
    for path, ps in parts.items():
        date = dates[path]
        y, m, d = (cast(z3.ArithRef, ps[k].term) for k in ("year", "month", "day"))
        formula = calendar_tie(cast(z3.ArithRef, date.term), y, m, d)
        names = frozenset({date.name, *(r.name for r in ps.values())})
        out.append((f"calendar of {path_name(path)}", names, formula))
    return out


def _is_date(v: V) -> bool:
    return isinstance(v, dt.date) and not isinstance(v, dt.datetime)


def as_date(v: V) -> Term | None:
    """The ordinal of a date value (symbolic or constant), or None for a non-date."""
    if isinstance(v, SDate):
        return v.e
    if _is_date(v):
        return cast(dt.date, v).toordinal()
    return None


def _whole_days(v: V) -> Term | None:
    """The days of a whole-day timedelta (symbolic or constant), else None."""
    if isinstance(v, SDelta):
        return v.days
    if isinstance(v, dt.timedelta) and not v.seconds and not v.microseconds:
        return v.days
    return None


def _micros(v: V) -> Term | None:
    """A timedelta in microseconds (symbolic or constant), or None for a non-timedelta."""
    if isinstance(v, SDelta):
        return v.days * _DAY_US
    if isinstance(v, dt.timedelta):
        return v // dt.timedelta(microseconds=1)
    return None


def is_date_like(v: V) -> bool:
    """Whether ``v`` is a symbolic date or timedelta (the values this module's rules take)."""
    return isinstance(v, (SDate, SDelta))


def eq_dates(a: V, b: V) -> Cond | None:
    """``a == b`` when either side is a symbolic date or timedelta, else None."""
    if isinstance(a, SDate) or isinstance(b, SDate):
        x, y = as_date(a), as_date(b)
        return False if x is None or y is None else mk_eq(x, y)
    if isinstance(a, SDelta) or isinstance(b, SDelta):
        x, y = _micros(a), _micros(b)
        return False if x is None or y is None else mk_eq(x, y)
    return None


def order_dates(op: ast.cmpop, a: V, b: V) -> tuple[Cond, Cond] | None:
    """``a op b`` (``<``...) when either side is a symbolic date or timedelta: (result, ok)."""
    if isinstance(a, SDate) or isinstance(b, SDate):
        x, y = as_date(a), as_date(b)
    elif isinstance(a, SDelta) or isinstance(b, SDelta):
        x, y = _micros(a), _micros(b)
    else:
        return None
    if x is None or y is None:
        return False, False  # TypeError: a date ordered against a non-date
    if isinstance(x, int) and isinstance(y, int):
        return bool(ORDER_OPS[type(op)](x, y)), True
    return mk_cmp(_CMP_SYM[type(op)], x, y), True


def _shift(e: Term, days: Term) -> R:
    """The date ``days`` after the ordinal ``e`` (OverflowError outside Python's dates)."""
    out = e + days
    if isinstance(out, int):
        return R(UNDEF, False) if not DATE_MIN <= out <= DATE_MAX else R(dt.date.fromordinal(out))
    return R(SDate(out), AND(mk_cmp(">=", out, DATE_MIN), mk_cmp("<=", out, DATE_MAX)))


def _delta(days: Term) -> R:
    """A timedelta of ``days`` (OverflowError beyond ``timedelta.max``)."""
    if isinstance(days, int):
        return R(dt.timedelta(days=days)) if abs(days) <= _MAX_DAYS else R(UNDEF, False)
    ok = AND(mk_cmp(">=", days, -_MAX_DAYS), mk_cmp("<=", days, _MAX_DAYS))
    return R(SDelta(days), ok)


def _date_fail(cx: RelationCompiler, op: type[ast.operator], node: ast.AST) -> R:
    sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}.get(op, "this operator")
    cx.fail(
        "date arithmetic",
        f"{sym} on dates/timedeltas: a date takes + and - of a timedelta, a date minus a "
        "date is a timedelta, timedeltas add, subtract and multiply by ints "
        "(write timedelta(days=n) to add n days)",
        node,
    )


def arith_dates(
    cx: RelationCompiler, op: type[ast.operator], a: V, b: V, ok: Cond, node: ast.AST
) -> R | None:
    """``a op b`` when either side is a symbolic date or timedelta, else None."""
    if not (is_date_like(a) or is_date_like(b)):
        return None
    r = _arith(cx, op, a, b, node)
    return R(r.value, AND(ok, r.ok))


def _arith(cx: RelationCompiler, op: type[ast.operator], a: V, b: V, node: ast.AST) -> R:
    da, db = as_date(a), as_date(b)
    if op is ast.Sub and da is not None and db is not None:
        return _delta(da - db)
    if op in (ast.Add, ast.Sub) and da is not None and isinstance(b, (SDelta, dt.timedelta)):
        if isinstance(b, SDelta):
            return _shift(da, b.days if op is ast.Add else -b.days)
        return _shift(da, (b if op is ast.Add else -b).days)  # Python keeps only the days
    if op is ast.Add and db is not None and isinstance(a, (SDelta, dt.timedelta)):
        return _shift(db, a.days)
    if op in (ast.Add, ast.Sub):
        x, y = _whole_days(a), _whole_days(b)
        if x is not None and y is not None:
            return _delta(x + y if op is ast.Add else x - y)
    if op is ast.Mult:
        for d, k in ((a, b), (b, a)):
            days = _whole_days(d)
            n = None if isinstance(k, (SDelta, dt.timedelta)) else as_int_term(k)
            if days is not None and n is not None and isinstance(d, (SDelta, dt.timedelta)):
                return _delta(days * n)
    return _date_fail(cx, op, node)


def neg_delta(v: V) -> R | None:
    """``-v`` of a symbolic timedelta, else None."""
    if isinstance(v, SDelta):
        return _delta(-v.days)
    return None


def abs_delta(v: V) -> R | None:
    """``abs(v)`` of a symbolic timedelta, else None."""
    if isinstance(v, SDelta):
        return R(SDelta(cast(z3.ArithRef, z3.If(v.days >= 0, v.days, -v.days))))
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


def date_attr(cx: RelationCompiler, v: V, name: str, node: ast.AST) -> R | None:
    """``v.name`` of a symbolic date or timedelta (a method becomes an `SFunc`), else None."""
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
    if isinstance(v, SDelta):
        if name == "days":
            return R(v.days)
        if name in ("seconds", "microseconds"):
            return R(0)
        if name == "total_seconds":
            return R(SFunc(name, v))
        cx.fail(
            f"attribute .{name} of a timedelta",
            "timedeltas offer .days/.seconds/.microseconds and .total_seconds()",
            node,
        )
    return None


def date_method(cx: RelationCompiler, f: SFunc, args: list[V], node: ast.AST) -> R | None:
    """A method of a symbolic date or timedelta (``weekday()``...), else None."""
    v = f.bound
    if not is_date_like(v):
        return None
    if args:
        cx.fail(f"call to {f.name}()", f"{f.name}() takes no arguments", node)
    if isinstance(v, SDate):
        weekday = (v.e + 6) % 7
        return R({"weekday": weekday, "isoweekday": weekday + 1, "toordinal": v.e}[f.name])
    assert isinstance(v, SDelta)
    return R(v.days * 86_400)


def date_call(
    cx: RelationCompiler, cls: type, args: list[V], kwargs: dict[str, V], node: ast.AST
) -> R:
    """``date(...)`` or ``timedelta(...)``: constants run Python's; timedeltas take int terms.

    A timedelta of record values may set ``days`` and ``weeks`` (positionally, ``days`` only).
    """
    symbolic = any(isinstance(x, (z3.ExprRef, SDate, SDelta)) for x in [*args, *kwargs.values()])
    if not symbolic:
        if UNDEF in args or UNDEF in kwargs.values():
            return R(UNDEF, False)
        try:
            return R(cls(*args, **kwargs))
        except Exception:
            return R(UNDEF, False)
    if cls is dt.date:
        cx.fail(
            "date() of record values",
            "date(...) takes constants only; compare a date field's .year/.month/.day instead",
            node,
        )
    named = dict(kwargs)
    if len(args) > 1 or (args and "days" in named):
        cx.fail(
            "timedelta() of record values",
            "a timedelta of record values takes days= and weeks= only",
            node,
        )
    if args:
        named["days"] = args[0]
    extra = sorted(
        k
        for k, x in named.items()
        if k not in ("days", "weeks") and (isinstance(x, z3.ExprRef) or x != 0)
    )
    if extra:
        cx.fail(
            "timedelta() of record values",
            f"a timedelta of record values takes days= and weeks= only, not {', '.join(extra)}=",
            node,
        )
    total: Term = 0
    for key, scale in (("days", 1), ("weeks", 7)):
        if key not in named:
            continue
        t = as_int_term(named[key])
        if t is None:
            cx.fail("timedelta() of record values", f"{key}= needs an int", node)
        total = total + t * scale if scale != 1 else total + t
    return _delta(total)


def ite_dates(c: Cond, a: V, b: V) -> V | None:
    """``a if c else b`` for two dates or two timedeltas (one may be a constant), else None."""
    if isinstance(a, SDate) or isinstance(b, SDate):
        x, y = as_date(a), as_date(b)
        if x is None or y is None:
            return None
        return SDate(cast(z3.ArithRef, mk_ite(c, x, y)))
    if isinstance(a, SDelta) or isinstance(b, SDelta):
        x, y = _whole_days(a), _whole_days(b)
        if x is None or y is None:
            return None
        return SDelta(cast(z3.ArithRef, mk_ite(c, x, y)))
    return None


def as_numbers(
    cx: RelationCompiler, values: list[V], name: str, node: ast.AST
) -> tuple[list[Term], Callable[[Term], R]] | None:
    """Dates as ordinals, or whole-day timedeltas as days, for ``min``/``max``/``sum``.

    Returns the numbers and the function that turns a number back into a date or a
    timedelta (with the condition that the timedelta does not overflow), or None when no
    value is a date or timedelta. Mixing kinds, or an ``Optional`` value, raises
    `RelationDefinitionError`.
    """
    if not any(is_date_like(v) or _is_date(v) or isinstance(v, dt.timedelta) for v in values):
        return None
    dates = [as_date(v) for v in values]
    if all(d is not None for d in dates):
        return [cast(Term, d) for d in dates], _date_back
    days = [_whole_days(v) for v in values]
    if all(d is not None for d in days):
        return [cast(Term, d) for d in days], _delta_back
    hint = " (sum() of timedeltas needs start=timedelta())" if name == "sum" else ""
    cx.fail(
        f"{name}() of mixed values",
        f"{name}() over dates or timedeltas needs all its values of one kind (dates, or "
        f"timedeltas of whole days), none Optional{hint}",
        node,
    )


def _date_back(t: Term) -> R:
    return R(dt.date.fromordinal(t) if isinstance(t, int) else SDate(t))


def _delta_back(t: Term) -> R:
    return _delta(t)


def member_dates(x: SDate, elems: list[object]) -> Cond:
    """``x in elems`` for a symbolic date among constants (non-dates never match)."""
    return in_codes(x.e, sorted({cast(dt.date, e).toordinal() for e in elems if _is_date(e)}))
