"""`factorspec serve` on a real uvicorn server (127.0.0.1), driven by the official client."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai  # noqa: TID253
import pytest

from factorspec_sdk import Client, TokenBudgetError, UnsatisfiableSpecError
from factorspec_sdk.backends.remote import RemoteBackend
from factorspec_sdk.ir import DEFAULT_IR_COMPILER, IRCompiler, to_ir
from factorspec_sdk.server import create_app
from factorspec_sdk.server.app import ServerOptions
from tests.helpers import TRIP_CONTEXT, Pick, Trip, tiny_tokenizer
from tests.server.helpers import MODEL, Slow, running, scripted_engine, slow_engine


def trip_ir() -> dict[str, object]:
    return to_ir(Trip, TRIP_CONTEXT)


def chat(client: openai.OpenAI, content: str = "a trip", **kw: object) -> object:
    extra = kw.pop("extra_body", {"factorspec": {"ir": trip_ir()}})
    return client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": content}],
        extra_body=extra,  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def test_models_health_metrics(url: str, client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == [MODEL]
    assert httpx.get(url + "/health").json()["status"] == "ok"
    text = httpx.get(url + "/metrics").text
    for name in ("requests_total", "tokens_per_verify_step", "oracle_seconds_total", "queue_depth"):
        assert f"factorspec_{name}" in text


def test_chat_with_relation_ir(client: openai.OpenAI) -> None:
    r = chat(client)
    choice = r.choices[0]  # type: ignore[attr-defined]
    assert choice.finish_reason == "stop"
    trip = Trip.model_validate_json(choice.message.content, context=TRIP_CONTEXT)
    assert sorted(leg.city for leg in trip.legs) == sorted(TRIP_CONTEXT)
    assert r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0  # type: ignore[attr-defined]
    stats = r.model_extra["factorspec"]  # type: ignore[attr-defined]
    assert stats["valid"] and stats["tokens_per_step"] > 1 and stats["verify_steps"] > 0


def test_speculation_can_be_turned_off_per_request(client: openai.OpenAI) -> None:
    results = {}
    for speculative in (True, False):
        extra = {"factorspec": {"ir": trip_ir(), "speculative": speculative}}
        r = chat(client, extra_body=extra)
        results[speculative] = (
            r.choices[0].message.content,  # type: ignore[attr-defined]
            r.usage.completion_tokens,  # type: ignore[attr-defined]
            r.model_extra["factorspec"]["verify_steps"],  # type: ignore[attr-defined]
        )
    (text_on, tokens_on, steps_on), (text_off, tokens_off, steps_off) = (
        results[True],
        results[False],
    )
    assert text_on == text_off and tokens_on == tokens_off
    assert steps_off == tokens_off > steps_on


def test_plain_json_schema_and_completions(client: openai.OpenAI) -> None:
    rf = {
        "type": "json_schema",
        "json_schema": {"name": "Pick", "schema": Pick.model_json_schema()},
    }
    r = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "pick"}],
        response_format=rf,  # type: ignore[arg-type]
    )
    data = json.loads(r.choices[0].message.content or "")
    assert data["letter"] in "xyz" and 0 <= data["n"] <= 3
    c = client.completions.create(
        model=MODEL, prompt="pick one:", extra_body={"response_format": rf}
    )
    assert json.loads(c.choices[0].text)["letter"] in "xyz"
    ids = tiny_tokenizer().encode("pick")
    c2 = client.completions.create(model=MODEL, prompt=ids, extra_body={"response_format": rf})
    assert c2.choices[0].finish_reason == "stop"


def test_stream_matches_non_stream(client: openai.OpenAI) -> None:
    full = chat(client, "stream me").choices[0].message.content  # type: ignore[attr-defined]
    parts: list[str] = []
    finish = None
    usage = None
    for chunk in chat(client, "stream me", stream=True, stream_options={"include_usage": True}):  # type: ignore[attr-defined]
        if chunk.choices:
            parts.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        else:
            usage = chunk.usage
    assert "".join(parts) == full
    assert finish == "stop" and usage is not None and usage.completion_tokens > 0
    assert len([p for p in parts if p]) >= 2  # the record arrived in pieces


def test_n_choices_and_seeds(client: openai.OpenAI) -> None:
    r = chat(client, "many", n=3, temperature=1.0, seed=11)
    assert len(r.choices) == 3  # type: ignore[attr-defined]
    for c in r.choices:  # type: ignore[attr-defined]
        Trip.model_validate_json(c.message.content, context=TRIP_CONTEXT)


def test_max_tokens_below_the_shortest_record_is_a_422(url: str, client: openai.OpenAI) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as info:
        chat(client, "cut", max_tokens=5)
    body = info.value.body
    assert body["code"] == "token_budget" and body["param"] == "max_tokens"  # type: ignore[index]
    need = body["factorspec"]["min_tokens"]  # type: ignore[index]
    r = chat(client, "cut", max_tokens=need)  # the shortest record fits exactly
    choice = r.choices[0]  # type: ignore[attr-defined]
    assert choice.finish_reason == "stop"
    Trip.model_validate_json(choice.message.content, context=TRIP_CONTEXT)
    backend = Client(backend=RemoteBackend(url))
    try:
        with pytest.raises(TokenBudgetError) as refused:  # the remote backend raises it too
            backend.generate(Trip, "cut", context=TRIP_CONTEXT, max_tokens=5)
    finally:
        backend.close()
    assert (refused.value.max_tokens, refused.value.min_tokens) == (5, need)


def test_errors_are_4xx(url: str, client: openai.OpenAI) -> None:
    ir = trip_ir()
    ir["factors"] = [*ir["factors"], {"name": "never", "formula": {"bool": False}}]  # type: ignore[list-item, misc]
    with pytest.raises(openai.UnprocessableEntityError) as unsat:
        chat(client, extra_body={"factorspec": {"ir": ir}})
    assert unsat.value.body["factorspec"]["unsat_core"] == ["never"]  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="response_format"):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.UnprocessableEntityError, match="tokenized"):
        chat(client, "caf\u00e9 \u2603")  # the tiny vocabulary cannot encode it
    for body in (b"", b"[1]", b'{"model": 1}', b"[" * 50_000 + b"]" * 50_000):
        r = httpx.post(url + "/v1/chat/completions", content=body)
        assert r.status_code == 400, r.text
    r = httpx.post(url + "/v1/chat/completions", content=b" " * (9 * 2**20))
    assert r.status_code == 413


def test_remote_backend_matches_local_client(url: str) -> None:
    prompts = ["a trip", "b trip", "c trip"]
    backend = Client(backend=RemoteBackend(url))
    remote = backend.generate_batch(Trip, prompts, contexts=[TRIP_CONTEXT] * 3, return_result=True)
    local = Client(scripted_engine()).generate_batch(
        Trip, prompts, contexts=[TRIP_CONTEXT] * 3, return_result=True
    )
    assert [r.text for r in remote] == [r.text for r in local]
    assert [r.tokens for r in remote] == [r.tokens for r in local]
    assert all(isinstance(r.value, Trip) for r in remote)
    bad = {"Paris": 3, "Rome": 2, "Parma": 4, "Oslo": 1, "Nice": 2}  # 5 cities > max_length 4
    with pytest.raises(UnsatisfiableSpecError):
        backend.generate(Trip, "x", context=bad)


def test_32_concurrent_requests_none_lost_none_mixed(url: str) -> None:
    prompts = [f"trip number {i}" for i in range(32)]
    contexts = [dict(list(TRIP_CONTEXT.items())[: 1 + i % 3]) for i in range(32)]
    backend = Client(backend=RemoteBackend(url, max_concurrency=32))
    t0 = time.perf_counter()
    remote = backend.generate_batch(
        Trip, prompts, contexts=contexts, temperature=1.0, seed=100, return_result=True
    )
    elapsed = time.perf_counter() - t0
    local = Client(scripted_engine()).generate_batch(
        Trip, prompts, contexts=contexts, temperature=1.0, seed=100, return_result=True
    )
    assert len(remote) == 32
    for r, lo, ctx in zip(remote, local, contexts, strict=True):
        Trip.model_validate(r.value.model_dump(), context=ctx)
        assert r.text == lo.text  # each answer is its own request's record
    assert elapsed < 60


def test_disconnect_frees_slot_and_timeout_is_an_error() -> None:
    app = create_app(slow_engine(), model_name=MODEL, options=ServerOptions(max_batch=4))
    with running(app) as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
        extra = {"factorspec": {"ir": to_ir(Slow)}}
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "notes"}],
            "stream": True,
            **extra,
        }
        with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=30) as resp:
            lines = resp.iter_lines()
            got = [next(lines) for _ in range(3)]
            assert got[0].startswith("data: ")
        deadline = time.monotonic() + 20
        while True:
            metrics = httpx.get(base + "/metrics").text
            if "factorspec_cancelled_total 1" in metrics and "factorspec_active_jobs 0" in metrics:
                break
            assert time.monotonic() < deadline, metrics
            time.sleep(0.1)
        with pytest.raises(openai.UnprocessableEntityError) as cut:  # never a partial record
            client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "notes"}],
                extra_body={"factorspec": {"ir": to_ir(Slow), "timeout_s": 0.3}},
            )
        error: Any = cut.value.body
        assert error["code"] == "timeout_reached"
        assert error["factorspec"]["partial_text"].startswith('{"notes": [')
        # a concurrent quick request is not blocked by the slow ones
        rf = {
            "type": "json_schema",
            "json_schema": {"name": "P", "schema": Pick.model_json_schema()},
        }
        results: list[str] = []

        def slow() -> None:
            client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "notes"}],
                extra_body={"factorspec": {"ir": to_ir(Slow), "timeout_s": 5}},
            )

        thread = threading.Thread(target=slow)
        thread.start()
        time.sleep(0.3)
        t0 = time.perf_counter()
        quick = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "pick"}],
            response_format=rf,  # type: ignore[arg-type]
        )
        results.append(quick.choices[0].message.content or "")
        quick_s = time.perf_counter() - t0
        thread.join()
        assert json.loads(results[0])["letter"] in "xyz"
        assert quick_s < 4


def test_api_key() -> None:
    app = create_app(scripted_engine(), model_name=MODEL, options=ServerOptions(api_key="k1"))
    with running(app) as base:
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(
                base_url=base + "/v1", api_key="bad", max_retries=0
            ).models.with_raw_response.list()
            chat(openai.OpenAI(base_url=base + "/v1", api_key="bad", max_retries=0))
        ok = chat(openai.OpenAI(base_url=base + "/v1", api_key="k1", max_retries=0))
        assert ok.choices[0].finish_reason == "stop"  # type: ignore[attr-defined]


def test_a_server_given_its_own_compiler_fills_that_one() -> None:
    compiler = IRCompiler()
    shared = DEFAULT_IR_COMPILER.documents
    default = (shared.hits, shared.misses)
    plain = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}
    rf = {"type": "json_schema", "json_schema": {"name": "Digit", "schema": plain}}
    with running(create_app(scripted_engine(), model_name=MODEL, compiler=compiler)) as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        texts = {chat(client).choices[0].message.content for _ in range(2)}  # type: ignore[attr-defined]
        picks = {
            client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "pick"}],
                response_format=rf,  # type: ignore[arg-type]
            )
            .choices[0]
            .message.content
            for _ in range(2)
        }
    assert len(texts) == 1 and len(picks) == 1
    schemas = compiler.schemas  # the response schema converted once
    assert (len(schemas), schemas.hits, schemas.misses) == (1, 1, 1)
    docs, specs = compiler.documents, compiler.specs
    assert specs is not None  # the second request's spec is the first's
    assert (len(specs), specs.hits, specs.misses) == (2, 2, 2)
    assert (len(docs), docs.hits, docs.misses, len(compiler.layouts)) == (2, 0, 2, 2)
    assert (shared.hits, shared.misses) == default


def test_the_specs_an_app_keeps_follow_its_options() -> None:
    default = create_app(scripted_engine(), model_name=MODEL)
    assert default.state.compiler is DEFAULT_IR_COMPILER  # 16 kept, shared in the process
    none = create_app(scripted_engine(), model_name=MODEL, options=ServerOptions(kept_specs=0))
    assert none.state.compiler is not DEFAULT_IR_COMPILER and none.state.compiler.specs is None
    few = create_app(scripted_engine(), model_name=MODEL, options=ServerOptions(kept_specs=2))
    assert few.state.compiler.specs is not None and few.state.compiler.specs.max_size == 2
    mine = IRCompiler()
    given = create_app(
        scripted_engine(), model_name=MODEL, options=ServerOptions(kept_specs=0), compiler=mine
    )
    assert given.state.compiler is mine  # a compiler given is the one used
    with pytest.raises(ValueError, match="max_specs"):
        create_app(scripted_engine(), model_name=MODEL, options=ServerOptions(kept_specs=-1))


def test_serve_hands_the_kept_specs_to_its_planning_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from factorspec_sdk import server
    from factorspec_sdk.server import planning_workers

    seen: list[ServerOptions] = []
    monkeypatch.setattr(
        planning_workers, "serve_workers", lambda engine, **kw: seen.append(kw["options"])
    )
    server.serve(scripted_engine(), planning_workers=1, kept_specs=3)
    server.serve(scripted_engine(), planning_workers=1)
    assert [o.kept_specs for o in seen] == [3, 16]


def test_requests_at_once_over_one_kept_spec_write_what_fresh_specs_write() -> None:
    """The server's compiler keeps a document's spec, and requests in flight at once share
    it (their oracles copy its terms under its lock); each writes the record a spec of its
    own writes, one request at a time."""
    seeds = list(range(8))  # sampled: each seed its own record, the same on every run

    def ask(client: openai.OpenAI, seed: int) -> str:
        r = chat(client, temperature=1.0, seed=seed)
        return r.choices[0].message.content  # type: ignore[attr-defined,no-any-return]

    fresh = IRCompiler(max_specs=0)
    with running(create_app(scripted_engine(), model_name=MODEL, compiler=fresh)) as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        want = [ask(client, seed) for seed in seeds]
    assert len(set(want)) > 1  # the seeds lead to different records
    kept = IRCompiler()
    with running(create_app(scripted_engine(), model_name=MODEL, compiler=kept)) as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        ask(client, 100)  # the first request builds the spec
        with ThreadPoolExecutor(len(seeds)) as pool:
            got = list(pool.map(lambda seed: ask(client, seed), seeds))
    assert got == want
    for text in got:
        Trip.model_validate_json(text, context=TRIP_CONTEXT)  # relations included
    assert kept.specs is not None
    assert (len(kept.specs), kept.specs.misses, kept.specs.hits) == (1, 1, len(seeds))


def test_client_with_base_url_talks_to_the_server(url: str) -> None:
    remote = Client(base_url=url + "/v1")
    local = Client(scripted_engine())
    got = remote.generate(Trip, "a trip", context=TRIP_CONTEXT, return_result=True)
    want = local.generate(Trip, "a trip", context=TRIP_CONTEXT, return_result=True)
    assert isinstance(got.value, Trip) and got.text == want.text
    assert remote.generate_batch(Pick, ["x", "y"]) == local.generate_batch(Pick, ["x", "y"])
    with pytest.raises(TypeError):
        Client(scripted_engine(), base_url=url)
    with pytest.raises(TypeError):
        Client(api_key="k")


def test_a_remote_client_asks_the_server_for_its_drafting_setting(url: str) -> None:
    args = (Trip, "a trip")
    on = Client(base_url=url + "/v1").generate(*args, context=TRIP_CONTEXT, return_result=True)
    off = [
        Client(base_url=url + "/v1", speculative=False).generate(
            *args, context=TRIP_CONTEXT, return_result=True
        ),
        Client(base_url=url + "/v1").generate(
            *args, context=TRIP_CONTEXT, return_result=True, speculative=False
        ),
    ]
    for result in off:
        assert result.text == on.text
        assert result.stats.verify_steps == result.stats.tokens > on.stats.verify_steps


def test_remote_batch_returns_per_record_errors(url: str) -> None:
    bad = {"Paris": 3, "Rome": 2, "Parma": 4, "Oslo": 1, "Nice": 2}  # 5 cities > max_length 4
    with Client(backend=RemoteBackend(url)) as remote:
        got = remote.generate_batch(
            Trip, ["a trip", "x"], contexts=[TRIP_CONTEXT, bad], return_exceptions=True
        )
    local = Client(scripted_engine()).generate(Trip, "a trip", context=TRIP_CONTEXT)
    assert got[0] == local and isinstance(got[1], UnsatisfiableSpecError)


def test_grammar_values_travel_to_the_server_as_ir(url: str) -> None:
    """A model with floats, datetimes and a union beside relations (one over a date): the IR
    carries the grammar values and the date, the server decodes the grammar values with
    llguidance and ties the date's parts itself, the client gets a valid typed record."""
    import datetime as dt

    from pydantic import BaseModel, Field

    from factorspec_sdk import relation

    class Priced(BaseModel):
        price: float = Field(ge=0, le=100)
        day: dt.datetime
        code: int | str
        lo: int = Field(ge=0, le=5)
        hi: int = Field(ge=0, le=5)
        start: dt.date

        @relation
        def ordered(self) -> bool:
            return self.lo < self.hi

        @relation
        def starts_in_december_on_day_lo(self) -> bool:
            return self.start.month == 12 and self.start.weekday() == self.lo

    ir = to_ir(Priced)
    assert [f["node"]["type"] for f in ir["layout"]["fields"]][:3] == ["grammar"] * 3
    assert ir["layout"]["fields"][5]["node"]["kind"] == "date"
    with Client(backend=RemoteBackend(url)) as remote:
        for seed in range(3):
            record = remote.generate(Priced, "price", temperature=1.0, seed=seed, max_tokens=400)
            assert type(record) is Priced and record.lo < record.hi and 0 <= record.price <= 100
            assert record.start.month == 12 and record.start.weekday() == record.lo


def test_datetimes_and_unions_travel_to_the_server_as_ir(url: str) -> None:
    """Relations over a datetime, a time and a tagged union: the server writes the same
    records as the local client (the IR carries the leaves, the branches and their ties)."""
    import datetime as dt
    from typing import Literal

    from pydantic import BaseModel, Field

    from factorspec_sdk import relation

    class Call(BaseModel):
        kind: Literal["call"]
        minutes: int = Field(ge=5, le=60)

    class Visit(BaseModel):
        kind: Literal["visit"]
        room: int = Field(ge=1, le=9)

    class Slot(BaseModel):
        start: dt.datetime = Field(ge=dt.datetime(2026, 12, 1), le=dt.datetime(2026, 12, 31))
        alarm: dt.time
        what: Call | Visit

        @relation
        def mornings(self) -> bool:
            return 9 <= self.start.hour < 12 and self.start.minute % 15 == 0

        @relation
        def alarm_before(self) -> bool:
            return self.alarm < self.start.time()

        @relation
        def calls_on_the_hour(self) -> bool:
            return not isinstance(self.what, Call) or self.start.minute == 0

    ir = to_ir(Slot)
    assert [f["node"]["type"] for f in ir["layout"]["fields"]] == ["leaf", "leaf", "union"]
    for slot in _as_the_local_client(url, Slot, "a slot", max_tokens=300):
        assert 9 <= slot.start.hour < 12 and slot.alarm < slot.start.time()
        assert slot.what.kind == "visit" or slot.start.minute == 0


def _as_the_local_client(url: str, model: type[Any], prompt: str, max_tokens: int) -> list[Any]:
    """Records of ``model`` the server writes, each the local client's text (3 seeds)."""
    local = Client(scripted_engine())
    out = []
    with Client(backend=RemoteBackend(url)) as remote:
        for seed in range(3):
            kw: dict[str, Any] = {"temperature": 1.0, "seed": seed, "max_tokens": max_tokens}
            got = remote.generate(model, prompt, return_result=True, **kw)
            want = local.generate(model, prompt, return_result=True, **kw)
            assert got.text == want.text
            out.append(got.value)
    return out


def test_dicts_and_compared_strings_travel_to_the_server_as_ir(url: str) -> None:
    """A dict (free keys, kept distinct) and free strings compared with each other: the
    server writes the same records as the local client (the IR carries the entries, the
    same() variables and their ties)."""
    from typing import Annotated

    from pydantic import BaseModel, Field

    from factorspec_sdk import relation

    class Team(BaseModel):
        lead: str = Field(max_length=6)
        deputy: str = Field(max_length=6)
        shares: dict[Annotated[str, Field(max_length=6)], Annotated[int, Field(ge=0, le=10)]] = (
            Field(min_length=2, max_length=3)
        )

        @relation
        def two_people(self) -> bool:
            return self.lead != self.deputy and self.lead not in ("", "admin")

        @relation
        def shares_add_up(self) -> bool:
            return sum(self.shares.values()) == 10 and all(v > 0 for v in self.shares.values())

        @relation
        def lead_has_a_share(self) -> bool:
            return self.lead in self.shares

    ir = to_ir(Team)
    assert any(v.get("other") for v in ir["variables"])
    for team in _as_the_local_client(url, Team, "a team", max_tokens=200):
        assert team.lead != team.deputy and team.lead in team.shares
        assert sum(team.shares.values()) == 10


def test_remote_stream_gives_views_that_end_with_the_record(url: str) -> None:
    """``Client.stream`` over the server: views of the streamed text, then the record."""
    from factorspec_sdk.errors import GenerationError

    with Client(backend=RemoteBackend(url)) as remote:
        with remote.stream(Trip, "a trip", context=TRIP_CONTEXT) as stream:
            views = [v.model_dump() for v in stream]
        result = stream.result
    local = Client(scripted_engine()).stream(Trip, "a trip", context=TRIP_CONTEXT)
    local_views = [v.model_dump() for v in local]
    assert result.value == local.result.value
    assert views[-1] == local_views[-1] == result.value.model_dump()
    assert len(views) >= 2
    for view in views:
        for got, final in zip(view["legs"] or [], result.value.legs, strict=False):
            assert final.city.startswith(got["city"] or "")
            assert got["first_day"] in (None, final.first_day)
    assert result.provenance == local.result.provenance  # the server sent it
    with Client(backend=RemoteBackend(url, provenance=False)) as remote:
        with remote.stream(Trip, "a trip", context=TRIP_CONTEXT) as stream:
            list(stream)
        with pytest.raises(GenerationError, match="no provenance"):
            _ = stream.result.provenance  # not asked for
    bad = {"Paris": 3, "Rome": 2, "Parma": 4, "Oslo": 1, "Nice": 2}
    with Client(backend=RemoteBackend(url)) as remote, pytest.raises(UnsatisfiableSpecError):
        list(remote.stream(Trip, "x", context=bad))


def test_tool_calls_travel_to_the_server_as_ir(url: str) -> None:
    """``client.call`` on a server: the record of calls is a union like any other."""
    from tests.test_tools import BookRoom, GetWeather

    with Client(backend=RemoteBackend(url)) as remote:
        got = remote.call([GetWeather, BookRoom], "book", parallel=True, max_calls=2)
    local = Client(scripted_engine()).call(
        [GetWeather, BookRoom], "book", parallel=True, max_calls=2
    )
    assert got == local
    for call in got:
        assert not isinstance(call, BookRoom) or call.first < call.last


# ------------------------------------------------------------------ provenance and stats


def test_a_remote_record_has_the_provenance_a_local_engine_gives(url: str) -> None:
    """``Client(base_url=...)`` asks the server for it: the same object as a local record's."""
    from examples import meeting

    remote, local = Client(base_url=url + "/v1"), Client(scripted_engine())
    for model, ctx in ((Trip, TRIP_CONTEXT), (meeting.Meeting, meeting.SAMPLE_CONTEXT)):
        got = remote.generate(model, "x", context=ctx, return_result=True)
        want = local.generate(model, "x", context=ctx, return_result=True)
        assert got.text == want.text
        assert got.provenance == want.provenance
    batch = remote.generate_batch(Trip, ["a", "b"], contexts=[TRIP_CONTEXT] * 2, return_result=True)
    alone = local.generate_batch(Trip, ["a", "b"], contexts=[TRIP_CONTEXT] * 2, return_result=True)
    assert [r.provenance for r in batch] == [r.provenance for r in alone]
    assert batch[0].provenance.sources["legs[0].first_day"].origin == "relations"


def test_the_server_sends_provenance_when_asked(client: openai.OpenAI) -> None:
    from factorspec_sdk.provenance import Provenance

    plain: Any = chat(client)
    asked: Any = chat(client, extra_body={"factorspec": {"ir": trip_ir(), "provenance": True}})
    assert "provenance" not in plain.model_extra["factorspec"]
    assert plain.model_extra["factorspec"]["explain_seconds"] == 0
    stats = asked.model_extra["factorspec"]
    prov = Provenance.from_json(stats["provenance"])
    assert sum(prov.tokens.values()) == len(stats["token_ids"]) == stats["tokens"]
    assert asked.choices[0].message.content == plain.choices[0].message.content
    assert stats["explain_seconds"] > 0


def test_the_stats_name_where_the_server_and_the_client_spent_their_time(
    url: str, client: openai.OpenAI
) -> None:
    from factorspec_sdk.drafter.stats import PARTS
    from tests.drafter.test_stats import check_parts

    stats = chat(client).model_extra["factorspec"]  # type: ignore[attr-defined]
    parts = {name: stats[name] for name in PARTS}
    assert all(seconds >= 0 for seconds in parts.values()), parts
    # each part is rounded to the microsecond
    assert sum(parts.values()) == pytest.approx(stats["wall_seconds"], abs=1e-6 * len(PARTS))
    assert stats["spec_seconds"] > 0 and stats["forward_seconds"] > 0
    assert stats["validate_seconds"] > 0 and stats["prompt_seconds"] > 0
    result = Client(base_url=url + "/v1").generate(
        Trip, "a trip", context=TRIP_CONTEXT, return_result=True
    )
    check_parts(result.stats)  # the server's parts, the client's, and the network between
    assert result.stats.network_seconds > 0 and result.stats.forward_seconds > 0
    assert result.stats.validate_seconds > 0  # the server's re-check and the client's
