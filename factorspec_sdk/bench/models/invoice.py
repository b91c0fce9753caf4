"""An invoice in Decimal money: lines, subtotal, tax at the customer's rate, due date.

The context is the billing account: the customer's name, the tax rate (a ``Decimal``), the
issue date and the payment terms in days. Each line's amount is its quantity times its unit
price; the subtotal adds the lines up, the tax is the subtotal times the rate rounded to the
cent (half to even, as ``round`` does for a ``Decimal``), the total is both, and the invoice
is due the payment terms after its issue date.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from pydantic import BaseModel, Field

from factorspec_sdk import relation

__all__ = ["CONTEXT", "GOLDEN", "PROMPT", "Account", "Invoice", "Line"]


class Account(BaseModel):
    """The context: who is billed, at what tax rate, when, and the payment terms."""

    customer: str
    tax_rate: Decimal
    issued: dt.date
    payment_days: int


class Line(BaseModel):
    """One line of the invoice."""

    description: str = Field(max_length=40)
    quantity: int = Field(ge=1, le=100)
    unit_price: Decimal = Field(ge=0, le=10_000, decimal_places=2)
    amount: Decimal = Field(ge=0, le=1_000_000, decimal_places=2)

    @relation
    def amount_is_quantity_times_price(self) -> bool:
        """The amount is the quantity times the unit price."""
        return self.amount == self.quantity * self.unit_price


class Invoice(BaseModel):
    """The invoice."""

    customer: str = Field(max_length=60)
    issue_date: dt.date
    due_date: dt.date
    lines: list[Line] = Field(min_length=1, max_length=5)
    subtotal: Decimal = Field(ge=0, le=5_000_000, decimal_places=2)
    tax: Decimal = Field(ge=0, le=5_000_000, decimal_places=2)
    total: Decimal = Field(ge=0, le=10_000_000, decimal_places=2)

    @relation
    def billed_to_the_account(self, account: Account) -> bool:
        """The customer and the issue date are the account's."""
        return self.customer == account.customer and self.issue_date == account.issued

    @relation
    def due_after_the_terms(self, account: Account) -> bool:
        """Due the payment terms after the issue date."""
        return self.due_date == self.issue_date + dt.timedelta(days=account.payment_days)

    @relation
    def subtotal_is_the_sum(self) -> bool:
        """The subtotal adds the lines up."""
        return self.subtotal == sum(line.amount for line in self.lines)

    @relation
    def tax_at_the_rate(self, account: Account) -> bool:
        """The tax is the subtotal times the rate, to the cent."""
        return self.tax == round(self.subtotal * account.tax_rate, 2)

    @relation
    def total_adds_the_tax(self) -> bool:
        """The total is the subtotal plus the tax."""
        return self.total == self.subtotal + self.tax


CONTEXT = Account(
    customer="Harbor Lights Cafe",
    tax_rate=Decimal("0.0825"),
    issued=dt.date(2026, 12, 7),
    payment_days=30,
)

PROMPT = (
    "Write the invoice for Harbor Lights Cafe, issued on 2026-12-07 with payment due in 30 "
    "days, for: 12 bags of espresso beans at $18.50 each, 3 boxes of paper cups at $42.00 "
    "each, and 1 milk frother repair at $85.00. Sales tax is 8.25% of the subtotal, rounded "
    "to the cent."
)

GOLDEN = Invoice.model_validate(
    {
        "customer": "Harbor Lights Cafe",
        "issue_date": "2026-12-07",
        "due_date": "2027-01-06",
        "lines": [
            {
                "description": "Espresso beans, 1 kg bag",
                "quantity": 12,
                "unit_price": "18.50",
                "amount": "222.00",
            },
            {
                "description": "Paper cups, box of 500",
                "quantity": 3,
                "unit_price": "42.00",
                "amount": "126.00",
            },
            {
                "description": "Milk frother repair",
                "quantity": 1,
                "unit_price": "85.00",
                "amount": "85.00",
            },
        ],
        "subtotal": "433.00",
        "tax": "35.72",
        "total": "468.72",
    },
    context=CONTEXT,
)
"""The invoice the prompt asks for."""
