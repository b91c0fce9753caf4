"""A record its time limit cuts is an error answer, never content.

The scripted model here never closes its string (it always prefers ``m``) and sleeps 5 ms a
forward, so a record of `Note` cannot finish within the 2,048 tokens of the default budget
in less than 10 s: a limit under a second always cuts it. The server answers 422
``timeout_reached`` naming the limit (the request's ``factorspec.timeout_s``, else the
server's), for a plain request, a stream (an error event, then ``[DONE]``), tool calls, and
FactorSpec's clients raise `GenerationTimeoutError`. It used to answer 200 with the cut text
as ``content`` and ``finish_reason`` ``length``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import openai  # noqa: TID253
import pytest
from pydantic import BaseModel

import factorspec_sdk
from factorspec_sdk import Client, GenerationTimeoutError, IncompleteGenerationError
from factorspec_sdk.backends.remote import RemoteBackend
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.server import create_app
from factorspec_sdk.server.app import ServerOptions
from tests.helpers import tiny_tokenizer
from tests.server.helpers import MODEL, running

SERVER_LIMIT = 0.5
MESSAGES: Any = [{"role": "user", "content": "a note"}]


class Note(BaseModel):
    """One free string: the model below never ends it."""

    note: str


RESPONSE_FORMAT: Any = {
    "type": "json_schema",
    "json_schema": {"name": "Note", "schema": Note.model_json_schema()},
}


def endless_engine() -> ScriptedEngine:
    """Prefers ``m`` everywhere (a string never closes), 5 ms a forward."""
    tok = tiny_tokenizer()
    row = np.zeros(tok.vocab_size, dtype=np.float32)
    row[tok.encode("m")[0]] = 10.0
    row.setflags(write=False)

    def logits(prefix: Sequence[int]) -> npt.NDArray[np.float32]:
        time.sleep(0.005)
        return row

    return ScriptedEngine(tok, logits)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    options = ServerOptions(request_timeout_s=SERVER_LIMIT)
    with running(create_app(endless_engine(), model_name=MODEL, options=options)) as base:
        yield base


def timed_out(body: object, limit: float) -> dict[str, Any]:
    """The error body of a record cut by its time limit (checked), its evidence."""
    assert isinstance(body, dict)
    err = body.get("error", body)
    assert (err["code"], err["param"]) == ("timeout_reached", "factorspec.timeout_s"), err
    assert "no record is returned" in err["message"]
    assert '"factorspec": {"timeout_s": SECONDS}' in err["message"]  # how to raise it
    assert "--request-timeout" in err["message"]
    evidence: dict[str, Any] = err["factorspec"]
    assert evidence["timeout_s"] == limit
    assert evidence["tokens"] > 0
    assert f"{evidence['tokens']} tokens were written" in err["message"]
    assert evidence["partial_text"].startswith('{"note": "mmm')
    return evidence


def test_a_record_cut_by_the_requests_limit_is_a_422_not_content(
    client: openai.OpenAI,
) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            response_format=RESPONSE_FORMAT,
            extra_body={"factorspec": {"timeout_s": 0.3}},
        )
    timed_out(info.value.body, 0.3)
    assert "factorspec.timeout_s=0.3 s" in info.value.message


def test_the_servers_limit_is_named(client: openai.OpenAI) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as info:
        client.completions.create(
            model=MODEL,
            prompt="a note",
            extra_body={"response_format": RESPONSE_FORMAT},
        )
    timed_out(info.value.body, SERVER_LIMIT)
    assert f"the server's time limit of {SERVER_LIMIT:g} s" in info.value.message


def test_a_stream_ends_with_the_error_event_and_done(url: str) -> None:
    body = {"model": MODEL, "messages": MESSAGES, "response_format": RESPONSE_FORMAT}
    with httpx.stream(
        "POST", url + "/v1/chat/completions", json={**body, "stream": True}, timeout=30
    ) as answer:
        assert answer.status_code == 200
        events = [line for line in answer.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    timed_out(json.loads(events[-2].removeprefix("data: ")), SERVER_LIMIT)
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert len(chunks) > 1 and all(c["choices"][0]["finish_reason"] is None for c in chunks)


def test_tool_calls_cut_by_the_limit_are_a_422(client: openai.OpenAI) -> None:
    tools: Any = [
        {"type": "function", "function": {"name": "write", "parameters": Note.model_json_schema()}}
    ]
    with pytest.raises(openai.UnprocessableEntityError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            tools=tools,
            tool_choice={"type": "function", "function": {"name": "write"}},
        )
    assert info.value.body["code"] == "timeout_reached"  # type: ignore[index]


def test_the_remote_client_raises_generation_timeout(url: str) -> None:
    client = Client(backend=RemoteBackend(url, max_retries=0))
    try:
        with pytest.raises(GenerationTimeoutError) as info:
            client.generate(Note, "a note")
        assert isinstance(info.value, IncompleteGenerationError)  # catching that still works
        assert info.value.timeout_s == SERVER_LIMIT and info.value.tokens > 0
        assert info.value.partial_text.startswith('{"note": "mmm')
        assert "--request-timeout" in str(info.value)
        with pytest.raises(GenerationTimeoutError):  # streamed views, the same error
            for _ in client.stream(Note, "a note"):
                pass
    finally:
        client.close()


def test_instructors_calls_raise_generation_timeout(client: openai.OpenAI) -> None:
    completions = factorspec_sdk.from_openai(client).chat.completions
    limit = {"factorspec": {"timeout_s": 0.3}}
    with pytest.raises(GenerationTimeoutError) as info:
        completions.create(model=MODEL, messages=MESSAGES, response_model=Note, extra_body=limit)
    assert info.value.timeout_s == 0.3
    with pytest.raises(GenerationTimeoutError):  # the stream's error event, the same error
        for _ in completions.create_partial(
            model=MODEL, messages=MESSAGES, response_model=Note, extra_body=limit
        ):
            pass
