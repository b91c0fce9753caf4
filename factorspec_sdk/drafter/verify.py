"""Choosing and verifying tokens under a mask.

Greedy decoding takes the masked argmax. Sampling draws from the masked distribution (after
temperature and top-p); a drafted token ``d`` proposed with certainty by a deterministic
drafter (``q = δ_d``) is accepted with probability ``p(d)``, and on rejection the replacement is
drawn from ``p`` with ``d`` removed and renormalized — the standard speculative acceptance rule
(Leviathan et al. 2023), so the output distribution equals non-speculative masked sampling
exactly. A certain token has ``p(d) = 1`` under its mask and is always accepted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["SamplingParams", "accept_or_replace", "choose_token", "masked_probs"]


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How tokens are chosen.

    Attributes:
        temperature: 0 for greedy; otherwise the softmax temperature.
        top_p: nucleus mass kept (1.0 keeps everything).
        seed: seed of the request's random generator (sampling only).
        max_tokens: most record tokens; the masks finish every record within it
            (`factorspec_sdk.tokens.budget`), and a budget below the shortest record is a
            `TokenBudgetError` before any token.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    max_tokens: int = 2048

    def __post_init__(self) -> None:
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")

    @property
    def greedy(self) -> bool:
        """Whether decoding is greedy."""
        return self.temperature == 0.0


def masked_probs(
    row: npt.NDArray[np.float32], allowed: npt.NDArray[np.int64], params: SamplingParams
) -> npt.NDArray[np.float64]:
    """Probabilities over ``allowed`` (same order) after temperature and top-p."""
    x = row[allowed].astype(np.float64) / params.temperature
    x -= x.max()
    p = np.exp(x)
    p /= p.sum()
    if params.top_p < 1.0:
        order = np.argsort(-p, kind="stable")
        cum = np.cumsum(p[order])
        keep = int(np.searchsorted(cum, params.top_p, side="left")) + 1
        mask = np.zeros_like(p)
        mask[order[:keep]] = 1.0
        p = p * mask
        p /= p.sum()
    return p


def choose_token(
    row: npt.NDArray[np.float32],
    allowed: npt.NDArray[np.int64],
    params: SamplingParams,
    rng: np.random.Generator,
) -> int:
    """The next token at a position (masked argmax, or a masked sample)."""
    if len(allowed) == 1:
        return int(allowed[0])
    if len(allowed) == 0:
        raise ValueError("no token is allowed at this position")
    if params.greedy:
        return int(allowed[int(np.argmax(row[allowed]))])
    p = masked_probs(row, allowed, params)
    return int(allowed[int(rng.choice(len(allowed), p=p))])


def accept_or_replace(
    row: npt.NDArray[np.float32],
    allowed: npt.NDArray[np.int64],
    drafted: int,
    params: SamplingParams,
    rng: np.random.Generator,
) -> int | None:
    """Verify a drafted token: None if accepted, else the replacement token."""
    if len(allowed) == 1:
        only = int(allowed[0])
        return None if only == drafted else only
    if params.greedy:
        best = int(allowed[int(np.argmax(row[allowed]))])
        return None if best == drafted else best
    p = masked_probs(row, allowed, params)
    where = np.flatnonzero(allowed == drafted)
    pd = float(p[where[0]]) if len(where) else 0.0
    if rng.random() < pd:
        return None
    residual = p.copy()
    if len(where):
        residual[where[0]] = 0.0
    total = residual.sum()
    if total <= 0.0:  # numerically p(d) == 1: accept
        return None
    residual /= total
    return int(allowed[int(rng.choice(len(allowed), p=residual))])
