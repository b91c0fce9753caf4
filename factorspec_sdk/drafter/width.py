"""Choosing how far past the certain tokens to draft, per request.

Certain tokens are accepted with probability one, so the draft always carries every certain
token up to the first guess, however many (they need no logits: the engine only runs them
into the KV cache). From the first guess on, at most ``max_width`` tokens follow. Each guess
is accepted with the request's running acceptance rate ``a``; the tokens after a guess are
accepted only if the guess is. The policy drafts the prefix
that maximizes *expected accepted tokens per unit of verify cost*, using the engine's measured
cost of verifying ``k`` tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["WidthPolicy"]


@dataclass(slots=True)
class WidthPolicy:
    """Per-request acceptance tracking and draft-length choice.

    Attributes:
        max_width: most draft tokens from the first guess on (guesses and the certain tokens
            they imply); the certain tokens before the first guess are not limited.
        max_guesses: most guesses in one draft (0 disables guessing).
        prior: acceptance rate assumed before any guess was verified.
        accepted: guesses accepted so far.
        proposed: guesses verified so far.
    """

    max_width: int = 64
    max_guesses: int = 2
    prior: float = 0.5
    accepted: int = 0
    proposed: int = 0

    def __post_init__(self) -> None:
        if self.max_width < 1:
            raise ValueError("max_width must be at least 1")
        if self.max_guesses < 0:
            raise ValueError("max_guesses must be >= 0")
        if not 0.0 <= self.prior <= 1.0:
            raise ValueError("prior must be in [0, 1]")

    @property
    def acceptance(self) -> float:
        """Smoothed guess acceptance rate of this request (Beta prior of weight 2)."""
        return (self.accepted + 2 * self.prior) / (self.proposed + 2)

    def record(self, proposed: int, accepted: int) -> None:
        """Account for a verify step's guesses."""
        self.proposed += proposed
        self.accepted += accepted

    def choose(self, certain: Sequence[bool], cost: Callable[[int], float]) -> int:
        """How many of the candidate draft tokens to send.

        Args:
            certain: for each candidate token, whether it is certain (else a guess).
            cost: relative cost of verifying ``k`` draft tokens (one forward over k+1 tokens).
        """
        a = self.acceptance
        first_guess = next((i for i, c in enumerate(certain) if not c), len(certain))
        n = min(len(certain), first_guess + self.max_width)
        if first_guess == n:  # nothing to weigh: certain tokens are always worth sending
            return n
        best_k = first_guess
        expected = float(first_guess)
        best_score = (1.0 + expected) / cost(first_guess + 1)
        p = 1.0
        for i in range(first_guess, n):
            if not certain[i]:
                p *= a
            expected += p
            score = (1.0 + expected) / cost(i + 2)
            if score > best_score + 1e-12:
                best_k, best_score = i + 1, score
        return best_k
