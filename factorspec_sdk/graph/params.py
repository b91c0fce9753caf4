"""A context's ints and dates as parameters: its shape, its values, and guarded lowering.

`compile_spec` lowers a model's relations once per context *shape* and binds each new
context's ints and dates into that lowering, instead of lowering again (as PyTorch's
automatic dynamic shapes mark a size dynamic once it is seen to change). This module holds
the three pieces that needs; the tiering itself is `factorspec_sdk.graph.spec`'s.

- `split_context`: a context's shape (every ``int`` and ``datetime.date`` in a model
  field, dataclass field, dict value, list or tuple replaced by a slot; everything else,
  str, float, datetimes, enums, set elements and dict keys included, kept as it is) and
  the slots' values in order (a date as its ordinal). The shape and the values together
  are the context's cache key (they determine its value).
- `with_parameters`: a copy of the context with each slot's value replaced by a Z3 Int
  constant (`parameters`; a date slot by a `ParamDate` of one), for the relation compiler
  to read as it reads an int or date field: symbolically, by the same exact rules.
- `reading_guarded`: while the compiler lowers against that copy, any Python-level use
  of a parameter's *value* raises `ParameterLeak`. The compiler evaluates constants in
  Python (``x in ctx.limits``, ``max(ctx.sizes)``, ``set(ctx.ids)``), and a Z3 term there
  would answer silently and wrongly: ``bool(a == b)`` is structural equality, hashing is
  by structure, and a ``TypeError`` is read as the relation's own exception. The guard
  patches z3py's ``__bool__``, ``__hash__``, ``__str__``/``__repr__`` and the number
  protocols (``int()``, ``range()``, ``round()``, ``//``, ``divmod``) for the guarding
  thread only, and its arithmetic and comparisons when code outside the relation compiler
  applies them (a context's ``@property``: ``/`` there would be Z3's integer division).
  `ParameterLeak` is a ``BaseException`` so the compiler's ``except Exception`` (Python
  semantics of a constant expression that raises) cannot swallow it, and a leak is
  remembered even if something does. A `ParamDate` raises it itself on
  ``==``, ordering, hashing and ``str()``. A lowering that leaked is not used.

Every int and date is a slot, even one no relation reads; a bool is not (its branches may
differ), nor a float (its exact rational and rounding error are the compiler's to know).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import decimal
import enum
import fractions
import sys
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any, NoReturn

import z3
from pydantic import BaseModel

from factorspec_sdk.relations.compiler.values import SDate

__all__ = [
    "ParamDate",
    "ParameterLeak",
    "Unfreezable",
    "parameters",
    "reading_guarded",
    "split_context",
    "with_parameters",
]

_PREFIX = "fs!param!"
_SLOT = ("int-slot",)
_DATE_SLOT = ("date-slot",)
_MAX_DEPTH = 20


class Unfreezable(Exception):
    """A context that has no hashable value (an object it cannot walk)."""


class ParameterLeak(BaseException):
    """A guarded lowering read a parameter's value in Python (see `reading_guarded`).

    A ``BaseException``: the relation compiler reads an ``Exception`` raised while it
    evaluates a constant expression as that expression raising, which must not happen here.
    """


class ParamDate(SDate):
    """A context date as a parameter: an `SDate` whose ordinal is a Z3 Int parameter.

    The compiler reads it as a computed date. Python's own ``==``, ordering, hashing and
    ``str()`` of it would answer for the object, not the date, so they raise
    `ParameterLeak`.
    """

    __slots__ = ()

    def _leak(self, what: str) -> NoReturn:
        _raise_leak(what, "a context date parameter")

    def __eq__(self, other: object) -> bool:
        self._leak("==")

    def __ne__(self, other: object) -> bool:
        self._leak("!=")

    def __lt__(self, other: object) -> bool:
        self._leak("<")

    def __le__(self, other: object) -> bool:
        self._leak("<=")

    def __gt__(self, other: object) -> bool:
        self._leak(">")

    def __ge__(self, other: object) -> bool:
        self._leak(">=")

    def __hash__(self) -> int:
        self._leak("hash")

    def __str__(self) -> str:
        self._leak("str()")

    def __format__(self, spec: str) -> str:
        self._leak("format()")


# --------------------------------------------------------------------------- shapes


def split_context(context: object) -> tuple[Hashable, tuple[int, ...]]:
    """The context's shape and its int constants in slot order.

    Raises:
        Unfreezable: the context holds an object that is not walked (no ``__dict__``, not
            a model, dataclass, mapping, sequence, set or scalar), or nests over 20 deep.
    """
    values: list[int] = []
    shape, _ = _walk(context, 0, values, None)
    return shape, tuple(values)


def parameters(n: int) -> tuple[z3.ArithRef, ...]:
    """``n`` Z3 Int constants in the main context, one per slot (the same on every call)."""
    return tuple(z3.Int(f"{_PREFIX}{i}") for i in range(n))


def with_parameters(context: object, params: Sequence[z3.ArithRef]) -> object:
    """A copy of ``context`` with slot ``i``'s value replaced by ``params[i]``.

    A date's slot gets ``ParamDate(params[i])``.
    Models are copied with ``model_copy(update=...)`` (not validated again), dataclasses
    with `copy.copy` and their fields set; the objects without a slot are shared.
    """
    values: list[int] = []

    def make(date: bool) -> object:
        if len(values) > len(params):
            raise ValueError(f"the context has more slots than the {len(params)} parameters")
        p = params[len(values) - 1]
        return ParamDate(p) if date else p

    _, out = _walk(context, 0, values, make)
    if len(values) != len(params):
        raise ValueError(f"the context has {len(values)} slots, {len(params)} parameters given")
    return out


def _walk(
    obj: object, depth: int, ints: list[int] | None, make: Callable[[bool], object] | None
) -> tuple[Hashable, object]:
    """(shape, the object rebuilt with ``make(is_date)`` in each slot, or itself when None).

    ``ints`` collects the slots' values; None walks a place without slots (dict keys, set
    elements, other mappings and sequences, plain objects), whose every value is its shape.
    """
    if depth > _MAX_DEPTH:
        raise Unfreezable
    if ints is not None and type(obj) is int:
        ints.append(obj)
        return _SLOT, obj if make is None else make(False)
    if ints is not None and type(obj) is dt.date:
        ints.append(obj.toordinal())
        return _DATE_SLOT, obj if make is None else make(True)
    if isinstance(obj, _SCALARS):
        return _scalar(obj), obj
    if isinstance(obj, BaseModel):
        shapes, changed = _fields(
            obj, type(obj).model_fields, lambda n: getattr(obj, n), depth, ints, make
        )
        out = obj.model_copy(update=changed) if changed else obj
        return (type(obj), shapes), out
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        names = [f.name for f in dataclasses.fields(obj)]
        shapes, changed = _fields(obj, names, lambda n: getattr(obj, n), depth, ints, make)
        if not changed:
            return (type(obj), shapes), obj
        new = copy.copy(obj)
        for name, value in changed.items():
            object.__setattr__(new, name, value)
        return (type(obj), shapes), new
    if isinstance(obj, Mapping):
        inner = ints if type(obj) is dict else None
        keys = [_walk(k, depth + 1, None, None)[0] for k in obj]
        walked = [_walk(v, depth + 1, inner, make) for v in obj.values()]
        shape: Hashable = ("map", tuple(zip(keys, (s for s, _ in walked), strict=True)))
        if make is None or inner is None:
            return shape, obj
        return shape, {k: v for k, (_, v) in zip(obj, walked, strict=True)}
    if isinstance(obj, (list, tuple)):
        inner = ints if type(obj) in (list, tuple) else None
        parts = [_walk(x, depth + 1, inner, make) for x in obj]
        shape = (type(obj).__name__, tuple(s for s, _ in parts))
        if make is None or inner is None:
            return shape, obj
        rebuilt = [x for _, x in parts]
        return shape, rebuilt if type(obj) is list else tuple(rebuilt)
    if isinstance(obj, (set, frozenset)):
        return ("set", frozenset(_walk(x, depth + 1, None, None)[0] for x in obj)), obj
    if hasattr(obj, "__dict__"):
        return (type(obj), _walk(vars(obj), depth + 1, None, None)[0]), obj
    raise Unfreezable


def _fields(
    obj: object,
    names: Sequence[str] | Mapping[str, object],
    get: Callable[[str], object],
    depth: int,
    ints: list[int] | None,
    make: Callable[[bool], object] | None,
) -> tuple[tuple[tuple[str, Hashable], ...], dict[str, object]]:
    shapes: list[tuple[str, Hashable]] = []
    changed: dict[str, object] = {}
    for n in names:
        value = get(n)
        shape, out = _walk(value, depth + 1, ints, make)
        shapes.append((n, shape))
        if out is not value:
            changed[n] = out
    return tuple(shapes), changed


_SCALARS = (
    type(None),
    bool,
    int,
    float,
    str,
    bytes,
    enum.Enum,
    dt.date,
    dt.time,
    dt.timedelta,
    decimal.Decimal,
    fractions.Fraction,
)
_BY_REPR = (float, dt.date, dt.time, decimal.Decimal)


def _scalar(obj: object) -> Hashable:
    """An immutable value's key: its type and value, or its repr where equal values differ.

    ``0.0 == -0.0``, ``Decimal("1.0") == Decimal("1.00")`` and an aware datetime equals
    the same instant in another zone, but a relation may tell them apart.
    """
    if isinstance(obj, _BY_REPR):
        return (type(obj).__name__, repr(obj))
    return (type(obj).__name__, obj)


# --------------------------------------------------------------------------- the guard


class _Guard(threading.local):
    ids: frozenset[int] = frozenset()
    leak: str | None = None
    seen: dict[int, tuple[z3.AstRef, bool]]
    """Terms already walked while the guard is on, by AST id: (the term, kept alive so its
    id is not reused; whether it has a parameter)."""

    def __init__(self) -> None:
        self.seen = {}

    def mentions(self, term: z3.AstRef) -> bool:
        """Whether ``term`` has one of the guarded parameters."""
        return bool(self.ids) and _mentions(term, self.ids, self.seen)


_GUARD = _Guard()
_GUARD_LOCK = threading.Lock()
_UNARY: tuple[str, ...] = ("__index__", "__int__", "__float__", "__complex__", "__round__")
_UNARY += ("__trunc__", "__floor__", "__ceil__")
_BINARY = ("__floordiv__", "__rfloordiv__", "__divmod__", "__rdivmod__")


_OUTSIDE: dict[type, tuple[str, ...]] = {
    z3.ArithRef: (
        "__add__",
        "__radd__",
        "__sub__",
        "__rsub__",
        "__mul__",
        "__rmul__",
        "__truediv__",
        "__rtruediv__",
        "__mod__",
        "__rmod__",
        "__pow__",
        "__rpow__",
        "__neg__",
        "__pos__",
        "__abs__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
    ),
    z3.ExprRef: ("__eq__", "__ne__"),
}
"""Operators whose Z3 meaning is not Python's on ints (``/`` is integer division, ``%`` and
``**`` differ on negatives, a float operand makes an exact Real): the guard lets only the
relation compiler, which knows, apply them to a parameter (not a context's property)."""

_COMPILER = "factorspec_sdk.relations."


def _from_compiler(frame: FrameType) -> bool:
    """Whether the code applying an operator is the relation compiler's."""
    return str(frame.f_globals.get("__name__", "")).startswith(_COMPILER)


def _ast_id(t: z3.AstRef) -> int:
    return int(z3.Z3_get_ast_id(t.ctx_ref(), t.as_ast()))


def _mentions(
    term: z3.AstRef, ids: frozenset[int], seen: dict[int, tuple[z3.AstRef, bool]]
) -> bool:
    """Whether ``term`` contains one of the constants whose AST ids are ``ids``.

    ``seen`` remembers the answer for ``term`` and every subterm found free of them.
    """
    top = _ast_id(term)
    known = seen.get(top)
    if known is not None:
        return known[1]
    stack: list[z3.AstRef] = [term]
    walked: list[z3.AstRef] = []
    found = False
    while stack and not found:
        t = stack.pop()
        i = _ast_id(t)
        if i in ids:
            found = True
            break
        hit = seen.get(i)
        if hit is not None:
            found = hit[1]
            continue
        walked.append(t)
        if z3.is_app(t):
            stack.extend(t.children())
        elif z3.is_quantifier(t):
            stack.append(t.body())
    if found:
        seen[top] = (term, True)
    else:
        for t in walked:
            seen[_ast_id(t)] = (t, False)
    return found


def _leak(term: z3.AstRef, what: str) -> None:
    """Raise `ParameterLeak` when the guard is on in this thread and ``term`` has a parameter."""
    if _GUARD.mentions(term):
        _raise_leak(what, "a context parameter")


def _raise_leak(what: str, of: str) -> NoReturn:
    """Remember the leak in this thread's guard (for a caller that catches it) and raise it."""
    _GUARD.leak = what
    raise ParameterLeak(f"{what} of {of}")


def _patches() -> dict[tuple[type, str], Any]:
    """The z3py methods the guard replaces, by (class, name): each the guarded version."""
    bool_ = z3.AstRef.__bool__
    hash_ = z3.AstRef.__hash__
    str_ = z3.AstRef.__str__
    repr_ = z3.AstRef.__repr__

    def guarded_bool(self: z3.AstRef) -> bool:
        if _GUARD.ids and not (z3.is_eq(self) and self.arg(0).eq(self.arg(1))):
            _leak(self, "truth value")
        return bool(bool_(self))

    def guarded_hash(self: z3.AstRef) -> int:
        _leak(self, "hash")
        return int(hash_(self))

    def guarded_str(self: z3.AstRef) -> str:
        _leak(self, "str()")
        return str(str_(self))

    def guarded_repr(self: z3.AstRef) -> str:
        _leak(self, "repr()")
        return str(repr_(self))

    out: dict[tuple[type, str], Any] = {
        (z3.AstRef, "__bool__"): guarded_bool,
        (z3.AstRef, "__hash__"): guarded_hash,
        (z3.AstRef, "__str__"): guarded_str,
        (z3.AstRef, "__repr__"): guarded_repr,
    }

    def unary(name: str) -> Callable[[z3.ArithRef], object]:
        def method(self: z3.ArithRef) -> object:
            _leak(self, f"{name}()")
            raise TypeError(f"a Z3 term has no {name}")

        return method

    def binary(name: str) -> Callable[[z3.ArithRef, object], object]:
        def method(self: z3.ArithRef, other: object) -> object:
            _leak(self, name)
            return NotImplemented

        return method

    def outside(cls: type, name: str) -> Callable[..., object]:
        orig = getattr(cls, name)

        def method(self: z3.ExprRef, *args: object) -> object:
            if _GUARD.ids and not _from_compiler(sys._getframe(1)):
                _leak(self, name)
                for a in args:
                    if isinstance(a, z3.AstRef):
                        _leak(a, name)
            return orig(self, *args)

        return method

    for cls, names in _OUTSIDE.items():
        for name in names:
            out[(cls, name)] = outside(cls, name)
    for name in _UNARY:
        if name not in vars(z3.ArithRef):
            out[(z3.ArithRef, name)] = unary(name)
    for name in _BINARY:
        if name not in vars(z3.ArithRef):
            out[(z3.ArithRef, name)] = binary(name)
    return out


@contextmanager
def reading_guarded(params: Sequence[z3.ArithRef]) -> Iterator[_Guard]:
    """Guard this thread's use of ``params``' values while the block runs (see the module).

    Yields the guard: after the block, ``guard.leak`` names the first leak (None: none),
    even one the block caught. One guarded block runs at a time; other threads see z3py
    as it is while it runs.
    """
    with _GUARD_LOCK:
        patches = _patches()
        saved = {key: vars(key[0]).get(key[1], _ABSENT) for key in patches}
        for (cls, name), method in patches.items():
            setattr(cls, name, method)
        _GUARD.ids = frozenset(_ast_id(p) for p in params)
        _GUARD.leak = None
        _GUARD.seen = {}
        try:
            yield _GUARD
        finally:
            _GUARD.ids = frozenset()
            _GUARD.seen = {}
            for (cls, name), method in saved.items():
                if method is _ABSENT:
                    delattr(cls, name)
                else:
                    setattr(cls, name, method)


_ABSENT = object()
