import numpy as np
import pytest

from factorspec_sdk.drafter.verify import (
    SamplingParams,
    accept_or_replace,
    choose_token,
    masked_probs,
)


def test_params_reject_bad_values() -> None:
    with pytest.raises(ValueError):
        SamplingParams(temperature=-1)
    with pytest.raises(ValueError):
        SamplingParams(top_p=0)
    with pytest.raises(ValueError):
        SamplingParams(max_tokens=0)


def test_greedy_is_masked_argmax() -> None:
    row = np.array([5.0, 1.0, 3.0, 4.0], dtype=np.float32)
    allowed = np.array([1, 2, 3], dtype=np.int64)
    rng = np.random.default_rng(0)
    assert choose_token(row, allowed, SamplingParams(), rng) == 3
    assert accept_or_replace(row, allowed, 3, SamplingParams(), rng) is None
    assert accept_or_replace(row, allowed, 2, SamplingParams(), rng) == 3


def test_certain_token_always_accepted() -> None:
    row = np.array([9.0, -9.0], dtype=np.float32)
    allowed = np.array([1], dtype=np.int64)
    rng = np.random.default_rng(0)
    params = SamplingParams(temperature=1.0)
    assert all(accept_or_replace(row, allowed, 1, params, rng) is None for _ in range(100))


def test_top_p_keeps_the_nucleus() -> None:
    row = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    allowed = np.arange(4, dtype=np.int64)
    p = masked_probs(row, allowed, SamplingParams(temperature=1.0, top_p=0.8))
    assert np.allclose(p, [0.5 / 0.8, 0.3 / 0.8, 0, 0])


@pytest.mark.parametrize("drafted", [0, 2, 3])
def test_speculative_acceptance_preserves_distribution(drafted: int) -> None:
    """Accept-or-replace output ~ masked sampling, for any drafted token."""
    rng = np.random.default_rng(1234)
    row = rng.normal(size=6).astype(np.float32)
    allowed = np.array([0, 2, 3, 4], dtype=np.int64)
    params = SamplingParams(temperature=0.7)
    expected = masked_probs(row, allowed, params)
    n = 40_000
    counts = dict.fromkeys(allowed.tolist(), 0)
    for _ in range(n):
        r = accept_or_replace(row, allowed, drafted, params, rng)
        counts[drafted if r is None else r] += 1
    observed = np.array([counts[t] for t in allowed.tolist()], dtype=np.float64)
    # chi-square goodness of fit, df = 3; 16.27 is the 0.999 quantile
    chi2 = float((((observed - n * expected) ** 2) / (n * expected)).sum())
    assert chi2 < 16.27
