"""From a JSON Schema (as OpenAI's ``response_format`` carries it) to an IR.

Its only relations keep the items of ``uniqueItems`` lists distinct.

**The contract**: every record the writer can produce from the IR validates, with the
`jsonschema` package, against the schema the client sent (`json_schema_validator`: its
``$schema`` dialect, draft 2020-12 when absent, formats asserted). What the converter cannot
guarantee is an `IRError` naming the place (``#/properties/a/items``), never silently
dropped. The writer's values are a *subset* of what the schema accepts: it writes a property
not ``required`` or leaves it out (always writes it where a ``uniqueItems`` factor
compares it between the items of its list, a named restriction:
`factorspec_sdk.relations.restrictions`; a factor is about its list alone, its IR
``scope``, so the key of the list or of an object above it may be left out), integers
within ``+-(10**18 - 1)``, fewer items in a ``uniqueItems`` array of items with few
values than the schema allows where `IRLimits.max_unique_work` cuts them, at most
`OTHER_KEYS_BOUNDS` other keys where the schema sets no ``maxProperties``, and the declared
keys only of an object marked ``undeclared_keys`` (below: its other keys are under keywords
free keys cannot hold, and a relation reads under it or llguidance refuses its grammar), a
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
llguidance's message; so is a grammar whose parse passes llguidance's parser limits at the
value's start (an ``allOf`` of many ``if``/``then`` pairs:
`factorspec_sdk.relations.grammar_check`), which would otherwise fail at a request's first
token. A root that is no object the writer lays out (an array, a string,
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
      ``propertyNames`` (a declared key it rejects is never written; one that is an
      ``enum`` or ``const``, through ``$ref``, makes any object the closed object of the
      names it accepts, each under its own schema, the patterns that match it, else
      ``additionalProperties``: `factorspec_sdk.ir.finite_keys`, also in grammar values),
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
      (``propertyNames`` that is no ``enum`` / ``const``, ``minProperties`` /
      ``maxProperties`` beside more optional
      properties than `standalone_schema` splits into branches, a ``oneOf`` it cannot
      prove, ...). Then it is native: its properties, the required keys not
      under ``properties`` after them (with the schemas of the patterns that match them,
      else of ``additionalProperties``, else of ``unevaluatedProperties``), each declared
      key holding the schemas of the patterns that match it (by `re.search`, as
      `jsonschema` matches: the value is the grammar value of their ``allOf``), and the key
      keywords as for a closed object; where those cannot hold (``minProperties`` above
      the declared keys), it is refused with llguidance's reason. Its *other keys* are a
      last field of their own (``others``: a dict of free keys written inside the object's
      braces after the declared keys, each under ``additionalProperties``, at most
      `OTHER_KEYS_BOUNDS` of them), with the factor ``other keys of <path>`` (keys
      distinct, none a declared key); where declared keys are optional the next key is a
      *key slot*, one free string whose text tells a declared key from an other one. Where
      free keys cannot hold the object's keywords (``patternProperties``,
      ``propertyNames``, ``minProperties`` / ``maxProperties``, dependencies), its
      ``additionalProperties`` is refused as a grammar value, it is an item of a
      ``uniqueItems`` list (the factor compares items by their declared keys), or the
      layout would pass the limits, it keeps its declared keys only and is marked
      ``undeclared_keys``.
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
  ``contains``, ``propertyNames`` that is no ``enum`` / ``const`` inside a grammar value
  (an object that allows undeclared keys keeps its declared ones instead),
  ``unevaluatedProperties`` / ``unevaluatedItems`` beside ``allOf``, ``$ref``, ``if``,
  ... in a grammar value, ``minProperties`` / ``maxProperties`` beside more than six
  optional properties in an object that allows undeclared keys (but a ``minProperties``
  one above its required keys; and where its declared keys cannot hold them either),
  ``not`` of what `standalone_schema` cannot negate (``enum``, ``const``, ``$ref``,
  ...), a ``oneOf`` neither proves exclusive (and one llguidance would prove from branches
  the grammar narrows, a negation, as a value of one could pass the other's schema),
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

from factorspec_sdk.ir.jsonschema_arrays import MAX_UNIQUE_VALUES, ArrayConverter
from factorspec_sdk.ir.jsonschema_base import NothingWritable, NotNative, TooLarge
from factorspec_sdk.ir.jsonschema_combinators import CombinatorConverter
from factorspec_sdk.ir.jsonschema_keywords import (
    ARRAY_KEYWORDS,
    BY_TYPE,
    COMBINATORS,
    NOT_NATIVE,
    NUMBER_KEYWORDS,
    OBJECT_KEYWORDS,
    REFUSED,
    STRING_KEYWORDS,
    JsonDict,
    all_str,
)
from factorspec_sdk.ir.jsonschema_leaves import LeafConverter
from factorspec_sdk.ir.jsonschema_objects import ObjectConverter
from factorspec_sdk.ir.limits import DEFAULT_LIMITS, IRError, IRLimits, json_depth
from factorspec_sdk.ir.model import IR_VERSION
from factorspec_sdk.ir.schema_check import json_schema_validator
from factorspec_sdk.ir.standalone import has_ref
from factorspec_sdk.relations.layout import DEFAULT_MAX_LIST_LENGTH

__all__ = ["MAX_UNIQUE_VALUES", "ir_from_json_schema"]


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
    for bound in OTHER_KEYS_BOUNDS:
        try:
            layout, relations = _convert(schema, limits, others=bound)
            break
        except _OthersTooLarge:  # the other keys' entries pass a limit: fewer of them
            continue
    else:  # declared keys only, as objects under a relation were before other keys
        layout, relations = _convert(schema, limits, others=0)
    # last, as it is the slow part: the keywords read above were shape-checked on the way
    json_schema_validator(schema, check_schema=True)
    if layout["type"] == "object":
        layout["nullable"] = False  # an object is all the root may be
        layout["name"] = name
    return {"factorspec_ir": IR_VERSION, "name": name, "layout": layout, **relations}


OTHER_KEYS_BOUNDS = (DEFAULT_MAX_LIST_LENGTH, 8, 4)
"""The most other keys an object laid out natively may get where its schema sets no
``maxProperties``: the first bound whose layout stays within the limits (`IRLimits`: nodes
once unrolled, solver variables); past the last, its declared keys only."""


class _OthersTooLarge(Exception):
    """A layout with native other keys passed a limit (`_convert`)."""


def _convert(schema: JsonDict, limits: IRLimits, *, others: int) -> tuple[JsonDict, JsonDict]:
    """The layout of ``schema`` and its relations.

    With ``others`` (a bound above 0), an object's other keys are laid out natively where
    they can be, at most that many (`ObjectConverter.object_node`); where the layout then
    passes a limit (its nodes, once unrolled, or the solver variables of its factors),
    `_OthersTooLarge`: the caller lays it out again with a lower bound, or without them
    (declared keys only, the ``undeclared keys`` restriction).
    """
    conv = _Converter(schema, limits, others=others)
    try:
        layout = conv.node(schema, "#", (), 0)
    except NothingWritable as exc:
        raise IRError(f"the JSON schema is unsatisfiable: {exc.message}") from None
    except TooLarge:
        if conv.made_others:
            raise _OthersTooLarge from None
        layout = conv.root_grammar()
    if layout["type"] == "object" and _unrolled(layout) > limits.max_unrolled_nodes:
        if conv.made_others:
            raise _OthersTooLarge
        layout = conv.root_grammar()  # the writer would unroll its lists past the limit
    elif layout["type"] not in ("object", "grammar"):
        layout = conv.root_grammar()  # an array, a string, ...: the whole record
    try:
        return layout, conv.relations(layout)
    except IRError:
        if conv.made_others:
            raise _OthersTooLarge from None
        raise


def _unrolled(node: JsonDict, mult: int = 1) -> int:
    """Nodes of a layout once every list is unrolled to its bound (as `spec_from_ir` counts)."""
    total = mult
    if node["type"] == "object":
        for f in node["fields"]:  # type: ignore[attr-defined]
            total += _unrolled(f["node"], mult)
    elif node["type"] == "list":
        bound = node["max_length"]
        assert isinstance(bound, int)  # built by array_node
        total += _unrolled(node["item"], mult * max(bound, 1))  # type: ignore[arg-type]
    return total


class _Converter(ObjectConverter, ArrayConverter, CombinatorConverter, LeafConverter):
    """One conversion: a node's keywords dispatched to the part that lays its kind out."""

    def node(self, s: object, where: str, refs: tuple[str, ...], depth: int) -> JsonDict:
        """The layout of schema ``s``; `NothingWritable` when the writer has no value for it.

        A sub-schema the writer does not lay out itself is one grammar value (its whole
        sub-tree, made self-contained by `standalone_schema`), checked by llguidance here so
        that a refusal names the place.
        """
        try:
            return self._native(s, where, refs, depth)
        except NotNative as exc:
            return self.grammar(s, where, exc.message)

    def _native(self, s: object, where: str, refs: tuple[str, ...], depth: int) -> JsonDict:
        self.count += 1
        if self.count > self.limits.max_layout_nodes:
            raise TooLarge(f"the JSON schema has more than {self.limits.max_layout_nodes} nodes")
        if depth > self.limits.max_layout_depth:
            raise IRError(f"{where}: the schema nests deeper than {self.limits.max_layout_depth}")
        if s is True:
            raise NotNative(f"{where}: any JSON value (true)")
        if s is False:
            raise NothingWritable(f"{where}: the schema false accepts no value")
        if not isinstance(s, dict):
            raise IRError(f"{where}: a schema must be an object")
        if depth and self.moves_base(s) and has_ref(s):
            raise IRError(
                f"{where}: an embedded {self.id_key} moves the base its $refs resolve "
                "against; not supported"
            )
        kws = {k for k in s if k in self.keywords}
        if "enum" in kws or "const" in kws:
            return self.enum_node(s, where)
        if "$ref" in kws:
            siblings = set() if self.legacy else kws - {"$ref"}
            if siblings:
                raise NotNative(f"{where}: $ref beside {', '.join(sorted(siblings))}")
            ref = s["$ref"]
            if ref in refs:
                raise NotNative(f"{where}: a recursive schema ($ref {ref!r})")
            target = self.resolve(ref, where)
            return self.node(target, f"{where}/$ref", (*refs, str(ref)), depth + 1)
        nullable = self.valid(s, None, where)
        found = [k for k in COMBINATORS if k in kws]
        if found:
            return self.combinator_node(s, kws, found, where, refs, depth, nullable)
        for key in ("$dynamicRef", "$recursiveRef"):
            if key in kws:
                raise IRError(f"{where}: {REFUSED[key]}")
        for key in ("not", "if"):
            if key in kws:
                raise NotNative(f"{where}: {NOT_NATIVE[key]}")
        t = s.get("type") if "type" in kws else None
        if not (t is None or isinstance(t, str) or all_str(t)):
            raise IRError(f"{where}: type must be a type name or a list of them")
        if isinstance(t, list):
            types = [x for x in t if x != "null"]
            if len(types) > 1:
                raise NotNative(f"{where}: a union of types {t!r}")
            if not types:
                raise NothingWritable(f"{where}: only null is allowed, and never written alone")
            t = types[0]
        elif t == "null":
            raise NothingWritable(f"{where}: only null is allowed, and never written alone")
        elif t is None:  # every value its keywords do not constrain passes, null included
            raise NotNative(f"{where}: no type (any JSON value the keywords allow)")
        if t == "number":
            raise NotNative(f"{where}: a number (float)")
        if t not in BY_TYPE:
            raise IRError(f"{where}: type {t!r} is not supported")
        unknown = (
            kws - {"type"} - OBJECT_KEYWORDS - ARRAY_KEYWORDS - STRING_KEYWORDS - NUMBER_KEYWORDS
        )
        if unknown:  # a keyword a newer jsonschema asserts that this converter does not know
            raise IRError(f"{where}: {', '.join(sorted(unknown))} is not supported")
        applicable = kws & BY_TYPE[t]
        if t == "object":
            return self.object_node(s, applicable, where, refs, depth, nullable)
        if t == "array":
            return self.array_node(s, applicable, where, refs, depth, nullable)
        if t == "integer":
            return self.integer_node(s, applicable, where, nullable)
        if t == "boolean":
            return {"type": "leaf", "kind": "bool", "nullable": nullable}
        return self.string_node(s, applicable, where, nullable)
