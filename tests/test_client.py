"""Client behaviour on the scripted engine (fast, no model)."""

import asyncio
from collections.abc import Sequence

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
from factorspec_sdk.engines.protocol import Logits, SequenceId
from factorspec_sdk.engines.scripted import ScriptedEngine
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
