"""What a field type is, in one place: the leaf kinds and the kinds of solver variables.

A *leaf kind* (`LeafKind`) is a field type the writer lays out itself: one member per type,
with the Python annotations that lay out as it (`PYTHON_TYPES`). Every stage finds a kind's
behaviour through a table keyed by the kind, and ``tests/test_architecture.py`` checks that
every table covers every kind, so a new kind that a stage does not handle fails a test:

==============================  ==================================================
stage                           table
==============================  ==================================================
layout from Pydantic            `factorspec_sdk.relations.pydantic_layout.LEAF_BUILDERS`
the solver variable of a leaf   `factorspec_sdk.relations.variables.LEAF_VARIABLES`
compiler: the leaf's value      `factorspec_sdk.relations.compiler.fields.LEAF_VALUES`
display of a variable           `factorspec_sdk.relations.display.LEAF_DISPLAY`
a sample record                 `factorspec_sdk.relations.sample.SAMPLE_VALUES`
a default as the writer's text  `factorspec_sdk.relations.defaults.DEFAULT_TEXTS`
IR: wire form, record checks    `factorspec_sdk.ir.leaves.IR_LEAVES`
writer: options and lengths     `factorspec_sdk.writer.leaves.LEAF_WRITERS`
prompt hint                     `factorspec_sdk.prompts.LEAF_HINTS`
==============================  ==================================================

A *variable kind* (`VarKind`) is what a solver variable holds: a leaf's value, a list's or
a string's length, a date's part, a union's branch, two strings' sameness... Each has a
`Sort` (`VAR_SORTS`): how the solver holds it (a Bool, a code into the intern table, an
Int), which is all the graph stage asks of it.

Both are `enum.StrEnum`: a member equals its name as a string (``LeafKind.DATE == "date"``),
so that the relation IR's wire format and JSON output keep their strings.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import uuid
from typing import Literal

from pydantic import AwareDatetime, NaiveDatetime

__all__ = [
    "BOOL_KINDS",
    "LENGTH_KINDS",
    "ONLY_WHEN_READ",
    "PYTHON_TYPES",
    "TEMPORAL_KINDS",
    "VAR_SORTS",
    "LeafKind",
    "Sort",
    "Temporal",
    "VarKind",
    "kind_of_type",
]


class LeafKind(enum.StrEnum):
    """A field type the writer lays out itself (`factorspec_sdk.relations.layout.LeafLayout`)."""

    BOOL = "bool"
    INT = "int"
    STR = "str"
    """Free text."""
    ENUM = "enum"
    """A finite set of values: a ``Literal`` or an ``Enum``."""
    DATE = "date"
    DATETIME = "datetime"
    """A naive ``datetime``."""
    AWARE = "aware"
    """A time-zone-aware ``datetime``, written in UTC."""
    TIME = "time"
    DURATION = "duration"
    """A ``timedelta``, its whole seconds."""
    FLOAT = "float"
    """A ``float`` written as fixed-point text."""
    DECIMAL = "decimal"
    """A ``Decimal``: fixed-point, exact."""
    UUID = "uuid"
    """A ``uuid.UUID``: its 128-bit int, written as the canonical lowercase text."""


Temporal = Literal[LeafKind.DATE, LeafKind.DATETIME, LeafKind.AWARE, LeafKind.TIME]
"""The kinds whose value is a point in time, written as fixed-width ISO text
(`factorspec_sdk.relations.temporal`)."""

TEMPORAL_KINDS: frozenset[LeafKind] = frozenset(
    {LeafKind.DATE, LeafKind.DATETIME, LeafKind.AWARE, LeafKind.TIME}
)

PYTHON_TYPES: dict[LeafKind, tuple[object, ...]] = {
    LeafKind.BOOL: (bool,),
    LeafKind.INT: (int,),
    LeafKind.STR: (str,),
    LeafKind.ENUM: (),  # ``Literal[...]`` and ``Enum`` classes, told by their form
    LeafKind.DATE: (dt.date,),
    LeafKind.DATETIME: (dt.datetime, NaiveDatetime),
    LeafKind.AWARE: (AwareDatetime,),
    LeafKind.TIME: (dt.time,),
    LeafKind.DURATION: (dt.timedelta,),
    LeafKind.FLOAT: (float,),
    LeafKind.DECIMAL: (decimal.Decimal,),
    LeafKind.UUID: (uuid.UUID,),  # Pydantic's UUID1...UUID8 too: Annotated with a version
}
"""The annotations that lay out as each kind: exactly these classes, not subclasses."""

ONLY_WHEN_READ: frozenset[LeafKind] = frozenset(
    {
        LeafKind.DATETIME,
        LeafKind.AWARE,
        LeafKind.TIME,
        LeafKind.DURATION,
        LeafKind.FLOAT,
        LeafKind.DECIMAL,
    }
)
"""Kinds that are leaves only where a relation reads the field; elsewhere the field stays a
grammar value, written as freely as its JSON Schema allows (a time zone, fractional seconds,
any number)."""


def kind_of_type(annotation: object) -> LeafKind | None:
    """The kind a Python annotation lays out as (`PYTHON_TYPES`), or None."""
    for kind, types in PYTHON_TYPES.items():
        if any(annotation is t for t in types):
            return kind
    return None


class VarKind(enum.StrEnum):
    """What a solver variable holds (`factorspec_sdk.relations.compiler.VarRecord.kind`)."""

    INT = "int"
    """An int leaf (a duration's seconds, a UUID's 128-bit int, an Enum of ints), a union's
    branch."""
    BOOL = "bool"
    """A bool leaf, an Optional's null-ness."""
    STR = "str"
    """A string's code into the intern table (free text, a Literal or Enum of strs)."""
    LEN = "len"
    """A list's length."""
    STRLEN = "strlen"
    """A free string's length, in characters."""
    DATE = "date"
    """A date's ordinal, a datetime's or time's seconds."""
    DATEPART = "datepart"
    """``year(d)``, ``month(d)``, ``day(d)``, a datetime's ``date(t)`` and ``clock(t)``."""
    FLOAT = "float"
    """A float's or Decimal's scaled value ``x * 10**places``."""
    SAME = "same"
    """Whether two free strings hold the same text."""
    AFFIX = "affix"
    """Whether a free string starts or ends with a constant."""


class Sort(enum.Enum):
    """How the solver holds a variable's value."""

    BOOL = "bool"
    """A Z3 ``Bool``."""
    CODE = "code"
    """A Z3 ``Int``: a code into the spec's intern table (its value is a text)."""
    INT = "int"
    """A Z3 ``Int``."""


VAR_SORTS: dict[VarKind, Sort] = {
    VarKind.INT: Sort.INT,
    VarKind.BOOL: Sort.BOOL,
    VarKind.STR: Sort.CODE,
    VarKind.LEN: Sort.INT,
    VarKind.STRLEN: Sort.INT,
    VarKind.DATE: Sort.INT,
    VarKind.DATEPART: Sort.INT,
    VarKind.FLOAT: Sort.INT,
    VarKind.SAME: Sort.BOOL,
    VarKind.AFFIX: Sort.BOOL,
}

BOOL_KINDS: frozenset[VarKind] = frozenset(k for k, s in VAR_SORTS.items() if s is Sort.BOOL)
"""The kinds whose variable is a Z3 ``Bool`` (the others are ``Int``)."""

LENGTH_KINDS: frozenset[VarKind] = frozenset({VarKind.LEN, VarKind.STRLEN})
"""The lengths: the variables a bound fact (``len >= n``) may be about."""
