import asyncio
import os

import openai
from pydantic import BaseModel, Field

import factorspec_sdk
from factorspec_sdk import relation


class Split(BaseModel):
    mine: int = Field(ge=0, le=100)
    yours: int = Field(ge=0, le=100)

    @relation
    def whole(self) -> bool:
        return self.mine + self.yours == 100


async def main() -> None:
    raw = openai.AsyncOpenAI(base_url=os.environ["FACTORSPEC_URL"] + "/v1", api_key="unused")
    client = factorspec_sdk.from_openai(raw)  # the async form
    model = (await raw.models.list()).data[0].id
    splits = await asyncio.gather(
        *(
            client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": f"Split bill {i}."}],
                response_model=Split,
            )
            for i in range(3)
        )
    )
    print([s.mine + s.yours for s in splits])
    await raw.close()


asyncio.run(main())
