"""How long a record's text can be: its shortest and its longest completions, from any state.

Relations are ignored in both: `shortest_rest` is a lower bound on the characters of any
valid completion, optional keys left out (the token budget uses it only to rank options),
`longest_rest_bytes` an upper bound on the UTF-8 bytes of the completions the token budget
writes (every optional key written, free strings at their least length, every list at its
bound, every number at its widest, every enumerated string at its longest value;
`factorspec_sdk.tokens.budget`). A leaf's own lengths are its kind's
(`factorspec_sdk.writer.leaves.LEAF_WRITERS`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
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
    branch_part,
)
from factorspec_sdk.writer.base import utf8
from factorspec_sdk.writer.closing import opening_bytes
from factorspec_sdk.writer.leaves import leaf_writer
from factorspec_sdk.writer.state import ObjFrame, WriterState, value_text

if TYPE_CHECKING:
    from factorspec_sdk.graph import CompiledSpec

__all__ = ["longest", "longest_rest_bytes", "shortest", "shortest_rest"]


def shortest(node: LayoutNode, memo: dict[int, int]) -> int:
    """Characters of the shortest canonical JSON text of ``node`` (relations ignored).

    ``memo`` holds the answers by ``id(node)`` for nodes that outlive it (one spec's).
    """
    hit = memo.get(id(node))
    if hit is not None:
        return hit
    if isinstance(node, GrammarLayout):
        n = 1  # a lower bound: every JSON value has a character
    elif isinstance(node, ObjectLayout):
        n = 2 + _keys_shortest(node.fields, False, memo)
    elif isinstance(node, ListLayout):
        m = node.min_length
        n = 2 + m * _item_shortest(node, memo) + 2 * max(0, m - 1)
    elif isinstance(node, UnionLayout):
        n = min(shortest(b, memo) for b in node.branches)
    else:
        n = leaf_writer(node).shortest(node)
    if not isinstance(node, GrammarLayout) and node.nullable:
        n = min(n, 4)
    memo[id(node)] = n
    return n


def _keys_shortest(
    fields: Sequence[ObjectField],
    wrote: bool,
    memo: dict[int, int],
    omittable: Callable[[ObjectField], bool] | None = None,
) -> int:
    """Characters of the shortest keys and values of ``fields``, optional ones left out.

    ``wrote``: a key is written before them (the first of them follows ``", "``).
    ``omittable``: which optional keys the writer may leave out there (default: all of
    them, a lower bound wherever they are).
    """
    n = 0
    for f in fields:
        if f.optional and (omittable is None or omittable(f)):
            continue
        if f.others:  # its fewest entries, inside the object's braces
            assert isinstance(f.node, ListLayout)  # `ObjectField.others`
            m = f.node.min_length
            n += m * _item_shortest(f.node, memo) + 2 * (m if wrote else max(0, m - 1))
            continue
        n += (2 if wrote else 0) + len(value_text(f.key)) + 2 + shortest(f.node, memo)
        wrote = True
    return n


def _item_shortest(node: ListLayout, memo: dict[int, int]) -> int:
    """Characters of a list's shortest item: a dict's entry is ``"k": v``, no braces."""
    item = node.item
    if node.mapping and isinstance(item, ObjectLayout):
        key, value = item.fields
        return shortest(key.node, memo) + 2 + shortest(value.node, memo)
    return shortest(item, memo)


def shortest_rest(
    s: WriterState,
    memo: dict[int, int],
    omittable: Callable[[Path, ObjectField], bool] | None = None,
) -> int:
    """Characters of the shortest layout text that completes the record from ``s``.

    ``omittable``: which optional keys of the open objects the writer may leave out (by
    the object's path; `Writer.omission`); nested objects not begun count every optional
    key as left out.
    """
    total = 0
    p = s.pending
    if p is not None:
        node = p.node
        total += len(p.lead)
        if s.partial is None:
            total += shortest(node, memo)
        elif isinstance(node, LeafLayout):
            total += leaf_writer(node).shortest_rest(node, s.partial)
    for frame in reversed(s.stack):
        if isinstance(frame, ObjFrame) and frame.entry:
            for k, f in enumerate(frame.node.fields[frame.index :], start=frame.index):
                total += (2 if k else 0) + shortest(f.node, memo)
        elif isinstance(frame, ObjFrame):
            rest = frame.node.fields[frame.index :]
            here = None if omittable is None else partial(omittable, frame.path)
            total += _keys_shortest(rest, frame.wrote, memo, here) + 1
        else:
            missing = max(0, frame.node.min_length - frame.index)
            total += missing * (2 + _item_shortest(frame.node, memo)) + (0 if frame.others else 1)
    return total


def longest(
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
            n += utf8(value_text(f.key)) + 2 + longest(f.node, (*path, f.name), spec, strings, memo)
    elif isinstance(node, ListLayout):
        m = min(node.max_length, spec.max_length(path))
        item = max(
            (longest(node.item, (*path, i), spec, strings, memo) for i in range(m)), default=0
        )
        n = 2 + m * (item + 2)
    elif isinstance(node, UnionLayout):
        n = max(
            longest(b, (*path, branch_part(b.model)), spec, strings, memo) for b in node.branches
        )
    else:
        n = leaf_writer(node).longest(node, path, spec, strings)
    return max(n, 4) if node.nullable else n


def longest_rest_bytes(spec: CompiledSpec, s: WriterState, memo: dict[Path, int]) -> int:
    """UTF-8 bytes of the longest completion from ``s``, free strings at their minimum.

    A free string being written closes after the characters it still lacks, a number gets
    its widest remaining digits.
    """
    strings = tuple(str(v) for v in spec.strings.strings)
    total = 0
    p = s.pending
    if p is not None:
        node = p.node
        total += utf8(p.lead)
        whole = longest(node, p.path, spec, strings, memo)
        if s.partial is None:
            total += whole
        elif isinstance(node, LeafLayout):
            total += leaf_writer(node).longest_rest(node, p.path, spec, s.partial, whole)
        else:
            total += max(0, whole - len(s.partial))
    for frame in reversed(s.stack):
        if isinstance(frame, ObjFrame):
            wrote = frame.wrote or (frame.entry and frame.index > 0)
            for f in frame.node.fields[frame.index :]:
                key = utf8(value_text(f.key))
                total += (2 if wrote else 0) + key + 2
                total += longest(f.node, (*frame.path, f.name), spec, strings, memo)
                wrote = True
            total += 1
        else:
            m = min(frame.node.max_length, spec.max_length(frame.path))
            for j in range(frame.index, m):
                total += 2 + longest(frame.node.item, (*frame.path, j), spec, strings, memo)
            total += 1
    return total
