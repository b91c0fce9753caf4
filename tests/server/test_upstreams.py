"""`factorspec serve --upstream URL`: the front over one scripted vLLM-like server on loopback.

The upstream is a real HTTP server (`tests.server.scripted_upstream`); the front is the real
app on uvicorn, driven by the official `openai` client. A router in front of several
servers is `tests/server/test_routers.py`; here the upstream URL is one server, which fails
on given request numbers, so "mid-record" is exact.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace

import httpx
import openai  # noqa: TID253
import pytest
from typer.testing import CliRunner

from factorspec_sdk import Client, SamplingParams
from factorspec_sdk.backends.upstreams import decode_record
from factorspec_sdk.drafter.loop import DecodeJob
from factorspec_sdk.engines.openai_server import OpenAIServerEngine
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.errors import EngineError
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import to_ir
from factorspec_sdk.server import create_app, upstream_engine
from factorspec_sdk.tokens.plan import planner_for
from tests.helpers import TRIP_CONTEXT, Trip
from tests.server.helpers import MODEL, running, scripted_engine
from tests.server.scripted_upstream import ScriptedTokenizer, ScriptedUpstream


@dataclass
class Front:
    engine: OpenAIServerEngine
    url: str
    client: openai.OpenAI
    upstream: ScriptedUpstream


def tier(url: str, tokenizer: ScriptedEngine) -> OpenAIServerEngine:
    """The upstream as ``factorspec serve --upstream`` drives it (no retries: restarts)."""
    return OpenAIServerEngine(
        url, tokenizer=ScriptedTokenizer(tokenizer), max_retries=0, timeout=30.0
    )


@contextmanager
def front(*, die_at: int | None = None, fail_at: tuple[int, ...] = ()) -> Iterator[Front]:
    """A scripted upstream, the front app over it, all closed at the end."""
    with ExitStack() as stack:
        up = ScriptedUpstream(scripted_engine(), die_at=die_at, fail_at=fail_at).start()
        stack.callback(up.kill)
        engine = tier(up.url, ScriptedEngine(up.engine.tokenizer))
        stack.callback(engine.close)
        url = stack.enter_context(running(create_app(engine, model_name=MODEL)))
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        stack.callback(client.close)
        yield Front(engine, url, client, up)


def ask(client: openai.OpenAI, content: str) -> Trip:
    r = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": content}],
        extra_body={"factorspec": {"ir": to_ir(Trip, TRIP_CONTEXT)}},
    )
    assert r.choices[0].finish_reason == "stop"
    return Trip.model_validate_json(r.choices[0].message.content or "", context=TRIP_CONTEXT)


def served(upstream: ScriptedUpstream, marker: str) -> list[int]:
    """The numbers (from 0) of the requests whose prompt holds ``marker``."""
    tok = upstream.engine.tokenizer
    return [i for i, p in enumerate(upstream.prompts) if marker in tok.decode(p).decode()]


def test_every_request_of_a_record_carries_its_affinity_key() -> None:
    with front() as f:
        for i in range(3):
            trip = ask(f.client, f"trip #{i};")
            assert sorted(leg.city for leg in trip.legs) == sorted(TRIP_CONTEXT)
        keys = []
        for i in range(3):
            mine = {f.upstream.sessions[n] for n in served(f.upstream, f"trip #{i};")}
            assert len(mine) == 1 and None not in mine, mine  # one key for the whole record
            keys.append(mine.pop())
        assert len(set(keys)) == 3  # and its own
        body = httpx.get(f.url + "/health").json()
        assert body["status"] == "ok" and body["engine"] == "vllm-server"
        assert body["upstream"]["url"] == f.upstream.root
        assert body["upstream"]["requests"] == len(f.upstream.prompts)
        assert body["upstream"]["failures"] == 0 and body["upstream"]["last_error"] is None


def test_a_server_failing_mid_record_restarts_the_record() -> None:
    with front(fail_at=(2,)) as f:  # its second request (from 1) answers a 500
        trip = ask(f.client, "trip #0;")
        assert sorted(leg.city for leg in trip.legs) == sorted(TRIP_CONTEXT)
        first, second, restart, *rest = served(f.upstream, "trip #0;")
        assert (first, second, restart) == (0, 1, 2) and rest  # the record went on after it
        prompts, sessions = f.upstream.prompts, f.upstream.sessions
        assert prompts[restart] == prompts[first]  # from its beginning: a restart
        assert sessions[restart] != sessions[first]  # with a key of its own
        assert all(sessions[n] == sessions[restart] for n in rest)
        metrics = httpx.get(f.url + "/metrics").text
        assert f'factorspec_upstream_restarts_total{{url="{f.upstream.root}"}} 1' in metrics
        assert f'factorspec_upstream_failures_total{{url="{f.upstream.root}"}} 1' in metrics
        health = httpx.get(f.url + "/health").json()["upstream"]
        assert health["failures"] == 1 and "upstream hiccup" in health["last_error"]


def test_a_dead_upstream_is_a_503_naming_it_and_the_front_stays_up() -> None:
    with front(die_at=2) as f:  # dies on its second request: every restart fails too
        with pytest.raises(openai.InternalServerError) as caught:
            ask(f.client, "trip #0;")
        assert caught.value.status_code == 503
        error = caught.value.body
        assert isinstance(error, dict) and error["code"] == "upstreams_unavailable"
        assert f.upstream.root in error["message"] and "4 times in a row" in error["message"]
        assert list(error["factorspec"]["upstreams"]) == [f.upstream.root]
        assert [m.id for m in f.client.models.list().data] == [MODEL]  # still serving
        assert httpx.get(f.url + "/health").status_code == 200


def test_a_refused_request_is_no_server_failure() -> None:
    """A 4xx is the request's own fault: the record fails at once, nothing is restarted."""
    with front() as f:
        engine = tier(f.upstream.url, ScriptedEngine(f.upstream.engine.tokenizer))
        engine.dialect = replace(engine.dialect, route="/v1/no-such-route")
        spec = compile_spec(Trip, TRIP_CONTEXT)
        prompt = engine.apply_chat_template([{"role": "user", "content": "a trip"}])

        def job() -> DecodeJob:
            return DecodeJob(planner_for(spec, engine.tokenizer), prompt, SamplingParams())

        try:
            run = decode_record(engine, job, pauses_s=(0.0, 0.0))
        finally:
            engine.close()
        assert run.restarts == 0 and not run.failures
        assert isinstance(run.outcome.error, EngineError) and "404" in str(run.outcome.error)
        assert engine.failures == 0 and engine.last_error is None


def test_choices_streams_and_timeouts_keep_the_server_contract() -> None:
    with front() as f:
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
    with front() as f:
        f.upstream.delay_s = 0.5  # every request takes 0.5 s; a record needs >= 2
        with pytest.raises(openai.UnprocessableEntityError) as cut:  # never a partial record
            f.client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "a slow trip"}],
                extra_body={"factorspec": {"ir": to_ir(Trip, TRIP_CONTEXT), "timeout_s": 0.3}},
            )
        assert cut.value.body["code"] == "timeout_reached"  # type: ignore[index]
        assert f.engine.failures == 0  # a timeout is no upstream failure


def test_the_upstream_as_the_engine_of_a_client() -> None:
    with front() as f:
        client = Client(tier(f.upstream.url, ScriptedEngine(f.upstream.engine.tokenizer)))
        trip = client.generate(Trip, "a trip", context=TRIP_CONTEXT)
        assert sorted(leg.city for leg in trip.legs) == sorted(TRIP_CONTEXT)
        client.close()


def test_upstream_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="put a router in front") as several:
        upstream_engine("http://a:8001,http://b:8001")
    assert "vllm-router --policy consistent_hash" in str(several.value)
    nobody = ScriptedUpstream(scripted_engine())  # a free port nobody listens on
    with pytest.raises(EngineError, match="cannot list the models") as caught:
        tier(nobody.url, scripted_engine())
    assert nobody.url in str(caught.value)


def test_the_serve_command_takes_an_upstream(monkeypatch: pytest.MonkeyPatch) -> None:
    import factorspec_sdk.server as server
    from factorspec_sdk.cli.main import app

    seen: dict[str, object] = {}
    monkeypatch.setattr(server, "serve", lambda **kwargs: seen.update(kwargs))
    runner = CliRunner()
    args = ["serve", "--upstream", "http://router:8100", "--upstream-server", "sglang"]
    result = runner.invoke(app, [*args, "--upstream-records", "8"])
    assert result.exit_code == 0, result.output
    assert seen["upstream"] == "http://router:8100" and seen["model"] is None
    assert seen["upstream_server"] == "sglang" and seen["upstream_records"] == 8
    result = runner.invoke(app, ["serve", "--upstream", "http://a:8000", "--engine", "scripted"])
    assert result.exit_code == 2 and "--upstream" in result.output
    result = runner.invoke(app, ["serve", "--upstream", "http://a:8000", "--upstream-server", "x"])
    assert result.exit_code == 2 and "--upstream-server" in result.output
    result = runner.invoke(app, ["serve", "--upstream-records", "8"])
    assert result.exit_code == 2 and "--upstream" in result.output
    assert json.dumps(seen)  # the options are plain values
