"""Values under conditions: ``a if c else b``, If-chains of alternatives, truthiness.

`ite` merges two values under a condition, structure by structure (tuples item-wise,
sequences element-wise, optionals by None-ness, terms and codes by the rules of their value
kind) and falls back to an `SChoice` when they cannot be merged; `choice` folds an If-chain;
`map_choice` applies an operation to each alternative. `truthy` is ``bool(v)`` as a
condition and `unwrap` strips an ``Optional`` (using None raises, so ``ok`` needs not-null).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

import z3

from factorspec_sdk.relations.compiler.codes import ite_code, truthy_code
from factorspec_sdk.relations.compiler.dates import ite_dates
from factorspec_sdk.relations.compiler.floats import ite_floats, truthy_float
from factorspec_sdk.relations.compiler.ints import as_bool_term, as_int_term
from factorspec_sdk.relations.compiler.terms import AND, ITE_COND, NOT, Cond, mk_ite
from factorspec_sdk.relations.compiler.uuids import ite_uuids
from factorspec_sdk.relations.compiler.values import (
    UNDEF,
    Item,
    R,
    SChoice,
    SClock,
    SCode,
    SDate,
    SDelta,
    SDict,
    SFloat,
    SFunc,
    SMaybe,
    SObj,
    SSeq,
    SUuid,
    V,
    is_sym,
)

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import RelationCompiler

__all__ = ["choice", "choice_cond", "ite", "map_choice", "maybe_parts", "truthy", "unwrap"]


def choice(cx: RelationCompiler, alts: Sequence[tuple[Cond, V]]) -> V:
    """The first alternative whose condition holds (the last one is the default)."""
    live = [(c, v) for c, v in alts if c is not False]
    if not live:
        return UNDEF
    for k, (c, _) in enumerate(live):
        if c is True:
            live = live[: k + 1]
            break
    if len(live) > 2 and any(isinstance(v, (SObj, SChoice)) for _, v in live):
        flat: list[tuple[Cond, V]] = []
        for c, v in live[:-1]:
            flat.append((c, v))
        flat.append((True, live[-1][1]))
        return SChoice(tuple(flat))
    out: V = live[-1][1]
    for c, v in reversed(live[:-1]):
        if c is True:
            out = v
        else:
            out = ite(cx, c, v, out)
    return out


def map_choice(cx: RelationCompiler, v: SChoice, f: Callable[[V], R]) -> R:
    """``f`` applied to each alternative of ``v``, merged again."""
    results = [(c, f(x)) for c, x in v.alts]
    value = choice(cx, [(c, r.value) for c, r in results])
    return R(value, choice_cond([(c, r.ok) for c, r in results]))


def choice_cond(alts: Sequence[tuple[Cond, Cond]]) -> Cond:
    """An If-chain of conditions (the last one is the default)."""
    out: Cond = alts[-1][1]
    for c, x in reversed(alts[:-1]):
        out = ITE_COND(c, x, out)
    return out


def ite(cx: RelationCompiler, c: Cond, a: V, b: V) -> V:
    """``a if c else b`` on values (merging symbolic structure)."""
    if c is True or a is b:
        return a
    if c is False:
        return b
    if a is UNDEF:
        return b
    if b is UNDEF:
        return a
    if not is_sym(a) and not is_sym(b):
        if type(a) is type(b) and a == b:
            return a
    if isinstance(a, SChoice) or isinstance(b, SChoice):
        return SChoice(((c, a), (True, b)))
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(ite(cx, c, x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, SMaybe) or isinstance(b, SMaybe) or a is None or b is None:
        na, ia = maybe_parts(a)
        nb, ib = maybe_parts(b)
        return SMaybe(ITE_COND(c, na, nb), lambda: ite(cx, c, ia(), ib()))
    if isinstance(a, SSeq) and isinstance(b, SSeq):
        return _ite_seq(cx, c, a, b)
    if isinstance(a, (SObj, SSeq)) or isinstance(b, (SObj, SSeq)):
        return SChoice(((c, a), (True, b)))
    if isinstance(a, SCode) or isinstance(b, SCode):
        merged = ite_code(cx, c, a, b)
        return merged if merged is not None else SChoice(((c, a), (True, b)))
    of_floats = ite_floats(cx, c, a, b)
    if of_floats is not None:
        return of_floats
    of_dates = ite_dates(c, a, b)
    if of_dates is not None:
        return of_dates
    of_uuids = ite_uuids(c, a, b)
    if of_uuids is not None:
        return of_uuids
    ba, bb = as_bool_term(a), as_bool_term(b)
    if ba is not None and bb is not None:
        return mk_ite(c, ba, bb)
    ia2, ib2 = as_int_term(a), as_int_term(b)
    if ia2 is not None and ib2 is not None:
        return mk_ite(c, ia2, ib2)
    return SChoice(((c, a), (True, b)))


def maybe_parts(v: V) -> tuple[Cond, Callable[[], V]]:
    """``(is None, value when not None)`` of any value."""
    if isinstance(v, SMaybe):
        return v.null, v.inner
    if v is None:
        return True, lambda: UNDEF
    return False, lambda: v


def _ite_seq(cx: RelationCompiler, c: Cond, a: SSeq, b: SSeq) -> SSeq:
    n = max(len(a.items), len(b.items))
    items: list[Item] = []
    for i in range(n):
        ia = a.items[i] if i < len(a.items) else Item(False, UNDEF)
        ib = b.items[i] if i < len(b.items) else Item(False, UNDEF)
        items.append(
            Item(
                ITE_COND(c, ia.present, ib.present),
                ite(cx, c, ia.value, ib.value),
                ITE_COND(c, ia.err, ib.err),
            )
        )
    length = ite(cx, c, a.length, b.length)
    return SSeq(items, cast(z3.ArithRef, length), a.contiguous and b.contiguous, a.lazy or b.lazy)


def truthy(cx: RelationCompiler, v: V) -> Cond:
    """``bool(v)`` as a condition (a value that raises has been excluded by ``ok``)."""
    if isinstance(v, z3.BoolRef):
        return v
    if isinstance(v, z3.ArithRef):
        return v != 0
    if isinstance(v, SCode):
        return truthy_code(cx, v)
    if isinstance(v, SDict):
        return cx.gt(v.keys.length, 0)
    if isinstance(v, SSeq):
        if v.lazy:
            return True
        return cx.gt(v.length, 0)
    if isinstance(v, (SObj, SDate, SClock, SUuid)):
        return True  # every date, datetime, time and UUID is true (midnight too, since 3.5)
    if isinstance(v, SDelta):
        return cast(z3.BoolRef, v.n != 0)
    if isinstance(v, SFloat):
        return truthy_float(cx, v)
    if isinstance(v, SMaybe):
        return AND(NOT(v.null), truthy(cx, v.inner()))
    if isinstance(v, SChoice):
        return choice_cond([(c, truthy(cx, x)) for c, x in v.alts])
    if isinstance(v, SFunc):
        return True
    if v is UNDEF:
        return False
    if isinstance(v, tuple):
        return len(v) > 0
    try:
        return bool(v)
    except Exception:
        return False


def unwrap(v: V) -> tuple[V, Cond]:
    """Strip an SMaybe (using None raises a TypeError: ok requires not-null)."""
    if isinstance(v, SMaybe):
        return v.inner(), NOT(v.null)
    return v, True
