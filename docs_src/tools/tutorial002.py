import os

import openai
from pydantic import BaseModel, ConfigDict, Field

from factorspec_sdk import relation
from factorspec_sdk.ir import to_ir
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

# function_tool: the tools entry of pydantic_function_tool, plus the relations' IR
# under "x-factorspec" at the root of its parameters
r = client.chat.completions.create(
    model=model, messages=messages, tools=[function_tool(BookRoom)], tool_choice="required"
)
for call in r.choices[0].message.tool_calls or []:
    booking = BookRoom.model_validate_json(call.function.arguments)  # checks the relation
    print(call.function.name, booking.from_hour < booking.to_hour)


# Or a model whose JSON schema carries its IR, so that openai.pydantic_function_tool
# (and Instructor's TOOLS mode) send the relations with it:
class SchemaBookRoom(BookRoom):
    model_config = ConfigDict(
        json_schema_extra=lambda schema, cls: schema.update({"x-factorspec": {"ir": to_ir(cls)}})
    )


r = client.chat.completions.create(
    model=model,
    messages=messages,
    tools=[openai.pydantic_function_tool(SchemaBookRoom)],
    tool_choice="required",
)
for call in r.choices[0].message.tool_calls or []:
    booking = SchemaBookRoom.model_validate_json(call.function.arguments)
    print(call.function.name, booking.from_hour < booking.to_hour)
