from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, Field

from factorspec_sdk import Places, relation
from factorspec_sdk.errors import RelationDefinitionError
from factorspec_sdk.graph import compile_spec

Cents = Annotated[float, Places(2)]  # floats written with at most two decimals


class FloatRates(BaseModel):
    vat: float


class Tolerance(BaseModel):
    net: Cents = Field(ge=0, le=1000)
    vat: Cents = Field(ge=0, le=1000)

    @relation
    def vat_at_the_rate(self, rates: FloatRates) -> bool:
        return abs(self.vat - self.net * rates.vat) < 0.006


class Equal(BaseModel):
    net: Cents = Field(ge=0, le=1000)
    vat: Cents = Field(ge=0, le=1000)

    @relation
    def vat_at_the_rate(self, rates: FloatRates) -> bool:
        return self.vat == self.net * rates.vat


class Mixed(BaseModel):
    net: Decimal = Field(ge=0, le=1000, decimal_places=2)
    vat: Decimal = Field(ge=0, le=1000, decimal_places=2)

    @relation
    def vat_at_the_rate(self, rates: FloatRates) -> bool:
        return self.vat == round(self.net * rates.vat, 2)  # Decimal * float raises


for model, rate in [(Tolerance, 0.25), (Tolerance, 0.2), (Equal, 0.2), (Mixed, 0.2)]:
    name = f"{model.__name__} at {rate}"
    try:
        compile_spec(model, FloatRates(vat=rate))
        print(f"{name}: compiles")
    except RelationDefinitionError as exc:
        print(f"{name}: {exc.code}: {exc.construct}")
