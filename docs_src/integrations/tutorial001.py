import os

from openai import OpenAI
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.ir import to_ir

client = OpenAI(base_url=os.environ["FACTORSPEC_URL"] + "/v1", api_key="unused")
model = client.models.list().data[0].id


class Budget(BaseModel):
    flights: int = Field(ge=0, le=900)
    hotel: int = Field(ge=0, le=900)
    total: int = Field(ge=0, le=1800)

    @relation
    def adds_up(self) -> bool:
        return self.total == self.flights + self.hotel


messages = [{"role": "user", "content": "A budget for a weekend in Rome, as JSON."}]

# parse sends Budget's JSON schema, which carries the relations: @relation put their IR
# under "x-factorspec" at its root (as llguidance reads "x-guidance")
completion = client.chat.completions.parse(model=model, messages=messages, response_format=Budget)
budget = completion.choices[0].message.parsed  # a Budget: parse validated it, relation included
print(budget, budget.total == budget.flights + budget.hotel)

# Or in the extension field, as a relation IR (the field wins over the schema key by key)
completion = client.chat.completions.parse(
    model=model,
    messages=messages,
    response_format=Budget,
    extra_body={"factorspec": {"ir": to_ir(Budget)}},
)
print(completion.choices[0].message.parsed)
