"""A shop order packed from warehouses: nested stock look-ups, prices, a parcel's weight.

The context is the shop's inventory: the units of each product in each warehouse (a
nested ``dict[str, dict[str, int]]``), prices in cents and weights in grams per product,
and the heaviest parcel the carrier takes. Each line takes a product from one warehouse
that has enough of it; the whole order ships from one warehouse, lists each product once,
and its line totals, total and parcel weight add up.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from factorspec_sdk import distinct, relation

__all__ = ["CONTEXT", "GOLDEN", "PROMPT", "Inventory", "Order", "OrderLine"]


class Inventory(BaseModel):
    """The context: stock per warehouse and product, prices, weights, the parcel limit."""

    stock: dict[str, dict[str, int]]
    price_cents: dict[str, int]
    weight_grams: dict[str, int]
    max_parcel_grams: int


class OrderLine(BaseModel):
    """One product of the order."""

    product: str
    warehouse: str
    quantity: int = Field(ge=1, le=50)
    line_cents: int = Field(ge=0, le=1_000_000)


class Order(BaseModel):
    """The order."""

    lines: list[OrderLine] = Field(min_length=1, max_length=8)
    total_cents: int = Field(ge=0, le=8_000_000)
    parcel_grams: int = Field(ge=0, le=100_000)

    @relation
    def in_stock(self, inv: Inventory) -> bool:
        """Each line's warehouse has enough of its product."""
        return all(
            line.warehouse in inv.stock
            and line.product in inv.stock[line.warehouse]
            and line.quantity <= inv.stock[line.warehouse][line.product]
            for line in self.lines
        )

    @relation
    def from_one_warehouse(self) -> bool:
        """The order ships from one warehouse, each product on one line."""
        return all(line.warehouse == self.lines[0].warehouse for line in self.lines) and distinct(
            line.product for line in self.lines
        )

    @relation
    def priced(self, inv: Inventory) -> bool:
        """Line totals at the list prices, and the order's total."""
        return all(
            line.line_cents == line.quantity * inv.price_cents[line.product] for line in self.lines
        ) and self.total_cents == sum(line.line_cents for line in self.lines)

    @relation
    def one_parcel(self, inv: Inventory) -> bool:
        """The parcel's weight adds the products' up and the carrier takes it."""
        return (
            self.parcel_grams
            == sum(line.quantity * inv.weight_grams[line.product] for line in self.lines)
            and self.parcel_grams <= inv.max_parcel_grams
        )


CONTEXT = Inventory(
    stock={
        "Lyon": {"kettle": 4, "teapot": 10, "mug": 40, "tea-tin": 0},
        "Lille": {"kettle": 1, "teapot": 2, "mug": 12, "tea-tin": 25},
        "Nantes": {"kettle": 6, "teapot": 0, "mug": 60, "tea-tin": 8},
    },
    price_cents={"kettle": 3499, "teapot": 2450, "mug": 899, "tea-tin": 1275},
    weight_grams={"kettle": 1450, "teapot": 900, "mug": 350, "tea-tin": 250},
    max_parcel_grams=20_000,
)

PROMPT = (
    "Pack this order from one warehouse: 2 kettles, 6 mugs and 3 tea tins. Stock: Lyon has "
    "4 kettles, 10 teapots, 40 mugs and no tea tins; Lille has 1 kettle, 2 teapots, 12 mugs "
    "and 25 tea tins; Nantes has 6 kettles, no teapots, 60 mugs and 8 tea tins. Prices: "
    "kettle 34.99, teapot 24.50, mug 8.99, tea tin 12.75 (give amounts in cents). Weights: "
    "kettle 1450 g, teapot 900 g, mug 350 g, tea tin 250 g; a parcel may weigh 20 kg."
)

GOLDEN = Order.model_validate(
    {
        "lines": [
            {"product": "kettle", "warehouse": "Nantes", "quantity": 2, "line_cents": 6998},
            {"product": "mug", "warehouse": "Nantes", "quantity": 6, "line_cents": 5394},
            {"product": "tea-tin", "warehouse": "Nantes", "quantity": 3, "line_cents": 3825},
        ],
        "total_cents": 16217,
        "parcel_grams": 5750,
    },
    context=CONTEXT,
)
"""The order: only Nantes has kettles, mugs and tea tins enough."""
