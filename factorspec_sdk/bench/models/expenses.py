"""A travel expense report in Decimal money converted at the policy's exchange rates.

The context is the expense policy: the trip's dates, the exchange rate of each currency
into euros (a ``dict[str, Decimal]``) and the daily meal limit. Each expense is dated within
the trip, converted at its currency's rate and rounded to the cent; meals stay under the
limit, expenses are listed by date, and the total adds the converted amounts up.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, Field

from factorspec_sdk import relation

__all__ = ["CONTEXT", "GOLDEN", "PROMPT", "Expense", "ExpenseReport", "Policy"]

Currency = Literal["EUR", "USD", "GBP", "CHF"]


class Policy(BaseModel):
    """The context: the trip's dates, the rates into euros, the meal limit."""

    trip_start: dt.date
    trip_end: dt.date
    rates: dict[str, Decimal]
    meal_limit_eur: Decimal


class Expense(BaseModel):
    """One expense, in its currency and in euros."""

    date: dt.date
    category: Literal["travel", "lodging", "meals", "other"]
    description: str = Field(max_length=40)
    currency: Currency
    amount: Decimal = Field(gt=0, le=5000, decimal_places=2)
    amount_eur: Decimal = Field(gt=0, le=10_000, decimal_places=2)


class ExpenseReport(BaseModel):
    """The report."""

    employee: str = Field(max_length=40)
    expenses: list[Expense] = Field(min_length=1, max_length=8)
    total_eur: Decimal = Field(ge=0, le=80_000, decimal_places=2)

    @relation
    def during_the_trip(self, policy: Policy) -> bool:
        """Every expense is dated within the trip, and they are listed by date."""
        return all(policy.trip_start <= e.date <= policy.trip_end for e in self.expenses) and all(
            a.date <= b.date for a, b in zip(self.expenses, self.expenses[1:])
        )

    @relation
    def converted_at_the_rate(self, policy: Policy) -> bool:
        """Each amount in euros is the amount at its currency's rate, to the cent."""
        return all(
            e.amount_eur == round(e.amount * policy.rates[e.currency], 2) for e in self.expenses
        )

    @relation
    def meals_within_the_limit(self, policy: Policy) -> bool:
        """No meal costs more than the daily limit."""
        return all(
            e.category != "meals" or e.amount_eur <= policy.meal_limit_eur for e in self.expenses
        )

    @relation
    def total_adds_up(self) -> bool:
        """The total adds the amounts in euros up."""
        return self.total_eur == sum(e.amount_eur for e in self.expenses)


CONTEXT = Policy(
    trip_start=dt.date(2026, 11, 16),
    trip_end=dt.date(2026, 11, 19),
    rates={
        "EUR": Decimal("1"),
        "USD": Decimal("0.9214"),
        "GBP": Decimal("1.1702"),
        "CHF": Decimal("1.0633"),
    },
    meal_limit_eur=Decimal("60"),
)

PROMPT = (
    "File the expense report for Maria Lopez's trip from 2026-11-16 to 2026-11-19, amounts "
    "converted into euros at USD 0.9214, GBP 1.1702, CHF 1.0633 and rounded to the cent. "
    "Receipts: 16 Nov train to Zurich CHF 148.00; 16 Nov dinner CHF 54.50; 17 Nov hotel in "
    "Zurich, two nights, CHF 412.00; 18 Nov flight to London GBP 96.40; 18 Nov taxi GBP "
    "31.20; 19 Nov lunch with a client USD 61.75."
)

GOLDEN = ExpenseReport.model_validate(
    {
        "employee": "Maria Lopez",
        "expenses": [
            {
                "date": "2026-11-16",
                "category": "travel",
                "description": "Train to Zurich",
                "currency": "CHF",
                "amount": "148.00",
                "amount_eur": "157.37",
            },
            {
                "date": "2026-11-16",
                "category": "meals",
                "description": "Dinner",
                "currency": "CHF",
                "amount": "54.50",
                "amount_eur": "57.95",
            },
            {
                "date": "2026-11-17",
                "category": "lodging",
                "description": "Hotel in Zurich, two nights",
                "currency": "CHF",
                "amount": "412.00",
                "amount_eur": "438.08",
            },
            {
                "date": "2026-11-18",
                "category": "travel",
                "description": "Flight to London",
                "currency": "GBP",
                "amount": "96.40",
                "amount_eur": "112.81",
            },
            {
                "date": "2026-11-18",
                "category": "travel",
                "description": "Taxi",
                "currency": "GBP",
                "amount": "31.20",
                "amount_eur": "36.51",
            },
            {
                "date": "2026-11-19",
                "category": "meals",
                "description": "Lunch with a client",
                "currency": "USD",
                "amount": "61.75",
                "amount_eur": "56.90",
            },
        ],
        "total_eur": "859.62",
    },
    context=CONTEXT,
)
"""The report the receipts ask for."""
