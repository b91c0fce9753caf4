"""The prompt-lookup guesser: its guesses, against the plain reading of its rule."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from factorspec_sdk.drafter.guess import PromptLookupGuesser


def _reference(prompt: Sequence[int], record: Sequence[int], allowed: set[int]) -> int | None:
    """The rule as the module states it, read with sets (the latest n-gram match, longest n
    first; else the allowed token the prompt mentions first among those not used yet)."""
    context = [*prompt, *record]
    for n in range(min(3, len(context) - 1), 0, -1):
        suffix = context[len(context) - n :]
        for j in range(len(context) - n - 1, -1, -1):
            if context[j : j + n] == suffix and context[j + n] in allowed:
                return context[j + n]
    firsts = [t for i, t in enumerate(prompt) if t not in prompt[:i]]
    return next((t for t in firsts if t in allowed and t not in record), None)


def test_guesses_match_the_rule_on_random_prompts_records_and_masks() -> None:
    rng = np.random.default_rng(0)
    agreed = 0
    for _ in range(400):
        vocab = int(rng.integers(4, 40))
        prompt = rng.integers(0, vocab, size=int(rng.integers(1, 30))).tolist()
        record = rng.integers(0, vocab, size=int(rng.integers(0, 12))).tolist()
        allowed = np.unique(rng.integers(0, vocab, size=int(rng.integers(0, vocab))))
        got = PromptLookupGuesser(prompt).guess(allowed, record)
        assert got == _reference(prompt, record, set(allowed.tolist())), (prompt, record)
        agreed += got is not None
    assert agreed > 200  # most draws have a guess: both branches of the rule are exercised


def test_a_mask_of_most_of_the_vocabulary_is_read_only_at_the_contexts_tokens() -> None:
    prompt = [5, 9, 11, 9, 49_500]
    allowed = np.arange(10, 49_000, dtype=np.int64)  # a free string's mask, say
    guesser = PromptLookupGuesser(prompt)
    assert guesser.guess(allowed, [5, 9]) == 11  # after ``5 9`` the prompt has ``11``
    assert guesser.guess(allowed, [7]) == 11  # no match: the first prompt token allowed
    assert guesser.guess(allowed, [11]) is None  # 9 follows 11, not allowed; 11 is used
