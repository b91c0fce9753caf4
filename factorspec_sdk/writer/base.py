"""What the writer asks of a leaf kind (`LeafWriter`), and the helpers the kinds share.

A leaf kind's writer (`factorspec_sdk.writer.leaves.LEAF_WRITERS`) answers the writer's core
(`factorspec_sdk.writer.automaton.Writer`), which it is handed along with the state:

- `LeafWriter.opening`: layout text due before the leaf's choices (a quote), if any;
- `LeafWriter.options`: the alternatives at one of the leaf's choice points;
- `LeafWriter.shortest` / `LeafWriter.longest`: characters of its shortest text, bytes of
  its longest (relations ignored; the token budget's bounds);
- `LeafWriter.shortest_rest` / `LeafWriter.longest_rest`: the same for the rest of a value
  begun (``partial``: what is written of it).

`QuotedWriter` is the base of the kinds written as a JSON string of their own form (dates,
durations, UUIDs); `FixedWidthWriter` of those among them whose texts all have one width, so
that the values a prefix leaves are one range (dates, datetimes, times, UUIDs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from factorspec_sdk.relations.layout import LeafLayout, Path
from factorspec_sdk.relations.variables import leaf_variable
from factorspec_sdk.writer.digits import is_canonical_int
from factorspec_sdk.writer.state import Option, Text

if TYPE_CHECKING:
    from factorspec_sdk.graph import CompiledSpec
    from factorspec_sdk.writer.automaton import Writer
    from factorspec_sdk.writer.state import Event, FreeString, WriterState

__all__ = [
    "Feasible",
    "FixedWidthWriter",
    "LeafWriter",
    "QuotedWriter",
    "chars_in_range",
    "keep_feasible",
    "leaf_bounds",
    "utf8",
]


def utf8(text: str) -> int:
    """UTF-8 bytes of ``text``."""
    return len(text.encode("utf-8"))


Feasible = Callable[[Sequence[tuple[int, int]]], frozenset[int]]
"""The oracle's `feasible_ranges` for one leaf: the indices of the ranges holding a feasible
value."""


def keep_feasible(
    ranges: dict[str, tuple[int, int]], feasible: Feasible | None
) -> dict[str, tuple[int, int]]:
    """The next characters whose range of values holds a feasible one.

    All of them without a relation (``feasible`` None).
    """
    if feasible is None or not ranges:
        return ranges
    keys = list(ranges)
    keep = feasible([ranges[c] for c in keys])
    return {c: ranges[c] for i, c in enumerate(keys) if i in keep}


def chars_in_range(
    chars: str,
    prefix: str,
    prefix_range: Callable[[str], tuple[int, int] | None],
    lo: int,
    hi: int,
    feasible: Feasible | None,
) -> dict[str, tuple[int, int]]:
    """Of ``chars``, those after ``prefix`` that leave a value in ``[lo, hi]``, with the range.

    ``prefix_range`` gives the values whose text starts with a prefix (one range, the texts
    being of one width), or None; ``feasible`` (when a relation reads the leaf) keeps the
    characters whose range holds a feasible value (`keep_feasible`).
    """
    out: dict[str, tuple[int, int]] = {}
    for c in chars:
        r = prefix_range(prefix + c)
        if r is not None and max(r[0], lo) <= min(r[1], hi):
            out[c] = (max(r[0], lo), min(r[1], hi))
    return keep_feasible(out, feasible)


def leaf_bounds(node: LeafLayout, var: str | None, spec: CompiledSpec) -> tuple[int, int]:
    """The values a leaf may take: its variable's bounds when a relation reads it.

    (The compiler sets both, maybe tighter than the schema's.) Else the bounds the layout
    gives the leaf's variable (`leaf_variable`).
    """
    if var is not None:
        rec = spec.record(var)
        lo, hi = rec.ge, rec.le
    else:
        shape = leaf_variable(node)
        lo, hi = shape.ge, shape.le
    assert lo is not None and hi is not None  # a bounded kind's variable
    return lo, hi


class LeafWriter:
    """How the writer writes one leaf kind (the defaults are an unquoted number's)."""

    def opening(self, w: Writer, s: WriterState, path: Path, node: LeafLayout) -> Event | None:
        """Layout text (or a grammar value) due at ``s`` before the leaf's choices; None."""
        return None

    def options(
        self, w: Writer, s: WriterState, path: Path, node: LeafLayout, var: str | None
    ) -> list[Option] | FreeString:
        """The alternatives at ``s``, a choice point of the leaf (``var``: its variable)."""
        raise NotImplementedError

    def shortest(self, node: LeafLayout) -> int:
        """Characters of the leaf's shortest text (relations ignored)."""
        return 1

    def longest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, strings: tuple[str, ...]
    ) -> int:
        """UTF-8 bytes of the leaf's longest text (a free string at its least length)."""
        raise NotImplementedError

    def shortest_rest(self, node: LeafLayout, partial: str) -> int:
        """At least how many characters complete the leaf from ``partial``."""
        return 0 if partial and is_canonical_int(partial) else 1  # a digit more, at least

    def longest_rest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, partial: str, whole: int
    ) -> int:
        """At most how many bytes complete the leaf from ``partial`` (``whole``: `longest`)."""
        return max(0, whole - len(partial))


class QuotedWriter(LeafWriter):
    """A leaf written as a JSON string of its own form: its opening quote is layout text.

    As a free string's is, so that a token such as `` "`` may span it and the text before;
    a nullable one first chooses between ``null`` and that quote (`Writer.open_quote`).
    """

    def opening(self, w: Writer, s: WriterState, path: Path, node: LeafLayout) -> Event | None:
        """The opening quote as layout text (a nullable leaf chooses it among its options)."""
        if s.partial is None and not node.nullable:
            return Text('"', dataclasses.replace(s, partial=""))
        return None


class FixedWidthWriter(QuotedWriter):
    """A quoted leaf whose texts all have one width: whole values when few are feasible.

    At most `FINITE_LIMIT` feasible values are offered whole (a value the relations fix is
    one option: certain tokens); more are written character by character (`next_chars`),
    keeping, when a relation reads the leaf, only prefixes whose range of values the oracle
    finds a feasible value in. The last character carries the closing quote and the fact. A
    kind names its `width`, its `text` of a value and its `next_chars`.
    """

    def width(self, node: LeafLayout) -> int:
        """Characters of every text of the leaf, without the quotes."""
        raise NotImplementedError

    def text(self, node: LeafLayout, value: int) -> str:
        """The text of ``value`` (its variable's integer), without the quotes."""
        raise NotImplementedError

    def next_chars(
        self, node: LeafLayout, prefix: str, lo: int, hi: int, feasible: Feasible | None
    ) -> dict[str, tuple[int, int]]:
        """The characters that may follow ``prefix``, each with the values it leaves."""
        raise NotImplementedError

    def options(
        self, w: Writer, s: WriterState, path: Path, node: LeafLayout, var: str | None
    ) -> list[Option]:
        """Whole values when few are feasible, else the feasible next characters."""
        if s.partial is None:  # a nullable leaf: null, or its opening quote
            return w.open_quote(s, path)
        lo, hi = leaf_bounds(node, var, w.spec)
        if s.partial == "":
            values = w.whole_values(s, var, lo, hi)
            if values is not None:
                return [
                    Option(
                        self.text(node, int(v)) + '"', w.after_leaf(s, (var, v) if var else None)
                    )
                    for v in values
                ]
        prefix = s.partial
        oracle, assignment = w.oracle, s.assignment
        feasible: Feasible | None = None
        if var is not None:
            feasible = lambda rs: oracle.feasible_ranges(assignment, var, rs)  # noqa: E731
        out = []
        for c, (a, _) in self.next_chars(node, prefix, lo, hi, feasible).items():
            if len(prefix) + 1 == self.width(node):  # the last character: one value
                out.append(Option(c + '"', w.after_leaf(s, None if var is None else (var, a))))
            else:
                out.append(Option(c, dataclasses.replace(s, partial=prefix + c)))
        return out

    def shortest(self, node: LeafLayout) -> int:
        """The width and the two quotes."""
        return self.width(node) + 2

    def longest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, strings: tuple[str, ...]
    ) -> int:
        """The width and the two quotes (one byte a character)."""
        return self.width(node) + 2

    def shortest_rest(self, node: LeafLayout, partial: str) -> int:
        """The characters left and the closing quote."""
        return self.width(node) - len(partial) + 1

    def longest_rest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, partial: str, whole: int
    ) -> int:
        """The characters left and the closing quote (one byte a character)."""
        return self.width(node) - len(partial) + 1
