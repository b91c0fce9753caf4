"""A shop receipt with float prices: line totals, the total and the change to the cent.

The per-request context is the shop's price list, the customer's order (item and quantity)
and the amount paid. The relations hold the receipt to them with float arithmetic, compiled
with Python's IEEE-754 outcome exactly (see *Writing relations*): each line total is the unit
price times the quantity rounded to the cent, the total is the sum of the line totals within
half a cent, and the change is what was paid less the total. Prices are
``Annotated[float, Places(2)]``: the writer writes them with at most two decimals, which is
what lets a tolerance of half a cent and ``round(..., 2)`` compile exactly.

Once the model has named a line's item, its quantity, unit price and line total are fixed by
the order and the price list, and the total, the paid amount and the change are fixed by the
order alone: all are drafted as certain tokens. ``python -m examples.receipt`` validates a
hand-written receipt for the sample.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from factorspec_sdk import Places, distinct, relation

__all__ = ["SAMPLE_CONTEXT", "SAMPLE_PROMPT", "SAMPLE_RECEIPT", "Line", "Order", "Receipt", "main"]

Money = Annotated[float, Places(2), Field(ge=0, le=100_000)]
"""An amount of money: a float with at most two decimals."""


class Order(BaseModel):
    """Per-request constants: the shop's prices, what the customer ordered, what they paid."""

    shop: str
    prices: dict[str, float]
    items: dict[str, int]
    """Item name -> quantity ordered."""
    paid: float


class Line(BaseModel):
    """One line of the receipt."""

    item: str = Field(max_length=40)
    quantity: int = Field(ge=1, le=50)
    unit_price: Money
    line_total: Money

    @relation
    def priced(self) -> bool:
        """The line total is the unit price times the quantity, rounded to the cent."""
        return self.line_total == round(self.unit_price * self.quantity, 2)


class Receipt(BaseModel):
    """A receipt for one order."""

    shop: str = Field(max_length=60)
    lines: list[Line] = Field(min_length=1, max_length=6)
    total: Money
    paid: Money
    change: Money

    @relation
    def as_ordered(self, order: Order) -> bool:
        """One line per ordered item, with the quantity ordered and the listed price."""
        return (
            len(self.lines) == len(order.items)
            and distinct(line.item for line in self.lines)
            and all(
                order.items.get(line.item) == line.quantity
                and order.prices.get(line.item) == line.unit_price
                for line in self.lines
            )
        )

    @relation
    def adds_up(self) -> bool:
        """The total is the sum of the line totals, to the cent."""
        return abs(self.total - sum(line.line_total for line in self.lines)) < 0.005

    @relation
    def change_given(self, order: Order) -> bool:
        """The paid amount is the customer's; the change is what is left of it."""
        return self.paid == order.paid and self.change == round(self.paid - self.total, 2)


SAMPLE_CONTEXT = Order(
    shop="Corner Bakery",
    prices={"sourdough loaf": 4.85, "croissant": 1.95, "coffee": 2.4, "apple tart": 3.15},
    items={"croissant": 3, "coffee": 2, "apple tart": 1},
    paid=20.0,
)


def _prompt(order: Order) -> str:
    prices = ", ".join(f"{name} {price:.2f}" for name, price in order.prices.items())
    items = ", ".join(f"{qty} x {name}" for name, qty in order.items.items())
    return (
        f"Write the receipt of {order.shop} (prices: {prices}) for an order of {items}, "
        f"paid with {order.paid:.2f}. Answer with JSON."
    )


SAMPLE_PROMPT = _prompt(SAMPLE_CONTEXT)
"""The sample order; its total is 13.80 and its change 6.20."""

SAMPLE_RECEIPT = {
    "shop": "Corner Bakery",
    "lines": [
        {"item": "croissant", "quantity": 3, "unit_price": 1.95, "line_total": 5.85},
        {"item": "coffee", "quantity": 2, "unit_price": 2.4, "line_total": 4.8},
        {"item": "apple tart", "quantity": 1, "unit_price": 3.15, "line_total": 3.15},
    ],
    "total": 13.8,
    "paid": 20,
    "change": 6.2,
}
"""The one valid receipt for the sample order, up to the order of its lines and the shop."""


def main() -> None:
    """Validate a hand-written receipt for the sample order and print it."""
    print(SAMPLE_PROMPT, end="\n\n")
    receipt = Receipt.model_validate(SAMPLE_RECEIPT, context=SAMPLE_CONTEXT)
    for line in receipt.lines:
        print(f"{line.quantity} x {line.item:<12} {line.unit_price:6.2f} {line.line_total:7.2f}")
    print(f"total {receipt.total:.2f}, paid {receipt.paid:.2f}, change {receipt.change:.2f}")


if __name__ == "__main__":
    main()
