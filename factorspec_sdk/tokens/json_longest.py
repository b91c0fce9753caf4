"""The longest JSON text a schema allows, where it is bounded: a span's ``max_tokens``.

A grammar segment sent to an engine as one request (`factorspec_sdk.drafter.segments`) may
run on to the record's whole token budget where the model does not stop (a string it repeats
itself in); FactorSpec takes only what its masks allow, so every token past the segment's end
is a wasted decode step. Where the segment's values are bounded, its text is too, and a token
holds at least one byte: the bytes still to write bound the tokens the request can need.

`longest_bytes` reads a value's schema for such a bound, as the writer's grammar writes it
(separators ``", "`` and ``": "``, no free whitespace): a ``const`` or an ``enum``, a
boolean, ``null``, an integer with both bounds, a string with ``maxLength`` (a character at
most 12 bytes: a surrogate pair of escapes) or a fixed-length format, an array with
``maxItems`` (or closed ``prefixItems``), an object that allows no other keys, and their
unions, intersections and local ``$ref`` s. Everything else (a number, a string with only a pattern,
an open object, a recursive reference) has none. The bound only caps a request: a reply cut
by it goes on as the next request of the rest, never into the record unchecked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["longest_bytes"]

_STRING_CHAR_BYTES = 12
"""The most bytes one character (code point) of a JSON string takes: a surrogate pair of
escapes."""

_FORMAT_CHARS = {"date": 10, "uuid": 36, "ipv4": 15}
"""String formats whose texts have at most this many characters (all ASCII, no escapes)."""

_SEPARATOR = 2
"""Bytes of ``", "`` and of ``": "``."""


def longest_bytes(schema: Any, root: Any | None = None) -> int | None:
    """The most bytes of a JSON text ``schema`` allows, or None when it has no such bound.

    Args:
        schema: a JSON Schema (a dict, or a boolean).
        root: the document its local ``$ref`` s point into (``schema`` itself by default).
    """
    return _Longest(schema if root is None else root).of(schema, ())


class _Longest:
    def __init__(self, root: Any) -> None:
        self.root = root

    def of(self, schema: Any, refs: tuple[str, ...]) -> int | None:
        if not isinstance(schema, dict):
            return None
        bounds: list[int | None] = []
        if "$ref" in schema:
            bounds.append(self._ref(schema["$ref"], refs))
        if "const" in schema:
            bounds.append(_text_bytes(schema["const"]))
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            bounds.append(max(_text_bytes(v) for v in schema["enum"]))
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                bounds.append(_most([self.of(s, refs) for s in schema[key]]))
        if isinstance(schema.get("allOf"), list):
            bounds.extend(self.of(s, refs) for s in schema["allOf"])
        types = schema.get("type")
        if isinstance(types, str):
            bounds.append(self._typed(types, schema, refs))
        elif isinstance(types, list) and types:
            bounds.append(_most([self._typed(t, schema, refs) for t in types]))
        known = [b for b in bounds if b is not None]
        return min(known) if known else None  # the value satisfies each part

    def _ref(self, ref: Any, refs: tuple[str, ...]) -> int | None:
        if not isinstance(ref, str) or not ref.startswith("#") or ref in refs:
            return None  # another document, or a recursion: no bound here
        target: Any = self.root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                return None
            target = target[part]
        return self.of(target, (*refs, ref))

    def _typed(self, name: Any, schema: dict[str, Any], refs: tuple[str, ...]) -> int | None:
        read = _TYPES.get(name) if isinstance(name, str) else None
        return None if read is None else read(self, schema, refs)

    def _string(self, schema: dict[str, Any], refs: tuple[str, ...]) -> int | None:
        chars = schema.get("maxLength")
        if not isinstance(chars, int):
            chars = _FORMAT_CHARS.get(schema.get("format", ""))
            if chars is None:
                return None
            return 2 + chars
        return 2 + _STRING_CHAR_BYTES * chars

    def _integer(self, schema: dict[str, Any], refs: tuple[str, ...]) -> int | None:
        ends: list[int] = []
        for key, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
            end = schema.get(key, schema.get(exclusive))
            if not isinstance(end, int | float) or isinstance(end, bool):
                return None
            ends.append(int(end))
        return max(len(str(end)) for end in ends)  # the sign, and the digits

    def _array(self, schema: dict[str, Any], refs: tuple[str, ...]) -> int | None:
        prefix = schema.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        items = schema.get("items", True)
        most = schema.get("maxItems")
        if items is False:
            most = len(prefix) if not isinstance(most, int) else min(most, len(prefix))
        if not isinstance(most, int):
            return None
        sizes = [self.of(s, refs) for s in prefix[:most]]
        if most > len(prefix):
            sizes += [self.of(items, refs)] * (most - len(prefix))
        total = _most_sum(sizes)
        return None if total is None else 2 + total + _SEPARATOR * max(0, most - 1)

    def _object(self, schema: dict[str, Any], refs: tuple[str, ...]) -> int | None:
        if schema.get("additionalProperties", True) is not False or schema.get("patternProperties"):
            return None
        properties = schema.get("properties", {})
        if not isinstance(properties, dict):
            return None
        sizes = [
            None if (b := self.of(s, refs)) is None else _text_bytes(k) + _SEPARATOR + b
            for k, s in properties.items()
        ]
        total = _most_sum(sizes)
        return None if total is None else 2 + total + _SEPARATOR * max(0, len(sizes) - 1)


_TYPES: dict[str, Callable[[_Longest, dict[str, Any], tuple[str, ...]], int | None]] = {
    "string": _Longest._string,
    "integer": _Longest._integer,
    "array": _Longest._array,
    "object": _Longest._object,
    "boolean": lambda *_: len("false"),
    "null": lambda *_: len("null"),
}
"""How each JSON type is bounded (a number has no bound: its digits are not)."""


def _text_bytes(value: Any) -> int:
    """Bytes of ``value`` as the writer's grammar writes it."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return len(text.encode("utf-8"))


def _most(bounds: list[int | None]) -> int | None:
    """The largest bound, None if one is None (a union is as long as its longest branch)."""
    return None if any(b is None for b in bounds) else max(b for b in bounds if b is not None)


def _most_sum(bounds: list[int | None]) -> int | None:
    """The sum, None if one is None."""
    return None if any(b is None for b in bounds) else sum(b for b in bounds if b is not None)
