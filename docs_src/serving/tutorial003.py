import os

from openai import OpenAI

from factorspec_sdk.domains.trip import SAMPLE_CONTEXT, SAMPLE_PROMPT, Itinerary
from factorspec_sdk.ir import to_ir

base_url = os.environ.get("FACTORSPEC_URL", "http://127.0.0.1:8000") + "/v1"
client = OpenAI(base_url=base_url, api_key="unused")  # `factorspec serve --api-key` to require one
model = client.models.list().data[0].id  # the served model: SmolLM2-135M-Instruct

completion = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": SAMPLE_PROMPT}],
    # The extension field: the relation IR, with the context folded in as constants. The
    # server appends the schema hint to the last user message, as Client.generate does.
    extra_body={"factorspec": {"ir": to_ir(Itinerary, SAMPLE_CONTEXT)}},
)
choice = completion.choices[0]
print(choice.finish_reason)  # stop: a complete record, re-checked by the server
plan = Itinerary.model_validate_json(choice.message.content or "", context=SAMPLE_CONTEXT)
for stay in plan.stays:
    print(f"Day {stay.first_day}-{stay.last_day}: {stay.city}")
print((completion.model_extra or {}).get("factorspec"))  # decoding stats
