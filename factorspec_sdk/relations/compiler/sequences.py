"""Sequences: subscripts and slices, comprehensions and generators, iteration.

A list of the record is unrolled to its bound (`SSeq`, element ``i`` present iff
``i < len``); a comprehension builds a sequence whose items carry their presence (the ``if``
filters) and, for a generator, the condition that producing the item raises (met only when a
consumer reaches it). `iterate` views any iterable value as an `SSeq` (`one_iterable` the one
argument of a builtin); `count` is the number of present items; `consumed_ok` is the
condition that consuming a view to its end raises nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import z3

from factorspec_sdk.errors import ContextError
from factorspec_sdk.relations.compiler.choices import (
    choice,
    choice_cond,
    ite,
    map_choice,
    truthy,
    unwrap,
)
from factorspec_sdk.relations.compiler.operators import eq
from factorspec_sdk.relations.compiler.statements import bind
from factorspec_sdk.relations.compiler.terms import (
    AND,
    NOT,
    OR,
    Cond,
    cmp_eq,
    cmp_ge0,
    cmp_lt,
    max0,
    min_len,
    mk_cmp,
    mk_eq,
    mk_ite,
    sub_len,
)
from factorspec_sdk.relations.compiler.values import (
    UNDEF,
    Item,
    Iter,
    R,
    SChoice,
    SCode,
    Scope,
    SDict,
    SMaybe,
    SObj,
    SSeq,
    V,
    is_sym,
)

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import ExprRule, RelationCompiler

__all__ = ["RULES", "consumed_ok", "count", "index", "iterate", "one_iterable", "slice_of"]


# --------------------------------------------------------------------------- subscripts


def _e_subscript(cx: RelationCompiler, node: ast.Subscript, scope: Scope) -> R:
    base = cx.eval(node.value, scope)
    if isinstance(node.slice, ast.Slice):
        sl = node.slice
        parts: list[V] = []
        oks: list[Cond] = [base.ok]
        for p in (sl.lower, sl.upper, sl.step):
            if p is None:
                parts.append(None)
            else:
                r = cx.eval(p, scope)
                parts.append(r.value)
                oks.append(r.ok)
        out = slice_of(cx, base.value, parts[0], parts[1], parts[2], node)
        return R(out.value, AND(*oks, out.ok))
    idx = cx.eval(node.slice, scope)
    r = index(cx, base.value, idx.value, node)
    return R(r.value, AND(base.ok, idx.ok, r.ok))


def index(cx: RelationCompiler, seq: V, idx: V, node: ast.AST) -> R:
    """``seq[idx]``."""
    if isinstance(seq, SChoice):
        return map_choice(cx, seq, lambda s: index(cx, s, idx, node))
    if isinstance(idx, SChoice):
        return map_choice(cx, idx, lambda i: index(cx, seq, i, node))
    seq, ok1 = unwrap(seq)
    idx, ok2 = unwrap(idx)
    r = _index(cx, seq, idx, node)
    return R(r.value, AND(ok1, ok2, r.ok))


def _index(cx: RelationCompiler, seq: V, idx: V, node: ast.AST) -> R:
    alts: list[tuple[Cond, V]]
    if seq is UNDEF or idx is UNDEF:
        return R(UNDEF, False)
    if not is_sym(seq) and not is_sym(idx):
        try:
            return R(cast(Sequence[object], seq)[cast(int, idx)])
        except (LookupError, TypeError, ValueError):
            if isinstance(seq, Mapping) and not isinstance(idx, (list, dict, set)):
                raise ContextError(f"{cx.where(node)}: the context has no key {idx!r}") from None
            return R(UNDEF, False)
    if isinstance(seq, SDict):  # d[k]: the value of the entry with key k, else KeyError
        alts = []
        for k, v in zip(seq.keys.items, seq.values.items, strict=True):
            c = AND(k.present, eq(cx, k.value, idx, node))
            if c is not False:
                alts.append((c, v.value))
        return R(choice(cx, alts), OR(*(c for c, _ in alts)))
    if isinstance(seq, SSeq):
        if seq.lazy:
            cx.fail("indexing a generator", "generators cannot be indexed", node)
        return _index_seq(cx, seq, idx)
    if isinstance(seq, Mapping):
        alts = []
        for k, v in seq.items():
            c = eq(cx, idx, k, node)
            if c is not False:
                alts.append((c, v))
        return R(choice(cx, alts), OR(*(c for c, _ in alts)))
    if isinstance(seq, (list, tuple)):
        items = [Item(True, v) for v in seq]
        return _index_seq(cx, SSeq(items, len(items), True), idx)
    if isinstance(seq, SCode) or isinstance(seq, str):
        cx.fail("indexing a string", "str indexing is not supported", node)
    cx.fail("indexing", f"cannot index {type(seq).__name__}", node)


def _index_seq(cx: RelationCompiler, seq: SSeq, idx: V) -> R:
    if isinstance(idx, bool):
        idx = int(idx)
    if isinstance(idx, z3.BoolRef):
        idx = z3.If(idx, 1, 0)
    if isinstance(idx, SCode) or not isinstance(idx, (int, z3.ArithRef)):
        return R(UNDEF, False)
    items = seq.items
    n = len(items)
    length = seq.length
    if seq.contiguous:
        if isinstance(idx, int):
            if idx >= 0:
                if idx >= n:
                    return R(UNDEF, False)
                return R(items[idx].value, items[idx].present)
            k = -idx
            if k > n:
                return R(UNDEF, False)
            if isinstance(length, int):
                return R(items[length - k].value, length >= k)
            alts = [(cast(Cond, mk_eq(length, i + k)), items[i].value) for i in range(n - k + 1)]
            return R(choice(cx, alts), mk_cmp(">=", length, k))
        pos = z3.If(idx < 0, idx + length, idx)
        alts2 = [(mk_eq(pos, i), items[i].value) for i in range(n)]
        return R(choice(cx, alts2), z3.And(pos >= 0, pos < length))
    # filtered sequence: the k-th present item
    if isinstance(idx, int) and idx >= 0:
        pos2: z3.ArithRef | int = idx
    else:
        pos2 = z3.If(idx < 0, idx + length, idx) if not isinstance(idx, int) else idx + length
    alts3: list[tuple[Cond, V]] = []
    seen: z3.ArithRef | int = 0
    for it in items:
        alts3.append((AND(it.present, cmp_eq(seen, pos2)), it.value))
        if it.present is True:
            seen = seen + 1
        else:
            seen = seen + mk_ite(it.present, 1, 0)
    ok = AND(cmp_ge0(pos2), cmp_lt(pos2, length))
    return R(choice(cx, alts3), ok)


def slice_of(cx: RelationCompiler, seq: V, lo: V, hi: V, step: V, node: ast.AST) -> R:
    """``seq[lo:hi:step]`` with constant bounds."""
    if isinstance(seq, SMaybe):
        r = slice_of(cx, seq.inner(), lo, hi, step, node)
        return R(r.value, AND(NOT(seq.null), r.ok))
    if isinstance(seq, SChoice):
        return map_choice(cx, seq, lambda s: slice_of(cx, s, lo, hi, step, node))
    if is_sym(lo) or is_sym(hi) or is_sym(step):
        cx.fail(
            "slice with a bound read from the record",
            "slice bounds must be constants (from literals or the context)",
            node,
        )
    if not is_sym(seq):
        try:
            return R(
                cast(Sequence[object], seq)[slice(cast(Any, lo), cast(Any, hi), cast(Any, step))]
            )
        except Exception:
            return R(UNDEF, False)
    if step not in (None, 1):
        cx.fail("slice with a step", "slices with a step are not supported", node)
    if not isinstance(seq, SSeq):
        cx.fail("slicing", "only lists can be sliced", node)
    if seq.lazy:
        cx.fail("slicing a generator", "generators cannot be sliced", node)
    if not seq.contiguous:
        cx.fail("slicing a filtered list", "a filtered list cannot be sliced", node)
    for b in (lo, hi):
        if b is not None and (isinstance(b, bool) or not isinstance(b, int)):
            return R(UNDEF, False)
    items, length = seq.items, seq.length
    n = len(items)
    a = cast(int | None, lo) or 0
    if a >= 0:
        if hi is None:
            new = items[a:]
            return R(SSeq(new, sub_len(length, a), True))
        b = cast(int, hi)
        if b >= 0:
            new = items[a:b]
            cap = min_len(length, b)
            return R(SSeq(new, sub_len(cap, a), True))
        # stop = len + b: item j present iff j - b < len
        new_items = [
            Item(items[j - b].present if j - b < n else False, items[j].value) for j in range(a, n)
        ]
        return R(SSeq(new_items, sub_len(sub_len(length, -b), a), True))
    # negative start: symbolic offset
    start = sub_len(length, -a)  # max(len + a, 0)
    stop: z3.ArithRef | int = (
        length
        if hi is None
        else (
            min_len(length, cast(int, hi))
            if cast(int, hi) >= 0
            else sub_len(length, -cast(int, hi))
        )
    )
    out: list[Item] = []
    for j in range(min(-a, n)):
        pos = start + j
        alts = [(mk_eq(pos, i), items[i].value) for i in range(n)]
        out.append(Item(mk_cmp("<", pos, stop), choice(cx, alts)))
    return R(SSeq(out, max0(stop - start), True))


# --------------------------------------------------------------------------- comprehensions


def _e_generator_exp(cx: RelationCompiler, node: ast.GeneratorExp, scope: Scope) -> R:
    return _comprehension(cx, node.elt, node.generators, scope, lazy=True)


def _e_list_comp(cx: RelationCompiler, node: ast.ListComp, scope: Scope) -> R:
    return _comprehension(cx, node.elt, node.generators, scope, lazy=False)


def _comprehension(
    cx: RelationCompiler,
    elt: ast.expr,
    gens: list[ast.comprehension],
    scope: Scope,
    *,
    lazy: bool,
) -> R:
    first = cx.eval(gens[0].iter, scope)
    it = iterate(cx, first.value, gens[0].iter)
    items: list[Item] = []
    _gen_items(cx, elt, gens, 0, it, scope, True, items)
    if all(x.present is True or x.present is False for x in items) and all(
        x.err is False for x in items
    ):
        kept = [x for x in items if x.present is True]
        if not lazy and not is_sym(tuple(x.value for x in kept)):
            return R([x.value for x in kept], AND(first.ok, it.ok))
    contiguous = len(gens) == 1 and not gens[0].ifs and it.seq.contiguous
    if contiguous:
        length: z3.ArithRef | int = it.seq.length
    else:
        length = count(items)
    seq = SSeq(items, length, contiguous, lazy)
    ok = AND(first.ok, it.ok)
    if not lazy:
        ok = AND(ok, *(NOT(x.err) for x in items))
        for x in items:
            x.err = False
    return R(seq, ok)


def count(items: Sequence[Item]) -> z3.ArithRef | int:
    """The number of present items."""
    total: z3.ArithRef | int = 0
    terms: list[z3.ArithRef] = []
    for x in items:
        if x.present is True:
            total += 1
        elif x.present is not False:
            terms.append(cast(z3.ArithRef, z3.If(x.present, 1, 0)))
    if not terms:
        return total
    s = z3.Sum(*terms) if len(terms) > 1 else terms[0]
    return s + total if total else s


def _gen_items(
    cx: RelationCompiler,
    elt: ast.expr,
    gens: list[ast.comprehension],
    k: int,
    it: Iter,
    scope: Scope,
    guard: Cond,
    out: list[Item],
) -> None:
    g = gens[k]
    if g.is_async:
        cx.fail("async comprehension", "async for is not supported", g)
    for item in it.seq.items:
        present = AND(guard, item.present)
        if present is False:
            continue
        names: dict[str, V] = {}
        bind(cx, g.target, item.value, names)
        inner = scope.child(names)
        err: Cond = AND(present, item.err)
        cond: Cond = present
        for test in g.ifs:
            r = cx.eval(test, inner)
            err = OR(err, AND(cond, NOT(r.ok)))
            cond = AND(cond, truthy(cx, r.value))
            if cond is False:
                break
        if cond is False:
            if err is not False:
                out.append(Item(False, UNDEF, err))
            continue
        if k + 1 < len(gens):
            nxt = cx.eval(gens[k + 1].iter, inner)
            sub = iterate(cx, nxt.value, gens[k + 1].iter)
            err = OR(err, AND(cond, NOT(AND(nxt.ok, sub.ok))))
            start = len(out)
            _gen_items(cx, elt, gens, k + 1, sub, inner, cond, out)
            if err is not False:
                if len(out) > start:
                    out[start].err = OR(out[start].err, err)
                else:
                    out.append(Item(False, UNDEF, err))
            continue
        r = cx.eval(elt, inner)
        err = OR(err, AND(cond, NOT(r.ok)))
        out.append(Item(cond, r.value, err))


def iterate(cx: RelationCompiler, v: V, node: ast.AST) -> Iter:
    """View a value as a sequence to iterate over."""
    if isinstance(v, SSeq):
        return Iter(v, True)
    if isinstance(v, SDict):  # a dict iterates over its keys
        return Iter(v.keys, True)
    if isinstance(v, SMaybe):
        inner = iterate(cx, v.inner(), node)
        return Iter(inner.seq, AND(NOT(v.null), inner.ok))
    if isinstance(v, SChoice):
        seqs = [(c, iterate(cx, x, node)) for c, x in v.alts]
        merged: V = seqs[-1][1].seq
        for c, s in reversed(seqs[:-1]):
            merged = ite(cx, c, s.seq, merged)
        ok = choice_cond([(c, s.ok) for c, s in seqs])
        if not isinstance(merged, SSeq):
            cx.fail("iteration", "cannot iterate over this value", node)
        return Iter(merged, ok)
    if isinstance(v, tuple) and is_sym(v):
        return Iter(SSeq([Item(True, x) for x in v], len(v), True), True)
    if isinstance(v, (SCode, SObj, z3.ExprRef)):
        cx.fail("iteration over a field value", "only lists can be iterated", node)
    if v is UNDEF:
        return Iter(SSeq([], 0, True), False)
    try:
        elems = list(cast(Iterable[object], v))
    except TypeError:
        return Iter(SSeq([], 0, True), False)
    return Iter(SSeq([Item(True, x) for x in elems], len(elems), True), True)


RULES: dict[type[ast.AST], ExprRule] = {
    ast.Subscript: _e_subscript,
    ast.GeneratorExp: _e_generator_exp,
    ast.ListComp: _e_list_comp,
}
"""The expressions this module evaluates."""


def one_iterable(cx: RelationCompiler, args: list[V], node: ast.AST, name: str) -> Iter:
    """The one iterable argument of the builtin ``name`` (``all(xs)``), viewed by `iterate`."""
    if len(args) != 1:
        cx.fail(f"call to {name}()", f"{name}() takes one iterable here", node)
    return iterate(cx, args[0], node)


def consumed_ok(it: Iter) -> Cond:
    """That consuming ``it`` to its end raises nothing: the view's ``ok`` and no item's error."""
    return AND(it.ok, *(NOT(x.err) for x in it.seq.items if x.err is not False))
