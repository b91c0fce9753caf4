"""Invoices whose arithmetic always adds up.

Amounts are integer cents (relations read int fields, not floats). The per-request context
gives the tax rate and the largest number of line items. ``python -m examples.invoice`` validates a
hand-written invoice for the sample purchase.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from factorspec_sdk import relation

__all__ = ["SAMPLE_CONTEXT", "SAMPLE_PROMPT", "Invoice", "InvoiceContext", "LineItem", "main"]

MAX_ITEMS = 10
MAX_AMOUNT_CENTS = 100 * 100_000
"""Largest line amount: 100 units at 1000.00 each."""


class InvoiceContext(BaseModel):
    """Per-request constants: the tax rate in percent and the most line items allowed."""

    tax_rate_percent: int = Field(ge=0, le=100)
    max_items: int = Field(ge=1, le=MAX_ITEMS)


class LineItem(BaseModel):
    """One line: ``quantity`` units at ``unit_price_cents`` each."""

    description: str = Field(max_length=40)
    quantity: int = Field(ge=1, le=100)
    unit_price_cents: int = Field(ge=1, le=100_000)
    amount_cents: int = Field(ge=1, le=MAX_AMOUNT_CENTS)

    @relation
    def amount_is_quantity_times_price(self) -> bool:
        """The line amount is the quantity times the unit price."""
        return self.amount_cents == self.quantity * self.unit_price_cents


class Invoice(BaseModel):
    """Line items, their subtotal, the tax on it and the total."""

    items: list[LineItem] = Field(min_length=1, max_length=MAX_ITEMS)
    subtotal_cents: int = Field(ge=0, le=MAX_ITEMS * MAX_AMOUNT_CENTS)
    tax_cents: int = Field(ge=0, le=MAX_ITEMS * MAX_AMOUNT_CENTS)
    total_cents: int = Field(ge=0, le=2 * MAX_ITEMS * MAX_AMOUNT_CENTS)

    @relation
    def subtotal_is_sum(self) -> bool:
        """The subtotal adds up the line amounts."""
        return self.subtotal_cents == sum(item.amount_cents for item in self.items)

    @relation
    def tax_at_rate(self, ctx: InvoiceContext) -> bool:
        """The tax is the subtotal times the rate, rounded down to the cent."""
        return self.tax_cents == self.subtotal_cents * ctx.tax_rate_percent // 100

    @relation
    def total_is_subtotal_plus_tax(self) -> bool:
        """The total is the subtotal plus the tax."""
        return self.total_cents == self.subtotal_cents + self.tax_cents

    @relation
    def item_limit(self, ctx: InvoiceContext) -> bool:
        """No more line items than the context allows."""
        return len(self.items) <= ctx.max_items


SAMPLE_CONTEXT = InvoiceContext(tax_rate_percent=8, max_items=5)

SAMPLE_PROMPT = (
    "Write the invoice for this purchase, with amounts in cents and 8% sales tax on the "
    "subtotal (rounded down to the cent): 3 notebooks at $4.50 each, 2 boxes of pens at "
    "$7.25 each, and 1 desk lamp at $39.99."
)


def main() -> None:
    """Validate a hand-written invoice for the sample purchase and print it."""
    invoice = {
        "items": [
            {
                "description": "notebook",
                "quantity": 3,
                "unit_price_cents": 450,
                "amount_cents": 1350,
            },
            {
                "description": "box of pens",
                "quantity": 2,
                "unit_price_cents": 725,
                "amount_cents": 1450,
            },
            {
                "description": "desk lamp",
                "quantity": 1,
                "unit_price_cents": 3999,
                "amount_cents": 3999,
            },
        ],
        "subtotal_cents": 6799,
        "tax_cents": 543,
        "total_cents": 7342,
    }
    print(SAMPLE_PROMPT, end="\n\n")
    print(Invoice.model_validate(invoice, context=SAMPLE_CONTEXT).model_dump_json(indent=2))


if __name__ == "__main__":
    main()
