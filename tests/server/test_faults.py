"""Injected faults stay with the request they hit; every other request in flight completes.

Real uvicorn servers on 127.0.0.1 and real clients (httpx). The faults: the engine raising
during a batched forward (always for one request, or once for a whole batch), the planning
worker failing or gone, a solver query running out of its per-spec time limit, a spec
compile running out of its time limit, and a client disconnecting mid-stream.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Literal

import httpx
import pytest
import z3
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.drafter.loop import DecoderConfig
from factorspec_sdk.engines.protocol import Logits, SequenceId
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.errors import EngineError
from factorspec_sdk.ir import IRLimits, to_ir
from factorspec_sdk.server import create_app
from factorspec_sdk.server.app import ServerOptions
from factorspec_sdk.server.worker import EngineWorker, Job
from factorspec_sdk.tokens.plan import Planner
from tests.helpers import TRIP_CONTEXT, Trip, tiny_tokenizer
from tests.server.helpers import MODEL, running

TRIP_IR = to_ir(Trip, TRIP_CONTEXT)
POISON = "POISON"


class FaultyEngine(ScriptedEngine):
    """The scripted engine, slowed down, raising on chosen forwards.

    ``poison``: every forward that includes a sequence whose prompt contains "POISON"
    raises. ``fail_batch``: the first forward over at least that many sequences raises
    (once). ``failed`` records the size of each batch that raised. ``gate``: the next
    forward waits until it is set (once).
    """

    poison: bool = False
    fail_batch: int | None = None
    delay: float = 0.01
    gate: threading.Event | None = None

    def setup(self) -> FaultyEngine:
        self.poisoned: set[SequenceId] = set()
        self.failed: list[int] = []
        return self

    def new_sequence(self, prompt_ids: Sequence[int]) -> SequenceId:
        seq = super().new_sequence(prompt_ids)
        if POISON.encode() in self.tokenizer.decode(prompt_ids):
            self.poisoned.add(seq)
        return seq

    def extend(
        self,
        requests: Sequence[tuple[SequenceId, Sequence[int]]],
        *,
        keep: Sequence[int] | None = None,
    ) -> list[Logits]:
        time.sleep(self.delay)
        if self.gate is not None:
            gate, self.gate = self.gate, None
            assert gate.wait(60), "the test never opened the gate"
        if self.poison and any(seq in self.poisoned for seq, _ in requests):
            self.failed.append(len(requests))
            raise EngineError("injected fault: the forward failed")
        if self.fail_batch is not None and len(requests) >= self.fail_batch:
            self.fail_batch = None
            self.failed.append(len(requests))
            raise EngineError("injected fault: the batched forward failed once")
        return super().extend(requests, keep=keep)


def faulty_engine(**faults: object) -> FaultyEngine:
    engine = FaultyEngine.random(tiny_tokenizer(), seed=2, temperature_scale=2.0)
    assert isinstance(engine, FaultyEngine)
    for name, value in faults.items():
        setattr(engine, name, value)
    return engine.setup()


def body(content: str = "a trip", ir: object = TRIP_IR, **extra: object) -> dict[str, object]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": content}],
        "factorspec": {"ir": ir},
        **extra,
    }


def post(base: str, payload: dict[str, object]) -> httpx.Response:
    return httpx.post(base + "/v1/chat/completions", json=payload, timeout=120)


def assert_valid_trip(r: httpx.Response) -> None:
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "stop"
    Trip.model_validate_json(choice["message"]["content"], context=TRIP_CONTEXT)


def assert_serving(base: str) -> None:
    assert httpx.get(base + "/health").json()["status"] == "ok"
    assert_valid_trip(post(base, body("after the fault")))


def in_flight(
    base: str, n: int, fault: Callable[[], httpx.Response], delay: float = 0.15
) -> tuple[list[httpx.Response], httpx.Response]:
    """``n`` ordinary trip requests, and ``fault()`` sent while they are in flight."""
    with ThreadPoolExecutor(n + 1) as pool:
        normal = [pool.submit(post, base, body(f"trip {i}")) for i in range(n)]
        time.sleep(delay)
        faulted = pool.submit(fault)
        return [f.result() for f in normal], faulted.result()


def wait_for(done: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def in_one_batch(
    base: str,
    engine: FaultyEngine,
    monkeypatch: pytest.MonkeyPatch,
    n: int,
    fault: Callable[[], httpx.Response],
) -> tuple[list[httpx.Response], httpx.Response]:
    """``n`` ordinary trip requests and ``fault()``, all admitted into one batch.

    A first ordinary request's forward is held (the engine's gate) until all the others
    are queued; the engine thread then admits them together, before its next forward.
    """
    queued: list[Job] = []
    submit = EngineWorker.submit

    def counting(self: EngineWorker, job: Job) -> None:
        submit(self, job)
        queued.append(job)

    monkeypatch.setattr(EngineWorker, "submit", counting)
    gate = engine.gate = threading.Event()
    with ThreadPoolExecutor(n + 2) as pool:
        first = pool.submit(post, base, body("the first trip"))
        wait_for(lambda: len(queued) == 1)
        normal = [pool.submit(post, base, body(f"trip {i}")) for i in range(n)]
        faulted = pool.submit(fault)
        wait_for(lambda: len(queued) == n + 2)
        gate.set()
        return [first.result(), *(f.result() for f in normal)], faulted.result()


def test_engine_fault_fails_only_the_request_it_hits(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = faulty_engine(poison=True)
    with running(create_app(engine, model_name=MODEL)) as base:
        normal, bad = in_one_batch(
            base, engine, monkeypatch, 8, lambda: post(base, body(f"{POISON} trip"))
        )
        assert bad.status_code == 500
        err = bad.json()["error"]
        assert err["type"] == "server_error" and "injected fault" in err["message"]
        for r in normal:
            assert_valid_trip(r)
        assert max(engine.failed) > 1  # the fault hit a forward shared with other requests
        assert_serving(base)


def test_a_batched_forward_that_fails_once_fails_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = faulty_engine(fail_batch=4)
    with running(create_app(engine, model_name=MODEL)) as base:
        normal, last = in_one_batch(
            base, engine, monkeypatch, 6, lambda: post(base, body("one more"))
        )
        for r in [*normal, last]:
            assert_valid_trip(r)
        assert engine.failed and engine.failed[0] >= 4
        assert_serving(base)


@pytest.mark.parametrize("how", ["raises", "gone"])
def test_planning_worker_faults_fail_nobody(
    monkeypatch: pytest.MonkeyPatch, how: Literal["raises", "gone"]
) -> None:
    calls: list[int] = []

    def prefetch(self: Planner, cursor: object, depth: int = 1, stop: object = None) -> None:
        calls.append(1)
        raise RuntimeError("injected fault: the planning worker died")

    class DeadPool(ThreadPoolExecutor):
        """The decoder's planning pool, its worker gone: nothing can be scheduled."""

        def submit(self, fn: object, /, *args: object, **kw: object) -> Future[None]:
            calls.append(1)
            raise RuntimeError("cannot schedule new futures after shutdown")

    if how == "raises":
        monkeypatch.setattr(Planner, "prefetch", prefetch)
    else:
        monkeypatch.setattr("factorspec_sdk.drafter.loop.ThreadPoolExecutor", DeadPool)
    engine = faulty_engine()
    app = create_app(engine, model_name=MODEL, config=DecoderConfig(overlap=True))
    with running(app) as base:
        normal, last = in_flight(base, 4, lambda: post(base, body("one more")))
        for r in [*normal, last]:
            assert_valid_trip(r)
        assert calls  # the fault was hit
        assert_serving(base)


class Hard(BaseModel):
    """Easy to compile (flag=False), but deciding flag=True asks Z3 to factor a prime."""

    flag: bool
    a: int = Field(ge=2, le=10**6)
    b: int = Field(ge=2, le=10**6)
    c: int = Field(ge=2, le=10**6)

    @relation
    def product(self) -> bool:
        return (not self.flag) or self.a * self.b * self.c == 30


def hard_ir(product: int = 1_000_003) -> object:
    """`Hard` with 30 replaced by a prime: no product of three factors >= 2 equals it."""
    text = json.dumps(to_ir(Hard)).replace('{"int": 30}', f'{{"int": {product}}}')
    assert str(product) in text
    return json.loads(text)


def test_solver_time_limit_fails_only_that_request_and_is_per_solver() -> None:
    before = z3.get_param("timeout")
    options = ServerOptions(solver_timeout_ms=200)
    with running(create_app(faulty_engine(), model_name=MODEL, options=options)) as base:
        assert z3.get_param("timeout") == before  # nothing process-wide was set
        t0 = time.perf_counter()
        normal, hard = in_flight(base, 6, lambda: post(base, body("hard", hard_ir())))
        assert time.perf_counter() - t0 < 60
        assert hard.status_code == 422, hard.text
        err = hard.json()["error"]
        assert err["code"] == "oracle" and "could not decide" in err["message"]
        for r in normal:
            assert_valid_trip(r)
        assert_serving(base)


def test_spec_compile_time_limit_is_a_422_for_that_request() -> None:
    ir = json.loads(
        json.dumps(hard_ir()).replace('{"op": "not", "args": [{"var": "flag"}]}', '{"bool": false}')
    )
    formula = json.dumps(ir["factors"][0]["formula"])
    assert '"flag"' not in formula  # the product must hold: Z3 cannot decide it in time
    app = create_app(faulty_engine(), model_name=MODEL, limits=IRLimits(solver_timeout_ms=100))
    with running(app) as base:
        normal, hard = in_flight(base, 6, lambda: post(base, body("hard", ir)))
        assert hard.status_code == 422, hard.text
        err = hard.json()["error"]
        assert err["code"] == "invalid_relation_ir"
        assert "could not decide the spec within 100 ms" in err["message"]
        for r in normal:
            assert_valid_trip(r)
        again = post(base, body("hard again", ir))  # an undecided spec is tried again
        assert again.status_code == 422 and "within 100 ms" in again.json()["error"]["message"]
        assert_serving(base)


def test_client_disconnect_mid_stream_leaves_the_others_valid() -> None:
    engine = faulty_engine(delay=0.02)
    with running(create_app(engine, model_name=MODEL)) as base:
        got: list[str] = []

        def stream_and_leave() -> httpx.Response:
            payload = body("stream and leave", stream=True)
            with httpx.stream("POST", base + "/v1/chat/completions", json=payload) as resp:
                lines = resp.iter_lines()
                got.extend(next(lines) for _ in range(3))
                return resp  # closing the stream here disconnects mid-record

        normal, left = in_flight(base, 6, stream_and_leave)
        assert left.status_code == 200 and got[0].startswith("data: ")
        for r in normal:
            assert_valid_trip(r)
        deadline = time.monotonic() + 20
        while "factorspec_cancelled_total 1" not in httpx.get(base + "/metrics").text:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert_serving(base)


def test_faults_leave_no_thread_behind() -> None:
    before = threading.active_count()
    with running(create_app(faulty_engine(poison=True), model_name=MODEL)) as base:
        assert post(base, body(f"{POISON} trip")).status_code == 500
    deadline = time.monotonic() + 10
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before
