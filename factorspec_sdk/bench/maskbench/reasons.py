"""Why an instance could not be written: the place in its JSON text where the masks stopped it.

The search reports the furthest byte position any tokenization reached (`Dead`). What sits
there in the instance's text says what the engine refused to write: an object key (one the
schema names, where the writer wants another first: an optional property the instance
omits; or one the schema does not name, under ``additionalProperties`` or
``patternProperties``), the end of an object (the writer wants a further key: optional
properties omitted at the end), an item past the writer's list bound, an escape in a
string, a value of a type the writer does not offer there, ... `place_of` names the place
as a short *label* (what the report counts) and a *path* (a JSON pointer into the
instance).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from factorspec_sdk.bench.maskbench.search import Dead, TokenIndex
from factorspec_sdk.bench.maskbench.texts import SchemaView

__all__ = ["Place", "describe", "place_of"]

_CONTEXT = 40
_SHOWN = 12

_KEY_NAMED = "a key the schema names (the writer wants another first: an optional key omitted?)"
_KEY_UNNAMED = "a key the schema does not name (additionalProperties, patternProperties)"
_END = "the record cannot end here"
_LABELS = {
    "key": "object key (the writer offers another key here)",
    "next-key": "another key (the writer closes the object here)",
    "close": "object ends (the writer wants another key: an optional key omitted?)",
    "colon": "key separator",
    "next-item": "another item (past the writer's list bound)",
    "close-array": "array ends (the writer wants more items)",
    "string": "string content",
    "escape": "escape in a string",
    "string-end": "string ends (the writer wants more characters)",
    "number": "number digits",
    "literal": "literal",
}


@dataclass(frozen=True, slots=True)
class Place:
    """A place in an instance's JSON text.

    Attributes:
        label: what is there (``object key ...``, ``string value``, ``escape in a string``,
            ...), the same text for the same kind of place.
        path: where, as a JSON pointer into the instance (``/a/0/b``; ``""`` the root).
    """

    label: str
    path: str


Parts = tuple[str | int, ...]


def _pointer(parts: Parts) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class _Roles:
    """Each character's role in a compact JSON text, found by one recursive descent."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.roles: list[tuple[str, Parts]] = [("end", ())] * len(text)
        self.i = 0

    def mark(self, n: int, role: str, path: Parts) -> None:
        for k in range(self.i, min(self.i + n, len(self.text))):
            self.roles[k] = (role, path)
        self.i += n

    def value(self, path: Parts) -> None:
        c = self.text[self.i]
        if c == "{":
            self.mark(1, "value object", path)
            self.members(path)
        elif c == "[":
            self.mark(1, "value array", path)
            self.items(path)
        elif c == '"':
            self.string(path, "value string", "string")
        elif c in "-0123456789":
            end = self.i + 1
            while end < len(self.text) and self.text[end] in "0123456789+-.eE":
                end += 1
            self.mark(1, "value number", path)
            self.mark(end - self.i, "number", path)
        else:
            word = next(w for w in ("true", "false", "null") if self.text.startswith(w, self.i))
            self.mark(1, f"value {word}", path)
            self.mark(len(word) - 1, "literal", path)

    def string(self, path: Parts, first: str, inner: str) -> str:
        start = self.i
        self.mark(1, first, path)
        while self.text[self.i] != '"':
            if self.text[self.i] == "\\":
                self.mark(6 if self.text[self.i + 1] == "u" else 2, "escape", path)
            else:
                self.mark(1, inner, path)
        self.mark(1, "string-end" if inner == "string" else inner, path)
        raw: str = json.loads(self.text[start : self.i])
        return raw

    def members(self, path: Parts) -> None:
        first = True
        while self.text[self.i] != "}":
            if not first:
                self.mark(2, "next-key", path)
            first = False
            start = self.i
            key = self.string(path, "key", "key")
            sub = (*path, key)
            for k in range(start, self.i):
                self.roles[k] = ("key", sub)
            self.mark(2, "colon", sub)
            self.value(sub)
        self.mark(1, "close", path)

    def items(self, path: Parts) -> None:
        index = 0
        while self.text[self.i] != "]":
            if index:
                self.mark(2, "next-item", path)
            self.value((*path, index))
            index += 1
        self.mark(1, "close-array", path)


def _schema_at(view: SchemaView, parts: Parts) -> Any:
    schema: Any = view.root
    for part in parts:
        schema = view.item(schema, part) if isinstance(part, int) else view.child(schema, part)
    return schema


def _key_label(view: SchemaView, parts: Parts) -> str:
    """A key the masks refused: one the schema names, or one it does not."""
    if parts[-1] in view.property_order(_schema_at(view, parts[:-1])):
        return _KEY_NAMED
    return _KEY_UNNAMED


def place_of(text: str, char_index: int, schema: Any = None) -> Place:
    """The place of character ``char_index`` of ``text``, a compact JSON text.

    ``char_index`` at the end of the text is the record's end. With ``schema`` (the
    instance's), an object key says whether the schema names it under ``properties``.
    """
    if char_index >= len(text):
        return Place(_END, "")
    roles = _Roles(text)
    try:
        roles.value(())
    except (IndexError, StopIteration, ValueError):
        return Place("unparsed text", "")
    role, parts = roles.roles[char_index]
    if role.startswith("value "):
        return Place(f"{role.removeprefix('value ')} value", _pointer(parts))
    if role == "key" and schema is not None:
        return Place(_key_label(SchemaView(schema), parts), _pointer(parts))
    return Place(_LABELS.get(role, role), _pointer(parts))


def describe(text: str, dead: Dead, index: TokenIndex, schema: Any = None) -> tuple[Place, str]:
    """The place of a search's furthest dead end, and a line for a person to read.

    The place is where the text first differs from every token the masks allow there (a
    token ``],`` allowed where the text says ``]}`` puts it at the ``}``). The line names the
    place and the path, the text around it (``⟨here⟩`` marks the spot) and the allowed
    tokens that agree with the text the longest. ``schema``: as in `place_of`.
    """
    data = text.encode("utf-8")
    agree, order = index.closest(dead.allowed, data, dead.position)
    at = len(data[: dead.position + agree].decode("utf-8", errors="ignore"))
    place = Place(_END, "") if dead.ended else place_of(text, at, schema)
    before = text[max(0, at - _CONTEXT) : at]
    after = text[at : at + _CONTEXT]
    shown = ", ".join(json.dumps(index.text(t), ensure_ascii=False) for t in order[:_SHOWN])
    more = "" if len(order) <= _SHOWN else f", ... ({len(order)} tokens)"
    line = (
        f"{place.label} at {place.path or '/'} (character {at}): "
        f"{before!r}⟨here⟩{after!r}; the masks allow {shown or 'nothing'}{more}"
    )
    return place, line
