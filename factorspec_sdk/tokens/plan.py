"""From the character-level writer to the engine's vocabulary.

At every writer state the planner builds a small token trie: the forced text followed by each
option's text is tokenized canonically (jointly, so BPE merges across the boundary stay
natural) and the token sequences are merged into a trie. A trie node whose subtree holds one
option allows exactly one token: that token is *certain* and is drafted without a guess.
Inside a forced span only the canonical token is allowed, so certain tokens are always
accepted by verification. Free strings (leaves no relation reads) use vocabulary-wide masks
precomputed once per tokenizer as numpy arrays, escapes included (`factorspec_sdk.tokens.free`).
A token that closes a free string may go on past its quote: into the forced text after it, and,
for a string no relation reads, on into the options after that text (`Planner.close_rests`:
``",`` before an optional key or another list item, ``"]`` at a list's end), as far as the
text runs along the tokens of their trie. A model writes such a token where JSON's layout goes
on; masking it would leave only a bare ``"``, which small models take as a cue to keep writing.

Written by hand rather than with llguidance/XGrammar: those libraries compile a grammar over
the whole record, but here the set of allowed values changes with every oracle answer, and we
need the option trie (which values remain, and the certain tokens after each) that neither
exposes. XGrammar remains the reference for the syntax-only baseline in ``bench``.

Cursors are immutable; a sequence of cursors, one per generated position, is all the state a
request needs for rollback.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from factorspec_sdk.errors import GenerationError
from factorspec_sdk.tokens.free import FreeMasks, FreeTables, free_tables
from factorspec_sdk.tokens.grammar import GrammarCursor, GrammarSegment, grammar_tables
from factorspec_sdk.tokens.vocab import TokenIds, TokenizerInfo
from factorspec_sdk.writer.automaton import FreeString, GrammarValue, Option, Writer, WriterState

if TYPE_CHECKING:
    from factorspec_sdk.graph.compiled import CompiledSpec
    from factorspec_sdk.tokens.budget import CompletionBound

__all__ = [
    "Cursor",
    "Finished",
    "FreeCursor",
    "FreeTables",
    "GrammarCursor",
    "Planner",
    "TokenIds",
    "TrieNode",
    "planner_for",
]


@dataclass(eq=False, slots=True)
class TrieNode:
    """A position inside a planned segment.

    Attributes:
        ids: allowed token ids here (sorted); one id means the token is certain.
        children: the node after each allowed token.
        terminal: for a node that ends a planned segment, where decoding goes on: the writer
            state after it with the text already emitted past that state, an `Owed` state, a
            free string, a grammar segment, or the finished record (``None`` on inner nodes).
    """

    ids: TokenIds = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    children: dict[int, TrieNode] = field(default_factory=dict)
    terminal: tuple[WriterState, str] | Owed | FreeCursor | GrammarCursor | Finished | None = None


@dataclass(frozen=True, slots=True)
class Owed:
    """A segment's end whose last text is left to the segment after it.

    Attributes:
        state: the writer state after the segment's text (at the next value).
        text: the end of that text not emitted by the segment (a space).
    """

    state: WriterState
    text: str


@dataclass(frozen=True, slots=True)
class FreeCursor:
    """Inside a free JSON string."""

    free: FreeString


@dataclass(frozen=True, slots=True)
class Finished:
    """The record is complete."""

    state: WriterState


Cursor = TrieNode | FreeCursor | GrammarCursor | Finished


@dataclass(slots=True)
class PlannerStats:
    """Where the planner's time went.

    Attributes:
        segments: segments planned (each one oracle consultation plus tokenization).
        critical_segments: the part of ``segments`` the decoding thread planned itself
            (because no worker had planned them ahead during a forward).
        plan_seconds: total time spent planning, on any thread.
        critical_seconds: planning time the decoding thread waited for.
        grammar_seconds: of ``plan_seconds``, compiling llguidance grammars (segments of
            grammar values; the first of a tokenizer builds its token tables).
        critical_grammar_seconds: of ``critical_seconds``, compiling grammars.
    """

    segments: int = 0
    critical_segments: int = 0
    plan_seconds: float = 0.0
    critical_seconds: float = 0.0
    grammar_seconds: float = 0.0
    critical_grammar_seconds: float = 0.0


class Planner:
    """Token-level view of one request's writer: masks, certain tokens and transitions."""

    def __init__(self, writer: Writer, tokenizer: TokenizerInfo) -> None:
        self.writer = writer
        self.tok = tokenizer
        self._plans: dict[tuple[WriterState, str, str], Cursor] = {}
        self._lock = threading.Lock()
        self.stats = PlannerStats()
        self._free: FreeMasks | None = None
        self._bound: CompletionBound | None = None
        self._ends: dict[Finished, TrieNode] = {}
        self._rests: dict[WriterState, frozenset[str]] = {}
        self._forced_rests: dict[str, frozenset[str]] = {}

    # ------------------------------------------------------------------ entry points

    def start(self) -> Cursor:
        """The cursor before the record's first token."""
        return self.resolve_state(self.writer.start(), "", critical=True)

    def allowed(self, cursor: Cursor, budget: int | None = None) -> TokenIds:
        """Allowed token ids at ``cursor`` (empty when the record is finished).

        With ``budget`` (the tokens left, this one included), only tokens after which the
        record can still be finished within the budget (`factorspec_sdk.tokens.budget`).
        """
        if budget is not None:
            return self.bound.allowed(cursor, budget)
        if isinstance(cursor, TrieNode):
            return cursor.ids
        if isinstance(cursor, FreeCursor):
            rests = self.close_rests(cursor.free, critical=True)
            return self.free_masks().allowed(cursor.free, rests)
        if isinstance(cursor, GrammarCursor):
            return self._grammar_allowed(cursor)
        return np.zeros(0, dtype=np.int64)

    def certain(self, cursor: Cursor, budget: int | None = None) -> int | None:
        """The certain token at ``cursor``, if exactly one token is allowed (within ``budget``)."""
        if isinstance(cursor, TrieNode) and len(cursor.ids) == 1:
            return int(cursor.ids[0])
        if isinstance(cursor, GrammarCursor):
            if budget is None or budget >= self.bound.ceiling:
                ids = self._grammar_allowed(cursor)
            else:
                ids = self.bound.allowed(cursor, budget)
            return int(ids[0]) if len(ids) == 1 else None
        if budget is None or budget >= self.bound.ceiling or isinstance(cursor, Finished):
            return None
        ids = self.bound.allowed(cursor, budget)
        return int(ids[0]) if len(ids) == 1 else None

    def certain_run(self, cursor: Cursor, budget: int) -> list[int]:
        """The certain tokens from ``cursor`` on, one after another, within ``budget`` tokens.

        Whatever the model says, decoding takes them next: the masks allow nothing else.
        """
        run: list[int] = []
        while not isinstance(cursor, Finished) and len(run) < budget:
            token = self.certain(cursor, budget - len(run))
            if token is None:
                break
            run.append(token)
            cursor = self.advance(cursor, token, critical=False)
        return run

    @property
    def bound(self) -> CompletionBound:
        """Token counts of completions, for budget masks (built on first use)."""
        if self._bound is None:
            from factorspec_sdk.tokens.budget import CompletionBound

            self._bound = CompletionBound(self)
        return self._bound

    def min_tokens(self, cursor: Cursor) -> int:
        """Tokens of the shortest completion from ``cursor`` that budget masks guarantee.

        An upper bound on the true shortest completion (exact on the bundled examples); see
        `factorspec_sdk.tokens.budget`. ``min_tokens(start())`` is the least ``max_tokens``
        a record of this spec can be decoded with.
        """
        return self.bound.min_tokens(cursor)

    def advance(self, cursor: Cursor, token: int, *, critical: bool = True) -> Cursor:
        """The cursor after ``token`` (which must be allowed at ``cursor``)."""
        if isinstance(cursor, TrieNode):
            child = cursor.children.get(token)
            if child is None:
                raise ValueError(f"token {token} is not allowed here")
            return self._resolve_node(child, critical=critical)
        if isinstance(cursor, FreeCursor):
            return self._free_advance(cursor.free, token, critical=critical)
        if isinstance(cursor, GrammarCursor):
            return self._grammar_advance(cursor, token, critical=critical)
        raise ValueError("the record is finished; no token can follow")

    def advance_is_planned(self, cursor: Cursor, token: int) -> bool:
        """Whether `advance` from ``cursor`` by ``token`` plans no segment (asks no oracle).

        True where the cursor after ``token`` is inside the same segment, or its segment is
        planned already; False where advancing would plan one first. (A grammar segment's
        end is taken as planned: its exit is planned with the segment's first step.)
        """
        if isinstance(cursor, TrieNode):
            child = cursor.children.get(token)
            term = None if child is None else child.terminal
            if term is None or isinstance(term, FreeCursor | GrammarCursor | Finished):
                return True
            if isinstance(term, Owed):
                return (term.state, "", term.text) in self._plans
            state, skip = term
            return (state, skip, "") in self._plans
        if isinstance(cursor, FreeCursor):
            text = self.tok.vocab[token].decode("utf-8")
            grown, rest = self.writer.read_free(cursor.free, text)
            return rest is None or (self.writer.close_free(grown), rest, "") in self._plans
        return True

    def prefetch(self, cursor: Cursor, depth: int = 1, stop: threading.Event | None = None) -> None:
        """Plan the segments reachable from ``cursor`` through up to ``depth`` choices.

        Called from a worker thread while the engine runs a forward pass. Once ``stop`` is
        set (the forward is back: the decoding thread now needs one of them, not all), no
        further segment is started; the one being planned finishes.

        Inside a free string the choice ahead is where the string closes: what follows it
        is planned (`prefetch_close`).
        """
        if depth >= 1 and isinstance(cursor, FreeCursor):
            self.prefetch_close(cursor.free, stop)
        if depth < 0 or not isinstance(cursor, TrieNode):
            return
        stack = [cursor]
        while stack:
            node = stack.pop()
            for child in node.children.values():
                if stop is not None and stop.is_set():
                    return
                if child.terminal is not None:
                    nxt = self._resolve_node(child, critical=False)
                    if depth > 1:
                        self.prefetch(nxt, depth - 1, stop)
                else:
                    stack.append(child)

    def prefetch_close(self, free: FreeString, stop: threading.Event | None = None) -> None:
        """Plan the segment after ``free``'s closing quote, for each text a closer leaves.

        Only for a string no relation reads: the state after its quote holds nothing of
        what it says (`Writer.close_free`), so the segment planned now is the one its
        closing meets, whenever and however it closes. A string whose length or text a
        relation reads closes into facts not known until then, and is left alone. Each
        closing token leaves a different part of the text after the quote (``"``, ``",``,
        ``", "``, ...); the segments share their oracle queries, so the first one costs the
        queries and the others their tries.
        """
        if free.lengths is not None or free.texts is not None:
            return
        after = self.writer.close_free(free)
        for rest in sorted(self.close_rests(free, critical=False), key=len):
            if stop is not None and stop.is_set():
                return
            self.after_close(after, rest, critical=False)

    # ------------------------------------------------------------------ planning

    def _resolve_node(self, node: TrieNode, *, critical: bool) -> Cursor:
        term = node.terminal
        if term is None:
            return node
        if isinstance(term, FreeCursor | GrammarCursor | Finished):
            return term
        if isinstance(term, Owed):
            return self.resolve_state(term.state, "", critical=critical, owe=term.text)
        state, skip = term
        return self.resolve_state(state, skip, critical=critical)

    def resolve_state(
        self, state: WriterState, skip: str, *, critical: bool, owe: str = ""
    ) -> Cursor:
        """The cursor at writer ``state`` when ``skip`` text past it is already emitted.

        ``owe``: text before ``state`` not yet emitted (the space a trie option leaves to the
        grammar value after it; `Owed`).
        """
        key = (state, skip, owe)
        hit = self._plans.get(key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        with self._lock:
            hit = self._plans.get(key)
            if hit is None:
                t1 = time.perf_counter()
                grammar = self.stats.grammar_seconds
                hit = self._plan(state, skip, owe)
                self._plans[key] = hit
                self.stats.segments += 1
                if critical:
                    self.stats.critical_segments += 1
                    self.stats.critical_grammar_seconds += self.stats.grammar_seconds - grammar
                self.stats.plan_seconds += time.perf_counter() - t1
        if critical:
            self.stats.critical_seconds += time.perf_counter() - t0
        return hit

    def _plan(self, state: WriterState, skip: str, owe: str = "") -> Cursor:
        forced, at = self.writer.forced(state)
        if not forced.startswith(skip):
            raise RuntimeError(f"emitted text {skip!r} does not match forced text {forced!r}")
        forced = owe + forced[len(skip) :]
        if at.done:
            if not forced:
                return Finished(at)
            root = TrieNode()
            self._insert(root, self.tok.encode(forced), TrieNode(terminal=Finished(at)))
            self._seal(root)
            return root
        choice = self.writer.choices(at)
        if isinstance(choice, GrammarValue):
            return self._segment(forced, choice)
        if isinstance(choice, FreeString):
            if not forced:
                return FreeCursor(choice)
            root = TrieNode()
            self._insert(root, self.tok.encode(forced), TrieNode(terminal=FreeCursor(choice)))
            self._seal(root)
            return root
        return self._trie(forced, choice)

    def _trie(self, forced: str, options: list[Option]) -> TrieNode:
        root = TrieNode()
        for o in options:
            text = o.text
            term: tuple[WriterState, str] | Owed = (o.state, "")
            if len(text) > 1 and text.endswith(" "):
                # the space before the next value goes to its segment, tokenized with what
                # follows it (`` -`` of ``-3``, `` "`` of a string, `` true``): a space
                # tokenized alone would split a token the model would write merged
                text, term = text[:-1], Owed(o.state, " ")
            self._insert(root, self.tok.encode(forced + text), TrieNode(terminal=term))
        self._seal(root)
        return root

    def _insert(self, root: TrieNode, ids: list[int], leaf: TrieNode) -> None:
        if not ids:
            raise RuntimeError("an option tokenized to no tokens")
        node = root
        for t in ids[:-1]:
            nxt = node.children.get(t)
            if nxt is None:
                nxt = TrieNode()
                node.children[t] = nxt
            elif nxt.terminal is not None:
                raise RuntimeError("option texts are not prefix-free")
            node = nxt
        if ids[-1] in node.children:
            raise RuntimeError("option texts are not prefix-free")
        node.children[ids[-1]] = leaf

    def _seal(self, root: TrieNode) -> None:
        stack = [root]
        while stack:
            node = stack.pop()
            node.ids = np.asarray(sorted(node.children), dtype=np.int64)
            stack.extend(node.children.values())

    # ------------------------------------------------------------------ grammar values

    def _segment(self, prefix: str, value: GrammarValue) -> GrammarCursor:
        """The segment of ``value`` and the grammar values after it, forced text between."""
        values, texts = [value], [prefix]
        while True:
            text, at = self.writer.forced(values[-1].after)
            texts.append(text)
            nxt = None if at.done else self.writer.choices(at)
            if not isinstance(nxt, GrammarValue):
                break
            values.append(nxt)
        owe = ""
        if isinstance(nxt, list) and texts[-1].endswith(" "):
            # the space before the options goes to their trie: `` true`` is one token
            texts[-1], owe = texts[-1][:-1], " "
        t0 = time.perf_counter()
        segment = GrammarSegment(grammar_tables(self.tok), values, texts, at, owe)
        self.stats.grammar_seconds += time.perf_counter() - t0
        return GrammarCursor(segment)

    def segment_exit(self, cursor: GrammarCursor, *, critical: bool = True) -> Cursor:
        """The cursor after ``cursor`` 's grammar segment, where decoding goes on once it ends.

        Where the segment accepts at ``cursor`` (its values complete), a token of this
        cursor is a token at ``cursor`` too: the segment ends there (`exit_after`).
        """
        return self.exit_after(cursor.segment, stopped=cursor.step().stopped, critical=critical)

    def exit_after(
        self, segment: GrammarSegment, *, stopped: bool, critical: bool = True
    ) -> Cursor:
        """The cursor after ``segment`` where it is complete.

        ``stopped``: nothing can follow inside the segment there. Where the record ends
        after the segment with no text left to write (a root number: its last digit may
        be followed by another), the record ends as any record does, with a token that
        leads to `Finished`: here an end-of-sequence token the model picks (`_record_end`),
        which a value that is complete and stopped does not need.
        """
        after = self.resolve_state(segment.exit_state, "", critical=critical, owe=segment.owe)
        if stopped or not isinstance(after, Finished):
            return after
        return self._record_end(after, segment.where)

    def _record_end(self, end: Finished, where: str) -> TrieNode:
        """The trie of the tokenizer's end-of-sequence tokens, each leading to ``end``.

        Raises:
            GenerationError: the tokenizer has no end-of-sequence token to end the record.
        """
        with self._lock:
            hit = self._ends.get(end)
            if hit is None:
                if not self.tok.eos_ids:
                    raise GenerationError(
                        f"{where}: the record ends after a value that could go on (a number), "
                        "and the tokenizer has no end-of-sequence token to end it; give the "
                        "tokenizer one (`TokenizerInfo.eos_ids`)"
                    )
                hit = TrieNode()
                for eos in self.tok.eos_ids:
                    self._insert(hit, [eos], TrieNode(terminal=end))
                self._seal(hit)
                self._ends[end] = hit
        return hit

    def _grammar_allowed(self, cursor: GrammarCursor) -> TokenIds:
        step = cursor.step()
        if not step.accepting:
            return step.ids
        # complete but able to grow (no forced text after it): the choice after it, too
        after = self.allowed(self.segment_exit(cursor, critical=True))
        overlap = np.intersect1d(step.ids, after)
        if len(overlap):
            raise RuntimeError(
                f"{cursor.segment.where}: tokens {overlap[:5].tolist()} both continue the value "
                "and start what follows it"
            )
        return np.union1d(step.ids, after).astype(np.int64)

    def _grammar_advance(self, cursor: GrammarCursor, token: int, *, critical: bool) -> Cursor:
        step = cursor.step()
        if step.has(token):
            nxt = GrammarCursor(cursor.segment, (*cursor.tokens, token))
            if nxt.step().stopped:
                return self.segment_exit(nxt, critical=critical)
            return nxt
        if step.accepting:
            after = self.segment_exit(cursor, critical=critical)
            return self.advance(after, token, critical=critical)
        raise ValueError(f"token {token} is not allowed here")

    # ------------------------------------------------------------------ free strings

    def free_tables(self) -> FreeTables:
        """The vocabulary tables for free strings (built once per tokenizer)."""
        return self.free_masks().tables

    def free_masks(self) -> FreeMasks:
        """This request's free-string masks (`factorspec_sdk.tokens.free`)."""
        if self._free is None:
            self._free = FreeMasks(free_tables(self.tok))
        return self._free

    def _free_advance(self, free: FreeString, token: int, *, critical: bool) -> Cursor:
        grown, rest = self.writer.read_free(free, self.tok.vocab[token].decode("utf-8"))
        if rest is None:
            return FreeCursor(grown)
        return self.after_close(self.writer.close_free(grown), rest, critical=critical)

    def close_rests(self, free: FreeString, *, critical: bool) -> frozenset[str]:
        """The texts a token that closes ``free`` may have after its quote.

        Of the texts the vocabulary's plain closers have: always those the layout text
        forced after the string starts with (``close_suffix``). Past it, only for a string
        no relation reads (its closing facts do not depend on its text, so the state after
        its quote is one), each text that runs along the tokens of the trie of the options
        there (`after_close`). Finding those plans the segments after the quote, once per
        string state: ``critical`` where the decoding thread waits for them (a mask).
        """
        forced = self._forced_rests.get(free.close_suffix)
        if forced is None:  # asked at every mask, cache hits too: once per suffix
            after = self.free_tables().after_texts
            forced = frozenset(a for a in after if free.close_suffix.startswith(a))
            self._forced_rests[free.close_suffix] = forced
        if not self.reads_nothing(free):
            return forced
        hit = self._rests.get(free.state)
        if hit is None:
            state = self.writer.close_free(free)
            past = self.free_tables().after_texts - forced  # forced text: nothing to plan
            hit = forced | {
                a for a in past if self._rest_cursor(state, a, critical=critical) is not None
            }
            self._rests[free.state] = hit
        return hit

    @staticmethod
    def reads_nothing(free: FreeString) -> bool:
        """Whether no relation reads ``free``: the state after its quote is one, whatever it says.

        There a closer's text may run past the forced suffix into the options
        (`close_rests`), and what follows the quote can be planned before it is written.
        """
        return free.texts is None and free.lengths is None and not free.dispatch

    def after_close(self, after: WriterState, rest: str, *, critical: bool) -> Cursor:
        """The cursor after a closing quote at writer state ``after``, ``rest`` written past it.

        Raises:
            ValueError: ``rest`` does not go on from ``after`` (not among `close_rests`).
        """
        cursor = self._rest_cursor(after, rest, critical=critical)
        if cursor is None:
            raise ValueError(f"{rest!r} cannot follow the closing quote here")
        return cursor

    def _rest_cursor(
        self, state: WriterState, rest: str, *, critical: bool = False
    ) -> Cursor | None:
        """The cursor after ``rest`` written from ``state``, or None where it cannot go on.

        Within the forced text, as `resolve_state` takes it; past it, token by token along
        the trie of the options (each step a token whose text ``rest`` goes on with; the
        first path found, tried in token order, so that masks and moves agree).
        """
        forced, _ = self.writer.forced(state)
        if forced.startswith(rest):
            return self.resolve_state(state, rest, critical=critical)
        if not rest.startswith(forced):
            return None
        start = self.resolve_state(state, forced, critical=critical)
        return self._walk(start, rest[len(forced) :], critical=critical)

    def _walk(self, cursor: Cursor, text: str, *, critical: bool) -> Cursor | None:
        if not text:
            return cursor
        if not isinstance(cursor, TrieNode):
            return None
        for token in cursor.ids.tolist():
            piece = self.tok.vocab[token].decode("utf-8", errors="replace")
            if piece and text.startswith(piece):
                nxt = self._resolve_node(cursor.children[token], critical=critical)
                found = self._walk(nxt, text[len(piece) :], critical=critical)
                if found is not None:
                    return found
        return None


def planner_for(spec: CompiledSpec, tokenizer: TokenizerInfo) -> Planner:
    """The planning objects of one request of ``spec`` on ``tokenizer``, built in one place.

    A `Planner` over a `Writer` over a fresh oracle of the spec (`CompiledSpec.new_oracle`,
    one per request: an oracle is not thread-safe); the planner builds what else it needs
    (the vocabulary tables of free strings, grammar values' tables, the token budget's
    bound) on first use. Every caller that decodes a record starts here, as XGrammar's
    ``GrammarMatcher`` is made from its ``CompiledGrammar``: the backends, the server's
    engine thread and record threads, the benchmarks.
    """
    return Planner(Writer(spec), tokenizer)
