"""`factorspec serve --upstream`: the front over two scripted vLLM-like servers on loopback.

Each upstream is a real HTTP server (`tests.server.scripted_upstream`); the front is the
real app on uvicorn, driven by the official `openai` client. Routing is deterministic:
records sent one at a time alternate between the upstreams (fewest in flight, then fewest
served), and an upstream dies on a given request number, so "mid-record" is exact.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import httpx
import openai  # noqa: TID253
import pytest
from typer.testing import CliRunner

from factorspec_sdk import Client
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.engines.upstreams import UpstreamPool
from factorspec_sdk.errors import UpstreamsUnavailableError
from factorspec_sdk.ir import to_ir
from factorspec_sdk.server import create_app
from tests.helpers import TRIP_CONTEXT, Trip
from tests.server.helpers import MODEL, running, scripted_engine
from tests.server.scripted_upstream import ScriptedTokenizer, ScriptedUpstream


@dataclass
class Front:
    pool: UpstreamPool
    url: str
    client: openai.OpenAI
    upstreams: list[ScriptedUpstream]


@contextmanager
def front(
    *die_at: int | None, probe_interval_s: float | None = None, delay_s: float = 0.0
) -> Iterator[Front]:
    """Scripted upstreams (one per ``die_at``), the pool over them and the front app, all
    closed at the end."""
    with ExitStack() as stack:
        ups = [
            ScriptedUpstream(scripted_engine(), die_at=d, delay_s=delay_s).start() for d in die_at
        ]
        for up in ups:
            stack.callback(up.kill)
        pool = UpstreamPool(
            [u.url for u in ups],
            tokenizer=ScriptedTokenizer(ScriptedEngine(ups[0].engine.tokenizer)),
            probe_interval_s=probe_interval_s,
            probe_timeout_s=2.0,
            timeout=30.0,
        )
        stack.callback(pool.close)
        url = stack.enter_context(running(create_app(pool, model_name=MODEL)))
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        stack.callback(client.close)
        yield Front(pool, url, client, ups)


def ask(client: openai.OpenAI, content: str) -> Trip:
    r = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": content}],
        extra_body={"factorspec": {"ir": to_ir(Trip, TRIP_CONTEXT)}},
    )
    assert r.choices[0].finish_reason == "stop"
    return Trip.model_validate_json(r.choices[0].message.content or "", context=TRIP_CONTEXT)


def served(upstream: ScriptedUpstream, marker: str) -> int:
    """How many completion requests of the record whose prompt holds ``marker`` it served."""
    tok = upstream.engine.tokenizer
    return sum(marker in tok.decode(p).decode() for p in upstream.prompts)


def test_records_alternate_and_each_stays_on_one_upstream() -> None:
    with front(None, None) as f:
        for i in range(6):
            trip = ask(f.client, f"trip #{i};")
            assert sorted(leg.city for leg in trip.legs) == sorted(TRIP_CONTEXT)
        for i in range(6):
            counts = [served(u, f"trip #{i};") for u in f.upstreams]
            # every segment of a record on one upstream: the one its turn gives
            assert counts[i % 2] >= 2 and counts[1 - i % 2] == 0, (i, counts)
        health = f.pool.health()
        assert [h.records for h in health] == [3, 3]
        assert all(h.up and h.in_flight == 0 and h.last_error is None for h in health)
        body = httpx.get(f.url + "/health").json()
        assert body["status"] == "ok" and [u["records"] for u in body["upstreams"]] == [3, 3]
        assert body["engine"] == "vllm-upstreams"


def test_concurrent_records_use_both_upstreams_and_stream() -> None:
    with front(None, None) as f:
        trips: list[Trip] = []
        errors: list[BaseException] = []

        def one(i: int) -> None:
            try:
                trips.append(ask(f.client, f"trip #{i};"))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors and len(trips) == 6
        assert all(h.records > 0 for h in f.pool.health())
        for i in range(6):
            counts = [served(u, f"trip #{i};") for u in f.upstreams]
            assert sorted(c > 0 for c in counts) == [False, True], (i, counts)
        stream = f.client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "a streamed trip"}],
            extra_body={"factorspec": {"ir": to_ir(Trip, TRIP_CONTEXT)}},
            stream=True,
        )
        parts: list[str] = []
        finish = None
        for chunk in stream:
            if chunk.choices:
                parts.append(chunk.choices[0].delta.content or "")
                finish = chunk.choices[0].finish_reason or finish
        assert finish == "stop" and len([p for p in parts if p]) > 1
        Trip.model_validate_json("".join(parts), context=TRIP_CONTEXT)


def test_an_upstream_dying_mid_record_restarts_the_record_on_the_other() -> None:
    with front(2, None) as f:  # the first upstream dies on its second request
        dead, alive = f.upstreams
        trip = ask(f.client, "trip #0;")  # the first record goes to the first upstream
        assert sorted(leg.city for leg in trip.legs) == sorted(TRIP_CONTEXT)
        assert served(dead, "trip #0;") == 2  # its first segment, then the crash
        assert served(alive, "trip #0;") >= 2  # restarted from the beginning
        assert alive.prompts[0] == dead.prompts[0]  # the same first request: a restart
        down, up = f.pool.health()
        assert not down.up and down.failures == 1 and "500" in (down.last_error or "")
        assert up.up and up.records == 1 and down.records == 0
        body = httpx.get(f.url + "/health").json()
        assert body["status"] == "ok" and [u["up"] for u in body["upstreams"]] == [False, True]
        metrics = httpx.get(f.url + "/metrics").text
        assert "factorspec_upstream_restarts_total 1" in metrics
        assert f'factorspec_upstream_up{{url="{dead.url}"}} 0' in metrics
        for i in range(1, 4):  # later records go to the live one
            ask(f.client, f"trip #{i};")
            assert served(alive, f"trip #{i};") >= 2
        dead.kill()  # wait for its port to close
        down, up = f.pool.probe()
        assert not down.up and "probe" in (down.last_error or "") and up.records == 4


def test_no_upstream_left_is_a_503_naming_them_and_the_front_stays_up() -> None:
    with front(None, None) as f:
        ask(f.client, "trip #0;")
        for up in f.upstreams:
            up.kill()
        t0 = time.monotonic()
        with pytest.raises(openai.InternalServerError) as caught:
            ask(f.client, "trip #1;")
        assert time.monotonic() - t0 < 30
        assert caught.value.status_code == 503
        error = caught.value.body
        assert isinstance(error, dict) and error["code"] == "upstreams_unavailable"
        for up in f.upstreams:
            assert up.url in error["message"]
            assert up.url in error["factorspec"]["upstreams"]
        assert [m.id for m in f.client.models.list().data] == [MODEL]
        health = httpx.get(f.url + "/health")
        assert health.status_code == 503 and health.json()["status"] == "no upstream is up"
        with pytest.raises(openai.InternalServerError):  # again, at once: no hang
            ask(f.client, "trip #2;")


def test_a_healed_upstream_is_probed_back_into_the_pool() -> None:
    with front(None, None, probe_interval_s=0.1) as f:
        sick, well = f.upstreams
        sick.broken = True  # answers 503 to everything, the probe included
        ask(f.client, "trip #0;")  # fails on the sick one, restarted on the well one
        assert served(sick, "trip #0;") == 0 and served(well, "trip #0;") >= 2
        assert not f.pool.health()[0].up
        sick.broken = False
        deadline = time.monotonic() + 30
        while not f.pool.health()[0].up:
            assert time.monotonic() < deadline, f.pool.health()
            time.sleep(0.05)
        ask(f.client, "trip #1;")  # fewest records served: the healed one
        assert served(sick, "trip #1;") >= 2


def test_choices_and_timeouts_keep_the_server_contract() -> None:
    with front(None, None) as f:
        r = f.client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "two trips"}],
            extra_body={"factorspec": {"ir": to_ir(Trip, TRIP_CONTEXT)}},
            n=2,
            temperature=1.0,
            seed=7,
        )
        assert [c.finish_reason for c in r.choices] == ["stop", "stop"]
        for c in r.choices:
            Trip.model_validate_json(c.message.content or "", context=TRIP_CONTEXT)
    with front(None, delay_s=0.5) as f:  # every request takes 0.5 s; a record needs >= 2
        with pytest.raises(openai.UnprocessableEntityError) as cut:  # never a partial record
            f.client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "a slow trip"}],
                extra_body={"factorspec": {"ir": to_ir(Trip, TRIP_CONTEXT), "timeout_s": 0.3}},
            )
        assert cut.value.body["code"] == "timeout_reached"  # type: ignore[index]
        assert f.pool.health()[0].up  # a timeout is no upstream failure


def test_the_pool_as_an_engine_of_a_client() -> None:
    with front(None, None) as f:
        client = Client(f.pool)
        trip = client.generate(Trip, "a trip", context=TRIP_CONTEXT)
        assert sorted(leg.city for leg in trip.legs) == sorted(TRIP_CONTEXT)


def test_pool_errors_are_clear() -> None:
    tok = ScriptedTokenizer(scripted_engine())
    with pytest.raises(ValueError, match="at least one"):
        UpstreamPool([], tokenizer=tok)
    nobody = ScriptedUpstream(scripted_engine())  # a free port nobody listens on
    with pytest.raises(UpstreamsUnavailableError, match="no upstream server answers") as caught:
        UpstreamPool([nobody.url], tokenizer=tok, probe_interval_s=None, probe_timeout_s=2.0)
    assert list(caught.value.upstreams) == [nobody.url]
    assert nobody.url in str(caught.value) and "[upstreams-unavailable]" in str(caught.value)


def test_the_serve_command_takes_upstreams(monkeypatch: pytest.MonkeyPatch) -> None:
    import factorspec_sdk.server as server
    from factorspec_sdk.cli.main import app

    seen: dict[str, object] = {}
    monkeypatch.setattr(server, "serve", lambda **kwargs: seen.update(kwargs))
    runner = CliRunner()
    result = runner.invoke(app, ["serve", "--upstream", "http://a:8000,http://b:8000"])
    assert result.exit_code == 0, result.output
    assert seen["upstream"] == "http://a:8000,http://b:8000" and seen["model"] is None
    result = runner.invoke(app, ["serve", "--upstream", "http://a:8000", "--engine", "scripted"])
    assert result.exit_code == 2 and "--upstream" in result.output
    assert json.dumps(seen)  # the options are plain values
