"""Request parameters the server does not honour are refused, never dropped in silence.

Every `Unhonoured` field of the request models is sent with a value that would change the
answer (a 400 ``unsupported_parameter`` naming it) and with each of its neutral values (the
same record as without it), on both generation routes. ``stop``, ``logit_bias`` and the
penalties used to be accepted and ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from factorspec_sdk.server import create_app
from factorspec_sdk.server.protocol import ChatRequest, CompletionRequest
from factorspec_sdk.server.unhonoured import UNSUPPORTED_PARAMETER, Unhonoured
from tests.helpers import Pick
from tests.server.helpers import MODEL, running, scripted_engine

SCHEMA = {
    "type": "json_schema",
    "json_schema": {"name": "Pick", "schema": Pick.model_json_schema()},
}
BASE: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Pick one."}],
        "response_format": SCHEMA,
    },
    "/v1/completions": {"model": MODEL, "prompt": "Pick one.", "response_format": SCHEMA},
}
MODELS: dict[str, type[BaseModel]] = {
    "/v1/chat/completions": ChatRequest,
    "/v1/completions": CompletionRequest,
}


def unhonoured(model: type[BaseModel]) -> dict[str, Unhonoured]:
    """The request model's fields the server does not honour, with their metadata."""
    return {
        name: meta
        for name, field in model.model_fields.items()
        for meta in field.metadata
        if isinstance(meta, Unhonoured)
    }


CASES = [
    pytest.param(route, name, meta, id=f"{route.rsplit('/', 1)[1]}-{name}")
    for route, model in MODELS.items()
    for name, meta in unhonoured(model).items()
]


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with (
        running(create_app(scripted_engine(), model_name=MODEL)) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        yield client


def record(answer: httpx.Response) -> object:
    """The answer's record (greedy decoding: the same for the same prompt and spec)."""
    assert answer.status_code == 200, answer.text
    (choice,) = answer.json()["choices"]
    return choice.get("message", choice.get("text"))


@pytest.fixture(scope="module")
def records(http: httpx.Client) -> dict[str, object]:
    """Each route's record for the base request."""
    return {route: record(http.post(route, json=body)) for route, body in BASE.items()}


def test_the_chat_model_declares_the_parameters_of_the_issue() -> None:
    declared = unhonoured(ChatRequest)
    named = {"stop", "logit_bias", "frequency_penalty", "presence_penalty", "logprobs"}
    assert named | {"top_logprobs", "top_k", "functions", "reasoning_effort"} <= set(declared)
    for honoured in ("seed", "n", "temperature", "top_p", "max_tokens", "user", "metadata"):
        assert honoured in ChatRequest.model_fields and honoured not in declared


@pytest.mark.parametrize(("route", "name", "meta"), CASES)
def test_a_value_that_would_change_the_answer_is_a_400_naming_it(
    http: httpx.Client, route: str, name: str, meta: Unhonoured
) -> None:
    answer = http.post(route, json={**BASE[route], name: ["not", "neutral"]})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == (UNSUPPORTED_PARAMETER, name)
    assert f"{name}: " in error["message"] and meta.instead in error["message"]
    assert "is not supported" in error["message"] and "is accepted" in error["message"]


@pytest.mark.parametrize(("route", "name", "meta"), CASES)
def test_its_neutral_values_change_nothing(
    http: httpx.Client, records: dict[str, object], route: str, name: str, meta: Unhonoured
) -> None:
    for neutral in meta.neutral:
        assert record(http.post(route, json={**BASE[route], name: neutral})) == records[route]


def test_a_float_zero_is_neutral_and_false_is_not_zero(http: httpx.Client) -> None:
    route = "/v1/chat/completions"
    assert http.post(route, json={**BASE[route], "frequency_penalty": 0.0}).status_code == 200
    refused = http.post(route, json={**BASE[route], "frequency_penalty": False})
    assert refused.status_code == 400 and '"frequency_penalty"' in refused.text


def test_an_undeclared_field_is_ignored_and_logged(
    http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    route = "/v1/chat/completions"
    with caplog.at_level(logging.WARNING, logger="factorspec.server"):
        answer = http.post(route, json={**BASE[route], "chat_template_kwargs": {"x": 1}})
    assert answer.status_code == 200
    assert any("chat_template_kwargs" in r.getMessage() for r in caplog.records)
