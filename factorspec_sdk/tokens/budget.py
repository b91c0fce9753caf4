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

A mask, and the check before the first token, ask only whether ``U`` (``G`` after a segment's
end) fits what is left, not what it is (`CompletionBound.fits`,
`CompletionBound.greedy_at_most`): the walk takes the greedy option of each segment as ``G``
does, and stops as soon as its tokens so far plus the longest rest in bytes after the option
it takes fit (before it plans the segment after that option: the same bound as above, from
a cursor further on), or as soon as its tokens so far exceed what is left; only where neither
settles it does it go on to the record's end and compare the exact count. A closing quote's
count is asked the same way, closing token by closing token (``G`` there is the least of
them). So every answer is the exact comparison, and masks and refusals are those of the exact
``U`` above; only the walks are shorter. A budget a little below the ceiling (the user-models
suite's expense report: ``max_tokens=1024`` under a ceiling of 1,083) asks the walk a few
segments deep instead of to the end of the record, past no leaf whose values the oracle must
enumerate. `min_tokens` still counts ``U`` in full (a refusal names it).

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
``ceiling`` (``NEVER``: no budget constrains nothing). But the walk from a prefix is bounded
by what is open in it: ``base + per_level * depth`` bytes (`ClosingBound.at`; ``inner``,
what is under way inside a container, for ``base`` once one is open), ``depth`` the arrays
and objects open in the value under way (`GrammarSegment.nesting`, kept token by token).
The walk finishes what the innermost container has under way (a string, a number, a key and
the shortest start of its value: one of ``0``, ``""``, ``[]``, ``{}``, ``null``, ``true``,
``false`` where llguidance takes it, else the value's shortest shape), then writes
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
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from factorspec_sdk.errors import GenerationError
from factorspec_sdk.relations.layout import grammar_values
from factorspec_sdk.tokens.free_budget import FreeStringBudget
from factorspec_sdk.tokens.grammar_budget import NEVER, GrammarSegmentBudget
from factorspec_sdk.tokens.plan import (
    Cursor,
    Finished,
    FreeCursor,
    GrammarCursor,
    Owed,
    TokenIds,
    TrieNode,
)
from factorspec_sdk.writer.closing import closing_bound
from factorspec_sdk.writer.escapes import ESCAPE_TAIL

if TYPE_CHECKING:
    from factorspec_sdk.tokens.plan import Planner

__all__ = ["CompletionBound"]


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
            self.ceiling = NEVER  # a prefix may nest as deep as it likes: no budget is roomy
            # for every cursor, so each mask bounds its own cursor (`GrammarSegmentBudget.roomy`)
        else:
            # a free string's escape under way may need `ESCAPE_TAIL` more tokens to finish
            self.ceiling = planner.writer.longest_bytes() + 1 + ESCAPE_TAIL
        self._greedy: dict[Cursor, int] = {}
        self._greedy_below: dict[Cursor, int] = {}  # G(c) <= this (a partial walk's proof)
        self._greedy_above: dict[Cursor, int] = {}  # G(c) > this (a partial walk's proof)
        self._upper: dict[TrieNode, int] = {}
        self._roomy_cache: dict[TrieNode, int] = {}
        self._free = FreeStringBudget(self)
        self.grammar = GrammarSegmentBudget(self)
        """The grammar-segment part: closing walks, segment bounds, tight masks."""

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
        if found >= NEVER:
            raise GenerationError(
                "the token budget's closing walk found no completion of a grammar value within "
                "its bound (an internal error: please report it)"
            )
        return found

    def fits(self, cursor: Cursor, limit: int) -> bool:
        """Whether ``U(cursor) <= limit``: `min_tokens` compared, walking only as far as needed.

        The same answer as ``min_tokens(cursor) <= limit``, settled by partial walks
        (`greedy_at_most`): the check before the first token (`Planner.min_tokens` of the
        start against ``max_tokens``) needs no walk to the end of the record.

        Raises:
            GenerationError: the spec has grammar values, so no bound exists (not ``enforced``).
        """
        if not self.enforced:
            raise GenerationError("a spec with grammar values has no token budget bound")
        if isinstance(cursor, TrieNode):
            return self._upper_at_most(cursor, limit)
        return self.greedy_at_most(cursor, limit)

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
                or self._after_at_most(cursor, t, budget - 1)
            ]
            return np.asarray(keep, dtype=np.int64)
        if isinstance(cursor, FreeCursor):
            return self._free.allowed(cursor.free, ids, budget)
        if isinstance(cursor, GrammarCursor) and self.room(cursor, budget) <= 0:
            return self.grammar.allowed(cursor, ids, budget)
        return ids

    def room(self, cursor: GrammarCursor, budget: int) -> int:
        """Tokens from ``cursor`` whose masks the roomy check leaves the segment's own.

        ``budget`` counts the tokens still allowed. It is ``budget`` less the bound after any
        token of the segment (`GrammarSegmentBudget.roomy`), or ``budget`` where no budget
        mask applies (not below the ``ceiling``). At 0 or less the masks at ``cursor`` are
        already the tight ones (`allowed`: the closing walk's tokens, and those counted to
        fit). Read at ``cursor``'s depth: a deeper prefix bounds more, so its masks may
        narrow sooner.
        """
        if budget >= self.ceiling:
            return budget
        return budget - self.grammar.roomy(cursor)

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
                total = self.grammar.greedy(cur)
                self._greedy[cur] = total
                break
            depth, nxt = self._greedy_step(cur)
            walked.append((cur, depth))
            cur = nxt
        for c, depth in reversed(walked):
            total += depth
            self._greedy[c] = total
        return total

    def greedy_at_most(self, cursor: Cursor, limit: int) -> bool:
        """Whether ``G(cursor) <= limit``, walking the greedy completion only as far as needed.

        The walk takes the greedy option of each segment as `greedy` does, and stops as
        soon as the tokens so far plus the longest rest in bytes after the option it takes
        (`_rest_bytes`, an upper bound on ``G`` there: every token has at least one byte)
        fit in ``limit``, before planning the segment after it; or as soon as the tokens so
        far pass ``limit``. Where neither settles it, it walks on to the end and compares
        the exact count. So the answer is exactly ``greedy(cursor) <= limit``. What a walk
        proves is remembered per cursor along it (an upper or a lower bound on ``G``).
        """
        walked: list[tuple[Cursor, int]] = []
        acc, cur = 0, cursor
        while True:
            exact = self._greedy.get(cur)
            below = self._greedy_below.get(cur)
            above = self._greedy_above.get(cur)
            if exact is not None:
                ok = acc + exact <= limit
                break
            if below is not None and acc + below <= limit:
                ok = True
                break
            if (above is not None and acc + above >= limit) or acc > limit:
                ok = False
                break
            if isinstance(cur, Finished):
                ok = acc <= limit
                break
            if isinstance(cur, FreeCursor):
                ok = self._free.greedy_at_most(cur.free, limit - acc)
                break
            if isinstance(cur, GrammarCursor):
                ok = acc + self.greedy(cur) <= limit
                break
            depth, parent, token, leaf = self._greedy_leaf(cur)
            if acc + depth + self._rest_bytes(leaf) <= limit:
                ok = True
                break
            walked.append((cur, acc))
            acc += depth
            cur = self.planner.advance(parent, token, critical=False)
        walked.append((cur, acc))
        for c, at in walked:  # along the greedy path, G(cursor) = at + G(c)
            if ok:
                self._greedy_below[c] = min(limit - at, self._greedy_below.get(c, limit - at))
            else:
                self._greedy_above[c] = max(limit - at, self._greedy_above.get(c, limit - at))
        return ok

    # ------------------------------------------------------------------ segments

    def _after_at_most(self, node: TrieNode, token: int, limit: int) -> bool:
        """Whether `_after` ``(node, token) <= limit``, walking only as far as needed."""
        child = node.children[token]
        if child.terminal is None:
            return self._upper_at_most(child, limit)
        return self.greedy_at_most(self.planner.advance(node, token, critical=False), limit)

    def _upper_at_most(self, node: TrieNode, limit: int) -> bool:
        """Whether ``U(node) <= limit``: some option below ``node`` whose cost fits.

        ``U(node)`` is the least over the options below ``node`` of (tokens to the option's
        end + ``G`` after it), so it fits iff one of them does; they are tried in the order
        of their bound in bytes (`_roomy`'s), each with `greedy_at_most`.
        """
        hit = self._upper.get(node)
        if hit is not None:
            return hit <= limit
        if self._roomy(node) <= limit:
            return True
        ends = [
            (depth + self._rest_bytes(child), depth, parent, t)
            for depth, parent, t, child in _option_ends(node)
        ]
        ends.sort(key=lambda e: e[:2])
        for _, depth, parent, token in ends:
            if depth <= limit and self.greedy_at_most(
                self.planner.advance(parent, token, critical=False), limit - depth
            ):
                return True
        return False

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
        depth, parent, token, _ = self._greedy_leaf(node)
        return depth, self.planner.advance(parent, token, critical=False)

    def _greedy_leaf(self, node: TrieNode) -> tuple[int, TrieNode, int, TrieNode]:
        """The greedy option below ``node``: its tokens, its last token (at ``parent``), its end.

        Nothing is planned: the segment after it is planned by advancing ``parent`` by the
        token.
        """
        best: tuple[tuple[int, int], int, TrieNode, int] | None = None
        for depth, parent, t, child in _option_ends(node):
            rank = (depth + self._rest(child), depth)
            if best is None or rank < best[0]:
                best = (rank, depth, parent, t)
        if best is None:
            raise RuntimeError("a planned segment has no option")
        _, depth, parent, token = best
        return depth, parent, token, parent.children[token]

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

    def cheapest(self, cursor: TrieNode | FreeCursor | GrammarCursor) -> int:
        """The token that starts the completion `min_tokens` counts from ``cursor``.

        In a grammar segment, the next token of its closing walk; where the segment accepts
        (the walk is done), the cheapest token after it (`Planner.segment_exit`).

        Raises:
            GenerationError: the closing walk found no completion from ``cursor``.
        """
        if isinstance(cursor, GrammarCursor):
            walk, i = self.grammar.walk(cursor)
            if i < 0:
                raise GenerationError(
                    f"{cursor.segment.where}: the closing walk found no completion (an "
                    "internal error: please report it)"
                )
            if i < len(walk):
                return walk[i]
            after = self.planner.segment_exit(cursor)
            if isinstance(after, Finished):
                raise GenerationError(
                    f"{cursor.segment.where}: the segment is complete and the record ends "
                    "after it: no token is next"
                )
            return self.cheapest(after)
        if isinstance(cursor, TrieNode):
            ids: list[int] = cursor.ids.tolist()
            return min(ids, key=lambda t: (self._after(cursor, t), t))
        return self._free.cheapest(cursor.free)


def _option_ends(node: TrieNode) -> Iterator[tuple[int, TrieNode, int, TrieNode]]:
    """Each option's end below ``node``: its tokens, its last token (at ``parent``), its end.

    Depth first, as the options' trie holds them (the callers rank them).
    """
    stack: list[tuple[TrieNode, int]] = [(node, 0)]
    while stack:
        n, depth = stack.pop()
        for t, child in n.children.items():
            if child.terminal is None:
                stack.append((child, depth + 1))
            else:
                yield depth + 1, n, t, child
