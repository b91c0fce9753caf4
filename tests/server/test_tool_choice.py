"""How much a tool answer may hold: the number of calls, the length of a message, the prompt.

The scripted model here acts on a word of the user's message: ``again`` keeps calling (it
prefers the list's ``,`` to its ``]``) and writes the same arguments each time (the first
digit a mask allows, the same letter), ``count`` keeps calling with other arguments each
time (the hour is the number of calls before it, as a digit it repeats while it may), ``once``
closes the list after one call, ``talk``
answers a message that never ends on its own (it never writes the closing quote). Each
is what SmolLM2 did under ``tool_choice: "auto"`` (issue 39: a message repeated for 2,048
tokens, eight calls of which seven were junk; under ``"required"``, the same call
``{"from_hour": 15, "to_hour": 18}`` four times).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import instructor
import numpy as np
import numpy.typing as npt
import openai  # noqa: TID253
import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import plain_json_schema
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.ir import IRCompiler, IRLimits
from factorspec_sdk.server import create_app
from factorspec_sdk.server.protocol import DEFAULT_TOOL_CALLS, ChatRequest
from factorspec_sdk.server.specs import prepare
from factorspec_sdk.server.tool_calls import MESSAGE_MAX_CHARS, plan_tools
from factorspec_sdk.tools import function_tool
from tests.helpers import tiny_tokenizer
from tests.server.helpers import MODEL, running
from tests.test_relations_every_path import Hours

if TYPE_CHECKING:
    from factorspec_sdk.engines.embedded import EmbeddedEngine

# closed, as OpenAI's strict mode asks: open parameters allow keys they do not declare, and
# the scripted models below (which prefer "," after a value) would write such keys
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}},
    "required": ["city"],
    "additionalProperties": False,
}
CLOCK = {
    "type": "object",
    "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23}},
    "required": ["hour"],
    "additionalProperties": False,
}
TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "clock", "parameters": CLOCK}},
]
FREE_TEXT: list[Any] = [
    {"type": "function", "function": {"name": "weather", "parameters": WEATHER}},
]


def acting_engine() -> ScriptedEngine:
    tok = tiny_tokenizer()

    def row(prefer: dict[str, float]) -> npt.NDArray[np.float32]:
        out = np.zeros(tok.vocab_size, dtype=np.float32)
        for text, logit in prefer.items():
            out[tok.encode(text)[0]] = logit
        out.setflags(write=False)
        return out

    again = row({"c": 5.0, ",": 5.0, "}, {": 5.0, "x": 1.0})
    counting = [row({"c": 5.0, ",": 5.0, "}, {": 5.0, str(n): 6.0, "x": 1.0}) for n in range(10)]
    rows: dict[str, Callable[[str], npt.NDArray[np.float32]]] = {
        "again": lambda text: again,
        "count": lambda text: counting[len(re.findall(r'"hour":\s*\d', text)) % 10],
        "once": lambda text: row({"c": 5.0, "]": 5.0, "x": 1.0}),
        "talk": lambda text: row({"m": 5.0, "x": 1.0}),
    }

    def logits(prefix: Sequence[int]) -> npt.NDArray[np.float32]:
        text = tok.decode(prefix).decode("utf-8", "replace")
        return next(r for word, r in rows.items() if word in text)(text)

    return ScriptedEngine(tok, logits)


@pytest.fixture(scope="module")
def oai() -> Iterator[openai.OpenAI]:
    with running(create_app(acting_engine(), model_name=MODEL)) as base:
        yield openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)


def ask(oai: openai.OpenAI, word: str, tools: list[Any] = TOOLS, **kw: Any) -> Any:
    messages: Any = [{"role": "user", "content": word}]
    return oai.chat.completions.create(model=MODEL, messages=messages, tools=tools, **kw)


def calls(r: Any) -> list[tuple[str, str]]:
    return [(c.function.name, c.function.arguments) for c in r.choices[0].message.tool_calls or []]


@pytest.mark.parametrize("tools", [TOOLS, FREE_TEXT], ids=["int", "free-text"])
def test_a_repeated_call_ends_the_calls(oai: openai.OpenAI, tools: list[Any]) -> None:
    """SmolLM2 wrote ``{"from_hour": 15, "to_hour": 18}`` four times under ``"required"``.

    The ``again`` model writes the same call each time: the answer is that call, once.
    """
    once = ask(oai, "once", tools, tool_choice="required")
    for choice in ("required", "auto"):
        r = ask(oai, "again", tools, tool_choice=choice)
        assert len(calls(r)) == 1, calls(r)
        assert r.choices[0].finish_reason == "tool_calls"
        assert r.usage is not None and once.usage is not None  # it wrote four calls
        assert r.usage.completion_tokens > 3 * once.usage.completion_tokens


def test_the_calls_end_before_the_first_repeat() -> None:
    """A call after the repeat is the loop's, not a choice: ``A, B, A, C`` answers ``A, B``."""
    a, b, c = ({"name": "clock", "arguments": {"hour": h}} for h in (1, 2, 3))
    answer = plan("required", TOOLS).answer(json.dumps({"calls": [a, b, a, c]}))
    written = [json.loads(x["function"]["arguments"]) for x in answer.tool_calls or []]
    assert written == [{"hour": 1}, {"hour": 2}]
    # the same arguments to another function are another call
    both = [*TOOLS, {"type": "function", "function": {"name": "alarm", "parameters": CLOCK}}]
    alarm = {"name": "alarm", "arguments": {"hour": 1}}
    answer = plan("required", both).answer(json.dumps({"calls": [a, alarm]}))
    assert [x["function"]["name"] for x in answer.tool_calls or []] == ["clock", "alarm"]


def test_calls_stop_at_a_small_default_bound(oai: openai.OpenAI) -> None:
    for choice in ("required", "auto"):
        r = ask(oai, "count", tool_choice=choice)
        assert len(r.choices[0].message.tool_calls or []) == DEFAULT_TOOL_CALLS
    r = ask(oai, "count", tool_choice="required", parallel_tool_calls=False)
    assert len(r.choices[0].message.tool_calls or []) == 1
    r = ask(oai, "count", tool_choice="required", extra_body={"factorspec": {"max_tool_calls": 6}})
    assert len(r.choices[0].message.tool_calls or []) == 6


NAMED: Any = {"type": "function", "function": {"name": "clock"}}


def test_a_named_tool_choice_is_one_call_unless_several_are_asked(oai: openai.OpenAI) -> None:
    """OpenAI and vLLM answer a named function with one call; this server answered 4 (8 before).

    Instructor's TOOLS mode sends a named ``tool_choice`` and no ``parallel_tool_calls``,
    and reads the first call: the others were tokens for nothing.
    """
    r = ask(oai, "count", tool_choice=NAMED)
    assert r.choices[0].finish_reason == "tool_calls"
    assert len(r.choices[0].message.tool_calls or []) == 1
    r = ask(oai, "count", tool_choice=NAMED, parallel_tool_calls=True)  # said: several
    assert len(r.choices[0].message.tool_calls or []) == DEFAULT_TOOL_CALLS
    r = ask(oai, "count", tool_choice=NAMED, extra_body={"factorspec": {"max_tool_calls": 3}})
    assert len(r.choices[0].message.tool_calls or []) == 3


def test_instructors_tools_mode_gets_one_call(oai: openai.OpenAI) -> None:
    class Weather(BaseModel):
        city: str = Field(max_length=8)

    client = instructor.from_openai(oai, mode=instructor.Mode.TOOLS)
    weather, completion = client.chat.completions.create_with_completion(
        model=MODEL, messages=[{"role": "user", "content": "again"}], response_model=Weather
    )
    assert isinstance(weather, Weather)
    assert len(completion.choices[0].message.tool_calls or []) == 1


def test_the_model_closes_the_list_of_calls_when_it_wants(oai: openai.OpenAI) -> None:
    for choice in ("required", "auto"):
        r = ask(oai, "once", tool_choice=choice)
        assert r.choices[0].finish_reason == "tool_calls"
        assert len(r.choices[0].message.tool_calls or []) == 1


def test_a_message_is_bounded_unless_max_tokens_says_otherwise(oai: openai.OpenAI) -> None:
    r = ask(oai, "talk")
    content = r.choices[0].message.content or ""
    assert len(content) == MESSAGE_MAX_CHARS
    assert r.choices[0].finish_reason == "length"  # cut at the bound, and says so
    assert r.usage is not None and r.usage.completion_tokens < 1.2 * MESSAGE_MAX_CHARS
    streamed, finish = "", None
    with ask(oai, "talk", stream=True) as stream:
        for chunk in stream:
            for choice in chunk.choices:
                streamed += choice.delta.content or ""
                finish = choice.finish_reason or finish
    assert (streamed, finish) == (content, "length")
    # max_tokens lifts the bound: the token budget ends the message instead
    long = ask(oai, "talk", max_tokens=MESSAGE_MAX_CHARS + 200).choices[0].message.content
    assert MESSAGE_MAX_CHARS < len(long or "") <= MESSAGE_MAX_CHARS + 200
    short = ask(oai, "talk", max_tokens=60).choices[0].message.content
    assert 0 < len(short or "") < 60


def plan(tool_choice: str, tools: list[Any]) -> Any:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    return plan_tools(ChatRequest.model_validate({**body, "tool_choice": tool_choice}), IRLimits())


def test_a_message_answer_is_prompted_with_no_sentence_to_repeat() -> None:
    """SmolLM2 answered ``"You can call these functions: "``, from its system text."""
    tools = [*TOOLS, function_tool(Hours)]
    listed = [
        {"name": "clock", "description": "", "parameters": CLOCK},
        {
            "name": "Hours",
            "description": Hours.__doc__,
            "parameters": plain_json_schema(Hours),  # the IR is for the server, not the model
        },
    ]
    assert plan("auto", tools).system == "Functions:\n" + json.dumps(listed)
    required = plan("required", tools).system
    assert "x-factorspec" not in required and json.dumps(listed) in required


def prompt_of(body: dict[str, Any]) -> str:
    """The prompt text the server gives the engine for a chat request."""
    engine = acting_engine()
    prepared = asyncio.run(
        prepare(
            {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **body},
            "chat",
            model_name=MODEL,
            vocab_size=engine.tokenizer.vocab_size,
            limits=IRLimits(),
            solver_timeout_ms=None,
            default_max_tokens=100,
            request_timeout_s=30.0,
            compiler=IRCompiler(),
        )
    )
    return engine.tokenizer.decode(prepared.prompt(engine)).decode()


def test_a_tools_request_gets_no_record_hint_unless_it_asks() -> None:
    """SmolLM2 answered "This is a JSON of this form. ..." to the hint of the calls record."""
    for choice in ("required", "auto", NAMED):
        prompt = prompt_of({"tools": TOOLS, "tool_choice": choice})
        assert "clock" in prompt and "Answer with JSON" not in prompt, prompt
    asked = {"tools": TOOLS, "factorspec": {"schema_in_prompt": True}}
    assert "Answer with JSON" in prompt_of(asked)
    # a record still gets it by default, as Client.generate does
    schema = {"type": "json_schema", "json_schema": {"name": "Clock", "schema": CLOCK}}
    assert "Answer with JSON" in prompt_of({"response_format": schema})


@pytest.mark.model
def test_smollm2_answers_a_message_in_its_own_words(embedded_engine: EmbeddedEngine) -> None:
    """SmolLM2 answered this with ``"You can call these functions: "`` (the old system text),
    then with ``"The response is a JSON object that contains ..."`` (the record hint, "Answer
    with JSON of this form", appended to a tools request)."""
    ours = (
        "You can call these functions",
        "Call one",
        "answer with a message",
        "Functions:",
        "JSON",
    )
    tools: Any = [function_tool(Hours)]
    with running(create_app(embedded_engine, model_name=MODEL)) as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        r = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Thanks, that's all."}],
            tools=tools,
            max_tokens=40,
        )
    message = r.choices[0].message
    if message.tool_calls:  # calls are the model's choice; their relation holds
        assert all(Hours.model_validate_json(c.function.arguments) for c in message.tool_calls)
    else:
        content = message.content or ""
        assert content and not any(s in content for s in ours), content


@pytest.mark.model
def test_smollm2_under_instructors_tools_mode_calls_once(
    embedded_engine: EmbeddedEngine,
) -> None:
    """SmolLM2 used to write four calls (Paris, then London, New York and Berlin, made up)."""

    class Weather(BaseModel):
        """The weather in a city."""

        city: str = Field(max_length=12)
        celsius: int = Field(ge=-40, le=50)

    with running(create_app(embedded_engine, model_name=MODEL)) as base:
        raw = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        client = instructor.from_openai(raw, mode=instructor.Mode.TOOLS)
        weather, completion = client.chat.completions.create_with_completion(
            model=MODEL,
            messages=[{"role": "user", "content": "What is the weather in Paris?"}],
            response_model=Weather,
            max_retries=0,
        )
    (call,) = completion.choices[0].message.tool_calls or []
    arguments = Weather.model_validate_json(call.function.arguments)
    assert arguments.model_dump() == weather.model_dump()


@pytest.mark.model
def test_smollm2_writes_no_call_twice(embedded_engine: EmbeddedEngine) -> None:
    """The issue's reproduction: ``pydantic_function_tool(Hours)``, ``"required"``.

    SmolLM2 wrote ``{"from_hour": 15, "to_hour": 11}`` (the relation dropped), then
    ``{"from_hour": 15, "to_hour": 18}`` four times: now the relation holds in every call and
    no call repeats an earlier one.
    """
    with running(create_app(embedded_engine, model_name=MODEL)) as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        r = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Open the shop from 15 to 11."}],
            tools=[openai.pydantic_function_tool(Hours)],
            tool_choice="required",
        )
    written = calls(r)
    assert written and len(set(written)) == len(written), written
    assert all(Hours.model_validate_json(arguments) for _, arguments in written)


def test_each_tools_parameters_are_converted_once_by_the_servers_compiler() -> None:
    compiler = IRCompiler()
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    req = ChatRequest.model_validate({**body, "tools": TOOLS + FREE_TEXT})
    first = plan_tools(req, IRLimits(), compiler)
    again = plan_tools(req, IRLimits(), compiler)
    assert again.ir == first.ir == plan_tools(req, IRLimits()).ir  # as converted afresh
    assert (len(compiler.schemas), compiler.schemas.misses, compiler.schemas.hits) == (2, 2, 2)
