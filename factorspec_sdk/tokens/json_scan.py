"""Where a grammar segment's JSON text stands, read byte by byte.

`factorspec_sdk.tokens.grammar` decodes a segment with llguidance and reads its bytes itself
for two things llguidance does not say: `JsonScan` tells the closing walk whether it is in a
string, an escape, a UTF-8 character, a number or between values (and the single bytes it
tries there, in order: `STRING_ORDER` ...), and `lex` finds where each value of the segment
ends and how deep its arrays and objects nest (`lex_value` for one value alone).
"""

from __future__ import annotations

import json

from factorspec_sdk.writer.closing_strings import COMPLETION_CHARS

__all__ = [
    "CLOSE_BYTES",
    "ESCAPE_ORDER",
    "IN_ESCAPE",
    "IN_NUMBER",
    "IN_OTHER",
    "IN_STRING",
    "IN_UTF8",
    "STRING_ORDER",
    "UTF8_ORDER",
    "VALUE_ORDER",
    "OPEN_BYTES",
    "SCALAR_BYTES",
    "JsonScan",
    "Lex",
    "lex",
    "lex_start",
    "lex_value",
    "splits_a_character",
]

SCALAR_BYTES = frozenset(b"0123456789+-.eEtrufalsn")
"""Bytes of a number or a literal (``true``, ``false``, ``null``)."""
_BEFORE_VALUE = frozenset([-1, *b"[,:"])
OPEN_BYTES = frozenset(b"[{")
"""Bytes that open an array or an object."""
CLOSE_BYTES = frozenset(b"]}")
"""Bytes that close one."""
_NUMBER_START = frozenset(b"-0123456789")
IN_STRING, IN_ESCAPE, IN_UTF8, IN_NUMBER, IN_OTHER = range(5)
"""Where `JsonScan.kind` says the text is: in a string, an escape, a UTF-8 character, a number,
elsewhere."""
STRING_ORDER = b'"\\' + COMPLETION_CHARS.encode("ascii")
"""In a string no guide completes: close it, else a low surrogate's escape, else a character."""
ESCAPE_ORDER = b'ntrbf/\\"u0123456789abcdefABCDEF'
"""In an escape: its letters, then the hex digits of ``\\u``."""
UTF8_ORDER = bytes(range(0x80, 0xC0))
"""Inside a UTF-8 character: its continuation bytes."""
VALUE_ORDER = b'0"[{ntf-123456789' + bytes(range(0x20, 0x7F)) + bytes(range(0x80, 0xF5))
"""Between values: the shortest value first (``0``, ``""``, ``[]``, ``{}``, ``null``)."""


class JsonScan:
    """Where the closing walk is in a segment's JSON text: in a string, a number, or between.

    Fed the segment's bytes as they are written (layout text and values alike: the layout
    text holds whole keys, so strings open and close in it as in the values).
    """

    __slots__ = ("data", "escape", "in_str", "last", "scalar", "start")

    def __init__(self) -> None:
        self.data = bytearray()
        self.in_str = False
        self.escape = 0  # bytes of an escape still to come (1 after a backslash, 4 after \u)
        self.start = 0  # where the open string's content starts
        self.scalar = -1  # where the scalar under way (a number, true, ...) starts
        self.last = -1  # the last byte outside strings other than a space (-1: none yet)

    def feed(self, chunk: bytes) -> None:
        """Read ``chunk``, the next bytes of the segment."""
        data = self.data
        for b in chunk:
            data.append(b)
            if self.in_str:
                if self.escape:
                    self.escape = 4 if self.escape == 1 and b == ord("u") else self.escape - 1
                elif b == ord("\\"):
                    self.escape = 1
                elif b == ord('"'):
                    self.in_str = False
            elif b == ord('"'):
                self.in_str, self.start, self.scalar, self.last = True, len(data), -1, b
            elif b in SCALAR_BYTES:
                if self.scalar < 0:
                    self.scalar = len(data) - 1
                self.last = b
            else:
                self.scalar = -1
                if b != ord(" "):
                    self.last = b

    @property
    def value_expected(self) -> bool:
        """Whether a value starts here.

        After ``[``, ``,`` (or a key: no literal is one) or ``:``, or before anything.
        """
        return not self.in_str and self.last in _BEFORE_VALUE

    @property
    def kind(self) -> int:
        """Where the text is: in a string, an escape, a UTF-8 character, a number, elsewhere."""
        if self.in_str:
            if self.escape:
                return IN_ESCAPE
            return IN_UTF8 if splits_a_character(bytes(self.data), len(self.data)) else IN_STRING
        if self.scalar >= 0 and self.data[self.scalar] in _NUMBER_START:
            return IN_NUMBER
        return IN_OTHER

    def content(self) -> str | None:
        """The open string's characters so far, escapes decoded (None if they do not)."""
        try:
            text = json.loads(b'"' + bytes(self.data[self.start :]) + b'"')
        except ValueError:
            return None
        return text if isinstance(text, str) else None

    def number(self) -> str:
        """The number under way."""
        return bytes(self.data[self.scalar :]).decode("ascii")


Lex = tuple[int, int, int, int, int, int, int, int]
"""Where a segment's bytes stand (`lex`): the value under way or next, the layout text's bytes
still to pass before it, the arrays and objects open in it, whether in a string, the escape's
bytes still due (1 after a backslash, 4 after ``\\u``), the UTF-8 character's bytes still due,
the bytes read, and the bytes read when the last value ended."""

_FAR = 1 << 62
"""The layout text after a value that `lex_value` reads alone: longer than any data."""


def lex_start(text: int) -> Lex:
    """Before the first byte, ``text`` bytes of layout text before the first value."""
    return (0, text, 0, 0, 0, 0, 0, 0)


def lex(state: Lex, data: bytes, texts: tuple[int, ...]) -> Lex:
    """``state`` after ``data``, for ``texts[k]`` bytes of layout text before value ``k``.

    ``texts[-1]`` is the text after the last value. A value ends with a string's or the
    outer array's or object's closing byte, or before the first byte after a scalar that
    cannot continue it (that byte starts the text after).
    """
    k, skip, depth, in_str, escape, utf8, n, ended = state
    last = len(texts) - 1
    i, size = 0, len(data)
    while i < size:
        if skip:
            step = min(skip, size - i)
            skip -= step
            i += step
            continue
        if k >= last:  # all values written: the rest is the text after the last
            i = size
            break
        b = data[i]
        if in_str:
            if utf8:
                utf8 -= 1
            elif escape:
                escape = 4 if escape == 1 and b == 0x75 else escape - 1
            elif b == 0x5C:
                escape = 1
            elif b == 0x22:
                in_str = 0
                if not depth:
                    k, skip, ended = k + 1, texts[k + 1], n + i + 1
            elif b >= 0xC0:
                utf8 = 1 if b < 0xE0 else 2 if b < 0xF0 else 3
        elif b == 0x22:
            in_str = 1
        elif b in OPEN_BYTES:
            depth += 1
        elif b in CLOSE_BYTES:
            depth -= 1
            if not depth:
                k, skip, ended = k + 1, texts[k + 1], n + i + 1
        elif not depth and b not in SCALAR_BYTES:
            k, skip, ended = k + 1, texts[k + 1], n + i
            continue  # the scalar ended: this byte is the text after it
        i += 1
    return (k, skip, depth, in_str, escape, utf8, n + size, ended)


def lex_value(data: bytes, pos: int) -> tuple[int | None, bool]:
    """Lex the JSON value at ``data[pos:]``: its end, or ``None`` and whether in a string.

    The end is known once the value closes: a string's or the outer list's closing byte,
    or the first byte after a scalar that cannot continue it. A value still open at the end
    of ``data`` gives ``(None, inside)``: ``inside`` when ``data`` ends inside a string,
    ready for a character (no escape pending, no UTF-8 character begun).
    """
    k, _, _, in_str, escape, utf8, _, ended = lex(lex_start(0), data[pos:], (0, _FAR))
    if k:
        return pos + ended, False
    return None, bool(in_str) and not escape and not utf8


def splits_a_character(data: bytes, n: int) -> bool:
    """Whether ``data[:n]`` ends inside a UTF-8 character."""
    k = n - 1
    while k >= 0 and data[k] & 0xC0 == 0x80 and n - k < 4:
        k -= 1
    if k < 0 or data[k] < 0xC0:
        return False
    need = 2 if data[k] < 0xE0 else 3 if data[k] < 0xF0 else 4
    return n - k < need
