"""The token budget's lazy decisions: partial walks give the exact bound's answers, cheaply.

A mask under a tight budget and the check before the first token ask whether ``U`` (or ``G``)
fits what is left, not what it is: `CompletionBound.fits` and the masks walk the greedy
completion only until the tokens so far plus the longest rest in bytes fit. These tests hold
them to the exact bound (a second planner of the same spec, whose walks go to the end), and
the check before the first token to a few segments where the budget is roomy for them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

import numpy as np
import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.drafter.loop import DecodeJob, check_budget
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import Cursor, Finished, Planner, TrieNode
from factorspec_sdk.writer.automaton import Writer
from tests.tokens.test_budget import EXAMPLES, PROMPT, TOK, true_shortest


class Rates(BaseModel):
    """The context: each currency's rate into euros."""

    rates: dict[str, Decimal]


class Refund(BaseModel):
    """A Decimal amount (90 values: written character by character) converted at a rate."""

    currency: Literal["EUR", "USD"]
    amount: Decimal = Field(ge=1, le=Decimal("9.9"), decimal_places=1)
    amount_eur: Decimal = Field(gt=0, le=20, decimal_places=2)

    @relation
    def converted(self, ctx: Rates) -> bool:
        return self.amount_eur == round(self.amount * ctx.rates[self.currency], 2)


class Line(BaseModel):
    """One line of a `Claim`."""

    currency: Literal["EUR", "USD"]
    amount: Decimal = Field(gt=0, le=500, decimal_places=2)
    amount_eur: Decimal = Field(gt=0, le=1000, decimal_places=2)


class Claim(BaseModel):
    """Up to 8 Decimal lines at context rates, and their total (expenses, in small)."""

    lines: list[Line] = Field(min_length=1, max_length=8)
    total: Decimal = Field(ge=0, le=8000, decimal_places=2)

    @relation
    def converted(self, ctx: Rates) -> bool:
        return all(x.amount_eur == round(x.amount * ctx.rates[x.currency], 2) for x in self.lines)

    @relation
    def adds_up(self) -> bool:
        return self.total == sum(x.amount_eur for x in self.lines)


RATES = Rates(rates={"EUR": Decimal("1"), "USD": Decimal("0.92")})
SHORT_RATES = Rates(rates={"EUR": Decimal("1"), "USD": Decimal("2")})
SPECS: dict[str, tuple[type[BaseModel], object]] = {
    **EXAMPLES,
    "refund": (Refund, SHORT_RATES),
    "refund_at_0.92": (Refund, RATES),
    "claim": (Claim, RATES),
}


def fresh(name: str) -> Planner:
    """A planner of its own: nothing walked yet."""
    model, context = SPECS[name]
    return Planner(Writer(compile_spec(model, context)), TOK)


def exact_mask(p: Planner, cursor: Cursor, budget: int) -> list[int]:
    """The mask of a trie cursor from the exact bound: ``1 + U`` (``G`` after a segment) fits."""
    assert isinstance(cursor, TrieNode)
    keep = []
    for t in cursor.ids.tolist():
        child = cursor.children[t]
        after = (
            p.min_tokens(child) if child.terminal is None else p.bound.greedy(p.advance(cursor, t))
        )
        if 1 + after <= budget:
            keep.append(t)
    return keep


def prefill(p: Planner, cursor: Cursor) -> None:
    """Walk the exact bound from ``cursor`` and after each of its tokens, to the end."""
    p.min_tokens(cursor)
    for t in p.allowed(cursor).tolist():
        child = cursor.children[t] if isinstance(cursor, TrieNode) else None
        if child is not None and child.terminal is None:
            p.min_tokens(child)
        else:
            p.bound.greedy(p.advance(cursor, t))


def test_refund_bound_is_the_true_shortest_record() -> None:
    """A Decimal leaf under a relation, written character by character: ``U`` is exact."""
    p = fresh("refund")
    assert p.min_tokens(p.start()) == true_shortest(fresh("refund")) == 43
    q = fresh("refund_at_0.92")  # a dollar's amount in euros has decimals
    assert q.min_tokens(q.start()) == true_shortest(fresh("refund_at_0.92")) == 43


@pytest.mark.parametrize(
    "name", ["refund", "refund_at_0.92", "claim", "trip", "memo", "post", "signup", "tagged"]
)
def test_fits_is_the_exact_comparison(name: str) -> None:
    exact = fresh(name)
    shortest = exact.min_tokens(exact.start())
    ceiling = exact.bound.ceiling
    for limit in sorted({shortest - 1, shortest, shortest + 1, ceiling - 1, ceiling // 2}):
        lazy = fresh(name)  # nothing walked: each answer is its own partial walk
        assert lazy.bound.fits(lazy.start(), limit) == (shortest <= limit), limit


@pytest.mark.parametrize(
    "name", ["refund", "refund_at_0.92", "claim", "trip", "memo", "post", "signup", "options"]
)
def test_lazy_masks_are_the_exact_masks(name: str) -> None:
    """Along random records, every budget near ``U``: the same tokens as the exact bound."""
    rng = np.random.default_rng(7)
    for _ in range(2):
        lazy, exact = fresh(name), fresh(name)
        cl, ce = lazy.start(), exact.start()
        while not isinstance(cl, Finished):
            prefill(exact, ce)
            u = exact.min_tokens(ce)
            for budget in (u, u + 1, u + 3, u + 12):
                got = lazy.allowed(cl, budget)
                assert np.array_equal(got, exact.allowed(ce, budget)), budget
                if isinstance(ce, TrieNode):
                    assert got.tolist() == exact_mask(exact, ce, budget), budget
            t = int(rng.choice(lazy.allowed(cl, u + 3)))
            cl, ce = lazy.advance(cl, t), exact.advance(ce, t)
        assert isinstance(ce, Finished)


def test_the_check_before_the_first_token_walks_only_what_it_needs() -> None:
    """A budget just below the ceiling: a few segments planned, no walk to the record's end.

    Before, the check counted ``U`` at the start exactly: the greedy record to its end, each
    Decimal leaf's values asked of the oracle on the way.
    """
    p = fresh("claim")
    budget = p.bound.ceiling - 1
    check_budget(DecodeJob(p, PROMPT, SamplingParams(max_tokens=budget)), p.start())
    assert p.bound.walked == 0  # no greedy completion counted to its end
    assert p.stats.segments <= 3
    assert p.min_tokens(p.start()) <= budget  # what the check said, counted in full
