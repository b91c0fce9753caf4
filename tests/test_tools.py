"""``client.call``: tools as models or functions, the record of calls, relations on arguments."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import AsyncClient, Client, plain_json_schema, relation, relations_of
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import to_ir
from factorspec_sdk.relations.layout import UnionLayout
from factorspec_sdk.tools import (
    FunctionArguments,
    Tool,
    calls_model,
    function_tool,
    tools_of,
    tools_prompt,
)
from tests.helpers import tiny_tokenizer

TOK = tiny_tokenizer()


def engine(seed: int = 2) -> ScriptedEngine:
    return ScriptedEngine.random(TOK, seed=seed, temperature_scale=2.0)


class GetWeather(BaseModel):
    """Get the weather in a city."""

    city: str = Field(max_length=8)
    unit: Literal["c", "f"] = "c"


class BookRoom(BaseModel):
    """Book a hotel room for the nights from ``first`` up to ``last``."""

    city: str = Field(max_length=8)
    first: int = Field(ge=1, le=9)
    last: int = Field(ge=1, le=9)

    @relation
    def forward(self) -> bool:
        return self.first < self.last


class Budget(BaseModel):
    """The most nights the traveller pays for."""

    nights: int


class Stay(BaseModel):
    """A stay the budget allows."""

    nights: int = Field(ge=1, le=9)

    @relation
    def affordable(self, budget: Budget) -> bool:
        return self.nights <= budget.nights


def convert(amount: int, currency: Literal["EUR", "USD"] = "EUR") -> str:
    """Convert an amount of money."""
    return f"{amount} {currency}"


def test_tools_of_models_functions_and_unions() -> None:
    tools = tools_of([GetWeather, convert])
    assert [t.name for t in tools] == ["GetWeather", "convert"]
    assert tools[0].description == "Get the weather in a city."
    args = tools[1].arguments
    assert issubclass(args, FunctionArguments)
    assert args(amount=3).run() == "3 EUR"  # type: ignore[call-arg, attr-defined]
    assert [t.name for t in tools_of(GetWeather | BookRoom)] == ["GetWeather", "BookRoom"]
    assert tools_of([Tool.of(GetWeather)])[0] == tools[0]
    with pytest.raises(TypeError, match="share the name"):
        tools_of([GetWeather, GetWeather])
    with pytest.raises(TypeError, match="type annotations"):
        tools_of([lambda x: x])
    with pytest.raises(TypeError, match="at least one"):
        tools_of([])
    schema = tools[0].schema()
    assert schema["function"]["name"] == "GetWeather"
    assert "GetWeather" in tools_prompt(tools) and "convert" in tools_prompt(tools)


def test_the_calls_record_is_a_union_the_writer_lays_out() -> None:
    model = calls_model(tools_of([GetWeather, BookRoom]), max_calls=3)
    spec = compile_spec(model)
    item = spec.layout.field("calls").node.item  # type: ignore[union-attr]
    assert isinstance(item, UnionLayout) and item.tag == "name"
    assert "forward (calls[0]<Call1>.arguments)" in spec.factor_formulas()


def test_a_call_is_the_arguments_of_one_tool_and_its_relations_hold() -> None:
    seen: set[str] = set()
    for seed in range(12):
        call = Client(engine(seed)).call(
            [GetWeather, BookRoom], "a room in Oslo, nights 3 to 5", temperature=1.0, seed=seed
        )
        assert isinstance(call, GetWeather | BookRoom)
        seen.add(type(call).__name__)
        if isinstance(call, BookRoom):
            assert call.first < call.last
    assert seen == {"GetWeather", "BookRoom"}


def test_relations_of_arguments_read_the_context() -> None:
    for nights in (1, 3):
        for seed in range(4):
            stay = Client(engine(seed)).call(
                [Stay], "stay", context=Budget(nights=nights), temperature=1.0, seed=seed
            )
            assert isinstance(stay, Stay) and stay.nights <= nights


def test_parallel_calls_and_functions() -> None:
    client = Client(engine())
    calls = client.call([GetWeather, convert], "weather and money", parallel=True, max_calls=3)
    assert 1 <= len(calls) <= 3
    for call in calls:
        assert isinstance(call, GetWeather | FunctionArguments)
        if isinstance(call, FunctionArguments):
            assert call.run().endswith(("EUR", "USD"))
    with pytest.raises(TypeError, match="parallel"):
        client.call([GetWeather], "x", max_calls=2)
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"}]
    assert isinstance(client.call([GetWeather], messages), GetWeather)


def test_async_call() -> None:
    async def main() -> BaseModel | list[BaseModel]:
        async with AsyncClient(engine()) as client:
            return await client.call([BookRoom], "book")

    call = asyncio.run(main())
    assert isinstance(call, BookRoom) and call.first < call.last


def test_function_tool_carries_the_relations_as_openai_sends_a_tool() -> None:
    plain = function_tool(GetWeather)
    assert plain == Tool.of(GetWeather).schema()  # no relation: the plain schema
    booking = function_tool(BookRoom)["function"]
    assert booking["name"] == "BookRoom" and booking["description"].startswith("Book a hotel")
    carried = booking["parameters"].pop("x-factorspec")
    assert carried == {"ir": to_ir(BookRoom)}
    assert booking["parameters"] == plain_json_schema(BookRoom)
    # a relation that reads a context: its IR for that context
    stay = function_tool(Stay, Budget(nights=2))["function"]["parameters"]["x-factorspec"]
    assert stay == {"ir": to_ir(Stay, Budget(nights=2))}
    # the models' own schemas (what pydantic_function_tool sends): the IR without a context,
    # and for relations that read one, the marker the server refuses
    assert BookRoom.model_json_schema()["x-factorspec"] == carried
    assert Stay.model_json_schema()["x-factorspec"]["unexported"]["relations"] == [
        f"Stay.{r.name}" for r in relations_of(Stay)
    ]


def test_the_prompt_lists_no_relation_ir() -> None:
    described = function_tool(BookRoom)["function"]
    text = tools_prompt([described])
    assert "x-factorspec" not in text and '"first"' in text
    assert tools_prompt([described]) == tools_prompt([Tool.of(BookRoom)])
