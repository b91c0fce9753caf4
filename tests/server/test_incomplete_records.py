"""A record that runs out of its token budget is an error answer, never content.

A spec whose values the token budget cannot bound gets no budget masks, so a model that
keeps nesting runs into ``max_tokens``. Here a tree that has no short way out: each node is a
list of at least one node or a leaf object, so no ``null`` or ``[]`` ends it and the budget's
closing walk, which prefers ``[`` to ``{``, would nest for ever (a tree that may be empty is
closed in time by the budget masks: ``tests/tokens/test_budget_every_value.py``). The server
answers 422 ``max_tokens_reached`` naming the budget, for a plain request, a stream, a
request with tools and the remote client alike; it used to answer 200 with the cut text as
``content`` and ``finish_reason`` ``length``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
import openai  # noqa: TID253
import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypeAliasType

import factorspec_sdk
from factorspec_sdk import Client, IncompleteGenerationError
from factorspec_sdk.backends.remote import RemoteBackend
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.server import create_app
from factorspec_sdk.server.app import ServerOptions
from tests.helpers import tiny_tokenizer
from tests.server.helpers import MODEL, running

DEFAULT_BUDGET = 48

TREE: dict[str, Any] = {
    "type": "object",
    "properties": {"tree": {"$ref": "#/$defs/Tree"}},
    "required": ["tree"],
    "additionalProperties": False,
    "$defs": {
        "Tree": {
            "anyOf": [
                {"type": "array", "items": {"$ref": "#/$defs/Tree"}, "minItems": 1},
                {"$ref": "#/$defs/Leaf"},
            ]
        },
        "Leaf": {
            "type": "object",
            "properties": {"leaf": {"type": "integer"}},
            "required": ["leaf"],
            "additionalProperties": False,
        },
    },
}
RESPONSE_FORMAT: Any = {"type": "json_schema", "json_schema": {"name": "Forest", "schema": TREE}}
MESSAGES: Any = [{"role": "user", "content": "a tree"}]


class Leaf(BaseModel):
    leaf: int


Tree = TypeAliasType(  # type: ignore[misc]  # a recursive alias
    "Tree", Annotated[list["Tree"], Field(min_length=1)] | Leaf
)


class Forest(BaseModel):
    """`TREE` as a Pydantic model."""

    tree: Tree


def nesting_engine() -> ScriptedEngine:
    """A model that always prefers ``[``: in a tree of lists it nests until the budget ends."""
    tok = tiny_tokenizer()
    bracket = tok.vocab.index(b"[")

    def logits(prefix: object) -> npt.NDArray[np.float32]:
        out = np.zeros(tok.vocab_size, dtype=np.float32)
        out[bracket] = 10.0
        return out

    return ScriptedEngine(tok, logits)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    options = ServerOptions(default_max_tokens=DEFAULT_BUDGET)
    with running(create_app(nesting_engine(), model_name=MODEL, options=options)) as base:
        yield base


def cut(info: pytest.ExceptionInfo[openai.APIError]) -> dict[str, Any]:
    """The error body of a record cut by its budget (checked), its ``factorspec`` evidence."""
    body = info.value.body
    assert isinstance(body, dict)
    assert (body["code"], body["param"]) == ("max_tokens_reached", "max_tokens")
    assert "no record is returned" in body["message"]
    evidence: dict[str, Any] = body["factorspec"]
    return evidence


def test_a_record_cut_by_max_tokens_is_a_422_not_content(client: openai.OpenAI) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as info:
        client.chat.completions.create(
            model=MODEL, messages=MESSAGES, response_format=RESPONSE_FORMAT, max_tokens=20
        )
    evidence = cut(info)
    assert evidence["max_tokens"] == 20 and 0 < evidence["tokens"] <= 20
    assert evidence["partial_text"].startswith('{"tree": [[[')
    assert "max_tokens=20" in info.value.body["message"]  # type: ignore[index]


def test_the_servers_default_budget_is_named(client: openai.OpenAI) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as info:
        client.chat.completions.create(
            model=MODEL, messages=MESSAGES, response_format=RESPONSE_FORMAT
        )
    assert cut(info)["max_tokens"] == DEFAULT_BUDGET
    message = info.value.body["message"]  # type: ignore[index]
    assert f"the server's default budget of {DEFAULT_BUDGET} tokens" in message


def test_a_stream_ends_with_the_error_event(client: openai.OpenAI) -> None:
    chunks = []
    with pytest.raises(openai.APIError) as info:
        stream = client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            response_format=RESPONSE_FORMAT,
            max_tokens=20,
            stream=True,
        )
        for chunk in stream:
            chunks.append(chunk)
    assert 0 < cut(info)["tokens"] <= 20
    assert all(c.choices[0].finish_reason is None for c in chunks if c.choices)  # no "length"


def test_tool_calls_cut_by_max_tokens_are_a_422(client: openai.OpenAI) -> None:
    tools: Any = [
        {"type": "function", "function": {"name": "plant", "parameters": TREE}},
    ]
    with pytest.raises(openai.UnprocessableEntityError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            tools=tools,
            tool_choice={"type": "function", "function": {"name": "plant"}},
            max_tokens=30,
        )
    assert cut(info)["max_tokens"] == 30
    with pytest.raises(openai.APIError) as streamed:
        stream = client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            tools=tools,
            tool_choice={"type": "function", "function": {"name": "plant"}},
            max_tokens=30,
            stream=True,
        )
        for chunk in stream:
            assert not chunk.choices or chunk.choices[0].finish_reason is None
    assert cut(streamed)["max_tokens"] == 30


def test_the_remote_client_raises_incomplete_generation(url: str) -> None:
    client = Client(backend=RemoteBackend(url, max_retries=0))
    try:
        with pytest.raises(IncompleteGenerationError) as info:
            client.generate(Forest, "a tree", max_tokens=25)
        assert 0 < info.value.tokens <= 25
        assert info.value.partial_text.startswith('{"tree": [[[')
        with pytest.raises(IncompleteGenerationError):  # streamed views, the same error
            for _ in client.stream(Forest, "a tree", max_tokens=25):
                pass
    finally:
        client.close()


def test_instructors_calls_raise_incomplete_generation(client: openai.OpenAI) -> None:
    completions = factorspec_sdk.from_openai(client).chat.completions
    with pytest.raises(IncompleteGenerationError) as info:
        completions.create(model=MODEL, messages=MESSAGES, response_model=Forest, max_tokens=25)
    assert info.value.partial_text.startswith('{"tree": [[[')
    with pytest.raises(IncompleteGenerationError):  # the stream's error event, the same error
        for _ in completions.create_partial(
            model=MODEL, messages=MESSAGES, response_model=Forest, max_tokens=25
        ):
            pass
