"""Where a call's time went: the parts of its wall, by name.

A scripted engine (a random model over a hand-made vocabulary) so the snippet runs at once;
the parts are the same on every engine, and on a server (with its network too).
"""

from pydantic import BaseModel, Field

from factorspec_sdk import Client
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.tokens.vocab import TokenizerInfo


class Stay(BaseModel):
    city: str = Field(max_length=12)
    nights: int = Field(ge=1, le=9)


tokenizer = TokenizerInfo.tiny(["\n", *(chr(c) for c in range(32, 127)), '{"', '": '])
client = Client(ScriptedEngine.random(tokenizer, seed=1))
result = client.generate(Stay, "Two nights in Oslo", return_result=True)

stats = result.stats
for name, seconds in stats.parts().items():
    if seconds:
        print(f"{name:24} {seconds * 1000:8.2f} ms  {seconds / stats.wall_seconds:5.1%}")
print(f"{'wall_seconds':24} {stats.wall_seconds * 1000:8.2f} ms")
print("parts add up to the wall:", abs(sum(stats.parts().values()) - stats.wall_seconds) < 1e-9)
