import os

from openai import OpenAI
from pydantic import BaseModel, ConfigDict, Field

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

# The relations travel in the extension field, as a relation IR.
completion = client.chat.completions.parse(
    model=model,
    messages=messages,
    response_format=Budget,
    extra_body={"factorspec": {"ir": to_ir(Budget)}},
)
budget = completion.choices[0].message.parsed  # a Budget: parse validated it, relation included
print(budget, budget.total == budget.flights + budget.hotel)


# Or inside the JSON schema itself, under "x-factorspec" (as llguidance reads "x-guidance"):
class SchemaBudget(Budget):
    model_config = ConfigDict(
        json_schema_extra=lambda schema, cls: schema.update({"x-factorspec": {"ir": to_ir(cls)}})
    )


completion = client.chat.completions.parse(
    model=model, messages=messages, response_format=SchemaBudget
)
print(completion.choices[0].message.parsed)
