import pytest

from factorspec_sdk.drafter.width import WidthPolicy


def flat(k: int) -> float:
    return 1.0 + 0.03 * (k - 1)


def test_all_certain_tokens_are_drafted() -> None:
    policy = WidthPolicy(max_width=64)
    assert policy.choose([True] * 30, flat) == 30
    assert policy.choose([True] * 500, flat) == 500  # max_width does not cap a certain run


def test_max_width_counts_from_the_first_guess() -> None:
    policy = WidthPolicy(max_width=8, prior=0.5)
    policy.record(proposed=100, accepted=100)
    assert policy.choose([True] * 70 + [False] + [True] * 100, flat) == 78
    assert WidthPolicy(max_width=1).choose([True] * 3 + [False] * 5, flat) == 4


def test_guesses_follow_acceptance() -> None:
    good = WidthPolicy(prior=0.5)
    good.record(proposed=50, accepted=50)
    bad = WidthPolicy(prior=0.5)
    bad.record(proposed=50, accepted=0)
    draft = [True] * 5 + [False] + [True] * 10
    assert good.choose(draft, flat) == 16
    assert bad.choose(draft, flat) == 5


def test_expensive_verification_shortens_guesses() -> None:
    policy = WidthPolicy(prior=0.3)
    steep = lambda k: float(k)  # noqa: E731 - cost linear in k: guessing never pays
    assert policy.choose([False] * 8, steep) == 0


def test_rejects_bad_config() -> None:
    with pytest.raises(ValueError):
        WidthPolicy(max_width=0)
    with pytest.raises(ValueError):
        WidthPolicy(prior=2.0)


def test_cost_is_not_measured_without_guesses() -> None:
    def boom(k: int) -> float:
        raise AssertionError("cost curve consulted")

    assert WidthPolicy().choose([True] * 10, boom) == 10
