"""From a JSON Schema (as OpenAI's ``response_format`` carries it) to a relation-free IR.

Supported: objects, arrays with bounds, integer bounds, booleans, strings with length bounds,
``enum``/``const``, nullable types and local ``$ref``. Anything the writer cannot guarantee
(``number``, ``pattern``, ``format``, unions of several types, recursive schemas...) is an
`IRError` naming the place in the schema.
"""

from __future__ import annotations

import math

from factorspec_sdk.ir.build import DEFAULT_LIMITS, IRError, IRLimits, json_depth
from factorspec_sdk.ir.model import IR_VERSION
from factorspec_sdk.relations.layout import DEFAULT_MAX_LIST_LENGTH

__all__ = ["ir_from_json_schema"]

JsonDict = dict[str, object]

_IGNORED = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$schema",
        "$id",
        "$comment",
        "$defs",
        "definitions",
        "required",
        "additionalProperties",
        "strict",
        "readOnly",
        "writeOnly",
        "deprecated",
        "propertyOrdering",
    }
)
_UNSUPPORTED = {
    "pattern": "string patterns are not supported",
    "format": "string formats are not supported (the writer cannot guarantee them)",
    "multipleOf": "multipleOf is not supported",
    "prefixItems": "tuple arrays (prefixItems) are not supported",
    "patternProperties": "patternProperties is not supported",
    "not": "'not' is not supported",
    "if": "conditional schemas are not supported",
    "uniqueItems": "uniqueItems is not supported (use a relation with distinct())",
    "contains": "'contains' is not supported",
    "dependentRequired": "dependentRequired is not supported",
}


def ir_from_json_schema(
    schema: object, *, name: str = "Record", limits: IRLimits = DEFAULT_LIMITS
) -> JsonDict:
    """A relation IR with the layout of ``schema`` and no relations.

    Properties are written in the order the schema lists them, all of them (a record with
    every property passes the schema whatever ``required`` says). Arrays without
    ``maxItems`` get the default bound of 16 items.

    Raises:
        IRError: the schema uses something the writer cannot guarantee, or is malformed.
    """
    if not isinstance(schema, dict):
        raise IRError("the JSON schema must be an object")
    if json_depth(schema, limits.max_json_depth) > limits.max_json_depth:
        raise IRError(f"the JSON schema nests deeper than {limits.max_json_depth} levels")
    conv = _Converter(schema, limits)
    layout = conv.node(schema, "#", (), 0)
    if layout.get("type") != "object" or layout.get("nullable"):
        raise IRError("the JSON schema's root must be an object (type: object)")
    layout["name"] = name
    return {"factorspec_ir": IR_VERSION, "name": name, "layout": layout}


class _Converter:
    def __init__(self, root: JsonDict, limits: IRLimits) -> None:
        self.root = root
        self.limits = limits
        self.count = 0

    def _resolve(self, ref: object, where: str) -> JsonDict:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise IRError(f"{where}: only local $ref ('#/$defs/Name') is supported, got {ref!r}")
        node: object = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise IRError(f"{where}: $ref {ref!r} does not resolve")
            node = node[part]
        if not isinstance(node, dict):
            raise IRError(f"{where}: $ref {ref!r} is not a schema")
        return node

    def node(self, s: object, where: str, refs: tuple[str, ...], depth: int) -> JsonDict:
        self.count += 1
        if self.count > self.limits.max_layout_nodes:
            raise IRError(f"the JSON schema has more than {self.limits.max_layout_nodes} nodes")
        if depth > self.limits.max_layout_depth:
            raise IRError(f"{where}: the schema nests deeper than {self.limits.max_layout_depth}")
        if not isinstance(s, dict):
            raise IRError(f"{where}: a schema must be an object")
        if "$ref" in s:
            ref = s["$ref"]
            if ref in refs:
                raise IRError(f"{where}: recursive schemas ($ref {ref!r}) have no finite layout")
            target = self._resolve(ref, where)
            merged = {k: v for k, v in s.items() if k != "$ref"}
            out = self.node(target, f"{where}/$ref", (*refs, str(ref)), depth + 1)
            if merged.get("nullable") is True:
                out["nullable"] = True
            return out
        for key, why in _UNSUPPORTED.items():
            if key in s:
                raise IRError(f"{where}: {why}")
        for key in ("anyOf", "oneOf", "allOf"):
            if key in s:
                return self._union(s, key, where, refs, depth)
        nullable = s.get("nullable") is True
        t = s.get("type")
        if isinstance(t, list):
            types = [x for x in t if x != "null"]
            nullable = nullable or len(types) < len(t)
            if len(types) != 1:
                raise IRError(f"{where}: a union of types {t!r} is not supported")
            t = types[0]
        if "enum" in s or "const" in s:
            return self._enum(s, where, nullable)
        if t is None:
            if "properties" in s:
                t = "object"
            elif "items" in s:
                t = "array"
            else:
                raise IRError(f"{where}: the schema needs a type")
        if t == "object":
            return self._object(s, where, refs, depth, nullable)
        if t == "array":
            return self._array(s, where, refs, depth, nullable)
        if t == "integer":
            return self._integer(s, where, nullable)
        if t == "boolean":
            return {"type": "leaf", "kind": "bool", "nullable": nullable}
        if t == "string":
            lo = _count(s.get("minLength", 0), where, "minLength")
            hi = s.get("maxLength")
            leaf: JsonDict = {"type": "leaf", "kind": "str", "nullable": nullable, "min_length": lo}
            if hi is not None:
                leaf["max_length"] = _count(hi, where, "maxLength")
            return leaf
        if t == "number":
            raise IRError(f"{where}: number (float) fields are not supported; use integer")
        raise IRError(f"{where}: type {t!r} is not supported")

    def _union(
        self, s: JsonDict, key: str, where: str, refs: tuple[str, ...], depth: int
    ) -> JsonDict:
        alts = s[key]
        if not isinstance(alts, list) or not alts:
            raise IRError(f"{where}: {key} needs a non-empty list of schemas")
        if key == "allOf":
            if len(alts) != 1:
                raise IRError(f"{where}: allOf with several schemas is not supported")
            return self.node(alts[0], f"{where}/allOf/0", refs, depth + 1)
        rest = [a for a in alts if not (isinstance(a, dict) and a.get("type") == "null")]
        if len(rest) != 1:
            raise IRError(f"{where}: {key} of several schemas is not supported (only X | null)")
        out = self.node(rest[0], f"{where}/{key}", refs, depth + 1)
        if len(rest) < len(alts):
            out["nullable"] = True
        return out

    def _enum(self, s: JsonDict, where: str, nullable: bool) -> JsonDict:
        values = s["enum"] if "enum" in s else [s["const"]]
        if not isinstance(values, list) or not values:
            raise IRError(f"{where}: enum needs a non-empty list")
        choices: list[object] = []
        for v in values:
            if v is None:
                nullable = True
            elif isinstance(v, (str, int, bool)):
                if (type(v), v) not in {(type(c), c) for c in choices}:
                    choices.append(v)
            else:
                raise IRError(f"{where}: enum values must be strings, integers or booleans")
        if not choices:
            raise IRError(f"{where}: an enum of only null is not supported")
        return {"type": "leaf", "kind": "enum", "nullable": nullable, "choices": choices}

    def _object(
        self, s: JsonDict, where: str, refs: tuple[str, ...], depth: int, nullable: bool
    ) -> JsonDict:
        props = s.get("properties", {})
        if not isinstance(props, dict):
            raise IRError(f"{where}: properties must be an object")
        fields = []
        for key, sub in props.items():
            node = self.node(sub, f"{where}/properties/{key}", refs, depth + 1)
            fields.append({"name": key, "key": key, "node": node})
        title = s.get("title")
        return {
            "type": "object",
            "name": title if isinstance(title, str) and title.isidentifier() else "Object",
            "fields": fields,
            "nullable": nullable,
        }

    def _array(
        self, s: JsonDict, where: str, refs: tuple[str, ...], depth: int, nullable: bool
    ) -> JsonDict:
        if "items" not in s or not isinstance(s["items"], dict):
            raise IRError(f"{where}: an array needs an items schema")
        item = self.node(s["items"], f"{where}/items", refs, depth + 1)
        lo = _count(s.get("minItems", 0), where, "minItems")
        hi_raw = s.get("maxItems")
        bounded = hi_raw is not None
        hi = _count(hi_raw, where, "maxItems") if bounded else max(DEFAULT_MAX_LIST_LENGTH, lo)
        if hi < lo:
            raise IRError(f"{where}: maxItems {hi} is below minItems {lo}")
        return {
            "type": "list",
            "item": item,
            "min_length": lo,
            "max_length": hi,
            "bounded_by_schema": bounded,
            "nullable": nullable,
        }

    def _integer(self, s: JsonDict, where: str, nullable: bool) -> JsonDict:
        ge: int | None = None
        le: int | None = None
        for key, is_lower, strict in (
            ("minimum", True, False),
            ("exclusiveMinimum", True, True),
            ("maximum", False, False),
            ("exclusiveMaximum", False, True),
        ):
            if key not in s:
                continue
            v = s[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise IRError(f"{where}: {key} must be a number")
            if is_lower:
                b = math.floor(v) + 1 if strict else math.ceil(v)
                ge = b if ge is None else max(ge, b)
            else:
                b = math.ceil(v) - 1 if strict else math.floor(v)
                le = b if le is None else min(le, b)
        out: JsonDict = {"type": "leaf", "kind": "int", "nullable": nullable}
        if ge is not None:
            out["ge"] = ge
        if le is not None:
            out["le"] = le
        return out


def _count(v: object, where: str, key: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise IRError(f"{where}: {key} must be a non-negative integer")
    return v
