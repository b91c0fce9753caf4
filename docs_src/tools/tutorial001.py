from typing import Literal

from pydantic import BaseModel, Field

from factorspec_sdk import Client, relation


class GetWeather(BaseModel):
    """Get the current weather in a city."""

    city: str = Field(max_length=20)
    unit: Literal["celsius", "fahrenheit"] = "celsius"


class BookRoom(BaseModel):
    """Book a hotel room in a city from one night of the month to a later one."""

    city: str = Field(max_length=20)
    first_night: int = Field(ge=1, le=31)
    last_night: int = Field(ge=1, le=31)

    @relation
    def forward(self) -> bool:
        return self.first_night < self.last_night


def convert(amount: int, currency: Literal["EUR", "USD", "NOK"]) -> str:
    """Convert an amount of money into a currency."""
    return f"{amount} {currency}"


client = Client()
call = client.call([GetWeather, BookRoom, convert], "What is the weather like in Rome?")
print(type(call).__name__, call)  # the arguments of the tool the model chose

calls = client.call(
    [GetWeather, BookRoom, convert],
    "What is the weather in Oslo and in Rome?",
    parallel=True,
    max_calls=2,
)
for c in calls:  # each call's arguments; a function's come with .run()
    print(type(c).__name__, c.run() if hasattr(c, "run") else c)
if isinstance(calls[-1], BookRoom):
    assert calls[-1].first_night < calls[-1].last_night  # the relation holds
