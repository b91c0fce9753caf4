"""The JSON Schema converter's objects: properties, required keys and the keywords on keys.

`ObjectConverter` lays out an object node of `factorspec_sdk.ir.jsonschema`: its properties
in schema order (one not ``required`` may be left out), the required keys not under
``properties``, the schemas of the ``patternProperties`` that match a key, and the keywords
on its key set (``propertyNames``, dependencies, ``minProperties`` / ``maxProperties``),
held natively where every key set the writer may write satisfies them. An object that allows
keys it does not declare, or ``null``, is a grammar value unless a relation reads under it
or llguidance refuses it; then its other keys are a native dict of free keys after the
declared ones (`ObjectConverter._others`), where free keys can hold its keywords.
"""

from __future__ import annotations

import re

from factorspec_sdk.ir.finite_keys import closed_keys, key_schema
from factorspec_sdk.ir.jsonschema_base import ConverterBase, NothingWritable, NotNative
from factorspec_sdk.ir.jsonschema_keywords import JsonDict, all_str, shaped
from factorspec_sdk.ir.limits import IRError
from factorspec_sdk.ir.standalone import pointer_part

__all__ = ["ObjectConverter"]


class ObjectConverter(ConverterBase):
    """The object nodes of a conversion (see the module)."""

    def object_node(
        self,
        s: JsonDict,
        kws: set[str],
        where: str,
        refs: tuple[str, ...],
        depth: int,
        nullable: bool,
    ) -> JsonDict:
        """The layout of object node ``s`` (its applicable keywords ``kws``), or its grammar value.

        Raises:
            NothingWritable: a required property can have no value, or no key set the
                writer may write satisfies the keywords on keys.
            NotNative: the object is a grammar value (keywords on keys the writer cannot
                hold, a property named by the empty string).
            IRError: the schema is unsatisfiable or malformed there, or llguidance refuses
                the grammar of an object whose declared keys cannot hold its keywords.
        """
        s, kws = self._finite_keys(s, kws, where)
        props = shaped(s.get("properties", {}), dict, where, "properties")
        required = shaped(s.get("required", []), list, where, "required")
        if not all(isinstance(k, str) for k in required):
            raise IRError(f"{where}: required must be a list of strings")
        if "" in props or "" in required:  # a field needs a name for its paths
            raise NotNative(f"{where}: a property named by the empty string")
        patterns = self._patterns(s, kws, where)
        extra, extra_at = _extra_keys(s, kws, where)
        allows = extra is not False or any(p is not False for p in patterns.values())
        refused: str | None = None  # why the grammar form of this object was refused
        if (allows or nullable) and not self.unique_anywhere:  # no relation reads under it
            grammar, refused = self.open_grammar(s, where)
            if grammar is not None:
                return grammar
        fields: list[JsonDict] = []
        for key, sub in props.items():
            at = f"{where}/properties/{pointer_part(key)}"
            try:
                sub = key_schema(key, [sub], patterns)
                node = self.node(sub, at, refs, depth + 1)
            except NothingWritable as exc:
                if not self.valid(sub, None, at):
                    if key not in required:
                        continue  # absent-only: no value of it can be written
                    raise NothingWritable(
                        f"{at}: the property is required, but {exc.message}"
                    ) from None
                node = self.grammar(sub, at, exc.message)  # null, written by the grammar
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
                        "node": self.node(key_schema(key, [], patterns), at, refs, depth + 1),
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
            except NothingWritable as exc:
                raise NothingWritable(
                    f"{where}: required property {key!r} (not under properties) can have no "
                    f"value: {exc.message}"
                ) from None
            fields.append({"name": key, "key": key, "node": node})
        complete = not allows or refused is not None  # the writer writes no other key
        try:
            fields = self._key_set(s, kws, fields, set(required), where, complete=complete)
        except (NotNative, NothingWritable) as exc:
            if refused is None:
                raise
            hint = (  # counts and dependencies over optional keys: llguidance's closed objects
                "list every property in required, or set additionalProperties to false"
                if isinstance(exc, NotNative)
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
            if not self.reads_below(out):
                grammar, refused = self.open_grammar(s, where)
                if grammar is not None:
                    return grammar
        if allows:  # a relation reads under it, or the grammar refuses it: native others
            others = self._others(s, kws, extra, extra_at, patterns, fields, refs, depth)
            if others is None:  # keywords on its keys the writer cannot hold: declared only
                out["undeclared_keys"] = True
            elif others:
                fields.append(others)
        return out

    def _others(
        self,
        s: JsonDict,
        kws: set[str],
        extra: object,
        extra_at: str,
        patterns: JsonDict,
        fields: list[JsonDict],
        refs: tuple[str, ...],
        depth: int,
    ) -> JsonDict | None:
        """The field of an object's other keys, laid out natively (`ObjectField.others`).

        A dict of free keys, each under ``additionalProperties`` (any JSON value when it is
        absent or ``true``), written after the declared keys; a factor keeps the keys
        distinct and apart from the declared ones (`factorspec_sdk.ir.unique`). At most the
        conversion's bound (``self.others``, one of `OTHER_KEYS_BOUNDS`; the ``list bound``
        restriction names it). An empty dict: no value satisfies ``additionalProperties``,
        so no other key can be written and nothing is narrowed. None where keywords on the
        keys ask for more than free keys: ``patternProperties`` (a key's value schema
        depends on its text), ``propertyNames``, ``minProperties`` / ``maxProperties``,
        dependencies; and in an item of a ``uniqueItems`` list, whose factor compares the
        items by their declared keys (entries in another order would be the same object).
        Where declared keys are optional, the writer writes the next key as one free
        string whose text tells a declared key from an
        other one (a key slot: ``"a"`` and ``"ab"`` begin alike).
        """
        if not self.others or self.reading or patterns or kws & _KEYS_KEYWORDS:
            return None  # (reading: a unique list's factor compares the items it is in)
        value_schema: object = {} if extra is True else extra
        try:
            value = self.node(value_schema, extra_at, refs, depth + 1)
        except IRError:  # refused (a grammar value llguidance cannot hold): declared only
            return None
        except NothingWritable:
            return {}
        names = {str(f["name"]) for f in fields}
        name = "*"
        while name in names:  # a declared property named "*"
            name += "*"
        key: JsonDict = {"type": "leaf", "kind": "str", "nullable": False, "min_length": 0}
        entry: JsonDict = {
            "type": "object",
            "name": "Entry",
            "fields": [
                {"name": "key", "key": "key", "node": key},
                {"name": "value", "key": "value", "node": value},
            ],
            "nullable": False,
        }
        node: JsonDict = {
            "type": "list",
            "item": entry,
            "min_length": 0,
            "max_length": self.others,
            "bounded_by_schema": False,
            "nullable": False,
            "mapping": True,
        }
        self.made_others = True
        return {"name": name, "key": "", "node": node, "others": True}

    def _finite_keys(self, s: JsonDict, kws: set[str], where: str) -> tuple[JsonDict, set[str]]:
        """``s`` and its keywords, as the closed object it is where its key set is finite.

        A ``propertyNames`` that is an ``enum`` or ``const`` (`closed_keys`); any other
        object is returned as it is.
        """
        if "propertyNames" not in kws:
            return s, kws
        applicable = {k: v for k, v in s.items() if k in kws}
        closed = closed_keys(applicable, resolve=self.resolve, valid=self.valid, where=where)
        if closed is None:
            return s, kws
        return {**{k: v for k, v in s.items() if k not in kws}, **closed}, set(closed)

    def _patterns(self, s: JsonDict, kws: set[str], where: str) -> dict[str, object]:
        """The ``patternProperties`` of an object node (each pattern a Python regex)."""
        if "patternProperties" not in kws:
            return {}
        patterns = shaped(s["patternProperties"], dict, where, "patternProperties")
        for pattern in patterns:
            try:  # as jsonschema matches: re.search
                re.compile(pattern)
            except re.error as exc:
                raise IRError(
                    f"{where}/patternProperties: {pattern!r} is not a regex: {exc}"
                ) from None
        return patterns

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
            NothingWritable: a required key is never written, or (``complete``) no key set
                the writer may write has a count within the bounds.
            NotNative: the bounds or dependencies hold for some of those key sets only, or
                (not ``complete``) need keys the layout does not have: the object is then a
                grammar value, whose grammar holds them.
        """
        deps: list[tuple[str, str, object]] = []
        for kw in ("dependencies", "dependentRequired", "dependentSchemas"):
            if kw in kws:
                deps += [(kw, k, d) for k, d in shaped(s[kw], dict, where, kw).items()]
        for kw, key, dep in deps:
            if isinstance(dep, list) and not all_str(dep):
                raise IRError(f"{where}/{kw}/{pointer_part(key)}: a dependency lists key names")
        if "propertyNames" in kws:
            names, at = s["propertyNames"], f"{where}/propertyNames"
            rejected = {str(f["key"]) for f in fields if not self.valid(names, str(f["key"]), at)}
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
                raise NotNative(f"{where}: a dependency on a key the object does not declare")
            for key, (kw, missing) in lacking.items():
                why = f"{kw} asks for {missing[0]!r} beside it, which is never written"
                fields = self._without(fields, {key}, required, f"{where}/{kw}: {why}")
        keys = {str(f["key"]) for f in fields}
        sure = keys & required
        lo = _integral(s.get("minProperties")) if "minProperties" in kws else None
        hi = _integral(s.get("maxProperties")) if "maxProperties" in kws else None
        if lo is not None and len(keys) < lo:
            if not complete:  # undeclared keys may make up the count
                raise NotNative(f"{where}: minProperties {lo} above the declared keys")
            raise NothingWritable(
                f"{where}: minProperties {lo}, but at most {len(keys)} of its keys can be written"
            )
        if hi is not None and len(sure) > hi:
            raise NothingWritable(f"{where}: maxProperties {hi}, but {len(sure)} keys are required")
        if lo is not None and len(sure) < lo:
            raise NotNative(f"{where}: minProperties {lo} beside optional properties")
        if hi is not None and len(keys) > hi:
            raise NotNative(f"{where}: maxProperties {hi} beside optional properties")
        for kw, key, dep in deps:
            if key not in keys or dep is True or dep == {}:
                continue
            at = f"{where}/{kw}/{pointer_part(key)}"
            if not isinstance(dep, list):
                raise NotNative(f"{at}: a schema dependency of a key that may be written")
            if not set(dep) <= sure:
                raise NotNative(f"{at}: {key!r} asks for keys that may be left out")
        return fields

    @staticmethod
    def _without(
        fields: list[JsonDict], keys: set[str], required: set[str], why: str
    ) -> list[JsonDict]:
        """``fields`` less those of ``keys``, which are never written (``why``)."""
        needed = sorted(keys & required)
        if needed:
            raise NothingWritable(f"{why}, and {needed[0]!r} is required")
        return [f for f in fields if f["key"] not in keys]


_KEYS_KEYWORDS = frozenset(
    {
        "propertyNames",
        "minProperties",
        "maxProperties",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
    }
)
"""Keywords on an object's key set that free other keys cannot hold (`_others`)."""


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
