"""Fuzzing the request body and the relation IR: never a 5xx, never a hang, still alive.

In-process (Starlette's TestClient) for speed, then a liveness check on a real server.
``FACTORSPEC_FUZZ_EXAMPLES=N`` runs N examples per fuzz test (``make fuzz``: 10,000); by
default the two fuzz tests run 1,000 cases together.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient  # noqa: TID253
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factorspec_sdk.ir import IRLimits, to_ir
from factorspec_sdk.server import create_app
from factorspec_sdk.server.app import ServerOptions
from tests.helpers import TRIP_CONTEXT, Pick, Trip
from tests.server.helpers import MODEL, running, scripted_engine

_N = os.environ.get("FACTORSPEC_FUZZ_EXAMPLES")
BODY_EXAMPLES = int(_N) if _N else 600
IR_EXAMPLES = int(_N) if _N else 400

OPTIONS = ServerOptions(request_timeout_s=3.0, max_body_bytes=2**20)
LIMITS = IRLimits(solver_timeout_ms=2000, max_unrolled_nodes=5000, max_list_length=64)


def fuzz(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )


PICK_IR = to_ir(Pick)
TRIP_IR = to_ir(Trip, TRIP_CONTEXT)


@pytest.fixture(scope="module")
def app_client() -> Iterator[TestClient]:
    app = create_app(scripted_engine(), model_name=MODEL, limits=LIMITS, options=OPTIONS)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def maybe(valid: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(valid, valid, valid, json_values)


schemas = st.sampled_from(
    [
        Pick.model_json_schema(),
        Trip.model_json_schema(),
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}}},
        {
            "type": "object",
            "properties": {"a": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}},
        },
        {"type": "object", "properties": {"s": {"type": "string", "maxLength": 4}}},
    ]
)

bodies = st.fixed_dictionaries(
    {
        "model": maybe(st.just(MODEL)),
        "messages": maybe(st.just([{"role": "user", "content": "go"}])),
    },
    optional={
        "response_format": maybe(
            schemas.map(
                lambda s: {"type": "json_schema", "json_schema": {"name": "R", "schema": s}}
            )
        ),
        "factorspec": maybe(st.sampled_from([{"ir": PICK_IR}, {"ir": TRIP_IR}, {"timeout_s": 1}])),
        "max_tokens": maybe(st.integers(1, 80)),
        "temperature": maybe(st.floats(0, 2)),
        "top_p": maybe(st.floats(0.01, 1)),
        "seed": maybe(st.integers(0, 10)),
        "n": maybe(st.integers(1, 2)),
        "stream": maybe(st.booleans()),
        "stream_options": maybe(st.just({"include_usage": True})),
        "logprobs": json_values,
        "prompt": maybe(st.just("go")),
    },
)


def check(resp: httpx.Response) -> None:
    assert resp.status_code < 500, (resp.status_code, resp.text[:500])
    if resp.headers.get("content-type", "").startswith("application/json"):
        json.loads(resp.content)


@fuzz(BODY_EXAMPLES)
@given(body=bodies | json_values, raw=st.booleans(), chat=st.booleans())
def test_fuzz_request_body(app_client: TestClient, body: object, raw: bool, chat: bool) -> None:
    path = "/v1/chat/completions" if chat else "/v1/completions"
    content = json.dumps(body).encode()
    if raw:
        content = content[: len(content) // 2]  # truncated JSON
    check(app_client.post(path, content=content, headers={"content-type": "application/json"}))


@st.composite
def mutated_ir(draw: st.DrawFn) -> object:
    ir = copy.deepcopy(draw(st.sampled_from([PICK_IR, TRIP_IR])))
    for _ in range(draw(st.integers(1, 3))):
        # walk to a random container and replace, delete or duplicate something in it
        node: object = ir
        for _ in range(draw(st.integers(0, 8))):
            if isinstance(node, dict) and node:
                node = node[draw(st.sampled_from(sorted(node)))]
            elif isinstance(node, list) and node:
                node = node[draw(st.integers(0, len(node) - 1))]
            else:
                break
        if isinstance(node, dict) and node:
            key = draw(st.sampled_from(sorted(node)))
            action = draw(st.integers(0, 2))
            if action == 0:
                del node[key]
            else:
                node[key] = draw(json_values) if action == 1 else draw(st.integers(-3, 300))
        elif isinstance(node, list) and node:
            i = draw(st.integers(0, len(node) - 1))
            action = draw(st.integers(0, 2))
            if action == 0:
                del node[i]
            elif action == 1:
                node.append(copy.deepcopy(node[i]))
            else:
                node[i] = draw(json_values)
    return ir


@fuzz(IR_EXAMPLES)
@given(ir=mutated_ir())
def test_fuzz_relation_ir(app_client: TestClient, ir: object) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "go"}],
        "max_tokens": 60,
        "factorspec": {"ir": ir},
    }
    check(app_client.post("/v1/chat/completions", json=body))


def test_alive_after_fuzz(app_client: TestClient) -> None:
    assert app_client.get("/health").json()["status"] == "ok"
    r = app_client.post(
        "/v1/chat/completions",
        json={
            "model": MODEL,
            "messages": [{"role": "user", "content": "go"}],
            "factorspec": {"ir": TRIP_IR},
        },
    )
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "stop"


@fuzz(40)
@given(body=bodies)
def test_real_server_survives(body: object) -> None:
    global _REAL
    check(_REAL.post("/v1/chat/completions", content=json.dumps(body).encode()))


_REAL: httpx.Client


@pytest.fixture(scope="module", autouse=True)
def real_server() -> Iterator[None]:
    global _REAL
    app = create_app(scripted_engine(), model_name=MODEL, limits=LIMITS, options=OPTIONS)
    with running(app) as base, httpx.Client(base_url=base, timeout=30) as c:
        _REAL = c
        yield
        assert c.get("/health").json()["status"] == "ok"
        r = c.post(
            "/v1/chat/completions",
            json={
                "model": MODEL,
                "messages": [{"role": "user", "content": "go"}],
                "factorspec": {"ir": PICK_IR},
            },
        )
        assert r.status_code == 200
