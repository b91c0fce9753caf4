import os

from openai import OpenAI

client = OpenAI(base_url=os.environ["FACTORSPEC_URL"] + "/v1", api_key="unused")
model = client.models.list().data[0].id


def ask(constraint: dict[str, object]) -> str:
    completion = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Where should I go?"}],
        extra_body={"structured_outputs": constraint},  # the call vLLM takes, unchanged
    )
    return completion.choices[0].message.content or ""


print(ask({"choice": ["Paris", "Rome", "Berlin"]}))  # one of the three, as bare text
print(ask({"regex": "(Paris|Rome), day [1-7]"}))  # a full match of the regex
schema = {
    "type": "object",
    "properties": {
        "city": {"enum": ["Paris", "Rome"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 30},
    },
    "required": ["city", "days"],
}
print(ask({"json": schema}))  # a record valid for the schema
