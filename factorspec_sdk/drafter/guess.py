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
    """N-gram prompt lookup over the prompt and the record so far, restricted to a mask."""

    def __init__(self, prompt: Sequence[int], max_ngram: int = 3) -> None:
        self.prompt = list(prompt)
        self.max_ngram = max_ngram
        self._first_pos: dict[int, int] = {}
        for i, t in enumerate(self.prompt):
            self._first_pos.setdefault(t, i)

    def guess(self, allowed: npt.NDArray[np.int64], record: Sequence[int]) -> int | None:
        """A token from ``allowed`` likely to come next after ``record``, or None."""
        if len(allowed) == 0:
            return None
        allowed_set = set(allowed.tolist())
        context = self.prompt + list(record)
        n_ctx = len(context)
        for n in range(min(self.max_ngram, n_ctx - 1), 0, -1):
            suffix = context[n_ctx - n :]
            first = suffix[0]
            for j in range(n_ctx - n - 1, -1, -1):
                if context[j] != first or context[j : j + n] != suffix:
                    continue
                nxt = context[j + n]
                if nxt in allowed_set:
                    return nxt
        used = set(record)
        best: tuple[int, int] | None = None
        for t in allowed_set:
            pos = self._first_pos.get(t)
            if pos is not None and t not in used and (best is None or pos < best[0]):
                best = (pos, t)
        return None if best is None else best[1]
