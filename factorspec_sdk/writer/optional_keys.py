"""An object's optional keys: whether the writer may leave one out, and the state after it.

`factorspec_sdk.writer.automaton.Writer` asks `OptionalKeys` at each optional key of an
object: how the key may be left out (`Omission`, fixed by the spec), and the options at the
key (written, or left out where the relations allow). A key no relation reads under is
left out freely; one whose default the relations read is left out as its default: the
state after writing the default's text, its facts included, where the oracle finds them
feasible.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from factorspec_sdk.relations.layout import ObjectField, Omission, Path, omission
from factorspec_sdk.writer.state import (
    Done,
    FreeString,
    GrammarEvent,
    GrammarValue,
    KeyDecision,
    ObjFrame,
    Option,
    Pending,
    Text,
    WriterState,
)

if TYPE_CHECKING:
    from factorspec_sdk.graph import CompiledSpec
    from factorspec_sdk.writer.automaton import Writer

__all__ = ["OptionalKeys", "written_as"]

_replace = dataclasses.replace


class OptionalKeys:
    """The optional keys of one writer's spec, and what leaving each out leads to (memoized).

    Args:
        spec: the compiled spec whose layout holds the keys.
    """

    def __init__(self, spec: CompiledSpec) -> None:
        self.spec = spec
        self._omission_cache: dict[Path, Omission] = {}
        self._left_out_cache: dict[WriterState, WriterState | None] = {}

    def omission(self, path: Path, f: ObjectField) -> Omission:
        """How the key of ``f`` in the object at ``path`` may be left out (`omission`)."""
        where = (*path, f.name)
        hit = self._omission_cache.get(where)
        if hit is None:
            hit = self._omission_cache[where] = omission(f, self.spec.reads_under(where))
        return hit

    def options(self, writer: Writer, ev: KeyDecision) -> list[Option]:
        """An optional key: written, or left out where `omission` and the relations allow.

        Left out is an option of empty text: the next key (``", "`` only after a key
        written), the next choice, or the object's ``}`` follows it (`Writer.choices` joins
        it to them), so the optional keys in a row are one choice point among the keys that
        may come next. A key no relation reads under is left out freely; one whose default
        the relations read is left out as its default: the state after writing the default's
        text, its facts included, where the oracle finds them feasible (not offered else).
        """
        options = [Option(ev.key.text, ev.key.state)]
        left_out = self.left_out(writer, ev)
        if left_out is not None:
            options.append(Option("", left_out))
        return options

    def left_out(self, writer: Writer, ev: KeyDecision) -> WriterState | None:
        """The state after leaving the key out (None: the relations forbid its default)."""
        if ev.state in self._left_out_cache:
            return self._left_out_cache[ev.state]
        top, f, s = ev.frame, ev.field, ev.state
        frame = ObjFrame(top.path, top.index + 1, top.node, top.entry, top.wrote)
        skipped = _replace(s, stack=(*s.stack[:-1], frame))
        found: WriterState | None = skipped
        if self.omission(top.path, f) is Omission.DEFAULT:
            assert f.default is not None  # `omission`
            at = _replace(skipped, pending=Pending((*top.path, f.name), f.node))
            found = written_as(writer, at, f.default)
        self._left_out_cache[ev.state] = found
        return found


def written_as(writer: Writer, s: WriterState, text: str) -> WriterState | None:
    """The state after ``writer`` writes the value ``text`` at ``s`` (its facts), or None.

    None where the writer does not offer ``text`` there: the oracle finds its facts
    infeasible. The walk follows the writer's own options, so the facts are those of
    writing the text, and each step is one the relations allow.
    """
    depth, rest = len(s.stack), text
    while not (s.pending is None and s.partial is None and len(s.stack) == depth):
        ev = writer.event(s)
        if isinstance(ev, Text):
            if not rest.startswith(ev.text):
                return None
            rest, s = rest[len(ev.text) :], ev.state
            continue
        if isinstance(ev, Done | GrammarEvent):
            return None
        options = writer.raw_options(ev)
        if isinstance(options, GrammarValue):
            return None
        if isinstance(options, FreeString):  # the rest is the string's text and quote
            try:
                free, after = writer.read_free(options, rest)
            except ValueError:
                return None
            if after != "" or not free.closes(free.written):
                return None
            rest, s = "", writer.close_free(free)
            continue
        ahead = [o for o in options if o.text and rest.startswith(o.text)]
        if not ahead:  # the value ends here, or the writer does not write it
            ahead = [o for o in options if not o.text and not rest]
        if not ahead:
            return None
        o = max(ahead, key=lambda o: len(o.text))
        rest, s = rest[len(o.text) :], o.state
    return s if not rest else None
