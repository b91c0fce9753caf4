"""What the compiler hands to the graph stage: variable records, the intern table, relations.

`VarRecord` describes one Z3 variable of the spec (a leaf, a list length or a ``null(...)``
flag) with its bounds and domain; `InternTable` numbers the constant strings (code
`OTHER_CODE` means "any other string"); `CompiledRelation` is one relation lowered to Z3.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import z3

from factorspec_sdk.relations.compiler.terms import Cond
from factorspec_sdk.relations.decorator import RelationInfo
from factorspec_sdk.relations.kinds import BOOL_KINDS, VarKind
from factorspec_sdk.relations.layout import OTHER_TEXT, Path

__all__ = [
    "BOOL_KINDS",
    "OTHER_CODE",
    "OTHER_TEXT",
    "CompiledRelation",
    "InternTable",
    "VarKind",
    "VarRecord",
]

OTHER_CODE = 0
"""Code of "any string not in the intern table"."""


class InternTable:
    """Codes of constant strings (code 0 is reserved for "any other string")."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.strings: list[str] = [OTHER_TEXT]

    def code(self, s: str) -> int:
        """The code of ``s`` (interning it)."""
        c = self.codes.get(s)
        if c is None:
            c = len(self.strings)
            self.codes[s] = c
            self.strings.append(s)
        return c

    def __len__(self) -> int:
        return len(self.strings)


@dataclass(slots=True)
class VarRecord:
    """A Z3 variable of the spec.

    Attributes:
        name: variable name (``stays[2].city``, ``len(stays)``, ``null(note)``).
        path: the layout path of the leaf or list.
        kind: what it holds (`VarKind`): ``int`` / ``bool`` / ``str`` / ``len`` (of a list)
            / ``strlen`` (of a free str, in characters) / ``date`` (a ``datetime.date`` as
            its ordinal, ``date.toordinal()``) / ``datepart`` (``year(d)``, ``month(d)`` or
            ``day(d)`` of a date leaf ``d``, ``date(t)``/``clock(t)`` of a datetime,
            ``hour(t)``, ``minute(t)`` or ``second(t)`` of a datetime or time, tied to it by
            a factor) / ``float`` (a float leaf
            as its scaled value ``x * 10**places``) / ``same`` (a Bool: two free str leaves
            hold the same text, ``same(a, b)``; see `codes.same_text`) / ``affix`` (a Bool: a
            free str leaf starts or ends with a constant, ``startswith(a, "x")``; see
            `codes.affix`). Its shape comes from `factorspec_sdk.relations.variables`.
        term: the Z3 term.
        ge: inclusive lower bound (ints, lengths and date ordinals).
        le: inclusive upper bound.
        choices: the finite domain of an enum leaf (Python values), if any.
        free_str: a free ``str`` leaf (its domain is the intern table).
        exists: condition under which the node exists in the record (enclosing list
            lengths and non-null parents).
        enum_type: the Enum class of an Enum leaf.
        other: for a ``same`` variable (``same(a, b)``: whether two free str leaves hold the
            same text), the second leaf's path (``path`` is the first's).
        affix: for an ``affix`` variable, the method (``startswith``/``endswith``) and the
            constant.
    """

    name: str
    path: Path
    kind: VarKind
    term: z3.ExprRef
    ge: int | None = None
    le: int | None = None
    choices: tuple[object, ...] | None = None
    free_str: bool = False
    exists: Cond = True
    enum_type: type[enum.Enum] | None = None
    other: Path | None = None
    affix: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class CompiledRelation:
    """A relation lowered to Z3: ``formula`` holds iff the relation holds.

    ``applies``: the relation is evaluated (a nested model's object exists); ``defined``:
    evaluating it raises no exception. Where the spec is unsatisfiable, a relation with
    ``applies and defined`` unsatisfiable within the schema's bounds raises on every record
    (`factorspec_sdk.relations.sample.raises_everywhere`), which is said instead of an unsat
    core.
    """

    info: RelationInfo
    formula: z3.BoolRef
    variables: frozenset[str]
    applies: z3.BoolRef
    defined: z3.BoolRef
