"""What a part of the token budget holds of the `CompletionBound` that owns it.

`factorspec_sdk.tokens.free_budget.FreeStringBudget` and
`factorspec_sdk.tokens.grammar_budget.GrammarSegmentBudget` are parts of one
`factorspec_sdk.tokens.budget.CompletionBound`, which owns them. Each refers to the bound
weakly, as the bound refers to its planner: a cycle would keep the spec's Z3 contexts alive
until a cyclic collection.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from factorspec_sdk.errors import GenerationError

if TYPE_CHECKING:
    from factorspec_sdk.tokens.budget import CompletionBound
    from factorspec_sdk.tokens.plan import Planner

__all__ = ["BudgetPart"]


class BudgetPart:
    """A part of one `CompletionBound` (which owns it and is referred to weakly).

    Args:
        bound: the bound whose ``G`` the completions after the part's cursors use.
        what: what the part measures, named in the error should the bound be gone.
    """

    def __init__(self, bound: CompletionBound, what: str) -> None:
        self._bound = weakref.ref(bound)
        self._what = what

    @property
    def bound(self) -> CompletionBound:
        """The bound this part belongs to."""
        bound = self._bound()
        if bound is None:  # the bound owns this part: it cannot be gone while in use
            raise GenerationError(f"internal error: {self._what} outlived its bound")
        return bound

    @property
    def planner(self) -> Planner:
        """The planner whose cursors are measured."""
        return self.bound.planner
