"""Operators: ``and``/``or``/``not``, arithmetic, comparisons, ``in``, ``x if c else y``.

Each operator has Python's semantics on concrete values and, on record values, dispatches to
the rules of the value kinds (`ints` for Int/Bool terms, `codes` for str/Enum codes, `dates`
for dates and timedeltas) after
distributing over `SChoice` alternatives and stripping ``Optional`` (`SMaybe`) values.
"""

from __future__ import annotations

import ast
import decimal
import fractions
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, cast

import z3

from factorspec_sdk.relations.compiler.choices import (
    choice_cond,
    ite,
    map_choice,
    maybe_parts,
    truthy,
    unwrap,
)
from factorspec_sdk.relations.compiler.codes import eq_code, member_codes
from factorspec_sdk.relations.compiler.dates import (
    arith_dates,
    eq_dates,
    member_dates,
    neg_delta,
    order_dates,
)
from factorspec_sdk.relations.compiler.float_compare import order_floats
from factorspec_sdk.relations.compiler.floats import arith_floats, divide_float, neg_abs_float
from factorspec_sdk.relations.compiler.ints import (
    ORDER_OPS,
    arith_terms,
    as_int_term,
    eq_terms,
    order_terms,
)
from factorspec_sdk.relations.compiler.raises import refuse_type_error
from factorspec_sdk.relations.compiler.terms import (
    AND,
    IMPLIES,
    ITE_COND,
    NOT,
    OR,
    Cond,
    in_codes,
)
from factorspec_sdk.relations.compiler.uuids import eq_uuids, refuse_uuid
from factorspec_sdk.relations.compiler.values import (
    UNDEF,
    R,
    SChoice,
    SClock,
    SCode,
    Scope,
    SDate,
    SDict,
    SFloat,
    SMaybe,
    SObj,
    SSeq,
    V,
    is_sym,
)

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import ExprRule, RelationCompiler

__all__ = ["RULES", "arith", "contains", "eq", "order"]

_ARITH: dict[type[ast.operator], Callable[[object, object], object]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


# --------------------------------------------------------------------------- boolean operators


def _e_bool_op(cx: RelationCompiler, node: ast.BoolOp, scope: Scope) -> R:
    is_and = isinstance(node.op, ast.And)
    results: list[R] = []
    for operand in node.values:
        r = cx.eval(operand, scope)
        results.append(r)
        t = truthy(cx, r.value)
        if (is_and and t is False) or (not is_and and t is True):
            break  # concretely short-circuited: the rest is never evaluated
    # ok: each operand's ok, required only when the previous ones did not short-circuit.
    ok: Cond = results[-1].ok
    for r in reversed(results[:-1]):
        t = truthy(cx, r.value)
        go_on = t if is_and else NOT(t)
        ok = AND(r.ok, IMPLIES(go_on, ok))
    if all(isinstance(r.value, (bool, z3.BoolRef)) for r in results):
        conds = [cast(Cond, r.value) for r in results]
        return R(AND(*conds) if is_and else OR(*conds), ok)
    value: V = results[-1].value
    for r in reversed(results[:-1]):
        t = truthy(cx, r.value)
        value = ite(cx, t, value, r.value) if is_and else ite(cx, t, r.value, value)
    return R(value, ok)


def _e_unary_op(cx: RelationCompiler, node: ast.UnaryOp, scope: Scope) -> R:
    r = cx.eval(node.operand, scope)
    v = r.value
    if isinstance(node.op, ast.Not):
        return R(NOT(truthy(cx, v)), r.ok)
    if isinstance(node.op, ast.Invert):
        cx.fail("bitwise operator", "~ is not supported", node)
    v, ok2 = unwrap(v)
    if not is_sym(v):
        try:
            out = -cast(int, v) if isinstance(node.op, ast.USub) else +cast(int, v)
        except Exception:
            return R(UNDEF, False)
        return R(out, AND(r.ok, ok2))
    refuse_uuid(cx, v, "arithmetic on UUIDs", node)
    if isinstance(v, SFloat):
        out_f = neg_abs_float(v, False) if isinstance(node.op, ast.USub) else v
        return R(out_f, AND(r.ok, ok2))
    negated = neg_delta(v) if isinstance(node.op, ast.USub) else None
    if negated is not None:
        return R(negated.value, AND(r.ok, ok2, negated.ok))
    t = as_int_term(v)
    if t is None:
        return R(UNDEF, False)
    return R(-t if isinstance(node.op, ast.USub) else t, AND(r.ok, ok2))


# --------------------------------------------------------------------------- arithmetic


def _e_bin_op(cx: RelationCompiler, node: ast.BinOp, scope: Scope) -> R:
    op = type(node.op)
    if op is ast.Div:
        a, b = cx.eval(node.left, scope), cx.eval(node.right, scope)
        av, oka = unwrap(a.value)
        bv, okb = unwrap(b.value)
        ok = AND(a.ok, b.ok, oka, okb)
        refuse_type_error(cx, op, av, bv, node)
        if not is_sym(av) and not is_sym(bv):
            try:
                return R(cast(float, av) / cast(float, bv), ok)
            except Exception:
                return R(UNDEF, False)
        d = divide_float(cx, av, bv, ok, node)
        return R(d.value, AND(ok, d.ok))
    if op not in _ARITH:
        names: dict[type[ast.operator], tuple[str, str]] = {
            ast.MatMult: ("@ operator", "matrix product is not supported"),
        }
        construct, msg = names.get(op, ("bitwise operator", "bitwise operators"))
        cx.fail(construct, msg + " is not supported", node)
    a, b = cx.eval(node.left, scope), cx.eval(node.right, scope)
    r = arith(cx, op, a.value, b.value, node)
    return R(r.value, AND(a.ok, b.ok, r.ok))


def arith(
    cx: RelationCompiler, op: type[ast.operator], a: V, b: V, node: ast.AST, *, typed: bool = True
) -> R:
    """An arithmetic operation with Python semantics.

    ``typed``: the operands' types are known (not alternatives of a choice), so a
    ``TypeError`` Python raises for them whatever their values is reported
    (`raises.refuse_type_error`) instead of compiled as "violated".
    """
    if isinstance(a, SChoice):
        return map_choice(cx, a, lambda x: arith(cx, op, x, b, node, typed=False))
    if isinstance(b, SChoice):
        return map_choice(cx, b, lambda y: arith(cx, op, a, y, node, typed=False))
    a, oka = unwrap(a)
    b, okb = unwrap(b)
    if typed:
        refuse_type_error(cx, op, a, b, node)
    if not is_sym(a) and not is_sym(b):
        try:
            return R(_ARITH[op](a, b), AND(oka, okb))
        except Exception:
            return R(UNDEF, False)
    if isinstance(a, (tuple, SSeq, SDict)) or isinstance(b, (tuple, SSeq, SDict)):
        cx.fail("sequence arithmetic", "+/* on lists or tuples is not supported", node)
    for v in (a, b):
        refuse_uuid(cx, v, "arithmetic on UUIDs", node)
    of_floats = arith_floats(cx, op, a, b, AND(oka, okb), node)
    if of_floats is not None:
        return of_floats
    of_dates = arith_dates(cx, op, a, b, AND(oka, okb), node)
    if of_dates is not None:
        return of_dates
    x, y = as_int_term(a), as_int_term(b)
    if x is None or y is None:
        if isinstance(a, SCode) or isinstance(b, SCode):
            cx.fail("string arithmetic", "arithmetic on str/Enum values", node)
        return R(UNDEF, False)
    return arith_terms(cx, op, x, y, AND(oka, okb), node)


# --------------------------------------------------------------------------- comparisons


def _e_compare(cx: RelationCompiler, node: ast.Compare, scope: Scope) -> R:
    left = cx.eval(node.left, scope)
    conds: list[Cond] = []
    cur = left.value
    ok_chain: list[tuple[Cond, Cond]] = []  # (cond so far, ok of next operand)
    for op, comp in zip(node.ops, node.comparators, strict=True):
        right = cx.eval(comp, scope)
        c, cok = _compare(cx, op, cur, right.value, node)
        ok_chain.append((AND(*conds), AND(right.ok, cok)))
        conds.append(c)
        cur = right.value
        if c is False:
            break
    ok: Cond = left.ok
    for before, step_ok in ok_chain:
        ok = AND(ok, IMPLIES(before, step_ok))
    return R(AND(*conds), ok)


def _compare(cx: RelationCompiler, op: ast.cmpop, a: V, b: V, node: ast.AST) -> tuple[Cond, Cond]:
    """One comparison: (result, ok)."""
    if isinstance(op, (ast.Is, ast.IsNot)):
        if b is None:
            c = _is_none(a)
        elif a is None:
            c = _is_none(b)
        elif not is_sym(a) and not is_sym(b):
            c = a is b
        else:
            cx.fail("`is` comparison with a non-None value", "use == (is only with None)", node)
        return (c if isinstance(op, ast.Is) else NOT(c)), True
    if isinstance(op, (ast.In, ast.NotIn)):
        c2, ok = contains(cx, b, a, node)
        return (c2 if isinstance(op, ast.In) else NOT(c2)), ok
    if isinstance(op, (ast.Eq, ast.NotEq)):
        e = eq(cx, a, b, node)
        return (e if isinstance(op, ast.Eq) else NOT(e)), True
    return order(cx, op, a, b, node)


def _is_none(v: V) -> Cond:
    if isinstance(v, SMaybe):
        return v.null
    if isinstance(v, SChoice):
        return choice_cond([(c, _is_none(x)) for c, x in v.alts])
    return v is None


def eq(cx: RelationCompiler, a: V, b: V, node: ast.AST) -> Cond:
    """``a == b`` with Python semantics (never raises)."""
    if isinstance(a, SChoice):
        return choice_cond([(c, eq(cx, x, b, node)) for c, x in a.alts])
    if isinstance(b, SChoice):
        return choice_cond([(c, eq(cx, a, y, node)) for c, y in b.alts])
    if isinstance(a, SMaybe) or isinstance(b, SMaybe):
        na, ia = maybe_parts(a)
        nb, ib = maybe_parts(b)
        both_null = AND(na, nb)
        if na is True or nb is True:
            return both_null
        return OR(both_null, AND(NOT(na), NOT(nb), eq(cx, ia(), ib(), node)))
    if not is_sym(a) and not is_sym(b):
        try:
            return bool(a == b)
        except Exception:
            return False
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            return False
        return AND(*(eq(cx, x, y, node) for x, y in zip(a, b, strict=True)))
    if isinstance(a, (SObj, SSeq, SDict)) or isinstance(b, (SObj, SSeq, SDict)):
        cx.fail(
            "comparison of models or lists",
            "== on nested models, lists or dicts is not supported; compare their fields",
            node,
        )
    of_uuids = eq_uuids(cx, a, b, node)
    if of_uuids is not None:
        return of_uuids
    of_floats = order_floats(cx, ast.Eq, a, b, node)
    if of_floats is not None:
        return of_floats[0]  # never narrowed: == and != are exact or refused
    of_dates = eq_dates(a, b)
    if of_dates is not None:
        return of_dates
    if isinstance(b, SCode) and not isinstance(a, SCode):
        a, b = b, a
    if isinstance(a, SCode):
        return eq_code(cx, a, b, node)
    if a is None or b is None or a is UNDEF or b is UNDEF:
        return False
    return eq_terms(a, b)


def order(
    cx: RelationCompiler, op: ast.cmpop, a: V, b: V, node: ast.AST, *, typed: bool = True
) -> tuple[Cond, Cond]:
    """``<``, ``<=``, ``>``, ``>=``: (result, ok); ``typed`` as for `arith`."""
    if isinstance(a, SChoice) or isinstance(b, SChoice):
        if isinstance(a, SChoice):
            pairs = [(c, order(cx, op, x, b, node, typed=False)) for c, x in a.alts]
        else:
            pairs = [(c, order(cx, op, a, y, node, typed=False)) for c, y in cast(SChoice, b).alts]
        return _choice_pair(pairs)
    a, oka = unwrap(a)
    b, okb = unwrap(b)
    if typed:
        refuse_type_error(cx, type(op), a, b, node)
    if not is_sym(a) and not is_sym(b):
        try:
            return bool(ORDER_OPS[type(op)](a, b)), AND(oka, okb)
        except Exception:
            return False, False
    for v in (a, b):
        refuse_uuid(cx, v, "ordering comparison of UUIDs", node)
    of_floats = order_floats(cx, type(op), a, b, node)
    if of_floats is not None:
        return of_floats[0], AND(oka, okb, of_floats[1])
    of_dates = order_dates(op, a, b)
    if of_dates is not None:
        return of_dates[0], AND(oka, okb, of_dates[1])
    if isinstance(a, SCode) or isinstance(b, SCode):
        cx.fail(
            "ordering comparison of strings",
            "<, <=, >, >= on str/Enum fields are not supported",
            node,
        )
    if isinstance(a, (tuple, SSeq, SObj, SDict)) or isinstance(b, (tuple, SSeq, SObj, SDict)):
        cx.fail("ordering comparison of sequences", "<, <= on tuples/lists", node)
    c = order_terms(op, a, b)
    if c is None:
        return False, False
    return c, AND(oka, okb)


def _choice_pair(pairs: list[tuple[Cond, tuple[Cond, Cond]]]) -> tuple[Cond, Cond]:
    """(result, ok) per alternative, merged into one (result, ok)."""
    return (
        choice_cond([(c, p[0]) for c, p in pairs]),
        choice_cond([(c, p[1]) for c, p in pairs]),
    )


# --------------------------------------------------------------------------- membership


def contains(cx: RelationCompiler, container: V, x: V, node: ast.AST) -> tuple[Cond, Cond]:
    """``x in container``: (result, ok)."""
    if isinstance(container, SChoice):
        return _choice_pair([(c, contains(cx, v, x, node)) for c, v in container.alts])
    if isinstance(container, SMaybe):
        c, okc = contains(cx, container.inner(), x, node)
        return c, AND(NOT(container.null), okc)
    if isinstance(container, SDict):  # a key of the dict
        container = container.keys
    if isinstance(container, SSeq):
        if container.lazy:
            # Stops at the first match; an error after it is never reached.
            found: Cond = False
            ok: Cond = True
            for it in container.items:
                ok = AND(ok, IMPLIES(AND(NOT(found), it.err), False))
                found = OR(found, AND(it.present, eq(cx, it.value, x, node)))
            return found, ok
        return OR(*(AND(it.present, eq(cx, it.value, x, node)) for it in container.items)), True
    if isinstance(container, SCode) and container.strs and container.enum_type is None:
        cx.fail("substring test on a field", "`text in field` tests a substring", node)
    if isinstance(container, (SCode, z3.ExprRef, SObj)):
        cx.fail("membership in a field value", "`in` needs a collection", node)
    if isinstance(container, tuple) and is_sym(container):
        return OR(*(eq(cx, v, x, node) for v in container)), True
    if not is_sym(x):
        try:
            return bool(x in cast(Iterable[object], container)), True
        except Exception:
            return False, False
    if isinstance(container, str):
        cx.fail("substring test on a field", '`field in "text"` is not supported', node)
    if isinstance(container, Mapping):
        elems: Iterable[object] = container.keys()
    elif isinstance(container, Iterable):
        elems = container
    else:
        return False, False
    return _member_const(cx, x, list(elems), node), True


def _whole(e: object) -> bool:
    """Whether a constant equals an int in Python (``4 == 4.0``): an int, or a whole number."""
    if isinstance(e, int):
        return True
    if isinstance(e, (float, fractions.Fraction)):
        return math.isfinite(e) and e == int(e)
    if isinstance(e, decimal.Decimal):
        return e.is_finite() and e == int(e)
    return False


def _member_const(cx: RelationCompiler, x: V, elems: list[object], node: ast.AST) -> Cond:
    sym = [e for e in elems if is_sym(e)]
    if sym:  # terms among the constants (a bound context's ints and dates): one by one
        consts = [e for e in elems if not is_sym(e)]
        return OR(_member_const(cx, x, consts, node), *(eq(cx, x, e, node) for e in sym))
    x0, okx = unwrap(x) if isinstance(x, SMaybe) else (x, True)
    if isinstance(x, SMaybe):
        none_in = any(e is None for e in elems)
        inner = _member_const(cx, x0, [e for e in elems if e is not None], node)
        return OR(AND(x.null, none_in), AND(okx, inner))
    if isinstance(x0, tuple) and len(x0) > 0:
        # Group tuples by their first component: Or_k (x0 == k and rest in group_k).
        groups: dict[object, list[tuple[object, ...]]] = {}
        for e in elems:
            if isinstance(e, tuple) and len(e) == len(x0):
                try:
                    groups.setdefault(e[0], []).append(e[1:])
                except TypeError:
                    return OR(*(eq(cx, x0, e2, node) for e2 in elems))
        rest = x0[1:]
        return OR(
            *(
                AND(
                    eq(cx, x0[0], k, node),
                    _member_const(cx, rest, list(tails), node) if rest else True,
                )
                for k, tails in groups.items()
            )
        )
    if isinstance(x0, SCode) and x0.strs and x0.enum_type is None:
        return member_codes(cx, x0, elems)
    if isinstance(x0, (SDate, SClock)):
        return member_dates(x0, elems)
    if isinstance(x0, z3.ArithRef) and not isinstance(x0, z3.BoolRef):
        ints = sorted({int(cast(int, e)) for e in elems if _whole(e)})
        return in_codes(x0, ints)
    return OR(*(eq(cx, x0, e, node) for e in elems))


# --------------------------------------------------------------------------- conditional


def _e_if_exp(cx: RelationCompiler, node: ast.IfExp, scope: Scope) -> R:
    c = cx.eval(node.test, scope)
    t = truthy(cx, c.value)
    if t is True:
        a = cx.eval(node.body, scope)
        return R(a.value, AND(c.ok, a.ok))
    if t is False:
        b = cx.eval(node.orelse, scope)
        return R(b.value, AND(c.ok, b.ok))
    a, b = cx.eval(node.body, scope), cx.eval(node.orelse, scope)
    return R(ite(cx, t, a.value, b.value), AND(c.ok, ITE_COND(t, a.ok, b.ok)))


RULES: dict[type[ast.AST], ExprRule] = {
    ast.BoolOp: _e_bool_op,
    ast.UnaryOp: _e_unary_op,
    ast.BinOp: _e_bin_op,
    ast.Compare: _e_compare,
    ast.IfExp: _e_if_exp,
}
"""The expressions this module evaluates."""
