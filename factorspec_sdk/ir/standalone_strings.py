"""A grammar value's string keywords, ``pattern`` and ``format``, as llguidance reads them.

`factorspec_sdk.ir.standalone` copies a sub-schema for llguidance; this module holds what it
does with a string's keywords: `checked_pattern` refuses a pattern the two readers would read
differently, `searched_pattern` keeps its anchors at its ends (llguidance searches it as
`jsonschema` does), `STRICT_FORMATS` are the formats llguidance reads more loosely than
`jsonschema`, as patterns, and `asserted_format` says whether a ``format`` constrains the
value at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from jsonschema.protocols import Validator

from factorspec_sdk.ir.limits import IRError
from factorspec_sdk.relations.grammar_schema import (
    FORMAT_PATTERNS,
    RFC3339_PATTERNS,
    URI_REFERENCE_PATTERN,
    URI_TEMPLATE_PATTERN,
)
from factorspec_sdk.relations.layout import grammar_layout

__all__ = [
    "STRICT_FORMATS",
    "asserted_format",
    "checked_pattern",
    "searched_pattern",
    "split_flags",
]

STRICT_FORMATS = {
    "date": FORMAT_PATTERNS["date"],
    **RFC3339_PATTERNS,
    "uri-reference": URI_REFERENCE_PATTERN,
    "uri-template": URI_TEMPLATE_PATTERN,
}
"""Formats llguidance reads more loosely than `jsonschema` and Pydantic, as a pattern both
accept: llguidance's ``date`` allows February 29 of every year and year 0000, which
``datetime.date.fromisoformat`` refuses (the Pydantic path's pattern, one copy); its ``time``
and ``date-time`` allow a leap second, which Pydantic refuses, and fractional seconds without
end (`RFC3339_PATTERNS`: at most microseconds); and ``uri-reference`` and ``uri-template``,
which llguidance does not know and `jsonschema` asserts where the `rfc3987` (or
`rfc3986-validator`) and `uri_template` packages are installed (`URI_REFERENCE_PATTERN`,
`URI_TEMPLATE_PATTERN`)."""
_FLAGS = re.compile(r"(\(\?[aiLmsux]+\))+")


def split_flags(pattern: str) -> tuple[str, str]:
    """``pattern``'s global flags in front (``(?i)``, ``(?i)(?s)``; empty when none) and the rest.

    The anchors of a pattern are read after its flags (`searched_pattern`, and the server's
    ``regex`` wrapper, which anchors the rest and keeps the flags in front).
    """
    flags = _FLAGS.match(pattern)
    head = flags.group(0) if flags else ""
    return head, pattern[len(head) :]


class _Unknown(Exception):
    pass


def asserted_format(fmt: object, dialect: type[Validator]) -> bool:
    """Whether a string ``format`` constrains the value: `jsonschema` or llguidance checks it.

    `jsonschema` asserts the formats of its dialect's checker (those whose libraries are
    installed) and ignores the others; a format llguidance knows is kept too (the values look
    like what the client asked for), and so is one of `STRICT_FORMATS` (``uri-template``,
    which other validators assert). A format none of them knows is irrelevant to validity.
    """
    if not isinstance(fmt, str):
        return True  # the meta-schema check refuses it
    if fmt in dialect.FORMAT_CHECKER.checkers or fmt in STRICT_FORMATS:
        return True

    def unknown(why: str) -> Exception:
        return _Unknown(why)

    try:
        grammar_layout({"type": "string", "format": fmt}, unknown)
    except _Unknown:
        return False
    return True


def searched_pattern(pattern: str, at: str) -> str:
    """``pattern``, which llguidance searches as `jsonschema` does, anchors at its ends only.

    The token budget's closing walk reads a pattern's ``^`` and ``$`` at its ends
    (`factorspec_sdk.writer.closing_strings`), so one inside it (``^a$|^b$``, ``(^a$)``)
    could leave a value the walk cannot finish: refused, as llguidance refused it anchored.

    Raises:
        IRError: ``^`` or ``$`` inside the pattern (outside a character class).
    """
    head, body = split_flags(pattern)
    wrapped = body[1:-1]
    backslashes = len(wrapped[:-1]) - len(wrapped[:-1].rstrip("\\"))
    if _wraps(body) and wrapped.startswith("^") and wrapped.endswith("$") and backslashes % 2 == 0:
        # (^a$) is ^(a)$: the group holds the whole pattern, its anchors at its ends
        body = f"^({wrapped[1:-1]})$"
        pattern = head + body
    if _inner_anchor(body):
        raise IRError(
            f"{at}: pattern {pattern!r} has ^ or $ inside it, not only at its ends; not "
            "supported (write the anchors at its ends: ^(?:a|b)$ for ^a$|^b$)"
        )
    return pattern


def _syntax(body: str) -> Iterator[tuple[int, str]]:
    """The characters of regex ``body`` that are syntax: unescaped and outside a class.

    A class starts at ``[``; a ``^`` right after it negates it and a ``]`` first in it is a
    literal (as Python's `re`, which `jsonschema` uses, reads it); it ends at the next
    unescaped ``]``. Yields each such character with its index.
    """
    i, in_class = 0, False
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if body[i + 1 : i + 2] == "^":
                i += 1  # a negated class
            if body[i + 1 : i + 2] == "]":
                i += 1  # a literal ] first in the class
        else:
            yield i, c
        i += 1


def _wraps(body: str) -> bool:
    """Whether ``body`` is one group, ``(...)``, around the whole regex."""
    if not (body.startswith("(") and body.endswith(")")) or body.startswith("(?"):
        return False
    depth = 0
    for i, c in _syntax(body):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0 and i < len(body) - 1:
                return False  # the first group closes before the end
    return depth == 0


def _inner_anchor(body: str) -> bool:
    """Whether regex ``body`` has ``^`` or ``$`` (unescaped, outside a class) inside it."""
    last = len(body) - 1
    return any((c == "^" and i > 0) or (c == "$" and i < last) for i, c in _syntax(body))


def checked_pattern(v: object, at: str) -> str:
    """``v``, a ``pattern`` keyword's value, checked to read the same in `re` and llguidance.

    Raises:
        IRError: ``v`` is not a string, may hold a POSIX class, or is no Python regex.
    """
    if not isinstance(v, str):
        raise IRError(f"{at}: pattern must be a string")
    if "[:" in v:
        raise IRError(
            f"{at}: pattern {v!r} may hold a POSIX class ([:alpha:]), which Python's re and "
            "the grammar's regex read differently; not supported"
        )
    try:
        re.compile(v)
    except re.error as exc:
        raise IRError(f"{at}: {v!r} is not a Python regex: {exc}") from None
    return v
