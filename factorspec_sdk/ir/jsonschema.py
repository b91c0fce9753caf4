"""From a JSON Schema (as OpenAI's ``response_format`` carries it) to an IR.

Its only relations keep the items of ``uniqueItems`` lists distinct.

**The contract**: every record the writer can produce from the IR validates, with the
`jsonschema` package, against the schema the client sent (`json_schema_validator`: its
``$schema`` dialect, draft 2020-12 when absent, formats asserted). What the converter cannot
guarantee is an `IRError` naming the place (``#/properties/a/items``), never silently
dropped. The writer's values are a *subset* of what the schema accepts: it writes a property
not ``required`` or leaves it out (always writes it where the relations read under it, a
named restriction: `factorspec_sdk.relations.restrictions`), integers within ``+-(10**18 -
1)``, fewer items in a ``uniqueItems`` array of items with few values than the schema allows
where `IRLimits.max_unique_work` cuts them, and the declared keys only of an object marked
``undeclared_keys`` (below: a relation reads under it, or llguidance refuses its grammar), a
restriction its layout names. Elsewhere keys the schema allows but does not declare, any
JSON value where a schema constrains nothing, and ``null`` where a node without ``type``
accepts it are written: by llguidance, as grammar values.

The writer lays out what it can itself (*native* nodes, which relations can read and whose
certain tokens are drafted); every other sub-schema is one **grammar value**
(``{"type": "grammar", "schema": ...}``): llguidance generates it from the sub-schema, made
self-contained and read as its dialect reads it (`factorspec_sdk.ir.standalone`: the
``$defs`` it references copied in, a ``$ref`` to the root or to any other pointer turned
into a ``$defs`` entry, draft 4 to 2019-09 keywords translated to draft 2020-12). An array
or object under a keyword the writer does not lay out is one grammar value with everything
under it, never unrolled; so is an array whose items are grammar values, and a combinator
one of whose alternatives is. A grammar value is compiled by llguidance when the IR is
built, so what llguidance refuses is an `IRError` naming the place and carrying
llguidance's message. A root that is no object the writer lays out (an array, a string,
``anyOf`` of objects, an object that allows keys it does not declare, ...) makes the
whole record one grammar value; so does a root object whose native layout would pass the
limits (`IRLimits`: more than ``max_layout_nodes`` schema nodes, or more than
``max_unrolled_nodes`` once every array is unrolled to its bound). Such a record has no
native leaves, so relations cannot read it.

Keywords, as `jsonschema` asserts them per dialect (a keyword of one type constrains only
values of that type, so ``minLength`` on an integer node is irrelevant, as JSON Schema says):

* **Native**
    * ``type`` (one type besides ``"null"``: object, array, integer, boolean, string).
    * ``enum`` / ``const``: each value is validated with `jsonschema` against the *whole*
      node (its ``type``, ``$ref`` and every other sibling, formats and patterns included);
      the writer offers the values that pass and that it can write (strings, integers,
      booleans; an integral float as its integer). ``null`` is offered when listed and valid.
      An enum with none of those but objects, arrays or floats is a grammar value.
    * ``null``: the writer may write ``null`` exactly where `jsonschema` accepts ``null`` for
      the node (``type: [..., "null"]``, ``anyOf``/``oneOf`` with ``{"type": "null"}``,
      an ``enum`` listing ``null``); a node without ``type`` is a grammar value, which
      writes ``null`` and every other value its keywords allow; so is a list or object
      the node allows ``null`` for (the writer writes ``null`` for those only where a
      relation reads the null-ness), unless a relation reads it or under it (a
      ``uniqueItems`` factor) or llguidance refuses it: then it is native and ``null`` is
      not written there (its layout shows it: nullable, no null variable). OpenAPI's
      ``nullable: true`` is not JSON Schema and `jsonschema` ignores it, so it allows no
      ``null`` here (a record without ``null`` is valid under both readings). A required
      property whose only value is ``null`` is a grammar value.
    * Objects that allow no key they do not declare (``additionalProperties: false``, or
      ``unevaluatedProperties: false`` without it, and no ``patternProperties``):
      ``properties`` (in schema order; one not ``required`` is the model's choice: written
      or left out), ``required``
      (a required key not under ``properties`` is unsatisfiable, an `IRError`),
      ``propertyNames`` (a declared key it rejects is never written),
      ``dependencies`` / ``dependentRequired`` (a key whose list names a key never written
      is never written itself), and ``minProperties``, ``maxProperties``, the other key
      lists and schema dependencies where every key set the writer may write satisfies
      them: the required keys are always written, another may be left out. Else the
      object is a grammar value (the counts and dependencies hold for some key sets
      only), or unsatisfiable (for none).
    * An object that allows keys it does not declare (``additionalProperties`` absent,
      ``true`` or a schema; ``patternProperties``; ``unevaluatedProperties`` not false;
      ``{"type": "object"}``) is a grammar value, which writes them, unless a relation
      reads it or under it (it is an item of a ``uniqueItems`` list, whose factor compares
      the items, or holds such a list) or llguidance refuses its grammar
      (``propertyNames``, ``minProperties`` / ``maxProperties`` beside more optional
      properties than `standalone_schema` splits into branches, a ``oneOf`` it cannot
      prove, ...). Then it is native with its declared keys only, and marked
      ``undeclared_keys``: its properties, the required keys not
      under ``properties`` after them (with the schemas of the patterns that match them,
      else of ``additionalProperties``, else of ``unevaluatedProperties``), each declared
      key holding the schemas of the patterns that match it (by `re.search`, as
      `jsonschema` matches: the value is the grammar value of their ``allOf``), and the key
      keywords as for a closed object; where those cannot hold (``minProperties`` above
      the declared keys), it is refused with llguidance's reason.
    * ``items`` (one schema; ``false``: no items; ``true`` or absent: any JSON values, so the
      array is a grammar value),
      ``minItems`` / ``maxItems`` (no ``maxItems``: at most 16 items), ``uniqueItems``:
      one factor per list, ``uniqueItems of <path>``: ``len > j`` implies item ``j``
      differs from each item before it as `jsonschema` compares them
      (`factorspec_sdk.ir.unique`: integers, booleans and one-type enums by their
      variables, free strings by the writer's ``same`` variables, ``null`` by null-ness,
      objects by some property, arrays by length or some item). Items with at most
      `MAX_UNIQUE_VALUES` values (``null`` included) are at most as many as their values,
      and as many as `IRLimits.max_unique_work` (values times items, 256) allows,
      ``minItems`` at least: the writer's solver work grows with both. Items holding a
      grammar value or an enum mixing value types are refused (the writer cannot compare
      them). ``additionalItems`` (irrelevant beside a single ``items`` schema),
      ``unevaluatedItems`` (the items schema when ``items`` is absent).
    * ``minLength`` / ``maxLength``: the free-string writer counts the value's characters
      (code points, as `jsonschema` counts them), its JSON escapes read (a surrogate pair is
      one character; a lone surrogate is never written).
    * ``minimum`` / ``maximum`` / ``exclusiveMinimum`` / ``exclusiveMaximum`` (numbers, or
      draft 4's Boolean modifiers) on integers; ``multipleOf: 1``.
    * ``$ref`` to a place in the same document (``#``, ``#/$defs/A``, ``#/definitions/A``,
      any JSON pointer); beside it, other keywords where the dialect ignores them (drafts 4
      to 7). ``allOf`` with one schema; ``anyOf`` / ``oneOf`` of one schema and
      ``{"type": "null"}``; either beside ``type`` when the values written for the one
      schema have that type. Recursion is laid out until a ``$ref`` comes back to one it
      went through; that ``$ref`` is a grammar value.
    * ``format`` that neither `jsonschema` (its dialect's checker, with the libraries
      installed) nor llguidance knows: irrelevant, `jsonschema` ignores it.
* **Grammar values** (llguidance): ``{}``, ``true`` and a node without ``type`` (any JSON
  value its keywords allow, ``null`` included; beside a sibling ``type``, an untyped
  ``allOf`` / ``anyOf`` / ``oneOf`` alternative takes that type); an object that allows
  undeclared keys; a list or object that may be ``null``; an array without ``items``;
  ``number``; unions of several types; ``pattern``; ``format`` (outside an ``enum``;
  llguidance's formats: date, time, date-time, duration, email, hostname, ipv4, ipv6, uuid,
  uri, ...); ``multipleOf`` other than 1; ``allOf`` of
  several schemas; ``anyOf`` of several schemas; ``oneOf`` of several schemas proven
  exclusive (`factorspec_sdk.ir.exclusive`: no instance satisfies two branches beside the
  siblings of the ``oneOf`` and of the combinators it lies in, ``allOf`` members included;
  it is then exactly ``anyOf``), or that llguidance proves exclusive from branches the
  grammar copies exactly (never coerced to ``anyOf``, which could write a value two branches
  accept); a combinator beside
  other validation keywords; ``$ref`` beside other keywords (draft 2019-09 and later);
  ``prefixItems`` and ``items`` as a list (tuples, with ``additionalItems``); ``not`` and
  ``if`` / ``then`` / ``else``, as `standalone_schema` negates them (a subset of the values
  where a negation must leave some out); ``unevaluatedProperties`` / ``unevaluatedItems``
  beside no keyword that evaluates in place (as ``additionalProperties`` / ``items``); the
  object keywords above; recursion; ``$ref`` to the root.
* **Refused** (an `IRError` where they would constrain a written value): what llguidance
  does not implement or cannot compile, by its message: ``uniqueItems`` with room for two
  items over items holding a grammar value (``{}``, a node without ``type`` or without
  ``items`` among them) or an enum mixing value types, or in a grammar value (llguidance
  does not implement it; the error says to write ``maxItems: 1`` for at most one item),
  ``contains``, ``propertyNames`` inside a grammar value (an object that allows undeclared
  keys keeps its declared ones instead), ``unevaluatedProperties`` / ``unevaluatedItems``
  beside ``allOf``, ``$ref``, ``if``, ... in a grammar value, ``minProperties`` /
  ``maxProperties`` beside more than six optional properties in an object that allows
  undeclared keys (but a ``minProperties`` one above its required keys; and where its
  declared keys cannot hold them either), ``not`` of what `standalone_schema` cannot
  negate (``enum``, ``const``, ``$ref``, ...), a ``oneOf`` neither proves exclusive (and
  one llguidance would prove from branches the grammar narrows, a negation, as a value of
  one could pass the other's schema),
  formats it does not know that `jsonschema` asserts (``idn-email``, ``regex``, ...),
  regexes with look-around, recursion through a ``$ref`` with siblings; what the two
  readers would read differently (a non-integer ``multipleOf``, or one other than 1 on a
  node that allows non-integer numbers; a ``pattern`` with a POSIX class); ``$ref`` outside
  the document, ``$dynamicRef`` / ``$recursiveRef``, an embedded ``$id`` (draft 4:
  ``id``) over a ``$ref`` (it moves the base the ``$ref`` resolves against), a cycle of
  ``$ref`` that never reaches a schema, draft 3 schemas, and schemas that fail their
  dialect's meta-schema.
* **Irrelevant to validity** (`jsonschema` asserts nothing for them): ``title``,
  ``description``, ``default``, ``examples``, ``$comment``, ``$schema`` (it picks the
  dialect), ``$id`` / ``id`` at the root, ``$anchor``, ``$defs`` / ``definitions`` (read
  through ``$ref``), ``readOnly``, ``writeOnly``, ``deprecated``, ``contentEncoding``,
  ``contentMediaType``, ``contentSchema``, ``then`` / ``else`` without ``if``,
  ``minContains`` / ``maxContains`` without ``contains``, OpenAPI's ``nullable``,
  ``discriminator``, ``example``, vendor keywords (``x-...``, ``strict``,
  ``propertyOrdering``) and every keyword the dialect does not define (grammar values
  leave them out).

A node with nothing the writer can write (an empty intersection: an ``enum`` none of whose
values passes the node's other keywords, ``false``, ``type: "null"`` alone, ``minimum``
above ``maximum``) makes an optional property absent-only (it is left out of the object,
so the writer never writes it) and an array without ``minItems`` empty; a required
property (unless ``null`` is its value: a grammar value), an item of a non-empty array or
the root is an `IRError` saying the schema is unsatisfiable there.
"""

from __future__ import annotations

import math
import re
from typing import TypeVar
from urllib.parse import unquote

import jsonschema
from jsonschema.protocols import Validator

from factorspec_sdk.ir.limits import DEFAULT_LIMITS, IRError, IRLimits, json_depth
from factorspec_sdk.ir.model import IR_VERSION
from factorspec_sdk.ir.schema_check import json_schema_validator
from factorspec_sdk.ir.standalone import (
    asserted_format,
    has_ref,
    pointer_part,
    standalone_schema,
)
from factorspec_sdk.ir.unique import distinct_values, incomparable, unique_relations
from factorspec_sdk.relations.kinds import LeafKind
from factorspec_sdk.relations.layout import (
    DEFAULT_MAX_LIST_LENGTH,
    INT_LIMIT,
    grammar_layout,
)

__all__ = ["ir_from_json_schema"]

JsonDict = dict[str, object]
_T = TypeVar("_T")

_LEGACY = (
    jsonschema.Draft4Validator,
    jsonschema.Draft6Validator,
    jsonschema.Draft7Validator,
)
"""Dialects whose ``$ref`` makes its sibling keywords ignored."""

_OBJECT = frozenset(
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
_ARRAY = frozenset(
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
_STRING = frozenset({"minLength", "maxLength", "pattern", "format"})
_NUMBER = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
_BY_TYPE = {
    "object": _OBJECT,
    "array": _ARRAY,
    "string": _STRING,
    "integer": _NUMBER,
    "number": _NUMBER,
    "boolean": frozenset(),
}
_COMBINATORS = ("allOf", "anyOf", "oneOf")
_NOT_NATIVE = {
    "pattern": "a string pattern",
    "format": "a string format",
    "multipleOf": "multipleOf",
    "prefixItems": "a tuple array (prefixItems)",
    "contains": "'contains'",
    "not": "'not'",
    "if": "a conditional schema (if/then/else)",
}
_REFUSED = {
    "$dynamicRef": "$dynamicRef is not supported",
    "$recursiveRef": "$recursiveRef is not supported",
}


MAX_UNIQUE_VALUES = 64
"""Most values an item of a ``uniqueItems`` list may have for the list's bound to follow from
them (at most as many items as values, and `IRLimits.max_unique_work`): the writer's solver
enumerates an item's feasible values, 64 at most at once."""


class _NothingWritable(IRError):
    """No value the writer can write passes the schema at this place."""


class _TooLarge(IRError):
    """The native layout would pass a limit: the whole record becomes one grammar value."""


class _NotNative(IRError):
    """The writer does not lay this sub-schema out itself: it becomes a grammar value."""


def _never_written() -> JsonDict:
    """The item of an array whose only value is ``[]``: a placeholder the writer never writes."""
    return {"type": "leaf", "kind": "str", "nullable": False, "min_length": 0}


def ir_from_json_schema(
    schema: object, *, name: str = "Record", limits: IRLimits = DEFAULT_LIMITS
) -> JsonDict:
    """A relation IR with the layout of ``schema`` (and the factors of its ``uniqueItems``).

    Every record the IR's writer produces validates against ``schema`` with `jsonschema`
    (see the module docstring for each keyword). An object that allows no undeclared key
    has its properties written in the order the schema lists them, all of them; a property
    that can have no value the writer can write is left out (unless required). Arrays
    without ``maxItems`` get the default bound of 16 items. A sub-schema the writer does
    not lay out itself is one grammar value (``{"type": "grammar", "schema": ...}``,
    self-contained, draft 2020-12), generated by llguidance: among them objects that allow
    undeclared keys (unless a relation reads under one, or llguidance refuses it: then its
    declared keys, marked ``undeclared_keys``), and nodes without ``type``.

    Raises:
        IRError: the schema uses something neither the writer nor llguidance can guarantee
            (llguidance's message included), its root is not an object the writer lays
            out, it is unsatisfiable (for the writer) at a place it names, or malformed.
    """
    if not isinstance(schema, dict):
        raise IRError("the JSON schema must be an object")
    if json_depth(schema, limits.max_json_depth) > limits.max_json_depth:
        raise IRError(f"the JSON schema nests deeper than {limits.max_json_depth} levels")
    conv = _Converter(schema, limits)
    try:
        layout = conv.node(schema, "#", (), 0)
    except _NothingWritable as exc:
        raise IRError(f"the JSON schema is unsatisfiable: {exc.message}") from None
    except _TooLarge:
        layout = conv.root_grammar()
    if layout["type"] == "object" and _unrolled(layout) > limits.max_unrolled_nodes:
        layout = conv.root_grammar()  # the writer would unroll its lists past the limit
    elif layout["type"] not in ("object", "grammar"):
        layout = conv.root_grammar()  # an array, a string, ...: the whole record
    # last, as it is the slow part: the keywords read above were shape-checked on the way
    json_schema_validator(schema, check_schema=True)
    if layout["type"] == "object":
        layout["nullable"] = False  # an object is all the root may be
        layout["name"] = name
    return {"factorspec_ir": IR_VERSION, "name": name, "layout": layout, **conv.relations(layout)}


def _unrolled(node: JsonDict, mult: int = 1) -> int:
    """Nodes of a layout once every list is unrolled to its bound (as `spec_from_ir` counts)."""
    total = mult
    if node["type"] == "object":
        for f in node["fields"]:  # type: ignore[attr-defined]
            total += _unrolled(f["node"], mult)
    elif node["type"] == "list":
        bound = node["max_length"]
        assert isinstance(bound, int)  # built by _array
        total += _unrolled(node["item"], mult * max(bound, 1))  # type: ignore[arg-type]
    return total


class _Converter:
    def __init__(self, root: JsonDict, limits: IRLimits) -> None:
        self.root = root
        self.limits = limits
        self.count = 0
        self.validator = json_schema_validator(root, check_schema=False)
        cls = type(self.validator)
        if cls is jsonschema.Draft3Validator:
            raise IRError("draft 3 schemas are not supported; use draft 4 or later")
        self.keywords = frozenset(cls.VALIDATORS)
        self.legacy = cls in _LEGACY
        self.id_key = "id" if cls is jsonschema.Draft4Validator else "$id"
        self.unique: dict[int, tuple[JsonDict, str]] = {}  # lists whose items differ, by id
        self.unique_anywhere = _mentions_unique(root)
        self.reading = 0  # how many uniqueItems lists the node being laid out is an item of

    def relations(self, layout: JsonDict) -> JsonDict:
        """The IR's ``strings``, ``variables`` and ``factors``: the items of a unique list differ.

        See `unique_relations`: one factor ``uniqueItems of <path>`` per place of each list
        `_unique` laid out. Empty when no list is unique.

        Raises:
            IRError: the factors need more variables or factors than the limits allow, or
                two places of the layout spell the same variable name (a key with a dot).
        """
        return unique_relations(layout, self.unique, self.limits)

    def _valid(self, s: object, value: str | int | bool | None, where: str) -> bool:
        """Whether `jsonschema` accepts ``value`` for the node ``s`` ($refs from the root)."""
        v: Validator = self.validator.evolve(schema=s)
        try:
            return v.is_valid(value)
        except Exception as exc:  # a malformed schema (the meta-schema check comes last)
            raise IRError(f"{where}: jsonschema cannot evaluate the schema: {exc}") from None

    def _resolve(self, ref: object, where: str) -> object:
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            raise IRError(f"{where}: only local $ref ('#/$defs/Name') is supported, got {ref!r}")
        node: object = self.root
        moved = False
        for part in unquote(ref[2:]).split("/") if ref != "#" else []:
            moved = moved or (node is not self.root and self._moves_base(node))
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                raise IRError(f"{where}: $ref {ref!r} does not resolve")
        if moved and has_ref(node):
            raise IRError(
                f"{where}: $ref {ref!r} points under an embedded {self.id_key}, which moves "
                "the base its $refs resolve against; not supported"
            )
        return node

    def _moves_base(self, s: object) -> bool:
        """Whether ``s`` is a schema with an embedded id that is not a plain-name anchor."""
        if not isinstance(s, dict):
            return False
        v = s.get(self.id_key)
        return isinstance(v, str) and not v.startswith("#")

    def node(self, s: object, where: str, refs: tuple[str, ...], depth: int) -> JsonDict:
        """The layout of schema ``s``; `_NothingWritable` when the writer has no value for it.

        A sub-schema the writer does not lay out itself is one grammar value (its whole
        sub-tree, made self-contained by `standalone_schema`), checked by llguidance here so
        that a refusal names the place.
        """
        try:
            return self._native(s, where, refs, depth)
        except _NotNative as exc:
            return self._grammar(s, where, exc.message)

    def _grammar(self, s: object, where: str, reason: str) -> JsonDict:
        """The grammar value of sub-schema ``s``, which the writer does not lay out (``reason``)."""
        if where == "#":
            return self.root_grammar(reason)
        schema = standalone_schema(
            s, where, root=self.root, dialect=type(self.validator), resolve=self._resolve
        )

        def fail(why: str) -> IRError:
            return IRError(f"{reason}, and as a grammar value {why}")

        grammar_layout(schema, fail)
        return {"type": "grammar", "schema": schema}

    def root_grammar(
        self, reason: str = "#: the root is no object the writer lays out"
    ) -> JsonDict:
        """The whole record as one grammar value (the root is not laid out natively)."""
        schema = standalone_schema(
            self.root, "#", root=self.root, dialect=type(self.validator), resolve=self._resolve
        )

        def fail(why: str) -> IRError:
            return IRError(f"{reason}, and as a grammar value {why}")

        grammar_layout(schema, fail)
        return {"type": "grammar", "schema": schema}

    def _native(self, s: object, where: str, refs: tuple[str, ...], depth: int) -> JsonDict:
        self.count += 1
        if self.count > self.limits.max_layout_nodes:
            raise _TooLarge(f"the JSON schema has more than {self.limits.max_layout_nodes} nodes")
        if depth > self.limits.max_layout_depth:
            raise IRError(f"{where}: the schema nests deeper than {self.limits.max_layout_depth}")
        if s is True:
            raise _NotNative(f"{where}: any JSON value (true)")
        if s is False:
            raise _NothingWritable(f"{where}: the schema false accepts no value")
        if not isinstance(s, dict):
            raise IRError(f"{where}: a schema must be an object")
        if depth and self._moves_base(s) and has_ref(s):
            raise IRError(
                f"{where}: an embedded {self.id_key} moves the base its $refs resolve "
                "against; not supported"
            )
        kws = {k for k in s if k in self.keywords}
        if "enum" in kws or "const" in kws:
            return self._enum(s, where)
        if "$ref" in kws:
            siblings = set() if self.legacy else kws - {"$ref"}
            if siblings:
                raise _NotNative(f"{where}: $ref beside {', '.join(sorted(siblings))}")
            ref = s["$ref"]
            if ref in refs:
                raise _NotNative(f"{where}: a recursive schema ($ref {ref!r})")
            target = self._resolve(ref, where)
            return self.node(target, f"{where}/$ref", (*refs, str(ref)), depth + 1)
        nullable = self._valid(s, None, where)
        found = [k for k in _COMBINATORS if k in kws]
        if found:
            return self._combinator(s, kws, found, where, refs, depth, nullable)
        for key in ("$dynamicRef", "$recursiveRef"):
            if key in kws:
                raise IRError(f"{where}: {_REFUSED[key]}")
        for key in ("not", "if"):
            if key in kws:
                raise _NotNative(f"{where}: {_NOT_NATIVE[key]}")
        t = s.get("type") if "type" in kws else None
        if not (t is None or isinstance(t, str) or _all_str(t)):
            raise IRError(f"{where}: type must be a type name or a list of them")
        if isinstance(t, list):
            types = [x for x in t if x != "null"]
            if len(types) > 1:
                raise _NotNative(f"{where}: a union of types {t!r}")
            if not types:
                raise _NothingWritable(f"{where}: only null is allowed, and never written alone")
            t = types[0]
        elif t == "null":
            raise _NothingWritable(f"{where}: only null is allowed, and never written alone")
        elif t is None:  # every value its keywords do not constrain passes, null included
            raise _NotNative(f"{where}: no type (any JSON value the keywords allow)")
        if t == "number":
            raise _NotNative(f"{where}: a number (float)")
        if t not in _BY_TYPE:
            raise IRError(f"{where}: type {t!r} is not supported")
        unknown = kws - {"type"} - _OBJECT - _ARRAY - _STRING - _NUMBER
        if unknown:  # a keyword a newer jsonschema asserts that this converter does not know
            raise IRError(f"{where}: {', '.join(sorted(unknown))} is not supported")
        applicable = kws & _BY_TYPE[t]
        if t == "object":
            return self._object(s, applicable, where, refs, depth, nullable)
        if t == "array":
            return self._array(s, applicable, where, refs, depth, nullable)
        if t == "integer":
            return self._integer(s, applicable, where, nullable)
        if t == "boolean":
            return {"type": "leaf", "kind": "bool", "nullable": nullable}
        return self._string(s, applicable, where, nullable)

    def _combinator(
        self,
        s: JsonDict,
        kws: set[str],
        found: list[str],
        where: str,
        refs: tuple[str, ...],
        depth: int,
        nullable: bool,
    ) -> JsonDict:
        key = found[0]
        others = kws - {key}
        if others - {"type"}:
            raise _NotNative(f"{where}: {key} beside {', '.join(sorted(others))}")
        alts = _shaped(s[key], list, where, key)
        if key == "allOf":
            if len(alts) != 1:
                raise _NotNative(f"{where}: allOf with several schemas")
            i, alt = 0, alts[0]
        else:
            rest = [(i, a) for i, a in enumerate(alts) if not self._null_only(a)]
            if len(rest) != 1:
                raise _NotNative(f"{where}: {key} of several schemas (other than X | null)")
            i, alt = rest[0]
        if "type" in others and isinstance(alt, dict) and not {"type", "$ref"} & set(alt):
            # the same instance: the sibling type is the untyped alternative's own
            alt = {**alt, "type": s["type"]}
        try:
            out = self.node(alt, f"{where}/{key}/{i}", refs, depth + 1)
        except _NothingWritable:
            if nullable:
                raise _NothingWritable(
                    f"{where}: only null is allowed, and never written alone"
                ) from None
            raise
        if out["type"] == "grammar":  # the whole combinator is then one grammar value
            raise _NotNative(f"{where}/{key}/{i}: a grammar value under {key}")
        if "type" in others:
            self._fit_type(s["type"], out, f"{where}/{key}/{i}")
        # a value of `alt` matches no null-only alternative, so oneOf holds for it too;
        # null is written only where the whole node (its type included) accepts it
        out["nullable"] = nullable
        return self._writable_null(s, where, out)

    def _fit_type(self, t: object, out: JsonDict, where: str) -> None:
        """Check that the values of layout ``out`` all have JSON type ``t`` (a sibling)."""
        if out["type"] == "leaf" and out["kind"] == LeafKind.ENUM:
            choices = out["choices"]
            assert isinstance(choices, list)  # built by _enum
            kept = [c for c in choices if self._valid({"type": t}, c, where)]
            if not kept:
                raise _NothingWritable(f"{where}: no enum value has the sibling type {t!r}")
            out["choices"] = kept
            return
        if out["type"] == "leaf":
            written = {"int": "integer", "bool": "boolean", "str": "string"}[str(out["kind"])]
        else:
            written = "object" if out["type"] == "object" else "array"
        names = {t} if isinstance(t, str) else set(t) if isinstance(t, list) else set()
        if written not in names and not (written == "integer" and "number" in names):
            raise IRError(f"{where}: the {written} values written here do not fit type {t!r}")

    def _null_only(self, s: object) -> bool:
        """Whether ``s`` is ``{"type": "null"}`` (besides keywords the dialect ignores)."""
        return (
            isinstance(s, dict)
            and s.get("type") == "null"
            and not ({k for k in s if k in self.keywords} - {"type"})
        )

    def _enum(self, s: JsonDict, where: str) -> JsonDict:
        values = _shaped(s["enum"], list, where, "enum") if "enum" in s else [s["const"]]
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
            if not self._valid(s, w, where):
                rejected += 1
                continue
            if w is None:
                nullable = True
            elif (type(w), w) not in seen:
                seen.add((type(w), w))
                choices.append(w)
        if not choices and unwritable:
            raise _NotNative(
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
            raise _NothingWritable(
                f"{where}: no enum/const value can be written ({'; '.join(why)})"
            )
        return {"type": "leaf", "kind": "enum", "nullable": nullable, "choices": choices}

    def _object(
        self,
        s: JsonDict,
        kws: set[str],
        where: str,
        refs: tuple[str, ...],
        depth: int,
        nullable: bool,
    ) -> JsonDict:
        props = _shaped(s.get("properties", {}), dict, where, "properties")
        required = _shaped(s.get("required", []), list, where, "required")
        if not all(isinstance(k, str) for k in required):
            raise IRError(f"{where}: required must be a list of strings")
        if "" in props or "" in required:  # a field needs a name for its paths
            raise _NotNative(f"{where}: a property named by the empty string")
        patterns = self._patterns(s, kws, where)
        extra, extra_at = _extra_keys(s, kws, where)
        allows = extra is not False or any(p is not False for p in patterns.values())
        refused: str | None = None  # why the grammar form of this object was refused
        if (allows or nullable) and not self.unique_anywhere:  # no relation reads under it
            grammar, refused = self._open_grammar(s, where)
            if grammar is not None:
                return grammar
        fields: list[JsonDict] = []
        for key, sub in props.items():
            at = f"{where}/properties/{pointer_part(key)}"
            try:
                sub = self._key_schema(key, [sub], patterns)
                node = self.node(sub, at, refs, depth + 1)
            except _NothingWritable as exc:
                if key not in required:
                    continue  # absent-only: the writer never writes it
                if not self._valid(sub, None, at):
                    raise _NothingWritable(
                        f"{at}: the property is required, but {exc.message}"
                    ) from None
                node = self._grammar(sub, at, exc.message)  # null, written by the grammar
            field: JsonDict = {"name": key, "key": key, "node": node}
            if key not in required:
                field["optional"] = True  # the writer may leave it out
            fields.append(field)
        undeclared = [k for k in dict.fromkeys(required) if k not in props]
        for key in undeclared:
            if any(re.search(p, key) for p in patterns):  # additionalProperties is then moot
                at = f"{where}/patternProperties"
                fields.append(
                    {
                        "name": key,
                        "key": key,
                        "node": self.node(self._key_schema(key, [], patterns), at, refs, depth + 1),
                    }
                )
                continue
            if extra is False:
                raise IRError(
                    f"{where}: the schema is unsatisfiable there: required property {key!r} "
                    "is not under properties and additionalProperties is false"
                )
            try:
                node = self.node(extra, extra_at, refs, depth + 1)
            except _NothingWritable as exc:
                raise _NothingWritable(
                    f"{where}: required property {key!r} (not under properties) can have no "
                    f"value: {exc.message}"
                ) from None
            fields.append({"name": key, "key": key, "node": node})
        complete = not allows or refused is not None  # the writer writes no other key
        try:
            fields = self._key_set(s, kws, fields, set(required), where, complete=complete)
        except (_NotNative, _NothingWritable) as exc:
            if refused is None:
                raise
            hint = (  # counts and dependencies over optional keys: llguidance's closed objects
                "list every property in required, or set additionalProperties to false"
                if isinstance(exc, _NotNative)
                else "not supported"
            )
            raise IRError(
                f"{refused}; and its declared keys alone: {exc.message}; {hint}"
            ) from None
        title = s.get("title")
        out: JsonDict = {
            "type": "object",
            "name": title if isinstance(title, str) and title.isidentifier() else "Object",
            "fields": fields,
            "nullable": nullable,
        }
        if (allows or nullable) and refused is None and not self.reading:
            if not self._reads_below(out):
                grammar, refused = self._open_grammar(s, where)
                if grammar is not None:
                    return grammar
        if allows:  # a relation reads under it, or the grammar refuses it: declared keys only
            out["undeclared_keys"] = True
        return out

    def _open_grammar(self, s: JsonDict, where: str) -> tuple[JsonDict | None, str | None]:
        """The grammar value of an object whose native layout would narrow it, or why not.

        The writer writes no key an object does not declare, and no ``null`` for an object
        or list whose null-ness no relation reads.
        """
        reason = f"{where}: an object that allows keys it does not declare, or null"
        try:
            return self._grammar(s, where, reason), None
        except IRError as exc:  # llguidance (or standalone_schema) refuses it
            return None, exc.message

    def _writable_null(self, s: JsonDict, where: str, out: JsonDict) -> JsonDict:
        """``out``, a native list or object, or where it may be ``null``, ``s`` as a grammar value.

        The writer writes ``null`` for a list or object only where a relation reads its
        null-ness, so one the schema allows ``null`` for is the grammar value of ``s`` (which
        writes ``null`` too) where no relation reads it or under it. Where one does, or
        llguidance refuses the grammar, it stays native: ``null`` never written there, a
        restriction its layout shows (a nullable list or object without a null variable).
        """
        if out["type"] not in ("object", "list") or not out["nullable"]:
            return out  # a leaf writes its null itself
        if self.reading or self._reads_below(out):
            return out
        grammar, _ = self._open_grammar(s, where)
        return out if grammar is None else grammar

    def _reads_below(self, node: JsonDict) -> bool:
        """Whether a relation reads a value under layout ``node`` (a list laid out unique)."""
        stack = [node]
        while stack and self.unique:
            n = stack.pop()
            if id(n) in self.unique:
                return True
            if n["type"] == "object":
                fields = n["fields"]
                assert isinstance(fields, list)  # built by _object
                stack += [_dict(_dict(f)["node"]) for f in fields]
            elif n["type"] == "list":
                stack.append(_dict(n["item"]))
        return False

    def _patterns(self, s: JsonDict, kws: set[str], where: str) -> dict[str, object]:
        """The ``patternProperties`` of an object node (each pattern a Python regex)."""
        if "patternProperties" not in kws:
            return {}
        patterns = _shaped(s["patternProperties"], dict, where, "patternProperties")
        for pattern in patterns:
            try:  # as jsonschema matches: re.search
                re.compile(pattern)
            except re.error as exc:
                raise IRError(
                    f"{where}/patternProperties: {pattern!r} is not a regex: {exc}"
                ) from None
        return patterns

    @staticmethod
    def _key_schema(key: str, own: list[object], patterns: dict[str, object]) -> object:
        """A written key's schema: its own and those of the patterns that match it, all held."""
        schemas = own + [sub for p, sub in patterns.items() if re.search(p, key)]
        if any(x is False for x in schemas):
            return False  # no value: the key is absent-only (or the schema unsatisfiable)
        schemas = [x for x in schemas if x is not True and x != {}]
        if len(schemas) > 1:  # allOf of several: a grammar value
            return {"allOf": schemas}
        return schemas[0] if schemas else True

    def _key_set(
        self,
        s: JsonDict,
        kws: set[str],
        fields: list[JsonDict],
        required: set[str],
        where: str,
        *,
        complete: bool,
    ) -> list[JsonDict]:
        """The laid-out ``fields`` that can be written, under the keywords on an object's keys.

        A key ``propertyNames`` rejects is never written (it is left out: absent-only); so is
        one whose ``dependencies`` / ``dependentRequired`` list a key the layout does not
        have, where the layout's keys are all the writer writes (``complete``: the object is
        closed, or keeps its declared keys only). ``minProperties``, ``maxProperties``, a
        dependency's key list and a schema dependency are held natively where every key set
        the writer may write satisfies them: the required keys are always written, another
        may be left out (a writer's choice).

        Raises:
            _NothingWritable: a required key is never written, or (``complete``) no key set
                the writer may write has a count within the bounds.
            _NotNative: the bounds or dependencies hold for some of those key sets only, or
                (not ``complete``) need keys the layout does not have: the object is then a
                grammar value, whose grammar holds them.
        """
        deps: list[tuple[str, str, object]] = []
        for kw in ("dependencies", "dependentRequired", "dependentSchemas"):
            if kw in kws:
                deps += [(kw, k, d) for k, d in _shaped(s[kw], dict, where, kw).items()]
        for kw, key, dep in deps:
            if isinstance(dep, list) and not _all_str(dep):
                raise IRError(f"{where}/{kw}/{pointer_part(key)}: a dependency lists key names")
        if "propertyNames" in kws:
            names, at = s["propertyNames"], f"{where}/propertyNames"
            rejected = {str(f["key"]) for f in fields if not self._valid(names, str(f["key"]), at)}
            fields = self._without(fields, rejected, required, f"{at} rejects it")
        while True:  # a key left out may be one another key depends on
            keys = {str(f["key"]) for f in fields}
            lacking = {
                key: (kw, [d for d in dep if d not in keys])
                for kw, key, dep in deps
                if key in keys and isinstance(dep, list) and not set(dep) <= keys
            }
            if not lacking:
                break
            if not complete:  # an undeclared key may be the one it asks for
                raise _NotNative(f"{where}: a dependency on a key the object does not declare")
            for key, (kw, missing) in lacking.items():
                why = f"{kw} asks for {missing[0]!r} beside it, which is never written"
                fields = self._without(fields, {key}, required, f"{where}/{kw}: {why}")
        keys = {str(f["key"]) for f in fields}
        sure = keys & required
        lo = _integral(s.get("minProperties")) if "minProperties" in kws else None
        hi = _integral(s.get("maxProperties")) if "maxProperties" in kws else None
        if lo is not None and len(keys) < lo:
            if not complete:  # undeclared keys may make up the count
                raise _NotNative(f"{where}: minProperties {lo} above the declared keys")
            raise _NothingWritable(
                f"{where}: minProperties {lo}, but at most {len(keys)} of its keys can be written"
            )
        if hi is not None and len(sure) > hi:
            raise _NothingWritable(
                f"{where}: maxProperties {hi}, but {len(sure)} keys are required"
            )
        if lo is not None and len(sure) < lo:
            raise _NotNative(f"{where}: minProperties {lo} beside optional properties")
        if hi is not None and len(keys) > hi:
            raise _NotNative(f"{where}: maxProperties {hi} beside optional properties")
        for kw, key, dep in deps:
            if key not in keys or dep is True or dep == {}:
                continue
            at = f"{where}/{kw}/{pointer_part(key)}"
            if not isinstance(dep, list):
                raise _NotNative(f"{at}: a schema dependency of a key that may be written")
            if not set(dep) <= sure:
                raise _NotNative(f"{at}: {key!r} asks for keys that may be left out")
        return fields

    @staticmethod
    def _without(
        fields: list[JsonDict], keys: set[str], required: set[str], why: str
    ) -> list[JsonDict]:
        """``fields`` less those of ``keys``, which are never written (``why``)."""
        needed = sorted(keys & required)
        if needed:
            raise _NothingWritable(f"{why}, and {needed[0]!r} is required")
        return [f for f in fields if f["key"] not in keys]

    def _array(
        self,
        s: JsonDict,
        kws: set[str],
        where: str,
        refs: tuple[str, ...],
        depth: int,
        nullable: bool,
    ) -> JsonDict:
        for key in ("prefixItems", "contains"):
            if key in kws:
                raise _NotNative(f"{where}: {_NOT_NATIVE[key]}")
        if "items" in kws:
            items, items_at = s["items"], f"{where}/items"
            if isinstance(items, list):
                raise _NotNative(f"{where}: a tuple array (items as a list)")
        elif "unevaluatedItems" in kws:
            items, items_at = s["unevaluatedItems"], f"{where}/unevaluatedItems"
        else:
            items, items_at = True, f"{where}/items"  # absent: true
        lo = _count(s.get("minItems", 0), where, "minItems") if "minItems" in kws else 0
        bounded = "maxItems" in kws
        hi = (
            _count(s["maxItems"], where, "maxItems")
            if bounded
            else max(DEFAULT_MAX_LIST_LENGTH, lo)
        )
        if hi < lo:
            raise _NothingWritable(f"{where}: maxItems {hi} is below minItems {lo}")
        # uniqueItems: the factor that keeps the items apart reads everything in them
        read = "uniqueItems" in kws and s["uniqueItems"] is True and hi > 1
        self.reading += read
        try:
            item = self.node(items, items_at, refs, depth + 1)
        except _NothingWritable as exc:
            if lo:
                raise _NothingWritable(
                    f"{where}: minItems {lo}, but no item can be written: {exc.message}"
                ) from None
            item, hi, bounded = _never_written(), 0, True  # only the empty array
        finally:
            self.reading -= read
        unique = read and hi > 1
        if item["type"] == "grammar":  # one grammar value, not unrolled to its bound
            if unique:  # llguidance does not implement uniqueItems
                self._incomparable(where, "a grammar value (llguidance writes it)")
            raise _NotNative(f"{items_at}: an array of grammar values")
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
            raise _NotNative(
                f"{where}: room for {out['max_length']} items (the writer lays out at most "
                f"{self.limits.max_list_length})"
            )
        return self._writable_null(s, where, out)

    def _unique(self, out: JsonDict, where: str) -> None:
        """``uniqueItems`` on list ``out``, which has room for two items.

        Its items differ by a factor (`relations`), as `jsonschema` compares them
        (`factorspec_sdk.ir.unique`). Items with few values (`distinct_values`: at most
        `MAX_UNIQUE_VALUES`, ``null`` included) are at most as many as their values, and as
        `IRLimits.max_unique_work` allows (``minItems`` at least).

        Raises:
            IRError: the items hold something the writer cannot compare (a grammar value, an
                enum mixing value types).
            _NothingWritable: ``minItems`` asks for more items than there are values.
        """
        item = _dict(out["item"])
        problem = incomparable(item)
        if problem is not None:
            self._incomparable(where, problem)
        lo = _int(out["min_length"])
        values = distinct_values(item, MAX_UNIQUE_VALUES)
        if values is not None:
            if lo > values:
                raise _NothingWritable(
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

    def _integer(self, s: JsonDict, kws: set[str], where: str, nullable: bool) -> JsonDict:
        if "multipleOf" in kws and s["multipleOf"] != 1:
            raise _NotNative(f"{where}: {_NOT_NATIVE['multipleOf']}")
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
            raise _NothingWritable(f"{where}: no integer (within +-{INT_LIMIT}) is in bounds")
        out: JsonDict = {"type": "leaf", "kind": "int", "nullable": nullable}
        if ge > -INT_LIMIT:
            out["ge"] = ge
        if le < INT_LIMIT:
            out["le"] = le
        return out

    def _string(self, s: JsonDict, kws: set[str], where: str, nullable: bool) -> JsonDict:
        if "pattern" in kws:
            raise _NotNative(f"{where}: {_NOT_NATIVE['pattern']}")
        if "format" in kws and asserted_format(s["format"], type(self.validator)):
            raise _NotNative(f"{where}: {_NOT_NATIVE['format']}")
        lo = _count(s["minLength"], where, "minLength") if "minLength" in kws else 0
        leaf: JsonDict = {"type": "leaf", "kind": "str", "nullable": nullable, "min_length": lo}
        if "maxLength" in kws:
            hi = _count(s["maxLength"], where, "maxLength")
            if hi < lo:
                raise _NothingWritable(f"{where}: maxLength {hi} is below minLength {lo}")
            leaf["max_length"] = hi
        if max(lo, _as_int(leaf.get("max_length", 0))) > self.limits.max_text_length:
            raise _NotNative(f"{where}: a string length past {self.limits.max_text_length}")
        return leaf


def _dict(v: object) -> JsonDict:
    assert isinstance(v, dict)  # a layout node this module built
    return v


def _int(v: object) -> int:
    assert isinstance(v, int)  # a layout bound this module built
    return v


def _extra_keys(s: JsonDict, kws: set[str], where: str) -> tuple[object, str]:
    """The schema of an object's keys that no ``properties`` or pattern names, and its place.

    ``additionalProperties``, else ``unevaluatedProperties`` (the keys under ``properties``
    and ``patternProperties`` are evaluated), else ``true``: any key, any value.
    """
    if "additionalProperties" in kws:
        return s["additionalProperties"], f"{where}/additionalProperties"
    if "unevaluatedProperties" in kws:
        return s["unevaluatedProperties"], f"{where}/unevaluatedProperties"
    return True, f"{where}/additionalProperties"  # absent: true (never the object's own place)


def _integral(v: object) -> int | None:
    """An integer keyword's value (``2.0`` is 2, as meta-schemas since draft 6 allow)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _mentions_unique(root: object) -> bool:
    """Whether ``uniqueItems: true`` appears anywhere in the document (a relation may read)."""
    stack = [root]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if x.get("uniqueItems") is True:
                return True
            stack += x.values()
        elif isinstance(x, list):
            stack += x
    return False


def _shaped(v: object, kind: type[_T], where: str, key: str) -> _T:
    if not isinstance(v, kind):
        what = "a list" if kind is list else "an object" if kind is dict else kind.__name__
        raise IRError(f"{where}: {key} must be {what}")
    return v


def _as_int(v: object) -> int:
    assert isinstance(v, int)  # a count read by _count
    return v


def _all_str(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _count(v: object, where: str, key: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise IRError(f"{where}: {key} must be a non-negative integer")
    return v
