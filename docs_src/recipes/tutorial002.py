from decimal import Decimal

from pydantic import BaseModel, Field

from factorspec_sdk import Client, relation


class Rates(BaseModel):
    """The context: the VAT rate, a Decimal like the amounts (0.2 as a float would not do)."""

    vat: Decimal


class Line(BaseModel):
    item: str = Field(max_length=20)
    net: Decimal = Field(ge=0, le=1000, decimal_places=2)
    vat: Decimal = Field(ge=0, le=1000, decimal_places=2)

    @relation
    def vat_at_the_rate(self, rates: Rates) -> bool:
        return self.vat == round(self.net * rates.vat, 2)  # exact, half to even as in Python


class Invoice(BaseModel):
    lines: list[Line] = Field(min_length=1, max_length=3)
    total: Decimal = Field(ge=0, le=10_000, decimal_places=2)

    @relation
    def adds_up(self) -> bool:
        return self.total == sum(line.net + line.vat for line in self.lines)  # exact ==


rates = Rates(vat=Decimal("0.2"))
client = Client("scripted")  # a random test model; Client() for the default model
invoice = client.generate(Invoice, "Invoice two hours of consulting.", context=rates)
for line in invoice.lines:
    print(f"{line.item!r}: {line.net} + {line.vat} VAT")
print("total:", invoice.total)
print("checked:", Invoice.model_validate(invoice.model_dump(), context=rates) == invoice)
