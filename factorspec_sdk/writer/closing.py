r"""How a grammar value closes: the bound and the guides of the token budget's closing walk.

The token budget (`factorspec_sdk.tokens.budget`) finishes a grammar value by a *closing walk*
(`factorspec_sdk.tokens.grammar.GrammarSegment.closing`): one real completion that llguidance's
masks allow, token by token. This module holds what the walk and the budget need to know of a
value's JSON Schema, without llguidance:

- `closing_bound`: how many bytes the walk writes to finish a value of a schema from *any*
  prefix of it, and from its start (`ClosingBound`). The budget adds it to the longest rest of
  the record (`ceiling`, the roomy checks), so it must hold for every prefix llguidance
  allows. It is derived from the schema's structure: an object closes its open value and
  writes at most each of its remaining properties once, an array its missing items, a string
  the shortest completion of its pattern (`pattern_bound`), a number the digits its range
  needs (`_number_bound`). For a value of bounded nesting it is one number (`closing_bytes`).
  A value of unbounded nesting (``{}``, an untyped array or object, a recursive ``$ref``)
  has no such number, since a prefix may open any number of arrays and objects; but from a
  prefix with ``d`` of them open the walk closes each with at most one container's rest
  (``per_level``) after finishing what is under way (``base``), so its bound is
  ``base + per_level * d`` (`ClosingBound.at`). ``allOf`` parts merge as llguidance
  intersects them (`_merge`), and a string with several regexes (a pattern and a format, two
  patterns) is read as the product of their automata. No bound (``None``): a pattern
  Python's ``re`` cannot read (``\p{L}``, which llguidance takes: no automaton to complete
  it by), a recursion with no short way out (every branch of it nests again, as an array of
  at least one of itself or an object: the walk prefers ``[`` and could nest for ever), a
  product of automata too large to search, and what llguidance refuses anyway (``not``,
  ``if``, an unknown format).
- `closing_guides`: for the walk, the completions of the strings and numbers the schemas
  hold. Inside a string the walk asks every string guide (a pattern, a format, a length, a
  property name, an enumerated string) for the shortest completion of what is written, and
  inside a number every number guide (a range, an enumerated number); llguidance then checks
  each candidate, shortest first, and the walk writes the first it accepts. So the guides
  only steer the walk: a guide that does not describe the string at hand proposes a
  completion llguidance refuses, never one the masks would not allow.

Patterns are read as llguidance reads them (its JSON compiler searches a ``pattern``, with
``\d`` and ``\w`` in ASCII): the guide's automaton (``interegular``) matches ``.*p.*`` unless
the pattern is anchored with ``^`` and ``$``. Formats are llguidance's own regexes
(`LLGUIDANCE_FORMATS`, copied from its ``parser/src/json/formats.rs``).
"""

from __future__ import annotations

import importlib
import json
import math
import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Any, TypeVar

from factorspec_sdk.relations.layout import GRAMMAR_OPTIONS, GrammarLayout

__all__ = [
    "COMPLETION_CHARS",
    "LITERALS",
    "LLGUIDANCE_FORMATS",
    "ClosingBound",
    "ClosingGuides",
    "NumberGuide",
    "StringGuide",
    "closing_bound",
    "closing_bytes",
    "closing_guides",
    "number_completion",
    "opening_bytes",
    "pattern_bound",
]

LLGUIDANCE_FORMATS: dict[str, str] = {
    "date-time": (
        r"(?P<date>[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-("
        r"?:0[1-9]|[12][0-9]|30)|(?:02)-(?:0[1-9]|1[0-9]|2[0-9])))[tT](?P<time>(?:[01][0-9]"
        r"|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?P<time_fraction>\.[0-9]+)?(?P<time_zone>[zZ"
        r"]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))"
    ),
    "time": (
        r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?P<time_fraction>\.[0-9]+)?(?P<t"
        r"ime_zone>[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
    ),
    "date": (
        r"(?:[0-9]{4}-(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01]))|(?:[0-9]{4}-(?:0[469]|1"
        r"1)-(?:0[1-9]|[12][0-9]|30))|(?:[0-9]{4}-02-(?:0[1-9]|1[0-9]|2[0-9]))"
    ),
    "duration": (
        r"P(?:(?P<dur_date>(?:(?P<dur_year>[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)|(?P<dur_month>[0"
        r"-9]+M(?:[0-9]+D)?)|(?P<dur_day>[0-9]+D))(?:T(?:(?P<dur_hour>[0-9]+H(?:[0-9]+M(?:["
        r"0-9]+S)?)?)|(?P<dur_minute>[0-9]+M(?:[0-9]+S)?)|(?P<dur_second>[0-9]+S)))?)|(?P<d"
        r"ur_time>T(?:(?P<dur_hour2>[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?)|(?P<dur_minute2>[0-9]+M"
        r"(?:[0-9]+S)?)|(?P<dur_second2>[0-9]+S)))|(?P<dur_week>[0-9]+W))"
    ),
    "email": (
        r"(?P<local_part>(?P<dot_string>[a-zA-Z0-9!#$%&'*+\-/=?\^_`{|}~]+(\.[a-zA-Z0-9!#$%"
        r"&'*+\-/=?\^_`{|}~]+)*))@((?P<domain>(?P<sub_domain>[a-zA-Z0-9]([a-zA-Z0-9-]*[a-z"
        r"A-Z0-9])?)(\.(?P<sub_domain2>[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?))*)|\[(?P<ip"
        r"v4>((([0-9])|(([1-9])[0-9]|(25[0-5]|(2[0-4]|(1)[0-9])[0-9])))\.){3}(([0-9])|(([1-"
        r"9])[0-9]|(25[0-5]|(2[0-4]|(1)[0-9])[0-9]))))\])"
    ),
    "hostname": (
        r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA"
        r"-Z0-9])?)*"
    ),
    "ipv4": (
        r"((([0-9])|(([1-9])[0-9]|(25[0-5]|(2[0-4]|(1)[0-9])[0-9])))\.){3}(([0-9])|(([1-9])"
        r"[0-9]|(25[0-5]|(2[0-4]|(1)[0-9])[0-9])))"
    ),
    "ipv6": (
        r"(?:(?P<full>(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}))|(?:::(?:[0-9a-fA-F]{1,4}:)"
        r"{0,5}(?P<ls32>[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}))|(?:(?P<h16_1>[0-9a-fA-F]{1,4})?"
        r"::(?:[0-9a-fA-F]{1,4}:){0,4}(?P<ls32_1>[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}))|(?:((?"
        r":[0-9a-fA-F]{1,4}:){0,1}[0-9a-fA-F]{1,4})?::(?:[0-9a-fA-F]{1,4}:){0,3}(?P<ls32_2>"
        r"[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}))|(?:((?:[0-9a-fA-F]{1,4}:){0,2}[0-9a-fA-F]{1,4"
        r"})?::(?:[0-9a-fA-F]{1,4}:){0,2}(?P<ls32_3>[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}))|(?:"
        r"((?:[0-9a-fA-F]{1,4}:){0,3}[0-9a-fA-F]{1,4})?::[0-9a-fA-F]{1,4}:(?P<ls32_4>[0-9a-"
        r"fA-F]{1,4}:[0-9a-fA-F]{1,4}))|(?:((?:[0-9a-fA-F]{1,4}:){0,4}[0-9a-fA-F]{1,4})?::("
        r"?P<ls32_5>[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}))|(?:((?:[0-9a-fA-F]{1,4}:){0,5}[0-9a"
        r"-fA-F]{1,4})?::(?P<h16_2>[0-9a-fA-F]{1,4}))|(?:((?:[0-9a-fA-F]{1,4}:){0,6}[0-9a-f"
        r"A-F]{1,4})?::)"
    ),
    "uuid": (
        r"(?P<time_low>[0-9a-fA-F]{8})-(?P<time_mid>[0-9a-fA-F]{4})-(?P<time_high_and_versi"
        r"on>[0-9a-fA-F]{4})-(?P<clock_seq_and_reserved>[0-9a-fA-F]{2})(?P<clock_seq_low>[0"
        r"-9a-fA-F]{2})-(?P<node>[0-9a-fA-F]{12})"
    ),
    "uri": (
        r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+\-.]*):(?://(?:(?P<userinfo>(?:[a-zA-Z0-9\-._~!$&'"
        r"()*+,;=:]|%[0-9a-fA-F]{2})*)@)?(?P<host>\[(?:(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{"
        r"1,4}|(?:[0-9a-fA-F]{1,4}:){1,7}:|(?:[0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|(?:["
        r"0-9a-fA-F]{1,4}:){1,5}(?::[0-9a-fA-F]{1,4}){1,2}|(?:[0-9a-fA-F]{1,4}:){1,4}(?::[0"
        r"-9a-fA-F]{1,4}){1,3}|(?:[0-9a-fA-F]{1,4}:){1,3}(?::[0-9a-fA-F]{1,4}){1,4}|(?:[0-9"
        r"a-fA-F]{1,4}:){1,2}(?::[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:(?::[0-9a-fA-F]{1,"
        r"4}){1,6}|:(?::[0-9a-fA-F]{1,4}){1,7}|::|v[0-9a-fA-F]+\.[a-zA-Z0-9\-._~!$&'()*+,;="
        r":]+)\]|(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9"
        r"]|1[0-9]{2}|[1-9]?[0-9])|(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2})*)(?::(?P"
        r"<port>[0-9]*))?(?P<path_abempty>(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=:@]|%[0-9a-fA-F]"
        r"{2})*)*)|(?P<path_absolute>/(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=:@]|%[0-9a-fA-F]{2})+"
        r"(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=:@]|%[0-9a-fA-F]{2})*)*)?)|(?P<path_rootless>(?:"
        r"[a-zA-Z0-9\-._~!$&'()*+,;=:@]|%[0-9a-fA-F]{2})+(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=:"
        r"@]|%[0-9a-fA-F]{2})*)*)|(?P<path_empty>))(?:\?(?P<query>(?:[a-zA-Z0-9\-._~!$&'()*"
        r"+,;=:@/?]|%[0-9a-fA-F]{2})*))?(?:\#(?P<fragment>(?:[a-zA-Z0-9\-._~!$&'()*+,;=:@/?"
        r"]|%[0-9a-fA-F]{2})*))?"
    ),
}
"""llguidance 1.7's regex for each ``format`` it implements (``lookup_format``)."""

STRING_SLACK = 8
"""Bytes a string's closing walk may write beyond its content's completion: the closing quote,
the opening one at the value's start, an escape under way (``\\u12`` needs two more hex
digits) and the low half of a surrogate pair after it, or the rest of a split UTF-8 character."""

NUMBER_SLACK = 6
"""Bytes a number's closing walk may write beyond its range's digits: a sign, a point, a
fraction digit between two exclusive bounds, exponent digits llguidance lets in."""

_KEY = len(GRAMMAR_OPTIONS["key_separator"])
_ITEM = len(GRAMMAR_OPTIONS["item_separator"])
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
     "writeOnly", "$schema", "$id", "$anchor", "$defs", "definitions", "x-guidance"}
)  # fmt: skip
_STRING_KEYS = frozenset({"pattern", "format", "minLength", "maxLength"})
_NUMBER_KEYS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
_TYPES = ("null", "boolean", "number", "string", "array", "object")
"""The types a schema without ``type`` allows (llguidance's ``TYPES``; ``number`` holds the
integers)."""


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
    except _Unbounded:
        return None


class _Unbounded(Exception):
    pass


class _Unsatisfiable(_Unbounded):
    """No value satisfies the schema: a branch of a union that llguidance drops."""


class _Bound:
    def __init__(self, root: object) -> None:
        self.root = root

    def of(self, s: object, refs: tuple[str, ...]) -> int:
        if s is True:
            raise _Unbounded
        if s is False:
            raise _Unsatisfiable
        if not isinstance(s, dict):
            raise _Unbounded
        s = {k: v for k, v in s.items() if k not in _ANNOTATIONS}
        if "$ref" in s:
            ref = s.pop("$ref")
            if not isinstance(ref, str) or ref in refs:
                raise _Unbounded  # recursion: nesting without end
            target = _resolve(self.root, ref)
            s = _merge(s, target) if s else target
            return self.of(s, (*refs, ref))
        if "allOf" in s:
            parts = s.pop("allOf")
            for p in parts if isinstance(parts, list) else []:
                if isinstance(p, dict) and "$ref" in p:
                    ref = p["$ref"]
                    if not isinstance(ref, str) or ref in refs:
                        raise _Unbounded
                    refs = (*refs, ref)
                    p = _merge(
                        {k: v for k, v in p.items() if k != "$ref"}, _resolve(self.root, ref)
                    )
                s = _merge(s, p)
            return self.of(s, refs)
        for union in ("anyOf", "oneOf"):
            if union in s:
                parts = s.pop(union)
                if not isinstance(parts, list) or not parts:
                    raise _Unbounded
                return max(_satisfiable(lambda p: self.of(_merge(s, p) if s else p, refs), parts))
        if "not" in s or "if" in s:
            raise _Unbounded
        if "enum" in s or "const" in s:
            values = s["enum"] if "enum" in s else [s["const"]]
            if not isinstance(values, list) or not values:
                raise _Unbounded
            return max(len(_json_text(v).encode("utf-8")) for v in values)
        kind = s.get("type")
        if isinstance(kind, list):
            if not kind:
                raise _Unsatisfiable
            return max(self.of({**s, "type": k}, refs) for k in kind)
        if kind is None:  # every type, each with the keywords that apply to it (llguidance's
            # reading): the array and object of them nest without end unless constrained
            if not s:
                raise _Unbounded
            return max(self.of({**s, "type": k}, refs) for k in _TYPES)
        if kind in ("number", "integer"):
            return _number_bound(s)
        if kind == "boolean":
            return 5
        if kind == "null":
            return 4
        if kind == "string":
            return _string_bound(s)
        if kind == "array":
            return self._array(s, refs)
        if kind == "object":
            return self._object(s, refs)
        raise _Unbounded

    def _array(self, s: dict[str, Any], refs: tuple[str, ...]) -> int:
        prefix = s.get("prefixItems", [])
        if not isinstance(prefix, list):
            raise _Unbounded
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
        props = s.get("properties", {})
        if not isinstance(props, dict):
            raise _Unbounded
        total = 2
        for key, sub in props.items():
            total += len(_json_text(key).encode("utf-8")) + _KEY + _ITEM + self.of(sub, refs)
        extra: list[int] = []
        additional = s.get("additionalProperties", True)
        if additional is not False:
            extra.append(STRING_SLACK + self.of(additional, refs))
        for pattern, sub in (s.get("patternProperties") or {}).items():
            key = pattern_bound(pattern, 0, None)
            if key is None:
                raise _Unbounded
            extra.append(key + STRING_SLACK + self.of(sub, refs))
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
    """

    start: int
    base: int
    per_level: int = 0

    def at(self, depth: int) -> int:
        """Most bytes the walk writes from a prefix with ``depth`` containers open."""
        return self.base + self.per_level * depth


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
      open value: the properties or items it lacks, its closing bracket);
    - ``base``: what the innermost open container's pending entry may take (the rest of a
      key, the separator and a value's ``start``; or the separator and an item's ``start``),
      a string's, number's, enum's or literal's bound, and the value's own ``start``.

    From a prefix with ``d`` containers open the walk finishes what is under way in the
    innermost one (``base``), then each container's rest (``per_level`` each): each step
    of it is llguidance's forced text, a guide's completion or a literal, as in the walk.
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
    except (_Unbounded, RecursionError):
        return None


class _Nested:
    """The `ClosingBound` of a schema of unbounded nesting (see `closing_bound`)."""

    def __init__(self, root: object) -> None:
        self.root = root
        self._starts: dict[str, int] = {}
        self._busy: set[str] = set()

    def bound(self) -> ClosingBound:
        start = self.start(self.root)
        base, per_level = start, 0
        seen: set[str] = set()
        todo: list[object] = [self.root]
        while todo:
            for node in self.branches(todo.pop()):
                key = _canon(node)
                if key in seen:
                    continue
                seen.add(key)
                kind = node.get("type")
                if "enum" in node or "const" in node or kind not in ("object", "array"):
                    base = max(base, self.shape(node))
                    continue
                children = _children(node)
                todo.extend(children)
                per_level = max(per_level, self.shape(node))
                value = max((self.start(c) for c in children), default=0)
                if kind == "array":
                    base = max(base, _ITEM + value)
                else:
                    base = max(base, _key_bound(node) + STRING_SLACK + _KEY + value)
        return ClosingBound(start, base, per_level)

    def start(self, s: object) -> int:
        """Most bytes the walk writes for a value of ``s`` from its start."""
        key = _canon(s)
        hit = self._starts.get(key)
        if hit is not None:
            return hit
        if key in self._busy:
            raise _Unbounded  # its shortest shape holds itself: no way out
        self._busy.add(key)
        try:
            nodes = self.branches(s)
            if not nodes:
                raise _Unbounded  # nothing satisfies it
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
            values = node["enum"] if "enum" in node else [node["const"]]
            if not isinstance(values, list) or not values:
                raise _Unbounded
            return max(len(_json_text(v).encode("utf-8")) for v in values)
        kind = node.get("type")
        if kind == "object":
            total = 2
            for key, sub in _properties(node).items():
                total += len(_json_text(key).encode("utf-8")) + _KEY + _ITEM + self.start(sub)
            extra = _extras(node)
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
                    raise _Unbounded
                total += self.start(item) + _ITEM
            return total
        if kind in ("number", "integer"):
            return _number_bound(node)
        if kind == "string":
            return _string_bound(node)
        if kind == "boolean":
            return 5
        if kind == "null":
            return 4
        raise _Unbounded

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
            raise _Unbounded
        s = {k: v for k, v in s.items() if k not in _ANNOTATIONS}
        if "$ref" in s:
            ref = s.pop("$ref")
            if not isinstance(ref, str) or ref in refs:
                raise _Unbounded  # a reference to itself with nothing in between
            target = _resolve(self.root, ref)
            return self.branches(_merge(s, target) if s else target, (*refs, ref))
        if "allOf" in s:
            parts = s.pop("allOf")
            for p in parts if isinstance(parts, list) else []:
                s = _merge(s, p)
            return self.branches(s, refs)
        for union in ("anyOf", "oneOf"):
            if union in s:
                parts = s.pop(union)
                if not isinstance(parts, list) or not parts:
                    raise _Unbounded
                found = _satisfiable(lambda p: self.branches(_merge(s, p) if s else p, refs), parts)
                return [b for branch in found for b in branch]
        if "not" in s or "if" in s:
            raise _Unbounded
        if "enum" in s or "const" in s:
            return [s]
        kind = s.get("type")
        if kind is None or isinstance(kind, list):
            kinds = _TYPES if kind is None else kind
            return [b for k in kinds for b in self.branches({**s, "type": k}, refs)]
        return [s]


def _canon(s: object) -> str:
    return json.dumps(s, sort_keys=True)


def _properties(node: Mapping[str, Any]) -> dict[str, Any]:
    props = node.get("properties", {})
    if not isinstance(props, dict):
        raise _Unbounded
    return props


def _extras(node: Mapping[str, Any]) -> list[tuple[int, object]]:
    """An object's entries beyond its properties: (most bytes of the key's rest, schema)."""
    out: list[tuple[int, object]] = []
    additional = node.get("additionalProperties", True)
    if additional is not False:
        out.append((0, additional))
    for pattern, sub in (node.get("patternProperties") or {}).items():
        key = pattern_bound(pattern, 0, None)
        if key is None:
            raise _Unbounded
        out.append((key, sub))
    return out


def _key_bound(node: Mapping[str, Any]) -> int:
    """Most bytes of a key of an object node, its quotes left to `STRING_SLACK`."""
    names = [len(_json_text(k).encode("utf-8")) for k in _properties(node)]
    return max([*names, *(k for k, _ in _extras(node))], default=0)


def _children(node: Mapping[str, Any]) -> list[object]:
    """The schemas of an object's or array's entries."""
    if node.get("type") == "object":
        return [*_properties(node).values(), *(sub for _, sub in _extras(node))]
    prefix = node.get("prefixItems", [])
    if not isinstance(prefix, list):
        raise _Unbounded
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
            _json_text(v) in LITERALS and (kind is None or kind in _JSON_TYPES[type(v)])
            for v in values
        )
    kind = node.get("type")
    if kind in ("null", "boolean"):
        return True
    if kind in ("number", "integer"):
        return _in_range(Fraction(0), _number_guide(node, integer=kind == "integer"))
    if kind == "string":
        return not {"pattern", "format"} & set(node) and int(node.get("minLength", 0)) <= 0
    if kind == "array":
        return int(node.get("minItems", 0)) <= 0
    if kind == "object":
        return not node.get("required") and int(node.get("minProperties", 0)) <= 0
    return False


def _resolve(root: object, ref: str) -> dict[str, Any]:
    if ref == "#":
        target: object = root
    elif ref.startswith("#/"):
        target = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise _Unbounded
            target = target[part]
    else:
        raise _Unbounded
    if target is True:
        return {}
    if not isinstance(target, dict):
        raise _Unbounded
    return target


def _merge(a: dict[str, Any], b: object) -> dict[str, Any]:
    """Two schemas' keywords as one (``allOf``, ``anyOf`` siblings), as llguidance intersects.

    Bounds and ``required`` combine; sub-schemas that differ (``items``, a property's,
    ``additionalProperties``) become an ``allOf`` of both, merged where they are read; two
    ``anyOf`` become one of every pair; patterns and formats add up (a string matches them
    all: `_string_regexes`); enumerations keep their common values; ``multipleOf`` takes the
    least common multiple. A property one side names and the other does not is also the
    other side's extra property (its ``patternProperties`` or ``additionalProperties``).
    `_Unbounded` on what does not combine (two ``const``, ``not``).
    """
    if b is True:
        return dict(a)
    if not isinstance(b, dict):
        raise _Unbounded
    out = dict(a)
    for k, v in b.items():
        if k in _ANNOTATIONS or k not in out or out[k] == v:
            out.setdefault(k, v)
            continue
        w = out[k]
        if k in ("minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum"):
            out[k] = max(w, v)
        elif k in ("maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum"):
            out[k] = min(w, v)
        elif k == "required":
            out[k] = list(dict.fromkeys([*w, *v]))
        elif k in ("properties", "patternProperties") and isinstance(w, dict):
            if not isinstance(v, dict):
                raise _Unbounded
            out[k] = {**w, **{n: _both(w[n], x) if n in w else x for n, x in v.items()}}
        elif k in ("items", "additionalProperties"):
            out[k] = _both(w, v)
        elif k == "prefixItems" and isinstance(w, list) and isinstance(v, list):
            mine, theirs = a.get("items", True), b.get("items", True)
            out[k] = [
                _both(w[i] if i < len(w) else mine, v[i] if i < len(v) else theirs)
                for i in range(max(len(w), len(v)))
            ]
        elif k == "type":
            mine = set(w if isinstance(w, list) else [w])
            theirs = set(v if isinstance(v, list) else [v])
            both = mine & theirs
            if {"integer", "number"} <= mine | theirs and "integer" in mine ^ theirs:
                both.add("integer")  # an integer is a number
            if not both:
                raise _Unsatisfiable
            out[k] = sorted(both) if len(both) != 1 else both.pop()
        elif k in ("pattern", "format"):
            out[k] = list(dict.fromkeys([*_listed(w), *_listed(v)]))
        elif k in ("anyOf", "oneOf") and isinstance(w, list) and isinstance(v, list):
            out[k] = [{"allOf": [x, y]} for x in w for y in v]
        elif k == "allOf" and isinstance(w, list) and isinstance(v, list):
            out[k] = [*w, *v]
        elif k == "$ref":
            out["allOf"] = [*out.get("allOf", []), {"$ref": v}]
        elif k == "enum" and isinstance(w, list) and isinstance(v, list):
            theirs_texts = {_json_text(y) for y in v}
            out[k] = [x for x in w if _json_text(x) in theirs_texts]
            if not out[k]:
                raise _Unsatisfiable
        elif k == "multipleOf":
            out[k] = _lcm(w, v)
        elif k == "const":
            raise _Unsatisfiable  # two values
        else:
            raise _Unbounded
    props = out.get("properties")
    if isinstance(props, dict):  # a property one side names is the other side's extra one
        mine, theirs = _names(a), _names(b)
        for n in props:
            if (n in mine) != (n in theirs):
                props[n] = _both(props[n], _extra_schema(b if n in mine else a, n))
    return out


def _names(s: Mapping[str, Any]) -> dict[str, Any]:
    props = s.get("properties")
    return props if isinstance(props, dict) else {}


_T = TypeVar("_T")


def _satisfiable(of: Callable[[object], _T], parts: list[object]) -> list[_T]:
    """``of`` each part of a union that some value satisfies (llguidance drops the others)."""
    found: list[_T] = []
    for p in parts:
        try:
            found.append(of(p))
        except _Unsatisfiable:
            continue
    if not found:
        raise _Unsatisfiable
    return found


def _both(a: object, b: object) -> object:
    """The intersection of two sub-schemas, merged where it is read."""
    if a is True or a == b:
        return b
    if b is True:
        return a
    if a is False or b is False:
        return False
    return {"allOf": [a, b]}


def _listed(x: object) -> list[object]:
    return x if isinstance(x, list) else [x]


def _extra_schema(s: Mapping[str, Any], name: str) -> object:
    """The schema ``s`` gives a property it does not name (True: any)."""
    for pattern, sub in (s.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, name):
                return sub
        except re.error:
            raise _Unbounded from None  # llguidance reads it; Python cannot say which keys match
    return s.get("additionalProperties", True)


def _lcm(a: object, b: object) -> int | float:
    """The least common multiple of two ``multipleOf`` values, as llguidance takes it."""
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int | float):
        raise _Unbounded
    if not isinstance(b, int | float):
        raise _Unbounded
    x, y = Fraction(repr(a)), Fraction(repr(b))
    if x <= 0 or y <= 0:
        raise _Unbounded
    num = math.lcm(x.numerator * y.denominator, y.numerator * x.denominator)
    value = Fraction(num, x.denominator * y.denominator)
    if value.denominator == 1:
        return int(value)
    if Fraction(repr(float(value))) == value:
        return float(value)
    raise _Unbounded  # not a decimal a schema could hold


def _json_text(value: object) -> str:
    """A JSON value as the writer's separators spell it."""
    return json.dumps(
        value,
        ensure_ascii=False,
        separators=(GRAMMAR_OPTIONS["item_separator"], GRAMMAR_OPTIONS["key_separator"]),
    )


def _string_bound(s: Mapping[str, Any]) -> int:
    lo = int(s.get("minLength", 0))
    hi = s.get("maxLength")
    regexes = _string_regexes(s)
    if not regexes:
        return lo + STRING_SLACK if hi is None else min(lo, int(hi)) + STRING_SLACK
    if len(regexes) == 1:
        bound = pattern_bound(regexes[0], lo, None if hi is None else int(hi))
    else:  # a string matching all of them (llguidance's And): their automata's product
        fsm = _fsm(tuple(regexes))
        bound = None if fsm is None else fsm.most_completion(lo, None if hi is None else int(hi))
    if bound is None:
        raise _Unbounded
    return bound + STRING_SLACK


def _string_regexes(s: Mapping[str, Any]) -> list[str]:
    """The regexes a string schema's value must match: its patterns, its formats'."""
    out: list[str] = []
    for pattern in _listed(s.get("pattern", [])):
        if not isinstance(pattern, str):
            raise _Unbounded
        out.append(pattern)
    for fmt in _listed(s.get("format", [])):
        if not isinstance(fmt, str) or fmt not in LLGUIDANCE_FORMATS:
            raise _Unbounded  # a format llguidance does not know (it refuses the schema)
        out.append("^(?:" + LLGUIDANCE_FORMATS[fmt] + ")$")
    return out


def pattern_bound(pattern: str, min_length: int, max_length: int | None) -> int | None:
    """Most characters the shortest completion of a string matching ``pattern`` needs.

    From any prefix of a match (a prefix with a completion of ``min_length`` to
    ``max_length`` characters in all), the shortest such completion has at most this many
    characters. From the pattern's structure (Python's ``re`` parser): a sequence needs at
    most the rest of its open part and the least length of the parts after it, a repeat the
    rest of its open iteration and its missing iterations, a branch the most of its
    branches. With ``min_length`` the completion may have to loop through a repeat: at most
    ``min_length`` plus twice that. None for a pattern ``re`` cannot read, or a look-around
    or back-reference (which llguidance refuses too).
    """
    try:
        parsed = _re_parser().parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    try:
        least, rest = _rx(parsed)
    except _Unbounded:
        return None
    del least
    bound = rest if min_length == 0 else min_length + 2 * rest + 1
    return bound if max_length is None else min(bound, max_length)


def _re_parser() -> Any:
    """Python's regex parser, ``re._parser`` (the standard library's ``sre_parse``)."""
    return importlib.import_module("re._parser")


def _rx(items: Any) -> tuple[int, int]:
    """``(least length, most shortest completion from inside)`` of a parsed sequence."""
    parts: list[tuple[int, int]] = []
    for op, av in items:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL", "ANY", "IN", "CATEGORY"):
            parts.append((1, 1))
        elif name == "AT":
            parts.append((0, 0))
        elif name == "SUBPATTERN":
            parts.append(_rx(av[-1]))
        elif name == "ATOMIC_GROUP":
            parts.append(_rx(av))
        elif name == "BRANCH":
            subs = [_rx(b) for b in av[1]]
            parts.append((min(x[0] for x in subs), max(x[1] for x in subs)))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, _hi, sub = av
            least, rest = _rx(sub)
            parts.append((lo * least, rest + max(lo - 1, 0) * least))
        else:  # GROUPREF, ASSERT, ASSERT_NOT, ...
            raise _Unbounded
    total = sum(p[0] for p in parts)
    worst = 0
    after = total
    for least, rest in parts:
        after -= least
        worst = max(worst, rest + after)
    return total, worst


def _number_bound(s: Mapping[str, Any]) -> int:
    texts = [
        _plain(v)
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
        if isinstance((v := s.get(k)), int | float) and not isinstance(v, bool)
    ]
    if not texts:
        return 1
    return 2 * max(len(t) for t in texts) + NUMBER_SLACK


def _plain(x: float) -> str:
    """A number's digits written out, without an exponent (``1e-9`` -> ``0.000000001``)."""
    return format(Decimal(repr(x)), "f") if isinstance(x, float) else str(x)


# ---------------------------------------------------------------------- the guides


COMPLETION_CHARS = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    + "".join(chr(c) for c in range(0x21, 0x7F) if not chr(c).isalnum() and chr(c) not in '"\\')
    + " "
)
"""Characters a guide completes strings with, in the order it prefers them (no quote, no
backslash: the walk writes them unescaped, one byte each)."""

_PAD = "]"
"""What a plain string (no pattern) is padded with to its ``minLength`` (the rule of
`factorspec_sdk.tokens.budget` for plain strings counts on it)."""

_SEARCH_LIMIT = 20_000
"""States a guide's shortest-completion search visits before it gives up."""


class _Fsm:
    """The automaton (``interegular``) of the strings that match each of some patterns.

    With memoized shortest completions.
    """

    def __init__(self, patterns: tuple[str, ...]) -> None:
        import interegular

        fsm: Any = None
        for pattern in patterns:
            body = pattern
            body = body[1:] if body.startswith("^") else "(?s:.)*" + body
            if body.endswith("$") and not body.endswith("\\$"):
                body = body[:-1]
            else:
                body += "(?s:.)*"
            one = interegular.parse_pattern(body).to_fsm()
            fsm = one if fsm is None else fsm & one
        self.initial: int = fsm.initial
        self.finals: frozenset[int] = frozenset(fsm.finals)
        self.map: dict[int, dict[int, int]] = fsm.map
        self.alphabet: Any = fsm.alphabet
        symbols: dict[int, str] = {}
        for ch in COMPLETION_CHARS:
            symbols.setdefault(self.alphabet[ch], ch)
        self.steps: tuple[tuple[int, str], ...] = tuple(symbols.items())
        """One character per symbol, the preferred one, in the order of preference."""
        self._memo: dict[tuple[int, int], str | None] = {}

    def run(self, text: str) -> int | None:
        q = self.initial
        for ch in text:
            nxt = self.map.get(q, {}).get(self.alphabet[ch])
            if nxt is None:
                return None
            q = nxt
        return q

    def most_completion(self, lo: int, hi: int | None) -> int | None:
        """Most characters of the shortest completion (`shortest`) from any prefix of a match.

        Exact on the automaton: over every state a prefix reaches (any characters, a count
        of them up to ``lo``) from which a match of at least ``lo`` characters is still
        reachable, the length of the shortest completion by the characters the guide writes
        with. None where some such state has no completion by those characters, or the
        product of states and counts is too large to search.
        """
        succ = {q: set(row.values()) for q, row in self.map.items()}
        start = (self.initial, 0)
        seen = {start}
        todo = [start]
        while todo:
            q, c = todo.pop()
            for t in succ.get(q, ()):
                nxt = (t, min(c + 1, lo))
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
            if len(seen) > _SEARCH_LIMIT:
                return None
        pred: dict[tuple[int, int], list[tuple[int, int]]] = {}
        usable = {sym for sym, _ in self.steps}
        for q, c in seen:
            for sym, t in self.map.get(q, {}).items():
                if sym in usable:
                    pred.setdefault((t, min(c + 1, lo)), []).append((q, c))
        dist = {node: 0 for node in seen if node[0] in self.finals and node[1] == lo}
        frontier = deque(dist)
        while frontier:
            node = frontier.popleft()
            for p in pred.get(node, ()):
                if p not in dist:
                    dist[p] = dist[node] + 1
                    frontier.append(p)
        live = self._live(succ, lo, seen)
        if any(node not in dist for node in live):
            return None
        most = max((dist[node] for node in live), default=0)
        return most if hi is None else min(most, hi)

    def _live(
        self, succ: dict[int, set[int]], lo: int, seen: set[tuple[int, int]]
    ) -> set[tuple[int, int]]:
        """The states of ``seen`` from which a match (by any characters) is reachable."""
        back: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for q, c in seen:
            for t in succ.get(q, ()):
                back.setdefault((t, min(c + 1, lo)), []).append((q, c))
        live = {node for node in seen if node[0] in self.finals and node[1] == lo}
        todo = list(live)
        while todo:
            for p in back.get(todo.pop(), ()):
                if p not in live:
                    live.add(p)
                    todo.append(p)
        return live

    def shortest(self, q: int, n: int, lo: int, hi: int | None) -> str | None:
        """The least completion from state ``q`` after ``n`` characters, to ``lo..hi`` in all.

        Least: shortest, then first by `COMPLETION_CHARS`.
        """
        cap = hi if hi is not None else lo
        key = (q, min(n, cap))
        if key in self._memo:
            return self._memo[key]
        start = (q, min(n, cap))
        parent: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
        queue = deque([(q, n)])
        found: tuple[int, int] | None = None
        while queue and len(parent) < _SEARCH_LIMIT:
            s, k = queue.popleft()
            if s in self.finals and k >= lo and (hi is None or k <= hi):
                found = (s, min(k, cap))
                break
            if hi is not None and k >= hi:
                continue
            for sym, ch in self.steps:
                t = self.map.get(s, {}).get(sym)
                if t is None:
                    continue
                node = (t, min(k + 1, cap))
                if node not in parent:
                    parent[node] = ((s, min(k, cap)), ch)
                    queue.append((t, k + 1))
        out: str | None = None
        if found is not None:
            chars: list[str] = []
            at = parent[found]
            while at is not None:
                prev, ch = at
                chars.append(ch)
                at = parent[prev]
            out = "".join(reversed(chars))
        self._memo[key] = out
        return out


@lru_cache(maxsize=256)
def _fsm(patterns: tuple[str, ...]) -> _Fsm | None:
    try:
        return _Fsm(patterns)
    except Exception:  # interegular's syntax errors share no base class
        return None


@dataclass(frozen=True, slots=True)
class StringGuide:
    """Where a string may close: a pattern (or none), its lengths, or one literal text.

    Attributes:
        patterns: the regexes the content must match (a pattern, a format's).
        min_length: fewest characters.
        max_length: most characters, or None.
        literal: the one text the string is (a property name, an enumerated string).
    """

    patterns: tuple[str, ...] = ()
    min_length: int = 0
    max_length: int | None = None
    literal: str | None = None

    def completion(self, content: str) -> str | None:
        """The shortest text after ``content`` that completes it (None: none here)."""
        if self.literal is not None:
            return self.literal[len(content) :] if self.literal.startswith(content) else None
        n = len(content)
        if self.max_length is not None and n > self.max_length:
            return None
        if not self.patterns:
            return _PAD * max(0, self.min_length - n)
        fsm = _fsm(self.patterns)
        if fsm is None:
            return None
        q = fsm.run(content)
        if q is None:
            return None
        return fsm.shortest(q, n, self.min_length, self.max_length)


@dataclass(frozen=True, slots=True)
class NumberGuide:
    """A number's range (or one literal text): see `number_completion`.

    Attributes:
        integer: only integers.
        lo: the lower bound, or None.
        hi: the upper bound, or None.
        lo_open: the lower bound is exclusive.
        hi_open: the upper bound is exclusive.
        multiple: ``multipleOf``, or None.
        literal: the one text the number is (an enumerated number).
    """

    integer: bool = False
    lo: Fraction | None = None
    hi: Fraction | None = None
    lo_open: bool = False
    hi_open: bool = False
    multiple: Fraction | None = None
    literal: str | None = None

    def completion(self, text: str) -> str | None:
        """The shortest text after ``text`` that makes it a number of this guide."""
        if self.literal is not None:
            return self.literal[len(text) :] if self.literal.startswith(text) else None
        return number_completion(text, self)


@dataclass(frozen=True, slots=True)
class ClosingGuides:
    """The guides of one grammar segment's closing walk.

    Attributes:
        strings: string guides, in the order the walk asks them.
        numbers: number guides, likewise.
        plain: every string is a plain one (no pattern, format, property name or enumerated
            text), so the walk pads each with `_PAD` to its ``minLength`` and closes it.
    """

    strings: tuple[StringGuide, ...]
    numbers: tuple[NumberGuide, ...]
    plain: bool

    def string_completions(self, content: str) -> list[str]:
        """Each guide's completion of ``content``, shortest first, without repeats."""
        found = {c for g in self.strings if (c := g.completion(content)) is not None}
        return sorted(found, key=lambda c: (len(c), c))

    def number_completions(self, text: str) -> list[str]:
        """Each guide's completion of the number ``text``, shortest first, without repeats."""
        found = {c for g in self.numbers if (c := g.completion(text)) is not None}
        return sorted(found, key=lambda c: (len(c), c))


@lru_cache(maxsize=256)
def closing_guides(schemas: tuple[str, ...]) -> ClosingGuides:
    """The guides of the strings and numbers of ``schemas`` (JSON texts), and plain ones."""
    strings: dict[StringGuide, None] = {}
    numbers: dict[NumberGuide, None] = {}
    plain = True
    for text in schemas:
        root = json.loads(text)
        for node in _nodes(root):
            plain &= _collect(node, strings, numbers)
            merged = _merged(root, node)
            if merged is not None:  # an allOf's parts as one (two patterns: one guide)
                plain &= _collect(merged, strings, numbers)
    strings[StringGuide()] = None
    numbers[NumberGuide()] = None
    return ClosingGuides(tuple(strings), tuple(numbers), plain)


def _nodes(s: object) -> Iterator[dict[str, Any]]:
    """Every schema object in a schema document (``$defs`` and sub-schemas alike)."""
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, list):
            stack.extend(reversed(x))
        elif isinstance(x, dict):
            yield x
            for k, v in x.items():
                if k not in ("enum", "const", "default", "examples"):
                    stack.append(v)


def _merged(root: object, node: dict[str, Any]) -> dict[str, Any] | None:
    """An ``allOf`` node's parts merged into it (`_merge`), or None (none, or no merge)."""
    parts = node.get("allOf")
    if not isinstance(parts, list):
        return None
    out = {k: v for k, v in node.items() if k != "allOf"}
    try:
        for part in parts:
            if isinstance(part, dict) and isinstance(part.get("$ref"), str):
                rest = {k: v for k, v in part.items() if k != "$ref"}
                part = _merge(rest, _resolve(root, part["$ref"]))
            out = _merge(out, part)
    except _Unbounded:
        return None
    return out


def _collect(
    s: dict[str, Any], strings: dict[StringGuide, None], numbers: dict[NumberGuide, None]
) -> bool:
    """Add the guides of one schema object; whether it keeps the segment's strings plain."""
    plain = True
    kinds = s.get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    for key in (s.get("properties") or {}) if isinstance(s.get("properties"), dict) else {}:
        strings[StringGuide(literal=key)] = None
        plain = False
    for pattern in s.get("patternProperties") or {}:
        strings[StringGuide(patterns=(pattern,))] = None
        plain = False
    if s.get("type") == "object" or "properties" in s or "additionalProperties" in s:
        plain = False
    values = s["enum"] if isinstance(s.get("enum"), list) else [s["const"]] if "const" in s else []
    for v in values:
        if isinstance(v, str):
            strings[StringGuide(literal=v)] = None
            plain = False
        elif isinstance(v, int | float) and not isinstance(v, bool):
            numbers[NumberGuide(literal=_json_text(v))] = None
        elif isinstance(v, dict | list):
            plain = False
    if "string" in kinds or _STRING_KEYS & set(s):
        try:
            regexes = tuple(_string_regexes(s))
        except _Unbounded:
            regexes = ()
        hi = s.get("maxLength")
        strings[
            StringGuide(regexes, int(s.get("minLength", 0)), None if hi is None else int(hi))
        ] = None
        plain &= not regexes
    if kinds & {"number", "integer"} or _NUMBER_KEYS & set(s):
        numbers[_number_guide(s, integer=kinds == {"integer"})] = None
    return plain


def _number_guide(s: Mapping[str, Any], *, integer: bool) -> NumberGuide:
    def num(key: str) -> Fraction | None:
        v = s.get(key)
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        return Fraction(repr(v)) if isinstance(v, float) else Fraction(v)

    lo, hi = num("minimum"), num("maximum")
    xlo, xhi = num("exclusiveMinimum"), num("exclusiveMaximum")
    lo_open = xlo is not None and (lo is None or xlo >= lo)
    hi_open = xhi is not None and (hi is None or xhi <= hi)
    return NumberGuide(
        integer=integer,
        lo=xlo if lo_open else lo,
        hi=xhi if hi_open else hi,
        lo_open=lo_open,
        hi_open=hi_open,
        multiple=num("multipleOf"),
    )


# ---------------------------------------------------------------------- numbers


_NUMBER_PREFIX = re.compile(r"(-?)(0|[1-9][0-9]*)?(?:(\.)([0-9]*))?(?:([eE])([+-]?)([0-9]*))?")
_MOST_DIGITS = 40


def number_completion(text: str, guide: NumberGuide) -> str | None:
    """The shortest text that makes ``text`` a JSON number in ``guide``'s range, or None.

    ``text`` is a prefix of a JSON number. Digits are appended to its integer part, or a
    point and fraction digits (not for an integer), or to its fraction or exponent; of the
    completions of least length, the least text. Exact in rationals: the range's bounds are
    the decimal texts of the schema's numbers, as llguidance reads them.
    """
    m = _NUMBER_PREFIX.fullmatch(text)
    if m is None:
        return None
    sign, whole, dot, frac, e, esign, exp = m.groups(default="")
    if e:
        return _exponent_completion(text, esign, exp, guide)
    if dot and guide.integer:
        return None
    for extra in range(_MOST_DIGITS):
        found = [s for s in _completions(sign, whole, dot, frac, extra, guide) if s is not None]
        if not text and extra >= 2:  # a minus sign, then the rest
            found += [
                "-" + s for s in _completions("-", "", "", "", extra - 1, guide) if s is not None
            ]
        if found:
            return min(found)
    return None


def _completions(
    sign: str, whole: str, dot: str, frac: str, extra: int, guide: NumberGuide
) -> Iterator[str | None]:
    """Completions of exactly ``extra`` characters (see `number_completion`)."""
    negative = sign == "-"
    if dot:
        if extra == 0 and not frac:
            return
        yield _digits(whole + frac, extra, len(frac) + extra, negative, guide, lead=False)
        return
    # more integer digits
    if whole == "0":
        if extra == 0:
            yield _digits("0", 0, 0, negative, guide, lead=False)
    elif whole or extra:
        yield _digits(whole, extra, 0, negative, guide, lead=not whole)
    if guide.integer:
        return
    for k1 in range(extra - 1):  # k1 integer digits, a point, k2 >= 1 fraction digits
        k2 = extra - 1 - k1
        if whole == "0" and k1:
            continue
        if not whole and not k1:
            continue
        head = _digits_split(whole, k1, k2, negative, guide)
        if head is not None:
            yield head


def _digits(
    base: str, k: int, scale: int, negative: bool, guide: NumberGuide, *, lead: bool
) -> str | None:
    """The least ``k`` digits after ``base`` that put the number in range.

    ``scale`` of the digits are decimals; ``lead``: the first digit starts the integer part.
    """
    b = int(base) if base else 0
    lo, hi = b * 10**k, b * 10**k + 10**k - 1
    if lead and k > 1:
        lo = max(lo, 10 ** (k - 1))
    found = _least(lo, hi, scale, negative, guide)
    if found is None:
        return None
    return str(found - b * 10**k).zfill(k) if k else ""


def _digits_split(whole: str, k1: int, k2: int, negative: bool, guide: NumberGuide) -> str | None:
    b = int(whole) if whole else 0
    k = k1 + k2
    lo, hi = b * 10**k, b * 10**k + 10**k - 1
    if not whole and k1 > 1:
        lo = max(lo, 10 ** (k - 1))
    found = _least(lo, hi, k2, negative, guide)
    if found is None:
        return None
    digits = str(found - b * 10**k).zfill(k)
    return digits[:k1] + "." + digits[k1:]


def _least(lo: int, hi: int, scale: int, negative: bool, guide: NumberGuide) -> int | None:
    """The least magnitude ``M`` in ``lo..hi`` with ``±M / 10**scale`` in the guide's range."""
    unit = Fraction(1, 10**scale)
    below, above = guide.lo, guide.hi
    lo_open, hi_open = guide.lo_open, guide.hi_open
    if negative:  # -M in [below, above]  <=>  M in [-above, -below]
        below, above = (
            (None if guide.hi is None else -guide.hi),
            (None if guide.lo is None else -guide.lo),
        )
        lo_open, hi_open = guide.hi_open, guide.lo_open
    if below is not None:
        q = below / unit
        first = math.floor(q) + 1 if lo_open and q.denominator == 1 else math.ceil(q)
        lo = max(lo, first)
    if above is not None:
        q = above / unit
        last = math.ceil(q) - 1 if hi_open and q.denominator == 1 else math.floor(q)
        hi = min(hi, last)
    step = 1
    if guide.multiple is not None and guide.multiple > 0:
        step_q = guide.multiple / unit
        step = step_q.numerator
    lo = max(lo, 0)
    first = -(-lo // step) * step
    return first if first <= hi else None


def _exponent_completion(text: str, esign: str, exp: str, guide: NumberGuide) -> str | None:
    """Complete an exponent with up to three digits (and a sign): the least in range."""
    free = guide.lo is None and guide.hi is None and guide.multiple is None
    if free and not guide.integer:
        return "" if exp else "0"
    if len(exp) > 3:
        return None  # no range of a schema holds such a power (nor does llguidance's)
    tails = [""] if exp else []
    for n in range(1, 4 - len(exp)):
        for v in range(10**n):
            tails.append(str(v).zfill(n))
            if not esign and not exp:
                tails.append("-" + str(v).zfill(n))
    for tail in sorted(tails, key=lambda t: (len(t), t)):
        mantissa, _, power = (text + tail).lower().partition("e")
        try:
            value = Fraction(mantissa) * Fraction(10) ** int(power)
        except (ValueError, ZeroDivisionError):
            continue
        if _in_range(value, guide):
            return tail
    return None


def _in_range(value: Fraction, guide: NumberGuide) -> bool:
    if guide.integer and value.denominator != 1:
        return False
    if guide.lo is not None and (value < guide.lo or (guide.lo_open and value == guide.lo)):
        return False
    if guide.hi is not None and (value > guide.hi or (guide.hi_open and value == guide.hi)):
        return False
    return not (guide.multiple and (value / guide.multiple).denominator != 1)
