"""A sub-schema of a JSON Schema document as a self-contained draft 2020-12 schema.

This is what a grammar value of `ir_from_json_schema` carries: llguidance generates the value
from it, and the IR-built model checks it with `jsonschema` (default dialect 2020-12), so the
schema must mean alone, in draft 2020-12, exactly what the sub-schema meant in its document
and dialect:

* every ``$ref`` (resolved by the caller, from the document's root) is rewritten to an entry
  of the schema's own ``$defs``, copied (transitively) from the document: ``#/$defs/A`` and
  ``#/definitions/A`` become ``#/$defs/A``, ``#`` (the root) ``#/$defs/Root``, any other
  pointer an entry named after its last part;
* only the dialect's keywords are kept (`jsonschema` ignores the others; llguidance might
  not), and those whose reading differs are translated: drafts 4 to 7 ignore the siblings
  of ``$ref`` (dropped); draft 4's Boolean ``exclusiveMinimum`` / ``exclusiveMaximum`` move
  the bound into the numeric keyword; ``items`` as a list (drafts before 2020-12) becomes
  ``prefixItems`` and ``additionalItems`` becomes ``items``; ``dependencies``,
  ``dependentRequired`` and ``dependentSchemas`` (which llguidance does not implement)
  become ``anyOf`` of "the key is absent" and "the key's requirements hold";
* ``not`` and ``if`` / ``then`` / ``else`` (which llguidance does not implement either)
  become the negation of their schema where it can be written without ``not`` (``type``,
  ``required``, ``properties``, ``allOf``, ``anyOf``, ``not``), and ``anyOf: [if and then,
  (not if) and else]``. A negation may keep fewer values than the schema allows (``not:
  {type: integer}`` leaves out non-integer numbers too; a keyword it cannot negate, such as
  ``enum``, is left out of the ``anyOf`` of the negated keywords), never more; where none
  can be written, ``not`` stays and llguidance refuses it by name, and ``if`` keeps only its
  ``then`` branch;
* a ``pattern`` stays as it is: llguidance searches it as `jsonschema`'s `re.search` does
  (any text around a match, unless ``^`` / ``$`` anchor it), so the values are exactly the
  schema's (anchored whole, as before, it wrote the strings that are one match only: no
  ``mailto:a@b.c`` for ``^mailto:``); the token budget's closing walk completes a match from
  any text (`factorspec_sdk.writer.closing_strings`), reading anchors at the pattern's ends,
  so a ``^`` or ``$`` inside it is refused
  (`factorspec_sdk.ir.standalone_strings.searched_pattern`);
* ``format: date`` is the pattern of the dates `jsonschema` accepts (`STRICT_FORMATS`:
  llguidance's allows February 29 of any year); ``format: time`` and ``date-time`` are RFC
  3339's with seconds 00-59 and at most six fractional digits (llguidance's allow a leap
  second, which Pydantic refuses, and fractional digits without end); ``format:
  uri-reference`` is RFC 3986's (`URI_REFERENCE_PATTERN`) and ``uri-template`` RFC 6570's,
  braces only around expressions (`URI_TEMPLATE_PATTERN`): llguidance knows neither;
* a ``format`` neither `jsonschema` (its dialect's format checker) nor llguidance knows is
  dropped: `jsonschema` ignores it (`asserted_format`);
* ``oneOf`` (which llguidance takes only where it proves the branches exclusive itself)
  becomes ``anyOf`` where `factorspec_sdk.ir.exclusive` proves no instance satisfies two of
  its branches, as the document reads them (exactly ``anyOf`` then, whatever subset of a
  branch the copy keeps), beside the siblings of the ``oneOf`` and of the ``allOf`` /
  ``anyOf`` / ``oneOf`` it lies in (the same instance). Elsewhere it stays for llguidance,
  whose proof reads the copies: only where they keep every value of their branches (and of
  the ``$defs`` they use), as a branch narrowed by a rewrite below could leave out the
  values by which two branches overlap; else it is an `IRError`. So is a ``not`` kept over
  a narrowed copy (fewer values under ``not`` are more);
* ``unevaluatedProperties`` / ``unevaluatedItems`` (which llguidance does not implement)
  beside no keyword that evaluates in place are ``additionalProperties`` / ``items``,
  and dropped beside those (they then apply to nothing); ``minProperties`` /
  ``maxProperties`` of an object that allows undeclared keys beside optional properties
  (which llguidance refuses) become ``anyOf`` branches that fix which optional properties
  are present (`_property_counts`), exactly;
* ``uniqueItems`` (which llguidance does not implement) is dropped where ``maxItems`` is at
  most 1 or it is false (an array of at most one item is unique); elsewhere it is an
  `IRError` naming the place (an array of at most one item would be fewer values than the
  schema allows; write ``maxItems: 1`` for that);
* what the two readers would read differently is refused with an `IRError` naming the
  place: a ``multipleOf`` that is not an integer, or other than 1 on a node that allows
  non-integer numbers (`jsonschema` divides floats), a ``pattern`` Python's `re` cannot
  compile or that uses a POSIX class (``[[:alpha:]]``, a class of characters in Rust, a set
  in Python), an embedded ``$id`` above a ``$ref``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from urllib.parse import unquote

import jsonschema
from jsonschema.protocols import Validator

from factorspec_sdk.ir.exclusive import exclusive, has_ref
from factorspec_sdk.ir.finite_keys import closed_keys
from factorspec_sdk.ir.limits import IRError
from factorspec_sdk.ir.standalone_strings import (
    STRICT_FORMATS,
    asserted_format,
    checked_pattern,
    searched_pattern,
)

__all__ = ["STRICT_FORMATS", "asserted_format", "has_ref", "pointer_part", "standalone_schema"]

JsonDict = dict[str, object]

_ONE = frozenset({"additionalProperties", "contains", "propertyNames"})
_UNEVALUATED = frozenset({"unevaluatedItems", "unevaluatedProperties"})
_IN_PLACE = frozenset(
    {
        "allOf",
        "anyOf",
        "oneOf",
        "if",
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
        "dependentSchemas",
        "contains",
    }
)
"""Keywords whose sub-schemas evaluate properties or items of the same instance in place
(``contains`` evaluates items): ``unevaluated*`` beside them depends on what they evaluate."""
_TYPES = ("null", "boolean", "object", "array", "number", "string")
_LIST = frozenset({"allOf", "anyOf"})
_MAP = frozenset({"properties", "patternProperties"})
_DEPENDENCIES = frozenset({"dependencies", "dependentRequired", "dependentSchemas"})
_LEGACY_REF = (jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator)
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def standalone_schema(
    s: object,
    where: str,
    *,
    root: JsonDict,
    dialect: type[Validator],
    resolve: Callable[[str, str], object],
    valid: Callable[[object, str, str], bool] | None = None,
) -> JsonDict:
    """The self-contained draft 2020-12 schema of sub-schema ``s`` (at ``where``).

    Args:
        s: the sub-schema, as the document has it.
        where: its place (``#/properties/a``), for errors.
        root: the document (its own ``$id`` does not move the base of its ``$ref``).
        dialect: the document's `jsonschema` validator class.
        resolve: ``resolve(ref, where)`` is the schema a ``$ref`` points to in the document.
        valid: ``valid(schema, name, where)``, whether `jsonschema` accepts the string
            ``name`` for a schema of the document: given, an object whose ``propertyNames``
            names finitely many keys is copied as the closed object it is
            (`factorspec_sdk.ir.finite_keys`), which llguidance implements.

    Raises:
        IRError: the two readers would read something differently (see the module docstring),
            ``resolve`` refused a ``$ref``, or ``$ref`` chains loop (``A`` is ``$ref: A``).
    """
    return _Copier(root, dialect, resolve, valid).build(s, where)


class _Copier:
    def __init__(
        self,
        root: JsonDict,
        dialect: type[Validator],
        resolve: Callable[[str, str], object],
        valid: Callable[[object, str, str], bool] | None,
    ) -> None:
        self.root = root
        self.valid = valid
        self.dialect = dialect
        self.keywords = frozenset(dialect.VALIDATORS)
        self.legacy_ref = dialect in _LEGACY_REF
        self.draft4 = dialect is jsonschema.Draft4Validator
        self.tuple_items = dialect is not jsonschema.Draft202012Validator
        self.id_key = "id" if self.draft4 else "$id"
        self.resolve = resolve
        self.names: dict[str, str] = {}
        self.defs: JsonDict = {}
        self.pending: list[tuple[str, object, str]] = []
        self.subsets = 0  # copies so far that keep fewer values than their schema
        self.subset_defs: set[str] = set()  # $defs entries whose copies keep fewer values
        self.exact: list[tuple[str, str, object]] = []  # (place, keyword, copy) to keep exact

    def build(self, s: object, where: str) -> JsonDict:
        body = self.copy(s, where)
        while self.pending:
            name, target, at = self.pending.pop()
            before = self.subsets
            self.defs[name] = self.copy(target, at)
            if self.subsets > before:
                self.subset_defs.add(name)
        self._check_exact()
        if body is True:
            body = {}  # any value
        out: JsonDict = body if isinstance(body, dict) else {"allOf": [body]}
        if self.defs:
            out["$defs"] = dict(sorted(self.defs.items()))
        return out

    def copy(self, s: object, where: str, context: tuple[object, ...] = ()) -> object:
        """The copy of schema ``s``; ``context``: schemas its instances satisfy too.

        The context is what a ``oneOf`` below is proven exclusive within: the siblings and
        other ``allOf`` members of the combinators ``s`` lies under, for the same instance.
        """
        if isinstance(s, bool):
            return s
        if not isinstance(s, dict):
            raise IRError(f"{where}: a schema must be an object")
        if s is not self.root and self._moves_base(s) and has_ref(s):
            raise IRError(
                f"{where}: an embedded {self.id_key} moves the base its $refs resolve "
                "against; not supported"
            )
        if "$ref" in s and self.legacy_ref:
            s = {"$ref": s["$ref"]}  # drafts 4 to 7 ignore the siblings of $ref
        if self.valid is not None and "propertyNames" in self.keywords:
            closed = closed_keys(s, resolve=self._resolve_any, valid=self.valid, where=where)
            s = s if closed is None else closed
        out: JsonDict = {}
        extra: list[object] = []  # conjuncts translated from keywords llguidance lacks
        for key, v in s.items():
            if key not in self.keywords:
                continue
            at = f"{where}/{key}"
            if key == "$ref":
                out[key] = self._ref(v, where)
            elif key == "items":
                if isinstance(v, list) and self.tuple_items:
                    out["prefixItems"] = [self.copy(x, f"{at}/{i}") for i, x in enumerate(v)]
                    if "additionalItems" in s:
                        out["items"] = self.copy(s["additionalItems"], f"{where}/additionalItems")
                else:
                    out[key] = self.copy(v, at)  # additionalItems is then irrelevant
            elif key == "additionalItems":
                continue  # read with a list of items, above
            elif key in _UNEVALUATED:
                self._unevaluated(s, key, v, at, out)
            elif key in _ONE:
                out[key] = self.copy(v, at)
            elif key in _LIST:  # the same instance: the context grows
                items = _shaped_list(v, at)
                rest = (*context, {k: x for k, x in s.items() if k != key})
                out[key] = [
                    self.copy(x, f"{at}/{i}", (*rest, *items[:i], *items[i + 1 :]))
                    if key == "allOf"
                    else self.copy(x, f"{at}/{i}", rest)
                    for i, x in enumerate(items)
                ]
            elif key == "prefixItems":
                items = _shaped_list(v, at)
                out[key] = [self.copy(x, f"{at}/{i}") for i, x in enumerate(items)]
            elif key == "oneOf":
                self._one_of(
                    s, v, at, (*context, {k: x for k, x in s.items() if k != key}), out, extra
                )
            elif key in _MAP:
                out[key] = {k: self.copy(x, f"{at}/{pointer_part(k)}") for k, x in _map(v, at)}
            elif key in _DEPENDENCIES:
                extra += self._dependencies(v, at)
            elif key == "not":
                negation = self._negation(v, at)
                if negation is None:
                    out[key] = self._exact_copy(v, at, "not")  # llguidance refuses it, by name
                else:
                    self.subsets += 1
                    extra.append(negation)
            elif key == "if":
                self.subsets += 1
                extra.append(self._conditional(s, where))
            elif key in ("minimum", "maximum") and self.draft4:
                exclusive = "exclusive" + key[0].upper() + key[1:]
                out[exclusive if s.get(exclusive) is True else key] = v
            elif key == "multipleOf":
                self._check_multiple(s, v, at)
                out[key] = 1 if v == 1 else v
            elif key == "pattern":
                out[key] = searched_pattern(checked_pattern(v, at), at)
            elif key == "uniqueItems":
                if _unique_items(s):  # llguidance does not implement it
                    raise _unique_error(where)
            elif key == "format":
                if isinstance(v, str) and v in STRICT_FORMATS:
                    extra.append({"pattern": STRICT_FORMATS[v]})
                elif asserted_format(v, self.dialect):
                    out[key] = v
            else:
                out[key] = v  # data: type, enum, const, required, bounds, format, ...
        extra += _property_counts(out)
        if extra:
            out["allOf"] = [*_shaped_list(out.get("allOf", []), where), *extra]
        return out

    def _resolve_any(self, ref: object, where: str) -> object:
        """The schema a ``$ref`` points to (a non-string one is refused by ``resolve``)."""
        if not isinstance(ref, str):
            raise IRError(f"{where}: $ref must be a string")
        return self.resolve(ref, where)

    def _unevaluated(self, s: JsonDict, key: str, v: object, at: str, out: JsonDict) -> None:
        """``unevaluatedProperties`` / ``unevaluatedItems``, which llguidance does not implement.

        Beside no keyword that evaluates in place (``allOf``, ``$ref``, ``if``, ...), the
        properties or items it applies to are those ``additionalProperties`` / ``items``
        would: it is that keyword (exactly). Beside that keyword itself it applies to none
        (dropped). Elsewhere it stays, and llguidance refuses it by name.
        """
        sibling = "additionalProperties" if key == "unevaluatedProperties" else "items"
        if sibling in s and (key == "unevaluatedProperties" or not self._tuple(s)):
            return  # every property (item) is evaluated by its sibling: it applies to none
        if _IN_PLACE & self.keywords & set(s):
            out[key] = self.copy(v, at)
        else:
            out[sibling] = self.copy(v, at)

    def _tuple(self, s: JsonDict) -> bool:
        """Whether ``items`` is a list without ``additionalItems`` (later items unevaluated)."""
        return isinstance(s.get("items"), list) and "additionalItems" not in s

    def _one_of(
        self,
        s: JsonDict,
        v: object,
        at: str,
        context: tuple[object, ...],
        out: JsonDict,
        extra: list[object],
    ) -> None:
        """``oneOf``: ``anyOf`` where its branches are proven exclusive, else kept as it is.

        The proof holds for the instances of ``context`` (the siblings last). A kept
        ``oneOf`` is llguidance's to prove exclusive, from the copies: only exact ones, as a
        branch that keeps fewer values than its schema could leave out the values by which
        two branches overlap (a value of one branch would then pass another).
        """
        items = _shaped_list(v, at)
        before = self.subsets
        copies = [self.copy(x, f"{at}/{i}", context) for i, x in enumerate(items)]
        proof = exclusive(
            items,
            given={"allOf": list(context)},
            root=self.root,
            dialect=self.dialect,
            resolve=lambda ref: self.resolve(ref, at),
        )
        if proof is not None:  # exactly anyOf, whatever subset of a branch is written
            if "anyOf" in s:
                extra.append({"anyOf": copies})
            else:
                out["anyOf"] = copies
        elif self.subsets > before:
            raise _subset_error(at, "oneOf", "its branches")
        else:
            self.exact.append((at, "oneOf", copies))
            out["oneOf"] = copies

    def _exact_copy(self, v: object, at: str, key: str) -> object:
        """The copy of ``v``, refused where it keeps fewer values (``key`` negates it)."""
        before = self.subsets
        out = self.copy(v, at)
        if self.subsets > before:
            raise _subset_error(at, key, "its schema")
        self.exact.append((at, key, out))
        return out

    def _check_exact(self) -> None:
        """Refuse a kept ``oneOf`` / ``not`` whose copy uses a ``$defs`` entry that is a subset."""
        if not self.subset_defs:
            return
        uses = {name: _def_refs(copy) for name, copy in self.defs.items()}
        for at, key, copy in self.exact:
            # in name order (a set's order follows PYTHONHASHSEED): the same schema names
            # the same definition in its error on every run
            todo, seen = sorted(_def_refs(copy), reverse=True), set()
            while todo:
                name = todo.pop()
                if name in self.subset_defs:
                    raise _subset_error(at, key, f"the definition {name!r} it uses")
                if name not in seen:
                    seen.add(name)
                    todo += sorted(uses.get(name, ()), reverse=True)

    def _ref(self, ref: object, where: str) -> str:
        if not isinstance(ref, str):
            raise IRError(f"{where}: $ref must be a string")
        name = self.names.get(ref)
        if name is None:
            target = self.resolve(ref, where)
            self._check_cycle(ref, target, where)
            name = self._fresh(ref)
            self.names[ref] = name
            self.pending.append((name, target, f"{where}/$ref"))
        return f"#/$defs/{name}"

    def _check_cycle(self, ref: str, target: object, where: str) -> None:
        """Refuse a chain of ``$ref`` that comes back to ``ref`` without any other keyword."""
        seen = {ref}
        while isinstance(target, dict) and isinstance(target.get("$ref"), str):
            if not self.legacy_ref and set(target) & self.keywords - {"$ref"}:
                return
            nxt = str(target["$ref"])
            if nxt in seen:
                raise IRError(
                    f"{where}: $ref {ref!r} is a cycle of $refs that never reaches a schema"
                )
            seen.add(nxt)
            target = self.resolve(nxt, where)

    def _fresh(self, ref: str) -> str:
        parts = unquote(ref[2:]).split("/") if ref.startswith("#/") else []
        if not parts:
            base = "Root"
        else:
            last = parts[-1].replace("~1", "/").replace("~0", "~")
            base = _NAME.sub("_", last) or "Ref"
        taken = set(self.names.values())
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        return name

    def _moves_base(self, s: JsonDict) -> bool:
        v = s.get(self.id_key)
        return isinstance(v, str) and not v.startswith("#")

    def _dependencies(self, v: object, at: str) -> list[object]:
        """``key present => requirement`` as ``anyOf: [key absent, requirement]`` per key."""
        out: list[object] = []
        for key, dep in _map(v, at):
            absent: JsonDict = {"properties": {key: False}}
            if isinstance(dep, list):
                if not all(isinstance(d, str) for d in dep):
                    raise IRError(f"{at}/{pointer_part(key)}: a dependency must list key names")
                need: object = {"required": [key, *dep]}
            else:
                need = {"allOf": [{"required": [key]}, self.copy(dep, f"{at}/{pointer_part(key)}")]}
            out.append({"anyOf": [absent, need]})
        return out

    def _conditional(self, s: JsonDict, where: str) -> object:
        """``if I then T else E`` as ``anyOf: [I and T, (not I) and E]``."""
        cond = s["if"]
        branches: list[object] = [
            {
                "allOf": [
                    self.copy(cond, f"{where}/if"),
                    self.copy(s.get("then", True), f"{where}/then"),
                ]
            }
        ]
        negation = self._negation(cond, f"{where}/if")
        if negation is not None:  # else the values all satisfy I (a subset)
            branches.append({"allOf": [negation, self.copy(s.get("else", True), f"{where}/else")]})
        return {"anyOf": branches}

    def _negation(self, v: object, at: str) -> object | None:
        """A schema that only values failing ``v`` satisfy (maybe not all of them), or None.

        ``v`` is a conjunction of its keywords, so its negation is the ``anyOf`` of theirs; a
        keyword that cannot be negated here is left out of it (fewer values, all failing
        ``v``), and None means none can: ``enum``, ``const``, ``$ref``, bounds, ...
        """
        if v is True or v == {}:
            return False
        if v is False:
            return True
        if not isinstance(v, dict) or "$ref" in v:
            return None
        if not self.keywords & set(v):
            return False  # constrains nothing, like {}
        parts: list[object] = []
        for key, x in v.items():
            if key not in self.keywords:
                continue
            part = self._negate_keyword(key, x, f"{at}/{key}")
            if part is not None:
                parts.append(part)
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else {"anyOf": parts}

    def _negate_keyword(self, key: str, x: object, at: str) -> object | None:
        if key == "type":
            named = _type_names(x)
            if named is None:
                return None
            # not integer: not number either (the non-integer numbers cannot be named)
            rest = [
                t for t in _TYPES if t not in named and not (t == "number" and "integer" in named)
            ]
            return {"type": rest} if rest else False
        if key == "required" and isinstance(x, list):
            return {"anyOf": [{"properties": {str(k): False}} for k in x]} if x else False
        if key == "properties" and isinstance(x, dict):
            parts: list[object] = []
            for k, sub in x.items():
                negation = self._negation(sub, f"{at}/{pointer_part(str(k))}")
                if negation is not None:
                    parts.append({"type": "object", "required": [k], "properties": {k: negation}})
            return {"anyOf": parts} if parts else None
        if key == "allOf" and isinstance(x, list):
            negations = [self._negation(sub, f"{at}/{i}") for i, sub in enumerate(x)]
            kept = [n for n in negations if n is not None]
            return {"anyOf": kept} if kept else None
        if key == "anyOf" and isinstance(x, list):
            negations = [self._negation(sub, f"{at}/{i}") for i, sub in enumerate(x)]
            if any(n is None for n in negations):
                return None
            return {"allOf": negations}
        if key == "not":
            return self.copy(x, at)
        return None

    def _check_multiple(self, s: JsonDict, v: object, at: str) -> None:
        types = _type_names(s.get("type")) or set()
        # 1.0 is 1: every integer passes both readers, and no other number
        integral = not isinstance(v, bool) and (isinstance(v, int) or v == 1.0)
        if not integral or (v != 1 and ("number" in types or not types)):
            raise IRError(
                f"{at}: multipleOf {v!r} on values that may be non-integer numbers is not "
                "supported (jsonschema divides floats, the grammar decimals; they disagree)"
            )


def _subset_error(at: str, key: str, what: str) -> IRError:
    """Why a ``oneOf`` or ``not`` over a copy that keeps fewer values than its schema is refused."""
    why = (
        "oneOf is not proven exclusive, and"
        if key == "oneOf"
        else "not (which turns fewer values into more) of a schema where"
    )
    return IRError(
        f"{at}: {why} the grammar of {what} keeps fewer values than the schema allows (a "
        "negation): a value written could pass a schema the grammar narrowed; not supported"
    )


MAX_COUNT_BRANCHES = 64
"""Most ``anyOf`` branches `_property_counts` writes for an object's property counts."""


def _property_counts(out: JsonDict) -> list[object]:
    """``minProperties`` / ``maxProperties`` of an open object, as llguidance takes them.

    llguidance holds them only where every key under ``properties`` is required (or
    ``false``) or no other key is allowed. Elsewhere (a copy ``out`` that allows undeclared
    keys beside optional properties) they move into ``anyOf`` branches that fix which
    optional properties are present, each keeping the counts: one branch per set of them
    (at most `MAX_COUNT_BRANCHES`), or, for ``minProperties`` that one more key than the
    required ones satisfies, one per optional property and one with none of them. Exactly
    the same objects. A ``minProperties`` the required keys already satisfy is dropped
    (every object instance holds them); elsewhere the counts stay, and llguidance refuses
    them by name. Returns the conjuncts to add; ``out`` loses the keywords they replace.
    """
    if not {"minProperties", "maxProperties"} & set(out):
        return []
    props = out.get("properties", {})
    required = out.get("required", [])
    if not isinstance(props, dict) or not isinstance(required, list) or not _all_names(required):
        return []
    closed = out.get("additionalProperties") is False and not out.get("patternProperties")
    needed = {str(k) for k in required}
    optional = sorted(k for k, v in props.items() if k not in needed and v is not False)
    lo, hi = _integer(out.get("minProperties")), _integer(out.get("maxProperties"))
    if lo is not None and lo <= len(needed):
        del out["minProperties"]  # the required keys are at least that many
        lo = None
    if closed or not optional or (lo is None and hi is None):
        return []  # llguidance holds them (or there are none left)
    counts: JsonDict = {k: out.pop(k) for k in ("minProperties", "maxProperties") if k in out}
    branches: list[JsonDict] = []
    if 2 ** len(optional) <= MAX_COUNT_BRANCHES:
        for n in range(len(optional) + 1):
            for present in itertools.combinations(optional, n):
                if hi is not None and len(needed) + n > hi:
                    continue
                absent: JsonDict = {k: False for k in optional if k not in present}
                branches.append({"required": list(present), "properties": absent, **counts})
    elif hi is None and lo == len(needed) + 1:
        branches = [{"required": [k]} for k in optional]
        none: JsonDict = dict.fromkeys(optional, False)
        branches.append({"properties": none, **counts})
    if not branches:
        out.update(counts)  # too many branches, or none: llguidance refuses them by name
        return []
    return [{"anyOf": list(branches)}]


def _all_names(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _def_refs(copy: object) -> set[str]:
    """The ``$defs`` entries a copy's ``$ref``s name (``#/$defs/Name``)."""
    out: set[str] = set()
    stack = [copy]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            ref = x.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                out.add(ref.removeprefix("#/$defs/"))
            stack += x.values()
        elif isinstance(x, list):
            stack += x
    return out


def _unique_items(s: JsonDict) -> bool:
    """Whether ``uniqueItems`` of ``s`` constrains its arrays (true, room for two items).

    Where it does not (absent, false, ``maxItems`` at most 1: an array of at most one item
    is unique), the copy drops it.
    """
    if s.get("uniqueItems") is not True:
        return False
    hi = _integer(s.get("maxItems"))
    return hi is None or hi > 1


def _unique_error(where: str) -> IRError:
    """Why ``uniqueItems`` with room for two items in a grammar value is refused."""
    return IRError(
        f"{where}: uniqueItems with room for two items in a grammar value (a sub-schema the "
        "writer does not lay out itself: under anyOf or oneOf of several schemas, a type "
        "union, a root that is no object, ...): llguidance does not implement uniqueItems; "
        "write maxItems: 1 for at most one item, or give the array a place and items the "
        "writer lays out"
    )


def _integer(v: object) -> int | None:
    """An integer keyword's value (1.0 is 1, as the meta-schemas since draft 6 allow)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _type_names(t: object) -> set[str] | None:
    """The names in a ``type`` value (a name or a list of names); None if it is neither."""
    if isinstance(t, str):
        return {t}
    if isinstance(t, list) and all(isinstance(x, str) for x in t):
        return {str(x) for x in t}
    return None


def _shaped_list(v: object, at: str) -> list[object]:
    if not isinstance(v, list):
        raise IRError(f"{at}: must be a list")
    return v


def _map(v: object, at: str) -> list[tuple[str, object]]:
    if not isinstance(v, dict):
        raise IRError(f"{at}: must be an object")
    return [(str(k), x) for k, x in v.items()]


def pointer_part(key: str) -> str:
    """``key`` as one part of a JSON pointer (``~`` and ``/`` escaped)."""
    return key.replace("~", "~0").replace("/", "~1")
