r"""Budget-feasible masks: only tokens after which the record can still finish within budget.

Exactness under a token budget means: every prefix the planner allows under ``max_tokens`` can
be completed to a valid record within ``max_tokens`` tokens *of this tokenizer, as the planner
writes them* (canonical tokenization of each segment). The planner's masks already guarantee
that a valid completion exists; `CompletionBound` adds how many tokens one costs.

The bound, for a cursor ``c`` of the planner:

- ``G(c)``, the *greedy completion*: the exact token count of one particular completion the
  planner allows, found by walking forward from ``c``. In each planned segment it takes the
  option of least rank: the option's tokens plus the characters of the shortest layout text
  after it (`Writer.shortest_rest`), so numbers end and lists close as soon as the relations
  let them, optional leaves are null and optional keys are left out. In a free string
  (`factorspec_sdk.tokens.free_budget`) it finishes an escape under way, pads to the minimum
  length (for a string whose ``len()`` a relation reads, to the least feasible length) with
  the longest tokens that do not pass it, then takes the closing-quote token that costs
  least. The
  planner's options are exactly the feasible ones (the oracle decides them), so the
  walk always ends in a valid record, and ``G(c)`` counts precisely the tokens it takes,
  relation-determined runs and token merges across value boundaries included (a closing
  token such as ``", "`` is followed by the rest of the forced text, as the planner plans it).
  The rank only steers the walk; any rank keeps the bound exact, a good one keeps it tight.
- ``U(c)``, the bound the masks use: inside a segment, the least over the segment's options of
  (tokens to that option's end + ``G`` after it); in a free string, ``G``. So
  ``shortest(c) <= U(c) <= G(c)``.

A token ``t`` is allowed at ``c`` with ``r`` tokens left iff ``1 + U(c after t) <= r``
(``G`` after a closing quote). This never allows a prefix that cannot finish: ``U`` is the
length of a real completion. It never strands decoding either: if ``U(c) <= r`` (checked for
the start cursor before the first token: `Planner.min_tokens`, `TokenBudgetError`), the token
that starts the completion achieving ``U(c)`` is allowed and leaves a cursor with
``U <= r - 1`` (``U <= G`` along that completion), so by induction some token is always
allowed until the record is finished.

How conservative: ``U`` is exact within a segment and greedy beyond it. It can exceed the
true shortest completion when a locally cheap choice forces a longer rest (a value with few
tokens whose relations then demand longer values later), or when a closing token with text
before its quote would save a padding token. On the bundled examples ``U`` at the start
equals the exhaustive-search shortest record wherever that search is feasible (the tests
check it), for the tiny test vocabulary and for SmolLM2's.

Cost: ``U`` at a choice point with ``k`` options walks ``k`` greedy completions (memoized per
planner; the walks plan segments and ask the oracle). That is paid only where the budget is
tight: every token has at least one byte, so no completion the bound walks takes more tokens
than the longest rest of the record in bytes (`Writer.longest_rest_bytes`: lists at their
bound, free strings at their minimum). A budget above that for the whole record
(`CompletionBound.ceiling`) skips the bound, and masks and certain drafts are exactly those
without a budget (the default ``max_tokens``, 2048, does so for the bundled examples); a
token whose segment plus longest rest fits what is left is allowed without a walk, so walks
start only near the end of the budget.

Grammar values (`factorspec_sdk.tokens.grammar`): llguidance does not say how many tokens
the shortest completion of a JSON Schema takes, so in a grammar segment ``G`` is the
segment's closing walk (`GrammarSegment.closing`) followed by ``G`` after the segment. The
walk takes llguidance's forced tokens where it has them; inside a string or a number it
writes the shortest completion that one of the segment's guides proposes and llguidance
accepts (`factorspec_sdk.writer.closing_guides`: the pattern's or format's automaton, a
length, a property name or enumerated text, a number's range), and between values it closes
what is open first (``}``, ``]``) and starts a value with the first of ``0``, ``""``, ``[]``,
``{}``, ``null``, ``true``, ``false`` that llguidance takes as a whole value there (else the
shortest shape the byte order finds: ``{`` and the required keys, ``[`` and the required
items, ``"`` and a guide's completion, the digits of a range). Every token
of it is one the masks allow, so it is a real completion and the invariant above holds; it
is not always the shortest one (a byte a token where the text is not forced, one value
where a union's other branch would be shorter), so ``U`` may exceed the true shortest record
there. A walk that does not finish (a guide that does not read a pattern as llguidance does)
counts as no completion: that token is left out of tight masks, never let in.

A token in a segment is allowed without a walk when the segment's texts and the closing
bound of each of its values (`closing_bound`: the most bytes the walk writes from any prefix
of the value), plus ``G`` after the segment (its exit is the same from every cursor in it),
fit in what is left; otherwise each allowed token is counted one by one. Walks are memoized
along their length. Every grammar value whose nesting is bounded has one number for a bound:
numbers with or without ranges, strings with lengths, patterns or formats, enums, objects,
arrays, unions and ``allOf`` that merge, ``$ref`` that do not recurse.

Values of unbounded nesting (``Any``, ``dict[str, Any]``, an untyped list, ``JsonValue``, a
recursive model): a prefix may open any number of arrays and objects, each of which needs a
byte to close, so no number bounds the walk from every prefix and such a spec has no
``ceiling`` (``_NEVER``: no budget constrains nothing). But the walk from a prefix is bounded
by what is open in it: ``base + per_level * depth`` bytes (`ClosingBound.at`), ``depth`` the
arrays and objects open in the value under way (`GrammarSegment.nesting`, kept token by
token). The walk finishes what the innermost container has under way (a string, a number, a
key and the shortest start of its value: one of ``0``, ``""``, ``[]``, ``{}``, ``null``,
``true``, ``false`` where llguidance takes it, else the value's shortest shape), then writes
each open container's rest (its missing properties or items, its closing bracket): ``base``
and ``per_level`` are the most of these over the schema's nodes
(`factorspec_sdk.writer.closing.closing_bound`). So each mask makes the roomy check against
its own cursor: one token opens at most `GrammarTables.most_opens` containers, so while the
bound at ``depth + most_opens``, the segment's other texts and values and the longest rest
after it fit in what is left, every token is allowed without a walk; a writer cursor before
such a value counts it from its start (`opening_bytes`: what the writer's longest rest holds
for a grammar value not yet begun). Nearer the end, tokens are counted by walks, as for any
grammar value, so the invariant above holds as it stands: a token is allowed only if a real
completion the masks allow fits, the walk's first token always is, and a budget below
``U(start)`` is refused before the first token. A free string no relation reads whose longest
rest fits is allowed every token without a count (a token of it only shortens that rest).

What has no bound at all gets no budget masks (``ceiling`` 0, so every budget "constrains
nothing"): its records are decoded as without a budget, and a record that runs out of
``max_tokens`` ends in `IncompleteGenerationError` (a 422 ``max_tokens_reached`` on the
server), as with llguidance or XGrammar alone. That is a string whose pattern Python's ``re``
cannot read (``\p{L}``, which llguidance takes: the walk has no automaton to complete such
a string by, so it may not finish, and no bound holds without one), a recursion with no
short way out (every branch of the value nests again, such as an array of at least one of
itself or an object: the walk, which prefers ``[`` to ``{``, could nest for ever), or a
pattern and format whose automata's product is too large to search. A pattern and a format
on one string, and ``allOf`` parts, are bounded as llguidance intersects them
(`factorspec_sdk.writer.closing`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

from factorspec_sdk.errors import GenerationError
from factorspec_sdk.relations.layout import grammar_values
from factorspec_sdk.tokens.free_budget import FreeStringBudget
from factorspec_sdk.tokens.grammar import GrammarSegment
from factorspec_sdk.tokens.plan import (
    Cursor,
    Finished,
    FreeCursor,
    GrammarCursor,
    Owed,
    TokenIds,
    TrieNode,
)
from factorspec_sdk.writer.closing import ClosingBound, closing_bound
from factorspec_sdk.writer.escapes import ESCAPE_TAIL

if TYPE_CHECKING:
    from factorspec_sdk.tokens.plan import Planner

__all__ = ["CompletionBound"]


_FEW = 64
"""A grammar segment's tokens under a tight budget are all counted one by one up to this many."""

_NEVER = 1 << 40
"""``G`` of a cursor from which the closing walk finds no completion within its bound; the
``ceiling`` of a spec with a value of unbounded nesting (no budget constrains nothing)."""

_NO_WALK: tuple[tuple[int, ...], int] = ((), -1)
"""The memo of such a cursor's walk."""


class CompletionBound:
    """Token counts of completions from the cursors of one `Planner`, and budget masks.

    The bound refers to its planner weakly: the planner owns the bound, and a cycle between
    them would keep the spec's Z3 contexts alive until a cyclic collection (the server's RSS
    grows by ~16 MB a request meanwhile).

    Attributes:
        enforced: whether budget masks apply (not for a spec with a grammar value whose
            closing walk has no bound: `factorspec_sdk.writer.closing.closing_bound`).
        nested: whether a grammar value of the spec nests without bound (``Any``, a
            recursive model): no budget is roomy for every cursor, so each mask checks the
            cursor's own bound.
        ceiling: more tokens than any completion the bound walks can take; a budget of at
            least this many tokens constrains nothing (0 when not ``enforced``; a number no
            budget reaches when ``nested``).
    """

    def __init__(self, planner: Planner) -> None:
        self._planner = weakref.ref(planner)
        values = grammar_values(planner.writer.spec.layout)
        bounds = [closing_bound(v) for v in values]
        self.enforced = all(b is not None for b in bounds)
        self.nested = self.enforced and any(b is not None and b.per_level for b in bounds)
        if not self.enforced:
            self.ceiling = 0
        elif self.nested:
            self.ceiling = _NEVER  # a prefix may nest as deep as it likes: no budget is roomy
            # for every cursor, so each mask bounds its own cursor (`_segment_roomy`)
        else:
            # a free string's escape under way may need `ESCAPE_TAIL` more tokens to finish
            self.ceiling = planner.writer.longest_bytes() + 1 + ESCAPE_TAIL
        self._segment_room: dict[GrammarSegment, int] = {}
        self._segment_bounds_of: dict[GrammarSegment, _SegmentBounds] = {}
        self._segment_exit: dict[GrammarSegment, int] = {}
        self._walks: dict[GrammarCursor, tuple[tuple[int, ...], int]] = {}
        self._token_bytes: dict[bytes, list[int]] | None = None
        self._greedy: dict[Cursor, int] = {}
        self._upper: dict[TrieNode, int] = {}
        self._roomy_cache: dict[TrieNode, int] = {}
        self._free = FreeStringBudget(self)

    @property
    def planner(self) -> Planner:
        """The planner whose cursors are measured."""
        planner = self._planner()
        if planner is None:  # the planner owns the bound: it cannot be gone while in use
            raise GenerationError("internal error: the budget bound outlived its planner")
        return planner

    # ------------------------------------------------------------------ public

    def min_tokens(self, cursor: Cursor) -> int:
        """``U(cursor)``: tokens of the shortest completion the masks guarantee from here.

        Raises:
            GenerationError: the spec has grammar values, so no bound exists (not ``enforced``).
        """
        if not self.enforced:
            raise GenerationError("a spec with grammar values has no token budget bound")
        found = self._upper_of(cursor) if isinstance(cursor, TrieNode) else self.greedy(cursor)
        if found >= _NEVER:
            raise GenerationError(
                "the token budget's closing walk found no completion of a grammar value within "
                "its bound (an internal error: please report it)"
            )
        return found

    def allowed(self, cursor: Cursor, budget: int) -> TokenIds:
        """The planner's allowed ids at ``cursor`` that leave a completion within ``budget``.

        ``budget`` counts the tokens still allowed, this one included.
        """
        ids = self.planner.allowed(cursor)
        if budget >= self.ceiling or not len(ids):
            return ids
        if isinstance(cursor, TrieNode):
            keep = [
                t
                for t in ids.tolist()
                if 1 + self._roomy(cursor.children[t]) <= budget
                or 1 + self._after(cursor, t) <= budget
            ]
            return np.asarray(keep, dtype=np.int64)
        if isinstance(cursor, FreeCursor):
            return self._free.allowed(cursor.free, ids, budget)
        if isinstance(cursor, GrammarCursor) and 1 + self._segment_roomy(cursor) > budget:
            return self._grammar_allowed(cursor, ids, budget)
        return ids

    @property
    def walked(self) -> int:
        """Cursors whose greedy completion has been counted so far (a cost measure)."""
        return len(self._greedy)

    def greedy(self, cursor: Cursor) -> int:
        """``G(cursor)``: tokens of the greedy completion from ``cursor`` (see the module)."""
        walked: list[tuple[Cursor, int]] = []
        cur = cursor
        while True:
            hit = self._greedy.get(cur)
            if hit is not None:
                total = hit
                break
            if isinstance(cur, Finished):
                total = 0
                break
            if isinstance(cur, FreeCursor):
                total = self._free.greedy(cur.free)
                self._greedy[cur] = total
                break
            if isinstance(cur, GrammarCursor):
                total = self._grammar_greedy(cur)
                break
            depth, nxt = self._greedy_step(cur)
            walked.append((cur, depth))
            cur = nxt
        for c, depth in reversed(walked):
            total += depth
            self._greedy[c] = total
        return total

    # ------------------------------------------------------------------ grammar segments

    def _grammar_greedy(self, cursor: GrammarCursor) -> int:
        """``G`` in a grammar segment: its closing walk, then ``G`` after the segment."""
        walk, i = self._walk(cursor)
        total = _NEVER if i < 0 else len(walk) - i + self._exit_greedy(cursor.segment)
        self._greedy[cursor] = total
        return total

    def _walk(self, cursor: GrammarCursor) -> tuple[tuple[int, ...], int]:
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
        found = segment.closing(tokens, self._rest_bytes_at(cursor, token=False) + 1)
        # no walk within the bound: no completion is counted from here (a token leading
        # here is left out of tight masks; see the module)
        hit = self._walks[cursor] = (tuple(found), 0) if found is not None else _NO_WALK
        return hit

    def _exit_greedy(self, segment: GrammarSegment) -> int:
        """``G`` after ``segment`` (the same from every cursor in it: its exit is fixed)."""
        hit = self._segment_exit.get(segment)
        if hit is None:
            planner = self.planner
            after = planner.resolve_state(segment.exit_state, "", critical=False, owe=segment.owe)
            hit = self._segment_exit[segment] = self.greedy(after)
        return hit

    def _grammar_allowed(self, cursor: GrammarCursor, ids: TokenIds, budget: int) -> TokenIds:
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
        after = planner.resolve_state(segment.exit_state, "", critical=False, owe=segment.owe)
        rest = self._rest_bytes_at(cursor, token=True)
        if 2 + rest + self._exit_greedy(segment) <= budget:
            if not step.accepting:
                return ids
            return np.union1d(step.ids, self.allowed(after, budget)).astype(np.int64)
        total = self.greedy(cursor)
        walk, i = self._walk(cursor)
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
            if 1 + self.greedy(planner.advance(cursor, t, critical=False)) <= budget
        ]
        keep = np.isin(ids, np.asarray(fits, dtype=np.int64), assume_unique=True)
        if i == len(walk):  # complete here (a number that could grow): the walk goes on after it
            keep |= np.isin(ids, self.allowed(after, budget), assume_unique=True)
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

    def _rest_bytes_at(self, cursor: GrammarCursor, *, token: bool) -> int:
        """Most bytes the closing walk writes in the segment from ``cursor``.

        With ``token``: from one token further, whatever the token. A segment of values of
        bounded nesting: its bound from the value under way (`GrammarSegment.value_index`)
        with ``token``, from its first value without (the walk's limit, asked once per
        walk). A value of unbounded nesting adds ``per_level`` bytes for each array or
        object open in it (`GrammarSegment.nesting`), and one token opens at most
        `GrammarTables.most_opens` more.
        """
        segment = cursor.segment
        table = self._segment_bounds(segment)
        if not table.nested:
            return table.sizes[segment.value_index(cursor.tokens) if token else 0]
        k, depth = segment.nesting(cursor.tokens)
        rest = table.sizes[k]
        if k < len(table.per_level):
            rest += table.per_level[k] * depth
            if token:
                rest += table.levels[k] * segment.most_opens
        return rest

    def _segment_roomy(self, cursor: GrammarCursor) -> int:
        """A bound on ``U`` after any token of ``cursor``'s segment, without a walk.

        The segment's texts and values as the closing walk writes them at most (from the
        cursor, for a value of unbounded nesting), the owed text, and the longest rest after
        the segment.
        """
        segment = cursor.segment
        outside = self._segment_room.get(segment)
        if outside is None:
            writer = self.planner.writer
            outside = len(segment.owe.encode("utf-8")) + writer.longest_rest_bytes(
                segment.exit_state
            )
            self._segment_room[segment] = outside
        table = self._segment_bounds(segment)
        if table.nested:
            return self._rest_bytes_at(cursor, token=True) + outside
        return table.sizes[0] + outside

    # ------------------------------------------------------------------ segments

    def _after(self, node: TrieNode, token: int) -> int:
        """Tokens to finish after ``token`` at ``node``: ``U`` inside the segment, else ``G``."""
        child = node.children[token]
        if child.terminal is None:
            return self._upper_of(child)
        return self.greedy(self.planner.advance(node, token, critical=False))

    def _roomy(self, node: TrieNode) -> int:
        """A cheap upper bound on ``U(node)``: segment tokens + the longest rest in bytes.

        Every token has at least one byte, so the greedy completion after a segment's end
        takes at most `Writer.longest_rest_bytes` tokens; a budget that covers this needs no
        walk. The least over the segment's ends below ``node`` (memoized).
        """
        hit = self._roomy_cache.get(node)
        if hit is not None:
            return hit
        best: int | None = None
        stack: list[tuple[TrieNode, int]] = [(node, 0)]
        while stack:
            n, depth = stack.pop()
            if n.terminal is not None:
                rest = self._rest_bytes(n)
                best = depth + rest if best is None else min(best, depth + rest)
                continue
            stack.extend((c, depth + 1) for c in n.children.values())
        assert best is not None
        self._roomy_cache[node] = best
        return best

    def _rest_bytes(self, leaf: TrieNode) -> int:
        term = leaf.terminal
        if isinstance(term, Finished):
            return 0
        writer = self.planner.writer
        if isinstance(term, FreeCursor):
            return writer.longest_rest_bytes(term.free.state)
        if isinstance(term, Owed):
            return len(term.text.encode("utf-8")) + writer.longest_rest_bytes(term.state)
        assert term is not None and not isinstance(term, GrammarCursor)
        state, skip = term
        return writer.longest_rest_bytes(state) - len(skip.encode("utf-8"))

    def _upper_of(self, node: TrieNode) -> int:
        """``U(node)``: the least, over the segment's options below ``node``, of their cost."""
        hit = self._upper.get(node)
        if hit is not None:
            return hit
        # post-order without recursion: certain runs can be hundreds of tokens deep
        stack: list[tuple[TrieNode, bool]] = [(node, False)]
        while stack:
            n, ready = stack.pop()
            if n in self._upper:
                continue
            inner = [c for c in n.children.values() if c.terminal is None and c not in self._upper]
            if not ready and inner:
                stack.append((n, True))
                stack.extend((c, False) for c in inner)
                continue
            self._upper[n] = min(1 + self._after(n, t) for t in n.children)
        return self._upper[node]

    def _greedy_step(self, node: TrieNode) -> tuple[int, Cursor]:
        """The greedy option of the segment at ``node``: its tokens and the cursor after it."""
        best: tuple[tuple[int, int], int, TrieNode, int] | None = None
        stack: list[tuple[TrieNode, int]] = [(node, 0)]
        while stack:
            n, depth = stack.pop()
            for t, child in n.children.items():
                if child.terminal is None:
                    stack.append((child, depth + 1))
                    continue
                rank = (depth + 1 + self._rest(child), depth + 1)
                if best is None or rank < best[0]:
                    best = (rank, depth + 1, n, t)
        if best is None:
            raise RuntimeError("a planned segment has no option")
        _, depth, parent, token = best
        return depth, self.planner.advance(parent, token, critical=False)

    def _rest(self, leaf: TrieNode) -> int:
        """Shortest layout text after a segment's end (relations ignored), for ranking."""
        term = leaf.terminal
        if isinstance(term, Finished):
            return 0
        if isinstance(term, FreeCursor):
            return self.planner.writer.shortest_rest(term.free.state)
        if isinstance(term, Owed):
            return len(term.text) + self.planner.writer.shortest_rest(term.state)
        assert term is not None and not isinstance(term, GrammarCursor)
        state, skip = term
        return self.planner.writer.shortest_rest(state) - len(skip)

    # ------------------------------------------------------------------ free strings

    def cheapest(self, cursor: TrieNode | FreeCursor) -> int:
        """The token that starts the completion `min_tokens` counts from ``cursor``."""
        if isinstance(cursor, TrieNode):
            ids: list[int] = cursor.ids.tolist()
            return min(ids, key=lambda t: (self._after(cursor, t), t))
        return self._free.cheapest(cursor.free)


class _SegmentBounds:
    """The closing bounds of a grammar segment's values, summed from each value on.

    Attributes:
        sizes: for each value ``k`` (and ``len(values)``), the texts from the one before
            value ``k`` and the values' ``base`` bounds from ``k`` on.
        per_level: each value's bytes per open array or object.
        levels: the most ``per_level`` from each value on.
        nested: some value nests without bound.
    """

    __slots__ = ("levels", "nested", "per_level", "sizes")

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
        self.nested = levels[0] > 0
