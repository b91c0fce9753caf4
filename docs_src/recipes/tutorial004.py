import os

import openai
from pydantic import BaseModel, Field, ValidationError

import factorspec_sdk
from factorspec_sdk import Client, relation
from factorspec_sdk.ir import to_ir


class Household(BaseModel):
    income: int


class Budget(BaseModel):
    rent: int = Field(ge=0, le=10_000)
    food: int = Field(ge=0, le=10_000)
    savings: int = Field(ge=0, le=10_000)

    @relation
    def spends_the_income(self, household: Household) -> bool:
        return self.rent + self.food + self.savings == household.income


home = Household(income=3200)
messages = [{"role": "user", "content": "A monthly budget for an income of 3200 dollars."}]
base_url = os.environ.get("FACTORSPEC_URL", "http://127.0.0.1:8000") + "/v1"  # factorspec serve
raw = openai.OpenAI(base_url=base_url, api_key="unused")
model = raw.models.list().data[0].id

# FactorSpec's client: context= is what the relations are compiled for
budget = Client(base_url=base_url).generate(Budget, messages, context=home)
print("Client:", budget.rent + budget.food + budget.savings)

# Instructor's call shape: context= is also Pydantic's validation context
client = factorspec_sdk.from_openai(raw)
budget = client.chat.completions.create(
    model=model, messages=messages, response_model=Budget, context=home
)
print("from_openai:", budget.rent + budget.food + budget.savings)

# The openai client: the context is folded into the IR; validate the text with it yourself
ir = to_ir(Budget, home)
completion = raw.chat.completions.create(
    model=model, messages=messages, extra_body={"factorspec": {"ir": ir}}
)
text = completion.choices[0].message.content or ""
budget = Budget.model_validate_json(text, context=home)
print("create:", budget.rent + budget.food + budget.savings)

try:  # parse validates with no context, so a relation that reads one fails there
    raw.chat.completions.parse(
        model=model,
        messages=messages,
        response_format=Budget,
        extra_body={"factorspec": {"ir": ir}},
    )
except ValidationError as exc:
    print("parse:", exc.errors()[0]["msg"])
