"""OpenAI's ``tools`` on `factorspec serve`, driven by the official client's tool-calling code."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import openai  # noqa: TID253

from tests.server.helpers import MODEL

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 12},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
}
FACTORIAL = {
    "type": "object",
    "properties": {"number": {"type": "integer", "minimum": 0, "maximum": 20}},
    "required": ["number"],
}
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "The weather", "parameters": WEATHER},
    },
    {
        "type": "function",
        "function": {"name": "math.factorial", "description": "n!", "parameters": FACTORIAL},
    },
]
SCHEMAS = {"get_weather": WEATHER, "math.factorial": FACTORIAL}
BAD_REF = {"$ref": "#/nowhere"}
MESSAGES: list[Any] = [{"role": "user", "content": "What is 5 factorial?"}]


IR: dict[str, Any] = {
    "factorspec_ir": 1,
    "name": "F",
    "layout": {
        "type": "object",
        "name": "F",
        "fields": [{"name": "number", "key": "number", "node": {"type": "leaf", "kind": "int"}}],
    },
}


def tool(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def with_extension(parameters: dict[str, Any], extension: object) -> dict[str, Any]:
    return tool("f", {**parameters, "x-factorspec": extension})


def check_calls(message: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every call names a tool and its arguments are valid for the tool's parameters."""
    out = []
    for call in message.tool_calls:
        assert call.type == "function" and call.id.startswith("call_")
        arguments = json.loads(call.function.arguments)
        jsonschema.validate(arguments, SCHEMAS[call.function.name])
        out.append((call.function.name, arguments))
    return out


def test_required_calls_are_valid_for_their_schema(client: openai.OpenAI) -> None:
    names = set()
    for seed in range(6):
        r = client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            tools=TOOLS,
            tool_choice="required",
            temperature=1.0,
            seed=seed,
        )
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        calls = check_calls(choice.message)
        assert 1 <= len(calls) <= 8
        names |= {name for name, _ in calls}
    assert names == {"get_weather", "math.factorial"}  # the choice of tool is the model's


def test_a_named_tool_and_no_parallel_calls(client: openai.OpenAI) -> None:
    for seed in range(3):
        r = client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            parallel_tool_calls=False,
            temperature=1.0,
            seed=seed,
        )
        calls = check_calls(r.choices[0].message)
        assert [name for name, _ in calls] == ["get_weather"]


def test_auto_answers_a_message_or_calls(client: openai.OpenAI) -> None:
    for seed in range(4):
        r = client.chat.completions.create(
            model=MODEL, messages=MESSAGES, tools=TOOLS, temperature=1.0, seed=seed
        )
        message = r.choices[0].message
        if r.choices[0].finish_reason == "tool_calls":
            assert message.content is None and check_calls(message)
        else:
            assert r.choices[0].finish_reason == "stop" and isinstance(message.content, str)
            assert not message.tool_calls


def test_streamed_calls_equal_the_answer_and_the_loop_goes_on(client: openai.OpenAI) -> None:
    """The official client's tool loop: call, stream, send the result back, ask again."""
    kw: dict[str, Any] = {"model": MODEL, "tools": TOOLS, "tool_choice": "required", "seed": 4}
    whole = client.chat.completions.create(messages=MESSAGES, **kw).choices[0].message
    streamed: list[Any] = []
    finish = None
    with client.chat.completions.create(messages=MESSAGES, stream=True, **kw) as stream:
        for chunk in stream:
            for choice in chunk.choices:
                streamed.extend(choice.delta.tool_calls or [])
                finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in streamed] == [
        (c.function.name, c.function.arguments) for c in whole.tool_calls or []
    ]
    follow_up = [
        *MESSAGES,
        whole.model_dump(exclude_none=True),
        *({"role": "tool", "tool_call_id": c.id, "content": "120"} for c in whole.tool_calls or []),
    ]
    again = client.chat.completions.create(messages=follow_up, **kw)
    assert again.choices[0].finish_reason == "tool_calls"


def test_malformed_tool_requests_are_4xx(url: str) -> None:
    def post(body: dict[str, Any]) -> httpx.Response:
        payload = {"model": MODEL, "messages": MESSAGES, **body}
        return httpx.post(url + "/v1/chat/completions", json=payload, timeout=30)

    schema = {"type": "json_schema", "json_schema": {"name": "R", "schema": FACTORIAL}}
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"tools": TOOLS, "tool_choice": "none"}, 400, "structured records"),
        ({"tools": TOOLS, "response_format": schema}, 400, "tool calls"),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "x"}}},
            422,
            "not one of the tools",
        ),
        ({"tools": [*TOOLS, TOOLS[0]]}, 422, "share the name"),
        ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, 400, "pattern"),
        (
            {
                "tools": [
                    {"type": "function", "function": {"name": "f", "parameters": {"$ref": "#/x"}}}
                ]
            },
            422,
            "f:",
        ),
        (  # a tool's x-factorspec carries its IR, nothing else
            {"tools": [with_extension(FACTORIAL, {"ir": IR, "timeout_s": 1})]},
            400,
            "tools[0].function.parameters.x-factorspec.timeout_s",
        ),
        ({"tools": [with_extension(FACTORIAL, {"ir": []})]}, 400, "x-factorspec.ir"),
        ({"tools": [with_extension(FACTORIAL, None)]}, 400, "x-factorspec"),
        (
            {"tools": [with_extension(FACTORIAL, {"ir": {"factorspec_ir": 1}})]},
            400,
            "f: invalid relation IR",
        ),
        (  # an x-factorspec no one reads: refused, never dropped
            {"tools": [tool("f", {**FACTORIAL, "$defs": {"Inner": {"x-factorspec": {"ir": IR}}}})]},
            422,
            "x-factorspec at #/$defs/Inner",
        ),
        ({"factorspec": {"max_tool_calls": 2}, "response_format": schema}, 400, 'with "tools"'),
        (
            {"tools": TOOLS, "parallel_tool_calls": False, "factorspec": {"max_tool_calls": 3}},
            400,
            "contradicts",
        ),
    ]
    for body, status, words in cases:
        r = post(body)
        assert r.status_code == status, (body, r.text)
        assert words in r.json()["error"]["message"], r.text
    # tool_choice none with a schema: an ordinary record
    r = post({"tools": TOOLS, "tool_choice": "none", "response_format": schema})
    assert r.status_code == 200 and "number" in json.loads(
        r.json()["choices"][0]["message"]["content"]
    )


def test_unique_items_in_parameters_hold_in_every_call(client: openai.OpenAI) -> None:
    tags = {
        "type": "object",
        "properties": {
            "t": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0, "maximum": 3},
                "minItems": 2,
                "maxItems": 3,
                "uniqueItems": True,
            }
        },
        "required": ["t"],
    }
    for seed in range(4):
        r = client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            tools=[tool("tags", tags)],
            tool_choice="required",
            temperature=1.0,
            seed=seed,
        )
        for call in r.choices[0].message.tool_calls or []:
            t = json.loads(call.function.arguments)["t"]
            assert 2 <= len(t) <= 3 and len(set(t)) == len(t), t
