"""The writer's states and what a choice point offers: options, a free string, a grammar value.

States are immutable and hashable, so speculative decoding rolls back by keeping old states.
The events (`Text`, `LeafEvent`, `GrammarEvent`, the decisions, `Done`) are what the writer
finds at a state (`factorspec_sdk.writer.automaton.Writer`): forced layout text, or a choice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from factorspec_sdk.relations.layout import (
    GrammarLayout,
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectField,
    ObjectLayout,
    Path,
    UnionLayout,
)
from factorspec_sdk.writer.escapes import NO_ESCAPE, committed, next_chars
from factorspec_sdk.writer.lengths import StringLengths
from factorspec_sdk.writer.texts import StringTexts

if TYPE_CHECKING:
    from factorspec_sdk.graph import Assignment

__all__ = [
    "FINITE_LIMIT",
    "Choice",
    "Done",
    "Event",
    "Frame",
    "FreeString",
    "GrammarEvent",
    "GrammarValue",
    "KeyDecision",
    "LeafEvent",
    "ListDecision",
    "ListFrame",
    "NullDecision",
    "ObjFrame",
    "Option",
    "Pending",
    "Text",
    "UnionDecision",
    "WHOLE_SPAN",
    "WriterState",
    "value_text",
]

FINITE_LIMIT = 64
"""A leaf with at most this many feasible values is offered as a set of whole values."""

WHOLE_SPAN = FINITE_LIMIT
"""An int or a float (in its scaled units: cents for two places) is offered whole only where
its feasible values also lie within this span of each other; a wider set is written digit
by digit, as a larger one is. The same values are written either way; the span saves the
oracle an enumeration that would stop past `FINITE_LIMIT`: one check past the first value
tells a set this wide (`Oracle.feasible_values`), where telling more than `FINITE_LIMIT`
values takes that many checks and one more (an invoice line's quantity and unit price,
an expense's amount)."""


def value_text(value: object) -> str:
    """Canonical JSON text of a scalar value."""
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class ObjFrame:
    """An open object: its path, the next field's index (``entry``: a dict's entry).

    ``wrote``: a key has been written in it (the next key follows ``", "``); an object
    whose optional keys were all left out so far has written none.
    """

    path: Path
    index: int
    node: ObjectLayout = field(compare=False, hash=False, repr=False)
    entry: bool = False  # a dict's entry: ``"k": v``, no braces, no field keys
    wrote: bool = False


@dataclass(frozen=True, slots=True)
class ListFrame:
    """An open list: its path and the next item's index.

    ``others``: the dict of an object's other keys (`ObjectField.others`), written inside
    the object's braces: no brackets of its own, and its first entry follows ``", "`` where
    the object wrote a key before it (``after``). ``slot``: the dict was opened where the
    object's optional keys from field ``slot`` on were still to be decided; its first key
    is then a *key slot*, whose text may also be one of those keys (`FreeString.dispatch`).
    """

    path: Path
    index: int
    node: ListLayout = field(compare=False, hash=False, repr=False)
    others: bool = False
    after: bool = False
    slot: int | None = None


Frame = ObjFrame | ListFrame


@dataclass(frozen=True, slots=True)
class Pending:
    """The node whose value is due next, at its path.

    ``lead``: layout text due before the value (a key slot's ``": "``, after a declared
    key its string closed as: `FreeString.dispatch`).
    """

    path: Path
    node: LayoutNode = field(compare=False, hash=False, repr=False)
    lead: str = ""


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
    stack: tuple[Frame, ...]
    pending: Pending | None
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
    r"""A free JSON string leaf being written (no relation reads it, or none names its text).

    The model writes its JSON text, escapes included (`factorspec_sdk.writer.escapes`);
    what the string holds, and every length, text and affix asked of it, is the value.

    Attributes:
        state: the writer state inside the string.
        written: characters of the value written so far (escapes read).
        min_length: fewest characters.
        max_length: most characters, or None.
        close_suffix: forced layout text after the closing quote.
        lengths: where a relation reads the string's ``len()``, the lengths it may close at
            (asked of the oracle; with ``texts``, the lengths of texts no relation names);
            None otherwise.
        texts: where a relation reads the string's value, the texts it may close at; None
            otherwise.
        escape: the escape under way at the end of the JSON text (``\u00``), if any: one
            more character of the value, not known yet.
        dispatch: at a key slot (`ListFrame.slot`), the texts that close the string as a
            key the object declares, each with the state after it (that key's value
            due); the texts are among ``texts.feasible``. Any other text is an other key.
    """

    state: WriterState
    written: str
    min_length: int
    max_length: int | None
    close_suffix: str
    lengths: StringLengths | None = None
    texts: StringTexts | None = None
    escape: str = NO_ESCAPE
    dispatch: tuple[tuple[str, WriterState], ...] = ()

    @property
    def chars(self) -> int:
        """Characters of the value so far, an escape under way counted as one."""
        return committed(self.written, self.escape)

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
        if any(t == text for t, _ in self.dispatch):
            return True
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

    def can_finish(self, text: str, escape: str = NO_ESCAPE) -> bool:
        """Whether the string, its value written up to ``text``, ``escape`` under way, can close.

        An escape under way becomes one more character: some character it may become must
        leave a text that can close (`next_chars`: the characters of named texts and affix
        constants it may become, and one other, stand for all). A string no relation reads
        the text of can grow to its longest length; one read with ``startswith``/``endswith``
        is `completable`; one whose value a relation reads can pad to the longest length of
        a text no relation names, close as itself at that length unless it is a banned named
        text, or go on to a feasible named text.
        """
        if escape:
            if self.texts is None:  # only the length counts
                return self.can_finish(text + " ")
            chars = next_chars(escape, self.texts.constant_chars())
            return any(self.can_finish(text + c) for c in chars)
        n = len(text)
        if self.texts is None:
            top = self.longest_other
            return top is None or n <= top
        if self.texts.affixes is not None:
            return self.completable(text)
        top = self.longest_other
        if top is None or n < top or (n == top and not self.banned(text)):
            return True
        return any(t.startswith(text) for t in self.texts.feasible)

    @property
    def reads_text(self) -> bool:
        """Whether a relation reads the string's value (what it may close at is its text's)."""
        return self.texts is not None

    @property
    def has_affixes(self) -> bool:
        """Whether relations read the string's ``startswith``/``endswith``."""
        return self.texts is not None and self.texts.affixes is not None

    @property
    def whole_text_counts(self) -> bool:
        """Whether where the string may close depends on its whole text, not only its length.

        Strings written after it compare with it (`StringTexts.keep`), or it has affixes.
        """
        return self.texts is not None and (self.texts.keep or self.texts.affixes is not None)

    def banned(self, text: str) -> bool:
        """Whether ``text`` is a named text the string may not close as."""
        return self.texts is not None and self.texts.named(text) and text not in self.texts.feasible

    def named_ahead(self) -> list[str]:
        """The feasible named texts that extend what is written, shortest first."""
        return [] if self.texts is None else self.texts.extending(self.written)

    def constant_texts(self) -> list[str]:
        """For a string with affixes: the texts of constants only that extend what is written.

        Its affixes' tight texts (`factorspec_sdk.writer.affixes.Affixes.tight`), then the
        feasible named texts that extend it.
        """
        texts = self.texts
        assert texts is not None and texts.affixes is not None
        return [*texts.affixes.tight(self.written), *texts.extending(self.written)]

    def suffix_heads(self) -> list[tuple[str, range]]:
        """For a string with affixes: each constant suffix and the lengths before it.

        The suffixes come the empty one first; the lengths are those the text before the
        suffix may take: from what is written up to the most that leaves room for the suffix
        within the length variable's bound.
        """
        texts = self.texts
        assert texts is not None and texts.affixes is not None
        aff = texts.affixes
        n = len(self.written)
        return [(e, range(n, aff.hi - len(e) + 1)) for e in aff.suffixes]

    def toward(self) -> list[str]:
        """The texts a token may head for, each extending what is written.

        The named texts (feasible or banned), and with affixes the texts of constants and the
        constant prefixes.
        """
        if self.texts is None:
            return []
        w = self.written
        out = self.texts.named_from(w)
        if self.texts.affixes is not None:
            out += [*self.texts.affixes.tight(w), *self.texts.affixes.open_prefixes(w)]
        return out

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
class GrammarEvent:
    """A grammar value is due at ``path``."""

    path: Path
    node: GrammarLayout
    state: WriterState


@dataclass(frozen=True, slots=True)
class Text:
    """Forced layout text, and the state after it."""

    text: str
    state: WriterState


@dataclass(frozen=True, slots=True)
class LeafEvent:
    """A leaf's value is due at ``path``: a choice among its options."""

    path: Path
    node: LeafLayout
    state: WriterState


@dataclass(frozen=True, slots=True)
class ListDecision:
    """A list's next item, or its end."""

    frame: ListFrame
    state: WriterState


@dataclass(frozen=True, slots=True)
class UnionDecision:
    """A union's branch (or ``null``)."""

    path: Path
    node: UnionLayout
    state: WriterState


@dataclass(frozen=True, slots=True)
class KeyDecision:
    """An optional key: written (``key`` is its text and the state after), or left out."""

    frame: ObjFrame
    field: ObjectField
    key: Text
    state: WriterState


@dataclass(frozen=True, slots=True)
class NullDecision:
    """A nullable object or list whose null-ness a relation reads, not decided yet."""

    path: Path
    null_var: str
    state: WriterState


@dataclass(frozen=True, slots=True)
class Done:
    """The record is complete."""

    state: WriterState


Event = (
    Text
    | LeafEvent
    | GrammarEvent
    | ListDecision
    | UnionDecision
    | NullDecision
    | KeyDecision
    | Done
)
Choice = list[Option] | FreeString | GrammarValue
"""What a choice point offers: whole options, a free string, or a grammar value."""
