"""Whether the real masks let a text be written: a search over every tokenization of it.

An engine can write a text when some sequence of tokens, each allowed by the engine's mask
at its step, spells the text's bytes and leaves the record finished. The search is a depth
first walk from the record's start: at text position ``p`` it asks the engine's `Walker` for
the allowed tokens and follows each whose bytes are a prefix of the text's rest (longest
first, which is usually the canonical tokenization), stepping back on a dead end. It stops at
the first tokenization that reaches the end of the text where the record may end.

Two positions reached by different tokenizations are one when the engine's state is the
same: the walker's `Walker.key` names that state (FactorSpec: the planner's cursor; a grammar
library: nothing, its matcher's state being a function of the bytes consumed). A
(position, key) found to be a dead end is remembered, so the walk costs about one mask per
text position and state instead of one per tokenization. Where a key cannot be sound the
walker answers a fresh object and nothing is shared.

Each mask computed is one *node*; past ``budget`` nodes the search gives up and answers
``undecided``, which the benchmark counts apart: never as written, never as not.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from factorspec_sdk.bench.workers import short_text
from factorspec_sdk.tokens.vocab import TokenizerInfo

__all__ = [
    "DEFAULT_BUDGET",
    "Dead",
    "SearchResult",
    "TokenIndex",
    "Walker",
    "best_dead",
    "search",
]

DEFAULT_BUDGET = 50_000
"""Nodes (masks computed) one text may take before the search answers ``undecided``."""

TokenIds = npt.NDArray[np.int64]
State = TypeVar("State")


class Walker(Protocol[State]):
    """One engine's masks over one compiled schema, as the search walks them.

    A walker may keep a mutable matcher: `advance` moves it forward one token and `back`
    moves it back one, in strict stack order (the search never skips a `back`).
    """

    def root(self) -> State:
        """The state before the record's first token."""
        ...

    def allowed(self, state: State) -> TokenIds:
        """The token ids the mask allows at ``state`` (sorted; end tokens included)."""
        ...

    def advance(self, state: State, token: int) -> State:
        """The state after ``token``, which `allowed` allowed at ``state``."""
        ...

    def back(self) -> None:
        """Undo the last `advance` (a no-op for immutable states)."""
        ...

    def ended(self, state: State, allowed: TokenIds) -> bool:
        """Whether the record may end at ``state`` (its mask ``allowed``)."""
        ...

    def key(self, state: State) -> Hashable:
        """A key equal for two states exactly when everything they allow from here on is."""
        ...


class TokenIndex:
    """The vocabulary by byte string: which tokens spell the bytes at a text position."""

    def __init__(self, tok: TokenizerInfo) -> None:
        self.tok = tok
        by_bytes: dict[bytes, list[int]] = {}
        for i, raw in enumerate(tok.vocab):
            if raw and i not in tok.special_ids:
                by_bytes.setdefault(raw, []).append(i)
        self.by_bytes = {b: tuple(ids) for b, ids in by_bytes.items()}
        self.longest = max(map(len, self.by_bytes), default=0)

    def options(self, data: bytes) -> list[list[int]]:
        """Per byte position of ``data``: the tokens that spell the bytes there, longest first."""
        out: list[list[int]] = []
        for pos in range(len(data)):
            here: list[int] = []
            for size in range(min(self.longest, len(data) - pos), 0, -1):
                here += self.by_bytes.get(data[pos : pos + size], ())
            out.append(here)
        return out

    def text(self, token: int) -> str:
        """A token's text, for messages."""
        return self.tok.vocab[token].decode("utf-8", errors="replace")

    def closest(self, allowed: TokenIds, data: bytes, pos: int) -> tuple[int, list[int]]:
        """How far the allowed tokens agree with ``data`` from ``pos`` on, and which do most.

        Returns the most bytes any of ``allowed`` shares with ``data[pos:]`` (so the text
        first differs from what the masks allow at ``pos`` plus that), and ``allowed``
        ordered by the bytes each shares, most first (then by id).
        """
        vocab = self.tok.vocab
        first = data[pos : pos + 1]
        shared: dict[int, int] = {}
        for t in allowed.tolist():
            raw = vocab[t]
            if first and raw[:1] == first:
                n = 1
                while n < len(raw) and pos + n < len(data) and raw[n] == data[pos + n]:
                    n += 1
                shared[t] = n
        order = sorted(allowed.tolist(), key=lambda t: (-shared.get(t, 0), t))
        return max(shared.values(), default=0), order


@dataclass(slots=True)
class Dead:
    """Where a search that wrote nothing got furthest.

    Attributes:
        position: the byte position of the text (a token boundary) where the furthest dead
            end is: no token the mask allows there spells the text's next bytes.
        allowed: the tokens the mask allows there.
        ended: the text was written to its end, but the record could not end there.
    """

    position: int
    allowed: TokenIds
    ended: bool = False


@dataclass(slots=True)
class SearchResult:
    """What the search found for one text.

    Attributes:
        verdict: ``writable``, ``unwritable``, ``undecided`` (the node budget ran out) or
            ``error`` (the engine raised; ``error`` says what).
        tokens: the tokens that write the text (for ``writable``).
        nodes: masks computed.
        dead: the furthest dead end (for the others).
        error: the engine's exception, on one line.
    """

    verdict: str
    tokens: list[int] = field(default_factory=list)
    nodes: int = 0
    dead: Dead | None = None
    error: str = ""


@dataclass(slots=True)
class _Frame(Generic[State]):
    pos: int
    state: State
    key: Hashable
    todo: list[int]


class _OutOfBudget(Exception):
    pass


class _Search(Generic[State]):
    def __init__(self, walker: Walker[State], index: TokenIndex, data: bytes, budget: int):
        self.walker, self.index, self.data, self.budget = walker, index, data, budget
        self.options = index.options(data)
        self.vocab = index.tok.vocab
        self.failed: set[tuple[int, Hashable]] = set()
        self.nodes = 0
        self.dead: Dead | None = None

    def expand(self, pos: int, state: State) -> list[int] | None:
        """The tokens to try at ``pos``; None when the text is written and the record ends."""
        self.nodes += 1
        if self.nodes > self.budget:
            raise _OutOfBudget
        allowed = self.walker.allowed(state)
        if pos == len(self.data):
            if self.walker.ended(state, allowed):
                return None
            self._dead(pos, allowed, ended=True)
            return []
        here = np.asarray(self.options[pos], dtype=np.int64)
        todo = here[np.isin(here, allowed)].tolist() if len(here) else []
        if not todo:
            self._dead(pos, allowed)
        return todo

    def _dead(self, pos: int, allowed: TokenIds, *, ended: bool = False) -> None:
        if self.dead is None or self.dead.position < pos:
            self.dead = Dead(pos, allowed, ended)

    def run(self) -> SearchResult:
        root = self.walker.root()
        first = self.expand(0, root)
        if first is None:
            return SearchResult("writable", [], self.nodes)
        stack = [_Frame(0, root, self.walker.key(root), first)]
        path: list[int] = []
        while stack:
            top = stack[-1]
            if not top.todo:
                self.failed.add((top.pos, top.key))
                stack.pop()
                if path:
                    path.pop()
                    self.walker.back()
                continue
            token = top.todo.pop(0)
            pos = top.pos + len(self.vocab[token])
            state = self.walker.advance(top.state, token)
            path.append(token)
            key = self.walker.key(state)
            if (pos, key) in self.failed:
                path.pop()
                self.walker.back()
                continue
            todo = self.expand(pos, state)
            if todo is None:
                return SearchResult("writable", path, self.nodes)
            if not todo:
                self.failed.add((pos, key))
                path.pop()
                self.walker.back()
                continue
            stack.append(_Frame(pos, state, key, todo))
        return SearchResult("unwritable", [], self.nodes, self.dead)


def search(
    walker: Walker[State], index: TokenIndex, text: str, budget: int = DEFAULT_BUDGET
) -> SearchResult:
    """Whether ``walker``'s masks let ``text`` be written (see the module docstring).

    An exception of the engine ends the search with the verdict ``error``: a fault of the
    engine (a mask it cannot compute), reported, never taken for a verdict on the text.
    """
    s = _Search(walker, index, text.encode("utf-8"), budget)
    try:
        return s.run()
    except _OutOfBudget:
        return SearchResult("undecided", [], s.nodes - 1, s.dead)
    except Exception as exc:
        return SearchResult("error", [], s.nodes, s.dead, short_text(exc))


def best_dead(results: Sequence[SearchResult]) -> tuple[int, Dead] | None:
    """The furthest dead end over several texts' searches: (the text's index, where).

    Furthest by token boundary; of equals, the first text's.
    """
    found = [(i, r.dead) for i, r in enumerate(results) if r.dead is not None]
    if not found:
        return None
    return max(found, key=lambda item: (item[1].position, -item[0]))
