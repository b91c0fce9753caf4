"""The guides of a grammar value's closing walk: the completions its schemas' texts allow.

The closing walk (`factorspec_sdk.tokens.grammar.GrammarSegment.closing`) asks, inside a
string, every string guide (a pattern, a format, a length, a property name, an enumerated
string) for the shortest completion of what is written, and inside a number every number guide
(a range, an enumerated number); llguidance then checks each candidate, shortest first, and the
walk writes the first it accepts. So the guides only steer the walk: a guide that does not
describe the string at hand proposes a completion llguidance refuses, never one the masks would
not allow. `closing_guides` collects them from every schema object of a segment's schemas
(``$defs`` and sub-schemas alike, an ``allOf``'s parts merged as one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from factorspec_sdk.writer.closing_numbers import NumberGuide, number_guide
from factorspec_sdk.writer.closing_schema import (
    Unbounded,
    json_text,
    merge_schemas,
    resolve_ref,
)
from factorspec_sdk.writer.closing_strings import StringGuide, string_regexes

__all__ = ["ClosingGuides", "closing_guides"]

_STRING_KEYS = frozenset({"pattern", "format", "minLength", "maxLength"})
_NUMBER_KEYS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)


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


_DATA_KEYS = frozenset({"enum", "const", "default", "examples"})
"""Keywords whose values are JSON data, not schemas."""
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
"""Keywords whose values map names to schemas (the map itself is not a schema)."""


def _nodes(s: object) -> Iterator[dict[str, Any]]:
    """Every schema object in a schema document (``$defs`` and sub-schemas alike).

    A map of names to schemas (``properties``, ``$defs``, ...) is walked through, never
    taken for a schema: a property named ``type`` or ``pattern`` is not a keyword.
    """
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, list):
            stack.extend(reversed(x))
        elif isinstance(x, dict):
            yield x
            for k, v in x.items():
                if k in _DATA_KEYS:
                    continue
                if k in _SCHEMA_MAPS and isinstance(v, dict):
                    stack.extend(reversed(v.values()))
                else:
                    stack.append(v)


def _merged(root: object, node: dict[str, Any]) -> dict[str, Any] | None:
    """An ``allOf`` node's parts merged into it (`merge_schemas`), or None (none, or no merge)."""
    parts = node.get("allOf")
    if not isinstance(parts, list):
        return None
    out = {k: v for k, v in node.items() if k != "allOf"}
    try:
        for part in parts:
            if isinstance(part, dict) and isinstance(part.get("$ref"), str):
                rest = {k: v for k, v in part.items() if k != "$ref"}
                part = merge_schemas(rest, resolve_ref(root, part["$ref"]))
            out = merge_schemas(out, part)
    except Unbounded:
        return None
    return out


def _collect(
    s: dict[str, Any], strings: dict[StringGuide, None], numbers: dict[NumberGuide, None]
) -> bool:
    """Add the guides of one schema object; whether it keeps the segment's strings plain."""
    plain = True
    named = s.get("type")
    kinds = {named} if isinstance(named, str) else set()
    if isinstance(named, list):
        kinds = {k for k in named if isinstance(k, str)}
    for key in (s.get("properties") or {}) if isinstance(s.get("properties"), dict) else {}:
        strings[StringGuide(literal=key)] = None
        plain = False
    for key in s.get("required") or () if isinstance(s.get("required"), list) else ():
        if isinstance(key, str):  # a required key the properties may not name
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
            numbers[NumberGuide(literal=json_text(v))] = None
        elif isinstance(v, dict | list):
            plain = False
    if "string" in kinds or _STRING_KEYS & set(s):
        try:
            regexes = tuple(string_regexes(s))
        except Unbounded:
            regexes = ()
        hi = s.get("maxLength")
        strings[
            StringGuide(regexes, int(s.get("minLength", 0)), None if hi is None else int(hi))
        ] = None
        plain &= not regexes
    if kinds & {"number", "integer"} or _NUMBER_KEYS & set(s):
        numbers[number_guide(s, integer=kinds == {"integer"})] = None
    return plain
