r"""How a grammar value closes: the bound of the token budget's closing walk.

The token budget (`factorspec_sdk.tokens.budget`) finishes a grammar value by a *closing walk*
(`factorspec_sdk.tokens.grammar.GrammarSegment.closing`): one real completion that llguidance's
masks allow, token by token. This module holds how long that walk may be, from a value's
JSON Schema, without llguidance:

- `closing_bound`: how many bytes the walk writes to finish a value of a schema from *any*
  prefix of it, and from its start (`ClosingBound`). The budget adds it to the longest rest of
  the record (`ceiling`, the roomy checks), so it must hold for every prefix llguidance
  allows. It is derived from the schema's structure: an object closes its open value and
  writes at most each of its remaining properties once, an array its missing items, a string
  the shortest completion of its pattern (`pattern_bound`), a number the digits its range
  needs (`number_bound`). For a value of bounded nesting it is one number (`closing_bytes`).
  A value of unbounded nesting (``{}``, an untyped array or object, a recursive ``$ref``)
  has no such number, since a prefix may open any number of arrays and objects; but from a
  prefix with ``d`` of them open the walk closes each with at most one container's rest
  (``per_level``) after finishing what is under way (``base``; ``inner`` once a container is
  open), so its bound is ``inner + per_level * d`` (`ClosingBound.at`). An object that needs
  no key closes at once (``}``), so its level counts its braces alone. ``allOf`` parts
  merge as llguidance intersects them (`merge_schemas`), and a string with several regexes
  (a pattern and a format, two patterns) is read as the product of their automata. No
  bound (``None``): a pattern Python's ``re`` cannot read (``\p{L}``, which llguidance
  takes: no automaton to complete it by), a recursion with no short way out (every branch
  of it nests again, as an array of at least one of itself or an object: the walk prefers
  ``[`` and could nest for ever), a product of automata too large to search, and what
  llguidance refuses anyway (``not``, ``if``, an unknown format).

The walk's other knowledge lives beside this module, one job each:

- `factorspec_sdk.writer.closing_guides`: the guides of the walk, the completions of the
  strings and numbers the schemas hold (`closing_guides`).
- `factorspec_sdk.writer.closing_strings`: a string's patterns and formats, their automata
  (``interegular``), `pattern_bound`, the string guide.
- `factorspec_sdk.writer.closing_numbers`: a number's range, the digits it needs, the number
  guide and its completions.
- `factorspec_sdk.writer.closing_schema`: how all of them read a JSON Schema as llguidance
  does (``$ref``, ``allOf`` merged, unions' satisfiable parts).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any, TypeVar

from factorspec_sdk.relations.layout import GRAMMAR_OPTIONS, GrammarLayout
from factorspec_sdk.writer.closing_numbers import in_range, number_bound, number_guide
from factorspec_sdk.writer.closing_schema import (
    ANNOTATIONS,
    Unbounded,
    Unsatisfiable,
    json_text,
    merge_schemas,
    resolve_ref,
    satisfiable,
)
from factorspec_sdk.writer.closing_strings import STRING_SLACK, pattern_bound, string_bound

__all__ = [
    "LITERALS",
    "ClosingBound",
    "closing_bound",
    "closing_bytes",
    "opening_bytes",
]

_KEY = len(GRAMMAR_OPTIONS["key_separator"])
_ITEM = len(GRAMMAR_OPTIONS["item_separator"])
_TYPES = ("null", "boolean", "number", "string", "array", "object")
"""The types a schema without ``type`` allows (llguidance's ``TYPES``; ``number`` holds the
integers)."""

_T = TypeVar("_T")


# ---------------------------------------------------------------------- the bound


def closing_bytes(node: GrammarLayout) -> int | None:
    """Most bytes the budget's closing walk writes to finish a value of ``node``, or None.

    From any prefix of a value that llguidance allows, the walk (see the module) writes at
    most this many bytes, so at most this many tokens:

    - a ``number`` or ``integer`` without range keywords: 1 (``0`` after ``-``, ``1.``, ``1e``);
      with a range or ``multipleOf``: the digits of its bounds plus `NUMBER_SLACK`;
    - ``boolean`` 5 (``false``), ``null`` 4;
    - a ``string``: its completion (``minLength`` for a plain one, `pattern_bound` for a
      pattern or format, at most ``maxLength``) plus `STRING_SLACK`;
    - ``enum`` / ``const``: the longest value's text;
    - ``anyOf`` / ``oneOf`` / a list of types: the most of its parts; ``allOf`` merged;
    - an ``array``: its missing items and the open one, ``2 + (m + 1) * (item + 2)`` for
      ``minItems`` m (prefix items counted one by one);
    - an ``object``: each property once (key, separators, value bound), the braces, and for
      ``additionalProperties`` / ``patternProperties`` one more entry than
      ``minProperties``.

    None for a value of unbounded nesting (``{}``, an array without ``items``, an object
    whose extra properties are any values, a recursive ``$ref``: `closing_bound` bounds
    those per prefix), and where `closing_bound` has none.
    """
    return _closing_bytes(node.schema)


@lru_cache(maxsize=1024)
def _closing_bytes(schema: str) -> int | None:
    root = json.loads(schema)
    try:
        return _Bound(root).of(root, ())
    except Unbounded:
        return None


class _Bound:
    def __init__(self, root: object) -> None:
        self.root = root

    def of(self, s: object, refs: tuple[str, ...]) -> int:
        if s is True:
            raise Unbounded
        if s is False:
            raise Unsatisfiable
        if not isinstance(s, dict):
            raise Unbounded
        s = {k: v for k, v in s.items() if k not in ANNOTATIONS}
        if "$ref" in s:
            return self.of(*_with_ref(self.root, s, refs))
        if "allOf" in s:
            parts = s.pop("allOf")
            for p in parts if isinstance(parts, list) else []:
                if isinstance(p, dict) and "$ref" in p:
                    p, refs = _with_ref(self.root, p, refs)
                s = merge_schemas(s, p)
            return self.of(s, refs)
        found = _union(s, lambda p: self.of(p, refs))
        if found is not None:
            return max(found)
        if "not" in s or "if" in s:
            raise Unbounded
        if "enum" in s or "const" in s:
            return _enum_bytes(s)
        kind = s.get("type")
        if isinstance(kind, list):
            if not kind:
                raise Unsatisfiable
            return max(self.of({**s, "type": k}, refs) for k in kind)
        if kind is None:  # every type, each with the keywords that apply to it (llguidance's
            # reading): the array and object of them nest without end unless constrained
            if not s:
                raise Unbounded
            return max(self.of({**s, "type": k}, refs) for k in _TYPES)
        if kind == "array":
            return self._array(s, refs)
        if kind == "object":
            return self._object(s, refs)
        return _scalar_bytes(s)

    def _array(self, s: dict[str, Any], refs: tuple[str, ...]) -> int:
        prefix = s.get("prefixItems", [])
        if not isinstance(prefix, list):
            raise Unbounded
        most = s.get("maxItems")
        count = max(int(s.get("minItems", 0)), len(prefix)) + 1  # the open item and the missing
        if most is not None:
            count = min(count, int(most))
        items = s.get("items", True)
        total = 2
        for k in range(count):
            if k < len(prefix):
                b = self.of(prefix[k], refs)
            elif items is False:
                break
            else:
                b = self.of(items, refs)
            total += b + _ITEM
        return total

    def _object(self, s: dict[str, Any], refs: tuple[str, ...]) -> int:
        total = 2 + _entries_bytes(s, lambda sub: self.of(sub, refs))
        extra = [key + STRING_SLACK + self.of(sub, refs) for key, sub in _extras(s)]
        if extra:
            entries = 1 + int(s.get("minProperties", 0))
            total += entries * (max(extra) + _KEY + _ITEM)
        return total


# ---------------------------------------------------------------------- unbounded nesting


LITERALS: tuple[str, ...] = ("0", '""', "[]", "{}", "null", "true", "false")
"""The whole values the closing walk tries, in this order, where a value starts and nothing is
forced (`factorspec_sdk.tokens.grammar.GrammarSegment.closing`): the shortest value of each
JSON type. It writes the first llguidance takes as a complete value, so a value that may be
``null``, ``[]`` or ``{}`` never nests further."""

_LITERAL_MOST = max(len(t) for t in LITERALS)


@dataclass(frozen=True, slots=True)
class ClosingBound:
    """How many bytes the closing walk writes to finish a value of one schema.

    From a prefix of the value with ``depth`` arrays and objects open (outside strings), the
    walk writes at most ``at(depth)`` bytes; from the value's start (nothing written) at most
    ``start``.

    Attributes:
        start: most bytes from the value's start.
        base: most bytes to finish what is under way in the innermost open container (a
            string, a number, a key and its value, the next item) or a value of no container.
        per_level: most bytes the walk writes in one open container once its open value is
            finished (its missing properties or items, its closing bracket); 0 for a value of
            bounded nesting, whose ``base`` holds from every prefix.
        inner: ``base`` where a container is open: what is under way inside one (the value's
            own ``start`` is behind it). ``base`` when not given.
        opened: ``per_level`` of the containers a prefix with one open can open inside it
            (the value's own container, the root of the schema, opens only at its start,
            unless a ``$ref`` nests it again). ``per_level`` when not given.
    """

    start: int
    base: int
    per_level: int = 0
    inner: int = -1
    opened: int = -1

    def __post_init__(self) -> None:
        if self.inner < 0:
            object.__setattr__(self, "inner", self.base)
        if self.opened < 0:
            object.__setattr__(self, "opened", self.per_level)

    def at(self, depth: int) -> int:
        """Most bytes the walk writes from a prefix with ``depth`` containers open."""
        return (self.inner if depth else self.base) + self.per_level * depth


def closing_bound(node: GrammarLayout) -> ClosingBound | None:
    """The closing walk's bound for a value of ``node`` (see the module), or None.

    A value of bounded nesting: `closing_bytes` from every prefix. Otherwise (``{}``, an
    untyped array or object, a recursive ``$ref``) one bound per schema node the value's
    text can reach, the largest of each kind taken:

    - ``start``: from a value's start, the walk writes one of `LITERALS` where the schema
      takes one (at most 5 bytes), else the value's shortest shape: an object's braces and
      each of its properties once (key, separators, the property's ``start``), the entries
      ``minProperties`` asks for; an array's ``minItems`` items; a string's or number's
      bound as in `closing_bytes`. A shape that needs itself (a recursion with no literal
      way out) has none.
    - ``per_level``: an object's or array's ``start`` (what it may still write after its
      open value: the properties or items it lacks, its closing bracket); an object that
      needs no key (nothing required, no ``minProperties``, no dependencies) its braces
      alone, since the walk closes it first (`_Nested.level`);
    - ``inner``: what the innermost open container's pending entry may take (the rest of a
      key, the separator and a value's ``start``; or the separator and an item's ``start``),
      a string's, number's, enum's or literal's bound;
    - ``base``: ``inner`` and the value's own ``start``;
    - ``opened``: ``per_level`` over the containers that open inside another (the schema's
      root only where a ``$ref`` nests it).

    From a prefix with ``d`` containers open the walk finishes what is under way in the
    innermost one (``inner``; ``base`` with none open), then each container's rest
    (``per_level`` each): each step of it is llguidance's forced text, a guide's
    completion or a literal, as in the walk. A token opens containers inside an open one
    of at most ``opened`` each.
    """
    return _closing_bound(node.schema)


def opening_bytes(node: GrammarLayout) -> int | None:
    """Most bytes the closing walk writes for a value of ``node`` from its start, or None.

    What the writer counts for a grammar value not yet begun (`Writer.longest_rest_bytes`):
    finite for a value of unbounded nesting too.
    """
    bound = closing_bound(node)
    return None if bound is None else bound.start


@lru_cache(maxsize=1024)
def _closing_bound(schema: str) -> ClosingBound | None:
    bounded = _closing_bytes(schema)
    if bounded is not None:
        return ClosingBound(bounded, bounded)
    root = json.loads(schema)
    try:
        return _Nested(root).bound()
    except (Unbounded, RecursionError):
        return None


class _Nested:
    """The `ClosingBound` of a schema of unbounded nesting (see `closing_bound`)."""

    def __init__(self, root: object) -> None:
        self.root = root
        self._starts: dict[str, int] = {}
        self._busy: set[str] = set()

    def bound(self) -> ClosingBound:
        start = self.start(self.root)
        inner = per_level = opened = 0
        seen: set[str] = set()
        todo: list[tuple[object, bool]] = [(self.root, False)]  # (schema, inside a container)
        while todo:
            item, nested = todo.pop()
            for node in self.branches(item):
                kind = node.get("type")
                container = not ("enum" in node or "const" in node) and kind in ("object", "array")
                if container and nested:
                    opened = max(opened, self.level(node))
                key = _canon(node)
                if key in seen:
                    continue
                seen.add(key)
                if not container:
                    inner = max(inner, self.shape(node))
                    continue
                children = _children(node)
                todo.extend((child, True) for child in children)
                per_level = max(per_level, self.level(node))
                value = max((self.start(c) for c in children), default=0)
                if kind == "array":
                    inner = max(inner, _ITEM + value)
                else:
                    inner = max(inner, _key_bound(node) + STRING_SLACK + _KEY + value)
        return ClosingBound(start, max(start, inner), per_level, inner, opened)

    def level(self, node: dict[str, Any]) -> int:
        """Most bytes the walk writes in an open container of ``node`` once its entry is done.

        An object that needs no key (nothing required, no ``minProperties``, no key that
        requires others) closes there: the walk takes ``}`` first where llguidance allows
        it. Any other container: its shortest shape (`shape`), each of its properties once.
        """
        closes = node.get("type") == "object" and not (
            node.get("required")
            or int(node.get("minProperties", 0))
            or {"dependencies", "dependentRequired", "dependentSchemas"} & set(node)
        )
        return 2 if closes else self.shape(node)

    def start(self, s: object) -> int:
        """Most bytes the walk writes for a value of ``s`` from its start."""
        key = _canon(s)
        hit = self._starts.get(key)
        if hit is not None:
            return hit
        if key in self._busy:
            raise Unbounded  # its shortest shape holds itself: no way out
        self._busy.add(key)
        try:
            nodes = self.branches(s)
            if not nodes:
                raise Unbounded  # nothing satisfies it
            if any(_takes_literal(n) for n in nodes):
                most = _LITERAL_MOST  # the walk writes a literal: some branch takes one
            else:
                most = max(_LITERAL_MOST, *(self.shape(n) for n in nodes))
        finally:
            self._busy.discard(key)
        self._starts[key] = most
        return most

    def shape(self, node: dict[str, Any]) -> int:
        """Most bytes of a concrete node's shortest shape (no literal: see `closing_bound`)."""
        if "enum" in node or "const" in node:
            return _enum_bytes(node)
        kind = node.get("type")
        if kind == "object":
            total = 2 + _entries_bytes(node, self.start)
            extra = list(_extras(node))
            if extra:
                value = max(self.start(sub) for _, sub in extra)
                most = max(k for k, _ in extra)
                total += int(node.get("minProperties", 0)) * (
                    most + STRING_SLACK + _KEY + _ITEM + value
                )
            return total
        if kind == "array":
            prefix = node.get("prefixItems", [])
            items = node.get("items", True)
            total = 2
            for k in range(int(node.get("minItems", 0))):
                item = prefix[k] if k < len(prefix) else items
                if item is False:
                    raise Unbounded
                total += self.start(item) + _ITEM
            return total
        return _scalar_bytes(node)

    def branches(self, s: object, refs: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """The concrete schemas a value of ``s`` may follow (llguidance's reading).

        ``$ref`` and ``allOf`` merged in, ``anyOf`` / ``oneOf`` and lists of types split, a
        schema without ``type`` split into every type; each has one ``type``, or ``enum`` /
        ``const``.
        """
        if s is True:
            s = {}
        if s is False:
            return []
        if not isinstance(s, dict):
            raise Unbounded
        s = {k: v for k, v in s.items() if k not in ANNOTATIONS}
        if "$ref" in s:  # a reference to itself with nothing in between: `Unbounded`
            return self.branches(*_with_ref(self.root, s, refs))
        if "allOf" in s:
            parts = s.pop("allOf")
            for p in parts if isinstance(parts, list) else []:
                s = merge_schemas(s, p)
            return self.branches(s, refs)
        found = _union(s, lambda p: self.branches(p, refs))
        if found is not None:
            return [b for branch in found for b in branch]
        if "not" in s or "if" in s:
            raise Unbounded
        if "enum" in s or "const" in s:
            return [s]
        kind = s.get("type")
        if kind is None or isinstance(kind, list):
            kinds = _TYPES if kind is None else kind
            return [b for k in kinds for b in self.branches({**s, "type": k}, refs)]
        return [s]


# ---------------------------------------------------------------------- both readings


def _with_ref(
    root: object, s: dict[str, Any], refs: tuple[str, ...]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``s`` with the schema its ``$ref`` names merged in, and ``refs`` with the reference.

    Raises:
        Unbounded: the reference is not a local one, or one ``refs`` already follows (a
            recursion: nesting without end).
    """
    rest = {k: v for k, v in s.items() if k != "$ref"}
    ref = s["$ref"]
    if not isinstance(ref, str) or ref in refs:
        raise Unbounded
    target = resolve_ref(root, ref)
    return (merge_schemas(rest, target) if rest else target), (*refs, ref)


def _union(s: dict[str, Any], each: Callable[[object], _T]) -> list[_T] | None:
    """``each`` of the satisfiable parts of ``s``'s ``anyOf`` or ``oneOf``, or None without one.

    The union is taken out of ``s``, and each part is merged with the rest of ``s``.

    Raises:
        Unbounded: the union is not a list of parts.
        Unsatisfiable: no part is satisfiable (`satisfiable`).
    """
    for union in ("anyOf", "oneOf"):
        if union in s:
            parts = s.pop(union)
            if not isinstance(parts, list) or not parts:
                raise Unbounded
            return satisfiable(lambda p: each(merge_schemas(s, p) if s else p), parts)
    return None


def _enum_bytes(s: Mapping[str, Any]) -> int:
    """Most bytes of the text of an ``enum`` or ``const`` value; `Unbounded` without one."""
    values = s["enum"] if "enum" in s else [s["const"]]
    if not isinstance(values, list) or not values:
        raise Unbounded
    return max(len(json_text(v).encode("utf-8")) for v in values)


_SCALARS: dict[str, Callable[[Mapping[str, Any]], int]] = {
    "number": number_bound,
    "integer": number_bound,
    "string": string_bound,
    "boolean": lambda _: 5,  # false
    "null": lambda _: 4,
}
"""The bound of a value of each scalar type, from its schema."""


def _scalar_bytes(s: Mapping[str, Any]) -> int:
    """Most bytes of a value of a scalar ``type``; `Unbounded` for another type."""
    kind = s.get("type")
    if not isinstance(kind, str) or kind not in _SCALARS:
        raise Unbounded
    return _SCALARS[kind](s)


def _entries_bytes(node: Mapping[str, Any], value: Callable[[object], int]) -> int:
    """Most bytes of an object's named keys, each written once with its value.

    Its properties, and the required keys its properties do not name (`_undeclared`);
    ``value`` bounds a value of a schema.
    """
    total = 0
    for key, sub in _properties(node).items():
        total += len(json_text(key).encode("utf-8")) + _KEY + _ITEM + value(sub)
    for key, subs in _undeclared(node):
        most = max((value(sub) for sub in subs), default=0)
        total += len(json_text(key).encode("utf-8")) + _KEY + _ITEM + most
    return total


def _canon(s: object) -> str:
    return json.dumps(s, sort_keys=True)


def _properties(node: Mapping[str, Any]) -> dict[str, Any]:
    props = node.get("properties", {})
    if not isinstance(props, dict):
        raise Unbounded
    return props


def _extras(node: Mapping[str, Any]) -> Iterator[tuple[int, object]]:
    """An object's entries beyond its properties: (most bytes of the key's rest, schema)."""
    additional = node.get("additionalProperties", True)
    if additional is not False:
        yield 0, additional
    for pattern, sub in (node.get("patternProperties") or {}).items():
        key = pattern_bound(pattern, 0, None)
        if key is None:
            raise Unbounded
        yield key, sub


def _undeclared(node: Mapping[str, Any]) -> list[tuple[str, list[object]]]:
    """An object's required keys its properties do not name, and the schemas of their values.

    Each value follows ``additionalProperties`` or a pattern's schema: the walk writes one.
    """
    props = _properties(node)
    required = node.get("required", [])
    names = [k for k in required if isinstance(k, str) and k not in props]
    return [(k, [sub for _, sub in _extras(node)]) for k in dict.fromkeys(names)]


def _key_bound(node: Mapping[str, Any]) -> int:
    """Most bytes of a key of an object node, its quotes left to `STRING_SLACK`."""
    names = [len(json_text(k).encode("utf-8")) for k in _properties(node)]
    names += [len(json_text(k).encode("utf-8")) for k, _ in _undeclared(node)]
    return max([*names, *(k for k, _ in _extras(node))], default=0)


def _children(node: Mapping[str, Any]) -> list[object]:
    """The schemas of an object's or array's entries."""
    if node.get("type") == "object":
        return [*_properties(node).values(), *(sub for _, sub in _extras(node))]
    prefix = node.get("prefixItems", [])
    if not isinstance(prefix, list):
        raise Unbounded
    items = node.get("items", True)
    return [*prefix, *([] if items is False else [items])]


_JSON_TYPES: dict[type, tuple[str, ...]] = {
    type(None): ("null",),
    bool: ("boolean",),
    int: ("integer", "number"),
    float: ("number",),
    str: ("string",),
    list: ("array",),
    dict: ("object",),
}


def _takes_literal(node: Mapping[str, Any]) -> bool:
    """Whether llguidance surely takes one of `LITERALS` as a whole value of ``node``."""
    if "enum" in node or "const" in node:
        values = node["enum"] if "enum" in node else [node["const"]]
        kind = node.get("type")
        return isinstance(values, list) and any(
            json_text(v) in LITERALS and (kind is None or kind in _JSON_TYPES[type(v)])
            for v in values
        )
    kind = node.get("type")
    if kind in ("null", "boolean"):
        return True
    if kind in ("number", "integer"):
        return in_range(Fraction(0), number_guide(node, integer=kind == "integer"))
    if kind == "string":
        return not {"pattern", "format"} & set(node) and int(node.get("minLength", 0)) <= 0
    if kind == "array":
        return int(node.get("minItems", 0)) <= 0
    if kind == "object":
        return not node.get("required") and int(node.get("minProperties", 0)) <= 0
    return False
