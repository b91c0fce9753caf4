r"""Free ``str`` leaves: a `FreeString` the token level writes, or the named texts whole.

A free string no relation reads is written character by character by the token level (a
`FreeString`), or, in a spec with grammar values, generated as a grammar value
(`string_grammar`). Where a relation reads its ``len()``, the lengths it may close at are the
oracle's (`StringLengths`); where a relation reads its value, the texts it may close at
(`StringTexts`, asked of the oracle once when it opens), and where only named texts are
feasible, those texts are the options, whole. Where relations read its
``startswith``/``endswith``, the lengths per profile of affixes (`Affixes`).

Either way the string holds any value JSON allows: its JSON text may hold every escape
(``\n``, ``\"``, ``\u00e9``, a surrogate pair; `factorspec_sdk.writer.escapes`), and its
lengths, texts and affixes are those of the value, escapes read.
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from typing import TYPE_CHECKING

from factorspec_sdk.relations.layout import OTHER_TEXT, GrammarLayout, LeafLayout, Path
from factorspec_sdk.writer.affixes import Affixes
from factorspec_sdk.writer.base import LeafWriter, utf8
from factorspec_sdk.writer.escapes import NO_ESCAPE, writable
from factorspec_sdk.writer.lengths import StringLengths
from factorspec_sdk.writer.state import (
    Event,
    FreeString,
    GrammarEvent,
    Option,
    Text,
    value_text,
)
from factorspec_sdk.writer.texts import StringTexts

if TYPE_CHECKING:
    from factorspec_sdk.graph import CompiledSpec
    from factorspec_sdk.writer.automaton import Writer
    from factorspec_sdk.writer.state import WriterState

__all__ = ["STR_WRITER", "string_chars", "string_grammar"]


@lru_cache(maxsize=256)
def string_grammar(node: LeafLayout) -> GrammarLayout:
    r"""A free string as a grammar value: the JSON string grammar, every escape included.

    In a spec that has grammar values, a free string no relation reads is one too, so that it
    joins the llguidance segment of the grammar values around it (one segment, no hand-over
    between the writer's tries and the grammar) and the token budget bounds it by its closing
    walk like them (`factorspec_sdk.tokens.budget`). The writer writes the other free
    strings itself, escapes included, with the same language: those of a spec without
    grammar values, and the items of a list of free strings (the list's first item follows
    an empty option, and a trie cannot end in a grammar segment there).
    """
    schema: dict[str, object] = {"type": "string", "minLength": node.min_length}
    if node.max_length is not None:
        schema["maxLength"] = node.max_length
    if node.nullable:
        schema = {"anyOf": [schema, {"type": "null"}]}
    return GrammarLayout(json.dumps(schema, sort_keys=True, separators=(",", ":")))


def string_chars(node: LeafLayout, path: Path, spec: CompiledSpec) -> int:
    """Characters of a free string as the budget's completions write it (see `longest`).

    Its minimum, or the bound of its length variable where a relation reads its ``len()``
    (the completion pads to the least feasible length, which is at most that bound).
    """
    var = spec.string_length_variable(path)
    if var is None:
        return node.min_length
    le = spec.record(var).le
    assert le is not None  # the compiler bounds every length variable
    return le


def _string_texts(w: Writer, s: WriterState, var: str, path: Path) -> StringTexts:
    """What a free string whose value a relation reads may close at (see `StringTexts`).

    Every named text is asked: the intern table is finite, and ``limit`` covers it. A text
    of a linked string written before is asked on its own, with its ``same`` true. Where
    texts no relation names are feasible, the string is written freely, and a named text
    no JSON string holds for Pydantic (a lone surrogate: `writable`) counts as banned.
    """
    written = dict(s.assignment)
    links = w.spec.same_variables(path)
    found = [(v, w.spec.variable_for(other)) for v, other in links]
    texts_of = [(v, written.get(ov)) for v, ov in found if ov is not None]
    linked = tuple((v, text) for v, text in texts_of if isinstance(text, str))
    base = (*s.assignment, *((v, False) for v, _ in linked))
    named = w.spec.strings.strings[1:]
    values = w.oracle.feasible_values(base, var, limit=len(named) + 1)
    assert values is not None  # at most one value per code
    texts = {t for _, t in linked}
    feasible = {v for v in values if isinstance(v, str) and v not in texts}
    feasible.discard(OTHER_TEXT)
    probe = StringTexts(var, frozenset(), frozenset(texts), False, linked, bool(links))
    for t in texts:
        if w.oracle.feasible((*s.assignment, *probe.facts(t))):
            feasible.add(t)
    other = OTHER_TEXT in values
    if other:  # written freely: a named text the writer cannot write is out of reach
        feasible = {t for t in feasible if writable(t)}
    every = frozenset(named) | texts
    return StringTexts(var, frozenset(feasible), every - feasible, other, linked, bool(links))


class _StrWriter(LeafWriter):
    """A free string: its quote is layout text, then a `FreeString` (or named texts whole)."""

    def opening(self, w: Writer, s: WriterState, path: Path, node: LeafLayout) -> Event | None:
        if s.partial is not None or w.spec.variable_for(path) is not None:
            return None
        item = bool(path) and isinstance(path[-1], int)
        if (
            w.grammar_strings
            and not item  # a list item follows the empty "continue" option: no segment
            and (not node.nullable or w.spec.null_variable(path) is None)
            and w.spec.string_length_variable(path) is None  # the writer's own
        ):
            return GrammarEvent(path, string_grammar(node), s)
        if not node.nullable:
            return Text('"', dataclasses.replace(s, partial=""))
        return None

    def options(
        self, w: Writer, s: WriterState, path: Path, node: LeafLayout, var: str | None
    ) -> list[Option] | FreeString:
        texts = None
        dispatch = w.key_slot_dispatch(s)  # a key slot: declared keys close it too
        if var is not None and w.spec.record(var).free_str:
            texts = _string_texts(w, s, var, path)
            if dispatch:
                keys = frozenset(k for k, _ in dispatch)
                feasible, banned = texts.feasible | keys, texts.banned - keys
                texts = dataclasses.replace(texts, feasible=feasible, banned=banned)
            if not texts.other:  # only named texts: whole values
                routed = dict(dispatch)
                options = [
                    Option(value_text(t), routed.get(t) or w.after_facts(s, texts.facts(t)))
                    for t in sorted(texts.feasible)
                ]
                return options + w.null_options(s, node, path)
        if s.partial is None:  # open the string (or write null when the schema allows)
            return [*w.null_options(s, node, path), Option('"', dataclasses.replace(s, partial=""))]
        after = w.after_leaf(s, None)
        suffix, _ = w.layout_text(after)
        lengths = None
        lvar = w.spec.string_length_variable(path)
        affix_vars = w.spec.affix_variables(path)
        assert lvar is not None or not affix_vars  # `affix_links` makes it
        if lvar is not None:
            rec = w.spec.record(lvar)  # its bounds: min_length, max_length or default
            assert rec.ge is not None and rec.le is not None  # the compiler sets both
            if texts is not None and affix_vars:  # the lengths per profile of affixes
                given = (*s.assignment, (texts.var, OTHER_TEXT))
                affixes = Affixes(w.oracle, given, affix_vars, lvar, rec.ge, rec.le)
                texts = dataclasses.replace(texts, affixes=affixes)
            else:
                given = s.assignment if texts is None else (*s.assignment, *texts.facts(None))
                lengths = StringLengths(w.oracle, given, lvar, rec.ge, rec.le)
        lo, hi = node.min_length, node.max_length
        return FreeString(s, s.partial, lo, hi, suffix, lengths, texts, NO_ESCAPE, dispatch)

    def shortest(self, node: LeafLayout) -> int:
        return 2 + node.min_length

    def longest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, strings: tuple[str, ...]
    ) -> int:
        n = 2 + string_chars(node, path, spec)
        if spec.variable_for(path) is not None:  # a relation reads it: a value of the table
            n = max([n, *(utf8(value_text(v)) for v in strings if writable(v))])
        return n

    def shortest_rest(self, node: LeafLayout, partial: str) -> int:
        return max(0, node.min_length - len(partial)) + 1

    def longest_rest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, partial: str, whole: int
    ) -> int:
        rest = max(0, string_chars(node, path, spec) - len(partial)) + 1
        if spec.variable_for(path) is not None:  # the budget may spell a named text, escaped
            rest = max(rest, whole - 1)
        return rest


STR_WRITER = _StrWriter()
