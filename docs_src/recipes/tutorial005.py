from pydantic import BaseModel, Field

from factorspec_sdk import Client, relation


class Order(BaseModel):
    pizzas: int = Field(ge=1, le=9)
    drinks: int = Field(ge=0, le=9)

    @relation
    def a_drink_per_pizza_at_most(self) -> bool:
        return self.drinks <= self.pizzas


client = Client("scripted")  # a random model that reads nothing at all
order = client.generate(Order, "Five pizzas and no drinks, please.")
print(order)  # valid: at most a drink per pizza; faithful to the text only by chance
print("valid:", order.drinks <= order.pizzas)


class Asked(BaseModel):
    """What the text says, as a context: then the relations make the record say it too."""

    pizzas: int
    drinks: int


class FaithfulOrder(Order):
    @relation
    def as_asked(self, asked: Asked) -> bool:
        return self.pizzas == asked.pizzas and self.drinks == asked.drinks


order = client.generate(
    FaithfulOrder, "Five pizzas and no drinks, please.", context=Asked(pizzas=5, drinks=0)
)
print(order)  # pizzas=5 drinks=0, whatever the model
