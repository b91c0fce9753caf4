"""Calls: the supported builtins and the methods of constants (``get``, ``count``...).

The builtins are ``all``, ``any``, ``sum``, ``len``, ``min``, ``max``, ``zip``, ``enumerate``,
``range``, ``abs``, ``bool``, ``list``, ``tuple``, ``round``, ``int``, ``float``, ``str`` (of
constants) and ``distinct`` (`SUPPORTED_CALLS`), plus ``math.isclose`` and ``Decimal(...)``
of constants (their float and Decimal rules are in `floats` and `float_compare`).

On constant arguments a call runs the Python function itself; on record values each builtin
has a rule (`CALLS`), over the items of `iterate`'s view of its argument: those that fold an
iterable into one value (``all``, ``any``, ``sum``, ``min``, ``max``, ``distinct``) are
`reductions`', the others are here.
"""

from __future__ import annotations

import ast
import builtins
import datetime as dt
import decimal
import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, cast

import z3

from factorspec_sdk.relations.checks import call_refusal
from factorspec_sdk.relations.compiler.choices import (
    choice,
    choice_cond,
    map_choice,
    truthy,
    unwrap,
)
from factorspec_sdk.relations.compiler.codes import affix, str_length
from factorspec_sdk.relations.compiler.date_parts import date_method
from factorspec_sdk.relations.compiler.dates import abs_delta, date_call
from factorspec_sdk.relations.compiler.fields import node_value
from factorspec_sdk.relations.compiler.float_compare import isclose_floats
from factorspec_sdk.relations.compiler.floats import (
    neg_abs_float,
    round_float,
    to_float,
    truncate_float,
)
from factorspec_sdk.relations.compiler.ints import as_int_term
from factorspec_sdk.relations.compiler.names import eval_each
from factorspec_sdk.relations.compiler.operators import eq
from factorspec_sdk.relations.compiler.reductions import REDUCTIONS, distinct_of, sum_of
from factorspec_sdk.relations.compiler.sequences import consumed_ok, count, iterate, one_iterable
from factorspec_sdk.relations.compiler.terms import (
    AND,
    ITE_COND,
    NOT,
    OR,
    Cond,
    max0,
    min2,
    to_bool,
)
from factorspec_sdk.relations.compiler.uuids import refuse_uuid
from factorspec_sdk.relations.compiler.values import (
    UNDEF,
    Item,
    R,
    SChoice,
    SCode,
    Scope,
    SDict,
    SFloat,
    SFunc,
    SMaybe,
    SObj,
    SSeq,
    V,
    is_sym,
)
from factorspec_sdk.relations.decorator import distinct
from factorspec_sdk.relations.layout import (
    LayoutNode,
    ListLayout,
    ObjectLayout,
    Path,
    UnionLayout,
    branch_part,
    path_name,
)

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import CallRule, ExprRule, RelationCompiler

__all__ = ["CALLS", "RULES"]

_CONSTRUCTORS = (
    dt.date,
    dt.datetime,
    dt.time,
    dt.timedelta,
    dt.timezone,
    decimal.Decimal,
    uuid.UUID,
    math.isclose,
)
"""The classes and functions a relation may call beside the builtins."""


def _e_call(cx: RelationCompiler, node: ast.Call, scope: Scope) -> R:
    fn = cx.eval(node.func, scope)
    f = fn.value
    if not isinstance(f, SFunc) and f not in _CONSTRUCTORS:
        name = ast.unparse(node.func)
        cx.fail(f"call to {name}()", call_refusal(name, f), node)
    args, arg_oks = eval_each(cx, node.args, scope)
    oks: list[Cond] = [fn.ok, *arg_oks]
    kwargs: dict[str, V] = {}
    for kw in node.keywords:
        if kw.arg is None:
            cx.fail("keyword unpacking", "**kwargs are not supported", kw)
        r = cx.eval(kw.value, scope)
        kwargs[kw.arg] = r.value
        oks.append(r.ok)
    cx.node = node
    if f is math.isclose:
        if not any(is_sym(a) for a in [*args, *kwargs.values()]):
            try:
                out = R(math.isclose(*args, **kwargs))  # type: ignore[arg-type]
            except Exception:
                out = R(UNDEF, False)
        else:
            out = isclose_floats(cx, args, kwargs, node)
    elif f is decimal.Decimal or f is uuid.UUID:
        name = cast(type, f).__name__
        if any(is_sym(a) for a in [*args, *kwargs.values()]):
            cx.fail(f"{name}() of record values", f"{ast.unparse(node)}: of a record value", node)
        try:
            out = R(cast(type, f)(*args, **kwargs))
        except Exception:
            out = R(UNDEF, False)
    elif not isinstance(f, SFunc):
        out = date_call(cx, cast(type, f), args, kwargs, node)
    else:
        out = _call(cx, f, args, kwargs, node)
    return R(out.value, AND(*oks, out.ok))


def _call(cx: RelationCompiler, f: SFunc, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    """Apply a supported builtin."""
    if f.bound is not None:
        return _method(cx, f, args, kwargs, node)
    if not any(is_sym(a) for a in args) and not any(is_sym(v) for v in kwargs.values()):
        if f.name == "distinct":
            try:
                return R(distinct(cast(Iterable[object], args[0])))
            except Exception:
                return R(UNDEF, False)
        if UNDEF in args:
            return R(UNDEF, False)
        pyf = cast(Callable[..., object], getattr(builtins, f.name))
        try:
            return R(pyf(*args, **kwargs))
        except Exception:
            return R(UNDEF, False)
    return CALLS[f.name](cx, args, kwargs, node)


def _method(
    cx: RelationCompiler, f: SFunc, args: list[V], kwargs: dict[str, V], node: ast.AST
) -> R:
    obj = f.bound
    if isinstance(obj, SDict):
        return _dict_method(cx, obj, f.name, args, kwargs, node)
    if isinstance(obj, SCode):  # startswith / endswith of a str value
        if kwargs:
            cx.fail(f"call to {f.name}()", f"{f.name}() with keywords", node)
        return R(affix(cx, obj, f.name, args, node))
    of_date = date_method(cx, f, args, node)
    if of_date is not None:
        return of_date
    if not any(is_sym(a) for a in args):
        try:
            return R(getattr(obj, f.name)(*args, **kwargs))
        except Exception:
            return R(UNDEF, False)
    if f.name == "get" and isinstance(obj, Mapping) and 1 <= len(args) <= 2:
        default = args[1] if len(args) > 1 else None
        alts: list[tuple[Cond, V]] = []
        for k, v in obj.items():
            c = eq(cx, args[0], k, node)
            if c is not False:
                alts.append((c, v))
        alts.append((True, default))
        return R(choice(cx, alts))
    if f.name == "count" and isinstance(obj, (list, tuple)) and len(args) == 1:
        terms = [eq(cx, args[0], e, node) for e in obj]
        return sum_of(cx, [[t for t in terms]], {}, node)
    cx.fail(
        f"call to {f.name}()",
        f"{f.name}() of a constant with a value read from the record: such methods take "
        "constants, except .get(key, default) of a dict and .count(x) of a list; look values "
        "up instead (ctx.d[self.k], self.x in ctx.items, ctx.items[self.i])",
        node,
    )


def _dict_method(
    cx: RelationCompiler, d: SDict, name: str, args: list[V], kwargs: dict[str, V], node: ast.AST
) -> R:
    """``keys()``, ``values()``, ``items()`` and ``get(k, default=None)`` of a dict field."""
    if kwargs:
        cx.fail(f"call to {name}()", f"{name}() with keywords", node)
    if name in ("keys", "values", "items") and not args:
        if name == "keys":
            return R(d.keys)
        if name == "values":
            return R(d.values)
        pairs = [
            Item(k.present, (k.value, v.value))
            for k, v in zip(d.keys.items, d.values.items, strict=True)
        ]
        return R(SSeq(pairs, d.keys.length, True))
    if name == "get" and 1 <= len(args) <= 2:
        alts: list[tuple[Cond, V]] = []
        for k, v in zip(d.keys.items, d.values.items, strict=True):
            c = AND(k.present, eq(cx, k.value, args[0], node))
            if c is not False:
                alts.append((c, v.value))
        alts.append((True, args[1] if len(args) > 1 else None))
        return R(choice(cx, alts))
    cx.fail(f"call to {name}()", "dict fields support keys(), values(), items(), get()", node)


def dict_key_factors(cx: RelationCompiler) -> list[tuple[str, frozenset[str], z3.BoolRef]]:
    """One factor per dict field of the record: its keys are distinct.

    A JSON object that repeats a key parses to a dict with fewer entries (the last one
    wins), so the writer never repeats one: two keys that may both be texts no relation
    names differ by their ``same`` variable (`codes.same_text`). Call after the relations
    (a dict is laid out only where a relation reads it). Returns (factor name, variables,
    formula) per dict.
    """
    out: list[tuple[str, frozenset[str], z3.BoolRef]] = []
    for path, node in _dict_paths(cx, cx.layout, ()):

        def build(path: Path = path, node: ListLayout = node) -> Cond:
            d = node_value(cx, path, node, check_null=False)
            assert isinstance(d, SDict)
            return to_bool(distinct_of(cx, [d.keys], {}, _KEYS).value)  # as `distinct(d)`

        formula, variables = cx.derive(build)
        if variables:
            out.append((f"keys of {path_name(path)}", variables, formula))
    return out


_KEYS = ast.Pass(lineno=0)
"""Where an error of the keys factor points: no line of a relation (it never fails)."""


def _dict_paths(
    cx: RelationCompiler, node: LayoutNode, path: Path
) -> list[tuple[Path, ListLayout]]:
    """The dict fields in ``node`` at ``path``, at every concrete path (lists unrolled)."""
    out: list[tuple[Path, ListLayout]] = []
    if isinstance(node, ObjectLayout):
        for f in node.fields:
            out += _dict_paths(cx, f.node, (*path, f.name))
    elif isinstance(node, UnionLayout):
        for b in node.branches:
            out += _dict_paths(cx, b, (*path, branch_part(b.model)))
    elif isinstance(node, ListLayout):
        if node.mapping:
            out.append((path, node))
        for i in range(cx.list_bound(path, node)):
            out += _dict_paths(cx, node.item, (*path, i))
    return out


def _round(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    if not 1 <= len(args) <= 2 or kwargs.keys() - {"ndigits"}:
        cx.fail("call to round()", "round(x) or round(x, n)", node)
    v, ok = unwrap(args[0])
    ndigits = args[1] if len(args) > 1 else kwargs.get("ndigits")
    out = round_float(cx, v, ndigits, node)
    if out is not None:
        return R(out, ok)
    t = as_int_term(v)
    if t is None or is_sym(ndigits) or (isinstance(ndigits, int) and ndigits < 0):
        cx.fail("call to round()", "round() of a number, with a constant ndigits >= 0", node)
    return R(t, ok)  # round() of an int is the int (ndigits >= 0; a negative one is refused)


def _int_call(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    if len(args) != 1 or kwargs:
        cx.fail("call to int()", "int(x) of one number", node)
    v, ok = unwrap(args[0])
    out = truncate_float(cx, v, node)
    if out is not None:
        return R(out, ok)
    t = as_int_term(v)
    if t is None:
        cx.fail("call to int()", "int() of a number (not of a string)", node)
    return R(t, ok)


def _float_call(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    if len(args) != 1 or kwargs:
        cx.fail("call to float()", "float(x) of one number", node)
    v, ok = unwrap(args[0])
    out = to_float(cx, v)
    if out is None:
        cx.fail("call to float()", "float() of a number (not of a string)", node)
    return R(out, ok)


def _len(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    v = args[0] if len(args) == 1 else cx.fail("call to len()", "len() takes one argument", node)
    if isinstance(v, SMaybe):
        r = _len(cx, [v.inner()], kwargs, node)
        return R(r.value, AND(NOT(v.null), r.ok))
    if isinstance(v, SChoice):
        return map_choice(cx, v, lambda x: _len(cx, [x], kwargs, node))
    if isinstance(v, SDict):
        return R(v.keys.length)
    if isinstance(v, SSeq):
        if v.lazy:
            cx.fail("len() of a generator", "use a list comprehension or sum(1 for ...)", node)
        return R(v.length)
    if isinstance(v, tuple):
        return R(len(v))
    if isinstance(v, SCode):
        return R(str_length(cx, v, node))
    return R(UNDEF, False)


def _abs(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    v, ok = unwrap(args[0])
    refuse_uuid(cx, v, "abs() of a UUID", node)
    if isinstance(v, SFloat):
        return R(neg_abs_float(v, True), ok)
    of_delta = abs_delta(v)
    if of_delta is not None:
        return R(of_delta.value, ok)
    t = as_int_term(v)
    if t is None or isinstance(t, int):
        return R(UNDEF, False) if t is None else R(abs(t), ok)
    return R(z3.If(t >= 0, t, -t), ok)


def _bool(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    return R(truthy(cx, args[0]) if args else False)


def _str(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    """``str()`` takes constants only (``Decimal(str(ctx.rate))``): its rule refuses the rest."""
    cx.fail(
        "str() of record values",
        f"{ast.unparse(node)}: relations compare strings but do not build them from record "
        'values; compare the value itself (self.n == 3, not str(self.n) == "3"), or its '
        "text with a Literal field",
        node,
    )


def _zip(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    if kwargs:
        cx.fail("zip() with keywords", "zip(strict=...) is not supported", node)
    its = [iterate(cx, a, node) for a in args]
    for it in its:
        if not it.seq.contiguous:
            cx.fail("zip over a filtered sequence", "zip lists, not filtered ones", node)
    n = min((len(it.seq.items) for it in its), default=0)
    items: list[Item] = []
    for j in range(n):
        parts = [it.seq.items[j] for it in its]
        present = AND(*(p.present for p in parts))
        err: Cond = False
        before: Cond = True
        for p in parts:
            err = OR(err, AND(before, p.err))
            before = AND(before, p.present)
        items.append(Item(present, tuple(p.value for p in parts), err))
    lengths = [it.seq.length for it in its]
    length: z3.ArithRef | int = lengths[0] if lengths else 0
    for ln in lengths[1:]:
        length = min2(length, ln)
    return R(SSeq(items, length, True, True), AND(*(it.ok for it in its)))


def _enumerate(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    start = kwargs.get("start", args[1] if len(args) > 1 else 0)
    if is_sym(start) or not isinstance(start, int):
        cx.fail("enumerate() start", "start must be a constant int", node)
    it = iterate(cx, args[0], node)
    items: list[Item] = []
    seen: z3.ArithRef | int = start
    for j, x in enumerate(it.seq.items):
        idx: z3.ArithRef | int = j + start if it.seq.contiguous else seen
        items.append(Item(x.present, (idx, x.value), x.err))
        if not it.seq.contiguous:
            seen = seen + (1 if x.present is True else z3.If(to_bool(x.present), 1, 0))
    return R(SSeq(items, it.seq.length, it.seq.contiguous, True), it.ok)


def _range(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    if not 1 <= len(args) <= 3:
        cx.fail("call to range()", "range() takes 1 to 3 arguments", node)
    lo: V = 0 if len(args) == 1 else args[0]
    hi: V = args[0] if len(args) == 1 else args[1]
    step = args[2] if len(args) == 3 else 1
    if is_sym(step) or not isinstance(step, int) or step <= 0:
        cx.fail("range() step", "range() needs a constant positive step", node)
    lo_t, hi_t = as_int_term(lo), as_int_term(hi)
    if lo_t is None or hi_t is None:
        return R(UNDEF, False)
    lo_b, _ = _interval(cx, lo_t)
    _, hi_b = _interval(cx, hi_t)
    if lo_b is None or hi_b is None:
        cx.fail(
            "range() over an unbounded value",
            "range() bounds read from the record must be list lengths",
            node,
        )
    items: list[Item] = []
    j = 0
    while True:
        v = lo_t + j * step
        vb = lo_b + j * step
        if vb >= hi_b:
            break
        items.append(Item(v < hi_t, v))
        j += 1
    if step == 1:
        length = max0(hi_t - lo_t)
    else:
        length = count(items)
    return R(SSeq(items, length, True))


def _interval(cx: RelationCompiler, e: z3.ArithRef | int) -> tuple[int | None, int | None]:
    """A cheap interval for length-like terms (lengths, constants, +, -, If)."""
    if isinstance(e, int):
        return e, e
    if z3.is_int_value(e):
        v = cast(z3.IntNumRef, e).as_long()
        return v, v
    if z3.is_const(e):
        rec = cx.vars.get(str(e))
        if rec is not None:
            return rec.ge, rec.le
        return None, None
    kids = e.children()
    if z3.is_add(e):
        ivs = [_interval(cx, k) for k in kids]
        lo = sum(i[0] for i in ivs) if all(i[0] is not None for i in ivs) else None  # type: ignore[misc]
        hi = sum(i[1] for i in ivs) if all(i[1] is not None for i in ivs) else None  # type: ignore[misc]
        return lo, hi
    if z3.is_sub(e) and len(kids) == 2:
        (a0, a1), (b0, b1) = _interval(cx, kids[0]), _interval(cx, kids[1])
        return (
            a0 - b1 if a0 is not None and b1 is not None else None,
            a1 - b0 if a1 is not None and b0 is not None else None,
        )
    if z3.is_app_of(e, z3.Z3_OP_ITE):
        (a0, a1), (b0, b1) = _interval(cx, kids[1]), _interval(cx, kids[2])
        return (
            min(a0, b0) if a0 is not None and b0 is not None else None,
            max(a1, b1) if a1 is not None and b1 is not None else None,
        )
    return None, None


def _list(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    it = one_iterable(cx, args, node, "list")
    seq = it.seq
    return R(
        SSeq(
            [Item(x.present, x.value) for x in seq.items],
            seq.length if seq.contiguous else count(seq.items),
            seq.contiguous,
        ),
        consumed_ok(it),
    )


def _isinstance(cx: RelationCompiler, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
    """``isinstance(x, Model)`` of a model value, a union of models or an ``Optional`` one."""
    if len(args) != 2 or kwargs:
        cx.fail("call to isinstance()", "isinstance() takes a value and a class", node)
    classes = args[1] if isinstance(args[1], tuple) else (args[1],)
    classes = tuple(  # int, float, bool, list, tuple: the builtins relations may call
        getattr(builtins, c.name) if isinstance(c, SFunc) and c.bound is None else c
        for c in classes
    )
    if not all(isinstance(c, type) for c in classes):
        cx.fail("call to isinstance()", "isinstance() needs a class or a tuple of classes", node)
    return R(_instance_of(cx, args[0], cast(tuple[type, ...], classes), node))


def _instance_of(cx: RelationCompiler, v: V, classes: tuple[type, ...], node: ast.AST) -> Cond:
    if isinstance(v, SObj):
        return issubclass(v.layout.model, classes)
    if isinstance(v, SChoice):
        return choice_cond([(c, _instance_of(cx, x, classes, node)) for c, x in v.alts])
    if isinstance(v, SMaybe):
        return ITE_COND(v.null, type(None) in classes, _instance_of(cx, v.inner(), classes, node))
    if is_sym(v):
        cx.fail(
            "isinstance() of a field value",
            "isinstance() tests models, unions of models and Optional ones; compare other "
            "values instead",
            node,
        )
    return isinstance(v, classes)


CALLS: dict[str, CallRule] = {
    **REDUCTIONS,
    "len": _len,
    "zip": _zip,
    "enumerate": _enumerate,
    "range": _range,
    "abs": _abs,
    "round": _round,
    "int": _int_call,
    "float": _float_call,
    "bool": _bool,
    "str": _str,
    "list": _list,
    "tuple": _list,
    "isinstance": _isinstance,
}
"""The rule of each supported builtin on record values (one per name in `SUPPORTED_CALLS`)."""

RULES: dict[type[ast.AST], ExprRule] = {ast.Call: _e_call}
"""The expressions this module evaluates."""
