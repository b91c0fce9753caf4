"""How the closing bound and guides read a JSON Schema: as llguidance does, without it.

The closing walk's modules (`factorspec_sdk.writer.closing`, `.closing_guides`,
`.closing_strings`, `.closing_numbers`) share this reading: a ``$ref`` resolved in its document
(`resolve_ref`), two schemas' keywords merged as llguidance intersects them (`merge_schemas`,
for ``allOf`` and a union's siblings), a union's parts that some value satisfies
(`satisfiable`), a value's text as the writer spells it (`json_text`). `Unbounded` and
`Unsatisfiable` are the signals of a schema the bound cannot read or no value satisfies; they
never leave the closing modules.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, TypeVar

from factorspec_sdk.relations.layout import GRAMMAR_OPTIONS

__all__ = [
    "ANNOTATIONS",
    "Unbounded",
    "Unsatisfiable",
    "json_text",
    "listed",
    "merge_schemas",
    "resolve_ref",
    "satisfiable",
]

ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
     "writeOnly", "$schema", "$id", "$anchor", "$defs", "definitions", "x-guidance"}
)  # fmt: skip


class Unbounded(Exception):
    """The closing walk has no bound for a schema (or the reading gives up on it)."""


class Unsatisfiable(Unbounded):
    """No value satisfies the schema: a branch of a union that llguidance drops."""


def resolve_ref(root: object, ref: str) -> dict[str, Any]:
    """The schema a local ``$ref`` (``#`` or ``#/...``) names in ``root``; `Unbounded` else."""
    if ref == "#":
        target: object = root
    elif ref.startswith("#/"):
        target = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise Unbounded
            target = target[part]
    else:
        raise Unbounded
    if target is True:
        return {}
    if not isinstance(target, dict):
        raise Unbounded
    return target


def merge_schemas(a: dict[str, Any], b: object) -> dict[str, Any]:
    """Two schemas' keywords as one (``allOf``, ``anyOf`` siblings), as llguidance intersects.

    Bounds and ``required`` combine; sub-schemas that differ (``items``, a property's,
    ``additionalProperties``) become an ``allOf`` of both, merged where they are read; two
    ``anyOf`` become one of every pair; patterns and formats add up (a string matches them
    all: `string_regexes`); enumerations keep their common values; ``multipleOf`` takes the
    least common multiple. A property one side names and the other does not is also the
    other side's extra property (its ``patternProperties`` or ``additionalProperties``).
    `Unbounded` on what does not combine (two ``const``, ``not``).
    """
    if b is True:
        return dict(a)
    if not isinstance(b, dict):
        raise Unbounded
    out = dict(a)
    for k, v in b.items():
        if k in ANNOTATIONS or k not in out or out[k] == v:
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
                raise Unbounded
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
                raise Unsatisfiable
            out[k] = sorted(both) if len(both) != 1 else both.pop()
        elif k in ("pattern", "format"):
            out[k] = list(dict.fromkeys([*listed(w), *listed(v)]))
        elif k in ("anyOf", "oneOf") and isinstance(w, list) and isinstance(v, list):
            out[k] = [{"allOf": [x, y]} for x in w for y in v]
        elif k == "allOf" and isinstance(w, list) and isinstance(v, list):
            out[k] = [*w, *v]
        elif k == "$ref":
            out["allOf"] = [*out.get("allOf", []), {"$ref": v}]
        elif k == "enum" and isinstance(w, list) and isinstance(v, list):
            theirs_texts = {json_text(y) for y in v}
            out[k] = [x for x in w if json_text(x) in theirs_texts]
            if not out[k]:
                raise Unsatisfiable
        elif k == "multipleOf":
            out[k] = _lcm(w, v)
        elif k == "const":
            raise Unsatisfiable  # two values
        else:
            raise Unbounded
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


def satisfiable(of: Callable[[object], _T], parts: list[object]) -> list[_T]:
    """``of`` each part of a union that some value satisfies (llguidance drops the others)."""
    found: list[_T] = []
    for p in parts:
        try:
            found.append(of(p))
        except Unsatisfiable:
            continue
    if not found:
        raise Unsatisfiable
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


def listed(x: object) -> list[object]:
    """A keyword's value as a list (a pattern or a format merged from several is one)."""
    return x if isinstance(x, list) else [x]


def _extra_schema(s: Mapping[str, Any], name: str) -> object:
    """The schema ``s`` gives a property it does not name (True: any)."""
    for pattern, sub in (s.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, name):
                return sub
        except re.error:
            raise Unbounded from None  # llguidance reads it; Python cannot say which keys match
    return s.get("additionalProperties", True)


def _lcm(a: object, b: object) -> int | float:
    """The least common multiple of two ``multipleOf`` values, as llguidance takes it."""
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int | float):
        raise Unbounded
    if not isinstance(b, int | float):
        raise Unbounded
    x, y = Fraction(repr(a)), Fraction(repr(b))
    if x <= 0 or y <= 0:
        raise Unbounded
    num = math.lcm(x.numerator * y.denominator, y.numerator * x.denominator)
    value = Fraction(num, x.denominator * y.denominator)
    if value.denominator == 1:
        return int(value)
    if Fraction(repr(float(value))) == value:
        return float(value)
    raise Unbounded  # not a decimal a schema could hold


def json_text(value: object) -> str:
    """A JSON value as the writer's separators spell it."""
    return json.dumps(
        value,
        ensure_ascii=False,
        separators=(GRAMMAR_OPTIONS["item_separator"], GRAMMAR_OPTIONS["key_separator"]),
    )
