import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from factorspec_sdk import Client, from_transformers
from factorspec_sdk.domains.meeting import SAMPLE_CONTEXT, SAMPLE_PROMPT, Meeting
from factorspec_sdk.engines.model_store import default_model_path

folder = default_model_path()  # here the default SmolLM2; any causal LM you have loaded
tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True)

engine = from_transformers(model, tokenizer)  # runs it as it is: its device, its dtype
print(engine.name, engine.device, engine.dtype, engine.dtype_choice.how)

client = Client(engine)
slot = client.generate(Meeting, SAMPLE_PROMPT, context=SAMPLE_CONTEXT)
print(slot)  # the only valid slot: Tuesday 12-14
