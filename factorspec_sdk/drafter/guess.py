"""Guesses past a choice point: prompt lookup restricted to the feasible tokens.

The guesser looks for the most recent earlier occurrence of the last ``n`` tokens (n-gram
prompt lookup, as vLLM's ``ngram`` speculator does) whose next token is allowed here; failing
that, it proposes the allowed token that the prompt mentions first among those the record has
not used yet (records often list the prompt's entities in order). A guess is only ever a
proposal: verification accepts it exactly when the model would have chosen it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["PromptLookupGuesser"]


class PromptLookupGuesser:
    """N-gram prompt lookup over the prompt and the record so far, restricted to a mask.

    A mask may hold most of the vocabulary (a free string's): membership is read for the
    tokens of the context alone (`numpy.isin`), never by making a set of the mask.
    """

    def __init__(self, prompt: Sequence[int], max_ngram: int = 3) -> None:
        self.prompt = list(prompt)
        self.max_ngram = max_ngram
        first_pos: dict[int, int] = {}
        for i, t in enumerate(self.prompt):
            first_pos.setdefault(t, i)
        self._by_position = sorted((pos, t) for t, pos in first_pos.items())
        """The prompt's tokens, each at its first position, in the order the prompt has them."""

    def guess(self, allowed: npt.NDArray[np.int64], record: Sequence[int]) -> int | None:
        """A token from ``allowed`` likely to come next after ``record``, or None."""
        if len(allowed) == 0:
            return None
        context = self.prompt + list(record)
        n_ctx = len(context)
        member = np.isin(np.asarray(context, dtype=np.int64), allowed).tolist()
        for n in range(min(self.max_ngram, n_ctx - 1), 0, -1):
            suffix = context[n_ctx - n :]
            first = suffix[0]
            for j in range(n_ctx - n - 1, -1, -1):
                if context[j] != first or context[j : j + n] != suffix:
                    continue
                if member[j + n]:
                    return context[j + n]
        used = set(record)
        for pos, t in self._by_position:  # the first the prompt mentions, not used yet
            if member[pos] and t not in used:
                return t
        return None
