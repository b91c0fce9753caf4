"""The JSON Schema converter's shared part: its state, ``$ref`` lookup, and grammar values.

`ConverterBase` holds what every part of the conversion (`factorspec_sdk.ir.jsonschema`)
reads: the root schema and its dialect, the limits, the lists laid out unique (whose items a
relation reads), and the decisions shared by objects, arrays and combinators: a sub-schema
as one self-contained grammar value, and whether a list or object that may be ``null`` stays
native. The signals that carry a decision inside the conversion (`NothingWritable`,
`TooLarge`, `NotNative`) are here too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from urllib.parse import unquote

import jsonschema
from jsonschema.protocols import Validator

from factorspec_sdk.ir.jsonschema_keywords import LEGACY, JsonDict, as_dict
from factorspec_sdk.ir.limits import IRError, IRLimits
from factorspec_sdk.ir.schema_check import json_schema_validator
from factorspec_sdk.ir.standalone import has_ref, standalone_schema
from factorspec_sdk.ir.unique import unique_relations
from factorspec_sdk.relations.layout import grammar_layout

__all__ = ["ConverterBase", "NotNative", "NothingWritable", "TooLarge"]


class NothingWritable(IRError):
    """No value the writer can write passes the schema at this place."""


class TooLarge(IRError):
    """The native layout would pass a limit: the whole record becomes one grammar value."""


class NotNative(IRError):
    """The writer does not lay this sub-schema out itself: it becomes a grammar value."""


class ConverterBase(ABC):
    """The state of one conversion and the parts every node kind uses (see the module)."""

    def __init__(self, root: JsonDict, limits: IRLimits, *, others: int = 0) -> None:
        self.root = root
        self.limits = limits
        self.others = others  # most other keys of an object laid out natively (0: none)
        self.made_others = False  # an object's other keys were laid out natively
        self.count = 0
        self.validator = json_schema_validator(root, check_schema=False)
        cls = type(self.validator)
        if cls is jsonschema.Draft3Validator:
            raise IRError("draft 3 schemas are not supported; use draft 4 or later")
        self.keywords = frozenset(cls.VALIDATORS)
        self.legacy = cls in LEGACY
        self.id_key = "id" if cls is jsonschema.Draft4Validator else "$id"
        self.unique: dict[int, tuple[JsonDict, str]] = {}  # lists whose items differ, by id
        self.unique_anywhere = _mentions_unique(root)
        self.reading = 0  # how many uniqueItems lists the node being laid out is an item of

    def relations(self, layout: JsonDict) -> JsonDict:
        """The IR's ``strings``, ``variables`` and ``factors``: the items of a unique list differ.

        See `unique_relations`: one factor ``uniqueItems of <path>`` per place of each list
        `ArrayConverter` laid out. Empty when no list is unique.

        Raises:
            IRError: the factors need more variables or factors than the limits allow, or
                two places of the layout spell the same variable name (a key with a dot).
        """
        return unique_relations(layout, self.unique, self.limits)

    def valid(self, s: object, value: str | int | bool | None, where: str) -> bool:
        """Whether `jsonschema` accepts ``value`` for the node ``s`` ($refs from the root)."""
        v: Validator = self.validator.evolve(schema=s)
        try:
            return v.is_valid(value)
        except Exception as exc:  # a malformed schema (the meta-schema check comes last)
            raise IRError(f"{where}: jsonschema cannot evaluate the schema: {exc}") from None

    def resolve(self, ref: object, where: str) -> object:
        """The schema that the local ``$ref`` ``ref`` (at ``where``) points to.

        Raises:
            IRError: ``ref`` is not local, does not resolve, or points under an embedded
                id that moves the base its ``$ref``s resolve against.
        """
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            raise IRError(f"{where}: only local $ref ('#/$defs/Name') is supported, got {ref!r}")
        node: object = self.root
        moved = False
        for part in unquote(ref[2:]).split("/") if ref != "#" else []:
            moved = moved or (node is not self.root and self.moves_base(node))
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

    def moves_base(self, s: object) -> bool:
        """Whether ``s`` is a schema with an embedded id that is not a plain-name anchor."""
        if not isinstance(s, dict):
            return False
        v = s.get(self.id_key)
        return isinstance(v, str) and not v.startswith("#")

    @abstractmethod
    def node(self, s: object, where: str, refs: tuple[str, ...], depth: int) -> JsonDict:
        """The layout of schema ``s``; `NothingWritable` when the writer has no value for it."""

    def grammar(self, s: object, where: str, reason: str) -> JsonDict:
        """The grammar value of sub-schema ``s``, which the writer does not lay out (``reason``)."""
        if where == "#":
            return self.root_grammar(reason)
        return self._checked_grammar(s, where, reason)

    def root_grammar(
        self, reason: str = "#: the root is no object the writer lays out"
    ) -> JsonDict:
        """The whole record as one grammar value (the root is not laid out natively)."""
        return self._checked_grammar(self.root, "#", reason)

    def _checked_grammar(self, s: object, where: str, reason: str) -> JsonDict:
        """``s`` made self-contained as a grammar value, compiled by llguidance to check it."""
        schema = standalone_schema(
            s,
            where,
            root=self.root,
            dialect=type(self.validator),
            resolve=self.resolve,
            valid=self.valid,
        )

        def fail(why: str) -> IRError:
            return IRError(f"{reason}, and as a grammar value {why}")

        grammar_layout(schema, fail)
        return {"type": "grammar", "schema": schema}

    def open_grammar(self, s: JsonDict, where: str) -> tuple[JsonDict | None, str | None]:
        """The grammar value of an object whose native layout would narrow it, or why not.

        The writer writes no key an object does not declare, and no ``null`` for an object
        or list whose null-ness no relation reads.
        """
        reason = f"{where}: an object that allows keys it does not declare, or null"
        try:
            return self.grammar(s, where, reason), None
        except IRError as exc:  # llguidance (or standalone_schema) refuses it
            return None, exc.message

    def writable_null(self, s: JsonDict, where: str, out: JsonDict) -> JsonDict:
        """``out``, a native list or object, or where it may be ``null``, ``s`` as a grammar value.

        The writer writes ``null`` for a list or object only where a relation reads its
        null-ness, so one the schema allows ``null`` for is the grammar value of ``s`` (which
        writes ``null`` too) where no relation reads it or under it. Where one does, or
        llguidance refuses the grammar, it stays native: ``null`` never written there, a
        restriction its layout shows (a nullable list or object without a null variable).
        """
        if out["type"] not in ("object", "list") or not out["nullable"]:
            return out  # a leaf writes its null itself
        if self.reading or self.reads_below(out):
            return out
        grammar, _ = self.open_grammar(s, where)
        return out if grammar is None else grammar

    def reads_below(self, node: JsonDict) -> bool:
        """Whether a relation reads a value under layout ``node`` (a list laid out unique)."""
        stack = [node]
        while stack and self.unique:
            n = stack.pop()
            if id(n) in self.unique:
                return True
            if n["type"] == "object":
                fields = n["fields"]
                assert isinstance(fields, list)  # built by object_node
                stack += [as_dict(as_dict(f)["node"]) for f in fields]
            elif n["type"] == "list":
                stack.append(as_dict(n["item"]))
        return False


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
