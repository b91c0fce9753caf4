"""The rest of a JSON value written in part, as a Lark expression llguidance reads.

A grammar segment (`factorspec_sdk.tokens.grammar`) goes to an engine such as vLLM as one
request with a Lark grammar of what is still to write. Between its values that grammar is
the segment's own, from the layout text on. Inside a value it cannot be: a schema's grammar
(llguidance's ``%json``) starts at the value's first byte, and llguidance's Lark has no way to
start a rule in its middle. `value_rest` reads where the written bytes stand (the arrays and
objects open, each one's place between its items, the string, number or literal under way)
and writes what may finish them as JSON with the writer's separators: the rest of the string
or number under way, then, for each open array or object from the innermost, its remaining
items as any JSON values (and keys as any strings) and its closing byte.

So the rest of a value is a **superset** of what its schema allows there: every text the
schema allows after the bytes is in it, not every text in it is allowed. That is all a span
needs: FactorSpec takes a reply's tokens only while its own masks allow them, so a reply
that leaves the schema is refused at that token and asked again within the masks; the
superset never lets a token the schema refuses into the record.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from factorspec_sdk.relations.layout import GRAMMAR_OPTIONS
from factorspec_sdk.tokens.json_scan import (
    CLOSE_BYTES,
    OPEN_BYTES,
    SCALAR_BYTES,
    splits_a_character,
)

__all__ = ["LarkPart", "value_rest"]


@dataclass(frozen=True, slots=True)
class LarkPart:
    """A Lark expression and the rules it names (none of them named ``T<i>`` or ``v<i>``)."""

    expr: str
    rules: tuple[str, ...]


_ANY = "json_any"
_RULES: tuple[str, ...] = (
    f"{_ANY}: %json " + json.dumps({"x-guidance": GRAMMAR_OPTIONS}),
    f'json_member: JSON_KEY ": " {_ANY}',
    r"JSON_KEY: /\x22([^\x22\x5c\x00-\x1f]|\x5c([\x22\x5c\x2fbfnrt]|u[0-9a-fA-F]{4}))*\x22/",
    r"STRING_REST: /([^\x22\x5c\x00-\x1f]|\x5c([\x22\x5c\x2fbfnrt]|u[0-9a-fA-F]{4}))*\x22/",
)
"""Any JSON value with the writer's separators, an object's member, a key, a string's rest."""

_ITEMS = f'(", " {_ANY})* "]"'
_MEMBERS = '(", " json_member)* "}"'
_FRAME_RESTS: dict[tuple[int, str], str] = {
    (ord("["), "open"): f'("]" | {_ANY} {_ITEMS})',
    (ord("["), "value"): f"{_ANY} {_ITEMS}",
    (ord("["), "sep"): f'" " {_ANY} {_ITEMS}',
    (ord("["), "after"): _ITEMS,
    (ord("{"), "open"): f'("}}" | json_member {_MEMBERS})',
    (ord("{"), "key"): f"json_member {_MEMBERS}",
    (ord("{"), "sep"): f'" " json_member {_MEMBERS}',
    (ord("{"), "colon"): f'": " {_ANY} {_MEMBERS}',
    (ord("{"), "colon_sep"): f'" " {_ANY} {_MEMBERS}',
    (ord("{"), "value"): f"{_ANY} {_MEMBERS}",
    (ord("{"), "after"): _MEMBERS,
}
"""The rest of an open array or object, by its place: just opened, a value (or key) due,
after the ``,`` of a separator, after a key, after its ``:``, after an item."""

_AFTER_SPACE = {
    (ord("["), "sep"): "value",
    (ord("{"), "sep"): "key",
    (ord("{"), "colon_sep"): "value",
}
"""Where the space of a separator leads."""

_FRAC = r"\.[0-9]+"
_EXP = r"[eE][+\-]?[0-9]+"
_NUMBER_RESTS: tuple[tuple[re.Pattern[str], str, bool], ...] = (
    (re.compile(r"-"), r"(0|[1-9][0-9]*)(" + _FRAC + ")?(" + _EXP + ")?", True),
    (re.compile(r"-?0"), f"{_FRAC}({_EXP})?|{_EXP}", False),
    (re.compile(r"-?[1-9][0-9]*"), f"[0-9]+({_FRAC})?({_EXP})?|{_FRAC}({_EXP})?|{_EXP}", False),
    (re.compile(r"-?(0|[1-9][0-9]*)\."), f"[0-9]+({_EXP})?", True),
    (re.compile(r"-?(0|[1-9][0-9]*)" + _FRAC), f"[0-9]+({_EXP})?|{_EXP}", False),
    (re.compile(r"-?(0|[1-9][0-9]*)(" + _FRAC + ")?[eE]"), r"[+\-]?[0-9]+", True),
    (re.compile(r"-?(0|[1-9][0-9]*)(" + _FRAC + r")?[eE][+\-]"), "[0-9]+", True),
    (re.compile(r"-?(0|[1-9][0-9]*)(" + _FRAC + ")?" + _EXP), "[0-9]+", False),
)
"""A JSON number's rest by what is written of it: a regex of it (never empty), and whether it
must be written (else the number may end here)."""

_LITERALS = ("true", "false", "null")


def value_rest(data: bytes) -> LarkPart | None:
    """What may finish the JSON value ``data`` begins, with the writer's separators.

    ``data`` is a non-empty prefix of one value as a segment's grammar writes it (no free
    whitespace). The expression allows every way the value's schema allows to finish it,
    and more (see the module). None where ``data`` ends inside an escape or a UTF-8
    character, or is not such a prefix.
    """
    frames: list[list[int | str]] = []  # [opening byte, place]
    in_str = False
    escape = 0
    scalar: bytearray | None = None
    for b in data:
        if in_str:
            if escape:
                escape = 4 if escape == 1 and b == ord("u") else escape - 1
            elif b == ord("\\"):
                escape = 1
            elif b == ord('"'):
                in_str = False
            continue
        if scalar is not None:
            if b in SCALAR_BYTES:
                scalar.append(b)
                continue
            scalar = None  # the scalar ended before this byte
        top = frames[-1] if frames else None
        if b == ord('"') or b in OPEN_BYTES or b in SCALAR_BYTES:
            if top is not None:
                key = b == ord('"') and top[0] == ord("{") and top[1] in ("open", "key")
                if top[0] == ord("{") and not key and top[1] != "value":
                    return None
                top[1] = "colon" if key else "after"
            if b == ord('"'):
                in_str = True
            elif b in OPEN_BYTES:
                frames.append([b, "open"])
            else:
                scalar = bytearray([b])
        elif b in CLOSE_BYTES and top is not None:
            frames.pop()
        elif b == ord(",") and top is not None and top[1] == "after":
            top[1] = "sep"
        elif b == ord(":") and top is not None and top[1] == "colon":
            top[1] = "colon_sep"
        elif b == ord(" ") and top is not None and (top[0], top[1]) in _AFTER_SPACE:
            top[1] = _AFTER_SPACE[(int(top[0]), str(top[1]))]
        else:
            return None
    if escape or (in_str and splits_a_character(data, len(data))):
        return None
    parts: list[str] = []
    rules: list[str] = []
    if in_str:
        parts.append("STRING_REST")
    elif scalar is not None:
        tail = _scalar_rest(scalar.decode("ascii"))
        if tail is None:
            return None
        if tail.expr:
            parts.append(tail.expr)
            rules.extend(tail.rules)
    parts.extend(_FRAME_RESTS[(int(f[0]), str(f[1]))] for f in reversed(frames))
    return LarkPart(" ".join(parts), (*_RULES, *rules))


def _scalar_rest(written: str) -> LarkPart | None:
    """The rest of a number or a literal (``true``, ``false``, ``null``) begun as ``written``."""
    for literal in _LITERALS:
        if literal.startswith(written):
            rest = literal[len(written) :]
            return LarkPart(json.dumps(rest) if rest else "", ())
    for pattern, rest, needed in _NUMBER_RESTS:
        if pattern.fullmatch(written):
            rule = f"NUMBER_REST: /{rest}/"
            return LarkPart("NUMBER_REST" if needed else "NUMBER_REST?", (rule,))
    return None
