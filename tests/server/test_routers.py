"""Both tiers behind the routers fleets run: vllm-router and sglang-router from their wheels.

Real router binaries (`factorspec_sdk.bench.routers.RouterProcess`) on loopback in front of

* two scripted engine servers (`tests.server.scripted_upstream`: vLLM's ``/v1/completions``
  or SGLang's ``/generate``, and vLLM's prefix cache counters on ``/metrics``), driven by the
  front (`create_app` over an `OpenAIServerEngine` on the router's URL, as ``factorspec
  serve --upstream ROUTER`` runs it) or by a `Client`;
* two ``factorspec serve --engine scripted`` processes: the planning tier's replicas.

A record's segment requests must stay on one server (the affinity key in the routers'
headers), the prefix cache must hit more with that affinity than without, and a server or a
replica killed mid-run loses no record and returns none invalid.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Literal, TypeVar

import httpx
import openai  # noqa: TID253
import pytest

from factorspec_sdk import Client
from factorspec_sdk.bench.routers import (
    PrefixCache,
    RouterKind,
    RouterProcess,
    prefix_cache,
    router_binary,
)
from factorspec_sdk.engines.openai_server import OpenAIServerEngine, ServerKind
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.ir import to_ir
from factorspec_sdk.server import create_app
from factorspec_sdk.server.process import ServerProcess
from factorspec_sdk.server.soak import MODEL as SOAK_MODEL
from factorspec_sdk.server.soak import soak_request
from tests.helpers import TRIP_CONTEXT, Trip
from tests.server.helpers import MODEL, running, scripted_engine
from tests.server.scripted_upstream import ScriptedTokenizer, ScriptedUpstream

T = TypeVar("T")


@pytest.fixture(autouse=True)
def _routers_installed() -> None:
    kinds: tuple[RouterKind, ...] = ("vllm", "sglang")
    missing = [k for k in kinds if router_binary(k) is None]
    if missing:
        names = " ".join(f"{k}-router" for k in missing)
        if os.environ.get("CI"):
            pytest.fail(f"{names} missing; make install puts the routers' wheels in the venv")
        pytest.skip(f"{names} not installed (pip install {names})")


@dataclass
class Tier:
    router: RouterProcess
    servers: list[ScriptedUpstream]

    def engine(self, server: ServerKind | Literal["auto"] = "auto") -> OpenAIServerEngine:
        """The router as ``factorspec serve --upstream`` drives it."""
        tok = ScriptedTokenizer(ScriptedEngine(self.servers[0].engine.tokenizer))
        return OpenAIServerEngine(
            self.router.url,
            tokenizer=tok,
            server=server,
            max_retries=0,
            timeout=60.0,
        )

    def cache(self) -> PrefixCache:
        """The servers' prefix cache counters, summed."""
        total = PrefixCache(0.0, 0.0)
        for s in self.servers:
            total += prefix_cache(s.root)
        return total


@contextmanager
def engine_tier(
    kind: RouterKind,
    policy: str,
    *,
    flavor: Literal["vllm", "sglang"] = "vllm",
    die_at: Sequence[int | None] = (None, None),
    args: Sequence[str] = (),
) -> Iterator[Tier]:
    """Scripted engine servers (one per ``die_at``) behind a router; all stopped at the end."""
    with ExitStack() as stack:
        servers = []
        for d in die_at:
            s = ScriptedUpstream(scripted_engine(), die_at=d, flavor=flavor).start()
            stack.callback(s.kill)
            servers.append(s)
        if policy == "manual":  # a new key goes to the server with the fewest keys
            args = ("--assignment-mode", "min_group", *args)
        router = RouterProcess(kind, [s.root for s in servers], policy=policy, args=args)
        stack.enter_context(router)
        yield Tier(router, servers)


@contextmanager
def front(engine: OpenAIServerEngine) -> Iterator[openai.OpenAI]:
    """The FactorSpec front over ``engine`` on loopback, and a client of it."""
    with running(create_app(engine, model_name=MODEL)) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        try:
            yield client
        finally:
            client.close()
            engine.close()


def ask(client: openai.OpenAI, content: str) -> Trip:
    r = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": content}],
        extra_body={"factorspec": {"ir": to_ir(Trip, TRIP_CONTEXT)}},
    )
    assert r.choices[0].finish_reason == "stop"
    return Trip.model_validate_json(r.choices[0].message.content or "", context=TRIP_CONTEXT)


def ask_nth(client: openai.OpenAI, first: int, i: int) -> Trip:
    """`ask` for trip ``first + i``."""
    return ask(client, f"trip #{first + i};")


def concurrently(n: int, one: Callable[[int], T]) -> tuple[list[T], list[BaseException]]:
    """Run ``one(i)`` for i < n on n threads; (results, errors)."""
    results: list[T] = []
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results.append(one(i))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results, errors


def servers_of(tier: Tier, marker: str) -> set[int]:
    """Which servers served a request of the record whose prompt holds ``marker``."""
    tok = tier.servers[0].engine.tokenizer
    return {
        i
        for i, s in enumerate(tier.servers)
        if any(marker in tok.decode(p).decode() for p in s.prompts)
    }


def test_vllm_router_keeps_each_record_on_one_server() -> None:
    with engine_tier("vllm", "consistent_hash") as tier, front(tier.engine()) as client:
        # records spread over both servers: the router's hashing is seeded per process, so
        # 8 records all on one server is chance (1 in 128); batches of 8 until both served
        trips: list[Trip] = []
        errors: list[BaseException] = []
        asked = 0
        while not all(s.prompts for s in tier.servers) and asked < 64:
            got, failed = concurrently(8, functools.partial(ask_nth, client, asked))
            trips += got
            errors += failed
            asked += 8
        assert not errors and len(trips) == asked
        for i in range(asked):
            assert len(servers_of(tier, f"trip #{i};")) == 1, i
        assert all(s.prompts for s in tier.servers)
        for s in tier.servers:  # the router hands the key on; a key lives on one server
            assert None not in s.sessions
        keys = [set(s.sessions) for s in tier.servers]
        assert not keys[0] & keys[1]
        # Client(base_url=ROUTER): the router answers /v1/models as its servers do (vllm)
        tok = ScriptedTokenizer(ScriptedEngine(tier.servers[0].engine.tokenizer))
        direct = Client(base_url=tier.router.url, tokenizer=tok)
        try:
            assert isinstance(direct.engine, OpenAIServerEngine)
            prompts = [f"direct #{i};" for i in range(4)]
            direct.generate_batch(Trip, prompts, contexts=[TRIP_CONTEXT] * 4)
        finally:
            direct.close()
        for i in range(4):
            assert len(servers_of(tier, f"direct #{i};")) == 1, i


def test_affinity_raises_the_prefix_cache_hit_rate() -> None:
    rates: dict[str, PrefixCache] = {}
    for policy in ("consistent_hash", "round_robin"):
        with engine_tier("vllm", policy) as tier, front(tier.engine()) as client:
            for i in range(6):  # one after another: the same requests under both policies
                ask(client, f"trip #{i};")
            rates[policy] = tier.cache()
            spread = [len(servers_of(tier, f"trip #{i};")) for i in range(6)]
            assert spread == ([1] * 6 if policy == "consistent_hash" else [2] * 6)
    print({p: round(c.hit_rate, 3) for p, c in rates.items()})
    assert rates["consistent_hash"].queries == rates["round_robin"].queries
    assert rates["consistent_hash"].hit_rate > rates["round_robin"].hit_rate


@pytest.mark.parametrize(
    "router_args",
    [
        pytest.param((), id="router-retries"),
        pytest.param(("--disable-retries", "--cb-failure-threshold", "1"), id="front-restarts"),
    ],
)
def test_a_server_killed_mid_run_loses_no_record(router_args: tuple[str, ...]) -> None:
    """The dead server's records finish on the other: the router retries their requests
    there (its default), or answers the front a 5xx and the front restarts them.

    A record's affinity key is fresh and the router's hashing is seeded per process, so how
    many requests reach the first server is chance: records go in batches of 8 until it has
    had its third request and died (one batch was not always enough).
    """
    with (
        engine_tier("vllm", "consistent_hash", die_at=(3, None), args=router_args) as tier,
        front(tier.engine()) as client,
    ):
        dead, alive = tier.servers
        trips: list[Trip] = []
        errors: list[BaseException] = []
        asked = 0
        while not dead.dead and asked < 64:
            got, failed = concurrently(8, functools.partial(ask_nth, client, asked))
            trips += got
            errors += failed
            asked += 8
        assert dead.dead and not errors, errors  # 0 lost
        assert len(trips) == asked  # 0 invalid: each one passed Trip's relations in ask()
        assert len(dead.prompts) == 3 and len(alive.prompts) > 8
        # a record the dead server held finished on the other
        assert any(servers_of(tier, f"trip #{i};") == {0, 1} for i in range(asked))
        metrics = httpx.get(str(client.base_url).removesuffix("/v1/") + "/metrics").text
        (restarts,) = [
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("factorspec_upstream_restarts_total")
        ]
        assert restarts >= (1 if router_args else 0)


def test_sglang_router_keeps_each_record_on_one_server() -> None:
    """SGLang's /generate through sglang-router's manual policy (X-SMG-Routing-Key)."""
    with engine_tier("sglang", "manual", flavor="sglang") as tier:
        engine = tier.engine(server="sglang")
        assert engine.name == "sglang-server" and engine.constraint_style == "regex"
        client = Client(engine)
        # each record's key is a fresh uuid, so 4 records all on one of two servers is
        # chance (1 in 8): batches of 4 until both served (at most 32 records)
        trips: list[Trip] = []
        try:
            while not all(s.prompts for s in tier.servers) and len(trips) < 32:
                prompts = [f"trip #{i};" for i in range(len(trips), len(trips) + 4)]
                trips += client.generate_batch(Trip, prompts, contexts=[TRIP_CONTEXT] * 4)
        finally:
            client.close()
        for trip in trips:
            Trip.model_validate(trip.model_dump(), context=TRIP_CONTEXT)
        for i in range(len(trips)):
            assert len(servers_of(tier, f"trip #{i};")) == 1, i
        assert all(s.prompts for s in tier.servers)
        body = tier.servers[0].bodies[0]  # what the router handed on: ours, intact
        assert body["input_ids"] == tier.servers[0].prompts[0]
        params = body["sampling_params"]
        assert params["regex"].startswith("(") and params["skip_special_tokens"] is False


def _replica_answers(router: str, n: int, first: int) -> list[tuple[int, int, str]]:
    """``n`` concurrent soak requests through the router: (i, status, problem or "")."""

    def one(i: int) -> tuple[int, int, str]:
        body, model, context = soak_request(i)
        r = httpx.post(router + "/v1/chat/completions", json=body, timeout=120)
        if r.status_code != 200:
            return i, r.status_code, r.text
        content = r.json()["choices"][0]["message"]["content"]
        model.model_validate_json(content, context=context)  # invalid: raises, counted lost
        return i, 200, ""

    answers, errors = concurrently(n, lambda i: one(first + i))
    assert not errors, errors  # no connection lost, no invalid record
    return answers


def test_two_planner_replicas_behind_a_router() -> None:
    with ExitStack() as stack:
        replicas = [
            ServerProcess("scripted", model_name=SOAK_MODEL, args=("--planning-workers", "0"))
            for _ in range(2)
        ]
        for replica in replicas:
            stack.callback(replica.stop)
        _, failed = concurrently(2, lambda i: replicas[i].start())  # side by side
        assert not failed, failed
        router = stack.enter_context(
            RouterProcess("vllm", [r.url for r in replicas], policy="round_robin")
        )
        answers = _replica_answers(router.url, 16, 0)
        assert [status for _, status, _ in answers] == [200] * 16  # nothing lost
        for replica in replicas:  # both planned
            metrics = httpx.get(replica.url + "/metrics").text
            assert 'route="/v1/chat/completions",status="200"}' in metrics
        # one replica dies with requests in flight: the router retries them on the other
        # (vllm-router retries a request whose connection failed), or answers a 5xx that
        # names the dead replica; never an invalid record, and the others finish
        dead = replicas[0]
        killer = threading.Timer(0.3, os.kill, args=(dead.pid, signal.SIGKILL))
        killer.start()
        answers = _replica_answers(router.url, 24, 100)
        killer.join()
        for i, status, problem in answers:
            assert status == 200 or (status >= 500 and f":{dead.port}" in problem), (i, problem)
        assert sum(status == 200 for _, status, _ in answers) >= 12
        after = _replica_answers(router.url, 8, 200)
        assert [status for _, status, _ in after] == [200] * 8
