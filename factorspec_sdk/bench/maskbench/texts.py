r"""The texts that serialize one test instance: key orders and number spellings.

MaskBench asks whether an engine can write a JSON *value*, so neither key order nor the
spelling of a number may decide the verdict: an engine that writes keys in the schema's
order must not fail an instance listed in another order, and one that writes ``1e-5`` must
not fail an instance that says ``0.00001``. The writer's whitespace is fixed (``", "`` and
``": "``, no other blanks: FactorSpec's, and the one the grammar libraries are asked for),
so `candidate_texts` lists, in this order and without repeats:

* for each key order — the schema's (each object's ``properties`` in the order the schema
  lists them, merged over ``allOf``/``anyOf``/``oneOf`` and ``$ref``, then the instance's
  other keys in its order), the instance's own, sorted, the schema's with the branches'
  properties first, the schema's over only the ``anyOf``/``oneOf`` branches the object is
  valid under —
* each number spelling — as parsed (an int as written, a float as ``repr``), integral
  floats as ints (``1.0`` as ``1``, where the draft reads them as one instance: below),
  positional (no exponent: ``1e-05`` as ``0.00001``,
  ``1.0`` as ``1.0``), the shortest of those and a compact exponent (``1e-5``) —
* each string spelling — UTF-8 as is, and ``\u`` escapes for non-ASCII characters;

then, when the instance's objects are small (each at most `PERMUTED_KEYS` keys, all their
orders together at most `MAX_PERMUTATIONS`), every key order of every object. At most
`MAX_TEXTS` texts; the search tries them in this order and stops at the first it can write.

Every text parses back to the instance, and to one the schema judges as it judges the
instance. Draft 4 (and 3) tells an integral float from an int (``12345.0`` is not an
``integer`` there, ``12345`` is), so under it an int spelling of a float is a candidate only
where the schema's verdict on the two is the same (``6000`` for ``6000.0`` under ``type:
number``, not ``12345`` for the invalid ``12345.0`` under ``type: integer``: an engine
that writes it has written a valid instance); the shortest spelling that keeps a float a
float (``12345.0``, ``1e16``) is one more. From draft 6 on the two are one instance.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any

import jsonschema
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

__all__ = [
    "MAX_PERMUTATIONS",
    "MAX_TEXTS",
    "PERMUTED_KEYS",
    "SchemaView",
    "candidate_texts",
    "number_spellings",
]

MAX_TEXTS = 32
"""Most texts tried per instance."""

PERMUTED_KEYS = 4
"""Objects with at most this many keys are tried in every key order."""

MAX_PERMUTATIONS = 24
"""Most key orders (of all the instance's objects together) tried beyond the three policies."""

_REF_DEPTH = 32

Where = tuple[str | int, ...]
"""A value's place in the instance: the keys and indices from the root."""

KeyOrder = Callable[[Where, list[str], "dict[str, Any] | None"], list[str]]
"""Given an object's place, its keys and its schema: the keys' order."""

Spell = Callable[[int | float], str]
"""A number's text."""


class SchemaView:
    """The sub-schemas of one JSON Schema document, enough to tell each object's key order.

    Follows local ``$ref`` (``#/...`` JSON pointers, ``$defs``/``definitions`` included) and
    merges ``allOf``/``anyOf``/``oneOf`` branches. An approximation for ordering keys only:
    where it cannot tell, the instance's own order is used.
    """

    def __init__(self, root: Any) -> None:
        self.root = root

    def resolve(self, schema: Any, depth: int = 0) -> dict[str, Any] | None:
        """``schema`` with its ``$ref`` followed (None for a non-object or a dangling ref)."""
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            if depth > _REF_DEPTH:
                return None
            depth += 1
            target = self._pointer(schema["$ref"])
            if target is None:
                return schema if len(schema) > 1 else None
            schema = target
        return schema if isinstance(schema, dict) else None

    def _pointer(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None
        node = self.root
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def branches(
        self, schema: Any, depth: int = 0, matches: Callable[[Any], bool] | None = None
    ) -> list[dict[str, Any]]:
        """``schema`` and the sub-schemas of its ``allOf``/``anyOf``/``oneOf``, resolved.

        ``matches``: of an ``anyOf``/``oneOf``, only the sub-schemas it accepts (the ones the
        instance is valid under), or all of them where it accepts none.
        """
        s = self.resolve(schema)
        if s is None or depth > _REF_DEPTH:
            return []
        out = [s]
        for word in ("allOf", "anyOf", "oneOf"):
            subs = list(s.get(word) or [])
            if matches is not None and word != "allOf":
                subs = [sub for sub in subs if matches(sub)] or subs
            for sub in subs:
                out += self.branches(sub, depth + 1, matches)
        return out

    def property_order(
        self,
        schema: Any,
        *,
        branches_first: bool = False,
        matches: Callable[[Any], bool] | None = None,
    ) -> list[str]:
        """The names under ``properties``, in the schema's order, over every branch.

        A schema's own properties come before its branches' unless ``branches_first``
        (XGrammar writes a ``oneOf`` branch's properties before its parent's); with
        ``matches``, over the branches it accepts (`branches`).
        """
        names: dict[str, None] = {}
        branches = self.branches(schema, matches=matches)
        for s in reversed(branches) if branches_first else branches:
            props = s.get("properties")
            if isinstance(props, dict):
                names.update(dict.fromkeys(props))
        return list(names)

    def child(self, schema: Any, key: str) -> Any:
        """The sub-schema of property ``key``, or None.

        From ``properties``, else a matching ``patternProperties``, else
        ``additionalProperties``.
        """
        branches = self.branches(schema)
        for s in branches:
            props = s.get("properties")
            if isinstance(props, dict) and key in props:
                return props[key]
        for s in branches:
            for pattern, sub in (s.get("patternProperties") or {}).items():
                try:
                    if re.search(pattern, key):
                        return sub
                except re.error:
                    continue
        for s in branches:
            extra = s.get("additionalProperties")
            if isinstance(extra, dict):
                return extra
        return None

    def item(self, schema: Any, index: int) -> Any:
        """The sub-schema of item ``index`` (``prefixItems``, a list ``items``, ``items``)."""
        for s in self.branches(schema):
            prefix = s.get("prefixItems")
            items = s.get("items")
            if isinstance(prefix, list) and index < len(prefix):
                return prefix[index]
            if isinstance(items, list):
                if index < len(items):
                    return items[index]
                extra = s.get("additionalItems")
                if isinstance(extra, dict):
                    return extra
            elif isinstance(items, dict):
                return items
        return None


# ------------------------------------------------------------------ numbers


def _positional(x: float) -> str:
    text = format(Decimal(repr(x)), "f")
    return text if "." in text else text + ".0"


def _integral(x: int | float) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e21:
        return str(int(x))
    return _plain(x)


def _plain(x: int | float) -> str:
    return json.dumps(x)


def _exponent(x: float) -> str:
    """``x`` as ``d.ddde±n`` with every digit of its shortest repr (``1e-5``, ``1.5e16``)."""
    sign, digits, exp = Decimal(repr(x)).normalize().as_tuple()
    assert isinstance(exp, int)  # a finite float
    head, tail = str(digits[0]), "".join(map(str, digits[1:]))
    return f"{'-' if sign else ''}{head}{'.' + tail if tail else ''}e{exp + len(digits) - 1}"


def _shortest(x: int | float) -> str:
    if isinstance(x, int):
        return str(x)
    return min((_plain(x), _positional(x), _integral(x), _exponent(x)), key=len)


def _shortest_float(x: int | float) -> str:
    """`_shortest` among the spellings that keep a float a float."""
    if isinstance(x, int):
        return str(x)
    return min((_plain(x), _positional(x), _exponent(x)), key=len)


def _positional_number(x: int | float) -> str:
    return str(x) if isinstance(x, int) else _positional(x)


_SPELLINGS: tuple[Spell, ...] = (_plain, _integral, _positional_number, _shortest)
_DRAFT4_SPELLINGS: tuple[Spell, ...] = (*_SPELLINGS, _shortest_float)
"""The spellings under a draft where an integral float is not an integer (draft 4)."""


def number_spellings(x: int | float) -> list[str]:
    """Every spelling of ``x`` the candidates use (see the module docstring), no repeats.

    Under draft 4 one more: `_shortest_float`.
    """
    return list(dict.fromkeys(spell(x) for spell in _SPELLINGS))


def _spellings(integral_floats: bool) -> tuple[Spell, ...]:
    """The spellings under a draft that reads an integral float as an integer, or not."""
    return _SPELLINGS if integral_floats else _DRAFT4_SPELLINGS


# ------------------------------------------------------------------ serializing


def _schema_order(view: SchemaView, *, branches_first: bool = False) -> KeyOrder:
    def order(where: Where, keys: list[str], schema: dict[str, Any] | None) -> list[str]:
        del where
        named = view.property_order(schema, branches_first=branches_first)
        first = [k for k in named if k in keys]
        return first + [k for k in keys if k not in set(first)]

    return order


def _matched_order(view: SchemaView, value: Any, validator: Validator) -> KeyOrder:
    """The schema's order over the ``anyOf``/``oneOf`` branches each object is valid under.

    Over every branch (`_schema_order`), the properties of a branch the object does not
    take can come between those of the one it takes (a ``oneOf`` of state kinds, each with
    its own keys after the common ones), and an engine writes the taken branch's order.
    Each object's order is found once: every spelling of the instance asks it again.
    """
    found: dict[Where, list[str]] = {}

    def order(where: Where, keys: list[str], schema: dict[str, Any] | None) -> list[str]:
        kept = found.get(where)
        if kept is not None:
            return kept
        here = value
        for part in where:
            here = here[part]

        def matches(sub: Any) -> bool:
            return bool(validator.evolve(schema=sub).is_valid(here))

        named = view.property_order(schema, matches=matches)
        first = [k for k in named if k in keys]
        found[where] = first + [k for k in keys if k not in set(first)]
        return found[where]

    return order


def _instance_order(where: Where, keys: list[str], schema: dict[str, Any] | None) -> list[str]:
    del where, schema
    return keys


def _sorted_order(where: Where, keys: list[str], schema: dict[str, Any] | None) -> list[str]:
    del where, schema
    return sorted(keys)


def _fixed_orders(orders: dict[Where, Sequence[str]]) -> KeyOrder:
    def order(where: Where, keys: list[str], schema: dict[str, Any] | None) -> list[str]:
        del schema
        return list(orders.get(where, keys))

    return order


class _Writer:
    """One serialization: a key order, a number spelling, a string spelling."""

    def __init__(self, view: SchemaView, order: KeyOrder, spell: Spell, ascii_only: bool):
        self.view, self.order, self.spell, self.ascii_only = view, order, spell, ascii_only

    def dump(self, value: Any, schema: Any, where: Where = ()) -> str:
        if isinstance(value, dict):
            keys = self.order(where, list(value), self.view.resolve(schema))
            parts = [
                f"{self._string(k)}: "
                + self.dump(value[k], self.view.child(schema, k), (*where, k))
                for k in keys
            ]
            return "{" + ", ".join(parts) + "}"
        if isinstance(value, list):
            items = [
                self.dump(v, self.view.item(schema, i), (*where, i)) for i, v in enumerate(value)
            ]
            return "[" + ", ".join(items) + "]"
        if isinstance(value, str):
            return self._string(value)
        if isinstance(value, bool) or value is None:
            return json.dumps(value)
        if isinstance(value, int | float):
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{value!r} has no JSON text")
            return self.spell(value)
        raise ValueError(f"{type(value).__name__} is not a JSON value")

    def _string(self, text: str) -> str:
        return json.dumps(text, ensure_ascii=self.ascii_only)


def _objects(value: Any, where: Where = ()) -> Iterator[tuple[Where, list[str]]]:
    """The place and keys of every object in ``value``."""
    if isinstance(value, dict):
        yield where, list(value)
        for k, v in value.items():
            yield from _objects(v, (*where, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _objects(v, (*where, i))


def _permuted(value: Any) -> list[dict[Where, Sequence[str]]]:
    """Every combination of key orders of the instance's objects, or [] when too many."""
    objects = list(_objects(value))
    if not objects or any(len(keys) > PERMUTED_KEYS for _, keys in objects):
        return []
    if math.prod(math.factorial(len(keys)) for _, keys in objects) > MAX_PERMUTATIONS:
        return []
    choices = [list(itertools.permutations(keys)) for _, keys in objects]
    places = [where for where, _ in objects]
    return [dict(zip(places, combo, strict=True)) for combo in itertools.product(*choices)]


def _validator(schema: Any) -> Validator:
    """``schema``'s `jsonschema` validator, formats asserted, as MaskBench's checker.

    The draft follows ``$schema`` (2020-12 when it is absent or unknown), as
    `factorspec_sdk.ir.json_schema_validator` chooses it.
    """
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _any_number(x: Any) -> bool:
    del x
    return True


def _same(a: Any, b: Any, integer: Callable[[Any], bool]) -> bool:
    """Whether JSON values ``a`` and ``b`` are one instance.

    Equal, with numbers of the same types: ``integer`` is the draft's, and ``true`` is no
    ``1`` (JSON's types).
    """
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], integer) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, integer) for x, y in zip(a, b))
    if isinstance(a, bool | str | None) or isinstance(b, bool | str | None):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b and integer(a) == integer(b)
    return False


def candidate_texts(value: Any, schema: Any, *, limit: int = MAX_TEXTS) -> list[str]:
    """The texts of ``value`` the search tries, in order (see the module docstring).

    A text that cannot be encoded as UTF-8 (a lone surrogate) is left out; its escaped
    spelling stays. Each text parses back to ``value``, or under draft 4 to a value the
    schema judges alike (see the module docstring).

    Raises:
        ValueError: ``value`` is not a JSON value (a NaN, an infinity).
        RuntimeError: a text parses back to another value (a fault of this module).
    """
    view, validator = SchemaView(schema), _validator(schema)

    def integer(x: Any) -> bool:
        return bool(validator.is_type(x, "integer"))

    spellings = _spellings(integral_floats=integer(1.0))
    texts: dict[str, None] = {}

    def add(order: KeyOrder, spell: Spell, ascii_only: bool) -> None:
        text = _Writer(view, order, spell, ascii_only).dump(value, schema)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return
        parsed = json.loads(text)
        if not _same(parsed, value, integer):
            if not _same(parsed, value, _any_number):
                raise RuntimeError(f"a candidate text is another value than {value!r}: {text}")
            if validator.is_valid(parsed) != validator.is_valid(value):
                return  # draft 4: 12345 for 12345.0, which the schema judges otherwise
        texts.setdefault(text)

    policies = (
        _schema_order(view),
        _instance_order,
        _sorted_order,
        _schema_order(view, branches_first=True),
        _matched_order(view, value, validator),
    )
    for order in policies:
        for spell in spellings:
            for ascii_only in (False, True):
                add(order, spell, ascii_only)
    for orders in _permuted(value):
        if len(texts) >= limit:
            break
        add(_fixed_orders(orders), _plain, False)
    return list(texts)[:limit]
