"""A free string's rest as a regex, for the engines that take regex constraints.

`factorspec_sdk.drafter.segments` sends a span of a free string to an engine of the
``"spans"`` or ``"regex"`` style as one request: `free_regex` is the rest of the string as
the writer may write it (its feasible lengths, the texts a relation reads it may close as,
its affixes), then the closing quote; `close_tail` is what may follow that quote within one
token. Each regex is a subset of what FactorSpec's masks allow, never empty while the string
can close, so a reply the engine samples under it is one the masks take.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from factorspec_sdk.engines.completion import STRING_CHAR_REGEX, regex_escape
from factorspec_sdk.errors import GenerationError
from factorspec_sdk.tokens.free import FreeTables
from factorspec_sdk.tokens.plan import FreeCursor
from factorspec_sdk.writer.escapes import json_body

__all__ = ["close_tail", "free_regex", "group", "optional_texts"]


def close_tail(cursor: FreeCursor, tables: FreeTables, rests: frozenset[str] = frozenset()) -> str:
    """What a free string's regex allows after its closing quote.

    The start of the forced text after the string, as far as one token with a quote reaches
    into it (``",`` or ``", "``): FactorSpec's mask allows such a token to close the string,
    so the engine's constraint allows it too. With ``rests`` (the planner's
    `~factorspec_sdk.tokens.plan.Planner.close_rests`, for an engine whose reply FactorSpec
    takes by its token ids), also each text a closer may have past that forced text, into
    the options after it (``",`` before an optional key, ``"],`` at a list's end): a reply
    token the masks refuse there is asked again as one token, so the wider tail costs no
    error. The reply's tokens past the quote are left to the planner, whose certain tokens
    write that text.
    """
    suffix = cursor.free.close_suffix
    closers = [*tables.quote_after, *tables.moves("").after]  # plain, and after an escape
    reach = max((len(t) for t in closers if suffix.startswith(t)), default=0)
    texts = {suffix[:k] for k in range(1, reach + 1)}
    texts |= {r for r in rests if r and not suffix.startswith(r)}
    return optional_texts(texts)


def optional_texts(texts: Iterable[str]) -> str:
    """A regex of any of ``texts`` or nothing (empty where there are none), longest first."""
    alternatives = sorted(set(texts), key=lambda t: (-len(t), t))
    if not alternatives:
        return ""
    return "(" + "|".join(regex_escape(t) for t in alternatives) + ")?"


def free_regex(cursor: FreeCursor, slack: int | None = None) -> str:
    """The rest of a free string: its length bounds, then the closing quote.

    A character is one of the value's: raw, or any JSON escape (`STRING_CHAR_REGEX`), so the
    bounds count the value's characters. ``slack`` is the budget beyond the cheapest
    completion (None: the budget is loose); the string may grow by that many characters
    past its minimum, which is about what fits (a reply that does not fit anyway is cut and
    closed by `SegmentDecoder`).

    Raises:
        GenerationError: the string is inside an escape (a request starts between
            characters: after an option, or after the text a reply left closed).
    """
    free = cursor.free
    if free.escape:
        raise GenerationError(
            f"string at {free.state.pending!r}: a regex request cannot start inside the escape "
            f"{free.escape!r} (an internal error: please report it)"
        )
    n = len(free.written)
    if free.texts is not None and free.texts.affixes is not None:
        return _affix_regex(cursor, slack)
    if free.texts is not None:
        return _texts_regex(cursor, slack)
    if free.lengths is not None:
        return _lengths_regex(cursor, slack)
    low = max(0, free.min_length - n)
    high = None if free.max_length is None else max(low, free.max_length - n)
    if slack is not None:
        high = low + max(0, slack) if high is None else min(high, low + max(0, slack))
    if high is None:
        body = "{" + str(low) + ",}" if low else "*"
    else:
        body = "{" + f"{low},{high}" + "}"
    return _CHAR + body + '"'


def _lengths_regex(cursor: FreeCursor, slack: int | None) -> str:
    """The rest of a free string whose ``len()`` a relation reads: exactly its feasible lengths.

    One alternative per run of consecutive feasible lengths (`StringLengths.lengths_from`
    asks the oracle once per length up to the longest).
    """
    free = cursor.free
    assert free.lengths is not None
    n = len(free.written)
    rest = [k - n for k in free.lengths.lengths_from(n)]
    if not rest:
        raise GenerationError(f"string at {free.state.pending!r} has no feasible length")
    if slack is not None:
        rest = [k for k in rest if k <= rest[0] + max(0, slack)]
    return _repeat(_CHAR, rest, None) + '"'


_CHAR = STRING_CHAR_REGEX
"""One character of a free string's value, raw or escaped, as a regex group."""

_SHORT_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
"""The one-letter escapes and the characters they stand for."""


def _other_char(excluded: frozenset[str]) -> str:
    r"""One character of a value, not one of ``excluded``, as a regex group.

    Raw, or a one-letter escape, or ``\u00XX`` for a control character: the other ``\u``
    spellings are left out (a character a regex class of its own names cannot be told from
    its ``\u`` spelling without spelling each one out), so this is a subset of what the
    masks allow with the same values but for control characters where ``excluded`` holds one.
    """
    raw = "".join(_class_escape(c) for c in sorted(excluded) if c not in '"\\' and ord(c) >= 0x20)
    alts = ['[^"\\\\\\x00-\\x1f' + raw + "]"]
    letters = "".join(_class_escape(k) for k, c in _SHORT_ESCAPES.items() if c not in excluded)
    if letters:
        alts.append("\\\\[" + letters + "]")
    if not any(ord(c) < 0x20 for c in excluded):
        alts.append("\\\\u00[01][0-9a-fA-F]")
    return "(" + "|".join(alts) + ")"


def _literal(text: str) -> str:
    """Characters of a value as they are written in JSON (escaped where JSON needs it)."""
    return regex_escape(json_body(text))


def _repeat(char: str, counts: list[int], open_from: int | None) -> str:
    """``char`` repeated any of ``counts`` times, or ``open_from`` times or more.

    One alternative per run of consecutive counts. Empty when no count is allowed.
    """
    runs: list[tuple[int, int]] = []
    for k in sorted(c for c in counts if open_from is None or c < open_from):
        if runs and runs[-1][1] == k - 1:
            runs[-1] = (runs[-1][0], k)
        else:
            runs.append((k, k))
    alts = [char + ("{" + f"{a}}}" if a == b else "{" + f"{a},{b}}}") for a, b in runs]
    if open_from is not None:
        alts.append(char + "{" + f"{open_from},}}")
    if len(alts) <= 1:
        return "".join(alts)
    return "(" + "|".join(alts) + ")"


def _texts_regex(cursor: FreeCursor, slack: int | None) -> str:
    """The rest of a free string whose value a relation reads: exactly where it may close.

    A text no relation names closes at a feasible length of such texts, and a named text
    only if it is feasible (`StringTexts`). The regex walks the trie of the banned named
    texts that start with what is written: off the trie any character leads to any text of
    a feasible length; on it, the string may close only where no banned text ends. The
    feasible named texts are alternatives of their own. ``slack`` bounds the lengths as in
    `free_regex`. Off the trie, characters take any spelling (`_CHAR`) but the one that
    leaves it (`_other_char`), and characters along it are spelled as JSON must
    (`_literal`): the same values as the masks, in fewer spellings.
    """
    free = cursor.free
    texts = free.texts
    assert texts is not None
    n = len(free.written)
    open_from: int | None = None
    if not texts.other:
        rests: list[int] = []
    elif free.lengths is not None:
        rests = [k - n for k in free.lengths.lengths_from(n)]
    else:
        low = max(0, free.min_length - n)
        if free.max_length is not None:
            rests = list(range(low, free.max_length - n + 1))
        elif slack is not None:
            rests = list(range(low, low + max(0, slack) + 1))
        else:
            rests, open_from = [], low
    if slack is not None and rests:
        rests = [k for k in rests if k <= rests[0] + max(0, slack)]
    trie: dict[str, Any] = {}
    for t in texts.named_from(free.written):
        if t not in texts.banned:
            continue
        node = trie
        for ch in t[n:]:
            node = node.setdefault(ch, {})
        node[""] = {}  # a banned text ends here

    def walk(node: dict[str, Any], depth: int) -> list[str]:
        alts: list[str] = []
        if (depth in rests or (open_from is not None and depth >= open_from)) and "" not in node:
            alts.append('"')
        later = [k - depth - 1 for k in rests if k > depth]
        start = None if open_from is None else max(0, open_from - depth - 1)
        if later or start is not None:
            children = frozenset(ch for ch in node if ch)
            char = _other_char(children) if children else _CHAR
            alts.append(char + _repeat(_CHAR, later, start) + '"')
        for ch in sorted(node):
            if ch:
                inner = walk(node[ch], depth + 1)
                if inner:
                    alts.append(_literal(ch) + group(inner))
        return alts

    alts = walk(trie, 0)
    alts += [_literal(t[n:]) + '"' for t in texts.extending(free.written)]
    if not alts:
        raise GenerationError(f"string at {free.state.pending!r} has no feasible completion")
    return group(alts)


def _affix_regex(cursor: FreeCursor, slack: int | None) -> str:
    """The rest of a string read with ``startswith``/``endswith``: texts it may close as.

    A subset of what the masks allow (`factorspec_sdk.writer.affixes`), never empty while
    the string can close: each text of constants that closes, as itself, and each
    ``m + X + e`` whose profile some length allows, with ``X`` of characters outside every
    constant (so its affixes are exactly those of ``m`` and ``e``). ``slack`` bounds ``X``
    as it bounds a free string's length in `free_regex`.
    """
    free = cursor.free
    texts = free.texts
    assert texts is not None and texts.affixes is not None
    aff = texts.affixes
    w, n = free.written, len(free.written)
    alts = [
        _literal(t[n:]) + '"'
        for t in dict.fromkeys([*aff.tight(w), *texts.extending(w)])
        if free.closes(t)
    ]
    if texts.other:
        char = _other_char(texts.constant_chars())
        for m, e, least in aff.open_forms(w):
            lengths = aff.lengths(aff.open_profile(m, e)).lengths_from(least)
            xs = [k - least + 1 for k in lengths]  # characters of X
            if not xs:
                continue
            if slack is not None:
                xs = [x for x in xs if x <= xs[0] + max(0, slack)]
            body = char + _repeat(char, [x - 1 for x in xs], None)
            alts.append(_literal(m[n:]) + body + _literal(e) + '"')
    if not alts:
        raise GenerationError(f"string at {free.state.pending!r} has no feasible completion")
    return group(alts)


def _class_escape(ch: str) -> str:
    """``ch`` inside a regex character class (``-`` and ``]`` too), as `regex_escape` would."""
    return "\\" + ch if ch in "\\]^-[" else regex_escape(ch)


def group(alts: list[str]) -> str:
    """One regex for any of the regexes ``alts``."""
    return alts[0] if len(alts) == 1 else "(" + "|".join(alts) + ")"
