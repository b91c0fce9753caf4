"""Operations Python refuses for the types of their operands, whatever the values.

An exception inside a relation means "violated" (`decorator.evaluate`), and the compiler
tracks where each expression raises (``ok``). Some exceptions do not depend on the record:
``Decimal * float``, ``time + timedelta``, ``date < datetime`` or ``None + 1`` raise
``TypeError`` for every value of those types. Compiled as "violated", such a relation
surfaces only after solving, as an unsat core, and its author hunts for a logic error that
is not there. So the operator rules call `refuse_type_error` first: it runs Python's own
operator on one sample value of each operand's type (`sample`; a constant is its own
sample) and, where Python raises ``TypeError``, reports `RelationRaisesError` with
Python's message and the fix for that pair of types (`_FIXES`).

Only operands whose Python type the compiler knows have a sample; a value chosen by a
condition (``ctx.prices.get(self.item)``, which may be None) has none, as its exception
depends on the record.
"""

from __future__ import annotations

import ast
import datetime as dt
import decimal
import operator
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import z3

from factorspec_sdk.relations.compiler.uuids import USE
from factorspec_sdk.relations.compiler.values import (
    UNDEF,
    Num,
    SClock,
    SCode,
    SDate,
    SDelta,
    SFloat,
    SUuid,
    V,
    is_sym,
)
from factorspec_sdk.relations.kinds import LeafKind

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import RelationCompiler

__all__ = ["BINARY", "operand_texts", "refuse_type_error", "sample", "type_name"]

BINARY: dict[type[ast.AST], tuple[str, Callable[[Any, Any], object]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod),
    ast.Pow: ("**", operator.pow),
    ast.Lt: ("<", operator.lt),
    ast.LtE: ("<=", operator.le),
    ast.Gt: (">", operator.gt),
    ast.GtE: (">=", operator.ge),
}
"""Python's operator and its symbol, per AST operator (arithmetic and ordering)."""

_NUMBERS: dict[Num, object] = {Num.DECIMAL: decimal.Decimal(1), Num.FLOAT: 1.0, Num.INT: 1}
_CLOCKS: dict[LeafKind, object] = {
    LeafKind.TIME: dt.time(12),
    LeafKind.DATETIME: dt.datetime(2000, 1, 1, 12),
    LeafKind.AWARE: dt.datetime(2000, 1, 1, 12, tzinfo=dt.UTC),
}
_NO_SAMPLE = object()


def sample(v: V) -> object:
    """A Python value of ``v``'s type (a constant is its own), else a private marker.

    Record values of the number, date and str kinds have one; a value chosen by a
    condition, an Optional, a list or a model has none.
    """
    if isinstance(v, SFloat):
        return _NUMBERS[v.kind]
    if isinstance(v, SDate):
        return dt.date(2000, 1, 1)
    if isinstance(v, SClock):
        return _CLOCKS[v.temporal]
    if isinstance(v, SDelta):
        return dt.timedelta(seconds=1)
    if isinstance(v, SUuid):
        return uuid.UUID(int=0)
    if isinstance(v, SCode):  # "" rather than a longer text: "" * n stays cheap
        if v.enum_type is not None and not issubclass(v.enum_type, str):
            return next(iter(v.enum_type))
        return "" if v.strs else 1
    if isinstance(v, z3.BoolRef):
        return True
    if isinstance(v, z3.ArithRef) and v.is_int():
        return 1
    if is_sym(v) or v is UNDEF:
        return _NO_SAMPLE
    return v


def type_name(v: object) -> str:
    """The name of a sample's type as a user writes it (``Decimal``, ``time``)."""
    if v is _NO_SAMPLE:
        return "value"
    return "None" if v is None else type(v).__name__


def refuse_type_error(cx: RelationCompiler, op: type[ast.AST], a: V, b: V, node: ast.AST) -> None:
    """Report `RelationRaisesError` when Python raises ``TypeError`` for ``a op b``'s types."""
    sa, sb = sample(a), sample(b)
    if sa is _NO_SAMPLE or sb is _NO_SAMPLE:
        return
    symbol, python_op = BINARY[op]
    try:
        python_op(sa, sb)
    except TypeError as exc:
        exception = f"TypeError: {exc}"
    except Exception:  # another exception depends on the values (ZeroDivisionError...)
        return
    else:
        return
    left, right = operand_texts(node) or (f"the {type_name(sa)}", f"the {type_name(sb)}")
    fix = next(
        (text for f in _FIXES if (text := f(sa, sb, a, b, left, right, symbol)) is not None),
        f"give {left} and {right} types that Python can combine with {symbol}",
    )
    cx.raises(
        f"{type_name(sa)} {symbol} {type_name(sb)}",
        exception,
        f"{ast.unparse(node)} raises {exception} for every value of these types, so no "
        "record that evaluates it satisfies the relation (an exception means violated); "
        f"{fix}",
        node,
    )


def operand_texts(node: ast.AST) -> tuple[str, str] | None:
    """The source of the two operands of a binary operation or a one-step comparison."""
    if isinstance(node, ast.BinOp):
        return ast.unparse(node.left), ast.unparse(node.right)
    if isinstance(node, ast.Compare) and len(node.comparators) == 1:
        return ast.unparse(node.left), ast.unparse(node.comparators[0])
    return None


Fix = Callable[[object, object, V, V, str, str, str], "str | None"]


def _decimal_float(
    sa: object, sb: object, a: V, b: V, left: str, right: str, symbol: str
) -> str | None:
    kinds = {type(sa), type(sb)}
    if kinds != {decimal.Decimal, float}:
        return None
    is_float_left = isinstance(sa, float)
    floating, exact = (left, right) if is_float_left else (right, left)
    value = a if is_float_left else b
    if isinstance(value, SFloat):  # a float field of the record
        return (
            f"give both one type: make {floating} a Decimal field (exact arithmetic), or "
            f"{exact} a float"
        )
    return (
        f"make {floating} a Decimal where it is defined (a context field `Decimal`, which "
        f'Pydantic reads from "0.2" exactly), or convert it in the relation: '
        f"Decimal(str({floating}))"
    )


def _time_arithmetic(
    sa: object, sb: object, a: V, b: V, left: str, right: str, symbol: str
) -> str | None:
    if dt.time not in (type(sa), type(sb)) or symbol in ("<", "<=", ">", ">="):
        return None
    t = left if type(sa) is dt.time else right
    if type(sa) is type(sb) and symbol == "-":
        what = (
            f"the minutes from {right} to {left} are ({left}.hour * 60 + {left}.minute) - "
            f"({right}.hour * 60 + {right}.minute)"
        )
    else:
        what = (
            f"to say that a time t is 30 minutes after {t}, compare minutes since midnight "
            f"(t.hour * 60 + t.minute == {t}.hour * 60 + {t}.minute + 30)"
        )
    return (
        "Python has no arithmetic on times: relations compare times (<, ==, in, min, max) "
        f"and read their .hour/.minute/.second/.microsecond; {what}, or make the fields "
        "datetimes, which subtract to a timedelta and take + timedelta(minutes=30) (their "
        ".time() is the clock)"
    )


def _date_and_int(
    sa: object, sb: object, a: V, b: V, left: str, right: str, symbol: str
) -> str | None:
    pairs = ((sa, sb, left, right), (sb, sa, right, left))
    for d, n, dtext, ntext in pairs:
        if isinstance(d, dt.date) and isinstance(n, int) and symbol in ("+", "-"):
            unit = "hours" if isinstance(d, dt.datetime) else "days"
            return f"add a timedelta: {dtext} {symbol} timedelta({unit}={ntext})"
    return None


def _date_and_datetime(
    sa: object, sb: object, a: V, b: V, left: str, right: str, symbol: str
) -> str | None:
    if {type(sa), type(sb)} != {dt.date, dt.datetime}:
        return None
    moment = left if type(sa) is dt.datetime else right
    return (
        f"use values of one kind: {moment}.date() is its date (a date {symbol} a date), or "
        "compare the datetime with a datetime"
    )


def _naive_and_aware(
    sa: object, sb: object, a: V, b: V, left: str, right: str, symbol: str
) -> str | None:
    if not (isinstance(sa, dt.datetime) and isinstance(sb, dt.datetime)):
        return None
    return (
        "make both aware (an AwareDatetime field, constants with tzinfo=timezone.utc) or both naive"
    )


def _none(sa: object, sb: object, a: V, b: V, left: str, right: str, symbol: str) -> str | None:
    if sa is not None and sb is not None:
        return None
    text = left if sa is None else right
    return f"{text} is None: give it a value, or guard it ({text} is not None and ...)"


def _uuid(sa: object, sb: object, a: V, b: V, left: str, right: str, symbol: str) -> str | None:
    if not (isinstance(sa, uuid.UUID) or isinstance(sb, uuid.UUID)):
        return None
    return USE


_FIXES: tuple[Fix, ...] = (
    _decimal_float,
    _time_arithmetic,
    _date_and_int,
    _date_and_datetime,
    _naive_and_aware,
    _none,
    _uuid,
)
"""What to write instead, per pair of operand types (the first that answers)."""
