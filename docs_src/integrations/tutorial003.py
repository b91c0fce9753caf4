import os

import openai
from pydantic import BaseModel, Field, field_validator

import factorspec_sdk
from factorspec_sdk import distinct, relation


class Stay(BaseModel):
    city: str
    days: int = Field(ge=1, le=7)


class Trip(BaseModel):
    stays: list[Stay] = Field(max_length=4)
    note: str = Field(max_length=12)

    @relation
    def every_city_once(self, nights: dict[str, int]) -> bool:
        return (
            len(self.stays) == len(nights)
            and all(s.city in nights for s in self.stays)
            and distinct(s.city for s in self.stays)
        )

    @relation
    def stay_lengths(self, nights: dict[str, int]) -> bool:
        return all(s.days == nights[s.city] for s in self.stays)

    @field_validator("note")  # an ordinary validator: checked here, re-asked if it fails
    @classmethod
    def no_shouting(cls, value: str) -> str:
        if value.isupper():
            raise ValueError("the note must not be all capitals")
        return value


raw = openai.OpenAI(base_url=os.environ["FACTORSPEC_URL"] + "/v1", api_key="unused")
client = factorspec_sdk.from_openai(raw)
model = raw.models.list().data[0].id
nights = {"Paris": 3, "Rome": 2, "Berlin": 4}

trip = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Plan my trip."}],
    response_model=Trip,
    context=nights,  # the relations' context, and Pydantic's validation context
    max_retries=2,
)
print([(s.city, s.days) for s in trip.stays])

trip, completion = client.chat.completions.create_with_completion(
    model=model,
    messages=[{"role": "user", "content": "Plan my trip."}],
    response_model=Trip,
    context=nights,
)
print(completion.usage.completion_tokens > 0, completion.choices[0].finish_reason)
