"""The variables an IR document declares, checked against its layout.

A variable's kind, bounds and domain are never taken from the sender: `derive_variable`
finds the layout node its path names, tells by its name which variable of that node it is (a
leaf's value, a length, a null-ness, a union's branch, a date's part, two strings' sameness,
a string's affix) and gives it the shape the relation compiler gives it
(`factorspec_sdk.relations.variables`). The kind the document declares must be the one the
IR writes for that shape (`WIRE_KINDS`: the IR says ``int`` for a date's, a float's and a
date part's values, ``len`` for a string's length too, ``bool`` for sameness and affixes).
"""

from __future__ import annotations

from dataclasses import dataclass

from factorspec_sdk.ir.limits import IRError
from factorspec_sdk.relations.checks import STR_METHODS
from factorspec_sdk.relations.kinds import LeafKind, VarKind
from factorspec_sdk.relations.layout import (
    LayoutNode,
    LeafLayout,
    ListLayout,
    Path,
    RootLayout,
    UnionLayout,
    affix_name,
    branch_name,
    length_name,
    node_at,
    path_name,
    same_name,
)
from factorspec_sdk.relations.leaves import LeafError
from factorspec_sdk.relations.variables import (
    AFFIX,
    NULL,
    SAME,
    VarShape,
    branch_variable,
    date_part_of,
    leaf_variable,
    length_variable,
    part_variable,
    parts_of,
    text_length_variable,
)

__all__ = ["WIRE_KINDS", "IRVariableSpec", "derive_variable"]

WIRE_KINDS: dict[VarKind, str] = {
    VarKind.INT: "int",
    VarKind.BOOL: "bool",
    VarKind.STR: "str",
    VarKind.LEN: "len",
    VarKind.STRLEN: "len",
    VarKind.DATE: "int",
    VarKind.DATEPART: "int",
    VarKind.FLOAT: "int",
    VarKind.SAME: "bool",
    VarKind.AFFIX: "bool",
}
"""The kind the IR writes for each variable kind (``IRVariable.kind``): the layout node at a
variable's path (and its name) tells the rest."""


@dataclass(frozen=True, slots=True)
class IRVariableSpec:
    """A declared variable, checked: its name, path and shape, and a same's or affix's part.

    Attributes:
        name: its name.
        path: its layout path.
        shape: its kind, bounds and domain, derived from the layout.
        other: a ``same`` variable's second leaf.
        affix: an ``affix`` variable's method and constant.
    """

    name: str
    path: Path
    shape: VarShape
    other: Path | None = None
    affix: tuple[str, str] | None = None


def _is_free_str(node: LayoutNode | None) -> bool:
    return isinstance(node, LeafLayout) and node.kind == LeafKind.STR


def derive_variable(
    layout: RootLayout,
    name: str,
    path: Path,
    kind: str,
    other: Path | None = None,
    text: str | None = None,
) -> IRVariableSpec:
    """The variable ``name`` at ``path``, as the relation compiler makes it.

    Raises:
        IRError: the path is not in the layout, the name names no variable of its node, or
            the declared ``kind`` is not the variable's.
    """
    node = node_at(layout, path)
    if node is None:
        raise IRError(f"variable {name!r}: path {list(path)!r} is not in the layout")
    if text is not None:
        method = name.split("(", 1)[0]
        wire = WIRE_KINDS[VarKind.AFFIX]
        if method not in STR_METHODS or name != affix_name(method, path, text) or kind != wire:
            raise IRError(
                f"variable {name!r}: only startswith/endswith(<path>, <text>) of kind bool "
                "has a text"
            )
        if not _is_free_str(node):
            raise IRError(f"variable {name!r}: {path_name(path)} is not a free str leaf")
        return IRVariableSpec(name, path, AFFIX, affix=(method, text))
    if other is not None:
        if name != same_name(path, other) or kind != WIRE_KINDS[VarKind.SAME]:
            raise IRError(
                f"variable {name!r}: only same(<path>, <other>) of kind bool has an other path"
            )
        for p in (path, other):
            if not _is_free_str(node_at(layout, p)):
                raise IRError(f"variable {name!r}: {path_name(p)} is not a free str leaf")
        return IRVariableSpec(name, path, SAME, other=other)
    shape = _shape(node, name, path)
    if WIRE_KINDS[shape.kind] != kind:
        raise IRError(
            f"variable {name!r} has kind {WIRE_KINDS[shape.kind]!r} in this layout, not {kind!r}"
        )
    return IRVariableSpec(name, path, shape)


def _shape(node: LayoutNode, name: str, path: Path) -> VarShape:
    """The shape of the variable ``name`` of ``node``, told by the form of its name."""
    where = path_name(path)
    if name == length_name(path):
        if _is_free_str(node):  # a free string's length
            assert isinstance(node, LeafLayout)
            return text_length_variable(node)
        if not isinstance(node, ListLayout):
            raise IRError(f"variable {name!r}: {where} is not a list or a free str")
        return length_variable(node.min_length, node.max_length)
    part = date_part_of(name)
    if part is not None and name == f"{part}({where})":
        if not (isinstance(node, LeafLayout) and part in parts_of(node.kind)):
            kinds = [str(k) for k in LeafKind if part in parts_of(k)]
            raise IRError(f"variable {name!r}: {where} is not a {' or '.join(kinds)}")
        return part_variable(part)
    if name == branch_name(path):
        if not isinstance(node, UnionLayout):
            raise IRError(f"variable {name!r}: {where} is not a union")
        return branch_variable(node)
    if name == f"null({where})":
        if not node.nullable:
            raise IRError(f"variable {name!r}: {where} is not nullable")
        return NULL
    if name == where:
        if not isinstance(node, LeafLayout):
            raise IRError(f"variable {name!r}: {where} is not a leaf")
        try:
            return leaf_variable(node)
        except LeafError as exc:
            raise IRError(f"variable {name!r}: {exc}") from None
    raise IRError(
        f"variable {name!r} is not named after its path: expected {where!r}, "
        f"{length_name(path)!r} or 'null({where})'"
    )
