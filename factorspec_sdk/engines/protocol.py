"""The engine interface every backend implements.

An engine owns the model and one KV cache per sequence. The decoding loop (``drafter`` and
``client``) drives it with three verbs borrowed from speculative decoders:

* ``extend`` feeds K new tokens to each of several sequences in one forward pass and returns
  the logits at those K positions (row ``i`` predicts the token after ``tokens[i]``), or at
  the last few of them only (``keep``);
* ``truncate`` rolls a sequence back to a shorter length (KV cache crop);
* ``release`` frees a sequence.

An engine may also reuse the KV states of prompt prefixes it has run before (a prefix cache);
`PrefixCaching` is the optional method that says how many prompt tokens a sequence got that
way, and `cached_prompt_tokens` asks any engine (0 from one without).

``verify_cost`` reads the engine's cost curve, which an engine may measure on first use;
`SettledCostCurve` marks an engine that settles it at load (the embedded engine), so the
decoder knows that choosing a draft width there measures nothing.

Logits cross the interface as ``numpy`` float32 arrays so that the decoding loop, the masks
and the verification math stay free of torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from factorspec_sdk.errors import EngineError
from factorspec_sdk.tokens.vocab import TokenizerInfo

if TYPE_CHECKING:
    from factorspec_sdk.engines.dtype_choice import CostCurve

__all__ = [
    "ChatMessage",
    "Engine",
    "Logits",
    "PrefixCaching",
    "SequenceId",
    "SettledCostCurve",
    "cached_prompt_tokens",
    "extend_requests",
    "undo_extend",
]

Logits = npt.NDArray[np.float32]
"""A ``[k, vocab_size]`` float32 array of next-token logits."""

SequenceId = int

ChatMessage = dict[str, str]
"""``{"role": "system" | "user" | "assistant", "content": "..."}``."""


@runtime_checkable
class Engine(Protocol):
    """A model runtime FactorSpec can decode on."""

    @property
    def name(self) -> str:
        """Short engine name, e.g. ``"embedded"``."""
        ...

    @property
    def tokenizer(self) -> TokenizerInfo:
        """Vocabulary byte strings, special tokens and the canonical encoder."""
        ...

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` with the model's chat template and generation prompt."""
        ...

    def new_sequence(self, prompt_ids: Sequence[int]) -> SequenceId:
        """Start a sequence holding ``prompt_ids`` (no forward pass is run yet)."""
        ...

    def extend(
        self,
        requests: Sequence[tuple[SequenceId, Sequence[int]]],
        *,
        keep: Sequence[int] | None = None,
    ) -> list[Logits]:
        """Append tokens to several sequences in one batched forward.

        Tokens given at ``new_sequence`` that have not been run yet are run first, in the same
        forward, without logits of their own; callers pass at least one new token per
        sequence. Returns one array per request, in order: without ``keep``, a
        ``[len(tokens), vocab]`` array whose row ``i`` holds the logits after ``tokens[i]``;
        with ``keep``, the last ``keep[j]`` of those rows for request ``j`` (``1 <= keep[j] <=
        len(tokens)``), so tokens whose logits nobody reads (certain drafts) cost no LM head.
        """
        ...

    def length(self, seq: SequenceId) -> int:
        """Number of tokens the sequence holds (prompt included)."""
        ...

    def truncate(self, seq: SequenceId, length: int) -> None:
        """Roll the sequence back to its first ``length`` tokens (KV cache crop)."""
        ...

    def release(self, seq: SequenceId) -> None:
        """Free the sequence and its cache."""
        ...

    def verify_cost(self, k: int) -> float:
        """Measured cost of one forward over ``k`` new tokens relative to ``k == 1``."""
        ...


@runtime_checkable
class PrefixCaching(Protocol):
    """An engine with a prefix cache: the optional method beside `Engine`'s."""

    def cached_tokens(self, seq: SequenceId) -> int:
        """Leading prompt tokens of ``seq`` whose KV states came from the prefix cache.

        Known from ``new_sequence`` on (the lookup happens there).
        """
        ...


@runtime_checkable
class SettledCostCurve(Protocol):
    """An engine whose cost curve is settled at load: the optional attribute beside `Engine`'s.

    Its ``verify_cost`` reads `cost_curve`, measured or read from a cache before the
    engine's first request, and never measures.
    """

    @property
    def cost_curve(self) -> CostCurve:
        """The curve ``verify_cost`` reads, and how the engine got it."""
        ...


def cached_prompt_tokens(engine: object, seq: SequenceId) -> int:
    """``engine.cached_tokens(seq)`` for a `PrefixCaching` engine, else 0."""
    if isinstance(engine, PrefixCaching):
        return engine.cached_tokens(seq)
    return 0


def undo_extend(engine: Engine, lengths: Sequence[tuple[SequenceId, int]]) -> None:
    """Cut each sequence back to its length before an ``extend`` that failed.

    A batched ``extend`` that raises may have appended some requests' tokens already; a
    caller that runs the requests again (each alone, to find the bad one) undoes that first.
    """
    for seq, length in lengths:
        if engine.length(seq) > length:
            engine.truncate(seq, length)


def extend_requests(
    requests: Sequence[tuple[SequenceId, Sequence[int]]], keep: Sequence[int] | None
) -> list[tuple[SequenceId, list[int], int]]:
    """An ``extend`` call's requests checked as the protocol asks: ``(seq, tokens, rows)``.

    ``rows`` is how many logits rows the request gets (``keep[j]``, or all its new tokens).
    Engines check the rest (unknown sequences, token ids, context length) themselves.

    Raises:
        EngineError: a ``keep`` of another length than ``requests``, a sequence named twice,
            a request without new tokens, or a ``keep`` outside ``1..len(tokens)``.
    """
    if keep is not None and len(keep) != len(requests):
        raise EngineError(f"keep has {len(keep)} entries for {len(requests)} requests")
    checked: list[tuple[SequenceId, list[int], int]] = []
    seen: set[SequenceId] = set()
    for j, (seq, tokens) in enumerate(requests):
        if seq in seen:
            raise EngineError(f"sequence {seq} appears twice in one extend call")
        seen.add(seq)
        new = [int(t) for t in tokens]
        if not new:
            raise EngineError(f"extend of sequence {seq} has no new tokens")
        rows = len(new) if keep is None else int(keep[j])
        if not 1 <= rows <= len(new):
            raise EngineError(
                f"keep={rows} for sequence {seq} is outside 1..{len(new)} (its new tokens)"
            )
        checked.append((seq, new, rows))
    return checked
