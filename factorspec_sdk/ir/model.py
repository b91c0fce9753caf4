"""Pydantic models of the relation IR (version 1); `IR_JSON_SCHEMA` is generated from them.

The IR is the compiled, declarative form of a spec: data, never code. See
`factorspec_sdk.ir` for the format and ``docs/ir.md`` for a worked example.
"""

from __future__ import annotations

from typing import Annotated, Literal

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
    "IRNode",
    "IRObject",
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
    """A scalar field: ``bool``, ``int`` (bounds), ``str`` (free text) or ``enum`` (choices)."""

    model_config = _STRICT
    type: Literal["leaf"]
    kind: Literal["bool", "int", "str", "enum"]
    nullable: bool = False
    ge: int | None = None
    le: int | None = None
    min_length: int = 0
    max_length: int | None = None
    choices: list[Scalar] = Field(default_factory=list)


class IRList(BaseModel):
    """A list of ``item``, with ``min_length`` to ``max_length`` items."""

    model_config = _STRICT
    type: Literal["list"]
    item: IRNode
    min_length: int = 0
    max_length: int
    bounded_by_schema: bool = True
    nullable: bool = False


class IRField(BaseModel):
    """One field of an object: ``name`` (used in paths), ``key`` (the JSON key), its node."""

    model_config = _STRICT
    name: str
    key: str
    node: IRNode


class IRObject(BaseModel):
    """An object: its fields, in the order the canonical JSON writes them."""

    model_config = _STRICT
    type: Literal["object"]
    name: str = "Record"
    fields: list[IRField]
    nullable: bool = False


IRNode = Annotated[IRObject | IRList | IRLeaf, Field(discriminator="type")]


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

    ``name`` is ``path_name(path)`` for a leaf, ``len(<path>)`` for a length and
    ``null(<path>)`` for null-ness. Its bounds and domain follow from the layout node at
    ``path``; its existence from the lengths of the enclosing lists.
    """

    model_config = _STRICT
    name: str
    path: list[PathPart]
    kind: Literal["int", "bool", "str", "len"]


class IRFactor(BaseModel):
    """A relation: its name (as unsat cores report it), its variables and its formula."""

    model_config = _STRICT
    name: str
    variables: list[str] = Field(default_factory=list)
    formula: Expr


class RelationIR(BaseModel):
    """A compiled spec as data (``"factorspec_ir": 1``)."""

    model_config = ConfigDict(extra="forbid", strict=True, title="FactorSpecRelationIR")
    factorspec_ir: Literal[1]
    name: str = "Record"
    layout: IRObject
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
