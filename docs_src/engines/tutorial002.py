from typing import Literal

from pydantic import BaseModel

from factorspec_sdk import Client, relation
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.tokens.vocab import TokenizerInfo


class Light(BaseModel):
    color: Literal["red", "amber", "green"]
    go: bool

    @relation
    def go_on_green(self) -> bool:
        return self.go == (self.color == "green")


# A hand-made vocabulary: every character the JSON and the prompt need, plus a few merges.
pieces = ["\n", *(chr(c) for c in range(32, 127)), '{"', '": ', '", "', "true", "false", "red"]
tokenizer = TokenizerInfo.tiny(pieces)
# A "model" that wants to write this text (canonical JSON: json.dumps separators);
# the relations still decide what is allowed.
engine = ScriptedEngine.from_script(tokenizer, '{"color": "red", "go": true}')

client = Client(engine)
result = client.generate(Light, "Which light?", return_result=True)
print(result.value)  # color='red' go=False: `go` is certain once the color is chosen
print(engine.forward_calls, "forward passes for", len(result.tokens), "tokens")
