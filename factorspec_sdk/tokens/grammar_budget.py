"""The token budget inside a grammar segment: its closing walks, bounds and tight masks.

`factorspec_sdk.tokens.budget.CompletionBound` asks `GrammarSegmentBudget` about a cursor
inside a grammar segment: ``G`` there (the segment's closing walk, memoized along its length,
then ``G`` after the segment), the walk's next token, a bound on ``U`` after any token of
the segment without a walk (the closing bounds of its values), and which tokens leave a
completion within a tight budget. The module docstring of
`factorspec_sdk.tokens.budget` says why the walk is a real completion and how the bounds
hold for values of unbounded nesting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from factorspec_sdk.errors import GenerationError
from factorspec_sdk.tokens.budget_part import BudgetPart
from factorspec_sdk.tokens.grammar import GrammarSegment
from factorspec_sdk.tokens.plan import GrammarCursor, TokenIds
from factorspec_sdk.writer.closing import ClosingBound, closing_bound

if TYPE_CHECKING:
    from factorspec_sdk.tokens.budget import CompletionBound

__all__ = ["NEVER", "GrammarSegmentBudget"]


_FEW = 64
"""A grammar segment's tokens under a tight budget are all counted one by one up to this many."""

NEVER = 1 << 40
"""``G`` of a cursor from which the closing walk finds no completion within its bound; the
``ceiling`` of a spec with a value of unbounded nesting (no budget constrains nothing)."""

_NO_WALK: tuple[tuple[int, ...], int] = ((), -1)
"""The memo of such a cursor's walk."""


class GrammarSegmentBudget(BudgetPart):
    """The grammar-segment part of one `CompletionBound` (which owns it and is referred to weakly).

    Args:
        bound: the bound whose ``G`` the completions after a segment use.
    """

    def __init__(self, bound: CompletionBound) -> None:
        super().__init__(bound, "a grammar segment's budget")
        self._segment_room: dict[GrammarSegment, int] = {}
        self._segment_bounds_of: dict[GrammarSegment, _SegmentBounds] = {}
        self._segment_exit: dict[tuple[GrammarSegment, bool], int] = {}
        self._walks: dict[GrammarCursor, tuple[tuple[int, ...], int]] = {}
        self._token_bytes: dict[bytes, list[int]] | None = None

    def greedy(self, cursor: GrammarCursor) -> int:
        """``G`` in a grammar segment: its closing walk, then ``G`` after the segment."""
        walk, i = self.walk(cursor)
        return NEVER if i < 0 else len(walk) - i + self._walk_exit(cursor, walk, i)

    def walk(self, cursor: GrammarCursor) -> tuple[tuple[int, ...], int]:
        """The closing walk from ``cursor``: ``walk[i:]`` of the ``(walk, i)`` returned.

        Memoized per cursor. A cursor one token along a memoized cursor's walk takes the rest
        of that walk (each step of a walk depends on the matcher's state alone, so the walk
        after its first token is the rest of it: ``G`` drops by one, the invariant the masks
        rest on), so following a walk token by token walks nothing again.
        """
        hit = self._walks.get(cursor)
        if hit is not None:
            return hit
        segment = cursor.segment
        tokens = cursor.tokens
        if tokens:
            parent = self._walks.get(GrammarCursor(segment, tokens[:-1]))
            if parent is not None:
                walk, i = parent
                if 0 <= i < len(walk) and walk[i] == tokens[-1]:
                    hit = self._walks[cursor] = (walk, i + 1)
                    return hit
        found = segment.closing(tokens, self.rest_bytes_at(cursor, token=False) + 1)
        # no walk within the bound: no completion is counted from here (a token leading
        # here is left out of tight masks; see the module)
        hit = self._walks[cursor] = (tuple(found), 0) if found is not None else _NO_WALK
        return hit

    def _exit_greedy(self, segment: GrammarSegment, *, stopped: bool = False) -> int:
        """``G`` after ``segment`` where it is complete (`Planner.exit_after`).

        The same from every cursor of the segment where it is complete and could go on
        (``stopped`` false, every cursor the masks meet: a stopped one is left at once):
        the record's end token counts where the record ends after the segment.
        """
        key = (segment, stopped)
        hit = self._segment_exit.get(key)
        if hit is None:
            after = self.planner.exit_after(segment, stopped=stopped, critical=False)
            hit = self._segment_exit[key] = self.bound.greedy(after)
        return hit

    def _walk_exit(self, cursor: GrammarCursor, walk: tuple[int, ...], i: int) -> int:
        """``G`` after the segment where the closing walk ``walk[i:]`` from ``cursor`` ends.

        Where the walk's last token leaves a value that cannot go on and the record ends
        after the segment, no end token is needed (`Planner.exit_after`).
        """
        segment = cursor.segment
        open_exit = self._exit_greedy(segment)
        if i == len(walk) or open_exit == self._exit_greedy(segment, stopped=True):
            return open_exit
        end = GrammarCursor(segment, (*cursor.tokens, *walk[i:]))
        return self._exit_greedy(segment, stopped=end.step().stopped)

    def allowed(self, cursor: GrammarCursor, ids: TokenIds, budget: int) -> TokenIds:
        """A tight budget in a grammar segment: the tokens counted to fit, some by a rule.

        A token that stays in the segment leaves at most the segment's closing bound from the
        value under way (`GrammarSegment.value_index`: the values before it are complete)
        plus ``G`` after the segment (its exit is fixed), so while that fits every such token
        is allowed without a walk; a token that leaves a complete value is counted at the
        exit.

        Nearer the end, tokens are counted one by one (``1 + G`` after each): every token when
        there are few, else the tokens along the closing walk (a prefix of its bytes: the
        walk's first token, a merged ``"]``). Inside a string of a value of a segment whose
        strings are all plain (`ClosingGuides.plain`: no pattern, format, key or enumerated
        text; `GrammarSegment.in_string`), where the walk pads with ``]`` to the string's
        ``minLength`` and closes it, a token of ``k`` plain characters (no quote, backslash or
        control character) leaves ``G`` less ``min(k, padding)``: the string closes the same
        way after it. Other tokens (a quote with text after it, an escape) are left out while
        the budget is this tight: a conservative mask, never an empty one (the walk's first
        token fits).
        """
        planner = self.planner
        segment = cursor.segment
        step = cursor.step()
        rest = self.rest_bytes_at(cursor, token=True)
        if 2 + rest + self._exit_greedy(segment) <= budget:
            if not step.accepting:
                return ids
            after = planner.segment_exit(cursor, critical=False)
            return np.union1d(step.ids, self.bound.allowed(after, budget)).astype(np.int64)
        total = self.bound.greedy(cursor)
        walk, i = self.walk(cursor)
        vocab = planner.tok.vocab
        path = b"".join(vocab[t] for t in walk[max(i, 0) :])
        if len(ids) <= _FEW:
            candidates: list[int] = ids.tolist()
        else:
            by_bytes = self._by_bytes()
            prefixes = {t for k in range(1, len(path) + 1) for t in by_bytes.get(path[:k], ())}
            on_path = np.asarray(sorted(prefixes), dtype=np.int64)
            candidates = np.intersect1d(ids, on_path, assume_unique=True).tolist()
        fits = [
            t
            for t in candidates
            if 1 + self.bound.greedy(planner.advance(cursor, t, critical=False)) <= budget
        ]
        keep = np.isin(ids, np.asarray(fits, dtype=np.int64), assume_unique=True)
        if i == len(walk):  # complete here (a number that could grow): the walk goes on after it
            after = planner.segment_exit(cursor, critical=False)
            keep |= np.isin(ids, self.bound.allowed(after, budget), assume_unique=True)
        quote = path.find(b'"')
        lengths_only = segment.guides.plain  # no pattern, key or enumerated text
        if len(ids) > _FEW and lengths_only and quote >= 0 and path[:quote] == b"]" * quote:
            if segment.in_string(cursor.tokens):
                tables = planner.free_tables()
                need = 1 + total - np.minimum(tables.safe_chars, quote)
                plain = np.zeros(len(vocab), dtype=np.bool_)
                plain[tables.safe_ids[need <= budget]] = True
                keep |= plain[ids]
        return ids[keep]

    def _by_bytes(self) -> dict[bytes, list[int]]:
        """The vocabulary's token ids by their bytes (special tokens left out)."""
        if self._token_bytes is None:
            tok = self.planner.tok
            table: dict[bytes, list[int]] = {}
            for i, raw in enumerate(tok.vocab):
                if raw and i not in tok.special_ids:
                    table.setdefault(raw, []).append(i)
            self._token_bytes = table
        return self._token_bytes

    def _segment_bounds(self, segment: GrammarSegment) -> _SegmentBounds:
        """The closing bounds of ``segment``'s values, summed from each value on."""
        hit = self._segment_bounds_of.get(segment)
        if hit is None:
            bounds: list[ClosingBound] = []
            for v in segment.values:
                bound = closing_bound(v.node)
                if bound is None:  # unreachable: not `enforced`
                    raise GenerationError(f"{segment.where}: a grammar value has no budget bound")
                bounds.append(bound)
            hit = self._segment_bounds_of[segment] = _SegmentBounds(segment, bounds)
        return hit

    def rest_bytes_at(self, cursor: GrammarCursor, *, token: bool) -> int:
        """Most bytes the closing walk writes in the segment from ``cursor``.

        With ``token``: from one token further, whatever the token. A segment of values of
        bounded nesting: its bound from the value under way (`GrammarSegment.value_index`)
        with ``token``, from its first value without (the walk's limit, asked once per
        walk). A value of unbounded nesting adds ``per_level`` bytes for each array or
        object open in it (`GrammarSegment.nesting`), and one token opens at most
        `GrammarTables.most_opens` more. Once a container is open, what is under way in it
        takes the value's ``inner`` rather than its ``base``, and a container a token opens
        inside it at most the value's ``opened`` (`ClosingBound`).
        """
        segment = cursor.segment
        table = self._segment_bounds(segment)
        if not table.nested:
            return table.sizes[segment.value_index(cursor.tokens) if token else 0]
        k, depth = segment.nesting(cursor.tokens)
        rest = table.sizes[k]
        if k < len(table.per_level):
            if depth:  # inside a container: its value's start is behind it
                rest += table.inner[k] + table.per_level[k] * depth
            if token:
                opens = table.opened[k] if depth else table.per_level[k]
                rest += max(opens, table.levels[k + 1]) * segment.most_opens
        return rest

    def roomy(self, cursor: GrammarCursor) -> int:
        """A bound on ``U`` after any token of ``cursor``'s segment, without a walk.

        The segment's texts and values as the closing walk writes them at most (from the
        cursor, for a value of unbounded nesting), the owed text, the longest rest after
        the segment, and the record's end token where the record ends after a value that
        could go on (`Planner.exit_after`).
        """
        segment = cursor.segment
        outside = self._segment_room.get(segment)
        if outside is None:
            writer = self.planner.writer
            end_token = self._exit_greedy(segment) - self._exit_greedy(segment, stopped=True)
            outside = (
                len(segment.owe.encode("utf-8"))
                + writer.longest_rest_bytes(segment.exit_state)
                + end_token
            )
            self._segment_room[segment] = outside
        table = self._segment_bounds(segment)
        if table.nested:
            return self.rest_bytes_at(cursor, token=True) + outside
        return table.sizes[0] + outside


class _SegmentBounds:
    """The closing bounds of a grammar segment's values, summed from each value on.

    Attributes:
        sizes: for each value ``k`` (and ``len(values)``), the texts from the one before
            value ``k`` and the values' ``base`` bounds from ``k`` on.
        per_level: each value's bytes per open array or object.
        levels: the most ``per_level`` from each value on.
        inner: each value's ``inner`` less its ``base`` (what a prefix with a container open
            in it saves: `ClosingBound.inner`).
        opened: each value's ``opened``: per container one token opens inside it.
        nested: some value nests without bound.
    """

    __slots__ = ("inner", "levels", "nested", "opened", "per_level", "sizes")

    def __init__(self, segment: GrammarSegment, bounds: list[ClosingBound]) -> None:
        texts = [len(t.encode("utf-8")) for t in segment.texts]
        sizes = [texts[-1]]
        levels = [0]
        for text, bound in zip(reversed(texts[:-1]), reversed(bounds), strict=True):
            sizes.append(sizes[-1] + bound.base + text)
            levels.append(max(levels[-1], bound.per_level))
        sizes.reverse()
        levels.reverse()
        self.sizes = sizes
        self.levels = levels
        self.per_level = [b.per_level for b in bounds]
        self.inner = [b.inner - b.base for b in bounds]
        self.opened = [b.opened for b in bounds]
        self.nested = levels[0] > 0
