"""The Pydantic front end of the layout: a model class walked into its `ObjectLayout`.

Fields of the types the writer lays out itself become layout nodes the relations can read: a
leaf of each `LeafKind` (made by the kind's builder in `LEAF_BUILDERS` from the field's
metadata, with the constructors of `factorspec_sdk.relations.leaves`), nested models, unions
of models with a tag field, lists and dicts of these, Optional of these. Any other field
becomes a `GrammarLayout` from the JSON Schema Pydantic gives for it
(`factorspec_sdk.relations.grammar_schema`).
"""

from __future__ import annotations

import ast
import decimal
import enum
import fractions
import math
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Literal, Union, cast, get_args, get_origin

import annotated_types
from pydantic import BaseModel, PydanticUserError, TypeAdapter
from pydantic.fields import FieldInfo
from pydantic.types import UuidVersion

from factorspec_sdk.errors import UnsupportedFieldTypeError
from factorspec_sdk.relations.decorator import relations_of
from factorspec_sdk.relations.defaults import default_text
from factorspec_sdk.relations.floats import FLOAT_LIMIT, FLOAT_PLACES, Places, least_scaled
from factorspec_sdk.relations.grammar_schema import decimal_schema, pydantic_grammar_schema
from factorspec_sdk.relations.kinds import (
    ONLY_WHEN_READ,
    LeafKind,
    Temporal,
    kind_of_type,
)
from factorspec_sdk.relations.layout import (
    DEFAULT_MAX_LIST_LENGTH,
    GrammarLayout,
    JsonScalar,
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectField,
    ObjectLayout,
    UnionLayout,
    branch_part,
    dict_entry,
    grammar_layout,
    writable_key,
)
from factorspec_sdk.relations.leaves import (
    LeafError,
    bool_leaf,
    duration_leaf,
    enum_leaf,
    float_leaf,
    int_leaf,
    str_leaf,
    temporal_leaf,
    uuid_leaf,
)
from factorspec_sdk.relations.temporal import (
    DURATION_MAX,
    DURATION_MIN,
    duration_seconds,
    from_python,
)

__all__ = ["LEAF_BUILDERS", "build_layout"]


def build_layout(model: type[BaseModel]) -> ObjectLayout:
    """Walk a Pydantic model class into its layout.

    Fields of the types the writer lays out itself (bool, bounded int, str with length
    bounds, Literal, Enum, ``datetime.date`` with date bounds, nested models, unions of
    models with a tag field, lists of these, Optional of these, and a ``float``,
    ``Decimal``, ``datetime`` or ``time`` whose name a relation of the model or of a model in
    it reads as an attribute) become nodes the relations can read; any other field becomes a
    `GrammarLayout` from the JSON Schema Pydantic gives for it (a list of such values is one
    grammar value, never unrolled). A field with a default or a ``default_factory`` is an
    optional key (`ObjectField.optional`), its default as the writer's text where it is one
    value of the field (`factorspec_sdk.relations.defaults`); a union's tag never is.

    Raises:
        UnsupportedFieldTypeError: a field whose type has no JSON Schema, or whose schema
            llguidance cannot compile; a constraint that cannot hold (an empty range).
    """
    return _object(model, nullable=False, stack=(), read=_attributes_read(model))


def _attributes_read(model: type[BaseModel]) -> frozenset[str]:
    """Names read as attributes (``x.price``) by the relations of ``model`` and its models.

    A float (Decimal, datetime, time) field with such a name becomes a leaf, so that the
    relations can read it; other such fields stay grammar values, written as freely as the
    JSON Schema allows (a time zone, fractional seconds).
    """
    names: set[str] = set()
    for t in _models_in(model):
        for r in relations_of(t):
            names.update(n.attr for n in ast.walk(r.tree) if isinstance(n, ast.Attribute))
    return frozenset(names)


def _relation_models(annotation: object) -> list[str]:
    """The models in ``annotation`` (nested ones too) that have relations, by name."""
    return [t.__name__ for t in _models_in(annotation) if len(relations_of(t))]


def _models_in(annotation: object) -> Iterator[type[BaseModel]]:
    """Every model in ``annotation``: itself, its fields' models, theirs, ... (each once)."""
    seen: set[type[BaseModel]] = set()
    todo: list[object] = [annotation]
    while todo:
        t = todo.pop()
        if isinstance(t, type) and issubclass(t, BaseModel):
            if t in seen:
                continue
            seen.add(t)
            yield t
            todo.extend(f.annotation for f in t.model_fields.values())
        else:
            todo.extend(get_args(t))


def _is_read(name: str, read: frozenset[str]) -> bool:
    """Whether a relation reads the field ``name`` (``xs[]``, an item of ``xs``: ``xs``'s)."""
    return name.split("[", 1)[0] in read


class _NotNative(Exception):
    """The field is not one the writer lays out itself: it becomes a grammar value."""


def _object(
    model: type[BaseModel],
    *,
    nullable: bool,
    stack: tuple[type[BaseModel], ...],
    read: frozenset[str],
) -> ObjectLayout:
    fields = []
    for name, info in model.model_fields.items():
        node = _node(model, name, info.annotation, info, (*stack, model), read)
        optional = not info.is_required()  # a default or a default_factory
        default = None
        if optional and info.default_factory is None:
            default = default_text(node, info.default)
        key = info.alias or name
        fields.append(ObjectField(name, key, node, optional=optional, default=default))
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


@dataclass(frozen=True, slots=True)
class _Field:
    """A field as the front end reads it: its type without Optional and Annotated.

    Attributes:
        model: the model the field belongs to.
        name: the field's name (``xs[]`` for an item of the list ``xs``).
        annotation: its type, Optional and Annotated taken off.
        meta: its metadata (``Field``'s and ``Annotated``'s), nested ``FieldInfo``s unpacked.
        nullable: whether it was ``Optional``.
    """

    model: type[BaseModel]
    name: str
    annotation: object
    meta: tuple[object, ...]
    nullable: bool

    @classmethod
    def of(
        cls, model: type[BaseModel], name: str, annotation: object, info: FieldInfo | None
    ) -> _Field:
        meta, annotation = _metadata(info, annotation)
        annotation, nullable = _strip_optional(annotation)
        more, annotation = _metadata(None, annotation)
        flat: list[object] = []
        for m in [*meta, *more]:  # Annotated[int, Field(ge=0)] nests a FieldInfo: unpack it
            flat.extend(m.metadata if isinstance(m, FieldInfo) else [m])
        return cls(model, name, annotation, tuple(flat), nullable)

    def fail(self, why: str) -> UnsupportedFieldTypeError:
        """The error for this field: ``why`` it cannot be laid out."""
        return UnsupportedFieldTypeError(self.model.__name__, self.name, self.annotation, why)

    def leaf(self, make: Callable[[], LeafLayout]) -> LeafLayout:
        """The leaf ``make`` builds, its `LeafError` as this field's error."""
        try:
            return make()
        except LeafError as exc:
            raise self.fail(str(exc)) from None


def _node(
    model: type[BaseModel],
    name: str,
    annotation: object,
    info: FieldInfo | None,
    stack: tuple[type[BaseModel], ...],
    read: frozenset[str],
) -> LayoutNode:
    field = _Field.of(model, name, annotation, info)
    try:
        return _native(field, info, stack, read)
    except _NotNative:
        pass

    def fail(why: str) -> UnsupportedFieldTypeError:
        return UnsupportedFieldTypeError(model.__name__, name, annotation, why)

    inner = _relation_models(annotation)
    if inner:  # a grammar value cannot hold them: refuse rather than drop them
        raise fail(
            f"{', '.join(sorted(inner))} in it {'has' if len(inner) == 1 else 'have'} "
            "relations, and the field can only be written as a grammar value, where "
            "relations cannot hold (a union needs a one-value Literal tag field in every "
            "model; a recursive model cannot carry relations)"
        )

    full = annotation if info is None else typing.Annotated[annotation, info]
    try:
        schema = TypeAdapter(full).json_schema()  # type: ignore[arg-type]
    except PydanticUserError as exc:
        raise fail(str(exc)) from None
    if field.annotation is decimal.Decimal:
        schema = decimal_schema(field.meta, field.nullable, fail)
    return grammar_layout(pydantic_grammar_schema(schema), fail)


def _leaf_kind(annotation: object) -> LeafKind | None:
    """The leaf kind of a field's type (`kind_of_type`; a Literal or Enum is an enum)."""
    if get_origin(annotation) is Literal:
        return LeafKind.ENUM
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return LeafKind.ENUM
    return kind_of_type(annotation)


@dataclass(frozen=True, slots=True)
class _Limits:
    """The int bounds and lengths a field's metadata gives (None: not given)."""

    ge: int | None = None
    le: int | None = None
    min_len: int | None = None
    max_len: int | None = None


def _limits(meta: tuple[object, ...]) -> _Limits:
    """The int bounds and lengths of an int, str, enum, model, list or dict field.

    Any other constraint (a pattern, a float bound, ``multiple_of``, a discriminator...)
    raises `_NotNative`: llguidance has the keyword.
    """
    ge: int | None = None
    le: int | None = None
    min_len: int | None = None
    max_len: int | None = None
    bound = _int_bound
    for m in meta:
        if isinstance(m, annotated_types.Ge):
            ge = bound(m.ge)
        elif isinstance(m, annotated_types.Gt):
            ge = bound(m.gt) + 1
        elif isinstance(m, annotated_types.Le):
            le = bound(m.le)
        elif isinstance(m, annotated_types.Lt):
            le = bound(m.lt) - 1
        elif isinstance(m, annotated_types.MinLen):
            min_len = m.min_length
        elif isinstance(m, annotated_types.MaxLen):
            max_len = m.max_length
        elif isinstance(m, annotated_types.Interval):
            if m.ge is not None:
                ge = bound(m.ge)
            if m.gt is not None:
                ge = bound(m.gt) + 1
            if m.le is not None:
                le = bound(m.le)
            if m.lt is not None:
                le = bound(m.lt) - 1
        elif type(m).__name__ == "Strict" or m is None:
            continue
        else:  # a pattern, multiple_of, a discriminator, ...: llguidance has the keyword
            raise _NotNative
    return _Limits(ge, le, min_len, max_len)


def _native(
    field: _Field,
    info: FieldInfo | None,
    stack: tuple[type[BaseModel], ...],
    read: frozenset[str],
) -> LayoutNode:
    annotation, nullable, name = field.annotation, field.nullable, field.name
    kind = _leaf_kind(annotation)
    if kind in ONLY_WHEN_READ and not _is_read(name, read):
        raise _NotNative  # no relation reads it: the grammar writes any number, any ISO text
    if kind is not None:
        return LEAF_BUILDERS[kind](field)
    limits = _limits(field.meta)
    union = _union_branches(annotation)
    if union is not None:  # the writer's when it has a tag field (else a grammar value)
        tag = info.discriminator if info is not None else None
        return _union(union[0], union[1] or nullable, tag, stack, read)
    if info is not None and info.discriminator is not None:
        raise _NotNative

    origin = get_origin(annotation)
    model = field.model
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in stack:  # recursive: a grammar over the JSON Schema's $defs
            raise _NotNative
        return _object(annotation, nullable=nullable, stack=stack, read=read)
    if origin is list:
        (item_type,) = get_args(annotation) or (None,)
        if item_type is None:
            raise _NotNative
        item = _node(model, f"{name}[]", item_type, None, stack, read)
        if isinstance(item, GrammarLayout):  # one grammar value, not unrolled to its bound
            raise _NotNative
        bounded = limits.max_len is not None
        lo = limits.min_len or 0
        hi = limits.max_len if limits.max_len is not None else max(DEFAULT_MAX_LIST_LENGTH, lo)
        if hi < lo:
            raise field.fail(f"max_length {hi} is below min_length {lo}")
        return ListLayout(item, lo, hi, bounded, nullable)
    if origin is dict:
        return _dict(field, limits, stack, read)
    raise _NotNative


def _dict(
    field: _Field, limits: _Limits, stack: tuple[type[BaseModel], ...], read: frozenset[str]
) -> ListLayout:
    """A dict field a relation reads (or whose values have relations): a list of entries."""
    model, name, annotation = field.model, field.name, field.annotation
    if not _is_read(name, read) and not _relation_models(annotation):
        raise _NotNative  # no relation reads it or lives in it: the grammar writes it
    key_type, value_type = get_args(annotation) or (None, None)
    if key_type is None:
        raise _NotNative
    key = _node(model, f"{name}[]", key_type, None, stack, read)
    if not writable_key(key):
        raise _NotNative
    value = _node(model, f"{name}[]", value_type, None, stack, read)
    if isinstance(value, GrammarLayout):
        raise _NotNative
    lo = limits.min_len or 0
    hi = limits.max_len if limits.max_len is not None else max(DEFAULT_MAX_LIST_LENGTH, lo)
    assert isinstance(key, LeafLayout)  # `writable_key`
    if key.kind == LeafKind.ENUM:
        hi = min(hi, len(key.choices))
    if hi < lo:
        raise field.fail(f"max_length {hi} is below min_length {lo} (or the keys it can have)")
    entry = dict_entry(f"{model.__name__}.{name}", key, value)
    return ListLayout(entry, lo, hi, limits.max_len is not None, field.nullable, mapping=True)


def _union_branches(annotation: object) -> tuple[list[type[BaseModel]], bool] | None:
    """The models of a union of two or more models (and whether ``None`` is one), else None."""
    if get_origin(annotation) not in (Union, types.UnionType):
        return None
    args = get_args(annotation)
    models = [a for a in args if a is not type(None)]
    if len(models) < 2:
        return None
    if not all(isinstance(m, type) and issubclass(m, BaseModel) for m in models):
        return None
    return cast(list[type[BaseModel]], models), len(models) < len(args)


def _single_literal(model: type[BaseModel], name: str) -> JsonScalar | None:
    """The value of ``model.name`` when it is a ``Literal`` of one str/int value, else None."""
    f = model.model_fields.get(name)
    if f is None or get_origin(f.annotation) is not Literal:
        return None
    values = get_args(f.annotation)
    if len(values) != 1 or not isinstance(values[0], (str, int)):
        return None
    value: JsonScalar = values[0]
    return value


def _union(
    models: list[type[BaseModel]],
    nullable: bool,
    tag: object,
    stack: tuple[type[BaseModel], ...],
    read: frozenset[str],
) -> UnionLayout:
    """A union of models with a tag field, each branch writing the tag first.

    The tag is the discriminator, or else the first field of the first model that every
    model has as a one-value ``Literal``, the values all different. Without one (or with a
    discriminator that is not a field name, or two models of one name) the union stays a
    grammar value.
    """
    if tag is None:
        for name in models[0].model_fields:
            values = [_single_literal(m, name) for m in models]
            if None not in values and len(set(values)) == len(values):
                tag = name
                break
    if not isinstance(tag, str):
        raise _NotNative
    values = [_single_literal(m, tag) for m in models]
    if None in values or len(set(values)) != len(values):
        raise _NotNative
    if len({branch_part(m) for m in models}) != len(models) or any(m in stack for m in models):
        raise _NotNative
    branches = []
    for m in models:
        obj = _object(m, nullable=False, stack=stack, read=read)
        # the tag is always written, first: it tells the branches apart (Pydantic needs it
        # to pick a discriminated union's branch)
        first = [replace(f, optional=False, default=None) for f in obj.fields if f.name == tag]
        rest = [f for f in obj.fields if f.name != tag]
        branches.append(ObjectLayout(obj.model, (*first, *rest), False))
    return UnionLayout(tuple(branches), tag, nullable)


# --------------------------------------------------------------------------- leaves


def _bool(field: _Field) -> LeafLayout:
    _limits(field.meta)  # a constraint other than a bound stays with the grammar
    return bool_leaf(nullable=field.nullable)


def _int(field: _Field) -> LeafLayout:
    limits = _limits(field.meta)
    return field.leaf(lambda: int_leaf(limits.ge, limits.le, nullable=field.nullable))


def _str(field: _Field) -> LeafLayout:
    limits = _limits(field.meta)
    return field.leaf(
        lambda: str_leaf(limits.min_len or 0, limits.max_len, nullable=field.nullable)
    )


def _enum(field: _Field) -> LeafLayout:
    """A ``Literal`` of str/int/bool values, or an ``Enum`` of str/int values."""
    _limits(field.meta)
    annotation = field.annotation
    enum_type: type[enum.Enum] | None = None
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        enum_type = annotation
        values: tuple[object, ...] = tuple(member.value for member in annotation)
        if not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in values):
            raise _NotNative
    else:
        values = get_args(annotation)
        if not values or not all(isinstance(v, (str, int, bool)) for v in values):
            raise _NotNative
    choices = cast(tuple[JsonScalar, ...], values)
    return field.leaf(lambda: enum_leaf(choices, enum_type=enum_type, nullable=field.nullable))


def _float(field: _Field) -> LeafLayout:
    """A float or Decimal a relation reads: fixed-point, its bounds scaled.

    A float has `Places` decimals (default `FLOAT_PLACES`); a Decimal its ``decimal_places``
    (default `FLOAT_PLACES` too), and ``max_digits`` bounds its scaled value. A bound is kept
    exactly: ``ge=c`` becomes the least scaled value ``n`` whose value (a float's: the
    double ``n / 10**places`` parses to; a Decimal's: ``n / 10**places`` itself) is
    ``>= c``, and so on for the others.
    """
    is_decimal = field.annotation is decimal.Decimal
    places = FLOAT_PLACES
    digits: int | None = None
    lower: list[tuple[fractions.Fraction | None, bool]] = []  # (bound, strict)
    upper: list[tuple[fractions.Fraction | None, bool]] = []

    def exact(c: object) -> fractions.Fraction | None:
        """A bound's exact value (None: an infinite one, no bound)."""
        x = c if is_decimal and isinstance(c, decimal.Decimal) else float(c)  # type: ignore[arg-type]
        if x != x:  # NaN
            raise _NotNative
        return fractions.Fraction(x) if math.isfinite(x) else None

    for m in field.meta:
        if isinstance(m, Places) and not is_decimal:
            places = m.places
        elif isinstance(m, annotated_types.Ge):
            lower.append((exact(m.ge), False))
        elif isinstance(m, annotated_types.Gt):
            lower.append((exact(m.gt), True))
        elif isinstance(m, annotated_types.Le):
            upper.append((exact(m.le), False))
        elif isinstance(m, annotated_types.Lt):
            upper.append((exact(m.lt), True))
        elif is_decimal and type(m).__name__ == "_PydanticGeneralMetadata":
            for key, value in vars(m).items():
                if key == "decimal_places" and value is not None:
                    places = value
                elif key == "max_digits" and value is not None:
                    digits = value
                elif value is not None:
                    raise _NotNative
        elif type(m).__name__ == "Strict" or m is None:
            continue
        else:  # multiple_of, allow_inf_nan...: the grammar keeps the keyword
            raise _NotNative
    if not 0 <= places <= 12 or (digits is not None and digits < places):
        raise _NotNative
    lo, hi = -FLOAT_LIMIT, FLOAT_LIMIT
    if digits is not None:  # at most `digits` digits: Pydantic counts the scaled value's
        lo, hi = max(lo, 1 - 10**digits), min(hi, 10**digits - 1)
    for c, strict in lower:
        if c is not None:
            lo = max(lo, least_scaled(c, strict, places, is_decimal))
    for c, strict in upper:
        if c is not None:
            hi = min(hi, -least_scaled(-c, strict, places, is_decimal))
    kind = LeafKind.DECIMAL if is_decimal else LeafKind.FLOAT
    return field.leaf(lambda: float_leaf(kind, lo, hi, places, nullable=field.nullable))


_BOUND_TYPES = (
    annotated_types.Interval,
    annotated_types.Ge,
    annotated_types.Gt,
    annotated_types.Le,
    annotated_types.Lt,
)


def _whole_bounds(
    meta: tuple[object, ...], value: Callable[[object], tuple[int, bool] | None]
) -> tuple[int | None, int | None]:
    """The least and greatest whole values that ``ge/gt/le/lt`` bounds in ``meta`` allow.

    ``value`` gives a bound's ``(whole, exact)``: the whole value at or below it and whether
    it is that exactly (a datetime's or timedelta's whole second, dropping microseconds).
    Every bound holds, as Pydantic checks each. A bound ``value`` cannot read (another type),
    or a constraint other than a bound (a length, a pattern...), stays with the grammar.
    """
    ge: int | None = None
    le: int | None = None
    for m in meta:
        if type(m).__name__ == "Strict" or m is None:
            continue
        if not isinstance(m, _BOUND_TYPES):
            raise _NotNative  # a length, a pattern...: the grammar has the keyword
        for op in ("ge", "gt", "le", "lt"):
            bound = getattr(m, op, None)
            if bound is None:
                continue
            got = value(bound)
            if got is None:
                raise _NotNative  # a bound of another type: the grammar keeps it
            whole, exact = got
            if op in ("ge", "gt"):
                least = whole + 1 if op == "gt" or not exact else whole
                ge = least if ge is None else max(ge, least)
            else:
                most = whole - 1 if op == "lt" and exact else whole
                le = most if le is None else min(le, most)
    return ge, le


def _temporal(field: _Field) -> LeafLayout:
    """A date, datetime or time leaf, its bounds as values of whole seconds.

    A bound with microseconds is kept exactly: ``ge=10:00:00.5`` becomes 10:00:01, the
    least whole second at or after it, ``le=`` of it 10:00:00. A ``datetime`` with aware
    bounds is an aware leaf (written in UTC). Bounds of mixed kinds stay with the grammar.
    """
    kind = cast(Temporal, kind_of_type(field.annotation))
    bounds = [getattr(m, op, None) for m in field.meta for op in ("ge", "gt", "le", "lt")]
    if kind == LeafKind.DATETIME and any(from_python(LeafKind.AWARE, b) for b in bounds):
        kind = LeafKind.AWARE
    ge, le = _whole_bounds(field.meta, lambda bound: from_python(kind, bound))
    return field.leaf(lambda: temporal_leaf(kind, ge, le, nullable=field.nullable))


def _duration(field: _Field) -> LeafLayout:
    """A ``timedelta`` leaf: its whole seconds, ``|n| < 2**32`` (Pydantic's limit).

    Bounds are kept exactly, as a datetime's (``ge=timedelta(seconds=1.5)`` starts at 2);
    bounds beyond Pydantic's limit are the limit.
    """
    lo, hi = _whole_bounds(field.meta, duration_seconds)
    ge = DURATION_MIN if lo is None else max(lo, DURATION_MIN)
    le = DURATION_MAX if hi is None else min(hi, DURATION_MAX)
    return field.leaf(lambda: duration_leaf(ge, le, nullable=field.nullable))


def _uuid(field: _Field) -> LeafLayout:
    """A ``uuid.UUID`` leaf: any UUID, written as its canonical text.

    A version constraint (Pydantic's ``UUID4``...) is refused: the writer writes any of the
    128-bit values, so records would fail the version check (the grammar has no format for
    it either).
    """
    for m in field.meta:
        if isinstance(m, UuidVersion):
            raise field.fail(
                f"a UUID of version {m.uuid_version} (UUID{m.uuid_version}) is not supported: "
                "the writer writes any UUID and does not yet enforce a version's digits; "
                "declare the field uuid.UUID (any version)"
            )
        if not (type(m).__name__ == "Strict" or m is None):
            raise _NotNative  # another constraint: the grammar keeps the keyword
    return uuid_leaf(nullable=field.nullable)


def _int_bound(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _NotNative  # a float or Decimal bound: the grammar keeps it exactly
    return value


LEAF_BUILDERS: dict[LeafKind, Callable[[_Field], LeafLayout]] = {
    LeafKind.BOOL: _bool,
    LeafKind.INT: _int,
    LeafKind.STR: _str,
    LeafKind.ENUM: _enum,
    LeafKind.DATE: _temporal,
    LeafKind.DATETIME: _temporal,
    LeafKind.AWARE: _temporal,
    LeafKind.TIME: _temporal,
    LeafKind.DURATION: _duration,
    LeafKind.FLOAT: _float,
    LeafKind.DECIMAL: _float,
    LeafKind.UUID: _uuid,
}
"""How each leaf kind is read from a field's type and metadata (`kind_of_type` finds it)."""
