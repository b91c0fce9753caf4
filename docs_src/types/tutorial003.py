from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from factorspec_sdk import Client, relation
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.vocab import TokenizerInfo


class Query(BaseModel):
    table: Literal["users", "orders"]
    conditions: list[str] | None = None  # optional: the model may leave it out
    limit: int = Field(default=10, ge=1, le=100)


tokenizer = TokenizerInfo.tiny(["\n", *(chr(c) for c in range(32, 127))])
brace = tokenizer.encode("}")[0]


def closes(prefix: object) -> np.ndarray:
    """A model that would rather end every object: it leaves what it may out."""
    row = np.zeros(tokenizer.vocab_size, dtype=np.float32)
    row[brace] = 10.0
    return row


with Client(ScriptedEngine(tokenizer, closes)) as client:
    q = client.generate(Query, "the users table")
print(q.conditions, q.limit)  # Pydantic's defaults: both keys were left out


class Page(BaseModel):
    rows: list[int] = Field(default_factory=list)  # read below, with no value as default
    limit: int = Field(default=10, ge=1, le=100)  # read below, left out as 10

    @relation
    def within_limit(self) -> bool:
        return len(self.rows) <= self.limit


for r in compile_spec(Page).restrictions():  # what `factorspec check` lists
    print(f"{r.rule}: {r.path}")
