"""Pydantic models of the relation IR (version 1); `IR_JSON_SCHEMA` is generated from them.

The IR is the compiled, declarative form of a spec: data, never code. See
`factorspec_sdk.ir` for the format and ``docs/ir.md`` for a worked example.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    Tag,
)

__all__ = [
    "IR_VERSION",
    "OPS",
    "Apply",
    "BoolConst",
    "DefRef",
    "Expr",
    "IntConst",
    "IRFactor",
    "IRField",
    "IRLeaf",
    "IRList",
    "IRGrammar",
    "IRNode",
    "IRObject",
    "IRRoot",
    "IRVariable",
    "RelationIR",
    "VarRef",
]

IR_VERSION = 1

OPS: dict[str, tuple[int, int | None]] = {
    # op: (fewest args, most args or None)
    "and": (0, None),
    "or": (0, None),
    "not": (1, 1),
    "implies": (2, 2),
    "ite": (3, 3),
    "eq": (2, 2),
    "distinct": (2, None),
    "le": (2, 2),
    "lt": (2, 2),
    "ge": (2, 2),
    "gt": (2, 2),
    "add": (1, None),
    "sub": (2, None),
    "mul": (1, None),
    "div": (2, 2),
    "mod": (2, 2),
    "neg": (1, 1),
}
"""The allowlisted operators and their arities (the ones the relation compiler emits)."""

Op = Literal[
    "and",
    "or",
    "not",
    "implies",
    "ite",
    "eq",
    "distinct",
    "le",
    "lt",
    "ge",
    "gt",
    "add",
    "sub",
    "mul",
    "div",
    "mod",
    "neg",
]

_STRICT = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

Scalar = Annotated[StrictBool | StrictInt | StrictStr, Field(union_mode="left_to_right")]
PathPart = Annotated[StrictStr | StrictInt, Field(union_mode="left_to_right")]


# --------------------------------------------------------------------------- layout


class IRLeaf(BaseModel):
    """A scalar field: ``bool``, ``int`` (bounds), ``str`` (free text), ``enum`` (choices).

    Or ``date`` (its ``temporal``: a ``date`` written ``YYYY-MM-DD``, its ``ge``/``le``
    ordinals, ``date.toordinal()``; a naive ``datetime`` written ``YYYY-MM-DDTHH:MM:SS``, its
    bounds ``ordinal * 86400 + seconds``; an ``aware`` datetime the same in UTC, written
    with a ``Z``; a ``time`` written ``HH:MM:SS``, its bounds seconds
    since midnight), or ``int`` with ``duration`` (a ``timedelta``'s whole seconds, written
    ``"PT{n}S"``), or ``float`` (fixed-point with at most ``places`` decimals; its
    ``ge``/``le`` bound the scaled value ``x * 10**places``, and its variable is an int
    holding that value), or ``uuid`` (a ``uuid.UUID`` written as its canonical lowercase
    text ``xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``; its variable is an int holding its 128-bit
    value, ``uuid.UUID.int``).
    """

    model_config = _STRICT
    type: Literal["leaf"]
    kind: Literal["bool", "int", "str", "enum", "date", "float", "uuid"]
    nullable: bool = False
    ge: int | None = None
    le: int | None = None
    min_length: int = 0
    max_length: int | None = None
    choices: list[Scalar] = Field(default_factory=list)
    places: int = 0
    temporal: Literal["date", "datetime", "aware", "time"] = "date"
    duration: bool = False


class IRList(BaseModel):
    """A list of ``item``, with ``min_length`` to ``max_length`` items.

    With ``mapping``, a dict: ``item`` is an entry, an object of the fields ``key`` (a str, or
    a Literal of strs) and ``value``, and the record holds a JSON object with distinct keys.
    """

    model_config = _STRICT
    type: Literal["list"]
    item: IRNode
    min_length: int = 0
    max_length: int
    bounded_by_schema: bool = True
    nullable: bool = False
    mapping: bool = False


class IRField(BaseModel):
    """One field of an object: ``name`` (used in paths), ``key`` (the JSON key), its node.

    ``optional``: a record may leave the key out (a Pydantic field with a default, a JSON
    Schema property not ``required``); absent in documents before optional keys, which
    meant every key written. ``default``: the canonical JSON text (a JSON string holding
    ``null``, ``0``, ``"a"``...) of the value a record that leaves the key out holds, where it
    is a value of the field's node; the writer leaves such a key out only where that value is
    feasible, and a record check reads the missing key as it.

    ``others``: the field holds the object's other keys (those its JSON Schema's
    ``additionalProperties`` allows): ``node`` is a dict (a ``mapping`` list of entries with
    a free ``str`` key), written inside the object's own braces after its declared keys;
    ``key`` is empty, and the field is the object's last and not optional. A factor of the
    IR keeps its keys distinct and apart from the declared ones (the JSON Schema converter
    writes ``other keys of <path>``).
    """

    model_config = _STRICT
    name: str
    key: str
    node: IRNode
    optional: bool = False
    default: str | None = None
    others: bool = False


class IRObject(BaseModel):
    """An object: its fields, in the order the canonical JSON writes them.

    ``undeclared_keys``: the object's JSON Schema allows keys it does not declare, which the
    writer never writes (a named restriction: a relation reads under the object, or the
    grammar cannot hold its keywords).
    """

    model_config = _STRICT
    type: Literal["object"]
    name: str = "Record"
    fields: list[IRField]
    nullable: bool = False
    undeclared_keys: bool = False


class IRGrammar(BaseModel):
    """A value no relation reads, generated by a grammar from its JSON Schema (``schema``).

    The schema is self-contained (its ``$defs`` inside it) and holds ``null`` when the value
    may be null.
    """

    model_config = _STRICT
    type: Literal["grammar"]
    json_schema: dict[str, Any] = Field(alias="schema")


class IRUnion(BaseModel):
    """A union of objects told apart by the field ``tag``.

    Each branch's first field is the tag, a one-choice ``enum`` leaf, with a different value
    per branch. The nodes of a branch lie
    under the path part ``<name>`` of the branch's object (``action<Calc>.a``), and the
    variable ``branch(<path>)`` (kind ``int``) is the index of the branch a record takes.
    """

    model_config = _STRICT
    type: Literal["union"]
    tag: str
    branches: list[IRObject]
    nullable: bool = False


IRNode = Annotated[IRObject | IRList | IRLeaf | IRGrammar | IRUnion, Field(discriminator="type")]

IRRoot = Annotated[IRObject | IRGrammar, Field(discriminator="type")]
"""The record: an object, or one grammar value (a JSON Schema whose root is no object)."""


# --------------------------------------------------------------------------- expressions


class VarRef(BaseModel):
    """A variable, by name: ``{"var": "stays[0].city"}``."""

    model_config = _STRICT
    var: str


class IntConst(BaseModel):
    """An integer constant: ``{"int": 3}``."""

    model_config = _STRICT
    value: int = Field(alias="int")


class BoolConst(BaseModel):
    """A Boolean constant: ``{"bool": true}``."""

    model_config = _STRICT
    value: bool = Field(alias="bool")


class DefRef(BaseModel):
    """A shared subterm: ``{"def": 4}`` is ``defs[4]`` (only earlier defs inside a def)."""

    model_config = _STRICT
    index: int = Field(alias="def")


class Apply(BaseModel):
    """An operator applied to arguments: ``{"op": "le", "args": [e1, e2]}``."""

    model_config = _STRICT
    op: Op
    args: list[Expr]


def _expr_tag(v: object) -> str | None:
    if isinstance(v, dict):
        for key in ("op", "var", "int", "bool", "def"):
            if key in v:
                return key
        return None
    for key, cls in (("op", Apply), ("var", VarRef), ("def", DefRef)):
        if isinstance(v, cls):
            return key
    if isinstance(v, IntConst):
        return "int"
    if isinstance(v, BoolConst):
        return "bool"
    return None


Expr = Annotated[
    Annotated[Apply, Tag("op")]
    | Annotated[VarRef, Tag("var")]
    | Annotated[IntConst, Tag("int")]
    | Annotated[BoolConst, Tag("bool")]
    | Annotated[DefRef, Tag("def")],
    Discriminator(
        _expr_tag,
        custom_error_type="invalid_expr",
        custom_error_message="an expression is an object with one of the keys op/var/int/bool/def",
    ),
]


# --------------------------------------------------------------------------- spec


class IRVariable(BaseModel):
    """A solver variable: a leaf read by relations, a list length or an Optional's null-ness.

    ``name`` is ``path_name(path)`` for a leaf, ``len(<path>)`` for the length of a list
    or of a free str (kind ``len`` for both; the layout node at ``path`` tells which),
    ``null(<path>)`` for null-ness, and ``year(<path>)``, ``month(<path>)``, ``day(<path>)``
    for the parts of a date leaf (kind ``int``, as the date's own ordinal variable; the
    server ties the parts to the date itself, with the factor ``calendar of <path>``), and
    ``same(<path>, <other>)`` (kind ``bool``) for whether the free str leaves at ``path``
    and ``other`` hold the same text, and ``startswith(<path>, "<text>")`` /
    ``endswith(<path>, "<text>")`` (kind ``bool``, with ``text``) for whether the free str
    leaf at ``path`` starts / ends with ``text``. Its bounds and domain follow from the
    layout node at ``path``; its existence from the lengths of the enclosing lists.
    """

    model_config = _STRICT
    name: str
    path: list[PathPart]
    kind: Literal["int", "bool", "str", "len"]
    other: list[PathPart] | None = None
    text: str | None = None


class IRFactor(BaseModel):
    """A relation: its name (as unsat cores report it), its variables and its formula.

    ``scope`` (optional): the place of the layout the relation is about, as a path with
    concrete list indices (a ``uniqueItems`` list's): a record without that place (an
    optional key at or above it left out) satisfies the relation, so the writer may leave
    such a key out. Every variable of the relation lies at or under it. Without it, the
    relation reads the record as its model fills it, defaults included, and a key it reads
    under is written (or left out as its default).
    """

    model_config = _STRICT
    name: str
    variables: list[str] = Field(default_factory=list)
    formula: Expr
    scope: list[PathPart] | None = None


class RelationIR(BaseModel):
    """A compiled spec as data (``"factorspec_ir": 1``)."""

    model_config = ConfigDict(extra="forbid", strict=True, title="FactorSpecRelationIR")
    factorspec_ir: Literal[1]
    name: str = "Record"
    layout: IRRoot
    strings: list[str] = Field(default_factory=list)
    variables: list[IRVariable] = Field(default_factory=list)
    defs: list[Expr] = Field(default_factory=list)
    factors: list[IRFactor] = Field(default_factory=list)


IRList.model_rebuild()
IRField.model_rebuild()
IRObject.model_rebuild()
Apply.model_rebuild()
IRFactor.model_rebuild()
RelationIR.model_rebuild()
