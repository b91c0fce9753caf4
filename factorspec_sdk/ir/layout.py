"""The IR front end of the layout: an IR document's layout, checked against the limits.

`build_ir_layout` walks the document's layout (`factorspec_sdk.ir.model.IRNode`) into the
same layout nodes the Pydantic front end makes: each leaf with the constructors of
`factorspec_sdk.relations.leaves`, through `factorspec_sdk.ir.leaves` (so a leaf's bounds are
checked once, the same way for both front ends), each object with a pydantic model that
checks the structure and bounds of a record's JSON (a server has no Python model). The limits
of `IRLimits` (nodes, depth, list bounds, lengths, choices) are checked on the way.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    TypeAdapter,
    ValidationError,
    create_model,
    model_validator,
)

from factorspec_sdk.ir.leaves import leaf_annotation, leaf_from_ir
from factorspec_sdk.ir.limits import IRError, IRLimits
from factorspec_sdk.ir.model import (
    IRField,
    IRGrammar,
    IRLeaf,
    IRList,
    IRNode,
    IRObject,
    IRUnion,
    RelationIR,
)
from factorspec_sdk.relations.floats import fixed_text, scaled_value
from factorspec_sdk.relations.kinds import LeafKind
from factorspec_sdk.relations.layout import (
    INT_LIMIT,
    GrammarLayout,
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectField,
    ObjectLayout,
    RootLayout,
    UnionLayout,
    branch_part,
    grammar_layout,
    writable_key,
)
from factorspec_sdk.relations.leaves import LeafError

__all__ = ["build_ir_layout", "root_model"]


def build_ir_layout(ir: RelationIR, limits: IRLimits) -> RootLayout:
    """The layout of a parsed IR document.

    Raises:
        IRError: a limit exceeded, or a node that breaks a rule the IR's schema cannot
            state (a repeated field, an empty range, a union without its tags...).
    """
    built = _LayoutBuilder(limits).build(ir.layout, 1, 1, "")
    assert isinstance(built, (ObjectLayout, GrammarLayout))  # IRRoot's two kinds
    return built


@dataclass(slots=True)
class _LayoutBuilder:
    limits: IRLimits
    nodes: int = 0
    unrolled: int = 0
    names: set[str] = field(default_factory=set)

    def build(self, node: IRNode, depth: int, mult: int, where: str) -> LayoutNode:
        lim = self.limits
        self.nodes += 1
        self.unrolled += mult
        if self.nodes > lim.max_layout_nodes:
            raise IRError(f"the layout has more than {lim.max_layout_nodes} nodes")
        if self.unrolled > lim.max_unrolled_nodes:
            raise IRError(
                f"the layout has more than {lim.max_unrolled_nodes} nodes once lists are unrolled"
            )
        if depth > lim.max_layout_depth:
            raise IRError(f"the layout nests deeper than {lim.max_layout_depth} levels")
        if isinstance(node, IRObject):
            return self._object(node, depth, mult, where)
        if isinstance(node, IRGrammar):

            def fail(why: str) -> IRError:
                return IRError(f"value {where or '<root>'}: {why}")

            return grammar_layout(node.json_schema, fail)
        if isinstance(node, IRUnion):
            return self._union(node, depth, mult, where)
        if isinstance(node, IRList):
            if not 0 <= node.min_length <= node.max_length <= lim.max_list_length:
                raise IRError(
                    f"list {where}: need 0 <= min_length <= max_length <= {lim.max_list_length}, "
                    f"got {node.min_length}..{node.max_length}"
                )
            item = self.build(node.item, depth + 1, mult * max(node.max_length, 1), where + "[]")
            if node.mapping and not _entry_like(item):
                raise IRError(
                    f"dict {where}: its item must be an object of the fields key (a str or a "
                    "Literal of strs, not nullable) and value"
                )
            return ListLayout(
                item,
                node.min_length,
                node.max_length,
                node.bounded_by_schema,
                node.nullable,
                mapping=node.mapping,
            )
        return self._leaf(node, where)

    def _object(self, node: IRObject, depth: int, mult: int, where: str) -> ObjectLayout:
        names: set[str] = set()
        keys: set[str] = set()
        fields: list[ObjectField] = []
        self._check_text(node.name, where)
        for f in node.fields:
            self._check_text(f.name, where)
            self._check_text(f.key, where)
            if not f.name:
                raise IRError(f"object {where or '<root>'}: a field has an empty name")
            if f.name in names or f.key in keys:
                raise IRError(
                    f"object {where or '<root>'}: field {f.name!r} / key {f.key!r} repeats"
                )
            names.add(f.name)
            keys.add(f.key)
            sub = f"{where}.{f.name}" if where else f.name
            built = self.build(f.node, depth + 1, mult, sub)
            _check_default(f, built, sub)
            if f.others:
                _check_others(f, built, f is node.fields[-1], sub)
            fields.append(ObjectField(f.name, f.key, built, f.optional, f.default, f.others))
        model = _object_model(node.name, fields)
        return ObjectLayout(model, tuple(fields), node.nullable, node.undeclared_keys)

    def _union(self, node: IRUnion, depth: int, mult: int, where: str) -> UnionLayout:
        place = f"union {where or '<root>'}"
        if len(node.branches) < 2:
            raise IRError(f"{place}: a union needs two or more branches")
        branches: list[ObjectLayout] = []
        tags: set[object] = set()
        for b in node.branches:
            obj = self._object(b, depth + 1, mult, f"{where}<{b.name}>")
            first = obj.fields[0] if obj.fields else None
            tag = first.node if first is not None and first.name == node.tag else None
            if not (
                isinstance(tag, LeafLayout)
                and tag.kind == LeafKind.ENUM
                and len(tag.choices) == 1
                and not obj.fields[0].optional
            ):
                raise IRError(
                    f"{place}: branch {b.name!r} must begin with the tag field {node.tag!r}, "
                    "an enum leaf of one choice, not optional"
                )
            if tag.choices[0] in tags or tag.nullable:
                raise IRError(f"{place}: the branches' tags must differ and not be null")
            tags.add(tag.choices[0])
            branches.append(obj)
        if len({branch_part(b.model) for b in branches}) != len(branches):
            raise IRError(f"{place}: two branches have one name")
        return UnionLayout(tuple(branches), node.tag, node.nullable)

    def _check_text(self, s: str, where: str) -> None:
        if len(s) > self.limits.max_string_length:
            raise IRError(
                f"{where or '<root>'}: a name is longer than {self.limits.max_string_length}"
            )

    def _leaf(self, node: IRLeaf, where: str) -> LeafLayout:
        lim = self.limits

        def bad(why: str) -> IRError:
            return IRError(f"leaf {where}: {why}")

        for b in (node.ge, node.le):
            if b is not None and abs(b) > INT_LIMIT:
                raise bad(f"int bounds must be within +-{INT_LIMIT}")
        if max(node.min_length, node.max_length or 0) > lim.max_text_length:
            raise bad(f"string lengths are limited to {lim.max_text_length}")
        if len(node.choices) > lim.max_choices:
            raise bad(f"more than {lim.max_choices} choices")
        for c in node.choices:
            if isinstance(c, str) and len(c) > lim.max_string_length:
                raise bad(f"a choice is longer than {lim.max_string_length} characters")
            if isinstance(c, int) and not isinstance(c, bool) and abs(c) > INT_LIMIT:
                raise bad(f"int choices must be within +-{INT_LIMIT}")
        try:
            return leaf_from_ir(node)
        except LeafError as exc:
            raise bad(str(exc)) from None


def _check_default(f: IRField, node: LayoutNode, where: str) -> None:
    """A field's ``default``: on an optional field, a value of its node, in canonical text.

    Raises:
        IRError: a default on a required field, or one that is not the text the writer
            writes for a value of the node (`leaf_annotation` checks the value; ``null``
            needs a nullable node; no other value of an object, list or union).
    """
    if f.default is None:
        return
    if not f.optional:
        raise IRError(f"field {where}: a default applies to an optional field only")
    try:
        value = json.loads(f.default)
    except ValueError:
        raise IRError(f"field {where}: its default {f.default!r} is not JSON") from None
    if value is None and node.nullable:
        return
    problem = "is not a value of the field"
    if isinstance(node, LeafLayout) and value is not None:
        try:
            TypeAdapter(cast(Any, leaf_annotation(node))).validate_python(value)
        except ValidationError:
            pass
        else:
            if _canonical(node, value) == f.default:
                return
            problem = "is not the text the writer writes for it"
    raise IRError(f"field {where}: its default {f.default!r} {problem}")


def _check_others(f: IRField, node: LayoutNode, last: bool, where: str) -> None:
    """A field of ``others``: the object's last, required, empty key, a dict of free keys.

    Raises:
        IRError: it breaks one of those rules.
    """
    entry = node.item if isinstance(node, ListLayout) and node.mapping else None
    key = entry.fields[0].node if isinstance(entry, ObjectLayout) else None
    if not (
        last
        and not f.optional
        and f.key == ""
        and isinstance(key, LeafLayout)
        and key.kind == LeafKind.STR
        and not node.nullable
    ):
        raise IRError(
            f"field {where}: a field of others must be its object's last, not optional, with "
            "the key '' and a dict of free str keys (mapping, not nullable)"
        )


def _canonical(node: LeafLayout, value: object) -> str:
    """The text the writer writes for a leaf's JSON value (a number's fixed-point text)."""
    if node.kind in (LeafKind.FLOAT, LeafKind.DECIMAL):
        n = scaled_value(value, node.places)
        return "" if n is None else fixed_text(n, node.places)
    return json.dumps(value, ensure_ascii=False)  # a string: escapes where JSON needs them


def _entry_like(node: LayoutNode) -> bool:
    """Whether a dict's item is an entry: the fields ``key`` (`writable_key`) and ``value``."""
    if not isinstance(node, ObjectLayout) or [f.name for f in node.fields] != ["key", "value"]:
        return False
    return writable_key(node.fields[0].node)


def _object_model(name: str, fields: Sequence[ObjectField]) -> type[BaseModel]:
    """A pydantic model that checks the structure and bounds of one object of the layout."""
    defs: dict[str, object] = {}
    validators: dict[str, Any] = {}
    for i, f in enumerate(fields):
        if f.others:  # the keys the object does not declare: extras, checked as its dict
            validators["others"] = model_validator(mode="after")(_others_check(f.node))
        elif f.optional:  # a record may leave the key out (its default, never validated)
            default = None if f.default is None else json.loads(f.default)
            defs[f"f{i}"] = (_annotation(f.node), Field(default=default, alias=f.key))
        else:
            defs[f"f{i}"] = (_annotation(f.node), Field(alias=f.key))
    cls_name = name if name.isidentifier() else "Record"
    extra: typing.Literal["allow", "forbid"] = "allow" if validators else "forbid"
    config = ConfigDict(extra=extra, strict=True, populate_by_name=False)
    model = create_model(  # type: ignore[call-overload]
        cls_name, __config__=config, __validators__=validators, **defs
    )
    return cast(type[BaseModel], model)


def _others_check(node: LayoutNode) -> typing.Callable[[BaseModel], BaseModel]:
    """An after-validator: a model's extra keys hold a value of ``node``, a dict of them."""
    adapter: TypeAdapter[Any] = TypeAdapter(cast(Any, _annotation(node)))

    def check(model: BaseModel) -> BaseModel:
        try:
            adapter.validate_json(json.dumps(model.__pydantic_extra__ or {}))
        except ValidationError as exc:
            raise ValueError(f"its other keys: {exc.errors()[0]['msg']}") from None
        return model

    return check


def _annotation(node: LayoutNode) -> object:
    t: object
    if isinstance(node, ObjectLayout):
        t = node.model
    elif isinstance(node, ListLayout) and node.mapping:  # a dict: its entry's key, value
        assert isinstance(node.item, ObjectLayout)
        key, value = (_annotation(f.node) for f in node.item.fields)
        t = Annotated[
            dict[key, value],  # type: ignore[valid-type]
            Field(min_length=node.min_length, max_length=node.max_length),
        ]
    elif isinstance(node, ListLayout):
        t = Annotated[
            list[_annotation(node.item)],  # type: ignore[misc]
            Field(min_length=node.min_length, max_length=node.max_length),
        ]
    elif isinstance(node, GrammarLayout):
        return Annotated[typing.Any, AfterValidator(_schema_check(node.schema))]
    elif isinstance(node, UnionLayout):  # the tags keep a strict smart union exact
        t = typing.Union[tuple(b.model for b in node.branches)]  # noqa: UP007 - runtime union
    else:
        t = leaf_annotation(node)
    if node.nullable:
        return t | None  # type: ignore[operator]
    return t


def root_model(name: str, layout: GrammarLayout) -> type[BaseModel]:
    """The model of a record that is one grammar value: a `RootModel` checking its schema."""
    cls_name = name if name.isidentifier() else "Record"
    root = cast(type[BaseModel], RootModel[_annotation(layout)])  # type: ignore[misc]
    return create_model(cls_name, __base__=root)


def _schema_check(schema: str) -> typing.Callable[[object], object]:
    """A Pydantic after-validator: the value satisfies the JSON Schema (``jsonschema``)."""
    from factorspec_sdk.ir.schema_check import json_schema_validator

    validator = json_schema_validator(json.loads(schema), check_schema=False)

    def check(value: object) -> object:
        error = next(iter(validator.iter_errors(value)), None)  # type: ignore[arg-type]
        if error is not None:
            raise ValueError(f"does not match its JSON Schema: {error.message}")
        return value

    return check
