"""How the embedded engine prices a forward, and groups one ``extend``'s requests into forwards.

The engine's verify cost curve (`factorspec_sdk.engines.dtype_choice.CostCurve`, settled at
load) gives the seconds of one forward over ``k`` new tokens for each ``k`` of `PROFILE_KS`.
`monotone` makes it non-decreasing in ``k``, `relative_cost` reads it at any width (relative to
one token), and `forward_groups` splits a batch whose runs differ a lot in length into the few
forwards that cost least by it. Like nano-vllm's scheduler, this module imports no torch: its
tests run alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from factorspec_sdk.engines.dtype_choice import CURVE_WIDTHS
from factorspec_sdk.errors import EngineError

__all__ = ["PROFILE_KS", "forward_groups", "monotone", "relative_cost"]

PROFILE_KS: tuple[int, ...] = CURVE_WIDTHS
"""Verify widths of `EmbeddedEngine.cost_profile` (`dtype_choice.CURVE_WIDTHS`)."""


def monotone(profile: Mapping[int, float]) -> dict[int, float]:
    """``profile`` made non-decreasing in ``k``: noise must not make a wider forward cheaper."""
    floor = 0.0
    out: dict[int, float] = {}
    for k in sorted(profile):
        floor = out[k] = max(profile[k], floor)
    return out


def relative_cost(profile: Mapping[int, float], k: int) -> float:
    """Cost of one forward over ``k`` new tokens relative to the narrowest in ``profile``.

    Linear interpolation of ``profile`` (seconds by width, two widths at least), linear
    extrapolation past its widest ``k``.

    Raises:
        EngineError: ``k`` is below 1.
    """
    if k < 1:
        raise EngineError(f"verify width must be at least 1, got {k}")
    ks = sorted(profile)
    base = profile[ks[0]]
    costs = [profile[x] / base for x in ks]
    if k >= ks[-1]:
        slope = (costs[-1] - costs[-2]) / (ks[-1] - ks[-2])
        return costs[-1] + slope * (k - ks[-1])
    return float(np.interp(k, ks, costs))


def forward_groups(widths: list[int], cost: Callable[[int], float]) -> list[list[int]]:
    """Split a batch into forwards so that padding to each one's widest run pays off.

    Args:
        widths: the tokens each request's forward runs.
        cost: the relative cost of one forward over ``n`` tokens (`relative_cost`).

    Returns:
        The requests' indexes, one list per forward, widest runs first. A padded forward over
        ``b`` rows of width ``w`` is priced as one forward over ``b * w`` tokens; runs sorted by
        width are cut into the contiguous groups of least total cost (a short dynamic
        program). Runs of similar width (the widest at most twice the narrowest) stay
        together without pricing.
    """
    order = sorted(range(len(widths)), key=lambda i: -widths[i])
    if len(widths) == 1 or widths[order[0]] <= 2 * widths[order[-1]]:
        return [order]
    sizes = [widths[i] for i in order]
    n = len(sizes)
    priced: dict[int, float] = {}
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):
            padded = (j - i) * sizes[i]
            if padded not in priced:
                priced[padded] = cost(padded)
            total = best[i] + priced[padded]
            if total < best[j]:
                best[j], cut[j] = total, i
    groups: list[list[int]] = []
    j = n
    while j:
        groups.append(order[cut[j] : j])
        j = cut[j]
    return groups[::-1]
