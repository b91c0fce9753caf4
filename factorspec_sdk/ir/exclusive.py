"""Whether sub-schemas are pairwise exclusive under `jsonschema`'s semantics (False when unsure).

A ``oneOf`` whose branches no instance satisfies two of is exactly the ``anyOf`` of them:
`standalone_schema` rewrites it so, as llguidance refuses a ``oneOf`` it cannot prove exclusive
itself. `exclusive` answers with a `Proof` only when it has one, for the document's dialect as
`jsonschema` reads it, and None when unsure.

The proof over-approximates: each schema is summed up as a disjunction of *shapes* (what every
instance is known to satisfy: its JSON types, a finite set of values, string lengths, a number
range, required and absent keys, the schemas a present key's value satisfies, item counts and
the schemas every item satisfies), read from the keywords below; every other keyword is left
out, which only adds instances, so a summary holds every instance of its schema. Two schemas
are exclusive when the meet of each pair of their shapes is empty by one of these rules (the
names `Proof.rules` holds):

* ``types``: no JSON type in common. ``type`` names them (``integer`` lies within ``number``;
  ``not: {type: integer}`` in draft 4, where 1.0 is no integer, keeps the integers), so do the
  values of ``enum`` / ``const``; a schema without ``type`` has every type, whatever keywords
  of one type it holds (``{"properties": ...}`` accepts every string).
* ``values``: no value of an ``enum`` / ``const`` passes the other shape, its ``pattern``
  (by `re.search`) included (values compared as `jsonschema` compares them: ``1 == 1.0``,
  ``true != 1``).
* ``property values``: a key that one side requires (the other need not) holds values the
  two sides' schemas for it share none of (recursively: ``{"const": "a"}`` against
  ``{"enum": ["b", "c"]}``; a key's schema is that of ``properties`` and of every
  ``patternProperties`` pattern that matches it by `re.search`, else ``additionalProperties``).
* ``forbidden key``: a required key that the other side cannot hold (``additionalProperties:
  false`` and no ``properties`` or pattern for it, ``properties: {k: false}``, ``not:
  {required: [k]}``); ``property count``: more required keys than ``maxProperties``.
* ``string length``, ``number range``, ``array length``: ``minLength`` / ``maxLength``,
  ``minimum`` / ``maximum`` / ``exclusiveMinimum`` / ``exclusiveMaximum`` (draft 4's
  Boolean modifiers; integers between two bounds) and ``minItems`` / ``maxItems`` that leave
  nothing; ``array items``: arrays of at least one item whose item schemas are exclusive.
* ``empty branch``: a branch that accepts nothing alone (one that accepts nothing beside the
  siblings counts the rule that shows it).

``allOf`` and ``$ref`` (resolved through the document; drafts 4 to 7 ignore the siblings of
``$ref``) meet; ``anyOf`` and ``oneOf`` join; ``if`` / ``then`` / ``else`` is ``if`` and
``then``, or the complement of ``if`` and ``else``. A complement (``not``) is read where the
negated schema holds only ``type``, ``required``, ``not``, ``allOf``, ``anyOf`` and ``$ref``
to such schemas (it fails one of them); any other ``not`` says nothing. A recursive ``$ref``
says nothing where it comes back, and so does a ``$ref`` under an embedded ``$id``. Keywords
the dialect does not define are ignored, as `jsonschema` ignores them (``const`` in draft 4).
The shapes of a summary are at most 64 (more are joined into one: their types and values),
and a question takes a bounded amount of work (past it the answer is None).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import jsonschema
from jsonschema.protocols import Validator

from factorspec_sdk.ir.limits import IRError

__all__ = ["Proof", "exclusive", "has_ref"]

_ALL = frozenset({"null", "boolean", "object", "array", "string", "integer", "fraction"})
"""The JSON types, with numbers split: integral ones (``1``, ``1.0``) and the others."""
_NUMBER = frozenset({"integer", "fraction"})
_TYPE = {
    "null": frozenset({"null"}),
    "boolean": frozenset({"boolean"}),
    "object": frozenset({"object"}),
    "array": frozenset({"array"}),
    "string": frozenset({"string"}),
    "integer": frozenset({"integer"}),
    "number": _NUMBER,
}
_LEGACY_REF = (jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator)
_MAX_SHAPES = 64
"""Most shapes a summary keeps; past it they are joined into one (their types and values)."""
_BUDGET = 50_000
"""Most shape operations one question may take; past it the answer is None."""


@dataclass(frozen=True, slots=True)
class Proof:
    """Schemas shown pairwise exclusive: the names of the rules the proof used."""

    rules: frozenset[str]


class _GiveUp(Exception):
    pass


@dataclass(frozen=True, slots=True)
class _Bound:
    value: Fraction
    strict: bool


@dataclass(frozen=True, slots=True)
class _Keys:
    """The key keywords of one schema: the schemas a present key's value satisfies there."""

    properties: Mapping[str, object]
    patterns: tuple[tuple[re.Pattern[str], object], ...]
    additional: object


@dataclass(frozen=True, slots=True)
class _Shape:
    """What every instance of (a part of) a schema satisfies; each keyword on its own type."""

    types: frozenset[str] = _ALL
    values: tuple[object, ...] | None = None
    min_length: int = 0
    max_length: int | None = None
    patterns: tuple[re.Pattern[str], ...] = ()
    lo: _Bound | None = None
    hi: _Bound | None = None
    required: frozenset[str] = frozenset()
    absent: frozenset[str] = frozenset()
    min_props: int = 0
    max_props: int | None = None
    keys: tuple[_Keys, ...] = ()
    min_items: int = 0
    max_items: int | None = None
    items: tuple[object, ...] = ()


_Summary = tuple[_Shape, ...]
"""A disjunction of shapes: every instance satisfies one of them (``()``: no instance)."""
_TOP: _Summary = (_Shape(),)


def exclusive(
    schemas: Sequence[object],
    *,
    given: object = True,
    root: object,
    dialect: type[Validator],
    resolve: Callable[[str], object],
) -> Proof | None:
    """A proof that no instance satisfying ``given`` satisfies two of ``schemas``, or None.

    Args:
        schemas: the sub-schemas (a ``oneOf``'s branches), as the document has them.
        given: a schema every instance in question satisfies (the ``oneOf``'s siblings).
        root: the document (its own ``$id`` does not move the base of its ``$ref``).
        dialect: the document's `jsonschema` validator class.
        resolve: ``resolve(ref)`` is the schema a ``$ref`` points to in the document; an
            `IRError` from it makes that ``$ref`` say nothing.
    """
    prover = _Prover(root, dialect, resolve)
    try:
        context = prover.summary(given)
        rules: set[str] = set()
        branches: list[_Summary] = []
        for s in schemas:
            own = prover.summary(s)
            branches.append(prover.conj([context, own]))
            if not branches[-1]:  # by what the siblings rule out, or empty alone
                why = [prover.empty(prover.meet(c, x)) for c in context for x in own]
                rules |= set().union(*(r for r in why if r)) or {"empty branch"}
        for i, a in enumerate(branches):
            for b in branches[i + 1 :]:
                for x in a:
                    for y in b:
                        found = prover.empty(prover.meet(x, y))
                        if found is None:
                            return None
                        rules |= found
    except (_GiveUp, RecursionError):
        return None
    return Proof(frozenset(rules))


class _Prover:
    def __init__(
        self, root: object, dialect: type[Validator], resolve: Callable[[str], object]
    ) -> None:
        self.root = root
        self.keywords = frozenset(dialect.VALIDATORS)
        self.legacy_ref = dialect in _LEGACY_REF
        self.draft4 = dialect is jsonschema.Draft4Validator
        self.prefix_items = "prefixItems" in self.keywords
        self.id_key = "id" if self.draft4 else "$id"
        self.resolve = resolve
        self.memo: dict[int, tuple[object, _Summary]] = {}  # the node kept: its id stays its own
        self.active: set[tuple[bool, int]] = set()
        self.budget = _BUDGET

    def spend(self, n: int = 1) -> None:
        self.budget -= n
        if self.budget < 0:
            raise _GiveUp

    # ------------------------------------------------------------------ summaries

    def summary(self, s: object) -> _Summary:
        """Shapes that every instance of schema ``s`` satisfies one of."""
        if s is True:
            return _TOP
        if s is False:
            return ()
        if not isinstance(s, dict):
            return _TOP
        hit = self.memo.get(id(s))
        if hit is not None:
            return hit[1]
        key = (True, id(s))
        if key in self.active:
            return _TOP  # recursion: what comes back says nothing
        self.active.add(key)
        try:
            out = self._summarize(s)
        finally:
            self.active.discard(key)
        self.memo[id(s)] = (s, out)
        return out

    def _keywords(self, s: dict[str, object]) -> set[str] | None:
        """The keywords ``s`` asserts, or None when its ``$ref``s resolve elsewhere."""
        if s is not self.root and _moves_base(s.get(self.id_key)) and has_ref(s):
            return None
        kws = {k for k in s if k in self.keywords}
        if "$ref" in kws and self.legacy_ref:
            return {"$ref"}
        return kws

    def _summarize(self, s: dict[str, object]) -> _Summary:
        kws = self._keywords(s)
        if kws is None:
            return _TOP
        parts: list[_Summary] = [(self._local(s, kws),)]
        if "$ref" in kws:
            parts.append(self.summary(self._target(s["$ref"])))
        if "allOf" in kws and isinstance(s["allOf"], list):
            parts += [self.summary(x) for x in s["allOf"]]
        for key in ("anyOf", "oneOf"):  # oneOf holds at most where anyOf does
            alts = s[key] if key in kws else None
            if isinstance(alts, list):
                parts.append(self.disj([self.summary(x) for x in alts]))
        if "not" in kws:
            parts.append(self.complement(s["not"]))
        if "if" in kws:  # (if and then) or (not if and else)
            cond = s["if"]
            then = self.conj([self.summary(cond), self.summary(s.get("then", True))])
            other = self.conj([self.complement(cond), self.summary(s.get("else", True))])
            parts.append(self.disj([then, other]))
        return self.conj(parts)

    def _target(self, ref: object) -> object:
        if not isinstance(ref, str):
            return True
        try:
            return self.resolve(ref)
        except IRError:
            return True  # the caller refuses it; here it says nothing

    def _local(self, s: dict[str, object], kws: set[str]) -> _Shape:
        """The shape of the keywords of ``s`` that constrain one instance directly."""
        types = _ALL
        if "type" in kws:
            named = _type_atoms(s["type"], positive=True, draft4=self.draft4)
            if named is not None:
                types = named
        values: tuple[object, ...] | None = None
        if "enum" in kws and isinstance(s["enum"], list):
            values = tuple(s["enum"])
        if "const" in kws:
            c = s["const"]
            values = (c,) if values is None else tuple(v for v in values if _equal(v, c))
        lo = self._bound(s, kws, "minimum", "exclusiveMinimum", lower=True)
        hi = self._bound(s, kws, "maximum", "exclusiveMaximum", lower=False)
        required = s.get("required") if "required" in kws else None
        keys: tuple[_Keys, ...] = ()
        if kws & {"properties", "patternProperties", "additionalProperties"}:
            clause = self._key_clause(s, kws)
            keys = () if clause is None else (clause,)
        patterns: tuple[re.Pattern[str], ...] = ()
        if "pattern" in kws and isinstance(s["pattern"], str):
            try:  # as jsonschema matches: re.search (read for the values of an enum only)
                patterns = (re.compile(s["pattern"]),)
            except re.error:
                pass
        items: tuple[object, ...] = ()
        if "items" in kws and isinstance(s["items"], (dict, bool)):
            if not (self.prefix_items and "prefixItems" in kws):  # else items is the rest
                items = (s["items"],)
        return _Shape(
            types=types,
            values=values,
            min_length=_count(s, kws, "minLength") or 0,
            max_length=_count(s, kws, "maxLength"),
            patterns=patterns,
            lo=lo,
            hi=hi,
            required=frozenset(required)
            if isinstance(required, list) and all(isinstance(k, str) for k in required)
            else frozenset(),
            min_props=_count(s, kws, "minProperties") or 0,
            max_props=_count(s, kws, "maxProperties"),
            keys=keys,
            min_items=_count(s, kws, "minItems") or 0,
            max_items=_count(s, kws, "maxItems"),
            items=items,
        )

    def _bound(
        self, s: dict[str, object], kws: set[str], key: str, exclusive_key: str, *, lower: bool
    ) -> _Bound | None:
        """The tighter of ``key`` and ``exclusive_key`` (in draft 4, a Boolean modifier)."""
        out = None
        if key in kws and (n := _number(s[key])) is not None:
            out = _Bound(n, self.draft4 and s.get(exclusive_key) is True)
        if (
            not self.draft4
            and exclusive_key in kws
            and (n := _number(s[exclusive_key])) is not None
        ):
            out = _tighter(out, _Bound(n, True), lower)
        return out

    def _key_clause(self, s: dict[str, object], kws: set[str]) -> _Keys | None:
        props = s.get("properties") if "properties" in kws else {}
        raw = s.get("patternProperties") if "patternProperties" in kws else {}
        if not isinstance(props, dict) or not isinstance(raw, dict):
            return None
        patterns: list[tuple[re.Pattern[str], object]] = []
        for p, sub in raw.items():
            try:  # as jsonschema matches: re.search
                patterns.append((re.compile(p), sub))
            except (re.error, TypeError):
                return None
        additional = s["additionalProperties"] if "additionalProperties" in kws else True
        return _Keys(props, tuple(patterns), additional)

    def complement(self, x: object) -> _Summary:
        """Shapes that every instance failing schema ``x`` satisfies one of."""
        if x is True:
            return ()
        if not isinstance(x, dict):
            return _TOP  # false, or malformed
        key = (False, id(x))
        if key in self.active:
            return _TOP
        self.active.add(key)
        try:
            return self._complement(x)
        finally:
            self.active.discard(key)

    def _complement(self, x: dict[str, object]) -> _Summary:
        kws = self._keywords(x)
        if kws is None:
            return _TOP
        # x is the conjunction of its keywords: an instance failing it fails one of them
        alternatives: list[_Summary] = []
        for k in kws:
            v = x[k]
            if k == "type":
                covered = _type_atoms(v, positive=False, draft4=self.draft4)
                if covered is None:
                    return _TOP
                alternatives.append((_Shape(types=_ALL - covered),))
            elif k == "required" and isinstance(v, list):
                names = [n for n in v if isinstance(n, str)]
                if len(names) != len(v):
                    return _TOP
                # required holds for every non-object: failing it, an object lacks a key
                alternatives.append(
                    tuple(_Shape(types=frozenset({"object"}), absent=frozenset({n})) for n in names)
                )
            elif k == "not":
                alternatives.append(self.summary(v))
            elif k == "allOf" and isinstance(v, list):
                alternatives.append(self.disj([self.complement(y) for y in v]))
            elif k == "anyOf" and isinstance(v, list):
                alternatives.append(self.conj([self.complement(y) for y in v]))
            elif k == "$ref":
                alternatives.append(self.complement(self._target(v)))
            else:
                return _TOP
        return self.disj(alternatives)

    # ------------------------------------------------------------------ algebra

    def conj(self, parts: Sequence[_Summary]) -> _Summary:
        """The shapes of the meet of ``parts`` (each a disjunction); empty ones left out."""
        out: list[_Shape] = [_Shape()]
        for p in parts:
            if p == _TOP:
                continue
            if len(out) * len(p) > _MAX_SHAPES:
                out = [self.meet(_hull(out), _hull(p))]
            else:
                self.spend(len(out) * len(p))
                out = [self.meet(a, b) for a in out for b in p]
            out = [x for x in out if not _void(x)]
            if not out:
                return ()
        return tuple(out)

    def disj(self, parts: Sequence[_Summary]) -> _Summary:
        shapes = [x for p in parts for x in p]
        if len(shapes) > _MAX_SHAPES:
            return (_hull(shapes),)
        return tuple(shapes)

    def meet(self, a: _Shape, b: _Shape) -> _Shape:
        self.spend()
        if a.values is None or b.values is None:
            values = a.values if b.values is None else b.values
        else:
            values = tuple(v for v in a.values if any(_equal(v, w) for w in b.values))
        return _Shape(
            types=a.types & b.types,
            values=values,
            min_length=max(a.min_length, b.min_length),
            max_length=_least(a.max_length, b.max_length),
            patterns=a.patterns + b.patterns,
            lo=_tighter(a.lo, b.lo, True),
            hi=_tighter(a.hi, b.hi, False),
            required=a.required | b.required,
            absent=a.absent | b.absent,
            min_props=max(a.min_props, b.min_props),
            max_props=_least(a.max_props, b.max_props),
            keys=a.keys + b.keys,
            min_items=max(a.min_items, b.min_items),
            max_items=_least(a.max_items, b.max_items),
            items=a.items + b.items,
        )

    # ------------------------------------------------------------------ emptiness

    def empty(self, s: _Shape) -> frozenset[str] | None:
        """The rules that show no instance satisfies ``s``, or None when one may."""
        if not s.types:
            return frozenset({"types"})
        if s.values is not None:
            if not s.values:
                return frozenset({"values"})
            if not any(_atom(v) in s.types for v in s.values):
                return frozenset({"types"})
            if any(self.admits(s, v) for v in s.values):
                return None
            return frozenset({"values"})
        rules: set[str] = set()
        for t in s.types:
            found = self._type_empty(s, t)
            if found is None:
                return None
            rules.add(found)
        return frozenset(rules)

    def _type_empty(self, s: _Shape, t: str) -> str | None:
        if t == "string":
            return (
                "string length"
                if s.max_length is not None and s.min_length > s.max_length
                else None
            )
        if t == "integer":
            return "number range" if not _has_integer(s.lo, s.hi) else None
        if t == "fraction":
            return "number range" if not _has_fraction(s.lo, s.hi) else None
        if t == "object":
            return self._object_empty(s)
        if t == "array":
            if s.max_items is not None and s.min_items > s.max_items:
                return "array length"
            if (
                s.min_items >= 1
                and s.items
                and self.all_empty(self.conj([self.summary(x) for x in s.items]))
            ):
                return "array items"
            return None
        return None  # null, boolean

    def _object_empty(self, s: _Shape) -> str | None:
        if s.required & s.absent:
            return "forbidden key"
        if s.max_props is not None and max(len(s.required), s.min_props) > s.max_props:
            return "property count"
        for k in sorted(s.required):
            parts = self._key_schemas(s, k)
            if any(not p for p in parts):
                return "forbidden key"
            if self.all_empty(self.conj(parts)):
                return "property values"
        return None

    def all_empty(self, summary: _Summary) -> bool:
        return all(self.empty(x) is not None for x in summary)

    def _key_schemas(self, s: _Shape, key: str) -> list[_Summary]:
        """The summaries of the schemas that the value of ``key`` satisfies in ``s``."""
        parts: list[object] = []
        for clause in s.keys:
            own = [clause.properties[key]] if key in clause.properties else []
            matched = [sub for p, sub in clause.patterns if p.search(key)]
            parts += own + matched if own or matched else [clause.additional]
        return [self.summary(x) for x in parts]

    def value(self, s: _Shape, key: str) -> _Summary:
        """The shapes of the value of ``key`` in an object of ``s`` that holds it."""
        return self.conj(self._key_schemas(s, key))

    def admits(self, s: _Shape, v: object) -> bool:
        """False only when the JSON value ``v`` surely fails ``s``."""
        self.spend()
        atom = _atom(v)
        if atom is None:
            return True
        if atom not in s.types:
            return False
        if s.values is not None and not any(_equal(v, w) for w in s.values):
            return False
        if isinstance(v, str):
            if len(v) < s.min_length or (s.max_length is not None and len(v) > s.max_length):
                return False
            return all(p.search(v) for p in s.patterns)
        if atom in _NUMBER:
            n = _number(v)
            return n is None or _within(n, s.lo, s.hi)
        if isinstance(v, dict):
            present = set(v)
            if not s.required <= present or s.absent & present or len(v) < s.min_props:
                return False
            if s.max_props is not None and len(v) > s.max_props:
                return False
            return all(
                any(self.admits(x, item) for x in self.value(s, k))
                for k, item in v.items()
                if isinstance(k, str)
            )
        if isinstance(v, list):
            if len(v) < s.min_items or (s.max_items is not None and len(v) > s.max_items):
                return False
            return all(
                any(self.admits(x, item) for x in self.summary(raw))
                for raw in s.items
                for item in v
            )
        return True


# ---------------------------------------------------------------------- values


def _atom(v: object) -> str | None:
    """The JSON type of a value (``integer`` for 1 and 1.0); None for what JSON lacks."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if math.isfinite(v) and v.is_integer() else "fraction"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return None


def _equal(a: object, b: object) -> bool:
    """Equality as `jsonschema`'s ``enum`` / ``const`` see it (``true != 1``, ``1 == 1.0``)."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return a == b


def _type_atoms(t: object, *, positive: bool, draft4: bool) -> frozenset[str] | None:
    """The types a ``type`` value names, or None for a malformed one.

    ``positive``: every value passing ``type`` has one of them; else every value of them
    passes it (draft 4's ``integer`` excludes 1.0, so there it names no type).
    """
    names = [t] if isinstance(t, str) else t if isinstance(t, list) else None
    if names is None or not all(isinstance(n, str) and n in _TYPE for n in names):
        return None
    out: set[str] = set()
    for n in names:
        if n == "integer" and draft4 and not positive:
            continue
        out |= _TYPE[str(n)]
    return frozenset(out)


def _number(v: object) -> Fraction | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return Fraction(v)


def _count(s: dict[str, object], kws: set[str], key: str) -> int | None:
    """A non-negative integer keyword (1.0 counts as 1, as the meta-schemas since draft 6 do)."""
    if key not in kws:
        return None
    v = s[key]
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        return None
    return v


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _tighter(a: _Bound | None, b: _Bound | None, lower: bool) -> _Bound | None:
    if a is None or b is None:
        return a if b is None else b
    if a.value == b.value:
        return _Bound(a.value, a.strict or b.strict)
    return (a if a.value > b.value else b) if lower else (a if a.value < b.value else b)


def _within(n: Fraction, lo: _Bound | None, hi: _Bound | None) -> bool:
    if lo is not None and (n < lo.value or (lo.strict and n == lo.value)):
        return False
    return hi is None or not (n > hi.value or (hi.strict and n == hi.value))


def _has_integer(lo: _Bound | None, hi: _Bound | None) -> bool:
    if lo is None or hi is None:
        return True
    first = math.floor(lo.value) + 1 if lo.strict else math.ceil(lo.value)
    last = math.ceil(hi.value) - 1 if hi.strict else math.floor(hi.value)
    return first <= last


def _has_fraction(lo: _Bound | None, hi: _Bound | None) -> bool:
    if lo is None or hi is None:
        return True
    if lo.value < hi.value:
        return True  # an open interval holds non-integers
    return lo.value == hi.value and not (lo.strict or hi.strict) and lo.value.denominator != 1


def _void(s: _Shape) -> bool:
    """Whether ``s`` is empty at a glance (no type, or no value of its types)."""
    if not s.types:
        return True
    return s.values is not None and not any(_atom(v) in s.types for v in s.values)


def _hull(shapes: Sequence[_Shape]) -> _Shape:
    """One shape holding every instance of ``shapes``: their types and values."""
    types = frozenset().union(*(s.types for s in shapes)) if shapes else frozenset()
    if shapes and all(s.values is not None for s in shapes):
        return _Shape(types=types, values=tuple(v for s in shapes for v in s.values or ()))
    return _Shape(types=types)


def _moves_base(v: object) -> bool:
    return isinstance(v, str) and not v.startswith("#")


def has_ref(s: object) -> bool:
    """Whether a ``$ref`` key appears anywhere in the JSON value ``s``."""
    if isinstance(s, dict):
        return "$ref" in s or any(has_ref(v) for v in s.values())
    if isinstance(s, list):
        return any(has_ref(v) for v in s)
    return False
