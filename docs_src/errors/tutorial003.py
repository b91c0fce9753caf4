from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, Field

from factorspec_sdk import RelationRaisesError, relation
from factorspec_sdk.graph import compile_spec


class Rules(BaseModel):
    rate: float  # a float: Decimal * float raises TypeError in Python


class Invoice(BaseModel):
    subtotal: Annotated[Decimal, Field(max_digits=8, decimal_places=2, ge=0)]
    tax: Annotated[Decimal, Field(max_digits=8, decimal_places=2, ge=0)]

    @relation
    def taxed(self, rules: Rules) -> bool:
        return self.tax == round(self.subtotal * rules.rate, 2)


try:
    compile_spec(Invoice, Rules(rate=0.2))
except RelationRaisesError as exc:
    print(exc.code)  # relation-raises, not unsatisfiable-spec
    print(exc.exception)  # TypeError: unsupported operand type(s) for *: ...
    print(exc.lineno)  # the line of self.subtotal * rules.rate
    print(exc)  # ... or convert it in the relation: Decimal(str(rules.rate))
