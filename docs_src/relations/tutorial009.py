from typing import Literal

from pydantic import BaseModel, Field

from factorspec_sdk import Client, relation

Category = Literal["rent", "food", "transport", "savings"]


class Household(BaseModel):
    income: int
    rent: int


class Budget(BaseModel):
    shares: dict[Category, int] = Field(min_length=3)

    @relation
    def whole(self) -> bool:
        return sum(self.shares.values()) == 100 and all(v > 0 for v in self.shares.values())

    @relation
    def rent_is_paid(self, home: Household) -> bool:
        return self.shares["rent"] * home.income >= home.rent * 100


home = Household(income=3000, rent=900)
client = Client()  # the embedded engine and its default model
budget = client.generate(Budget, "Split my monthly income into a budget.", context=home)
print(budget.shares)
print("sums to 100:", sum(budget.shares.values()) == 100)
client.close()
