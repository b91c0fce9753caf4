"""The relation-IR front end of the spec back end: validate, check limits, rebuild Z3 terms.

Nothing in the IR is executed: the expression trees are read node by node against an
allowlist of operators and rebuilt as Z3 terms in a private Z3 context (one per spec, so that
specs built in different threads never share a context). Bounds and domains of variables and
their existence conditions are *derived from the layout*, as the compiler derives them, never
taken from the sender; only relation formulas come from the IR. The variables and relation
formulas then go to the same assembly as `compile_spec`'s
(`factorspec_sdk.graph.assemble.assemble_spec`: schema factors, components, checks), so both
entry points give the same spec, unsat cores and errors. What the checks of each document
found is kept by the `IRCompiler` that built it (`DEFAULT_IR_COMPILER` for the module-level
`spec_from_ir`).
"""

from __future__ import annotations

import hashlib
import json
import marshal
import time
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, cast

import z3
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    create_model,
)

from factorspec_sdk.errors import FactorSpecError, OracleError, SpecError
from factorspec_sdk.graph.assemble import RelationFactor, assemble_spec, schema_factor_name
from factorspec_sdk.graph.cache import SpecCache
from factorspec_sdk.graph.compiled import CompiledSpec
from factorspec_sdk.graph.z3context import private_context
from factorspec_sdk.graph.z3raw import Node, TermBuilder
from factorspec_sdk.ir.model import (
    OPS,
    Apply,
    BoolConst,
    DefRef,
    Expr,
    IntConst,
    IRGrammar,
    IRLeaf,
    IRList,
    IRNode,
    IRObject,
    IRUnion,
    RelationIR,
    VarRef,
)
from factorspec_sdk.relations.checks import STR_METHODS
from factorspec_sdk.relations.compiler import (
    BOOL_KINDS,
    InternTable,
    VarKind,
    VarRecord,
    date_links,
    date_part_bounds,
)
from factorspec_sdk.relations.decorator import RelationSet
from factorspec_sdk.relations.layout import (
    DEFAULT_MAX_STRING_LENGTH,
    FLOAT_LIMIT,
    INT_LIMIT,
    GrammarLayout,
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectField,
    ObjectLayout,
    Path,
    RootLayout,
    UnionLayout,
    affix_name,
    branch_name,
    branch_part,
    float_range,
    grammar_layout,
    is_branch_part,
    length_name,
    node_at,
    path_name,
    same_name,
    scaled_value,
    temporal_range,
    writable_key,
)
from factorspec_sdk.relations.temporal import (
    DURATION_MAX,
    DURATION_MIN,
    duration_value,
    temporal_bounds,
    temporal_text,
    temporal_value,
)

__all__ = [
    "DEFAULT_IR_COMPILER",
    "CheckedIR",
    "IRCompiler",
    "IRError",
    "IRLimits",
    "ir_digest",
    "json_depth",
    "parse_ir",
    "spec_from_ir",
]

JsonScalar = str | int | bool


class IRError(FactorSpecError):
    """The IR is malformed, exceeds a limit or cannot be decided (``status``: the HTTP status).

    ``status`` is 400 when the document does not match the IR's JSON schema (`parse_ir`),
    and 422 when it does but cannot be built: it breaks a rule the schema cannot state
    (an unknown variable, a repeated name, a limit) or the solver cannot decide it in time
    (``undecided``: such an answer is not cached, the next request tries again).
    """

    code = "ir"

    def __init__(self, message: str, status: int = 422, *, undecided: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.undecided = undecided


@dataclass(frozen=True, slots=True)
class IRLimits:
    """Limits on what an IR may ask for (each violation is an `IRError`, a 4xx on a server).

    Attributes:
        max_json_depth: deepest nesting of JSON arrays/objects in the IR document.
        max_expr_depth: deepest inline expression tree (shared subterms go to ``defs``).
        max_expr_nodes: expression nodes in all of ``defs`` and ``factors``.
        max_variables: solver variables.
        max_factors: relation factors.
        max_defs: shared subterms.
        max_strings: entries of the string table.
        max_string_length: characters of one string (table entries, names, choices).
        max_layout_nodes: layout nodes, before unrolling lists.
        max_unrolled_nodes: layout nodes after unrolling every list to its bound.
        max_layout_depth: deepest layout nesting.
        max_list_length: largest list bound.
        max_choices: values of one enum leaf.
        max_text_length: largest ``min_length``/``max_length`` of a free string.
        max_int: largest magnitude of an integer constant in a formula.
        solver_timeout_ms: time the satisfiability checks of one spec may take.
    """

    max_json_depth: int = 200
    max_expr_depth: int = 64
    max_expr_nodes: int = 500_000
    max_variables: int = 4096
    max_factors: int = 2048
    max_defs: int = 200_000
    max_strings: int = 4096
    max_string_length: int = 1024
    max_layout_nodes: int = 2048
    max_unrolled_nodes: int = 50_000
    max_layout_depth: int = 32
    max_list_length: int = 256
    max_choices: int = 1024
    max_text_length: int = 100_000
    max_int: int = 10**30
    solver_timeout_ms: int = 20_000


DEFAULT_LIMITS = IRLimits()


def json_depth(value: object, limit: int) -> int:
    """Nesting depth of a JSON value (level by level); stops counting past ``limit + 1``."""
    deepest = 0
    level: list[object] = [value]
    while level:
        below: list[object] = []
        containers = False
        for v in level:
            if isinstance(v, dict):
                below.extend(v.values())
                containers = True
            elif isinstance(v, list):
                below.extend(v)
                containers = True
        if not containers:
            break
        deepest += 1
        if deepest > limit:
            break
        level = below
    return deepest


def _validation_message(exc: ValidationError, what: str) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc or '<root>'}: {err['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return f"invalid {what}: " + "; ".join(parts) + more


def parse_ir(data: object, limits: IRLimits = DEFAULT_LIMITS) -> RelationIR:
    """Validate the shape of an IR document (a parsed JSON value) against the IR models."""
    if isinstance(data, RelationIR):
        return data
    if not isinstance(data, dict):
        raise IRError("the relation IR must be a JSON object", status=400)
    if data.get("factorspec_ir") != 1:
        raise IRError(
            f"unsupported relation IR version {data.get('factorspec_ir')!r}; this server reads "
            '"factorspec_ir": 1',
            status=400,
        )
    if json_depth(data, limits.max_json_depth) > limits.max_json_depth:
        raise IRError(f"the relation IR nests deeper than {limits.max_json_depth} levels")
    try:
        return RelationIR.model_validate(data)
    except ValidationError as exc:
        raise IRError(_validation_message(exc, "relation IR"), status=400) from None
    except RecursionError:
        raise IRError("the relation IR nests too deeply") from None


# --------------------------------------------------------------------------- layout


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
            fields.append(ObjectField(f.name, f.key, self.build(f.node, depth + 1, mult, sub)))
        model = _object_model(node.name, fields)
        return ObjectLayout(model, tuple(fields), node.nullable)

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
            if not (isinstance(tag, LeafLayout) and tag.kind == "enum" and len(tag.choices) == 1):
                raise IRError(
                    f"{place}: branch {b.name!r} must begin with the tag field {node.tag!r}, "
                    "an enum leaf of one choice"
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
        if node.kind not in ("int", "date", "float") and (
            node.ge is not None or node.le is not None
        ):
            raise bad("ge/le apply to int, date and float leaves only")
        if node.kind != "float" and node.places:
            raise bad("places apply to float leaves only")
        if node.kind != "enum" and node.choices:
            raise bad("choices apply to enum leaves only")
        if node.kind != "str" and (node.min_length or node.max_length is not None):
            raise bad("min_length/max_length apply to str leaves only")
        if node.kind != "date" and node.temporal != "date":
            raise bad("temporal applies to date leaves only")
        if node.kind != "int" and node.duration:
            raise bad("duration applies to int leaves only")
        if node.kind == "int" and node.duration:
            first = DURATION_MIN if node.ge is None else node.ge
            last = DURATION_MAX if node.le is None else node.le
            if not DURATION_MIN <= first <= last <= DURATION_MAX:
                raise bad(f"duration bounds must be seconds in [{DURATION_MIN}, {DURATION_MAX}]")
            return LeafLayout("int", nullable=node.nullable, ge=first, le=last, duration=True)
        if node.kind == "int":
            if node.ge is not None and node.le is not None and node.le < node.ge:
                raise bad(f"empty range [{node.ge}, {node.le}]")
            return LeafLayout("int", nullable=node.nullable, ge=node.ge, le=node.le)
        if node.kind == "str":
            hi = node.max_length
            if node.min_length < 0 or (hi is not None and not node.min_length <= hi):
                raise bad("need 0 <= min_length <= max_length")
            if max(node.min_length, hi or 0) > lim.max_text_length:
                raise bad(f"string lengths are limited to {lim.max_text_length}")
            return LeafLayout(
                "str", nullable=node.nullable, min_length=node.min_length, max_length=hi
            )
        if node.kind == "bool":
            return LeafLayout("bool", nullable=node.nullable)
        if node.kind == "float":
            lo = -FLOAT_LIMIT if node.ge is None else node.ge
            hi = FLOAT_LIMIT if node.le is None else node.le
            if not -FLOAT_LIMIT <= lo <= hi <= FLOAT_LIMIT or not 0 <= node.places <= 12:
                raise bad(
                    f"a float leaf needs -{FLOAT_LIMIT} <= ge <= le <= {FLOAT_LIMIT} (scaled "
                    "values) and 0 <= places <= 12"
                )
            return LeafLayout("float", nullable=node.nullable, ge=lo, le=hi, places=node.places)
        if node.kind == "date":
            first, last = temporal_bounds(node.temporal)
            lo = first if node.ge is None else node.ge
            hi = last if node.le is None else node.le
            if not first <= lo <= hi <= last:
                raise bad(
                    f"{node.temporal} bounds must be values with {first} <= ge <= le <= {last}"
                )
            return LeafLayout(
                "date", nullable=node.nullable, ge=node.ge, le=node.le, temporal=node.temporal
            )
        choices = tuple(node.choices)
        if not choices:
            raise bad("an enum leaf needs at least one choice")
        if len(choices) > lim.max_choices:
            raise bad(f"more than {lim.max_choices} choices")
        seen = {(type(c).__name__, c) for c in choices}
        if len(seen) != len(choices):
            raise bad("choices repeat")
        for c in choices:
            if isinstance(c, str) and len(c) > lim.max_string_length:
                raise bad(f"a choice is longer than {lim.max_string_length} characters")
            if isinstance(c, int) and not isinstance(c, bool) and abs(c) > INT_LIMIT:
                raise bad(f"int choices must be within +-{INT_LIMIT}")
        return LeafLayout("enum", nullable=node.nullable, choices=choices)


def _entry_like(node: LayoutNode) -> bool:
    """Whether a dict's item is an entry: the fields ``key`` (`writable_key`) and ``value``."""
    if not isinstance(node, ObjectLayout) or [f.name for f in node.fields] != ["key", "value"]:
        return False
    return writable_key(node.fields[0].node)


def _object_model(name: str, fields: Sequence[ObjectField]) -> type[BaseModel]:
    """A pydantic model that checks the structure and bounds of one object of the layout."""
    defs: dict[str, object] = {}
    for i, f in enumerate(fields):
        defs[f"f{i}"] = (_annotation(f.node), Field(alias=f.key))
    cls_name = name if name.isidentifier() else "Record"
    config = ConfigDict(extra="forbid", strict=True, populate_by_name=False)
    model = create_model(cls_name, __config__=config, **defs)  # type: ignore[call-overload]
    return cast(type[BaseModel], model)


def _date_check(node: LeafLayout) -> typing.Callable[[str], str]:
    """A validator of a date leaf's text (``YYYY-MM-DD``...): a real value, within bounds."""
    lo, hi = temporal_range(node)
    example = temporal_text(node.temporal, lo)

    def check(text: str) -> str:
        n = temporal_value(node.temporal, text)
        if n is None:
            raise ValueError(f"{text!r} is not a {node.temporal} written as {example!r} is")
        if not lo <= n <= hi:
            raise ValueError(f"{text} is outside the field's bounds")
        return text

    return check


def _duration_check(node: LeafLayout) -> typing.Callable[[str], str]:
    """A validator of a duration leaf's text: ``PT{n}S``, its seconds within the bounds."""

    def check(text: str) -> str:
        n = duration_value(text)
        if n is None:
            raise ValueError(f"{text!r} is not a duration written PT<seconds>S")
        if not (node.ge is None or node.ge <= n) or not (node.le is None or n <= node.le):
            raise ValueError(f"{text} is outside the field's bounds")
        return text

    return check


def _float_check(node: LeafLayout) -> typing.Callable[[object], object]:
    """A validator of a float leaf's value: its decimals, within the scaled bounds."""
    lo, hi = float_range(node)

    def check(value: object) -> object:
        n = scaled_value(value, node.places)
        if n is None:
            raise ValueError(f"{value!r} is not a number with at most {node.places} decimals")
        if not lo <= n <= hi:
            raise ValueError(f"{value!r} is outside the field's bounds")
        return value

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
    elif node.kind == "bool":
        t = StrictBool
    elif node.duration:
        t = Annotated[StrictStr, AfterValidator(_duration_check(node))]
    elif node.kind == "int":
        t = Annotated[StrictInt, Field(ge=node.ge, le=node.le)]
    elif node.kind == "str":
        t = Annotated[
            StrictStr, StringConstraints(min_length=node.min_length, max_length=node.max_length)
        ]
    elif node.kind == "date":
        t = Annotated[StrictStr, AfterValidator(_date_check(node))]
    elif node.kind == "float":
        t = Annotated[StrictInt | StrictFloat, AfterValidator(_float_check(node))]
    else:
        t = getattr(typing, "Literal")[node.choices]  # noqa: B009 - Literal of runtime values
    if node.nullable:
        return t | None  # type: ignore[operator]
    return t


def _root_model(name: str, layout: GrammarLayout) -> type[BaseModel]:
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


# --------------------------------------------------------------------------- variables


@dataclass(frozen=True, slots=True)
class _VarSpec:
    name: str
    path: Path
    kind: VarKind
    ge: int | None
    le: int | None
    choices: tuple[object, ...] | None
    free_str: bool
    is_null: bool
    other: Path | None = None
    affix: tuple[str, str] | None = None


def _derive(
    layout: RootLayout,
    name: str,
    path: Path,
    kind: str,
    other: Path | None = None,
    text: str | None = None,
) -> _VarSpec:
    """Bounds, domain and kind of a variable, as the relation compiler derives them."""
    node = node_at(layout, path)
    if node is None:
        raise IRError(f"variable {name!r}: path {list(path)!r} is not in the layout")
    if text is not None:
        method = name.split("(", 1)[0]
        if method not in STR_METHODS or name != affix_name(method, path, text) or kind != "bool":
            raise IRError(
                f"variable {name!r}: only startswith/endswith(<path>, <text>) of kind bool "
                "has a text"
            )
        if not (isinstance(node, LeafLayout) and node.kind == "str"):
            raise IRError(f"variable {name!r}: {path_name(path)} is not a free str leaf")
        return _VarSpec(name, path, "affix", None, None, None, False, False, None, (method, text))
    if other is not None:
        if name != same_name(path, other) or kind != "bool":
            raise IRError(
                f"variable {name!r}: only same(<path>, <other>) of kind bool has an other path"
            )
        for p in (path, other):
            leaf = node_at(layout, p)
            if not (isinstance(leaf, LeafLayout) and leaf.kind == "str"):
                raise IRError(f"variable {name!r}: {path_name(p)} is not a free str leaf")
        return _VarSpec(name, path, "same", None, None, None, False, False, other)
    if name == length_name(path):
        if isinstance(node, LeafLayout) and node.kind == "str":  # a free string's length
            hi = node.max_length if node.max_length is not None else DEFAULT_MAX_STRING_LENGTH
            v = _VarSpec(name, path, "strlen", node.min_length, hi, None, False, False)
            kind = "strlen" if kind == "len" else kind  # the IR says "len" for both
        elif not isinstance(node, ListLayout):
            raise IRError(f"variable {name!r}: {path_name(path)} is not a list or a free str")
        else:
            v = _VarSpec(name, path, "len", node.min_length, node.max_length, None, False, False)
    elif (part := date_part_bounds(name)) is not None and name == f"{part[0]}({path_name(path)})":
        temporals: tuple[str, ...] = ("datetime", "aware")
        if part[0] in ("hour", "minute", "second"):
            temporals = (*temporals, "time")
        elif part[0] not in ("date", "clock"):
            temporals = ("date", *temporals)
        if not (
            isinstance(node, LeafLayout) and node.kind == "date" and node.temporal in temporals
        ):
            raise IRError(f"variable {name!r}: {path_name(path)} is not a {' or '.join(temporals)}")
        v = _VarSpec(name, path, "datepart", part[1], part[2], None, False, False)
        kind = "datepart" if kind == "int" else kind  # the IR says "int" for the parts
    elif name == branch_name(path):
        if not isinstance(node, UnionLayout):
            raise IRError(f"variable {name!r}: {path_name(path)} is not a union")
        v = _VarSpec(name, path, "int", 0, len(node.branches) - 1, None, False, False)
    elif name == f"null({path_name(path)})":
        if not node.nullable:
            raise IRError(f"variable {name!r}: {path_name(path)} is not nullable")
        v = _VarSpec(name, path, "bool", None, None, None, False, True)
    elif name == path_name(path):
        if not isinstance(node, LeafLayout):
            raise IRError(f"variable {name!r}: {path_name(path)} is not a leaf")
        v = _leaf_var(name, path, node)
        if v.kind in ("date", "float") and kind == "int":
            kind = v.kind  # the IR says "int" for both
    else:
        raise IRError(
            f"variable {name!r} is not named after its path: expected {path_name(path)!r}, "
            f"{length_name(path)!r} or 'null({path_name(path)})'"
        )
    if v.kind != kind:
        raise IRError(f"variable {name!r} has kind {v.kind!r} in this layout, not {kind!r}")
    return v


def _leaf_var(name: str, path: Path, node: LeafLayout) -> _VarSpec:
    if node.kind == "bool":
        return _VarSpec(name, path, "bool", None, None, None, False, False)
    if node.kind == "int":
        ge = node.ge if node.ge is not None else -INT_LIMIT
        le = node.le if node.le is not None else INT_LIMIT
        return _VarSpec(name, path, "int", ge, le, None, False, False)
    if node.kind == "str":
        return _VarSpec(name, path, "str", None, None, None, True, False)
    if node.kind == "date":
        ge, le = temporal_range(node)  # `_leaf` has checked the bounds are within range
        return _VarSpec(name, path, "date", ge, le, None, False, False)
    if node.kind == "float":
        ge, le = float_range(node)
        return _VarSpec(name, path, "float", ge, le, None, False, False)
    choices = node.choices
    if all(isinstance(c, bool) for c in choices):
        return _VarSpec(name, path, "bool", None, None, choices, False, False)
    if all(isinstance(c, str) for c in choices):
        return _VarSpec(name, path, "str", None, None, choices, False, False)
    if all(isinstance(c, int) and not isinstance(c, bool) for c in choices):
        ints = [cast(int, c) for c in choices]
        return _VarSpec(name, path, "int", min(ints), max(ints), choices, False, False)
    raise IRError(f"variable {name!r}: relations cannot read a Literal that mixes value types")


# --------------------------------------------------------------------------- expressions


_BOOL_ARGS = frozenset({"and", "or", "not", "implies"})
_INT_ARGS = frozenset({"le", "lt", "ge", "gt", "add", "sub", "mul", "div", "mod", "neg"})
_BOOL_RESULT = frozenset({"and", "or", "not", "implies", "eq", "distinct", "le", "lt", "ge", "gt"})


class _ExprBuilder:
    """Builds the IR's formulas as raw libz3 terms (`TermBuilder`), checking sorts itself.

    A node's sort is Boolean or integer (the only two a variable has), known before the node
    is made: so every sort error is an `IRError` naming the place, and libz3 only ever sees
    well-sorted arguments. Close it (``with``) once the formulas are wrapped.
    """

    def __init__(
        self,
        tb: TermBuilder,
        variables: dict[str, Node],
        is_bool: dict[str, bool],
        limits: IRLimits,
    ) -> None:
        self.tb = tb
        self.variables = variables
        self.is_bool = is_bool
        self.limits = limits
        self.defs: list[tuple[Node, bool]] = []
        self.def_vars: list[frozenset[str]] = []
        self.nodes = 0
        self.used: set[str] = set()

    def formula(self, e: Expr, where: str) -> z3.BoolRef:
        """A factor's formula as a z3py term (it must be Boolean)."""
        node, is_bool = self.build(e, where)
        if not is_bool:
            raise IRError(f"{where}: the formula is not Boolean")
        return self.tb.wrap(node)

    def build(self, e: Expr, where: str, depth: int = 1) -> tuple[Node, bool]:
        """The node of ``e`` and whether it is Boolean."""
        lim = self.limits
        self.nodes += 1
        if self.nodes > lim.max_expr_nodes:
            raise IRError(f"the formulas have more than {lim.max_expr_nodes} nodes")
        if depth > lim.max_expr_depth:
            raise IRError(
                f"{where}: an expression nests deeper than {lim.max_expr_depth}; move shared or "
                "deep subterms into defs"
            )
        if isinstance(e, VarRef):
            t = self.variables.get(e.var)
            if t is None:
                raise IRError(f"{where}: unknown variable {e.var!r}")
            self.used.add(e.var)
            return t, self.is_bool[e.var]
        if isinstance(e, IntConst):
            if abs(e.value) > lim.max_int:
                raise IRError(f"{where}: integer constant beyond +-{lim.max_int}")
            return self.tb.int(e.value), False
        if isinstance(e, BoolConst):
            return self.tb.bool(e.value), True
        if isinstance(e, DefRef):
            if not 0 <= e.index < len(self.defs):
                raise IRError(f"{where}: def {e.index} is not defined before this point")
            self.used |= self.def_vars[e.index]  # a factor reads the variables of its defs
            return self.defs[e.index]
        return self._apply(e, where, depth)

    def _apply(self, e: Apply, where: str, depth: int) -> tuple[Node, bool]:
        op = e.op
        lo, hi = OPS[op]
        n = len(e.args)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if lo == hi else f"{lo}..{hi if hi is not None else ''}"
            raise IRError(f"{where}: {op} takes {want} arguments, got {n}")
        built = [self.build(a, where, depth + 1) for a in e.args]
        bools = [b for _, b in built]
        if op in _BOOL_ARGS and not all(bools):
            raise IRError(f"{where}: {op} needs Boolean arguments")
        if op in _INT_ARGS and any(bools):
            raise IRError(f"{where}: {op} needs integer arguments")
        if op == "ite":
            if not bools[0]:
                raise IRError(f"{where}: {op} needs Boolean arguments")
            if bools[1] != bools[2]:
                raise IRError(f"{where}: {op} needs arguments of one sort")
        elif op in ("eq", "distinct") and len(set(bools)) > 1:
            raise IRError(f"{where}: {op} needs arguments of one sort")
        node = self.tb.app(op, [a for a, _ in built])
        return node, (op in _BOOL_RESULT or (op == "ite" and bools[1]))


# --------------------------------------------------------------------------- spec


@dataclass(slots=True)
class CheckedIR:
    """What the checks of one IR document found (the entries of `IRCompiler.documents`).

    Attributes:
        ir: the parsed document.
        layout: its layout.
        list_bounds: the list bounds the checks found (None: not checked yet).
        determined: what the checks found each component determines
            (`Component.determined`, in component order; None: not checked yet).
        error: the error the document raised (a malformed IR or an unsatisfiable spec);
            an undecided check is not kept, the next request tries again.
    """

    ir: RelationIR
    layout: RootLayout
    list_bounds: dict[Path, int] | None = None
    determined: list[dict[str, int | bool] | None] | None = None
    error: FactorSpecError | None = None


def _layout(
    ir: RelationIR,
    data: object,
    limits: IRLimits,
    layouts: SpecCache[tuple[str, IRLimits], RootLayout],
) -> RootLayout:
    """The layout of a parsed document, from ``layouts`` when one with its key is there."""
    key = None
    if isinstance(data, dict):
        doc = _document_key(data.get("layout"))
        key = None if doc is None else (doc, limits)
    layout = layouts.get(key) if key is not None else None
    if layout is None:
        built = _LayoutBuilder(limits).build(ir.layout, 1, 1, "")
        assert isinstance(built, (ObjectLayout, GrammarLayout))  # IRRoot's two kinds
        layout = built
        if key is not None:
            layouts.put(key, layout)
    return layout


def ir_digest(data: object) -> str:
    """A stable digest of an IR document: the same for equal documents, in any key order."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _document_key(data: object) -> str | None:
    """The cache key of a parsed JSON value (`IRCompiler`'s caches); None: not plain JSON.

    The SHA-256 of its ``marshal`` serialization (format 2, which writes every value out,
    with no back-references): a third of `ir_digest`'s canonical JSON, which every server
    request paid. Equal values with their keys in the same order get equal keys; a document
    whose keys come in another order gets another key, a cache miss, never a wrong hit.
    """
    try:
        written = marshal.dumps(data, 2)  # type: ignore[arg-type]  # raises on what it can't
        return hashlib.sha256(written).hexdigest()
    except (ValueError, TypeError, RecursionError):  # a value marshal does not write
        return None


class IRCompiler:
    """Builds `CompiledSpec` objects from relation IR documents, and keeps what it found.

    The IR front end's counterpart of `factorspec_sdk.graph.SpecCompiler`: as XGrammar's
    ``GrammarCompiler`` owns its cache of compiled grammars, the compiler owns what the
    checks of each document found, so two compilers share nothing. A server owns one
    (`factorspec_sdk.server.app.create_app`'s ``ir_compiler``), or shares
    `DEFAULT_IR_COMPILER` (what the module-level `spec_from_ir` uses).

    Args:
        max_documents: the most documents kept (``documents``).
        max_layouts: the most layouts kept (``layouts``).

    Attributes:
        documents: what `spec_from_ir` found for each IR document, by a key of the
            document: an LRU. A hit skips parsing, the layout and the satisfiability
            checks, and keeps what they found each component determines (Z3 terms are
            rebuilt in a fresh context on every call).
        layouts: layouts by a key of their IR (and the limits they were checked under): an
            LRU. Requests for one record type send one layout with different relations
            and constants (a trip's cities, stays and flights); building a layout makes its
            pydantic models, the larger part of a new document's cost.
    """

    def __init__(self, *, max_documents: int = 128, max_layouts: int = 64) -> None:
        self.documents: SpecCache[str, CheckedIR] = SpecCache(max_size=max_documents)
        self.layouts: SpecCache[tuple[str, IRLimits], RootLayout] = SpecCache(max_size=max_layouts)

    def spec_from_ir(
        self,
        data: object,
        limits: IRLimits = DEFAULT_LIMITS,
        *,
        digest: str | None = None,
        solver_timeout_ms: int | None = None,
    ) -> CompiledSpec:
        """Rebuild a `CompiledSpec` from an IR document (a parsed JSON value or `RelationIR`).

        The spec behaves as the one the IR was exported from: same layout, variables,
        factors, components, list bounds, feasible sets and unsat cores. Its ``model`` is a
        pydantic model built from the layout (structure and bounds); `check_record` checks
        the relations too. Each call builds fresh Z3 terms in a private context (safe to use
        from any one thread); the satisfiability checks are cached per IR document in
        ``documents`` (a check that ran out of time is not: it is tried again).
        ``limits.solver_timeout_ms`` bounds each check here; ``solver_timeout_ms`` bounds
        each query of the spec's oracles (`CompiledSpec`).

        Raises:
            IRError: a malformed IR, a limit exceeded, or a spec the solver cannot decide in
                time.
            UnsatisfiableSpecError: no record satisfies the spec (the core names the IR's
                factors).
            SpecError: a list needs more items than its bound, or a str read by a relation
                has no finite domain.
        """
        key = digest
        if key is None and not isinstance(data, RelationIR):
            key = _document_key(data)
        checked = self.documents.get(key) if key is not None else None
        if checked is None:
            ir = parse_ir(data, limits)
            checked = CheckedIR(ir, _layout(ir, data, limits, self.layouts))
        if checked.error is not None:
            raise checked.error
        try:
            spec = _build(checked, limits, solver_timeout_ms)
            if checked.list_bounds is None:
                checked.list_bounds = dict(spec.list_bounds)
                checked.determined = spec.determined
            return spec
        except (IRError, SpecError) as exc:
            if not (isinstance(exc, IRError) and exc.undecided):
                checked.error = exc
            raise
        finally:
            if key is not None:
                self.documents.put(key, checked)

    def clear(self) -> None:
        """Forget every document and layout: the next build of each is cold (counters stay)."""
        self.documents.clear()
        self.layouts.clear()

    def __repr__(self) -> str:
        return f"IRCompiler(documents={self.documents!r}, layouts={self.layouts!r})"


DEFAULT_IR_COMPILER = IRCompiler()
"""The compiler that the module-level `spec_from_ir` uses, and a server given none.

One shared instance: a program that wants documents of its own (a second server in one
process, a test, a benchmark that wants each document cold) makes an `IRCompiler`.
"""


def spec_from_ir(
    data: object,
    limits: IRLimits = DEFAULT_LIMITS,
    *,
    digest: str | None = None,
    solver_timeout_ms: int | None = None,
) -> CompiledSpec:
    """`IRCompiler.spec_from_ir` of `DEFAULT_IR_COMPILER` (see there).

    Raises:
        IRError: a malformed IR, a limit exceeded, or a spec the solver cannot decide in time.
        UnsatisfiableSpecError: no record satisfies the spec (the core names the IR's factors).
        SpecError: a list needs more items than its bound, or a str read by a relation has no
            finite domain.
    """
    return DEFAULT_IR_COMPILER.spec_from_ir(
        data, limits, digest=digest, solver_timeout_ms=solver_timeout_ms
    )


def _build(checked: CheckedIR, limits: IRLimits, solver_timeout_ms: int | None) -> CompiledSpec:
    """Validate the IR against the layout and limits, build its Z3 terms, assemble the spec."""
    t0 = time.perf_counter()
    ir, layout = checked.ir, checked.layout
    lim = limits
    if len(ir.variables) > lim.max_variables:
        raise IRError(f"more than {lim.max_variables} variables")
    if len(ir.factors) > lim.max_factors:
        raise IRError(f"more than {lim.max_factors} factors")
    if len(ir.defs) > lim.max_defs:
        raise IRError(f"more than {lim.max_defs} defs")
    if len(ir.strings) > lim.max_strings:
        raise IRError(f"more than {lim.max_strings} strings")
    strings = InternTable()
    for text in ir.strings:
        if len(text) > lim.max_string_length:
            raise IRError(f"a string of the table is longer than {lim.max_string_length}")
        if text in strings.codes:
            raise IRError(f"the string table repeats {text!r}")
        strings.code(text)

    ctx = private_context()
    specs: dict[str, _VarSpec] = {}
    for v in ir.variables:
        if v.name in specs:
            raise IRError(f"variable {v.name!r} is declared twice")
        other = None if v.other is None else tuple(v.other)
        specs[v.name] = _derive(layout, v.name, tuple(v.path), v.kind, other, v.text)
    is_bool = {n: s.kind in BOOL_KINDS for n, s in specs.items()}
    relation_factors: list[RelationFactor] = []
    with TermBuilder(ctx) as tb:
        nodes = {n: tb.const(n, boolean=b) for n, b in is_bool.items()}
        terms: dict[str, z3.ExprRef] = {
            n: tb.wrap(node) if is_bool[n] else tb.wrap_int(node) for n, node in nodes.items()
        }
        records: dict[str, VarRecord] = {}
        for n, s in specs.items():
            for c in s.choices or ():
                if isinstance(c, str) and c not in strings.codes:
                    raise IRError(f"variable {n!r}: choice {c!r} is missing from the string table")
            exists = _exists(tb, layout, s.path, nodes, n)
            if s.other is not None:
                second = _exists(tb, layout, s.other, nodes, n)
                exists = (
                    second
                    if exists is None
                    else exists
                    if second is None
                    else tb.app("and", [exists, second])
                )
            records[n] = VarRecord(
                n,
                s.path,
                s.kind,
                terms[n],
                s.ge,
                s.le,
                s.choices,
                s.free_str,
                True if exists is None else tb.wrap(exists),
                None,
                s.other,
                s.affix,
            )
        # the IR's factor names are the relation names; they may not take a schema factor's
        # name, nor a derived tie's (the server ties each date's parts to it itself)
        ties = date_links(records)
        schema_names = {schema_factor_name(rec) for rec in records.values()}
        schema_names |= {name for name, _, _ in ties}

        names: set[str] = set()
        eb = _ExprBuilder(tb, nodes, is_bool, lim)
        for i, d in enumerate(ir.defs):
            eb.used = set()
            eb.defs.append(eb.build(d, f"defs[{i}]"))
            eb.def_vars.append(frozenset(eb.used))
        for i, f in enumerate(ir.factors):
            if f.name in names or f.name in schema_names:
                raise IRError(f"factor name {f.name!r} repeats")
            if len(f.name) > lim.max_string_length:
                raise IRError(f"factors[{i}]: the name is longer than {lim.max_string_length}")
            names.add(f.name)
            eb.used = set()
            formula = eb.formula(f.formula, f"factors[{i}] ({f.name})")
            unknown = [v for v in f.variables if v not in terms]
            if unknown:
                raise IRError(f"factors[{i}] ({f.name}): unknown variables {unknown[:5]}")
            relation_factors.append(
                RelationFactor(f.name, frozenset(f.variables) | eb.used, formula)
            )
    relation_factors += [RelationFactor(n, vs, f) for n, vs, f in ties]
    model = layout.model if isinstance(layout, ObjectLayout) else _root_model(ir.name, layout)
    try:
        return assemble_spec(
            name=ir.name,
            model=model,
            layout=layout,
            relations=RelationSet(model, ()),
            context=None,
            records=records,
            strings=strings,
            relation_factors=relation_factors,
            ctx=ctx,
            check_timeout_ms=lim.solver_timeout_ms,
            list_bounds=checked.list_bounds,
            determined=checked.determined,
            solver_timeout_ms=solver_timeout_ms,
            started=t0,
        )
    except OracleError as exc:
        raise IRError(exc.message, status=422, undecided=True) from None


def _exists(
    tb: TermBuilder, layout: RootLayout, path: Path, nodes: dict[str, Node], name: str
) -> Node | None:
    """When the item at ``path`` exists: enclosing lists long enough, unions on its branch.

    None: always (a node of the record's top level).
    """
    conds: list[Node] = []
    for k, part in enumerate(path):
        if isinstance(part, int):
            ln = length_name(path[:k])
            t = nodes.get(ln)
            if t is None:
                raise IRError(f"variable {name!r} lies in a list whose length {ln!r} is undeclared")
            conds.append(tb.app("gt", [t, tb.int(part)]))
        elif is_branch_part(part):
            union = node_at(layout, path[:k])
            assert isinstance(union, UnionLayout)  # `_derive` found the path in the layout
            bn = branch_name(path[:k])
            t = nodes.get(bn)
            if t is None:
                raise IRError(
                    f"variable {name!r} lies in a union whose branch {bn!r} is undeclared"
                )
            conds.append(tb.app("eq", [t, tb.int(union.branch(part)[0])]))
    return tb.conj(conds) if conds else None
