import os

from factorspec_sdk import Client
from factorspec_sdk.domains.meeting import SAMPLE_CONTEXT, SAMPLE_PROMPT, Meeting

# A plain `vllm serve /path/to/model` (or an SGLang server): no FactorSpec plug-in needed.
base_url = os.environ.get("VLLM_URL", "http://127.0.0.1:8000/v1")

client = Client(base_url=base_url)  # asks /v1/models who serves: vllm here
print(client.engine.name, client.engine.constraint_style)  # vllm-server tokens
slot = client.generate(Meeting, SAMPLE_PROMPT, context=SAMPLE_CONTEXT)
print(slot)
client.close()
