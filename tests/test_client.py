"""Client behaviour on the scripted engine (fast, no model)."""

import asyncio
import time
from collections.abc import Sequence
from typing import ClassVar

import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import (
    AsyncClient,
    Client,
    GenerationResult,
    SamplingParams,
    TokenBudgetError,
    UnsatisfiableSpecError,
    relation,
)
from factorspec_sdk.drafter.stats import GenerationStats
from factorspec_sdk.engines import ENGINES
from factorspec_sdk.engines.protocol import Logits, SequenceId
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.graph import DEFAULT_SPEC_COMPILER, SpecCompiler
from tests.drafter.test_stats import check_parts
from tests.helpers import TRIP_CONTEXT, Pick, Trip, tiny_tokenizer

TOK = tiny_tokenizer()


def engine() -> ScriptedEngine:
    return ScriptedEngine.random(TOK, seed=2, temperature_scale=2.0)


def test_generate_returns_typed_valid_record() -> None:
    client = Client(engine())
    trip = client.generate(Trip, "a trip to Paris", context=TRIP_CONTEXT)
    assert isinstance(trip, Trip)
    Trip.model_validate(trip.model_dump(), context=TRIP_CONTEXT)
    assert sorted(leg.city for leg in trip.legs) == sorted(TRIP_CONTEXT)


def test_result_carries_stats_and_text() -> None:
    client = Client(engine())
    result = client.generate(Pick, "pick one", return_result=True)
    assert isinstance(result, GenerationResult)
    assert Pick.model_validate_json(result.text) == result.value
    s = result.stats
    assert s.tokens == len(result.tokens) > 0
    assert 0 < s.verify_steps <= s.tokens
    assert s.wall_seconds >= s.forward_seconds > 0
    assert "tokens/step" in s.summary()


def test_speculation_off_matches_on() -> None:
    eng = engine()
    on = Client(eng).generate(Trip, "trip", context=TRIP_CONTEXT, return_result=True)
    off = Client(eng, speculative=False).generate(
        Trip, "trip", context=TRIP_CONTEXT, return_result=True
    )
    assert on.tokens == off.tokens
    assert off.stats.verify_steps == off.stats.tokens
    assert on.stats.verify_steps < off.stats.verify_steps


def test_batch_and_seeds() -> None:
    client = Client(engine())
    plans = client.generate_batch(
        Trip, ["a", "b", "c"], contexts=[TRIP_CONTEXT] * 3, temperature=1.0, seed=5
    )
    assert len(plans) == 3
    again = client.generate_batch(
        Trip, ["a", "b", "c"], contexts=[TRIP_CONTEXT] * 3, temperature=1.0, seed=5
    )
    assert plans == again
    with pytest.raises(ValueError, match="contexts"):
        client.generate_batch(Trip, ["a"], contexts=[TRIP_CONTEXT] * 2)


def test_chat_messages_and_system_prompt() -> None:
    client = Client(engine())
    a = client.generate(Pick, [{"role": "user", "content": "pick"}])
    b = client.generate(Pick, "pick", system="be brief")
    assert isinstance(a, Pick) and isinstance(b, Pick)
    with pytest.raises(TypeError):
        client.generate(Pick, [{"role": "user", "content": "x"}], system="no")
    with pytest.raises(TypeError):
        client.generate(Pick, [{"role": "user", "text": "x"}])


def test_async_client_uses_the_same_loop() -> None:
    client = Client(engine())
    sync = client.generate(Pick, "pick")
    got = asyncio.run(AsyncClient(client=client).generate(Pick, "pick"))
    assert got == sync


def test_a_client_given_its_own_compiler_fills_that_one() -> None:
    compiler = SpecCompiler()
    client = Client(engine(), compiler=compiler)
    assert client.compiler is compiler
    assert Client(engine()).compiler is DEFAULT_SPEC_COMPILER
    default = (DEFAULT_SPEC_COMPILER.specs.hits, DEFAULT_SPEC_COMPILER.specs.misses)
    first = client.generate(Trip, "trip", context=TRIP_CONTEXT)
    assert (len(compiler.specs), compiler.specs.hits, compiler.specs.misses) == (1, 0, 1)
    with client.stream(Trip, "trip", context=TRIP_CONTEXT) as stream:
        list(stream)
    assert stream.result.value == first
    shared = AsyncClient(client=client)  # shares the client's backend and compiler
    assert shared.compiler is compiler
    assert asyncio.run(shared.generate(Trip, "trip", context=TRIP_CONTEXT)) == first
    assert (len(compiler.specs), compiler.specs.hits) == (1, 2)
    assert (DEFAULT_SPEC_COMPILER.specs.hits, DEFAULT_SPEC_COMPILER.specs.misses) == default


class Clash(BaseModel):
    x: int = Field(ge=0, le=5)

    @relation
    def big(self) -> bool:
        return self.x > 3

    @relation
    def small(self) -> bool:
        return self.x < 2

    @relation
    def innocent(self) -> bool:
        return self.x >= 0


def test_unsatisfiable_spec_fails_before_any_token() -> None:
    eng = engine()
    with pytest.raises(UnsatisfiableSpecError) as info:
        Client(eng).generate(Clash, "x")
    assert "big" in info.value.core and "small" in info.value.core
    assert "innocent" not in info.value.core
    assert eng.forward_calls == 0


def test_max_tokens_below_the_shortest_record_fails_before_any_token() -> None:
    eng = engine()
    with pytest.raises(TokenBudgetError) as info:
        Client(eng).generate(Trip, "trip", context=TRIP_CONTEXT, max_tokens=8)
    assert info.value.max_tokens == 8 and info.value.min_tokens > 8
    assert eng.forward_calls == 0
    record = Client(eng).generate(
        Trip, "trip", context=TRIP_CONTEXT, max_tokens=info.value.min_tokens
    )
    Trip.model_validate(record.model_dump(), context=TRIP_CONTEXT)


def test_bad_sampling_params() -> None:
    with pytest.raises(ValueError):
        Client(engine()).generate(Pick, "x", temperature=-0.5)


class CountingEngine(ScriptedEngine):
    """The scripted engine, recording how many sequences each forward carried."""

    widths: list[int]

    def extend(
        self,
        requests: Sequence[tuple[SequenceId, Sequence[int]]],
        *,
        keep: Sequence[int] | None = None,
    ) -> list[Logits]:
        self.widths = [*getattr(self, "widths", []), len(requests)]
        return super().extend(requests, keep=keep)


def counting_engine() -> CountingEngine:
    eng = CountingEngine.random(TOK, seed=2, temperature_scale=2.0)
    assert isinstance(eng, CountingEngine)
    return eng


TOO_MANY = {"Paris": 3, "Rome": 2, "Parma": 4, "Oslo": 1, "Nice": 2}  # 5 cities > max_length 4


def test_batch_returns_per_record_errors() -> None:
    eng = counting_engine()
    client = Client(eng)
    got = client.generate_batch(
        Trip,
        ["a", "b", "c"],
        contexts=[TRIP_CONTEXT, TOO_MANY, TRIP_CONTEXT],
        return_result=True,
        return_exceptions=True,
    )
    first, failed, last = got
    assert isinstance(first, GenerationResult) and isinstance(last, GenerationResult)
    assert isinstance(failed, UnsatisfiableSpecError)
    assert max(eng.widths) == 2  # the two good records ran in one decoder run
    alone = Client(engine()).generate(Trip, "a", context=TRIP_CONTEXT, return_result=True)
    assert first.tokens == alone.tokens
    values = client.generate_batch(
        Trip, ["a", "b"], contexts=[TRIP_CONTEXT, TOO_MANY], return_exceptions=True
    )
    assert values[0] == first.value and isinstance(values[1], UnsatisfiableSpecError)
    with pytest.raises(UnsatisfiableSpecError):
        client.generate_batch(Trip, ["a", "b"], contexts=[TRIP_CONTEXT, TOO_MANY])


def test_batch_budget_error_is_per_record() -> None:
    client = Client(engine())
    got = client.generate_batch(Pick, ["a"], max_tokens=2, return_exceptions=True)
    assert isinstance(got[0], TokenBudgetError)
    with pytest.raises(ValueError, match="contexts"):  # argument errors still raise
        client.generate_batch(Pick, ["a"], contexts=[None, None], return_exceptions=True)


def test_sampling_params_object_or_keywords() -> None:
    client = Client(engine())
    by_keywords = client.generate_batch(
        Trip, ["a", "b"], contexts=[TRIP_CONTEXT] * 2, temperature=1.0, seed=7
    )
    by_params = client.generate_batch(
        Trip, ["a", "b"], contexts=[TRIP_CONTEXT] * 2, params=SamplingParams(1.0, seed=7)
    )
    assert by_keywords == by_params
    with pytest.raises(TypeError, match="not both"):
        client.generate(Pick, "x", params=SamplingParams(), seed=1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        client.generate(Pick, "x", temprature=1.0)  # type: ignore[call-overload]


def test_async_callers_are_decoded_in_one_batch() -> None:
    eng = counting_engine()
    client = AsyncClient(eng)

    async def together() -> tuple[Pick, Trip]:
        return await asyncio.gather(
            client.generate(Pick, "pick"), client.generate(Trip, "trip", context=TRIP_CONTEXT)
        )

    pick, trip = asyncio.run(together())
    assert client.batch_sizes == [2]  # one backend run for both callers
    assert eng.widths[0] == 2  # its first forward carried both sequences
    assert pick == Client(engine()).generate(Pick, "pick")
    assert trip == Client(engine()).generate(Trip, "trip", context=TRIP_CONTEXT)


def test_async_batch_errors_stay_with_their_caller() -> None:
    client = AsyncClient(engine())

    async def both() -> tuple[Trip | BaseException, Pick | BaseException]:
        return await asyncio.gather(
            client.generate(Trip, "a", context=TOO_MANY),
            client.generate(Pick, "b"),
            return_exceptions=True,
        )

    failed, pick = asyncio.run(both())
    assert client.batch_sizes == [2]
    assert isinstance(failed, UnsatisfiableSpecError) and isinstance(pick, Pick)
    again = asyncio.run(
        client.generate_batch(Trip, ["a"], contexts=[TOO_MANY], return_exceptions=True)
    )  # a new event loop gets a new background task
    assert isinstance(again[0], UnsatisfiableSpecError)
    assert client.batch_sizes == [2, 1]


# ------------------------------------------------------------------ the spec before the engine


class BuiltEngine(ScriptedEngine):
    """A named engine (registered as ``"built"``) that records each time it is built."""

    built: ClassVar[list[float]] = []
    """How long each build took."""

    def __init__(self) -> None:
        t0 = time.perf_counter()
        super().__init__(TOK, engine()._logits_fn)
        BuiltEngine.built.append(time.perf_counter() - t0)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """``Client("built")`` builds a `BuiltEngine` on first use; the list of its builds."""
    monkeypatch.setitem(ENGINES, "built", ("tests.test_client", "BuiltEngine"))
    BuiltEngine.built.clear()
    return BuiltEngine.built


def clash_stream(client: Client) -> None:
    with client.stream(Clash, "x") as stream:
        list(stream)


async def clash_async_stream(client: AsyncClient) -> None:
    async with client.stream(Clash, "x") as stream:
        async for _ in stream:
            pass


SYNC_FORMS = {
    "generate": lambda c: c.generate(Clash, "x"),
    "generate_batch": lambda c: c.generate_batch(Clash, ["x", "y"]),
    "stream": clash_stream,
    "call": lambda c: c.call([Clash], "x"),
}
ASYNC_FORMS = {
    "async generate": lambda c: c.generate(Clash, "x"),
    "async generate_batch": lambda c: c.generate_batch(Clash, ["x", "y"]),
    "async stream": clash_async_stream,
    "async call": lambda c: c.call([Clash], "x"),
}


@pytest.mark.parametrize("form", sorted(SYNC_FORMS))
def test_a_spec_error_is_raised_before_the_engine_loads(built: list[float], form: str) -> None:
    client = Client("built")
    with pytest.raises(UnsatisfiableSpecError):
        SYNC_FORMS[form](client)
    assert built == []  # the engine was never built
    assert isinstance(client.generate(Pick, "x"), Pick)  # a good spec builds it, once
    client.generate(Pick, "y")
    assert len(built) == 1


@pytest.mark.parametrize("form", sorted(ASYNC_FORMS))
def test_an_async_spec_error_is_raised_before_the_engine_loads(
    built: list[float], form: str
) -> None:
    async def run() -> None:
        async with AsyncClient("built") as client:
            with pytest.raises(UnsatisfiableSpecError):
                await ASYNC_FORMS[form](client)
            assert built == []
            assert isinstance(await client.generate(Pick, "x"), Pick)
        assert len(built) == 1

    asyncio.run(run())


# ------------------------------------------------------------------ where the time goes


def test_the_parts_add_up_to_the_wall_of_every_form_of_call() -> None:
    client = Client(engine())
    results = [
        client.generate(Trip, "a", context=TRIP_CONTEXT, return_result=True),
        client.generate(Trip, "a", context=TRIP_CONTEXT, return_result=True, speculative=False),
        *client.generate_batch(
            Trip, ["a", "b", "c"], contexts=[TRIP_CONTEXT] * 3, return_result=True
        ),
    ]
    with client.stream(Trip, "a", context=TRIP_CONTEXT) as stream:
        list(stream)
    results.append(stream.result)
    results.append(asyncio.run(AsyncClient(client=client).generate(Pick, "p", return_result=True)))
    for result in results:
        check_parts(result.stats)
        assert result.stats.forward_seconds > 0 and result.stats.validate_seconds > 0
        assert result.stats.spec_seconds > 0 and result.stats.prompt_seconds > 0
    assert results[0].stats.batch_seconds == 0.0  # alone: no other record to wait for
    assert all(r.stats.batch_seconds > 0 for r in results[2:5])  # three records together
    assert results[5].stats.stream_seconds > 0  # the stream's partial views


def test_the_first_call_of_a_named_engine_counts_its_load(built: list[float]) -> None:
    client = Client("built")
    first = client.generate(Pick, "x", return_result=True)
    assert first.stats.load_seconds >= built[0]  # the build, inside the call's load part
    check_parts(first.stats)
    again = client.generate(Pick, "x", return_result=True)  # the engine is there
    assert len(built) == 1
    check_parts(again.stats)


def test_measuring_the_cost_curve_is_its_own_part() -> None:
    """The ticket's 7.8 s: an engine measuring its cost curve in the first call's drafts."""
    measured: list[float] = []

    def cost_curve(k: int) -> float:
        if not measured:  # the first width asked for measures the curve (forwards, on a
            t0 = time.perf_counter()  # real engine; here some arithmetic)
            sum(i * i for i in range(200_000))
            measured.append(time.perf_counter() - t0)
        return 1.0 + 0.03 * (k - 1)

    eng = ScriptedEngine.random(TOK, seed=2, temperature_scale=2.0, cost_curve=cost_curve)
    result = Client(eng).generate(Trip, "a trip to Paris", context=TRIP_CONTEXT, return_result=True)
    assert result.stats.guesses_proposed  # a guess: its draft's width was weighed
    assert result.stats.cost_curve_seconds >= measured[0]  # named, not in other_seconds
    check_parts(result.stats)


def test_stats_of_records_that_failed_are_not_results_but_errors_keep_their_place() -> None:
    client = Client(engine())
    got = client.generate_batch(
        Trip,
        ["a", "b"],
        contexts=[TRIP_CONTEXT, TOO_MANY],
        return_exceptions=True,
        return_result=True,
    )
    assert isinstance(got[1], UnsatisfiableSpecError)
    assert isinstance(got[0], GenerationResult)
    check_parts(got[0].stats)
    assert got[0].stats.batch_seconds > 0  # the other record's spec compile
    assert isinstance(got[0].stats, GenerationStats)
