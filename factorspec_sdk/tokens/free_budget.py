r"""The token budget inside a free string: its greedy completion and tight-budget masks.

`factorspec_sdk.tokens.budget.CompletionBound` asks `FreeStringBudget` about a cursor inside
a free string: ``G`` there (the greedy completion's tokens, and its first token), and which
tokens leave a completion within a tight budget.

The greedy completion of a free string finishes an escape under way first, with the tokens
that add no character (`FreeTables.finishers`, those on the vocabulary's shortest way first,
each leaving a string that can close: at most `ESCAPE_TAIL` tokens); then it pads to the
least length the string may close at with the longest plain tokens that do not pass it, and
takes the closing-quote token that costs least; a string whose value a relation reads may
instead spell a feasible named text (in its JSON form, escapes and all), one read with
``startswith``/``endswith`` a text of constants. It never writes an escape of its own, so
the shortest completion, and the bound where it is exact, are those of strings without
escapes.

Under a tight budget, plain tokens and plain closers are counted per token length; escape
moves (`factorspec_sdk.tokens.free.EscapeMoves`) per move, by counts where no relation reads
the string's text (the escape the move leaves is finished as the greedy walk finishes it),
else each walked. Where a count ends in the greedy completion after the closing quote, the
mask asks only whether it fits (`CompletionBound.greedy_at_most`, which walks after the
quote only as far as it needs to tell; the answer is the exact count's). A string whose
closing facts depend on its whole text counts the tokens toward its named texts and the
greedy one. Every token of a string is allowed without a
count while its longest rest (`Writer.longest_rest_bytes`) plus `ESCAPE_TAIL` fits: a token
only shortens the rest, but may leave an escape to finish.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from factorspec_sdk.errors import GenerationError
from factorspec_sdk.tokens.budget_part import BudgetPart
from factorspec_sdk.tokens.plan import FreeCursor
from factorspec_sdk.tokens.vocab import TokenIds
from factorspec_sdk.writer.escapes import ESCAPE_TAIL, class_of, json_body

if TYPE_CHECKING:
    from factorspec_sdk.tokens.budget import CompletionBound
    from factorspec_sdk.writer.automaton import FreeString, WriterState

__all__ = ["FreeStringBudget"]

_FEW_MOVES = 64
"""Inside an escape under a tight budget, every move the masks allow is counted up to this
many; past it, the greedy one alone."""


class FreeStringBudget(BudgetPart):
    """The free-string part of one `CompletionBound` (which owns it and is referred to weakly).

    Args:
        bound: the bound whose ``G`` the completions after a string use.
    """

    def __init__(self, bound: CompletionBound) -> None:
        super().__init__(bound, "a free string's budget")
        self._close: dict[tuple[WriterState, str], tuple[int, int]] = {}
        self._lengths: dict[int, int] | None = None
        self._pad_table: list[int] = [0]

    def cheapest(self, free: FreeString) -> int:
        """The token that starts the greedy completion of ``free``."""
        return self._target(free)[1]

    def _by_length(self) -> dict[int, int]:
        """The first safe token (no quote, no escape) of each length in characters."""
        if self._lengths is None:
            tables = self.planner.free_tables()
            self._lengths = {}
            for tid, n in zip(tables.safe_ids.tolist(), tables.safe_chars.tolist(), strict=True):
                self._lengths.setdefault(n, tid)
        return self._lengths

    def _pad_step(self, missing: int) -> int:
        """Length of the padding token for ``missing`` characters: the longest that fits."""
        fits = [n for n in self._by_length() if 0 < n <= missing]
        if not fits:
            raise GenerationError(
                "the vocabulary has no one-character token to pad a string to its "
                "min_length, so a token budget cannot be guaranteed"
            )
        return max(fits)

    def _padding(self, missing: int) -> npt.NDArray[np.int64]:
        """Tokens the padding takes for 0..``missing`` characters (longest token first)."""
        table = self._pad_table
        while len(table) <= missing:
            m = len(table)
            table.append(1 + table[m - self._pad_step(m)])
        return np.asarray(table[: missing + 1], dtype=np.int64)

    def greedy(self, free: FreeString) -> int:
        """Pad to the shortest length it may close at (longest tokens first), then close.

        That length is the minimum, or for a string whose ``len()`` a relation reads, the
        least feasible length from here (`FreeString.shortest_close`). A string whose value
        a relation reads may instead spell a feasible named text, where that costs less.
        """
        return self._target(free)[0]

    def greedy_at_most(self, free: FreeString, limit: int) -> bool:
        """Whether `greedy` ``(free) <= limit``, walking after the string only as needed.

        A string no relation reads, no escape under way: its padding, then any closing
        token whose ``1 + G`` after it fits (`CompletionBound.greedy_at_most`), the greedy
        completion taking the least of them. Any other string: its exact count.
        """
        if free.escape or free.reads_text:
            return self.greedy(free) <= limit
        missing = free.shortest_close() - len(free.written)
        pad = int(self._padding(missing)[missing]) if missing > 0 else 0
        text = free.written + self._pad_text(missing)
        return self._close_at_most(free, limit - pad, text=text)

    def _target(self, free: FreeString) -> tuple[int, int]:
        """The greedy completion of a free string: its token count and first token.

        An escape under way is finished first (`_finished`); the rest never writes one.
        """
        if free.escape:
            done = self._finished(free)
            if done is None:
                raise RuntimeError(f"string at {free.state.pending!r} cannot finish its escape")
            count, first, after = done
            return count + self._target(after)[0], first
        if not free.reads_text:
            target = free.shortest_close()
            return self._padded(free, target - len(free.written))
        if free.has_affixes:
            return self._affix_target(free)
        best: tuple[int, int] | None = None
        n = len(free.written)
        k = free.next_other(n)
        while k is not None:  # the padded text must not be a banned named one
            text = free.written + self._pad_text(k - n)
            if not free.banned(text):
                best = self._padded(free, k - n)
                break
            k = free.next_other(k + 1)
        for named in free.named_ahead():
            spelled = self._spell(named[n:])
            if spelled is None:
                continue
            cost, close = self._closing(free, text=named)
            option = (len(spelled) + cost, spelled[0] if spelled else close)
            if best is None or option[0] < best[0]:
                best = option
        if best is None:
            raise RuntimeError(f"string at {free.state.pending!r} has no feasible completion")
        return best

    def _affix_target(self, free: FreeString) -> tuple[int, int]:
        """The greedy completion of a string with affixes (`factorspec_sdk.writer.affixes`).

        The cheapest of: a text of constants that closes (spelled), padding to the first
        length that closes, and padding followed by a constant suffix (spelled).
        """
        w, n = free.written, len(free.written)
        options: list[tuple[int, int]] = []
        for t in free.constant_texts():
            spelled = self._spell(t[n:])
            if spelled is not None and free.closes(t):
                cost, close = self._closing(free, text=t)
                options.append((len(spelled) + cost, spelled[0] if spelled else close))
        for e, heads in free.suffix_heads():
            spelled = self._spell(e)
            if spelled is None:
                continue
            for k in heads:
                text = w + self._pad_text(k - n) + e
                if free.closes(text):
                    cost, close = self._closing(free, text=text)
                    pad = int(self._padding(k - n)[k - n])
                    first = self._by_length()[self._pad_step(k - n)] if k > n else None
                    if first is None:
                        first = spelled[0] if spelled else close
                    options.append((pad + len(spelled) + cost, first))
                    break
        if not options:
            raise RuntimeError(f"string at {free.state.pending!r} has no feasible completion")
        return min(options)

    def _padded(self, free: FreeString, missing: int) -> tuple[int, int]:
        """Pad ``missing`` characters, then close: its token count and first token."""
        cost, close = self._closing(free, text=free.written + self._pad_text(missing))
        if missing > 0:
            return int(self._padding(missing)[missing]) + cost, self._by_length()[
                self._pad_step(missing)
            ]
        return cost, close

    def _pad_text(self, missing: int) -> str:
        """The characters the padding of ``missing`` characters writes."""
        vocab = self.planner.tok.vocab
        out: list[str] = []
        while missing > 0:
            step = self._pad_step(missing)
            out.append(vocab[self._by_length()[step]].decode("utf-8"))
            missing -= step
        return "".join(out)

    def _spell(self, rest: str) -> list[int] | None:
        """Tokens that write the characters ``rest``, longest first; None if none can.

        Escaped where JSON needs it (`factorspec_sdk.writer.escapes.json_body`).
        """
        return self.planner.free_tables().spell(json_body(rest))

    def _finished(self, free: FreeString) -> tuple[int, int, FreeString] | None:
        """The escape under way finished: its tokens, the first one, and the string after it.

        Tokens that add no character, those on the vocabulary's shortest way to finish first
        (`FreeTables.finishers`), each leaving a string that can still close (so the masks
        allow it); at most `ESCAPE_TAIL` of them. None if no way finishes it.
        """
        if not free.escape:
            return 0, -1, free
        tables = self.planner.free_tables()
        writer = self.planner.writer
        for tid in tables.finishers[class_of(free.escape)]:
            text = tables.texts[tid]
            assert text is not None  # a finisher is whole UTF-8
            grown, rest = writer.read_free(free, text)
            assert rest is None  # a finisher does not close the string
            if not grown.can_finish(grown.written, grown.escape):
                continue
            sub = self._finished(grown)
            if sub is not None:
                return 1 + sub[0], tid, sub[2]
        return None

    def _token_greedy(self, free: FreeString, token: int) -> int:
        """``G`` after ``token`` (one the masks allow) in ``free``."""
        planner = self.planner
        text = planner.tok.vocab[token].decode("utf-8")
        grown, rest = planner.writer.read_free(free, text)
        if rest is None:
            return self.bound.greedy(FreeCursor(grown))
        after = planner.writer.close_free(grown)
        return self.bound.greedy(planner.after_close(after, rest, critical=False))

    def _closing(
        self, free: FreeString, *, text: str | None = None, length: int | None = None
    ) -> tuple[int, int]:
        """Least ``1 + G(after)`` over closing tokens with nothing before the quote, and one.

        The string closes as ``text``, or at ``length`` characters (padded to it first).
        """
        after = self.planner.writer.close_free(free, text=text, length=length)
        key = (after, free.close_suffix)
        hit = self._close.get(key)
        if hit is not None:
            return hit
        best: tuple[int, int] | None = None
        cost: dict[str, int] = {}
        for tid, rest in self._closers(free):
            if rest not in cost:
                nxt = self.planner.resolve_state(after, rest, critical=False)
                cost[rest] = 1 + self.bound.greedy(nxt)
            if best is None or (cost[rest], tid) < best:
                best = (cost[rest], tid)
        assert best is not None  # `_closers` has one at least
        self._close[key] = best
        return best

    def _closers(self, free: FreeString) -> list[tuple[int, str]]:
        """The closing tokens a string may take, each as (its id, its text after the quote).

        Those with nothing before the quote, whose text after it the closing suffix starts
        with (`_closing` counts them, `_close_at_most` tries them).

        Raises:
            GenerationError: the vocabulary has none.
        """
        tables = self.planner.free_tables()
        found = [
            (tid, rest)
            for tid, before, rest in zip(
                tables.quote_ids.tolist(), tables.quote_before, tables.quote_after, strict=True
            )
            if not before and free.close_suffix.startswith(rest)
        ]
        if not found:
            raise GenerationError(
                "the vocabulary has no token that closes a string with its quote, so a token "
                "budget cannot be guaranteed"
            )
        return found

    def _close_at_most(
        self, free: FreeString, limit: int, *, text: str | None = None, length: int | None = None
    ) -> bool:
        """Whether `_closing` ``(free, text=text, length=length)[0] <= limit``, lazily.

        The least over the closing tokens of ``1 + G`` after each fits iff one of them does:
        each is tried with `CompletionBound.greedy_at_most`, which walks only as far as it
        needs.
        """
        after = self.planner.writer.close_free(free, text=text, length=length)
        hit = self._close.get((after, free.close_suffix))
        if hit is not None:
            return hit[0] <= limit
        rests = {rest for _, rest in self._closers(free)}
        return any(
            self.bound.greedy_at_most(
                self.planner.resolve_state(after, rest, critical=False), limit - 1
            )
            for rest in sorted(rests)
        )

    def _kept_allowed(self, free: FreeString, ids: TokenIds, budget: int) -> TokenIds:
        """A tight budget in a string whose closing facts depend on its whole text.

        A string later strings compare with (`StringTexts.keep`: a later one may copy it),
        or one read with ``startswith``/``endswith``: no count per token length holds, so
        the tokens allowed are those counted one by one, the one that starts the greedy
        completion and those toward a named text or a text of constants, plus the closing
        tokens that fit (each among ``ids``, the tokens the masks allow). Inside an escape,
        every token the masks allow is counted where they are few, else the greedy one alone.
        """
        assert free.reads_text
        if 1 + ESCAPE_TAIL + self.planner.writer.longest_rest_bytes(free.state) <= budget:
            return ids  # every token fits: the rest has at most that many bytes (a length
            # variable bounds such a string, so its rest shrinks as it grows), and an escape
            # under way at most `ESCAPE_TAIL` tokens more
        tables = self.planner.free_tables()
        allowed = set(ids.tolist())
        if free.escape:
            tried = allowed if len(allowed) <= _FEW_MOVES else {self.cheapest(free)}
        else:
            toward = tables.toward(free.toward(), len(free.written)).tolist()
            closers = tables.quote_ids.tolist()
            tried = {*toward, *closers, self.cheapest(free)} & allowed
        fits = [t for t in tried if 1 + self._token_greedy(free, t) <= budget]
        return np.asarray(sorted(fits), dtype=np.int64)

    def _roomy(self, free: FreeString, budget: int) -> bool:
        """Whether every token of a free string fits, so the mask needs no count.

        The rest has at most `Writer.longest_rest_bytes` bytes, which a token of the string
        only shortens, plus the tokens that finish an escape the token leaves under way (at
        most `ESCAPE_TAIL`). For a string no relation reads the value of (`_kept_allowed`
        says the same of one whose value a relation reads, where it holds).
        """
        if free.reads_text:
            return False
        return 1 + ESCAPE_TAIL + self.planner.writer.longest_rest_bytes(free.state) <= budget

    def allowed(self, free: FreeString, ids: TokenIds, budget: int) -> TokenIds:
        """Within a free string: tokens that leave room to finish, pad and close; closers that fit.

        Plain tokens and plain closers by counts per token length (toward a named text, each
        counted alone); escape moves (`factorspec_sdk.tokens.free.EscapeMoves`) by counts
        per move where no relation reads the string's text, else each counted alone.
        """
        if self._roomy(free, budget):
            return ids
        if free.whole_text_counts:
            return self._kept_allowed(free, ids, budget)
        fits = [self._escape_fits(free, ids, budget)]
        if not free.escape:
            fits.append(self._plain_fits(free, ids, budget))
        return ids[np.isin(ids, np.concatenate(fits))]

    def _plain_fits(self, free: FreeString, ids: TokenIds, budget: int) -> TokenIds:
        """The plain tokens and plain closers that fit (between characters)."""
        tables = self.planner.free_tables()
        n = len(free.written)
        if free.lengths is None:
            missing = max(0, free.min_length - n)
            pads = self._padding(missing)[np.clip(missing - tables.safe_chars, 0, missing)]
            # a token fits iff 1 + its padding + the closing count fit: the most padding
            # that still fits, from the least up (the closing count is asked lazily)
            most = -1
            for pad in sorted(set(pads.tolist())):
                if not self._close_at_most(free, budget - 1 - pad, length=max(n, free.min_length)):
                    break
                most = pad
            need = np.where(pads <= most, 0, budget + 1)
        else:  # where it may close next depends on the token's length: one count per length
            need = np.full(len(tables.safe_chars), budget + 1, dtype=np.int64)
            for c in self._by_length():
                if self._pad_close_at_most(free, n + c, budget - 1):
                    need[tables.safe_chars == c] = 0
        if free.reads_text:  # toward a named text: each such token counted alone
            toward = tables.toward(free.toward(), n)
            for tid in toward[np.isin(toward, ids)].tolist():
                text = self.planner.tok.vocab[tid].decode("utf-8")
                grown = FreeCursor(self.planner.writer.extend_free(free, text))
                need[np.searchsorted(tables.safe_ids, tid)] = 1 + self.bound.greedy(grown)
        closers: list[int] = []
        rests = self.planner.close_rests(free, critical=True)  # the mask's own (cached)
        fits: dict[tuple[str, str], bool] = {}
        for tid, before, rest in zip(
            tables.quote_ids.tolist(), tables.quote_before, tables.quote_after, strict=True
        ):
            text = free.written + before
            if not free.closes(text) or rest not in rests:
                continue
            if (text, rest) not in fits:
                after = self.planner.writer.close_free(free, text=text)
                nxt = self.planner.after_close(after, rest, critical=False)
                fits[text, rest] = self.bound.greedy_at_most(nxt, budget - 1)
            if fits[text, rest]:
                closers.append(tid)
        return np.concatenate([tables.safe_ids[need <= budget], np.asarray(closers, np.int64)])

    def _pad_close_at_most(self, free: FreeString, chars: int, limit: int) -> bool:
        """Whether padding ``chars`` characters and closing, as ``G`` does, fits ``limit``.

        `_close_at_most` walks after the quote only as far as it needs to tell. For a string
        whose text no relation reads (its closing facts are its length's); False where it
        cannot close at ``chars`` characters or more.
        """
        if free.lengths is not None:
            target = free.lengths.next_length(chars)
        else:
            target = max(chars, free.min_length)
            if free.max_length is not None and target > free.max_length:
                return False
        if target is None:
            return False
        gap = target - chars
        return self._close_at_most(free, limit - int(self._padding(gap)[gap]), length=target)

    def _escape_fits(self, free: FreeString, ids: TokenIds, budget: int) -> TokenIds:
        """The escape moves from ``free``'s escape under way that fit.

        Where no relation reads the string's text, by counts: a move that leaves the string
        open costs the tokens that finish the escape it leaves (`FreeTables.finish`, the
        way `_finished` takes), then padding and closing; a closer, what comes after the
        string. Otherwise each move the masks allow is counted alone.
        """
        tables = self.planner.free_tables()
        moves = tables.moves(free.escape)
        allowed = np.isin(moves.ids, ids)
        if free.reads_text:
            keep = [
                t for t in moves.ids[allowed].tolist() if 1 + self._token_greedy(free, t) <= budget
            ]
            return np.asarray(keep, dtype=np.int64)
        n = free.chars
        fits: dict[tuple[int, int, str], bool] = {}
        ok: npt.NDArray[np.bool_] = np.zeros(len(moves.ids), dtype=np.bool_)
        for i in np.flatnonzero(allowed).tolist():
            end, chars, after = int(moves.ends[i]), n + int(moves.adds[i]), moves.after[i]
            key = (end, chars, after)
            if key not in fits:
                if end >= 0:
                    left = budget - 1 - int(tables.finish[end])
                    fits[key] = self._pad_close_at_most(free, chars, left)
                else:
                    state = self.planner.writer.close_free(free, length=chars)
                    nxt = self.planner.resolve_state(state, after, critical=False)
                    fits[key] = self.bound.greedy_at_most(nxt, budget - 1)
            ok[i] = fits[key]
        return moves.ids[ok]
