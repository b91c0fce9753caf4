"""The server holds a record to the JSON schema the client sent (with `jsonschema`), not only
to the IR converted from it: a converter bug is a logged 500, never a 200."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient  # noqa: TID253

from factorspec_sdk.ir import IRCompiler, ir_from_json_schema
from factorspec_sdk.ir import build as ir_build
from factorspec_sdk.server import create_app
from tests.server.helpers import MODEL, scripted_engine

SENT = {
    "type": "object",
    "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["a", "b"],
    "additionalProperties": {"type": "boolean"},
}


def body(stream: bool = False) -> dict[str, object]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "go"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "R", "schema": SENT}},
        "stream": stream,
    }


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app(scripted_engine(), model_name=MODEL)) as c:
        yield c


def test_records_follow_the_schema_sent(client: TestClient) -> None:
    r = client.post("/v1/chat/completions", json=body())
    assert r.status_code == 200, r.text
    record = json.loads(r.json()["choices"][0]["message"]["content"])
    assert isinstance(record["b"], bool) and 0 <= record["a"] <= 9


def test_a_record_the_schema_rejects_is_a_500(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # a converter that forgets the required key "b" (issue 18's first bug): the IR check
    # passes, the JSON schema check must not
    def forgetful(schema: object, **kw: object) -> dict[str, object]:
        return ir_from_json_schema({**SENT, "required": ["a"], "properties": SENT["properties"]})

    monkeypatch.setattr(ir_build, "ir_from_json_schema", forgetful)  # the compiler's converter
    app = create_app(scripted_engine(), model_name=MODEL, compiler=IRCompiler())  # a fresh one
    with TestClient(app) as client:
        with caplog.at_level(logging.ERROR, logger="factorspec.server"):
            r = client.post("/v1/chat/completions", json=body())
        assert r.status_code == 500
        error = r.json()["error"]
        assert error["type"] == "server_error" and "required property" in error["message"]
        assert "generated record failed validation" in caplog.text
        streamed = client.post("/v1/chat/completions", json=body(stream=True)).text
    events = [json.loads(line[6:]) for line in streamed.splitlines() if line.startswith("data: {")]
    assert events[-1]["error"]["type"] == "server_error"
