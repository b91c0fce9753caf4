import os

import openai
from pydantic import BaseModel, Field

import factorspec_sdk
from factorspec_sdk import relation


class Split(BaseModel):
    """Three shares of a bill that add up to it."""

    alice: int = Field(ge=0, le=100)
    bob: int = Field(ge=0, le=100)
    carol: int = Field(ge=0, le=100)

    @relation
    def adds_up(self, total: int) -> bool:
        return self.alice + self.bob + self.carol == total


raw = openai.OpenAI(base_url=os.environ["FACTORSPEC_URL"] + "/v1", api_key="unused")
client = factorspec_sdk.from_openai(raw)
model = raw.models.list().data[0].id
messages = [{"role": "user", "content": "Split a bill of 90 between Alice, Bob and Carol."}]

# Instructor's create_partial: views as the server streams the record, then the record
for split in client.chat.completions.create_partial(
    model=model, messages=messages, response_model=Split, context=90
):
    print(type(split).__name__, split.alice, split.bob, split.carol)

# Instructor's create_iterable: several records, each handed out as soon as it ends
splits = client.chat.completions.create_iterable(
    model=model, messages=messages, response_model=Split, context=90
)
print([s.alice + s.bob + s.carol for s in splits])
