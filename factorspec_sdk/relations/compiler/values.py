"""The values a relation evaluates to, and the scopes of its local names.

A value (`V`) is a concrete Python object (from the context, a literal or a module constant),
a Z3 Bool/Int term, or one of the symbolic classes here: `SCode` (a str/Enum field), `SDate`
(a ``datetime.date`` field, or a date computed from one), `SClock` (a naive ``datetime`` or a
``time``), `SDelta` (a ``timedelta`` computed from record values), `SObj`
(a nested model), `SSeq` of `Item` (a list or a comprehension), `SMaybe` (an ``Optional``),
`SChoice` (one of several values, by condition), `SFloat` (a float), `SUuid` (a ``uuid.UUID``
field) and `SFunc` (a supported builtin). Every
evaluation returns an `R`: the value and the condition under which no exception occurs.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, TypeAlias

import z3

from factorspec_sdk.relations.compiler.terms import Cond
from factorspec_sdk.relations.kinds import LeafKind
from factorspec_sdk.relations.layout import ObjectLayout, Path

__all__ = [
    "Num",
    "UNDEF",
    "Item",
    "Iter",
    "R",
    "SChoice",
    "SClock",
    "SCode",
    "SDate",
    "SDelta",
    "SDict",
    "SFloat",
    "SFunc",
    "SMaybe",
    "SObj",
    "SSeq",
    "SUuid",
    "Scope",
    "V",
    "is_sym",
]


@dataclass(frozen=True, slots=True, eq=False)
class SCode:
    """A symbolic str or Enum value: ``e`` is an intern code (str values) or the int value.

    ``length`` makes the term of its ``len()`` (a str value whose length is known: a free
    str leaf's length variable, a Literal's lengths, or a choice among such values); it is
    called only when a relation asks, so a leaf gets a length variable only then.
    ``unread`` names the free str code variables in ``e`` that count as read only when the
    code itself is used (compared, tested for membership or truth): a relation that takes
    only the ``len()`` of a free str does not read its code.
    """

    e: z3.ArithRef
    enum_type: type[enum.Enum] | None
    strs: bool
    length: Callable[[], z3.ArithRef | int] | None = None
    unread: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class SDate:
    """A symbolic ``datetime.date``: ``e`` is its ordinal (``date.toordinal()``).

    ``path`` is the date leaf's path when ``e`` is that leaf's variable (its year, month and
    day are then variables of their own, tied to it), None for a computed date.
    """

    e: z3.ArithRef
    path: Path | None = None


@dataclass(frozen=True, slots=True, eq=False)
class SDelta:
    """A symbolic ``timedelta`` of ``n * unit`` microseconds.

    ``unit`` is 86400 * 10**6 (whole days: ``n`` is ``.days``), 10**6 (whole seconds) or 1;
    the coarsest unit that holds the value keeps the arithmetic on days of dates plain.
    """

    n: z3.ArithRef
    unit: int


@dataclass(frozen=True, slots=True, eq=False)
class SClock:
    """A symbolic naive ``datetime`` or a ``time``: ``n * unit`` microseconds.

    A datetime counts from 0001-01-01 less one day (``ordinal * 86400 * 10**6`` at
    midnight), a time from midnight; ``unit`` is 10**6 (a leaf: its whole seconds) or 1.
    ``temporal`` is ``datetime``, ``aware`` (a time-zone-aware datetime, counted in UTC) or
    ``time``. ``path`` is a datetime leaf's path when ``n`` is that leaf's variable (its date
    and clock are then variables of their own, tied to it), and a time's when ``n`` is a
    time leaf's variable or a datetime leaf's ``clock(t)`` (its hour, minute and second are
    then variables of their own, tied to it). ``zoned``: an aware value that
    may carry another offset than UTC (from a constant), whose wall clock is not its count.
    """

    n: z3.ArithRef
    unit: int
    temporal: Literal[LeafKind.DATETIME, LeafKind.AWARE, LeafKind.TIME]
    path: Path | None = None
    zoned: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class SUuid:
    """A symbolic ``uuid.UUID``: ``e`` is its 128-bit int (``uuid.UUID.int``)."""

    e: z3.ArithRef


class Num(enum.StrEnum):
    """Which Python number a symbolic number (`SFloat`) is: the type of its arithmetic."""

    INT = "int"
    FLOAT = "float"
    DECIMAL = "decimal"


@dataclass(frozen=True, slots=True, eq=False)
class SFloat:
    """A symbolic float (see `floats`): the exact rational ``num / den`` of its decimals.

    Attributes:
        num: a Z3 Int term; the value's exact rational is ``num / den``.
        den: a positive int.
        mag: a bound on ``|num / den|``.
        err: a bound on how far Python's double is from ``num / den``.
        rounded: Python's double is exactly ``num / den`` rounded to the nearest double.
        kind: ``float``, ``decimal`` (a ``Decimal``: exact, ``err`` is 0) or ``int`` (an int
            in float or Decimal arithmetic, which takes the other operand's kind).
    """

    num: z3.ArithRef
    den: int
    mag: Fraction
    err: Fraction
    rounded: bool
    kind: Num = Num.FLOAT


@dataclass(frozen=True, slots=True, eq=False)
class SObj:
    """A (possibly absent) nested model at a concrete path."""

    path: Path
    layout: ObjectLayout


@dataclass(slots=True, eq=False)
class Item:
    """One element of a symbolic sequence.

    Attributes:
        present: the element exists (and passed the filters).
        value: the element.
        err: producing the element raises (only for lazy sequences).
    """

    present: Cond
    value: V
    err: Cond = False


@dataclass(slots=True, eq=False)
class SSeq:
    """A symbolic sequence of bounded size.

    Attributes:
        items: candidate elements, in order.
        length: number of present elements.
        contiguous: ``items[i].present`` iff ``i < length`` (a prefix).
        lazy: a generator (errors happen only when the consumer reaches an item).
    """

    items: list[Item]
    length: z3.ArithRef | int
    contiguous: bool
    lazy: bool = False


@dataclass(slots=True, eq=False)
class SDict:
    """A dict field of the record: its keys and values, unrolled like a list's items.

    Entry ``i`` is present iff ``i < len``, in ``keys.items[i]`` and ``values.items[i]``
    (both share the length); the keys are distinct (a factor of the spec keeps them so), in
    the order the record writes them, which is the dict's insertion order.
    """

    keys: SSeq
    values: SSeq


@dataclass(frozen=True, slots=True, eq=False)
class SMaybe:
    """A nullable node: ``null`` is its None-ness; ``inner()`` its value when not None."""

    null: Cond
    inner: Callable[[], V]


@dataclass(frozen=True, slots=True, eq=False)
class SChoice:
    """``alts[0].value if alts[0].cond else alts[1].value if ... else alts[-1].value``."""

    alts: tuple[tuple[Cond, V], ...]


@dataclass(frozen=True, slots=True, eq=False)
class SFunc:
    """A supported builtin (``len``, ``all``, ``distinct``...) or a method of a constant."""

    name: str
    bound: object = None


V: TypeAlias = object
"""A value: a concrete Python object, a Z3 Bool/Int term, or one of the S* classes."""


def is_sym(v: V) -> bool:
    """Whether a value is symbolic (depends on the record)."""
    if isinstance(
        v,
        (
            z3.ExprRef,
            SCode,
            SDate,
            SClock,
            SDelta,
            SFloat,
            SUuid,
            SObj,
            SSeq,
            SDict,
            SMaybe,
            SChoice,
        ),
    ):
        return True
    if isinstance(v, tuple):
        return any(is_sym(x) for x in v)
    return False


@dataclass(frozen=True, slots=True)
class R:
    """An evaluation result: ``value`` and the condition ``ok`` that no exception occurs."""

    value: V
    ok: Cond = True


class _Undefined:
    def __repr__(self) -> str:
        return "<undefined>"


UNDEF: V = _Undefined()
"""The value of an expression that raises (its ``ok`` is false)."""


@dataclass(slots=True)
class Iter:
    """A value viewed as a sequence to iterate over, and the condition that iterating works."""

    seq: SSeq
    ok: Cond


class Scope:
    """Local names of one evaluation (let-bindings and comprehension targets)."""

    def __init__(self, names: dict[str, V], parent: Scope | None = None) -> None:
        self.names = names
        self.parent = parent

    def lookup(self, name: str) -> tuple[bool, V]:
        """``(found, value)`` of a local name, searching the enclosing scopes."""
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return True, scope.names[name]
            scope = scope.parent
        return False, None

    def child(self, names: dict[str, V]) -> Scope:
        """A nested scope binding ``names``."""
        return Scope(names, self)
