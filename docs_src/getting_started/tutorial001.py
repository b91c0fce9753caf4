from pydantic import BaseModel, Field

from factorspec_sdk import Client, relation


class Household(BaseModel):
    """The per-request context: constants the relations read."""

    income: int


class Budget(BaseModel):
    rent: int = Field(ge=0, le=10_000)
    food: int = Field(ge=0, le=10_000)
    savings: int = Field(ge=0, le=10_000)

    @relation
    def spends_the_income(self, household: Household) -> bool:
        return self.rent + self.food + self.savings == household.income

    @relation
    def saves_a_tenth(self, household: Household) -> bool:
        return self.savings * 10 >= household.income


client = Client()  # the embedded engine and its default model, on CPU or GPU
result = client.generate(
    Budget,
    "Plan a monthly budget for an income of 3200 dollars. The rent is 1400 dollars.",
    context=Household(income=3200),
    return_result=True,
)
print(result.value)  # a Budget whose three amounts add up to 3200
print(result.stats.summary())
