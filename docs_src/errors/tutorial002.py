from pydantic import BaseModel, Field

from factorspec_sdk import Client, TokenBudgetError
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.tokens.vocab import TokenizerInfo


class Note(BaseModel):
    text: str = Field(max_length=200)


tokenizer = TokenizerInfo.tiny(["\n", *(chr(c) for c in range(32, 127))])
engine = ScriptedEngine.from_script(tokenizer, '{"text": "' + "a" * 150 + '"}')
client = Client(engine)
# the model would write 150 letters; with max_tokens=20 the mask closes the string in time
note = client.generate(Note, "Write a long note.", max_tokens=20)
print(note.text)  # aaaaaaaa: 8 letters, a record of exactly 20 tokens
try:
    client.generate(Note, "Write a long note.", max_tokens=10)
except TokenBudgetError as exc:
    print(exc.code, exc.max_tokens, exc.min_tokens)  # token-budget 10 12
