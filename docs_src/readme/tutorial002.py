import os

import openai

import factorspec_sdk
from factorspec_sdk.domains.trip import Itinerary, generate_problem, prompt_for

base_url = os.environ.get("FACTORSPEC_URL", "http://127.0.0.1:8000") + "/v1"  # factorspec serve
raw = openai.OpenAI(base_url=base_url, api_key="unused")
trip = generate_problem(3, seed=1)

client = factorspec_sdk.from_openai(raw)  # in place of instructor.from_openai(raw)
plan = client.chat.completions.create(
    model=raw.models.list().data[0].id,
    messages=[{"role": "user", "content": prompt_for(trip)}],
    response_model=Itinerary,
    context=trip,
    max_retries=2,
)
print([(s.city, s.first_day, s.last_day) for s in plan.stays])
