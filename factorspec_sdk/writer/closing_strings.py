r"""How a string of a grammar value closes: its patterns' and formats' automata, its guide.

For the closing bound (`factorspec_sdk.writer.closing`): the regexes a string schema's value must
match (`string_regexes`: its patterns, its formats' llguidance regexes), the most characters the
shortest completion of a match needs (`pattern_bound`, from the pattern's structure; for several
regexes, the product of their automata), and so a string's bound (`string_bound`). For the
closing walk (`factorspec_sdk.writer.closing_guides`): a `StringGuide`, the shortest completion
of a string's content under its patterns and lengths.

Patterns are read as llguidance reads them (its JSON compiler searches a ``pattern``, with
``\d`` and ``\w`` in ASCII): the guide's automaton (``interegular``) matches ``.*p.*`` unless
the pattern is anchored with ``^`` and ``$``. Formats are llguidance's own regexes
(`LLGUIDANCE_FORMATS`, copied from its ``parser/src/json/formats.rs``).
"""

from __future__ import annotations

import importlib
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from factorspec_sdk.writer.closing_schema import Unbounded, listed

__all__ = [
    "COMPLETION_CHARS",
    "LLGUIDANCE_FORMATS",
    "STRING_SLACK",
    "StringGuide",
    "pattern_bound",
    "string_bound",
    "string_regexes",
]

LLGUIDANCE_FORMATS: dict[str, str] = {
    "date-time": (
        r"(?P<date>[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-("
        r"?:0[1-9]|[12][0-9]|30)|(?:02)-(?:0[1-9]|1[0-9]|2[0-9])))[tT](?P<time>(?:[01][0-9]"
        r"|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?P<time_fraction>\.[0-9]+)?(?P<time_zone>[zZ"
        r"]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))"
    ),
    "time": (
        r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?P<time_fraction>\.[0-9]+)?(?P<t"
        r"ime_zone>[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
    ),
    "date": (
        r"(?:[0-9]{4}-(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01]))|(?:[0-9]{4}-(?:0[469]|1"
        r"1)-(?:0[1-9]|[12][0-9]|30))|(?:[0-9]{4}-02-(?:0[1-9]|1[0-9]|2[0-9]))"
    ),
    "duration": (
        r"P(?:(?P<dur_date>(?:(?P<dur_year>[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)|(?P<dur_month>[0"
        r"-9]+M(?:[0-9]+D)?)|(?P<dur_day>[0-9]+D))(?:T(?:(?P<dur_hour>[0-9]+H(?:[0-9]+M(?:["
        r"0-9]+S)?)?)|(?P<dur_minute>[0-9]+M(?:[0-9]+S)?)|(?P<dur_second>[0-9]+S)))?)|(?P<d"
        r"ur_time>T(?:(?P<dur_hour2>[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?)|(?P<dur_minute2>[0-9]+M"
        r"(?:[0-9]+S)?)|(?P<dur_second2>[0-9]+S)))|(?P<dur_week>[0-9]+W))"
    ),
    "email": (
        r"(?P<local_part>(?P<dot_string>[a-zA-Z0-9!#$%&'*+\-/=?\^_`{|}~]+(\.[a-zA-Z0-9!#$%"
        r"&'*+\-/=?\^_`{|}~]+)*))@((?P<domain>(?P<sub_domain>[a-zA-Z0-9]([a-zA-Z0-9-]*[a-z"
        r"A-Z0-9])?)(\.(?P<sub_domain2>[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?))*)|\[(?P<ip"
        r"v4>((([0-9])|(([1-9])[0-9]|(25[0-5]|(2[0-4]|(1)[0-9])[0-9])))\.){3}(([0-9])|(([1-"
        r"9])[0-9]|(25[0-5]|(2[0-4]|(1)[0-9])[0-9]))))\])"
    ),
    "hostname": (
        r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA"
        r"-Z0-9])?)*"
    ),
    "ipv4": (
        r"((([0-9])|(([1-9])[0-9]|(25[0-5]|(2[0-4]|(1)[0-9])[0-9])))\.){3}(([0-9])|(([1-9])"
        r"[0-9]|(25[0-5]|(2[0-4]|(1)[0-9])[0-9])))"
    ),
    "ipv6": (
        r"(?:(?P<full>(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}))|(?:::(?:[0-9a-fA-F]{1,4}:)"
        r"{0,5}(?P<ls32>[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}))|(?:(?P<h16_1>[0-9a-fA-F]{1,4})?"
        r"::(?:[0-9a-fA-F]{1,4}:){0,4}(?P<ls32_1>[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}))|(?:((?"
        r":[0-9a-fA-F]{1,4}:){0,1}[0-9a-fA-F]{1,4})?::(?:[0-9a-fA-F]{1,4}:){0,3}(?P<ls32_2>"
        r"[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}))|(?:((?:[0-9a-fA-F]{1,4}:){0,2}[0-9a-fA-F]{1,4"
        r"})?::(?:[0-9a-fA-F]{1,4}:){0,2}(?P<ls32_3>[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}))|(?:"
        r"((?:[0-9a-fA-F]{1,4}:){0,3}[0-9a-fA-F]{1,4})?::[0-9a-fA-F]{1,4}:(?P<ls32_4>[0-9a-"
        r"fA-F]{1,4}:[0-9a-fA-F]{1,4}))|(?:((?:[0-9a-fA-F]{1,4}:){0,4}[0-9a-fA-F]{1,4})?::("
        r"?P<ls32_5>[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}))|(?:((?:[0-9a-fA-F]{1,4}:){0,5}[0-9a"
        r"-fA-F]{1,4})?::(?P<h16_2>[0-9a-fA-F]{1,4}))|(?:((?:[0-9a-fA-F]{1,4}:){0,6}[0-9a-f"
        r"A-F]{1,4})?::)"
    ),
    "uuid": (
        r"(?P<time_low>[0-9a-fA-F]{8})-(?P<time_mid>[0-9a-fA-F]{4})-(?P<time_high_and_versi"
        r"on>[0-9a-fA-F]{4})-(?P<clock_seq_and_reserved>[0-9a-fA-F]{2})(?P<clock_seq_low>[0"
        r"-9a-fA-F]{2})-(?P<node>[0-9a-fA-F]{12})"
    ),
    "uri": (
        r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+\-.]*):(?://(?:(?P<userinfo>(?:[a-zA-Z0-9\-._~!$&'"
        r"()*+,;=:]|%[0-9a-fA-F]{2})*)@)?(?P<host>\[(?:(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{"
        r"1,4}|(?:[0-9a-fA-F]{1,4}:){1,7}:|(?:[0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|(?:["
        r"0-9a-fA-F]{1,4}:){1,5}(?::[0-9a-fA-F]{1,4}){1,2}|(?:[0-9a-fA-F]{1,4}:){1,4}(?::[0"
        r"-9a-fA-F]{1,4}){1,3}|(?:[0-9a-fA-F]{1,4}:){1,3}(?::[0-9a-fA-F]{1,4}){1,4}|(?:[0-9"
        r"a-fA-F]{1,4}:){1,2}(?::[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:(?::[0-9a-fA-F]{1,"
        r"4}){1,6}|:(?::[0-9a-fA-F]{1,4}){1,7}|::|v[0-9a-fA-F]+\.[a-zA-Z0-9\-._~!$&'()*+,;="
        r":]+)\]|(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9"
        r"]|1[0-9]{2}|[1-9]?[0-9])|(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2})*)(?::(?P"
        r"<port>[0-9]*))?(?P<path_abempty>(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=:@]|%[0-9a-fA-F]"
        r"{2})*)*)|(?P<path_absolute>/(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=:@]|%[0-9a-fA-F]{2})+"
        r"(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=:@]|%[0-9a-fA-F]{2})*)*)?)|(?P<path_rootless>(?:"
        r"[a-zA-Z0-9\-._~!$&'()*+,;=:@]|%[0-9a-fA-F]{2})+(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=:"
        r"@]|%[0-9a-fA-F]{2})*)*)|(?P<path_empty>))(?:\?(?P<query>(?:[a-zA-Z0-9\-._~!$&'()*"
        r"+,;=:@/?]|%[0-9a-fA-F]{2})*))?(?:\#(?P<fragment>(?:[a-zA-Z0-9\-._~!$&'()*+,;=:@/?"
        r"]|%[0-9a-fA-F]{2})*))?"
    ),
}
"""llguidance 1.7's regex for each ``format`` it implements (``lookup_format``)."""

STRING_SLACK = 8
"""Bytes a string's closing walk may write beyond its content's completion: the closing quote,
the opening one at the value's start, an escape under way (``\\u12`` needs two more hex
digits) and the low half of a surrogate pair after it, or the rest of a split UTF-8 character."""


def string_bound(s: Mapping[str, Any]) -> int:
    """Most bytes a string of ``s`` closes with: its completion plus `STRING_SLACK`."""
    lo = int(s.get("minLength", 0))
    hi = s.get("maxLength")
    regexes = string_regexes(s)
    if not regexes:
        return lo + STRING_SLACK if hi is None else min(lo, int(hi)) + STRING_SLACK
    if len(regexes) == 1:
        bound = pattern_bound(regexes[0], lo, None if hi is None else int(hi))
    else:  # a string matching all of them (llguidance's And): their automata's product
        fsm = _fsm(tuple(regexes))
        bound = None if fsm is None else fsm.most_completion(lo, None if hi is None else int(hi))
    if bound is None:
        raise Unbounded
    return bound + STRING_SLACK


def string_regexes(s: Mapping[str, Any]) -> list[str]:
    """The regexes a string schema's value must match: its patterns, its formats'."""
    out: list[str] = []
    for pattern in listed(s.get("pattern", [])):
        if not isinstance(pattern, str):
            raise Unbounded
        out.append(pattern)
    for fmt in listed(s.get("format", [])):
        if not isinstance(fmt, str) or fmt not in LLGUIDANCE_FORMATS:
            raise Unbounded  # a format llguidance does not know (it refuses the schema)
        out.append("^(?:" + LLGUIDANCE_FORMATS[fmt] + ")$")
    return out


def pattern_bound(pattern: str, min_length: int, max_length: int | None) -> int | None:
    """Most characters the shortest completion of a string matching ``pattern`` needs.

    From any prefix of a match (a prefix with a completion of ``min_length`` to
    ``max_length`` characters in all), the shortest such completion has at most this many
    characters. From the pattern's structure (Python's ``re`` parser): a sequence needs at
    most the rest of its open part and the least length of the parts after it, a repeat the
    rest of its open iteration and its missing iterations, a branch the most of its
    branches. With ``min_length`` the completion may have to loop through a repeat: at most
    ``min_length`` plus twice that. None for a pattern ``re`` cannot read, or a look-around
    or back-reference (which llguidance refuses too).
    """
    try:
        parsed = _re_parser().parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    try:
        least, rest = _rx(parsed)
    except Unbounded:
        return None
    del least
    bound = rest if min_length == 0 else min_length + 2 * rest + 1
    return bound if max_length is None else min(bound, max_length)


def _re_parser() -> Any:
    """Python's regex parser, ``re._parser`` (the standard library's ``sre_parse``)."""
    return importlib.import_module("re._parser")


def _rx(items: Any) -> tuple[int, int]:
    """``(least length, most shortest completion from inside)`` of a parsed sequence."""
    parts: list[tuple[int, int]] = []
    for op, av in items:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL", "ANY", "IN", "CATEGORY"):
            parts.append((1, 1))
        elif name == "AT":
            parts.append((0, 0))
        elif name == "SUBPATTERN":
            parts.append(_rx(av[-1]))
        elif name == "ATOMIC_GROUP":
            parts.append(_rx(av))
        elif name == "BRANCH":
            subs = [_rx(b) for b in av[1]]
            parts.append((min(x[0] for x in subs), max(x[1] for x in subs)))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, _hi, sub = av
            least, rest = _rx(sub)
            parts.append((lo * least, rest + max(lo - 1, 0) * least))
        else:  # GROUPREF, ASSERT, ASSERT_NOT, ...
            raise Unbounded
    total = sum(p[0] for p in parts)
    worst = 0
    after = total
    for least, rest in parts:
        after -= least
        worst = max(worst, rest + after)
    return total, worst


COMPLETION_CHARS = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    + "".join(chr(c) for c in range(0x21, 0x7F) if not chr(c).isalnum() and chr(c) not in '"\\')
    + " "
)
"""Characters a guide completes strings with, in the order it prefers them (no quote, no
backslash: the walk writes them unescaped, one byte each)."""

_PAD = "]"
"""What a plain string (no pattern) is padded with to its ``minLength`` (the rule of
`factorspec_sdk.tokens.budget` for plain strings counts on it)."""

_SEARCH_LIMIT = 20_000
"""States a guide's shortest-completion search visits before it gives up."""


class _Fsm:
    """The automaton (``interegular``) of the strings that match each of some patterns.

    With memoized shortest completions.
    """

    def __init__(self, patterns: tuple[str, ...]) -> None:
        import interegular

        fsm: Any = None
        for pattern in patterns:
            body = pattern
            body = body[1:] if body.startswith("^") else "(?s:.)*" + body
            if body.endswith("$") and not body.endswith("\\$"):
                body = body[:-1]
            else:
                body += "(?s:.)*"
            one = interegular.parse_pattern(body).to_fsm()
            fsm = one if fsm is None else fsm & one
        self.initial: int = fsm.initial
        self.finals: frozenset[int] = frozenset(fsm.finals)
        self.map: dict[int, dict[int, int]] = fsm.map
        self.alphabet: Any = fsm.alphabet
        symbols: dict[int, str] = {}
        for ch in COMPLETION_CHARS:
            symbols.setdefault(self.alphabet[ch], ch)
        self.steps: tuple[tuple[int, str], ...] = tuple(symbols.items())
        """One character per symbol, the preferred one, in the order of preference."""
        self._memo: dict[tuple[int, int], str | None] = {}

    def run(self, text: str) -> int | None:
        q = self.initial
        for ch in text:
            nxt = self.map.get(q, {}).get(self.alphabet[ch])
            if nxt is None:
                return None
            q = nxt
        return q

    def most_completion(self, lo: int, hi: int | None) -> int | None:
        """Most characters of the shortest completion (`shortest`) from any prefix of a match.

        Exact on the automaton: over every state a prefix reaches (any characters, a count
        of them up to ``lo``) from which a match of at least ``lo`` characters is still
        reachable, the length of the shortest completion by the characters the guide writes
        with. None where some such state has no completion by those characters, or the
        product of states and counts is too large to search.
        """
        succ = {q: set(row.values()) for q, row in self.map.items()}
        start = (self.initial, 0)
        seen = {start}
        todo = [start]
        while todo:
            q, c = todo.pop()
            for t in succ.get(q, ()):
                nxt = (t, min(c + 1, lo))
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
            if len(seen) > _SEARCH_LIMIT:
                return None
        pred: dict[tuple[int, int], list[tuple[int, int]]] = {}
        usable = {sym for sym, _ in self.steps}
        for q, c in seen:
            for sym, t in self.map.get(q, {}).items():
                if sym in usable:
                    pred.setdefault((t, min(c + 1, lo)), []).append((q, c))
        dist = {node: 0 for node in seen if node[0] in self.finals and node[1] == lo}
        frontier = deque(dist)
        while frontier:
            node = frontier.popleft()
            for p in pred.get(node, ()):
                if p not in dist:
                    dist[p] = dist[node] + 1
                    frontier.append(p)
        live = self._live(succ, lo, seen)
        if any(node not in dist for node in live):
            return None
        most = max((dist[node] for node in live), default=0)
        return most if hi is None else min(most, hi)

    def _live(
        self, succ: dict[int, set[int]], lo: int, seen: set[tuple[int, int]]
    ) -> set[tuple[int, int]]:
        """The states of ``seen`` from which a match (by any characters) is reachable."""
        back: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for q, c in seen:
            for t in succ.get(q, ()):
                back.setdefault((t, min(c + 1, lo)), []).append((q, c))
        live = {node for node in seen if node[0] in self.finals and node[1] == lo}
        todo = list(live)
        while todo:
            for p in back.get(todo.pop(), ()):
                if p not in live:
                    live.add(p)
                    todo.append(p)
        return live

    def shortest(self, q: int, n: int, lo: int, hi: int | None) -> str | None:
        """The least completion from state ``q`` after ``n`` characters, to ``lo..hi`` in all.

        Least: shortest, then first by `COMPLETION_CHARS`.
        """
        cap = hi if hi is not None else lo
        key = (q, min(n, cap))
        if key in self._memo:
            return self._memo[key]
        start = (q, min(n, cap))
        parent: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
        queue = deque([(q, n)])
        found: tuple[int, int] | None = None
        while queue and len(parent) < _SEARCH_LIMIT:
            s, k = queue.popleft()
            if s in self.finals and k >= lo and (hi is None or k <= hi):
                found = (s, min(k, cap))
                break
            if hi is not None and k >= hi:
                continue
            for sym, ch in self.steps:
                t = self.map.get(s, {}).get(sym)
                if t is None:
                    continue
                node = (t, min(k + 1, cap))
                if node not in parent:
                    parent[node] = ((s, min(k, cap)), ch)
                    queue.append((t, k + 1))
        out: str | None = None
        if found is not None:
            chars: list[str] = []
            at = parent[found]
            while at is not None:
                prev, ch = at
                chars.append(ch)
                at = parent[prev]
            out = "".join(reversed(chars))
        self._memo[key] = out
        return out


@lru_cache(maxsize=256)
def _fsm(patterns: tuple[str, ...]) -> _Fsm | None:
    try:
        return _Fsm(patterns)
    except Exception:  # interegular's syntax errors share no base class
        return None


@dataclass(frozen=True, slots=True)
class StringGuide:
    """Where a string may close: a pattern (or none), its lengths, or one literal text.

    Attributes:
        patterns: the regexes the content must match (a pattern, a format's).
        min_length: fewest characters.
        max_length: most characters, or None.
        literal: the one text the string is (a property name, an enumerated string).
    """

    patterns: tuple[str, ...] = ()
    min_length: int = 0
    max_length: int | None = None
    literal: str | None = None

    def completion(self, content: str) -> str | None:
        """The shortest text after ``content`` that completes it (None: none here)."""
        if self.literal is not None:
            return self.literal[len(content) :] if self.literal.startswith(content) else None
        n = len(content)
        if self.max_length is not None and n > self.max_length:
            return None
        if not self.patterns:
            return _PAD * max(0, self.min_length - n)
        fsm = _fsm(self.patterns)
        if fsm is None:
            return None
        q = fsm.run(content)
        if q is None:
            return None
        return fsm.shortest(q, n, self.min_length, self.max_length)
