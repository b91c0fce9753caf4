"""The docs' tables of what the server (and Instructor against it) takes, sent row by row.

A table under ``<!-- claims: NAME -->`` in a docs page is data for these tests: a row's first
cell is what is sent (JSON members in backticks, ``[...]`` standing for a sample tools list;
for routes, ``METHOD /path``), its second cell the answer (a status, with the error code in
backticks after it; ``ignored``: a 200 with the same record as without the row's fields;
``works``). Each row is sent to a scripted-engine server, so a claim that goes stale fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import httpx
import openai  # noqa: TID253
import pytest
from pydantic import BaseModel, Field

from factorspec_sdk.server import create_app
from factorspec_sdk.server.protocol import ChatRequest, CompletionRequest
from factorspec_sdk.server.unhonoured import UNSUPPORTED_PARAMETER, Unhonoured
from tests.server.helpers import MODEL, running, scripted_engine

DOCS = Path(__file__).resolve().parents[1] / "docs"


class Pick(BaseModel):
    """The record of the base request: a schema, no relations (those need an IR)."""

    letter: Literal["x", "y", "z"]
    n: int = Field(ge=0, le=9)


SCHEMA: dict[str, Any] = Pick.model_json_schema()
TOOLS = [
    {
        "type": "function",
        "function": {"name": "pick", "description": "Pick a letter.", "parameters": SCHEMA},
    }
]
MESSAGES = [{"role": "user", "content": "Pick one."}]
CHAT: dict[str, Any] = {
    "model": MODEL,
    "messages": MESSAGES,
    "response_format": {"type": "json_schema", "json_schema": {"name": "Pick", "schema": SCHEMA}},
}
COMPLETION: dict[str, Any] = {**CHAT, "prompt": "Pick one."}
del COMPLETION["messages"]
SPEC_KEYS = {"response_format", "structured_outputs", "tools"}
"""A row with one of these describes the record itself: the base request's schema goes."""


def claims(page: str, name: str) -> list[tuple[str, str]]:
    """The (first cell, second cell) rows of the table under ``<!-- claims: name -->``."""
    text = (DOCS / page).read_text()
    marker = f"<!-- claims: {name} -->\n"
    assert marker in text, f"docs/{page} has no {marker.strip()} table"
    rows = []
    for line in text.split(marker, 1)[1].splitlines()[2:]:  # past the header and the rule
        if not line.startswith("|"):
            break
        first, second, *_ = (c.strip() for c in line.strip().strip("|").split(" | "))
        rows.append((first, second))
    assert rows, f"the {name} table of docs/{page} is empty"
    return rows


def sent(cell: str) -> dict[str, Any]:
    """The JSON members in the cell's backticks, ``[...]`` as the sample tools."""
    (fragment,) = re.findall(r"`([^`]+)`", cell)
    fields: dict[str, Any] = json.loads("{" + fragment.replace("[...]", json.dumps(TOOLS)) + "}")
    return fields


def rows(page: str, name: str) -> list[Any]:
    return [pytest.param(first, second, id=first) for first, second in claims(page, name)]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running(create_app(scripted_engine(), model_name=MODEL)) as base:
        yield base


@pytest.fixture(scope="module")
def http(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def base_record(http: httpx.Client) -> str:
    answer = http.post("/v1/chat/completions", json=CHAT)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["choices"][0]["message"]["content"])


def check(
    answer: httpx.Response, fields: dict[str, Any], claim: str, base: str | None, kind: str
) -> None:
    """The answer is what ``claim`` says for a request with ``fields``."""
    if claim.startswith("ignored"):
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == base
        return
    status = re.match(r"(\d{3})(?: `(\w+)`)?", claim)
    assert status, f"the answer cell {claim!r} names no status"
    assert answer.status_code == int(status[1]), answer.text
    if status[2]:
        assert answer.json()["error"]["code"] == status[2], answer.text
    if status[2] == UNSUPPORTED_PARAMETER:  # the error names the parameter
        assert answer.json()["error"]["param"] in fields, answer.text
    if answer.status_code != 200:
        return
    if fields.get("stream"):
        chunks = [
            json.loads(line.removeprefix("data: "))
            for line in answer.text.splitlines()
            if line.startswith("data: {")
        ]
        assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1]
        with_usage = bool(fields.get("stream_options", {}).get("include_usage"))
        assert any(not c["choices"] and c.get("usage") for c in chunks) == with_usage
        return
    body = answer.json()
    choices = body["choices"]
    assert len(choices) == fields.get("n", 1)
    for budget in ("max_tokens", "max_completion_tokens"):
        if budget in fields:
            assert body["usage"]["completion_tokens"] <= fields[budget]
    if "tools" in fields:
        assert choices[0]["finish_reason"] == "tool_calls"
        calls = choices[0]["message"]["tool_calls"]
        for call in calls:
            Pick.model_validate_json(call["function"]["arguments"])
        if isinstance(fields.get("tool_choice"), dict) and "parallel_tool_calls" not in fields:
            assert len(calls) == 1  # a named function: one call
    elif "choice" in fields.get("structured_outputs", {}):
        assert choices[0]["message"]["content"] in fields["structured_outputs"]["choice"]
    else:
        for choice in choices:
            Pick.model_validate_json(
                choice["text"] if kind == "text" else choice["message"]["content"]
            )


@pytest.mark.parametrize(("cell", "claim"), rows("serving.md", "chat"))
def test_chat_parameters(http: httpx.Client, base_record: str, cell: str, claim: str) -> None:
    fields = sent(cell)
    body = {**CHAT, **fields}
    if SPEC_KEYS & fields.keys():
        body = {k: v for k, v in body.items() if k != "response_format" or k in fields}
    answer = http.post("/v1/chat/completions", json=body)
    check(answer, fields, claim, base_record, "chat")


@pytest.mark.parametrize(("cell", "claim"), rows("serving.md", "completions"))
def test_completion_parameters(http: httpx.Client, cell: str, claim: str) -> None:
    fields = sent(cell)
    answer = http.post("/v1/completions", json={**COMPLETION, **fields})
    check(answer, fields, claim, None, "text")


def named(table: str) -> set[str]:
    """The parameter names in backticks in a claims table's cells."""
    return {n for row in claims("serving.md", table) for n in re.findall(r"`\"?(\w+)", str(row))}


@pytest.mark.parametrize(
    ("model", "tables"),
    [(ChatRequest, ["chat"]), (CompletionRequest, ["completions", "chat"])],
)
def test_every_unhonoured_parameter_is_in_a_table(
    model: type[BaseModel], tables: list[str]
) -> None:
    """A parameter the server refuses (beyond its neutral values) is named in the docs.

    The completions table names the completion-only ones; the chat table the rest.
    """
    refused = {
        name
        for name, field in model.model_fields.items()
        if any(isinstance(m, Unhonoured) for m in field.metadata)
    }
    shown = set().union(*(named(t) for t in tables))
    assert refused <= shown, f"not in the {tables[0]} table: {sorted(refused - shown)}"


@pytest.mark.parametrize(("cell", "claim"), rows("serving.md", "routes"))
def test_routes_answer(http: httpx.Client, cell: str, claim: str) -> None:
    routes = re.findall(r"`(GET|POST) ([^`]+)`", cell)
    assert routes, cell
    for method, path in routes:
        path = path.replace("{model_id}", MODEL)
        body = {"/v1/chat/completions": CHAT, "/v1/completions": COMPLETION}.get(path)
        answer = http.request(method, path, json=body)
        assert answer.status_code == 200, f"{method} {path}: {answer.text[:500]}"


@pytest.mark.parametrize(("cell", "claim"), rows("integrations.md", "instructor"))
def test_instructor_modes(url: str, cell: str, claim: str) -> None:
    instructor = pytest.importorskip("instructor")
    (mode,) = re.findall(r"`(\w+)`", cell)
    raw = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    client = instructor.from_openai(raw, mode=getattr(instructor.Mode, mode))

    def create() -> object:
        return client.chat.completions.create(
            model=MODEL, messages=MESSAGES, response_model=Pick, max_retries=0
        )

    try:
        if claim.startswith("works"):
            assert isinstance(create(), Pick)
            return
        status = re.match(r"(\d{3})", claim)
        assert status, f"the answer cell {claim!r} says neither works nor a status"
        with pytest.raises(Exception) as failed:
            create()
        cause: BaseException | None = failed.value
        while cause is not None and not isinstance(cause, openai.APIStatusError):
            cause = cause.__cause__ or cause.__context__
        assert cause is not None and cause.status_code == int(status[1]), failed.value
    finally:
        raw.close()
