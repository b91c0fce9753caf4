from pydantic import BaseModel, Field

from factorspec_sdk import Client, IncompleteGenerationError
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.tokens.vocab import TokenizerInfo


class Note(BaseModel):
    text: str = Field(max_length=200)


tokenizer = TokenizerInfo.tiny(["\n", *(chr(c) for c in range(32, 127))])
engine = ScriptedEngine.from_script(tokenizer, '{"text": "' + "a" * 150 + '"}')
try:
    Client(engine).generate(Note, "Write a long note.", max_tokens=20)
except IncompleteGenerationError as exc:
    print(exc.code, exc.tokens)  # incomplete-generation 20
    print(exc.partial_text)  # a prefix of a valid record
