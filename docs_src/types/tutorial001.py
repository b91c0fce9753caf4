import datetime as dt
import decimal

from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.relations.layout import GrammarLayout
from factorspec_sdk.relations.pydantic_layout import build_layout


class Booking(BaseModel):
    hotel: str = Field(max_length=40)
    nights: int = Field(ge=1, le=14)
    first_day: int = Field(ge=1, le=31)
    last_day: int = Field(ge=1, le=45)
    check_in: dt.date
    arrives: dt.datetime
    rate: decimal.Decimal = Field(max_digits=7, decimal_places=2, ge=0)
    rating: float | None = Field(None, ge=0, le=5)

    @relation
    def stay_length(self) -> bool:
        return self.last_day == self.first_day + self.nights


for f in build_layout(Booking).fields:
    kind = "grammar" if isinstance(f.node, GrammarLayout) else "writer"
    print(f"{f.name}: {kind}")

spec = compile_spec(Booking)  # the relation reads int fields; the grammar values ride along
print(spec)
