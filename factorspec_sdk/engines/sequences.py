"""The sequence table an engine keeps: each sequence's tokens, how many have run, its KV cache.

An `Engine` hands out sequence ids and keeps, for each, the tokens it holds (the prompt, the
tokens appended, those not yet run), how many of them have run through the model, and a
handle on the KV states of those. `SequenceTable` is that bookkeeping, written once for every
engine that keeps its own sequences: the embedded engine (a `transformers.DynamicCache` per
sequence, `factorspec_sdk.engines.embedded`) and the scripted engine (no cache at all,
`factorspec_sdk.engines.scripted`). It owns what the `Engine` protocol's verbs mean for the
tokens: the checks of ``new_sequence`` and ``extend`` (known sequence, token ids in the
vocabulary, the model's context length), ``truncate``'s rollback and ``release``; the engine
owns the forward and what is in its cache handles, which the table crops through a function
it is given.

Like nano-vllm's ``Sequence``, this module imports no torch: its tests run alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from factorspec_sdk.engines.protocol import SequenceId, extend_requests
from factorspec_sdk.errors import EngineError

__all__ = ["Crop", "SequenceState", "SequenceTable", "Step"]

CacheT = TypeVar("CacheT")

Crop = Callable[[CacheT, int, int], tuple[CacheT, int]]
"""``crop(cache, run, length)``: the cache of a sequence whose first ``run`` tokens it holds,
cut to its first ``length`` (``length < run``), and how many leading tokens it now holds:
``length``, or fewer where it cannot cut exactly (0: it starts over), and the next forward
runs the tokens from there again. It may return a new handle."""


@dataclass(slots=True)
class SequenceState(Generic[CacheT]):
    """Tokens of one sequence and the KV cache handle of its first ``run`` tokens.

    Attributes:
        ids: every token the sequence holds: its prompt, the tokens appended, and those not
            yet run (the first ``extend`` runs a prompt; ``truncate`` may cut below ``run``).
        cache: the engine's handle on the KV states of ``ids[:run]`` (``None`` for an engine
            that keeps none).
        run: leading tokens that have run through the model.
        cached: leading prompt tokens whose KV states came from a prefix cache.
        store: prompt tokens to store in the prefix cache once they have run (0: none, or
            done).
    """

    ids: list[int]
    cache: CacheT
    run: int = 0
    cached: int = 0
    store: int = 0

    def commit(self, new: Sequence[int]) -> None:
        """Append ``new`` after a forward ran it with the tokens before it: all have run."""
        self.ids.extend(new)
        self.run = len(self.ids)


@dataclass(frozen=True, slots=True)
class Step(Generic[CacheT]):
    """One request of an ``extend`` call, checked: what its forward runs and returns.

    Attributes:
        seq: the sequence id.
        state: the sequence (`Step.commit` appends ``new`` to it once the forward ran).
        new: the tokens the request appends.
        keep: how many logits rows it gets (the last ``keep`` of ``new``'s).
        inputs: the tokens its forward runs: those not run yet, then ``new``.
    """

    seq: SequenceId
    state: SequenceState[CacheT]
    new: list[int]
    keep: int
    inputs: list[int]

    def commit(self) -> None:
        """Record that the forward ran `inputs`: the sequence holds ``new``, all run."""
        self.state.commit(self.new)


def _unchanged(cache: CacheT, run: int, length: int) -> tuple[CacheT, int]:
    return cache, length


class SequenceTable(Generic[CacheT]):
    """The sequences of one engine, by id, with the checks the `Engine` verbs make.

    Args:
        vocab_size: token ids must lie in ``0..vocab_size - 1`` (the model's logits rows).
        max_positions: the model's context length (0: no limit).
        crop: how ``truncate`` cuts a sequence's cache (`Crop`); default: left as it is
            (an engine that keeps no cache).

    ``len(table)`` is the number of live sequences; iterating yields their ids.
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        max_positions: int = 0,
        crop: Crop[CacheT] | None = None,
    ) -> None:
        self.vocab_size = vocab_size
        self.max_positions = max_positions
        self._crop: Crop[CacheT] = crop or _unchanged
        self._states: dict[SequenceId, SequenceState[CacheT]] = {}
        self._next_id: SequenceId = 0

    def __len__(self) -> int:
        return len(self._states)

    def __iter__(self) -> Iterator[SequenceId]:
        return iter(self._states)

    def states(self) -> list[SequenceState[CacheT]]:
        """The live sequences, oldest first."""
        return list(self._states.values())

    def checked_ids(self, ids: Sequence[int]) -> list[int]:
        """``ids`` as a list of ints, each a token of the vocabulary.

        Raises:
            EngineError: a token id outside ``0..vocab_size - 1``.
        """
        out = [int(t) for t in ids]
        bad = [t for t in out if not 0 <= t < self.vocab_size]
        if bad:
            raise EngineError(
                f"token ids {bad[:5]} are outside the vocabulary (0..{self.vocab_size})"
            )
        return out

    def add(self, state: SequenceState[CacheT]) -> SequenceId:
        """Give ``state`` the next sequence id (its tokens checked by `checked_ids` first)."""
        seq = self._next_id
        self._next_id += 1
        self._states[seq] = state
        return seq

    def open(self, prompt_ids: Sequence[int], cache: CacheT) -> SequenceId:
        """A new sequence holding ``prompt_ids``, none of them run, its cache ``cache``.

        Raises:
            EngineError: a token id outside the vocabulary.
        """
        return self.add(SequenceState(self.checked_ids(prompt_ids), cache))

    def get(self, seq: SequenceId) -> SequenceState[CacheT]:
        """The sequence ``seq``.

        Raises:
            EngineError: an unknown (or released) sequence.
        """
        try:
            return self._states[seq]
        except KeyError:
            raise EngineError(f"unknown sequence id {seq} (released or never created)") from None

    def length(self, seq: SequenceId) -> int:
        """Number of tokens the sequence holds (prompt and not-yet-run tokens included)."""
        return len(self.get(seq).ids)

    def tokens(self, seq: SequenceId) -> list[int]:
        """A copy of the sequence's tokens."""
        return list(self.get(seq).ids)

    def truncate(self, seq: SequenceId, length: int) -> None:
        """Roll the sequence back to its first ``length`` tokens, cropping its cache.

        Raises:
            EngineError: an unknown sequence, or ``length`` negative or longer than it.
        """
        state = self.get(seq)
        if not 0 <= length <= len(state.ids):
            raise EngineError(
                f"cannot truncate sequence {seq} of length {len(state.ids)} to {length}"
            )
        del state.ids[length:]
        state.store = min(state.store, length)
        if length < state.run:
            state.cache, state.run = self._crop(state.cache, state.run, length)

    def release(self, seq: SequenceId) -> None:
        """Forget the sequence and its cache (unknown ids are ignored)."""
        self._states.pop(seq, None)

    def plan(
        self,
        requests: Sequence[tuple[SequenceId, Sequence[int]]],
        keep: Sequence[int] | None = None,
    ) -> list[Step[CacheT]]:
        """An ``extend`` call's requests checked, as the steps its forwards run.

        Nothing changes until a step is committed (`Step.commit`).

        Raises:
            EngineError: as `extend_requests`; or an unknown sequence, a token id outside
                the vocabulary, or a sequence that would hold more than ``max_positions``
                tokens.
        """
        steps: list[Step[CacheT]] = []
        for seq, new, k in extend_requests(requests, keep):
            state = self.get(seq)
            self.checked_ids(new)
            total = len(state.ids) + len(new)
            if self.max_positions and total > self.max_positions:
                raise EngineError(
                    f"sequence {seq} would hold {total} tokens, past the model's context "
                    f"length {self.max_positions}"
                )
            steps.append(Step(seq, state, new, k, state.ids[state.run :] + new))
        return steps
