import asyncio
from typing import Literal

from pydantic import BaseModel

from factorspec_sdk import AsyncClient
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.tokens.vocab import TokenizerInfo


class Answer(BaseModel):
    verdict: Literal["yes", "no"]


tokenizer = TokenizerInfo.tiny(["\n", *(chr(c) for c in range(32, 127))])


async def main() -> None:
    async with AsyncClient(ScriptedEngine.random(tokenizer, seed=1)) as client:
        answers = await asyncio.gather(
            *(client.generate(Answer, f"question {i}") for i in range(4))
        )  # the four callers wait together, so they are decoded as one batch
        print([a.verdict for a in answers], client.batch_sizes)


asyncio.run(main())
