"""The canonical JSON writer: a character-level automaton over a model's layout.

The writer produces exactly one serialization of a record: keys in field order and
``json.dumps`` separators (``", "`` and ``": "``). Structure text is always forced; the only
choice points are leaf values, list continue/close and ``null`` for optional leaves. At a
choice point the writer consults the compiled spec's oracle, so every continuation it offers
can still be completed to a record that passes the schema and every relation.

A grammar value (a `GrammarLayout`: a float or datetime no relation reads, a union, a dict,
...) is a choice point of its own: the writer hands out a `GrammarValue`, and the token level
generates it with llguidance (`factorspec_sdk.tokens.grammar`).

States are immutable and hashable, so speculative decoding rolls back by keeping old states.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING

from factorspec_sdk.relations.layout import (
    INT_LIMIT,
    OTHER_TEXT,
    GrammarLayout,
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectLayout,
    Path,
    UnionLayout,
    branch_part,
    float_range,
    has_grammar,
    temporal_range,
)
from factorspec_sdk.relations.temporal import duration_text, temporal_text, text_length
from factorspec_sdk.writer.affixes import Affixes
from factorspec_sdk.writer.closing import opening_bytes
from factorspec_sdk.writer.dates import next_date_chars
from factorspec_sdk.writer.digits import is_canonical_int, next_digits_in_range
from factorspec_sdk.writer.floats import (
    fixed_text,
    fixed_value,
    longest_text_length,
    next_float_chars,
    shortest_text_length,
)
from factorspec_sdk.writer.lengths import StringLengths
from factorspec_sdk.writer.texts import StringTexts, writable

if TYPE_CHECKING:
    from factorspec_sdk.graph import Assignment, CompiledSpec, Fact, Oracle, Value

__all__ = [
    "FreeString",
    "GrammarValue",
    "string_grammar",
    "Option",
    "Writer",
    "WriterState",
    "value_text",
]

_replace = dataclasses.replace

FINITE_LIMIT = 64
"""A leaf with at most this many feasible values is offered as a set of whole values."""


def value_text(value: object) -> str:
    """Canonical JSON text of a scalar value."""
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class _ObjFrame:
    path: Path
    index: int
    node: ObjectLayout = field(compare=False, hash=False, repr=False)
    entry: bool = False  # a dict's entry: ``"k": v``, no braces, no field keys


@dataclass(frozen=True, slots=True)
class _ListFrame:
    path: Path
    index: int
    node: ListLayout = field(compare=False, hash=False, repr=False)


_Frame = _ObjFrame | _ListFrame


@dataclass(frozen=True, slots=True)
class _Pending:
    path: Path
    node: LayoutNode = field(compare=False, hash=False, repr=False)


@dataclass(frozen=True, slots=True)
class WriterState:
    """Where the writer is: the facts written so far and the layout position.

    Attributes:
        assignment: oracle facts in the order the JSON writes them.
        stack: open objects and lists, innermost last.
        pending: the node to write next, if a value is due.
        partial: digits of an int leaf, characters of a float leaf (fixed-point text),
            characters of a free string, or characters of a date after its opening quote,
            written so far.
    """

    assignment: Assignment
    stack: tuple[_Frame, ...]
    pending: _Pending | None
    partial: str | None = None

    @property
    def done(self) -> bool:
        """Whether the record is complete."""
        return not self.stack and self.pending is None


@dataclass(frozen=True, slots=True)
class Option:
    """One alternative at a choice point: its text and the state after that text."""

    text: str
    state: WriterState


@dataclass(frozen=True, slots=True)
class FreeString:
    """A free JSON string leaf being written (no relation reads it, or none names its text).

    Attributes:
        state: the writer state inside the string.
        written: characters written so far (unescaped; the writer never emits escapes).
        min_length: fewest characters.
        max_length: most characters, or None.
        close_suffix: forced layout text after the closing quote.
        lengths: where a relation reads the string's ``len()``, the lengths it may close at
            (asked of the oracle; with ``texts``, the lengths of texts no relation names);
            None otherwise.
        texts: where a relation reads the string's value, the texts it may close at; None
            otherwise.
    """

    state: WriterState
    written: str
    min_length: int
    max_length: int | None
    close_suffix: str
    lengths: StringLengths | None = None
    texts: StringTexts | None = None

    def fits(self, n: int) -> bool:
        """Whether ``n`` characters are within the schema's ``min_length``/``max_length``."""
        return n >= self.min_length and (self.max_length is None or n <= self.max_length)

    def closes_at(self, n: int) -> bool:
        """Whether a text no relation names may end after ``n`` characters."""
        if not self.fits(n):
            return False
        if self.texts is not None and not self.texts.other:
            return False
        return self.lengths is None or self.lengths.closes(n)

    def closes(self, text: str) -> bool:
        """Whether the string may end as ``text`` (the whole string, not just the rest)."""
        if self.texts is not None and self.texts.named(text):
            return text in self.texts.feasible
        if self.texts is not None and self.texts.affixes is not None:
            return self.fits(len(text)) and self.texts.other and self.texts.affixes.closes(text)
        return self.closes_at(len(text))

    def completable(self, text: str) -> bool:
        """Whether a string with affixes, written up to ``text``, can still close.

        See `factorspec_sdk.writer.affixes`.
        """
        texts = self.texts
        assert texts is not None and texts.affixes is not None
        if texts.other and texts.affixes.open_ok(text):
            return True
        candidates = [*texts.affixes.tight(text), *texts.extending(text)]
        return any(self.closes(t) for t in candidates)

    @property
    def longest_other(self) -> int | None:
        """The most characters a text no relation names may reach (-1: none may be written)."""
        if self.texts is not None and not self.texts.other:
            return -1
        if self.lengths is not None:
            return self.lengths.longest
        return self.max_length

    @property
    def longest(self) -> int | None:
        """The most characters the string may reach, or None (no bound)."""
        top = self.longest_other
        if self.texts is None or top is None:
            return top
        return max([top, *(len(t) for t in self.texts.extending(self.written))])

    def next_other(self, n: int) -> int | None:
        """The least length ``>= n`` a text no relation names may close at."""
        if self.texts is not None and not self.texts.other:
            return None
        if self.lengths is not None:
            return self.lengths.next_length(n)
        k = max(n, self.min_length)
        return k if self.max_length is None or k <= self.max_length else None

    def shortest_close(self) -> int:
        """The fewest characters the string can close at from here (at least ``written``)."""
        n = len(self.written)
        k = self.next_other(n)
        if self.texts is not None:
            if k == n and self.texts.named(self.written):  # it closes as itself or grows
                k = self.next_other(n + 1)
            named = [len(t) for t in self.texts.extending(self.written)]
            k = min([*named, *([] if k is None else [k])], default=None)
        if k is None:
            raise RuntimeError(f"string at {self.state.pending!r} has no feasible length")
        return k


@dataclass(frozen=True, slots=True)
class GrammarValue:
    """A grammar value due next: its JSON Schema and the writer state after it.

    Attributes:
        path: where the value sits.
        node: its layout (the JSON Schema text).
        after: the writer state once the value is written.
    """

    path: Path
    node: GrammarLayout
    after: WriterState


@dataclass(frozen=True, slots=True)
class _Grammar:
    path: Path
    node: GrammarLayout
    state: WriterState


@dataclass(frozen=True, slots=True)
class _Text:
    text: str
    state: WriterState


@dataclass(frozen=True, slots=True)
class _Leaf:
    path: Path
    node: LeafLayout
    state: WriterState


@dataclass(frozen=True, slots=True)
class _ListDecision:
    frame: _ListFrame
    state: WriterState


@dataclass(frozen=True, slots=True)
class _UnionDecision:
    path: Path
    node: UnionLayout
    state: WriterState


@dataclass(frozen=True, slots=True)
class _NullDecision:
    """A nullable object or list whose null-ness a relation reads, not decided yet."""

    path: Path
    null_var: str
    state: WriterState


@dataclass(frozen=True, slots=True)
class _Done:
    state: WriterState


_Event = _Text | _Leaf | _Grammar | _ListDecision | _UnionDecision | _NullDecision | _Done
Choice = list[Option] | FreeString | GrammarValue
"""What a choice point offers: whole options, a free string, or a grammar value."""


class Writer:
    """Writes canonical JSON for one compiled spec, consulting one oracle."""

    def __init__(self, spec: CompiledSpec, oracle: Oracle | None = None) -> None:
        self.spec = spec
        self.oracle = oracle if oracle is not None else spec.new_oracle()
        self._forced_cache: dict[WriterState, tuple[str, WriterState]] = {}
        self._choice_cache: dict[WriterState, Choice] = {}
        self._longest_cache: dict[Path, int] = {}
        """`_longest` per path: the spec fixes it, and the token budget asks it at every step."""
        self._shortest_cache: dict[int, int] = {}
        """`_shortest` per layout node, by ``id`` (the spec keeps its nodes alive)."""
        self.grammar_strings = has_grammar(spec.layout)
        """Whether free strings are grammar values too (see `string_grammar`)."""

    # ------------------------------------------------------------------ states

    def start(self) -> WriterState:
        """The state before the first character."""
        layout = self.spec.layout
        return WriterState(assignment=(), stack=(), pending=_Pending((), layout))

    def _event(self, s: WriterState) -> _Event:
        p = s.pending
        if p is not None:
            node = p.node
            if isinstance(node, ObjectLayout | ListLayout) and node.nullable:
                nv = self.spec.null_variable(p.path)
                if nv is not None and not (s.assignment and s.assignment[-1][0] == nv):
                    return _NullDecision(p.path, nv, s)
            if isinstance(node, ObjectLayout):
                if not node.fields:
                    return _Text("{}", _replace(s, pending=None))
                top = s.stack[-1] if s.stack else None
                entry = isinstance(top, _ListFrame) and top.node.mapping
                frame = _ObjFrame(p.path, 0, node, entry)
                opened = _replace(s, stack=(*s.stack, frame), pending=None)
                return _Text("" if entry else "{", opened)
            if isinstance(node, ListLayout):
                frame2 = _ListFrame(p.path, 0, node)
                opening = "{" if node.mapping else "["
                return _Text(opening, _replace(s, stack=(*s.stack, frame2), pending=None))
            if isinstance(node, GrammarLayout):
                return _Grammar(p.path, node, s)
            if isinstance(node, UnionLayout):
                return _UnionDecision(p.path, node, s)
            if (node.kind == "date" or node.duration) and s.partial is None and not node.nullable:
                return _Text('"', _replace(s, partial=""))  # layout, as a free string's
            if node.kind == "str" and s.partial is None and self.spec.variable_for(p.path) is None:
                item = bool(p.path) and isinstance(p.path[-1], int)
                if (
                    self.grammar_strings
                    and not item  # a list item follows the empty "continue" option: no segment
                    and (not node.nullable or self.spec.null_variable(p.path) is None)
                    and self.spec.string_length_variable(p.path) is None  # the writer's own
                ):
                    return _Grammar(p.path, string_grammar(node), s)
                if not node.nullable:
                    return _Text('"', _replace(s, partial=""))
            return _Leaf(p.path, node, s)
        if not s.stack:
            return _Done(s)
        top = s.stack[-1]
        if isinstance(top, _ObjFrame):
            fields = top.node.fields
            if top.index < len(fields):
                f = fields[top.index]
                if top.entry:  # the key's value, then ": " and the value
                    text = ": " if top.index else ""
                else:
                    sep = ", " if top.index else ""
                    text = f"{sep}{value_text(f.key)}: "
                frame = _ObjFrame(top.path, top.index + 1, top.node, top.entry)
                return _Text(
                    text,
                    _replace(
                        s,
                        stack=(*s.stack[:-1], frame),
                        pending=_Pending((*top.path, f.name), f.node),
                    ),
                )
            return _Text("" if top.entry else "}", _replace(s, stack=s.stack[:-1]))
        return _ListDecision(top, s)

    def grammar_next(self, s: WriterState) -> bool:
        """Whether a grammar value is due right at ``s`` (no text, no oracle, before it)."""
        return isinstance(self._event(s), _Grammar)

    def layout_text(self, s: WriterState) -> tuple[str, WriterState]:
        """The structure text forced from ``s`` without consulting the oracle."""
        parts: list[str] = []
        while True:
            ev = self._event(s)
            if not isinstance(ev, _Text):
                return "".join(parts), s
            parts.append(ev.text)
            s = ev.state

    # ------------------------------------------------------------------ lengths

    def shortest_rest(self, s: WriterState) -> int:
        """Characters of the shortest layout text that completes the record from ``s``.

        Relations are ignored, so this is a lower bound on the text of any valid completion;
        the token budget uses it only to rank options (`factorspec_sdk.tokens.budget`).
        """
        total = 0
        p = s.pending
        if p is not None:
            node = p.node
            if s.partial is None:
                total += _shortest(node, self._shortest_cache)
            elif isinstance(node, LeafLayout) and node.kind == "str":
                total += max(0, node.min_length - len(s.partial)) + 1
            elif isinstance(node, LeafLayout) and node.kind == "date":
                total += text_length(node.temporal) - len(s.partial) + 1
            elif isinstance(node, LeafLayout) and node.kind == "float":
                if fixed_value(s.partial, node.places) is None:
                    total += 1  # not a whole number yet: at least one more character
            elif isinstance(node, LeafLayout) and node.duration:  # S" and maybe a digit
                total += 2 if s.partial and is_canonical_int(s.partial) else 3
            elif not (s.partial and is_canonical_int(s.partial)):
                total += 1  # an int needs at least one more digit
        for frame in reversed(s.stack):
            if isinstance(frame, _ObjFrame) and frame.entry:
                for k, f in enumerate(frame.node.fields[frame.index :], start=frame.index):
                    total += (2 if k else 0) + _shortest(f.node, self._shortest_cache)
            elif isinstance(frame, _ObjFrame):
                for k, f in enumerate(frame.node.fields[frame.index :], start=frame.index):
                    total += (
                        (2 if k else 0)
                        + len(value_text(f.key))
                        + 2
                        + _shortest(f.node, self._shortest_cache)
                    )
                total += 1
            else:
                missing = max(0, frame.node.min_length - frame.index)
                total += missing * (2 + _item_shortest(frame.node, self._shortest_cache)) + 1
        return total

    def longest_bytes(self) -> int:
        """UTF-8 bytes of the longest record whose free strings have their minimum length.

        (A free string whose ``len()`` a relation reads counts at its length bound.)

        Every list at its bound, every number at its widest, every enumerated string at its
        longest value. The text of any completion FactorSpec's token budget writes from any
        state is at most this long (`factorspec_sdk.tokens.budget`).
        """
        return self.longest_rest_bytes(self.start())

    def longest_rest_bytes(self, s: WriterState) -> int:
        """UTF-8 bytes of the longest completion from ``s``, free strings at their minimum.

        The `longest_bytes` of the rest of the record: a free string being written closes
        after the characters it still lacks, a number gets its widest remaining digits.
        """
        spec = self.spec
        strings = tuple(str(v) for v in spec.strings.strings)
        memo = self._longest_cache
        total = 0
        p = s.pending
        if p is not None:
            node = p.node
            whole = _longest(node, p.path, spec, strings, memo)
            if s.partial is None:
                total += whole
            elif isinstance(node, LeafLayout) and node.kind == "str":
                total += max(0, _string_chars(node, p.path, spec) - len(s.partial)) + 1
            elif isinstance(node, LeafLayout) and node.kind == "date":
                total += text_length(node.temporal) - len(s.partial) + 1
            else:
                total += max(0, whole - len(s.partial))
        for frame in reversed(s.stack):
            if isinstance(frame, _ObjFrame):
                for k, f in enumerate(frame.node.fields[frame.index :], start=frame.index):
                    key = _utf8(value_text(f.key))
                    total += (2 if k else 0) + key + 2
                    total += _longest(f.node, (*frame.path, f.name), spec, strings, memo)
                total += 1
            else:
                m = min(frame.node.max_length, spec.max_length(frame.path))
                for j in range(frame.index, m):
                    total += 2 + _longest(frame.node.item, (*frame.path, j), spec, strings, memo)
                total += 1
        return total

    # ------------------------------------------------------------------ forced text

    def forced(self, s: WriterState) -> tuple[str, WriterState]:
        """The longest forced text from ``s`` and the state at the next choice point."""
        hit = self._forced_cache.get(s)
        if hit is not None:
            return hit
        start = s
        parts: list[str] = []
        while True:
            ev = self._event(s)
            if isinstance(ev, _Text):
                parts.append(ev.text)
                s = ev.state
                continue
            if isinstance(ev, _Done):
                break
            options = self._raw_options(ev)
            if isinstance(options, GrammarValue):
                break
            if isinstance(options, list) and len(options) == 1:
                parts.append(options[0].text)
                s = options[0].state
                continue
            if isinstance(options, list) and not options:
                raise RuntimeError(f"writer reached a dead end at {s!r}; the oracle is not exact")
            break
        result = ("".join(parts), s)
        self._forced_cache[start] = result
        return result

    def choices(self, s: WriterState) -> Choice:
        """The alternatives at the choice point ``s`` (as returned by `forced`).

        Each option's text is non-empty and carries the layout text after the choice, so the
        option texts are prefix-free.
        """
        hit = self._choice_cache.get(s)
        if hit is not None:
            return hit
        ev = self._event(s)
        if isinstance(ev, _Text | _Done):
            raise ValueError("choices() needs a state at a choice point")
        raw = self._raw_options(ev)
        result: Choice
        if isinstance(raw, FreeString | GrammarValue):
            result = raw
        else:
            result = []
            for o in raw:
                result.extend(self._non_empty(o))
            result = self._prefix_free(result)
        self._choice_cache[s] = result
        return result

    def _prefix_free(self, options: list[Option]) -> list[Option]:
        """``options`` with each one whose text begins another's joined to what follows it.

        A list item is followed by a choice (another item or the end), not by forced text,
        so item values ``6`` and ``63`` would end where the other goes on; ``6`` becomes
        ``6, `` and ``6]`` (the choices after it, with their forced text), which no other
        option's text begins. An option followed by forced text is first joined to that
        text alone (a union's branches, all ``{"kind": `` up to their tags, part there, even
        where a free string follows). Options whose texts are already prefix-free are kept.
        """
        for _ in range(8):  # each round joins one more choice; real clashes end in one
            texts = sorted(o.text for o in options)
            clash = {a for a, b in pairwise(texts) if b.startswith(a)}
            if not clash:
                return options
            joined: list[Option] = []
            for o in options:
                if o.text not in clash:
                    joined.append(o)
                    continue
                forced, at = self.forced(o.state)
                if forced and not at.done:  # the forced text may tell them apart already
                    joined.append(Option(o.text + forced, at))
                    continue
                if at.done:
                    if not forced:
                        raise RuntimeError(f"option {o.text!r} ends the record, begins another")
                    joined.append(Option(o.text + forced, at))
                    continue
                sub = self.choices(at)
                if isinstance(sub, FreeString | GrammarValue):
                    raise RuntimeError(f"option {o.text!r} begins another and a free value follows")
                joined.extend(Option(o.text + forced + x.text, x.state) for x in sub)
            options = joined
        raise RuntimeError("option texts stay not prefix-free")

    def _non_empty(self, o: Option) -> Iterator[Option]:
        suffix, after = self.layout_text(o.state)
        text = o.text + suffix
        if text:
            yield Option(text, after)
            return
        forced, at = self.forced(after)
        if forced:
            yield Option(forced, at)
            return
        sub = self.choices(at)
        if isinstance(sub, FreeString | GrammarValue):
            raise RuntimeError("an empty option cannot be followed by a free value")
        yield from sub

    # ------------------------------------------------------------------ leaves

    def _raw_options(
        self, ev: _Leaf | _Grammar | _ListDecision | _UnionDecision | _NullDecision
    ) -> Choice:
        if isinstance(ev, _ListDecision):
            return self._list_options(ev)
        if isinstance(ev, _UnionDecision):
            return self._union_options(ev)
        if isinstance(ev, _NullDecision):  # null, or the object's or list's opening
            options, present = self._decide_null(ev.state, ev.path, ev.null_var)
            if present is not None:
                opening = self._event(present)
                assert isinstance(opening, _Text)
                options.append(Option(opening.text, opening.state))
            return options
        if isinstance(ev, _Grammar):
            return GrammarValue(ev.path, ev.node, self._after_leaf(ev.state, None))
        return self._leaf_options(ev)

    def _after_leaf(self, s: WriterState, fact: Fact | None) -> WriterState:
        return self._after_facts(s, () if fact is None else (fact,))

    def _after_facts(self, s: WriterState, facts: tuple[Fact, ...]) -> WriterState:
        return WriterState((*s.assignment, *facts), s.stack, None, None)

    def _decide_null(
        self, s: WriterState, path: Path, nv: str
    ) -> tuple[list[Option], WriterState | None]:
        """Null-ness a relation reads (``x is None``), decided with the oracle first.

        Returns ``null`` with its fact when feasible, and the state with the fact that the
        value is present (None when it cannot be).
        """
        nulls = self.oracle.feasible_values(s.assignment, nv)
        if nulls is None:
            raise RuntimeError(f"null-ness of {path!r} has no finite domain")
        options = [Option("null", self._after_leaf(s, (nv, True)))] if True in nulls else []
        if False not in nulls:
            return options, None
        return options, _replace(s, assignment=(*s.assignment, (nv, False)))

    def _open_quote(self, s: WriterState, path: Path) -> list[Option]:
        """A nullable quoted leaf (a date, a duration) not begun: its quote, or ``null``."""
        options = [Option('"', _replace(s, partial=""))]
        if self.spec.null_variable(path) is None:  # else `_decide_null` decided it
            options.append(Option("null", self._after_leaf(s, None)))
        return options

    def _leaf_options(self, ev: _Leaf) -> list[Option] | FreeString:
        s, node, path = ev.state, ev.node, ev.path
        if node.nullable:
            nv = self.spec.null_variable(path)
            decided = bool(s.assignment) and s.assignment[-1][0] == nv
            if nv is not None and not decided:
                options, present = self._decide_null(s, path, nv)
                if present is not None:
                    inner = self._leaf_options(_Leaf(path, node, present))
                    if isinstance(inner, FreeString):
                        raise RuntimeError("a free string cannot take part in a relation")
                    options.extend(inner)
                return options
        var = self.spec.variable_for(path)
        texts = None
        if node.kind == "str" and var is not None and self.spec.record(var).free_str:
            texts = self._string_texts(s, var, path)
            if not texts.other:  # only named texts: whole values
                options = [
                    Option(value_text(t), self._after_facts(s, texts.facts(t)))
                    for t in sorted(texts.feasible)
                ]
                if node.nullable and self.spec.null_variable(path) is None:
                    options.append(Option("null", self._after_leaf(s, None)))
                return options
        if node.kind == "str" and (var is None or texts is not None):
            if s.partial is None:  # open the string (or write null when the schema allows)
                opened = [Option('"', _replace(s, partial=""))]
                if node.nullable and self.spec.null_variable(path) is None:
                    opened.insert(0, Option("null", self._after_leaf(s, None)))
                return opened
            after = self._after_leaf(s, None)
            suffix, _ = self.layout_text(after)
            lengths = None
            lvar = self.spec.string_length_variable(path)
            affix_vars = self.spec.affix_variables(path)
            assert lvar is not None or not affix_vars  # `affix_links` makes it
            if lvar is not None:
                rec = self.spec.record(lvar)  # its bounds: min_length, max_length or default
                assert rec.ge is not None and rec.le is not None  # the compiler sets both
                if texts is not None and affix_vars:  # the lengths per profile of affixes
                    given = (*s.assignment, (texts.var, OTHER_TEXT))
                    affixes = Affixes(self.oracle, given, affix_vars, lvar, rec.ge, rec.le)
                    texts = dataclasses.replace(texts, affixes=affixes)
                else:
                    given = s.assignment if texts is None else (*s.assignment, *texts.facts(None))
                    lengths = StringLengths(self.oracle, given, lvar, rec.ge, rec.le)
            return FreeString(
                s, s.partial, node.min_length, node.max_length, suffix, lengths, texts
            )
        if node.kind == "date":
            return self._date_options(s, node, path, var)
        if node.kind == "float":
            return self._float_options(s, node, path, var)
        if node.duration:
            return self._duration_options(s, node, path, var)
        if node.kind == "int" and s.partial is not None:
            return self._digit_options(s, var, node.ge, node.le)
        values: list[Value] | None
        if var is not None:
            values = self.oracle.feasible_values(s.assignment, var, limit=FINITE_LIMIT)
        else:
            values = self._schema_values(node)
        if values is None:
            # a wide int: write it digit by digit
            options = self._digit_options(_replace(s, partial=""), var, node.ge, node.le)
        else:
            options = []
            for v in values:
                fact = None if var is None else (var, v)
                options.append(Option(value_text(v), self._after_leaf(s, fact)))
        if node.nullable and self.spec.null_variable(path) is None:
            options.append(Option("null", self._after_leaf(s, None)))
        return options

    def _string_texts(self, s: WriterState, var: str, path: Path) -> StringTexts:
        """What a free string whose value a relation reads may close at (see `StringTexts`).

        Every named text is asked: the intern table is finite, and ``limit`` covers it. A
        text of a linked string written before is asked on its own, with its ``same`` true.
        Where texts no relation names are feasible, the string is written freely, and a named
        text with a character the writer never writes unescaped (`writable`) counts as banned.
        """
        written = dict(s.assignment)
        links = self.spec.same_variables(path)
        found = [(v, self.spec.variable_for(other)) for v, other in links]
        texts_of = [(v, written.get(ov)) for v, ov in found if ov is not None]
        linked = tuple((v, text) for v, text in texts_of if isinstance(text, str))
        base = (*s.assignment, *((v, False) for v, _ in linked))
        named = self.spec.strings.strings[1:]
        values = self.oracle.feasible_values(base, var, limit=len(named) + 1)
        assert values is not None  # at most one value per code
        texts = {t for _, t in linked}
        feasible = {v for v in values if isinstance(v, str) and v not in texts}
        feasible.discard(OTHER_TEXT)
        probe = StringTexts(var, frozenset(), frozenset(texts), False, linked, bool(links))
        for t in texts:
            if self.oracle.feasible((*s.assignment, *probe.facts(t))):
                feasible.add(t)
        other = OTHER_TEXT in values
        if other:  # written freely: a named text the writer cannot write is out of reach
            feasible = {t for t in feasible if writable(t)}
        every = frozenset(named) | texts
        return StringTexts(
            var,
            frozenset(feasible),
            every - feasible,
            other,
            linked,
            bool(links),
        )

    def _schema_values(self, node: LeafLayout) -> list[Value] | None:
        if node.kind == "bool":
            return [False, True]
        if node.kind == "enum":
            return list(node.choices)
        lo = -INT_LIMIT if node.ge is None else node.ge
        hi = INT_LIMIT if node.le is None else node.le
        return _few_values(lo, hi)

    def _date_options(
        self, s: WriterState, node: LeafLayout, path: Path, var: str | None
    ) -> list[Option]:
        """A date (datetime, time): whole values when few are feasible, else by characters.

        The opening quote is layout text (`_event`), as a free string's is, so that a token
        such as `` "`` may span it and the text before; a nullable date first chooses
        between ``null`` and that quote. Then at most `FINITE_LIMIT` feasible dates are
        offered whole (a date the relations fix is one option: certain tokens); more are
        written character by character, from `next_date_chars`: only real calendar dates
        and clock times within the bounds, and, when a relation reads the date, only
        prefixes whose range of values the oracle finds a feasible value in. The last
        character carries the closing quote and the fact.
        """
        if s.partial is None:  # a nullable date: null, or its opening quote
            return self._open_quote(s, path)
        lo, hi = _value_bounds(node, var, self.spec)
        if s.partial == "":
            values = self._whole_values(s, var, lo, hi)
            if values is not None:
                return [
                    Option(
                        temporal_text(node.temporal, int(v)) + '"',
                        self._after_leaf(s, (var, v) if var else None),
                    )
                    for v in values
                ]
        prefix = s.partial
        oracle, assignment = self.oracle, s.assignment
        chars = next_date_chars(
            node.temporal,
            prefix,
            lo,
            hi,
            None if var is None else (lambda rs: oracle.feasible_ranges(assignment, var, rs)),
        )
        out = []
        for c, (a, _) in chars.items():
            if len(prefix) + 1 == text_length(node.temporal):  # the last digit: a == b
                fact = None if var is None else (var, a)
                out.append(Option(c + '"', self._after_leaf(s, fact)))
            else:
                out.append(Option(c, _replace(s, partial=prefix + c)))
        return out

    def _whole_values(
        self, s: WriterState, var: str | None, lo: int, hi: int
    ) -> list[Value] | None:
        """The values a date or float leaf may take, when at most `FINITE_LIMIT`; else None.

        The oracle's feasible values when a relation reads the leaf, else ``lo..hi``.
        """
        if var is not None:
            return self.oracle.feasible_values(s.assignment, var, limit=FINITE_LIMIT)
        return _few_values(lo, hi)

    def _float_options(
        self, s: WriterState, node: LeafLayout, path: Path, var: str | None
    ) -> list[Option]:
        """A float: whole values when few are feasible, else character by character.

        At the start, at most `FINITE_LIMIT` feasible scaled values are offered whole, as
        their canonical fixed-point text (a value the relations fix is one option: certain
        tokens), and ``null`` when the leaf is nullable. More are written character by
        character, from `next_float_chars`: only canonical texts of values within the
        bounds, and, when a relation reads the float, only prefixes whose values the oracle
        finds a feasible one among. The empty option ends the number with its fact.
        """
        lo, hi = _value_bounds(node, var, self.spec)
        if s.partial is None:
            values = self._whole_values(s, var, lo, hi)
            if values is None:
                options = self._float_chars(_replace(s, partial=""), node, var, lo, hi)
            else:
                options = [
                    Option(
                        fixed_text(int(v), node.places),
                        self._after_leaf(s, None if var is None else (var, v)),
                    )
                    for v in values
                ]
            if node.nullable and self.spec.null_variable(path) is None:
                options.append(Option("null", self._after_leaf(s, None)))
            return options
        return self._float_chars(s, node, var, lo, hi)

    def _float_chars(
        self, s: WriterState, node: LeafLayout, var: str | None, lo: int, hi: int
    ) -> list[Option]:
        """The characters that may follow the float text ``s.partial`` (``""``: it ends)."""
        prefix = s.partial or ""
        oracle, assignment = self.oracle, s.assignment
        chars = next_float_chars(
            prefix,
            node.places,
            lo,
            hi,
            None if var is None else (lambda cs: oracle.feasible_range_sets(assignment, var, cs)),
        )
        options = []
        for c in sorted(chars):
            if c == "":
                ((n, _),) = chars[c]
                options.append(Option("", self._after_leaf(s, None if var is None else (var, n))))
            else:
                options.append(Option(c, _replace(s, partial=prefix + c)))
        return options

    def _duration_options(
        self, s: WriterState, node: LeafLayout, path: Path, var: str | None
    ) -> list[Option]:
        """A timedelta, ``"PT{n}S"``: whole when few are feasible, else digit by digit.

        The digits are an int's (`next_digits` of the oracle, or of the bounds), written
        inside the duration: the first character carries ``PT`` (``-PT`` for a minus), the
        end ``S"`` and the fact. A nullable one first chooses ``null`` or the quote.
        """
        if s.partial is None:
            return self._open_quote(s, path)
        if var is not None:
            rec = self.spec.record(var)
            lo, hi = rec.ge, rec.le
        else:
            lo, hi = node.ge, node.le
        assert lo is not None and hi is not None  # the layout and the compiler set both
        prefix = s.partial
        if prefix == "":
            values = self._whole_values(s, var, lo, hi)
            if values is not None:
                return [
                    Option(
                        duration_text(int(v)) + '"', self._after_leaf(s, (var, v) if var else None)
                    )
                    for v in values
                ]
        return self._digit_options(
            s, var, lo, hi, end='S"', lead=lambda c: "-PT" if c == "-" else "PT" + c
        )

    def _digit_options(
        self,
        s: WriterState,
        var: str | None,
        lo: int | None,
        hi: int | None,
        end: str = "",
        lead: Callable[[str], str] | None = None,
    ) -> list[Option]:
        """The characters that may follow the int text ``s.partial``; ``end`` ends it.

        From the oracle's `next_digits` when a relation reads the int, else from the bounds.
        ``lead`` spells the first character (a duration's ``PT``); ``end`` carries the fact.
        """
        prefix = s.partial or ""
        if var is not None:
            chars = self.oracle.next_digits(s.assignment, var, prefix)
        else:
            chars = next_digits_in_range(prefix, lo, hi)
        options = []
        for c in sorted(chars):
            if c == "":
                fact = None if var is None else (var, int(prefix))
                options.append(Option(end, self._after_leaf(s, fact)))
            else:
                text = lead(c) if lead is not None and not prefix else c
                options.append(Option(text, _replace(s, partial=prefix + c)))
        return options

    # ------------------------------------------------------------------ lists

    def _list_options(self, ev: _ListDecision) -> list[Option]:
        frame, s = ev.frame, ev.state
        i, node, path = frame.index, frame.node, frame.path
        var = self.spec.length_variable(path)
        can_close = i >= node.min_length
        can_continue = i < min(node.max_length, self.spec.max_length(path))
        if var is not None:
            lengths = self.oracle.feasible_values(s.assignment, var, limit=node.max_length + 1)
            if lengths is None:
                raise RuntimeError(f"length of {path!r} has more values than its bound")
            can_close = can_close and i in lengths
            can_continue = can_continue and any(int(n) > i for n in lengths)
        options = []
        popped = _replace(s, stack=s.stack[:-1])
        if can_close:
            fact = None if var is None else (var, i)
            closed = popped if fact is None else _replace(popped, assignment=(*s.assignment, fact))
            options.append(Option("}" if node.mapping else "]", closed))
        if can_continue:
            frame2 = _ListFrame(path, i + 1, node)
            assignment = s.assignment
            if var is not None:
                from factorspec_sdk.graph import AtLeast

                assignment = (*assignment, (var, AtLeast(i + 1)))
            cont = WriterState(
                assignment,
                (*s.stack[:-1], frame2),
                _Pending((*path, i), node.item),
                None,
            )
            options.append(Option(", " if i else "", cont))
        return options

    # ------------------------------------------------------------------ unions

    def _union_options(self, ev: _UnionDecision) -> list[Option]:
        """A union: ``null`` if allowed, and each branch the oracle finds feasible.

        A branch's option is empty text; the branch's object follows, its tag first, so the
        options become different text at the tag's value (`_prefix_free` joins them to it).
        With a branch variable (a relation reads the union) the branch is a fact; a branch
        the relations fix is the only option, hence certain text.
        """
        s, node, path = ev.state, ev.node, ev.path
        options: list[Option] = []
        if node.nullable:
            nv = self.spec.null_variable(path)
            if nv is None:
                options.append(Option("null", self._after_leaf(s, None)))
            else:
                options, present = self._decide_null(s, path, nv)
                if present is None:
                    return options
                s = present
        assignment = s.assignment
        var = self.spec.variable_for(path)
        if var is None:
            feasible = list(range(len(node.branches)))
        else:
            values = self.oracle.feasible_values(assignment, var) or []
            feasible = sorted(int(k) for k in values)
        for k in feasible:
            b = node.branches[k]
            facts = assignment if var is None else (*assignment, (var, k))
            pending = _Pending((*path, branch_part(b.model)), b)
            options.append(Option("", WriterState(facts, s.stack, pending, None)))
        return options

    # ------------------------------------------------------------------ free strings

    def extend_free(self, free: FreeString, text: str) -> FreeString:
        """The free string after appending ``text`` (which holds no quote or backslash)."""
        written = free.written + text
        return dataclasses.replace(
            free, state=_replace(free.state, partial=written), written=written
        )

    def close_free(
        self, free: FreeString, *, text: str | None = None, length: int | None = None
    ) -> WriterState:
        """The state right after the closing quote of a free string.

        The string closes as ``text`` (default: what is written), or, where ``length`` is
        given instead, padded to that many characters with a text no relation names (how
        the token budget completes it). A string whose ``len()`` a relation reads records
        its length as a fact; one whose value a relation reads, its text (`OTHER_TEXT` for
        a text no relation names, so that such states share the oracle's cache).
        """
        if text is None and length is None:
            text = free.written
        n = len(text) if text is not None else length
        assert n is not None
        facts: list[Fact] = []
        if free.texts is not None:
            facts.extend(free.texts.facts(text))
        if free.lengths is not None:
            facts.append((free.lengths.var, n))
        return self._after_facts(free.state, tuple(facts))


@lru_cache(maxsize=256)
def string_grammar(node: LeafLayout) -> GrammarLayout:
    r"""A free string as a grammar value: the JSON string grammar, every escape included.

    In a spec that has grammar values the token budget bounds them by its closing walk, not
    exactly (`factorspec_sdk.tokens.budget`), so its free strings are grammar values too and
    may hold quotes, backslashes, newlines and ``\u`` escapes. A spec without grammar values
    writes free strings itself, without escapes, and keeps the exact budget bound; so do
    the items of a list of free strings (the list's first item follows an empty option, and a
    trie cannot end in a grammar segment there).
    """
    schema: dict[str, object] = {"type": "string", "minLength": node.min_length}
    if node.max_length is not None:
        schema["maxLength"] = node.max_length
    if node.nullable:
        schema = {"anyOf": [schema, {"type": "null"}]}
    return GrammarLayout(json.dumps(schema, sort_keys=True, separators=(",", ":")))


def _shortest(node: LayoutNode, memo: dict[int, int]) -> int:
    """Characters of the shortest canonical JSON text of ``node`` (relations ignored).

    ``memo`` holds the answers by ``id(node)`` for nodes that outlive it (one spec's).
    """
    hit = memo.get(id(node))
    if hit is not None:
        return hit
    if isinstance(node, GrammarLayout):
        n = 1  # a lower bound: every JSON value has a character
    elif isinstance(node, ObjectLayout):
        n = 2 + sum(len(value_text(f.key)) + 2 + _shortest(f.node, memo) for f in node.fields)
        n += 2 * max(0, len(node.fields) - 1)
    elif isinstance(node, ListLayout):
        m = node.min_length
        n = 2 + m * _item_shortest(node, memo) + 2 * max(0, m - 1)
    elif isinstance(node, UnionLayout):
        n = min(_shortest(b, memo) for b in node.branches)
    elif node.kind == "bool":
        n = 4
    elif node.kind == "enum":
        n = min((len(value_text(c)) for c in node.choices), default=2)
    elif node.kind == "str":
        n = 2 + node.min_length
    elif node.kind == "date":
        n = text_length(node.temporal) + 2
    elif node.kind == "float":
        n = shortest_text_length(*float_range(node), node.places)
    elif node.duration:
        n = len('"PT0S"')
    else:
        n = 1
    if not isinstance(node, GrammarLayout) and node.nullable:
        n = min(n, 4)
    memo[id(node)] = n
    return n


def _item_shortest(node: ListLayout, memo: dict[int, int]) -> int:
    """Characters of a list's shortest item: a dict's entry is ``"k": v``, no braces."""
    item = node.item
    if node.mapping and isinstance(item, ObjectLayout):
        key, value = item.fields
        return _shortest(key.node, memo) + 2 + _shortest(value.node, memo)
    return _shortest(item, memo)


def _utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def _longest(
    node: LayoutNode,
    path: Path,
    spec: CompiledSpec,
    strings: tuple[str, ...],
    memo: dict[Path, int],
) -> int:
    """UTF-8 bytes of the longest text of ``node`` with free strings at their minimum.

    ``memo`` holds the answers per path for one spec (the node at a path is the spec's): a
    list's items are asked one by one, and nested lists would multiply the work otherwise.
    """
    hit = memo.get(path)
    if hit is None:
        hit = memo[path] = _longest_text(node, path, spec, strings, memo)
    return hit


def _longest_text(
    node: LayoutNode,
    path: Path,
    spec: CompiledSpec,
    strings: tuple[str, ...],
    memo: dict[Path, int],
) -> int:
    if isinstance(node, GrammarLayout):  # as the budget's closing walk writes it from its start
        bound = opening_bytes(node)
        if bound is None:
            raise ValueError("a grammar value has no longest text; the token budget is off")
        return bound
    if isinstance(node, ObjectLayout):
        n = 2 + 2 * max(0, len(node.fields) - 1)
        for f in node.fields:
            n += (
                _utf8(value_text(f.key))
                + 2
                + _longest(f.node, (*path, f.name), spec, strings, memo)
            )
    elif isinstance(node, ListLayout):
        m = min(node.max_length, spec.max_length(path))
        item = max(
            (_longest(node.item, (*path, i), spec, strings, memo) for i in range(m)), default=0
        )
        n = 2 + m * (item + 2)
    elif isinstance(node, UnionLayout):
        n = max(
            _longest(b, (*path, branch_part(b.model)), spec, strings, memo) for b in node.branches
        )
    elif node.kind == "bool":
        n = 5
    elif node.kind == "enum":
        n = max((_utf8(value_text(c)) for c in node.choices), default=2)
    elif node.kind == "str":
        n = 2 + _string_chars(node, path, spec)
        if spec.variable_for(path) is not None:  # a relation reads it: a value of the table
            n = max([n, *(_utf8(value_text(v)) for v in strings)])
    elif node.kind == "date":
        n = text_length(node.temporal) + 2
    elif node.kind == "float":
        n = longest_text_length(*_value_bounds(node, spec.variable_for(path), spec), node.places)
    else:
        lo = -INT_LIMIT if node.ge is None else max(node.ge, -INT_LIMIT)
        hi = INT_LIMIT if node.le is None else min(node.le, INT_LIMIT)
        n = max(len(str(lo)), len(str(hi)))
        if node.duration:
            n += len('""PTS')
    return max(n, 4) if node.nullable else n


def _string_chars(node: LeafLayout, path: Path, spec: CompiledSpec) -> int:
    """Characters of a free string as the budget's completions write it (see `_longest`).

    Its minimum, or the bound of its length variable where a relation reads its ``len()``
    (the completion pads to the least feasible length, which is at most that bound).
    """
    var = spec.string_length_variable(path)
    if var is None:
        return node.min_length
    le = spec.record(var).le
    assert le is not None  # the compiler bounds every length variable
    return le


def _few_values(lo: int, hi: int) -> list[Value] | None:
    """``lo..hi`` when at most `FINITE_LIMIT` values, else None."""
    return list(range(lo, hi + 1)) if hi - lo + 1 <= FINITE_LIMIT else None


def _value_bounds(node: LeafLayout, var: str | None, spec: CompiledSpec) -> tuple[int, int]:
    """The values a date (see `temporal_range`) or float (scaled) leaf may take.

    Its variable's bounds when a relation reads it (the compiler sets both, maybe tighter
    than the schema's), else the layout's.
    """
    if var is not None:
        rec = spec.record(var)
        assert rec.ge is not None and rec.le is not None  # the compiler sets both
        return rec.ge, rec.le
    return float_range(node) if node.kind == "float" else temporal_range(node)
