r"""A free string's JSON text and its value: escapes, read a piece at a time.

The writer writes a free string's value (the *unescaped* text: what ``json.loads`` and Pydantic
give back), and the model writes its JSON text, where a character may be an escape: ``\n``,
``\"``, ``\\``, ``\/``, ``\b``, ``\f``, ``\r``, ``\t`` or ``\uXXXX`` (hex digits of either
case), a character beyond U+FFFF as a surrogate pair ``\uD83D\uDE00``. A token may end inside
an escape (after ``\``, or in the middle of ``\u00e9``); what is written of it is the
*pending* escape, and `decode` reads on from it.

Lengths, texts and affixes are the value's: ``"a\nb"`` has length 3 and a surrogate pair is
one character, as ``jsonschema`` (over ``json.loads``) and Pydantic count (``len`` of the
Python string). A lone surrogate escape (``\uD83D`` not followed by a low one, or a low one
alone) is never written: Pydantic refuses such JSON (``json_invalid``), although
``json.loads`` takes it. Control characters (U+0000..U+001F) are written only escaped, as
JSON requires; DEL and every other character may be written raw.

A pending escape counts as one character already: whatever it becomes, it is one more
character of the value (`committed`). The token level sorts pending escapes into
`ESCAPE_CLASSES`: two pending escapes of one class accept the same continuations, with the
same counts (`class_of`); `next_chars` says which characters a pending escape may still
become.
"""

from __future__ import annotations

import json

__all__ = [
    "ESCAPE_CLASSES",
    "ESCAPE_TAIL",
    "NO_ESCAPE",
    "Piece",
    "class_of",
    "committed",
    "decode",
    "json_body",
    "next_chars",
    "writable",
]

_SHORT = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
"""The one-letter escapes and the characters they stand for."""

_HEX = frozenset("0123456789abcdefABCDEF")
_LOW_LEAD = frozenset("cdefCDEF")
"""The second hex digit of a low surrogate (``\\uDC00``..``\\uDFFF``)."""

NO_ESCAPE = ""
"""The pending escape of a string between characters."""

ESCAPE_CLASSES: tuple[str, ...] = (
    NO_ESCAPE,
    "\\",
    "\\u",
    "\\u0",
    "\\ud",
    "\\u00",
    "\\ud8",
    "\\u000",
    "\\ud80",
    "\\ud800",
    "\\ud800\\",
    "\\ud800\\u",
    "\\ud800\\ud",
    "\\ud800\\udc",
    "\\ud800\\udc0",
)
"""One pending escape of each class (`class_of`), the class's index its position.

Between characters; after ``\\``; after ``\\u``; one hex digit in (not a ``D``, or a ``D``:
the next digit decides whether a surrogate follows); two or three in (a character of the
Basic Multilingual Plane, or a high surrogate under way); a high surrogate written, and each
step of the low one that must follow it."""

ESCAPE_TAIL = 11
"""Most characters of JSON text a pending escape still needs (``uD83D\\uDE00`` after ``\\``)."""


class Piece:
    """A piece of a string's JSON text read on from a pending escape (`decode`).

    Attributes:
        chars: the characters of the value it completes.
        escape: the escape pending at its end (`NO_ESCAPE` if none).
        close: where an unescaped quote closes the string in the piece (None: it does not);
            the piece's ``chars`` and ``escape`` are those before the quote.
    """

    __slots__ = ("chars", "close", "escape")

    def __init__(self, chars: str, escape: str, close: int | None) -> None:
        self.chars = chars
        self.escape = escape
        self.close = close


def decode(escape: str, text: str) -> Piece | None:
    r"""``text`` read inside a JSON string whose pending escape is ``escape``.

    Stops at an unescaped quote (the string closes there). None where the text is not valid
    there: a raw control character, an unknown escape (``\x``), a non-hex digit in ``\u``,
    a lone surrogate.
    """
    out: list[str] = []
    pending = escape
    for i, ch in enumerate(text):
        if not pending:
            if ch == '"':
                return Piece("".join(out), pending, i)
            if ch == "\\":
                pending = ch
            elif ord(ch) < 0x20:
                return None
            else:
                out.append(ch)
            continue
        n = len(pending)
        if n == 1:  # after the backslash
            if ch == "u":
                pending += ch
            elif ch in _SHORT:
                out.append(_SHORT[ch])
                pending = NO_ESCAPE
            else:
                return None
        elif n < 6 or n > 9:  # a hex digit of the first or of the low ``\u``
            if ch not in _HEX:
                return None
            pending += ch
            if n == 3 and pending[2] in "dD" and ch in _LOW_LEAD:
                return None  # a low surrogate with no high one before it
            if n == 5:
                code = int(pending[2:], 16)
                if not 0xD800 <= code <= 0xDBFF:
                    out.append(chr(code))
                    pending = NO_ESCAPE
            elif n == 11:
                high, low = int(pending[2:6], 16), int(pending[8:], 16)
                out.append(chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)))
                pending = NO_ESCAPE
        elif (n, ch) in _LOW_STEPS or (n == 9 and ch in _LOW_LEAD):
            pending += ch
        else:
            return None  # a high surrogate not followed by a low one
    return Piece("".join(out), pending, None)


_LOW_STEPS = frozenset({(6, "\\"), (7, "u"), (8, "d"), (8, "D")})
"""The characters after a high surrogate that begin the low one (its second digit aside)."""


def class_of(escape: str) -> int:
    """The class of a pending escape: its index in `ESCAPE_CLASSES`."""
    n = len(escape)
    if n < 3:
        return n
    if n <= 5:
        digits = escape[2:].lower()
        if not digits.startswith("d"):
            return (3, 5, 7)[n - 3]
        if n == 3:
            return 4
        high = digits[1] in "89ab"
        return (6 if high else 5) if n == 4 else (8 if high else 7)
    return n + 3


def committed(written: str, escape: str) -> int:
    """Characters of the value so far: those written, and one for a pending escape."""
    return len(written) + (1 if escape else 0)


def _code_ranges(escape: str) -> list[range]:
    """The code points a pending escape may still become (lone surrogates left out)."""
    if escape == "\\":
        return [range(0xD800), range(0xE000, 0x110000)]
    if len(escape) <= 5:
        digits = escape[2:]
        span = 16 ** (4 - len(digits))
        lo = int(digits, 16) * span if digits else 0
        hi = lo + span  # exclusive
        out = [r for r in (range(lo, min(hi, 0xD800)), range(max(lo, 0xE000), hi)) if r]
        hs, he = max(lo, 0xD800), min(hi, 0xDC00)
        if hs < he:
            out.append(range(0x10000 + ((hs - 0xD800) << 10), 0x10000 + ((he - 0xD800) << 10)))
        return out
    base = 0x10000 + ((int(escape[2:6], 16) - 0xD800) << 10)
    digits = escape[8:]
    span = 16 ** (4 - len(digits)) if len(escape) > 8 else 0x400
    lo = int(digits, 16) * span - 0xDC00 if len(escape) > 8 else 0
    lo = max(lo, 0)
    return [range(base + lo, base + min(lo + span, 0x400))]


def next_chars(escape: str, named: frozenset[str]) -> list[str]:
    """The characters a pending escape may become that matter, ``named`` being those that do.

    Each character of ``named`` it may become, and one it may become outside ``named`` (if
    any): two characters outside ``named`` make texts that no named text tells apart.
    """
    ranges = _code_ranges(escape)
    found = sorted(c for c in named if any(ord(c) in r for r in ranges))
    for r in ranges:
        for code in r:
            if chr(code) not in named:
                return [*found, chr(code)]
    return found


def json_body(text: str) -> str:
    """``text`` as the inside of a JSON string: quotes, backslashes and controls escaped."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def writable(text: str) -> bool:
    """Whether a free string may hold ``text``: no lone surrogate (Pydantic refuses one)."""
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in text)
