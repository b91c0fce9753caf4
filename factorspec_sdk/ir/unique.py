"""``uniqueItems`` as factors: the items of a unique list differ as `jsonschema` compares them.

`jsonschema` (``jsonschema._utils.uniq`` and ``equal``) holds two items equal when they are
equal JSON values: strings by their text, numbers by value (``1`` equals ``1.0``), ``true``
and ``false`` only to themselves (never to ``1`` or ``0``), ``null`` to ``null``, arrays
item by item, objects by their keys and the values under them. The writer writes each item
through its layout node, so two items of one list can differ only where their nodes let
them, and `differ` spells that as an IR formula over the variables of the nodes:

* an int, bool or one-type enum leaf: its value variables are ``distinct`` (an enum of
  strings through its codes; an item's JSON type is its node's, so ``true`` never meets
  ``1``);
* a free string: ``not same(a, b)``, the variable the writer sets from the two texts once
  both are written (`factorspec_sdk.writer.texts`: a later item may be any text but the
  earlier items' own); each string's code variable is declared, as the writer keeps the
  texts of strings that others compare with;
* a node with one value (a string of ``maxLength`` 0, an int of one value): never differs;
* a nullable node: ``null(a) != null(b)``, or both present and the values differ;
* an object: some property differs (the layout writes every property of both);
* an array: the lengths differ, or an item present in both differs.

A grammar value (llguidance writes it; no variable holds its value) and an enum that mixes
value types (relations read one type of values) cannot be compared: `incomparable` names
them, and `factorspec_sdk.ir.jsonschema` refuses such a list. `distinct_values` counts the
values of a node with few of them: a list holds no more items than that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from math import prod

from factorspec_sdk.ir.limits import IRError, IRLimits
from factorspec_sdk.relations.kinds import LeafKind
from factorspec_sdk.relations.layout import INT_LIMIT, length_name, path_name, same_name

__all__ = ["differ", "distinct_values", "incomparable", "unique_relations"]

JsonDict = dict[str, object]
Place = tuple[str | int, ...]


def _dict(v: object) -> JsonDict:
    assert isinstance(v, dict)  # a layout node the converter built
    return v


def _list(v: object) -> list[object]:
    assert isinstance(v, list)  # a layout part the converter built
    return v


def _int(v: object) -> int:
    assert isinstance(v, int)  # a layout bound the converter built
    return v


def _fields(node: JsonDict, others: bool = False) -> Iterator[tuple[str, JsonDict]]:
    """An object's fields (name, node): its declared ones, and with ``others`` its others'."""
    for f in _list(node["fields"]):
        field = _dict(f)
        if others or not field.get("others"):
            yield str(field["name"]), _dict(field["node"])


def _others(node: JsonDict) -> JsonDict | None:
    """The field of an object's other keys (`ObjectField.others`), or None."""
    last = _dict(_list(node["fields"])[-1]) if node["fields"] else None
    return last if last is not None and last.get("others") else None


def _enum_kind(node: JsonDict) -> str | None:
    """The variable kind of an enum leaf (``int``, ``bool``, ``str``); None: mixed types."""
    kinds = {
        "bool" if isinstance(c, bool) else "int" if isinstance(c, int) else "str"
        for c in _list(node["choices"])
    }
    return kinds.pop() if len(kinds) == 1 else None


def incomparable(node: JsonDict, where: str = "") -> str | None:
    """What in ``node`` the writer cannot compare between two items, or None.

    A grammar value, an enum mixing value types, or a node of another type; ``where`` is
    the place of ``node`` below the item, which the answer names.
    """
    at = f" at {where}" if where else ""
    if node["type"] == "grammar":
        return f"a grammar value{at} (llguidance writes it; no variable holds its value)"
    if node["type"] == "object":
        for name, sub in _fields(node):
            found = incomparable(sub, f"{where}.{name}" if where else name)
            if found is not None:
                return found
        return None
    if node["type"] == "list":
        return incomparable(_dict(node["item"]), f"{where}[]")
    if node["type"] != "leaf" or node["kind"] not in _LEAF_DIFFER:
        return f"a {node['type']} node{at}"
    if node["kind"] == LeafKind.ENUM and _enum_kind(node) is None:
        return f"an enum that mixes value types{at} (relations read one type of values)"
    return None


def _int_values(node: JsonDict) -> int:
    return _int(node.get("le", INT_LIMIT)) - _int(node.get("ge", -INT_LIMIT)) + 1


_LEAF_VALUES: dict[str, Callable[[JsonDict], int | None]] = {
    LeafKind.BOOL: lambda node: 2,
    LeafKind.INT: _int_values,
    LeafKind.ENUM: lambda node: len(_list(node["choices"])),
    LeafKind.STR: lambda node: 1 if node.get("max_length") == 0 else None,  # "", or many
}
"""How many values a leaf of each kind the converter writes has (None: more than any bound)."""


def distinct_values(node: JsonDict, most: int) -> int | None:
    """How many values ``node`` can have (``null`` included), or None when more than ``most``.

    A leaf counts its values (a free string has one where ``maxLength`` is 0, else more
    than any bound), an object the products of its properties', a list the sequences of
    each of its lengths. Only for nodes `incomparable` accepts.
    """
    count: int | None = None
    if node["type"] == "leaf":
        count = _LEAF_VALUES[str(node["kind"])](node)
    elif node["type"] == "object":
        parts = [distinct_values(sub, most) for _, sub in _fields(node)]
        count = None if None in parts else prod(p for p in parts if p is not None)
    else:
        item = distinct_values(_dict(node["item"]), most)
        if item is not None:
            count = 0
            for n in range(_int(node["min_length"]), _int(node["max_length"]) + 1):
                count += item**n
                if count > most:
                    break
    if count is not None and node.get("nullable"):
        count += 1
    return None if count is None or count > most else count


class _Builder:
    """The variables and string table of the factors, declared as formulas need them."""

    def __init__(self, limits: IRLimits, where: str) -> None:
        self.limits = limits
        self.where = where
        self.variables: dict[str, JsonDict] = {}
        self.strings: dict[str, None] = {}
        self.used: set[str] = set()

    def declare(self, path: Place, name: str, kind: str, other: Place | None = None) -> JsonDict:
        """The variable ``name`` (declared once), as an expression."""
        seen = self.variables.get(name)
        if seen is None:
            var: JsonDict = {"name": name, "path": list(path), "kind": kind}
            if other is not None:
                var["other"] = list(other)
            self.variables[name] = var
            if len(self.variables) > self.limits.max_variables:
                raise IRError(
                    f"{self.where}: uniqueItems and other keys need more than "
                    f"{self.limits.max_variables} solver variables (IRLimits.max_variables); "
                    "lower maxItems / maxProperties"
                )
        elif seen["path"] != list(path):
            raise IRError(
                f"{self.where}: uniqueItems needs the variable {name!r} at two places of "
                "the layout (a key holds a dot or brackets); not supported"
            )
        self.used.add(name)
        return {"var": name}

    def length(self, path: Place) -> JsonDict:
        return self.declare(path, length_name(path), "len")


def _distinct_leaves(b: _Builder, node: JsonDict, x: Place, y: Place) -> JsonDict:
    """Two int, bool or one-type enum leaves: their variables differ."""
    kind = _enum_kind(node) if node["kind"] == LeafKind.ENUM else str(node["kind"])
    assert kind is not None  # `incomparable` refused an enum of mixed types
    if node["kind"] == LeafKind.ENUM:  # strings are codes, by the string table
        b.strings.update((c, None) for c in _list(node["choices"]) if isinstance(c, str))
    args = [b.declare(p, path_name(p), kind) for p in (x, y)]
    return {"op": "distinct", "args": args}


def _different_texts(b: _Builder, node: JsonDict, x: Place, y: Place) -> JsonDict:
    """Two free strings: not ``same(x, y)``; the writer reads their code variables."""
    for p in (x, y):
        b.declare(p, path_name(p), "str")
    return {"op": "not", "args": [b.declare(x, same_name(x, y), "bool", other=y)]}


_LEAF_DIFFER: dict[str, Callable[[_Builder, JsonDict, Place, Place], JsonDict]] = {
    LeafKind.INT: _distinct_leaves,
    LeafKind.BOOL: _distinct_leaves,
    LeafKind.ENUM: _distinct_leaves,
    LeafKind.STR: _different_texts,
}
"""How two leaves of each kind the converter writes differ (other kinds: `incomparable`)."""


def _or(args: list[JsonDict]) -> JsonDict:
    return args[0] if len(args) == 1 else {"op": "or", "args": args}


def differ(b: _Builder, node: JsonDict, x: Place, y: Place) -> JsonDict:
    """The formula that the items of layout ``node`` at places ``x`` and ``y`` differ."""
    if distinct_values({**node, "nullable": False}, 1) is not None:
        inner: JsonDict = {"bool": False}  # one value
    elif node["type"] == "leaf":
        inner = _LEAF_DIFFER[str(node["kind"])](b, node, x, y)
    elif node["type"] == "object":
        parts = [differ(b, sub, (*x, name), (*y, name)) for name, sub in _fields(node)]
        inner = _or(parts)
    else:  # a list: other lengths, or an item present in both differs
        item = _dict(node["item"])
        lx, ly = b.length(x), b.length(y)
        parts = [{"op": "distinct", "args": [lx, ly]}]
        for k in range(_int(node["max_length"])):
            more = {"op": "gt", "args": [lx, {"int": k}]}
            parts.append({"op": "and", "args": [more, differ(b, item, (*x, k), (*y, k))]})
        inner = _or(parts)
    if not node.get("nullable"):
        return inner
    nx, ny = (b.declare(p, f"null({path_name(p)})", "bool") for p in (x, y))
    present = {"op": "and", "args": [{"op": "not", "args": [nx]}, inner]}
    return {"op": "or", "args": [{"op": "distinct", "args": [nx, ny]}, present]}


def unique_relations(
    layout: JsonDict, unique: dict[int, tuple[JsonDict, str]], limits: IRLimits
) -> JsonDict:
    """The IR's ``strings``, ``variables`` and ``factors``: the items of each unique list differ.

    ``unique`` holds the lists laid out for ``uniqueItems`` (by ``id``, with their place in
    the schema). Each gets, at each place the layout puts it (every index of the lists
    around it), one factor ``uniqueItems of <path>``: ``len(<path>) > j`` implies that item
    ``j`` differs from every item before it (`differ`), scoped to the list (its ``scope``:
    a record that leaves the list out, or an object above it, satisfies it, so such keys
    stay the model's choice). Empty when no list is unique.

    Raises:
        IRError: the factors need more variables or factors than the limits allow, or
            two places of the layout spell the same variable name (a key with a dot).
    """
    b = _Builder(limits, next(iter(unique.values()))[1] if unique else "#")
    below: dict[int, bool] = {}
    factors: list[JsonDict] = []

    def holds_unique(node: JsonDict) -> bool:
        key = id(node)
        if key not in below:
            if node["type"] == "object":
                kids = [sub for _, sub in _fields(node, others=True)]
                here = key in unique or _others(node) is not None
            else:
                kids = [_dict(node["item"])] if node["type"] == "list" else []
                here = key in unique
            below[key] = here or any(holds_unique(k) for k in kids)
        return below[key]

    def walk(node: JsonDict, path: Place) -> None:
        if not holds_unique(node):
            return
        if node["type"] == "object":
            others = _others(node)
            if others is not None:
                factors.append(other_keys(node, others, (*path, str(others["name"]))))
            for name, sub in _fields(node, others=True):
                walk(sub, (*path, name))
            return
        count = _int(node["max_length"])
        b.length(path)
        if id(node) in unique:
            factors.append(distinct_items(_dict(node["item"]), path, count))
        for i in range(count):
            walk(_dict(node["item"]), (*path, i))

    def distinct_items(item: JsonDict, path: Place, count: int) -> JsonDict:
        b.used = set()
        length = b.length(path)
        clauses: list[JsonDict] = [
            {
                "op": "implies",
                "args": [
                    {"op": "gt", "args": [length, {"int": j}]},
                    {
                        "op": "and",
                        "args": [differ(b, item, (*path, i), (*path, j)) for i in range(j)],
                    },
                ],
            }
            for j in range(1, count)
        ]
        return {
            "name": f"uniqueItems of {path_name(path)}",
            "variables": sorted(b.used),
            "formula": {"op": "and", "args": clauses},
            "scope": list(path),  # an absent list has no items to repeat
        }

    def other_keys(node: JsonDict, others: JsonDict, path: Place) -> JsonDict:
        """The factor ``other keys of <object>``: the entries' keys differ.

        ``len > j`` implies other key ``j`` differs from the keys before it and from the
        declared keys (by its code: each declared key is in the string table).
        """
        b.used = set()
        length = b.length(path)
        declared = [str(_dict(f)["key"]) for f in _list(node["fields"])[:-1]]
        b.strings.update((k, None) for k in declared)
        table = {t: c for c, t in enumerate(b.strings, start=1)}  # 0: any other text
        entry = _dict(_dict(others["node"])["item"])
        key_node = dict(_fields(entry))["key"]
        clauses: list[JsonDict] = []
        for j in range(_int(_dict(others["node"])["max_length"])):
            key = (*path, j, "key")
            text = b.declare(key, path_name(key), "str")
            apart: list[JsonDict] = [
                {"op": "distinct", "args": [text, {"int": table[k]}]} for k in declared
            ]
            apart += [_different_texts(b, key_node, (*path, i, "key"), key) for i in range(j)]
            if apart:
                more = {"op": "gt", "args": [length, {"int": j}]}
                clauses.append({"op": "implies", "args": [more, {"op": "and", "args": apart}]})
        return {
            "name": f"other keys of {path_name(path[:-1]) or '<record>'}",
            "variables": sorted(b.used),
            "formula": {"op": "and", "args": clauses} if clauses else {"bool": True},
            "scope": list(path),  # no entries, no keys to repeat
        }

    walk(layout, ())
    if not factors:
        return {}  # the unique lists were left out of the layout
    if len(factors) > limits.max_factors:
        raise IRError(
            f"{b.where}: uniqueItems needs more than {limits.max_factors} factors "
            "(IRLimits.max_factors)"
        )
    return {
        "strings": list(b.strings),
        "variables": list(b.variables.values()),
        "factors": factors,
    }
