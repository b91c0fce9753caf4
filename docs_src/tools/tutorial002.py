import os

import openai
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.tools import function_tool

client = openai.OpenAI(base_url=os.environ["FACTORSPEC_URL"] + "/v1", api_key="unused")
model = client.models.list().data[0].id


class BookRoom(BaseModel):
    """Book a meeting room from one hour of the day to a later one."""

    room: str = Field(max_length=20)
    from_hour: int = Field(ge=0, le=23)
    to_hour: int = Field(ge=0, le=23)

    @relation
    def forward(self) -> bool:
        return self.from_hour < self.to_hour


messages = [{"role": "user", "content": "Book the Oak room from 11 to 15."}]

# pydantic_function_tool sends BookRoom's JSON schema, and @relation put the relations'
# IR in it (under "x-factorspec" at its root): every call satisfies them
r = client.chat.completions.create(
    model=model,
    messages=messages,
    tools=[openai.pydantic_function_tool(BookRoom)],
    tool_choice="required",
)
for call in r.choices[0].message.tool_calls or []:
    booking = BookRoom.model_validate_json(call.function.arguments)  # checks the relation
    print("pydantic_function_tool", booking.from_hour < booking.to_hour)


# A relation that reads a context cannot be in the schema without that context
class OpenHours(BaseModel):
    opens: int
    closes: int


class ShopBooking(BookRoom):
    @relation
    def while_open(self, shop: OpenHours) -> bool:
        return shop.opens <= self.from_hour and self.to_hour <= shop.closes


shop = OpenHours(opens=8, closes=20)
try:  # its schema names the relation instead, and the server refuses to decode without it
    client.chat.completions.create(
        model=model, messages=messages, tools=[openai.pydantic_function_tool(ShopBooking)]
    )
except openai.UnprocessableEntityError as e:
    print("refused:", e.code)

# function_tool sends the same tool with the relations' IR for your context
r = client.chat.completions.create(
    model=model,
    messages=messages,
    tools=[function_tool(ShopBooking, context=shop)],
    tool_choice="required",
)
for call in r.choices[0].message.tool_calls or []:
    booking = ShopBooking.model_validate_json(call.function.arguments, context=shop)
    print("function_tool", booking.from_hour < booking.to_hour <= 20)
