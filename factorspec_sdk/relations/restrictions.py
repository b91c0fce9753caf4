"""Where the writer writes less than the schema allows, as data: the place, what, how to lift it.

The writer's language is the schema's, up to whitespace and key order, except at named places
where a bound applies that the schema did not set, or where relations keep a choice from the
model. Each is a `Restriction`, derived from the layout and from where the relations read
(`restrictions`); ``factorspec check`` prints them (`CompiledSpec.describe`), and the types
page (``docs/types.md``) says which bound applies and how to lift it.

Each rule is one entry of `RULES`: a name and a function from a place of the layout (`Place`:
its path, node, field, and what the relations read there) to what the writer writes less of
and how to lift it, or None where the rule does not apply. A new restriction is a function and
one line in the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from factorspec_sdk.relations.kinds import LeafKind, VarKind
from factorspec_sdk.relations.layout import (
    DEFAULT_MAX_INT_DIGITS,
    DEFAULT_MAX_LIST_LENGTH,
    DEFAULT_MAX_STRING_LENGTH,
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectField,
    ObjectLayout,
    Omission,
    Path,
    RootLayout,
    UnionLayout,
    branch_part,
    omission,
    path_name,
)

__all__ = ["EVERY_ITEM", "RULES", "Place", "Restriction", "Rule", "restrictions"]

EVERY_ITEM = -1
"""The path part of every item of a list (spelled ``[]``): a place stands for all of them."""


@dataclass(frozen=True, slots=True)
class Restriction:
    """One place where the writer writes less than the schema allows.

    Attributes:
        rule: the rule's name in `RULES` (``optional key written``, ``list bound``...).
        path: the place, as Python spells it, ``[]`` for every item (``stays[].note``).
        what: what the writer writes less of there, and why.
        lift: how to lift it (the schema's own bound, a default, ...).
    """

    rule: str
    path: str
    what: str
    lift: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what}; to lift it: {self.lift}"


@dataclass(frozen=True, slots=True)
class Place:
    """A node of the layout, as a rule sees it.

    Attributes:
        path: its path, `EVERY_ITEM` for list items.
        node: its layout.
        field: the object field whose value it is (None: the root, a list's item, a branch).
        reads: the kinds of the relation variables at exactly this place (``len(s)`` of a
            string: `VarKind.STRLEN`).
        read_under: whether a relation reads anything at or under this place.
    """

    path: Path
    node: LayoutNode
    field: ObjectField | None
    reads: frozenset[VarKind]
    read_under: bool


Rule = Callable[[Place], tuple[str, str] | None]
"""A restriction's rule: at a place, (what the writer writes less of, how to lift it), or None."""


def _optional_written(place: Place) -> tuple[str, str] | None:
    f = place.field
    if f is None or not f.optional or omission(f, place.read_under) is not Omission.WRITTEN:
        return None
    lift = (
        "give it a default of its own type within its bounds (= None on an Optional, = 0, = 'a')"
        if isinstance(place.node, LeafLayout)
        else "declare it Optional with = None (left out, it is null)"
    )
    return (
        "an optional key always written: a relation reads under it, and the default a record "
        "without it holds is no value the writer can stand in for (a default_factory, a list "
        "or object, a value outside its type or bounds; on the JSON Schema path, none)",
        f"{lift}; or let no relation read under it",
    )


def _list_bound(place: Place) -> tuple[str, str] | None:
    node = place.node
    if not isinstance(node, ListLayout) or node.bounded_by_schema:
        return None
    if place.field is not None and place.field.others:
        return (
            f"at most {node.max_length} keys it does not declare: the schema sets no "
            "maxProperties (the converter's bound, OTHER_KEYS_BOUNDS: the first that keeps "
            "the layout within its limits)",
            "maxProperties, with every declared key required; or additionalProperties false",
        )
    items = "entries" if node.mapping else "items"
    return (
        f"at most {node.max_length} {items}: the schema sets no bound "
        f"(DEFAULT_MAX_LIST_LENGTH = {DEFAULT_MAX_LIST_LENGTH})",
        "Field(max_length=...) (JSON Schema: maxItems / maxProperties)",
    )


def _string_bound(place: Place) -> tuple[str, str] | None:
    node = place.node
    if not isinstance(node, LeafLayout) or node.kind != LeafKind.STR:
        return None
    if node.max_length is not None or VarKind.STRLEN not in place.reads:
        return None
    return (
        f"at most {DEFAULT_MAX_STRING_LENGTH} characters: a relation reads its len() and the "
        "schema sets no bound (DEFAULT_MAX_STRING_LENGTH)",
        "Field(max_length=...) (JSON Schema: maxLength)",
    )


def _int_digits(place: Place) -> tuple[str, str] | None:
    node = place.node
    if not isinstance(node, LeafLayout) or node.kind != LeafKind.INT:
        return None
    open_sides = [b for b, v in (("ge", node.ge), ("le", node.le)) if v is None]
    if not open_sides:
        return None
    return (
        f"at most {DEFAULT_MAX_INT_DIGITS} digits (|n| <= 10**{DEFAULT_MAX_INT_DIGITS} - 1): "
        f"no {' or '.join(open_sides)} bound (DEFAULT_MAX_INT_DIGITS)",
        "Field(ge=..., le=...) (JSON Schema: minimum / maximum)",
    )


def _undeclared_keys(place: Place) -> tuple[str, str] | None:
    node = place.node
    if not isinstance(node, ObjectLayout) or not node.undeclared_keys:
        return None
    return (
        "its declared keys only: the JSON Schema allows keys it does not declare, a relation "
        "reads under the object (or llguidance refuses its grammar), so the writer lays it "
        "out itself, and its other keys are under keywords free keys cannot hold "
        "(patternProperties, propertyNames, dependencies, minProperties / maxProperties "
        "beside optional keys) or would pass the layout's limits",
        "set additionalProperties to false (a Pydantic model ignores extra keys anyway), drop "
        "those keywords, or let no relation read under it",
    )


def _null_unwritten(place: Place) -> tuple[str, str] | None:
    node = place.node
    if not isinstance(node, ObjectLayout | ListLayout) or not node.nullable:
        return None
    if VarKind.BOOL in place.reads:  # a relation reads its null-ness: null is a choice
        return None
    return (
        "never null: the schema allows null here, but the writer writes null for a list or "
        "object only where a relation reads its null-ness",
        "read it in a relation (x is None), or give it = None (left out, it is None); on "
        "the JSON Schema path, let no relation read under it (a grammar value writes null)",
    )


RULES: dict[str, Rule] = {
    "optional key written": _optional_written,
    "list bound": _list_bound,
    "string bound": _string_bound,
    "int digits": _int_digits,
    "undeclared keys": _undeclared_keys,
    "null unwritten": _null_unwritten,
}
"""Every restriction's rule, by name: a new one is a function and one line here."""


def restrictions(
    layout: RootLayout, reads: Iterable[tuple[Path, VarKind]], read_under: Iterable[Path]
) -> list[Restriction]:
    """The places of ``layout`` where the writer writes less than the schema allows.

    ``reads``: the path and kind of every variable the relations read (a ``same(a, b)``
    variable once at each of its two paths), with concrete list indices. ``read_under``:
    the places at or under which a relation reads a variable, with concrete list indices
    (`factorspec_sdk.graph.compiled.CompiledSpec.reads_under`).
    """
    at: dict[Path, set[VarKind]] = {}
    for path, kind in reads:
        at.setdefault(_general(path), set()).add(kind)
    under = {_general(path) for path in read_under}
    out: list[Restriction] = []
    for path, node, field in _places(layout, (), None):
        place = Place(path, node, field, frozenset(at.get(path, ())), path in under)
        for name, rule in RULES.items():
            found = rule(place)
            if found is not None:
                out.append(Restriction(name, _spell(path), *found))
    return out


def _general(path: Path) -> Path:
    """``path`` with every list index as `EVERY_ITEM` (``stays[]``)."""
    return tuple(EVERY_ITEM if isinstance(p, int) else p for p in path)


def _places(
    node: LayoutNode, path: Path, field: ObjectField | None
) -> Iterator[tuple[Path, LayoutNode, ObjectField | None]]:
    """Every node under ``node`` (itself first), with its path and its field."""
    yield path, node, field
    if isinstance(node, ObjectLayout):
        for f in node.fields:
            yield from _places(f.node, (*path, f.name), f)
    elif isinstance(node, ListLayout):
        yield from _places(node.item, (*path, EVERY_ITEM), None)
    elif isinstance(node, UnionLayout):
        for b in node.branches:
            yield from _places(b, (*path, branch_part(b.model)), None)


def _spell(path: Path) -> str:
    """A place as Python spells it, ``[]`` for every item: ``stays[].note``."""
    return path_name(path).replace(f"[{EVERY_ITEM}]", "[]") or "<record>"
