"""The builtins that fold an iterable into one value, on record values.

They are ``all``, ``any``, ``sum``, ``min``, ``max`` and ``distinct`` (`REDUCTIONS`). Each
takes the items of `iterate`'s view of its argument (an unrolled list, a filtered
comprehension, a generator whose items may raise when reached) and gives Python's result and
the condition that no item it reaches raises. Floats and Decimals go to their rules in
`floats` (`sum_floats`, `minmax_floats`); dates, datetimes, times and timedeltas become
numbers of one unit (`dates.as_numbers`) and back; the rest are int terms.
"""

from __future__ import annotations

import ast
import datetime as dt
from typing import TYPE_CHECKING, cast

import z3

from factorspec_sdk.relations.compiler.choices import ite, truthy, unwrap
from factorspec_sdk.relations.compiler.dates import as_numbers
from factorspec_sdk.relations.compiler.floats import minmax_floats, sum_floats
from factorspec_sdk.relations.compiler.ints import as_int_term
from factorspec_sdk.relations.compiler.operators import eq
from factorspec_sdk.relations.compiler.sequences import consumed_ok, iterate, one_iterable
from factorspec_sdk.relations.compiler.terms import AND, IMPLIES, NOT, OR, Cond, to_bool
from factorspec_sdk.relations.compiler.uuids import refuse_uuid
from factorspec_sdk.relations.compiler.values import (
    UNDEF,
    Item,
    R,
    SClock,
    SCode,
    SDate,
    SFloat,
    SSeq,
    V,
)

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import CallRule, RelationCompiler

__all__ = ["REDUCTIONS", "distinct_of", "sum_of"]


def _float_operand(cx: RelationCompiler, x: Item, node: ast.AST) -> V:
    """An item of ``sum``/``min``/``max`` for the float rules (an Optional one is refused)."""
    v, okv = unwrap(x.value)
    if okv is not True and isinstance(v, SFloat):
        cx.fail("sum/min/max of optional floats", "over Optional float values", node)
    return v


def _int_operand(
    cx: RelationCompiler, x: Item, node: ast.AST, strs: tuple[str, str], optional: tuple[str, str]
) -> z3.ArithRef | int | None:
    """The int term of an item of ``sum``/``min``/``max`` (None: not a number, ok is false)."""
    v, okv = unwrap(x.value)
    refuse_uuid(cx, v, "sum/min/max of UUIDs", node)
    t = as_int_term(v)
    if t is None:
        if isinstance(v, SCode):
            cx.fail(*strs, node)
        return None
    if okv is not True:
        cx.fail(*optional, node)
    return t


def _all(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    it = one_iterable(cx, args, node, "all")
    value: list[Cond] = []
    ok: list[Cond] = [it.ok]
    reached: Cond = True
    for x in it.seq.items:
        t = truthy(cx, x.value)
        if x.err is not False:
            ok.append(NOT(AND(reached, x.err)))
        if x.present is False:
            continue
        step = IMPLIES(x.present, t)
        value.append(step)
        if x.err is not False or any(y.err is not False for y in it.seq.items):
            reached = AND(reached, step)
    return R(AND(*value), AND(*ok))


def _any(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    it = one_iterable(cx, args, node, "any")
    value: list[Cond] = []
    ok: list[Cond] = [it.ok]
    reached: Cond = True
    has_err = any(y.err is not False for y in it.seq.items)
    for x in it.seq.items:
        if x.err is not False:
            ok.append(NOT(AND(reached, x.err)))
        if x.present is False:
            continue
        step = AND(x.present, truthy(cx, x.value))
        value.append(step)
        if has_err:
            reached = AND(reached, NOT(step))
    return R(OR(*value), AND(*ok))


def sum_of(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    """``sum(xs)``/``sum(xs, start)`` (``.count(x)`` of a constant list is a sum of conditions)."""
    if not args:
        cx.fail("call to sum()", "sum() needs an iterable", node)
    start = kwargs.get("start", args[1] if len(args) > 1 else 0)
    it = iterate(cx, args[0], node)
    live = [x for x in it.seq.items if x.present is not False]
    pairs = [(x.present, _float_operand(cx, x, node)) for x in live]
    of_floats = sum_floats(cx, pairs, start, node)
    if of_floats is not None:
        return R(of_floats, consumed_ok(it))
    numbers = as_numbers(cx, [x.value for x in live] + [start], "sum", node)
    if numbers is not None:  # timedeltas (a sum of dates raises TypeError in Python)
        nums, back = numbers
        if isinstance(start, (dt.date, dt.time)) or any(
            isinstance(x.value, (SDate, SClock)) for x in live
        ):
            cx.fail("sum() of dates", "dates and times do not add up; subtract them", node)
        seq = SSeq([Item(x.present, n, x.err) for x, n in zip(live, nums, strict=False)], 0, False)
        r = sum_of(cx, [seq], {"start": nums[-1]}, node)
        delta = back(cast("z3.ArithRef | int", r.value))
        return R(delta.value, AND(r.ok, consumed_ok(it), delta.ok))
    total: z3.ArithRef | int = 0
    terms: list[z3.ArithRef] = []
    for x in it.seq.items:
        if x.present is False:
            continue
        t = _int_operand(
            cx,
            x,
            node,
            ("sum of strings", "sum() of str values"),
            ("sum of optional values", "sum() over Optional values"),
        )
        if t is None:
            return R(UNDEF, False)
        if x.present is True:
            if isinstance(t, int):
                total += t
            else:
                terms.append(t)
        else:
            terms.append(cast(z3.ArithRef, z3.If(x.present, t, 0)))
    st = as_int_term(start)
    if st is None:
        return R(UNDEF, False)
    out: z3.ArithRef | int = total + st
    if terms:
        s = z3.Sum(*terms) if len(terms) > 1 else terms[0]
        out = s + out if not (isinstance(out, int) and out == 0) else s
    return R(out, consumed_ok(it))


def _minmax(
    cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST, is_min: bool
) -> R:
    name = "min" if is_min else "max"
    if "key" in kwargs:
        cx.fail(f"{name}() with key=", "key= is not supported", node)
    has_default = "default" in kwargs
    if len(args) == 1:
        it = iterate(cx, args[0], node)
        items = it.seq.items
        ok0 = consumed_ok(it)
    else:
        items = [Item(True, a) for a in args]
        ok0 = True
    items = [x for x in items if x.present is not False]
    extra = [kwargs["default"]] if has_default else []
    pairs = [(x.present, _float_operand(cx, x, node)) for x in items]
    of_floats = minmax_floats(cx, pairs, is_min, node)
    if of_floats is not None:
        if has_default:
            cx.fail(f"{name}() of floats with default=", "default= is not supported", node)
        return R(of_floats, ok0)
    numbers = as_numbers(cx, [x.value for x in items] + extra, name, node)
    if numbers is not None:  # dates or timedeltas: their ordinals or days, and back
        nums, back = numbers
        items = [Item(x.present, n, x.err) for x, n in zip(items, nums, strict=False)]
        kwargs = {**kwargs, "default": nums[-1]} if has_default else kwargs
        r = _minmax(cx, [SSeq(items, len(items), False)], kwargs, node, is_min)
        if r.value is UNDEF:
            return r
        out = back(cast("z3.ArithRef | int", r.value))
        return R(out.value, AND(r.ok, ok0, out.ok))
    best: z3.ArithRef | int | None = None
    seen: Cond = False
    for x in items:
        if x.present is False:
            continue
        t = _int_operand(
            cx,
            x,
            node,
            (f"{name}() of strings", f"{name}() of str values"),
            (f"{name}() of optional values", "Optional values"),
        )
        if t is None:
            return R(UNDEF, False)
        if best is None:
            best = t
            seen = x.present
            continue
        better = t < best if is_min else t > best
        if isinstance(better, bool) and x.present is True:
            if better:
                best = t
        else:
            take = AND(x.present, OR(NOT(seen), better))
            best = cast(z3.ArithRef, z3.If(to_bool(take), t, best))
        seen = OR(seen, x.present)
    if best is None:
        if has_default:
            return R(kwargs["default"], ok0)
        return R(UNDEF, False)
    if has_default:
        d = as_int_term(kwargs["default"])
        if d is None:
            cx.fail(f"{name}() default", "default must be an int", node)
        return R(ite(cx, seen, best, d), ok0)
    return R(best, AND(ok0, seen))


def _min(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    return _minmax(cx, args, kwargs, node, True)


def _max(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    return _minmax(cx, args, kwargs, node, False)


def distinct_of(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    """``distinct(xs)``: no two present items equal (the keys of a dict field, too)."""
    it = one_iterable(cx, args, node, "distinct")
    items = [x for x in it.seq.items if x.present is not False]
    conds: list[Cond] = []
    contiguous = it.seq.contiguous
    for j, b in enumerate(items):
        for a in items[:j]:
            guard = b.present if contiguous else AND(a.present, b.present)
            conds.append(IMPLIES(guard, NOT(eq(cx, a.value, b.value, node))))
    return R(AND(*conds), consumed_ok(it))


REDUCTIONS: dict[str, CallRule] = {
    "all": _all,
    "any": _any,
    "sum": sum_of,
    "min": _min,
    "max": _max,
    "distinct": distinct_of,
}
"""The rule of each folding builtin on record values (`builtin_calls.CALLS` holds them)."""
