"""The layout of a Pydantic model: the tree the canonical JSON writer walks.

A layout node is an object (fields in declaration order), a list (with length bounds) or a
leaf (bool, bounded int, enumerated value, free str). Any node may be nullable
(``Optional[...]``). Leaves and list lengths are addressed by *paths*: tuples of field names
and list indices, e.g. ``("stays", 2, "city")``; `path_name` spells them as
``stays[2].city`` and the length of a list as ``len(stays)``.
"""

from __future__ import annotations

import enum
import types
import typing
from dataclasses import dataclass
from typing import Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from factorspec_sdk.errors import UnsupportedFieldTypeError

__all__ = [
    "DEFAULT_MAX_INT_DIGITS",
    "DEFAULT_MAX_LIST_LENGTH",
    "INT_LIMIT",
    "LayoutNode",
    "LeafKind",
    "LeafLayout",
    "ListLayout",
    "ObjectField",
    "ObjectLayout",
    "Path",
    "build_layout",
    "length_name",
    "node_at",
    "path_name",
]

DEFAULT_MAX_LIST_LENGTH = 16
"""List bound for a list without ``Field(max_length=...)`` (see *Writing relations*)."""

DEFAULT_MAX_INT_DIGITS = 18
"""Longest integer (in digits) the writer produces for an int without bounds."""

INT_LIMIT = 10**DEFAULT_MAX_INT_DIGITS - 1
"""Largest magnitude of an int leaf without bounds (`DEFAULT_MAX_INT_DIGITS` nines)."""

Path = tuple[str | int, ...]
LeafKind = Literal["bool", "int", "str", "enum"]
JsonScalar = str | int | bool


def path_name(path: Path) -> str:
    """Spell a path as Python would: ``stays[2].city``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def length_name(path: Path) -> str:
    """Name of the length variable of the list at ``path``: ``len(stays)``."""
    return f"len({path_name(path)})"


@dataclass(frozen=True, slots=True)
class LeafLayout:
    """A scalar field.

    Attributes:
        kind: ``bool``, ``int``, ``str`` (free text) or ``enum`` (a finite set of values).
        nullable: whether ``null`` is allowed.
        ge: inclusive lower bound of an int.
        le: inclusive upper bound of an int.
        min_length: minimum length of a free str.
        max_length: maximum length of a free str.
        choices: the values of an enum leaf (Literal values or Enum member values).
        enum_type: the Enum class, when the leaf is an Enum.
    """

    kind: LeafKind
    nullable: bool = False
    ge: int | None = None
    le: int | None = None
    min_length: int = 0
    max_length: int | None = None
    choices: tuple[JsonScalar, ...] = ()
    enum_type: type[enum.Enum] | None = None


@dataclass(frozen=True, slots=True)
class ListLayout:
    """A list field, unrolled up to ``max_length`` items.

    Attributes:
        item: layout of one item.
        min_length: fewest items (``Field(min_length=...)``).
        max_length: most items (``Field(max_length=...)``, else `DEFAULT_MAX_LIST_LENGTH`).
        bounded_by_schema: whether ``max_length`` came from the schema.
        nullable: whether ``null`` is allowed instead of the list.
    """

    item: LayoutNode
    min_length: int
    max_length: int
    bounded_by_schema: bool
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class ObjectField:
    """One field of an object: its attribute name, JSON key and layout."""

    name: str
    key: str
    node: LayoutNode


@dataclass(frozen=True, slots=True)
class ObjectLayout:
    """A Pydantic model: its fields in declaration order."""

    model: type[BaseModel]
    fields: tuple[ObjectField, ...]
    nullable: bool = False

    def field(self, name: str) -> ObjectField:
        """The field called ``name`` (KeyError if absent)."""
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


LayoutNode = ObjectLayout | ListLayout | LeafLayout


def node_at(layout: ObjectLayout, path: Path) -> LayoutNode | None:
    """The node at ``path`` (concrete list indices), or None if the layout has none there.

    An index at or past its list's ``max_length`` has no node.
    """
    node: LayoutNode = layout
    for part in path:
        if isinstance(part, int):
            if not isinstance(node, ListLayout) or not 0 <= part < node.max_length:
                return None
            node = node.item
        else:
            if not isinstance(node, ObjectLayout):
                return None
            found = [f for f in node.fields if f.name == part]
            if not found:
                return None
            node = found[0].node
    return node


def build_layout(model: type[BaseModel]) -> ObjectLayout:
    """Walk a Pydantic model class into its layout.

    Raises:
        UnsupportedFieldTypeError: for a field type the writer cannot produce (float, dict,
            set, tuple, unions other than ``Optional``, recursive models, ...).
    """
    return _object(model, nullable=False, stack=())


def _object(
    model: type[BaseModel], *, nullable: bool, stack: tuple[type[BaseModel], ...]
) -> ObjectLayout:
    if model in stack:
        raise UnsupportedFieldTypeError(
            model.__name__, "<model>", model, "recursive models have no finite layout"
        )
    fields = []
    for name, info in model.model_fields.items():
        node = _node(model, name, info.annotation, info, (*stack, model))
        fields.append(ObjectField(name=name, key=info.alias or name, node=node))
    return ObjectLayout(model=model, fields=tuple(fields), nullable=nullable)


def _strip_optional(annotation: object) -> tuple[object, bool]:
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(get_args(annotation)) == 2:
            return args[0], True
    return annotation, False


def _metadata(info: FieldInfo | None, annotation: object) -> tuple[list[object], object]:
    meta: list[object] = list(info.metadata) if info is not None else []
    if get_origin(annotation) is typing.Annotated:
        base, *extra = get_args(annotation)
        meta.extend(extra)
        annotation = base
    return meta, annotation


def _node(
    model: type[BaseModel],
    name: str,
    annotation: object,
    info: FieldInfo | None,
    stack: tuple[type[BaseModel], ...],
) -> LayoutNode:
    meta, annotation = _metadata(info, annotation)
    annotation, nullable = _strip_optional(annotation)
    more, annotation = _metadata(None, annotation)
    meta.extend(more)

    def fail(why: str) -> UnsupportedFieldTypeError:
        return UnsupportedFieldTypeError(model.__name__, name, annotation, why)

    ge: int | None = None
    le: int | None = None
    min_len: int | None = None
    max_len: int | None = None
    flat: list[object] = []
    for m in meta:  # Annotated[int, Field(ge=0)] nests a FieldInfo: unpack its metadata
        flat.extend(m.metadata if isinstance(m, FieldInfo) else [m])
    for m in flat:
        if isinstance(m, annotated_types.Ge):
            ge = _int_bound(m.ge, fail)
        elif isinstance(m, annotated_types.Gt):
            ge = _int_bound(m.gt, fail) + 1
        elif isinstance(m, annotated_types.Le):
            le = _int_bound(m.le, fail)
        elif isinstance(m, annotated_types.Lt):
            le = _int_bound(m.lt, fail) - 1
        elif isinstance(m, annotated_types.MinLen):
            min_len = m.min_length
        elif isinstance(m, annotated_types.MaxLen):
            max_len = m.max_length
        elif isinstance(m, annotated_types.Interval):
            if m.ge is not None:
                ge = _int_bound(m.ge, fail)
            if m.gt is not None:
                ge = _int_bound(m.gt, fail) + 1
            if m.le is not None:
                le = _int_bound(m.le, fail)
            if m.lt is not None:
                le = _int_bound(m.lt, fail) - 1
        elif type(m).__name__ == "Strict" or m is None:
            continue
        else:
            raise fail(f"constraint {m!r} is not supported yet")

    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _object(annotation, nullable=nullable, stack=stack)
    if origin is list:
        (item_type,) = get_args(annotation) or (None,)
        if item_type is None:
            raise fail("a list needs an item type, e.g. list[int]")
        item = _node(model, f"{name}[]", item_type, None, stack)
        bounded = max_len is not None
        lo = min_len or 0
        hi = max_len if max_len is not None else max(DEFAULT_MAX_LIST_LENGTH, lo)
        if hi < lo:
            raise fail(f"max_length {hi} is below min_length {lo}")
        return ListLayout(item, lo, hi, bounded, nullable)
    if annotation is bool:
        return LeafLayout("bool", nullable=nullable)
    if annotation is int:
        if ge is not None and le is not None and le < ge:
            raise fail(f"empty range [{ge}, {le}]")
        return LeafLayout("int", nullable=nullable, ge=ge, le=le)
    if annotation is str:
        return LeafLayout("str", nullable=nullable, min_length=min_len or 0, max_length=max_len)
    if origin is Literal:
        values = get_args(annotation)
        if not values or not all(isinstance(v, (str, int, bool)) for v in values):
            raise fail("Literal values must be str, int or bool")
        return LeafLayout("enum", nullable=nullable, choices=tuple(values))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = tuple(member.value for member in annotation)
        if not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in values):
            raise fail("Enum values must be str or int")
        return LeafLayout("enum", nullable=nullable, choices=values, enum_type=annotation)
    if annotation is float:
        raise fail("float fields are not supported yet; use int (e.g. integer cents)")
    raise fail("supported: bool, int, str, Literal, Enum, nested BaseModel, list[...], Optional")


def _int_bound(value: object, fail: typing.Callable[[str], Exception]) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(f"bound {value!r} must be an int")
    return value
