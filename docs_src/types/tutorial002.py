import uuid

from pydantic import BaseModel

from factorspec_sdk import Client, relation
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.tokens.vocab import TokenizerInfo

ADMIN = uuid.UUID("0a1b2c3d-4e5f-4789-abcd-ef0123456789")


class Transfer(BaseModel):
    source: uuid.UUID
    target: uuid.UUID
    approver: uuid.UUID | None = None

    @relation
    def not_to_itself(self) -> bool:
        return self.source != self.target

    @relation
    def approved_by_the_admin(self) -> bool:
        return self.approver is None or self.approver == ADMIN


tokenizer = TokenizerInfo.tiny(["\n", *(chr(c) for c in range(32, 127))])
with Client(ScriptedEngine.random(tokenizer, seed=3)) as client:
    t = client.generate(Transfer, "a transfer")
print(t.source != t.target, t.approver in (None, ADMIN))
