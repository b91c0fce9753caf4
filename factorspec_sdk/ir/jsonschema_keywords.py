"""The JSON Schema keywords `factorspec_sdk.ir.jsonschema` reads, by type, and their shapes.

Which keywords apply to which JSON type (a keyword of one type constrains only values of that
type), which keywords the writer never lays out itself (a grammar value holds them), which
are refused, and the checks of a keyword value's shape (a list, an object, a count), each
raising an `IRError` that names the place.
"""

from __future__ import annotations

from typing import TypeVar

import jsonschema

from factorspec_sdk.ir.limits import IRError

__all__ = [
    "ARRAY_KEYWORDS",
    "BY_TYPE",
    "COMBINATORS",
    "LEGACY",
    "NOT_NATIVE",
    "NUMBER_KEYWORDS",
    "OBJECT_KEYWORDS",
    "REFUSED",
    "STRING_KEYWORDS",
    "JsonDict",
    "all_str",
    "as_dict",
    "keyword_count",
    "shaped",
]

JsonDict = dict[str, object]
_T = TypeVar("_T")

LEGACY = (
    jsonschema.Draft4Validator,
    jsonschema.Draft6Validator,
    jsonschema.Draft7Validator,
)
"""Dialects whose ``$ref`` makes its sibling keywords ignored."""

OBJECT_KEYWORDS = frozenset(
    {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
    }
)
"""The keywords that constrain objects only."""
ARRAY_KEYWORDS = frozenset(
    {
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "unevaluatedItems",
    }
)
"""The keywords that constrain arrays only."""
STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern", "format"})
"""The keywords that constrain strings only."""
NUMBER_KEYWORDS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
"""The keywords that constrain numbers only."""
BY_TYPE = {
    "object": OBJECT_KEYWORDS,
    "array": ARRAY_KEYWORDS,
    "string": STRING_KEYWORDS,
    "integer": NUMBER_KEYWORDS,
    "number": NUMBER_KEYWORDS,
    "boolean": frozenset(),
}
"""The keywords that apply to each JSON type the writer may lay out."""
COMBINATORS = ("allOf", "anyOf", "oneOf")
"""The combinators, in the order the converter looks for them."""
NOT_NATIVE = {
    "pattern": "a string pattern",
    "format": "a string format",
    "multipleOf": "multipleOf",
    "prefixItems": "a tuple array (prefixItems)",
    "contains": "'contains'",
    "not": "'not'",
    "if": "a conditional schema (if/then/else)",
}
"""Keywords the writer never lays out itself (a grammar value holds them), and what they are."""
REFUSED = {
    "$dynamicRef": "$dynamicRef is not supported",
    "$recursiveRef": "$recursiveRef is not supported",
}
"""Keywords refused wherever they stand, with the reason."""


def shaped(v: object, kind: type[_T], where: str, key: str) -> _T:
    """``v``, the value of keyword ``key`` at ``where``, checked to be a ``kind``.

    Raises:
        IRError: ``v`` is not a ``kind``.
    """
    if not isinstance(v, kind):
        what = "a list" if kind is list else "an object" if kind is dict else kind.__name__
        raise IRError(f"{where}: {key} must be {what}")
    return v


def all_str(v: object) -> bool:
    """Whether ``v`` is a list of strings."""
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def keyword_count(v: object, where: str, key: str) -> int:
    """``v``, the value of keyword ``key`` at ``where``, checked to be a count.

    Raises:
        IRError: ``v`` is not a non-negative integer.
    """
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise IRError(f"{where}: {key} must be a non-negative integer")
    return v


def as_dict(v: object) -> JsonDict:
    """``v``, a layout node the converter built, as a dict."""
    assert isinstance(v, dict)  # a layout node the converter built
    return v
