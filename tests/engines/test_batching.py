"""The embedded engine's batching and cost rules alone (torch-free): no model loads."""

from __future__ import annotations

import pytest

from factorspec_sdk.engines.embedded.batching import (
    PROFILE_KS,
    forward_groups,
    monotone,
    relative_cost,
)
from factorspec_sdk.errors import EngineError


def linear(per_token: float) -> dict[int, float]:
    """A cost curve of 1 + per_token * (k - 1) seconds at each width."""
    return {k: 1.0 + per_token * (k - 1) for k in PROFILE_KS}


def test_monotone_never_makes_a_wider_forward_cheaper() -> None:
    assert monotone({1: 0.04, 4: 0.05, 8: 0.045, 16: 0.06}) == {
        1: 0.04,
        4: 0.05,
        8: 0.05,
        16: 0.06,
    }


def test_relative_cost_interpolates_and_extrapolates() -> None:
    profile = {1: 2.0, 4: 2.0, 8: 4.0, 16: 6.0}
    assert relative_cost(profile, 1) == 1.0
    assert relative_cost(profile, 6) == pytest.approx(1.5)
    assert relative_cost(profile, 16) == 3.0
    assert relative_cost(profile, 24) == pytest.approx(4.0)  # the last slope, 1/8 per token
    with pytest.raises(EngineError, match="verify width must be at least 1, got 0"):
        relative_cost(profile, 0)


def test_similar_runs_share_one_forward() -> None:
    def never(n: int) -> float:
        raise AssertionError("priced runs that differ by at most 2x")

    assert forward_groups([3], never) == [[0]]
    assert forward_groups([2, 4, 3], never) == [[1, 2, 0]]  # widest first


def test_a_long_run_is_split_from_short_ones_where_padding_costs_more() -> None:
    widths = [1, 60, 1, 1]
    steep = linear(1.0)  # every padded token costs as much as a forward
    assert forward_groups(widths, lambda n: relative_cost(steep, n)) == [[1], [0, 2, 3]]
    flat = linear(0.001)  # padding is nearly free: one forward
    assert forward_groups(widths, lambda n: relative_cost(flat, n)) == [[1, 0, 2, 3]]


def test_groups_cover_every_request_once() -> None:
    widths = [5, 40, 1, 17, 2, 64, 9]
    groups = forward_groups(widths, lambda n: relative_cost(linear(0.05), n))
    assert sorted(i for group in groups for i in group) == list(range(len(widths)))
    order = [widths[i] for group in groups for i in group]
    assert order == sorted(widths, reverse=True)  # contiguous groups of the widest first
