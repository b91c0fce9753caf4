"""The canonical JSON writer: a character-level automaton over a model's layout.

The writer produces exactly one serialization of a record: keys in field order and
``json.dumps`` separators (``", "`` and ``": "``). Structure text is always forced; the only
choice points are leaf values, list continue/close, ``null`` for optional leaves and an
optional key's presence (written, or left out: its default, `Writer.omission`). At a choice
point the writer consults the compiled spec's oracle, so every continuation it offers can
still be completed to a record that passes the schema and every relation.

This module is the writer's core: the walk over the layout (objects, lists, unions,
null-ness), forced text and choices. The options of a choice point come from its part: a
list's and a union's from `factorspec_sdk.writer.structures`, an optional key's from
`factorspec_sdk.writer.optional_keys`, joined to be prefix-free by
`factorspec_sdk.writer.prefix_free`. What a leaf's text is belongs to its kind
(`factorspec_sdk.writer.leaves.LEAF_WRITERS`), which the core asks through the helpers below
(`Writer.after_leaf`, `Writer.open_quote`, `Writer.whole_values`, `Writer.digit_options`,
`Writer.null_options`); how long a record's text can be is `factorspec_sdk.writer.sizes`'.

A grammar value (a `GrammarLayout`: a float or datetime no relation reads, a union, a dict,
...) is a choice point of its own: the writer hands out a `GrammarValue`, and the token level
generates it with llguidance (`factorspec_sdk.tokens.grammar`).

States are immutable and hashable (`factorspec_sdk.writer.state`), so speculative decoding
rolls back by keeping old states.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from factorspec_sdk.relations.layout import (
    GrammarLayout,
    LeafLayout,
    ListLayout,
    ObjectField,
    ObjectLayout,
    Omission,
    Path,
    UnionLayout,
    has_grammar,
)
from factorspec_sdk.writer import sizes
from factorspec_sdk.writer.digits import next_digits_in_range
from factorspec_sdk.writer.escapes import NO_ESCAPE, decode
from factorspec_sdk.writer.leaves import leaf_writer
from factorspec_sdk.writer.optional_keys import OptionalKeys
from factorspec_sdk.writer.prefix_free import non_empty, prefix_free
from factorspec_sdk.writer.state import (
    FINITE_LIMIT,
    Choice,
    Done,
    Event,
    FreeString,
    GrammarEvent,
    GrammarValue,
    KeyDecision,
    LeafEvent,
    ListDecision,
    ListFrame,
    NullDecision,
    ObjFrame,
    Option,
    Pending,
    Text,
    UnionDecision,
    WriterState,
    value_text,
)
from factorspec_sdk.writer.strings import string_grammar
from factorspec_sdk.writer.structures import list_options, union_options

if TYPE_CHECKING:
    from factorspec_sdk.graph import CompiledSpec, Fact, Oracle, Value

__all__ = [
    "Choice",
    "FreeString",
    "GrammarValue",
    "Option",
    "Writer",
    "WriterState",
    "string_grammar",
    "value_text",
]

_replace = dataclasses.replace


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
        self.keys = OptionalKeys(spec)
        """The spec's optional keys: how each may be left out, and the state after it."""
        self.grammar_strings = has_grammar(spec.layout)
        """Whether free strings are grammar values too (see `string_grammar`)."""

    # ------------------------------------------------------------------ states

    def start(self) -> WriterState:
        """The state before the first character."""
        layout = self.spec.layout
        return WriterState(assignment=(), stack=(), pending=Pending((), layout))

    def event(self, s: WriterState) -> Event:
        """What comes at ``s``: forced text, a choice point, or the record's end."""
        p = s.pending
        if p is not None and p.lead:
            return Text(p.lead, _replace(s, pending=Pending(p.path, p.node)))
        if p is not None:
            node = p.node
            if isinstance(node, ObjectLayout | ListLayout) and node.nullable:
                nv = self.spec.null_variable(p.path)
                if nv is not None and not (s.assignment and s.assignment[-1][0] == nv):
                    return NullDecision(p.path, nv, s)
            if isinstance(node, ObjectLayout):
                if not node.fields:
                    return Text("{}", _replace(s, pending=None))
                top = s.stack[-1] if s.stack else None
                entry = isinstance(top, ListFrame) and top.node.mapping
                frame = ObjFrame(p.path, 0, node, entry)
                opened = _replace(s, stack=(*s.stack, frame), pending=None)
                return Text("" if entry else "{", opened)
            if isinstance(node, ListLayout):
                frame2 = ListFrame(p.path, 0, node)
                opening = "{" if node.mapping else "["
                return Text(opening, _replace(s, stack=(*s.stack, frame2), pending=None))
            if isinstance(node, GrammarLayout):
                return GrammarEvent(p.path, node, s)
            if isinstance(node, UnionLayout):
                return UnionDecision(p.path, node, s)
            first = leaf_writer(node).opening(self, s, p.path, node)
            return first if first is not None else LeafEvent(p.path, node, s)
        if not s.stack:
            return Done(s)
        top = s.stack[-1]
        if isinstance(top, ObjFrame):
            fields = top.node.fields
            if top.index < len(fields):
                f = fields[top.index]
                slot = self._key_slot(top)
                if f.others or slot:  # the other keys' entries, inside these braces
                    others = fields[-1]
                    assert isinstance(others.node, ListLayout)  # `ObjectField.others`
                    done = ObjFrame(top.path, len(fields), top.node, top.entry, top.wrote)
                    entries = ListFrame(
                        (*top.path, others.name),
                        0,
                        others.node,
                        True,
                        top.wrote,
                        top.index if slot else None,
                    )
                    return Text("", _replace(s, stack=(*s.stack[:-1], done, entries)))
                if top.entry:  # the key's value, then ": " and the value
                    text = ": " if top.index else ""
                else:
                    sep = ", " if top.wrote else ""
                    text = f"{sep}{value_text(f.key)}: "
                frame = ObjFrame(top.path, top.index + 1, top.node, top.entry, wrote=True)
                key = Text(
                    text,
                    _replace(
                        s,
                        stack=(*s.stack[:-1], frame),
                        pending=Pending((*top.path, f.name), f.node),
                    ),
                )
                if top.entry or self.omission(top.path, f) is Omission.WRITTEN:
                    return key
                return KeyDecision(top, f, key, s)
            return Text("" if top.entry else "}", _replace(s, stack=s.stack[:-1]))
        return ListDecision(top, s)

    def omission(self, path: Path, f: ObjectField) -> Omission:
        """How the key of ``f`` in the object at ``path`` may be left out (`omission`)."""
        return self.keys.omission(path, f)

    def _key_slot(self, top: ObjFrame) -> bool:
        """Whether the next key of object ``top`` is a key slot (`ListFrame.slot`).

        So it is where the object has other keys and every declared key left is optional
        and left out freely: the next key may be any of them, or an other key, and a free
        key can begin as a declared one does (``"a"``, ``"ab"``), so one free string
        writes the key and its text tells which it is (`key_slot_dispatch`).
        """
        fields = top.node.fields
        if top.entry or not fields[-1].others or top.index >= len(fields) - 1:
            return False
        return all(
            f.optional and self.omission(top.path, f) is Omission.FREE
            for f in fields[top.index : -1]
        )

    def key_slot_dispatch(self, s: WriterState) -> tuple[tuple[str, WriterState], ...]:
        """At the first key of a key slot (``s``: its string is due), the declared keys.

        Each declared key the slot may still write, with the state after its text: the
        keys before it left out, its value due, the facts before the slot's dict opened.
        Empty where ``s`` is not at a key slot's key.
        """
        if len(s.stack) < 3:
            return ()
        parent, entries, entry = s.stack[-3:]
        if not (
            isinstance(entries, ListFrame)
            and entries.slot is not None
            and entries.index == 1
            and isinstance(entry, ObjFrame)
            and entry.entry
            and entry.index == 1  # the key is due
            and isinstance(parent, ObjFrame)
        ):
            return ()
        assignment = s.assignment
        var = self.spec.length_variable(entries.path)
        if var is not None:  # the dict's first entry was a fact: it is not opened after all
            from factorspec_sdk.graph.compiled import AtLeast  # z3 loads with the spec

            assert assignment and assignment[-1] == (var, AtLeast(1))  # `list_options`
            assignment = assignment[:-1]
        out: list[tuple[str, WriterState]] = []
        fields = parent.node.fields
        for j in range(entries.slot, len(fields) - 1):
            f = fields[j]
            frame = ObjFrame(parent.path, j + 1, parent.node, parent.entry, wrote=True)
            value = Pending((*parent.path, f.name), f.node, ": ")
            after = WriterState(assignment, (*s.stack[:-3], frame), value, None)
            out.append((f.key, after))
        return tuple(out)

    def grammar_next(self, s: WriterState) -> bool:
        """Whether a grammar value is due right at ``s`` (no text, no oracle, before it)."""
        return isinstance(self.event(s), GrammarEvent)

    def layout_text(self, s: WriterState) -> tuple[str, WriterState]:
        """The structure text forced from ``s`` without consulting the oracle."""
        parts: list[str] = []
        while True:
            ev = self.event(s)
            if not isinstance(ev, Text):
                return "".join(parts), s
            parts.append(ev.text)
            s = ev.state

    # ------------------------------------------------------------------ lengths

    def shortest_rest(self, s: WriterState) -> int:
        """Characters of the shortest layout text that completes the record from ``s``.

        Relations are ignored, so this is a lower bound on the text of any valid completion;
        the token budget uses it only to rank options (`factorspec_sdk.tokens.budget`).
        """
        return sizes.shortest_rest(s, self._shortest_cache, self._omittable)

    def _omittable(self, path: Path, f: ObjectField) -> bool:
        """Whether the writer may leave the key of ``f`` out of the object at ``path``."""
        return self.omission(path, f) is not Omission.WRITTEN

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
        return sizes.longest_rest_bytes(self.spec, s, self._longest_cache)

    # ------------------------------------------------------------------ forced text

    def forced(self, s: WriterState) -> tuple[str, WriterState]:
        """The longest forced text from ``s`` and the state at the next choice point."""
        hit = self._forced_cache.get(s)
        if hit is not None:
            return hit
        start = s
        parts: list[str] = []
        while True:
            ev = self.event(s)
            if isinstance(ev, Text):
                parts.append(ev.text)
                s = ev.state
                continue
            if isinstance(ev, Done):
                break
            options = self.raw_options(ev)
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
        ev = self.event(s)
        if isinstance(ev, Text | Done):
            raise ValueError("choices() needs a state at a choice point")
        raw = self.raw_options(ev)
        result: Choice
        if isinstance(raw, FreeString | GrammarValue):
            result = raw
        else:
            result = []
            for o in raw:
                result.extend(non_empty(self, o))
            result = prefix_free(self, result)
        self._choice_cache[s] = result
        return result

    # ------------------------------------------------------------------ leaves

    def raw_options(
        self,
        ev: LeafEvent | GrammarEvent | ListDecision | UnionDecision | NullDecision | KeyDecision,
    ) -> Choice:
        """The options of the choice point ``ev`` as its part gives them (not yet joined)."""
        if isinstance(ev, KeyDecision):
            return self.keys.options(self, ev)
        if isinstance(ev, ListDecision):
            return list_options(self, ev)
        if isinstance(ev, UnionDecision):
            return union_options(self, ev)
        if isinstance(ev, NullDecision):  # null, or the object's or list's opening
            options, present = self.decide_null(ev.state, ev.path, ev.null_var)
            if present is not None:
                opening = self.event(present)
                assert isinstance(opening, Text)
                options.append(Option(opening.text, opening.state))
            return options
        if isinstance(ev, GrammarEvent):
            return GrammarValue(ev.path, ev.node, self.after_leaf(ev.state, None))
        return self._leaf_options(ev)

    def after_leaf(self, s: WriterState, fact: Fact | None) -> WriterState:
        """The state after a leaf written at ``s``, with its fact (None: none)."""
        return self.after_facts(s, () if fact is None else (fact,))

    def after_facts(self, s: WriterState, facts: tuple[Fact, ...]) -> WriterState:
        """The state after a leaf written at ``s``, with its facts."""
        return WriterState((*s.assignment, *facts), s.stack, None, None)

    def decide_null(
        self, s: WriterState, path: Path, nv: str
    ) -> tuple[list[Option], WriterState | None]:
        """Null-ness a relation reads (``x is None``), decided with the oracle first.

        Returns ``null`` with its fact when feasible, and the state with the fact that the
        value is present (None when it cannot be).
        """
        nulls = self.oracle.feasible_values(s.assignment, nv)
        if nulls is None:
            raise RuntimeError(f"null-ness of {path!r} has no finite domain")
        options = [Option("null", self.after_leaf(s, (nv, True)))] if True in nulls else []
        if False not in nulls:
            return options, None
        return options, _replace(s, assignment=(*s.assignment, (nv, False)))

    def null_options(self, s: WriterState, node: LeafLayout, path: Path) -> list[Option]:
        """``null`` where the schema allows it and no relation reads the null-ness."""
        if node.nullable and self.spec.null_variable(path) is None:
            return [Option("null", self.after_leaf(s, None))]
        return []

    def open_quote(self, s: WriterState, path: Path) -> list[Option]:
        """A nullable quoted leaf (a date, a duration) not begun: its quote, or ``null``."""
        options = [Option('"', _replace(s, partial=""))]
        if self.spec.null_variable(path) is None:  # else `decide_null` decided it
            options.append(Option("null", self.after_leaf(s, None)))
        return options

    def _leaf_options(self, ev: LeafEvent) -> list[Option] | FreeString:
        """A leaf's options: its null-ness first where a relation reads it, then its kind's."""
        s, node, path = ev.state, ev.node, ev.path
        if node.nullable:
            nv = self.spec.null_variable(path)
            decided = bool(s.assignment) and s.assignment[-1][0] == nv
            if nv is not None and not decided:
                options, present = self.decide_null(s, path, nv)
                if present is not None:
                    inner = self._leaf_options(LeafEvent(path, node, present))
                    if isinstance(inner, FreeString):
                        raise RuntimeError("a free string cannot take part in a relation")
                    options.extend(inner)
                return options
        return leaf_writer(node).options(self, s, path, node, self.spec.variable_for(path))

    def whole_values(
        self, s: WriterState, var: str | None, lo: int, hi: int, span: int | None = None
    ) -> list[Value] | None:
        """The values a leaf may take, when few; else None.

        Few: at most `FINITE_LIMIT`, and, given ``span``, within it of each other. The
        oracle's feasible values when a relation reads the leaf, else ``lo..hi``.
        """
        if var is not None:
            return self.oracle.feasible_values(s.assignment, var, limit=FINITE_LIMIT, span=span)
        few = hi - lo + 1 <= FINITE_LIMIT and (span is None or hi - lo <= span)
        return list(range(lo, hi + 1)) if few else None

    def digit_options(
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
                options.append(Option(end, self.after_leaf(s, fact)))
            else:
                text = lead(c) if lead is not None and not prefix else c
                options.append(Option(text, _replace(s, partial=prefix + c)))
        return options

    # ------------------------------------------------------------------ free strings

    def extend_free(self, free: FreeString, chars: str, escape: str = NO_ESCAPE) -> FreeString:
        """The free string after ``chars`` of its value, ``escape`` then under way."""
        written = free.written + chars
        return dataclasses.replace(
            free, state=_replace(free.state, partial=written), written=written, escape=escape
        )

    def read_free(self, free: FreeString, text: str) -> tuple[FreeString, str | None]:
        """A free string after ``text`` of its JSON text (`factorspec_sdk.writer.escapes`).

        Returns the string after the text, and where an unescaped quote closes it, the text
        after the quote (the string then holds what came before it); None if it stays open.

        Raises:
            ValueError: ``text`` cannot go on from the string (an invalid escape, a raw control
                character, a lone surrogate).
        """
        piece = decode(free.escape, text)
        if piece is None:
            raise ValueError(f"{text!r} cannot go on in a JSON string after {free.escape!r}")
        grown = self.extend_free(free, piece.chars, piece.escape)
        return grown, None if piece.close is None else text[piece.close + 1 :]

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
        for key, after in free.dispatch:  # a key slot's text: a key the object declares
            if key == text:
                return after
        n = len(text) if text is not None else length
        assert n is not None
        facts: list[Fact] = []
        if free.texts is not None:
            facts.extend(free.texts.facts(text))
        if free.lengths is not None:
            facts.append((free.lengths.var, n))
        return self.after_facts(free.state, tuple(facts))
