from pydantic import BaseModel, Field

from factorspec_sdk import Client, FactorSpecError, distinct, relation
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.tokens.vocab import TokenizerInfo


class Team(BaseModel):
    members: list[str] = Field(max_length=3)

    @relation
    def everyone(self, names: list[str]) -> bool:
        return (
            len(self.members) == len(names)
            and all(m in names for m in self.members)
            and distinct(m for m in self.members)
        )


tokenizer = TokenizerInfo.tiny(["\n", *(chr(c) for c in range(32, 127))])
client = Client(ScriptedEngine.random(tokenizer, seed=1, temperature_scale=3.0))
contexts = [["Ada", "Bo"], ["Ada", "Bo", "Cy", "Di"], ["Cy"]]  # 4 names > max_length 3
# one decoder run for the batch; a record that fails is its error, in its place
results = client.generate_batch(
    Team, ["team 1", "team 2", "team 3"], contexts=contexts, return_exceptions=True
)
for r in results:
    print(r.code if isinstance(r, FactorSpecError) else sorted(r.members))
