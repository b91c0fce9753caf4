"""One prompt default: the same messages give the same prompt locally and through the server.

`Client.generate` appends the schema hint (`factorspec_sdk.prompts.hint_sentence`) to the last
user message by default; a chat request to ``factorspec serve`` does too, so the same model
writes the same record in both places. The engine below is the real scripted engine, serving
in process; it keeps the messages every prompt was built from.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import openai  # noqa: TID253
import pytest

import factorspec_sdk
from factorspec_sdk import Client
from factorspec_sdk.engines.protocol import ChatMessage
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.ir import to_ir
from factorspec_sdk.prompts import hint_sentence
from factorspec_sdk.relations.pydantic_layout import build_layout
from factorspec_sdk.server import create_app
from tests.helpers import TRIP_CONTEXT, Trip, tiny_tokenizer
from tests.server.helpers import MODEL, running

PROMPT = "Plan a trip through Paris, Rome and Parma."
MESSAGES: list[Any] = [
    {"role": "system", "content": "You plan trips."},
    {"role": "user", "content": PROMPT},
]


class SeenEngine(ScriptedEngine):
    """The scripted random engine, keeping the messages of every chat prompt it builds."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[list[ChatMessage]] = []

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        self.seen.append([dict(m) for m in messages])
        return super().apply_chat_template(messages)


@pytest.fixture(scope="module")
def engine() -> SeenEngine:
    made = SeenEngine.random(tiny_tokenizer(), seed=2, temperature_scale=2.0)
    assert isinstance(made, SeenEngine)
    return made


@pytest.fixture(scope="module")
def url(engine: SeenEngine) -> Iterator[str]:
    with running(create_app(engine, model_name=MODEL)) as base:
        yield base


@pytest.fixture(scope="module")
def api(url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0) as client:
        yield client


def local(engine: SeenEngine, prompt: Any, **options: Any) -> tuple[list[ChatMessage], Trip]:
    """The messages and the record of ``Client(engine).generate``."""
    record = Client(engine).generate(Trip, prompt, context=TRIP_CONTEXT, **options)
    return engine.seen[-1], record


def served(
    engine: SeenEngine, api: openai.OpenAI, messages: list[Any], **ext: Any
) -> tuple[list[ChatMessage], Trip]:
    """The messages and the record of a plain OpenAI request with the trip's relation IR."""
    r = api.chat.completions.create(
        model=MODEL,
        messages=messages,
        extra_body={"factorspec": {"ir": to_ir(Trip, TRIP_CONTEXT), **ext}},
    )
    record = Trip.model_validate_json(r.choices[0].message.content or "", context=TRIP_CONTEXT)
    return engine.seen[-1], record


def test_a_plain_prompt_is_one_hinted_user_message_in_both_places(
    engine: SeenEngine, api: openai.OpenAI
) -> None:
    here, record_here = local(engine, PROMPT)
    there, record_there = served(engine, api, [{"role": "user", "content": PROMPT}])
    hint = hint_sentence(build_layout(Trip))
    assert here == there == [{"role": "user", "content": f"{PROMPT}\n\n{hint}"}]
    assert record_here == record_there  # greedy on the same prompt: the same record


def test_a_message_list_gets_the_hint_in_both_places(
    engine: SeenEngine, api: openai.OpenAI
) -> None:
    here, record_here = local(engine, MESSAGES)
    there, record_there = served(engine, api, MESSAGES)
    assert here == there
    assert here[-1]["content"].endswith(hint_sentence(build_layout(Trip)))
    assert record_here == record_there


def test_schema_in_prompt_false_sends_the_messages_as_written_in_both_places(
    engine: SeenEngine, api: openai.OpenAI
) -> None:
    here, _ = local(engine, MESSAGES, schema_in_prompt=False)
    there, _ = served(engine, api, MESSAGES, schema_in_prompt=False)
    assert here == there == MESSAGES


def test_the_remote_client_sends_the_local_prompt_once(engine: SeenEngine, url: str) -> None:
    here, record_here = local(engine, PROMPT)
    remote = Client(base_url=url + "/v1").generate(Trip, PROMPT, context=TRIP_CONTEXT)
    assert engine.seen[-1] == here  # the client's hint, not a second one from the server
    assert remote == record_here


def test_from_openai_sends_the_messages_as_written(engine: SeenEngine, api: openai.OpenAI) -> None:
    client = factorspec_sdk.from_openai(api)
    client.chat.completions.create(
        model=MODEL, messages=MESSAGES, response_model=Trip, context=TRIP_CONTEXT
    )
    assert engine.seen[-1] == MESSAGES  # Instructor's shape: the caller's messages
