"""The JSON Schema converter's leaves: enums and constants, integers and strings.

`LeafConverter` lays out the leaf nodes of `factorspec_sdk.ir.jsonschema`: an ``enum`` /
``const`` as the values that pass the whole node and that the writer can write, an integer
within its bounds (``multipleOf: 1`` only), a string with its length bounds (no ``pattern``,
no asserted ``format``: those are grammar values).
"""

from __future__ import annotations

import math

from factorspec_sdk.ir.jsonschema_base import ConverterBase, NothingWritable, NotNative
from factorspec_sdk.ir.jsonschema_keywords import NOT_NATIVE, JsonDict, keyword_count, shaped
from factorspec_sdk.ir.limits import IRError
from factorspec_sdk.ir.standalone_strings import asserted_format
from factorspec_sdk.relations.layout import INT_LIMIT

__all__ = ["LeafConverter"]


class LeafConverter(ConverterBase):
    """The leaf nodes of a conversion (see the module)."""

    def enum_node(self, s: JsonDict, where: str) -> JsonDict:
        """The enum leaf of node ``s`` (``enum`` or ``const``): the values the writer can write.

        Raises:
            NothingWritable: no value passes the node and can be written.
            NotNative: the values are objects, arrays or floats only (a grammar value).
        """
        values = shaped(s["enum"], list, where, "enum") if "enum" in s else [s["const"]]
        choices: list[str | int | bool] = []
        seen: set[tuple[type, object]] = set()
        nullable = False
        unwritable: list[object] = []
        rejected = 0
        for v in values:
            w: str | int | bool | None
            if isinstance(v, float) and math.isfinite(v) and v.is_integer():
                w = int(v)
            elif v is None or isinstance(v, (str, int, bool)):
                w = v
            else:
                unwritable.append(v)
                continue
            if not self.valid(s, w, where):
                rejected += 1
                continue
            if w is None:
                nullable = True
            elif (type(w), w) not in seen:
                seen.add((type(w), w))
                choices.append(w)
        if not choices and unwritable:
            raise NotNative(
                f"{where}: enum/const values that are not strings, integers or booleans"
            )
        if not choices:
            why = []
            if rejected:
                why.append(f"{rejected} fail the node's other keywords")
            if unwritable:
                why.append(f"{len(unwritable)} are not strings, integers or booleans")
            if nullable:
                why.append("null is never written alone")
            raise NothingWritable(f"{where}: no enum/const value can be written ({'; '.join(why)})")
        return {"type": "leaf", "kind": "enum", "nullable": nullable, "choices": choices}

    def integer_node(self, s: JsonDict, kws: set[str], where: str, nullable: bool) -> JsonDict:
        """The integer leaf of node ``s`` (its applicable keywords ``kws``) within its bounds.

        Raises:
            NothingWritable: no integer is within the bounds.
            NotNative: a ``multipleOf`` other than 1 (a grammar value).
            IRError: a bound is not a finite number.
        """
        if "multipleOf" in kws and s["multipleOf"] != 1:
            raise NotNative(f"{where}: {NOT_NATIVE['multipleOf']}")
        ge, le = -INT_LIMIT, INT_LIMIT
        for key, is_lower in (
            ("minimum", True),
            ("exclusiveMinimum", True),
            ("maximum", False),
            ("exclusiveMaximum", False),
        ):
            v = s.get(key)
            if key in ("exclusiveMinimum", "exclusiveMaximum"):
                if isinstance(v, bool) or key not in kws:
                    continue  # draft 4's Boolean modifier, read with minimum/maximum
                strict = True
            elif key in kws:
                modifier = s.get("exclusive" + key[0].upper() + key[1:])
                strict = modifier is True
            else:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise IRError(f"{where}: {key} must be a finite number")
            if is_lower:
                ge = max(ge, math.floor(v) + 1 if strict else math.ceil(v))
            else:
                le = min(le, math.ceil(v) - 1 if strict else math.floor(v))
        if ge > le:
            raise NothingWritable(f"{where}: no integer (within +-{INT_LIMIT}) is in bounds")
        out: JsonDict = {"type": "leaf", "kind": "int", "nullable": nullable}
        if ge > -INT_LIMIT:
            out["ge"] = ge
        if le < INT_LIMIT:
            out["le"] = le
        return out

    def string_node(self, s: JsonDict, kws: set[str], where: str, nullable: bool) -> JsonDict:
        """The free-string leaf of node ``s`` (its applicable keywords ``kws``).

        Raises:
            NothingWritable: ``maxLength`` is below ``minLength``.
            NotNative: a ``pattern``, an asserted ``format`` or a length past the limit.
            IRError: a length is not a count.
        """
        if "pattern" in kws:
            raise NotNative(f"{where}: {NOT_NATIVE['pattern']}")
        if "format" in kws and asserted_format(s["format"], type(self.validator)):
            raise NotNative(f"{where}: {NOT_NATIVE['format']}")
        lo = keyword_count(s["minLength"], where, "minLength") if "minLength" in kws else 0
        leaf: JsonDict = {"type": "leaf", "kind": "str", "nullable": nullable, "min_length": lo}
        if "maxLength" in kws:
            hi = keyword_count(s["maxLength"], where, "maxLength")
            if hi < lo:
                raise NothingWritable(f"{where}: maxLength {hi} is below minLength {lo}")
            leaf["max_length"] = hi
        if max(lo, _as_int(leaf.get("max_length", 0))) > self.limits.max_text_length:
            raise NotNative(f"{where}: a string length past {self.limits.max_text_length}")
        return leaf


def _as_int(v: object) -> int:
    assert isinstance(v, int)  # a count read by keyword_count
    return v
