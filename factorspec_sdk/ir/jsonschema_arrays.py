"""The JSON Schema converter's arrays: items, item counts and ``uniqueItems``.

`ArrayConverter` lays out an array node of `factorspec_sdk.ir.jsonschema` as a list: its
``items`` schema (``unevaluatedItems`` when ``items`` is absent), ``minItems`` /
``maxItems`` (the default bound where ``maxItems`` is absent), and ``uniqueItems`` as one
factor per list whose items differ as `jsonschema` compares them (`factorspec_sdk.ir.unique`),
the bound lowered where an item has few values. Tuples, ``contains`` and arrays of grammar
values are grammar values.
"""

from __future__ import annotations

from factorspec_sdk.ir.jsonschema_base import ConverterBase, NothingWritable, NotNative
from factorspec_sdk.ir.jsonschema_keywords import NOT_NATIVE, JsonDict, as_dict, keyword_count
from factorspec_sdk.ir.limits import IRError
from factorspec_sdk.ir.unique import distinct_values, incomparable
from factorspec_sdk.relations.layout import DEFAULT_MAX_LIST_LENGTH

__all__ = ["MAX_UNIQUE_VALUES", "ArrayConverter"]

MAX_UNIQUE_VALUES = 64
"""Most values an item of a ``uniqueItems`` list may have for the list's bound to follow from
them (at most as many items as values, and `IRLimits.max_unique_work`): the writer's solver
enumerates an item's feasible values, 64 at most at once."""


class ArrayConverter(ConverterBase):
    """The array nodes of a conversion (see the module)."""

    def array_node(
        self,
        s: JsonDict,
        kws: set[str],
        where: str,
        refs: tuple[str, ...],
        depth: int,
        nullable: bool,
    ) -> JsonDict:
        """The layout of array node ``s`` (its applicable keywords ``kws``) as a list.

        Raises:
            NothingWritable: the item counts cannot hold, or ``minItems`` asks for items
                none of which can be written.
            NotNative: the array is a grammar value (a tuple, ``contains``, items that are
                grammar values, room for more items than the writer lays out).
            IRError: ``uniqueItems`` over items the writer cannot compare, or a malformed
                keyword.
        """
        for key in ("prefixItems", "contains"):
            if key in kws:
                raise NotNative(f"{where}: {NOT_NATIVE[key]}")
        if "items" in kws:
            items, items_at = s["items"], f"{where}/items"
            if isinstance(items, list):
                raise NotNative(f"{where}: a tuple array (items as a list)")
        elif "unevaluatedItems" in kws:
            items, items_at = s["unevaluatedItems"], f"{where}/unevaluatedItems"
        else:
            items, items_at = True, f"{where}/items"  # absent: true
        lo = keyword_count(s.get("minItems", 0), where, "minItems") if "minItems" in kws else 0
        bounded = "maxItems" in kws
        hi = (
            keyword_count(s["maxItems"], where, "maxItems")
            if bounded
            else max(DEFAULT_MAX_LIST_LENGTH, lo)
        )
        if hi < lo:
            raise NothingWritable(f"{where}: maxItems {hi} is below minItems {lo}")
        # uniqueItems: the factor that keeps the items apart reads everything in them
        read = "uniqueItems" in kws and s["uniqueItems"] is True and hi > 1
        self.reading += read
        try:
            item = self.node(items, items_at, refs, depth + 1)
        except NothingWritable as exc:
            if lo:
                raise NothingWritable(
                    f"{where}: minItems {lo}, but no item can be written: {exc.message}"
                ) from None
            item, hi, bounded = _never_written(), 0, True  # only the empty array
        finally:
            self.reading -= read
        unique = read and hi > 1
        if item["type"] == "grammar":  # one grammar value, not unrolled to its bound
            if unique:  # llguidance does not implement uniqueItems
                self._incomparable(where, "a grammar value (llguidance writes it)")
            raise NotNative(f"{items_at}: an array of grammar values")
        out: JsonDict = {
            "type": "list",
            "item": item,
            "min_length": lo,
            "max_length": hi,
            "bounded_by_schema": bounded,
            "nullable": nullable,
        }
        if unique:
            self._unique(out, where)  # may lower the bound
        if _int(out["max_length"]) > self.limits.max_list_length:
            raise NotNative(
                f"{where}: room for {out['max_length']} items (the writer lays out at most "
                f"{self.limits.max_list_length})"
            )
        return self.writable_null(s, where, out)

    def _unique(self, out: JsonDict, where: str) -> None:
        """``uniqueItems`` on list ``out``, which has room for two items.

        Its items differ by a factor (`relations`), as `jsonschema` compares them
        (`factorspec_sdk.ir.unique`). Items with few values (`distinct_values`: at most
        `MAX_UNIQUE_VALUES`, ``null`` included) are at most as many as their values, and as
        `IRLimits.max_unique_work` allows (``minItems`` at least).

        Raises:
            IRError: the items hold something the writer cannot compare (a grammar value, an
                enum mixing value types).
            NothingWritable: ``minItems`` asks for more items than there are values.
        """
        item = as_dict(out["item"])
        problem = incomparable(item)
        if problem is not None:
            self._incomparable(where, problem)
        lo = _int(out["min_length"])
        values = distinct_values(item, MAX_UNIQUE_VALUES)
        if values is not None:
            if lo > values:
                raise NothingWritable(
                    f"{where}: uniqueItems, but minItems {lo} asks for more distinct items "
                    f"than the {values} values an item can have"
                )
            most = min(values, max(lo, self.limits.max_unique_work // values))
            if _int(out["max_length"]) > most:
                out["max_length"], out["bounded_by_schema"] = most, True
        if _int(out["max_length"]) > 1:
            self.unique[id(out)] = (out, where)

    @staticmethod
    def _incomparable(where: str, problem: str) -> None:
        """Refuse ``uniqueItems`` with room for two items over items holding ``problem``.

        Raises:
            IRError: always, naming the place and what to write instead.
        """
        raise IRError(
            f"{where}: uniqueItems over items holding {problem}: the writer cannot tell two "
            "such items apart and llguidance does not implement uniqueItems; write "
            "maxItems: 1 for at most one item, or give the items a schema the writer lays "
            "out (integers, booleans, strings without pattern or format, enums of one type, "
            "objects and arrays of those)"
        )


def _never_written() -> JsonDict:
    """The item of an array whose only value is ``[]``: a placeholder the writer never writes."""
    return {"type": "leaf", "kind": "str", "nullable": False, "min_length": 0}


def _int(v: object) -> int:
    assert isinstance(v, int)  # a layout bound this module built
    return v
