"""The OpenAI SDK's ``parse`` and Instructor's call shape against a real ``factorspec serve``.

Every test talks to a uvicorn server on 127.0.0.1 over the scripted engine with the real
``openai`` and ``instructor`` packages; the I/O-free re-ask loop (`Attempts`) is also driven
by hand with real ``ChatCompletion`` objects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Literal

import httpx
import instructor
import openai  # noqa: TID253
import pytest
from instructor.core import InstructorRetryException
from openai.types.chat import ChatCompletion  # noqa: TID253
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

import factorspec_sdk
from factorspec_sdk import (
    ContextError,
    GenerationTimeoutError,
    IncompleteGenerationError,
    RemoteError,
    RetriesExhaustedError,
    TokenBudgetError,
    UnsatisfiableSpecError,
    relation,
)
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.integrations.openai_compat import (
    REASK_PROMPT,
    AsyncStructuredOpenAI,
    Attempts,
    StructuredOpenAI,
    failing_validators,
)
from factorspec_sdk.ir import to_ir
from factorspec_sdk.server import create_app
from tests.helpers import TRIP_CONTEXT, Pick, Trip, tiny_tokenizer
from tests.server.helpers import MODEL, Slow, running, scripted_engine, slow_engine

MESSAGES = [{"role": "user", "content": "give me a record"}]


class PlainPick(BaseModel):
    """`Pick` without its relation."""

    letter: Literal["x", "y", "z"]
    n: int = Field(ge=0, le=3)
    big: bool


class Sum(BaseModel):
    a: int = Field(ge=0, le=9)
    b: int = Field(ge=0, le=9)
    total: int = Field(ge=0, le=18)

    @relation
    def adds_up(self) -> bool:
        return self.total == self.a + self.b


class PlainSum(BaseModel):
    """`Sum` without its relation (a model with one carries it in its JSON schema)."""

    a: int = Field(ge=0, le=9)
    b: int = Field(ge=0, le=9)
    total: int = Field(ge=0, le=18)


class SumInSchema(Sum):
    """``Sum`` whose JSON schema carries its relation IR (``x-factorspec``)."""

    model_config = ConfigDict(
        json_schema_extra=lambda schema, cls: schema.update({"x-factorspec": {"ir": to_ir(cls)}})
    )


class Tagged(BaseModel):
    """A relation the server enforces and a validator it cannot (a re-ask's business)."""

    letter: str = Field(max_length=3)
    n: int = Field(ge=0, le=3)
    big: bool

    @relation
    def big_means_n_above_one(self) -> bool:
        return self.big == (self.n > 1)

    @field_validator("letter")
    @classmethod
    def letter_is_x(cls, value: str) -> str:
        if value != "x":
            raise ValueError("letter must be 'x'")
        return value


class Never(BaseModel):
    n: int = Field(ge=0, le=3)

    @field_validator("n")
    @classmethod
    def above_three(cls, value: int) -> int:
        raise ValueError(f"n must be above 3, got {value}")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running(create_app(scripted_engine(), model_name=MODEL)) as base:
        yield base


@pytest.fixture(scope="module")
def oai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)


def requests_served(url: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith('factorspec_requests_total{route="/v1/chat/completions",status="200"'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# ---------------------------------------------------------------- the OpenAI SDK's parse


def test_parse_with_relations_in_extra_body(oai: openai.OpenAI) -> None:
    for seed in range(4):
        completion = oai.chat.completions.parse(
            model=MODEL,
            messages=MESSAGES,  # type: ignore[arg-type]
            response_format=Sum,
            extra_body={"factorspec": {"ir": to_ir(Sum)}},
            temperature=1.0,
            seed=seed,
        )
        parsed = completion.choices[0].message.parsed
        assert isinstance(parsed, Sum)  # parse validated it: the relation held
        assert parsed.total == parsed.a + parsed.b


def test_parse_with_relations_in_the_schema(oai: openai.OpenAI) -> None:
    for seed in range(4):
        completion = oai.chat.completions.parse(
            model=MODEL,
            messages=MESSAGES,  # type: ignore[arg-type]
            response_format=SumInSchema,  # its schema carries x-factorspec
            temperature=1.0,
            seed=seed,
        )
        parsed = completion.choices[0].message.parsed
        assert isinstance(parsed, SumInSchema) and parsed.total == parsed.a + parsed.b


def test_parse_without_relations_fails_them(oai: openai.OpenAI) -> None:
    # the control of the tests above: the schema alone does not make the scripted model add
    # up, so the records that did came from the relation IR
    broken = 0
    for seed in range(4):
        completion = oai.chat.completions.parse(
            model=MODEL,
            messages=MESSAGES,  # type: ignore[arg-type]
            response_format=PlainSum,
            temperature=1.0,
            seed=seed,
        )
        parsed = completion.choices[0].message.parsed
        assert parsed is not None
        broken += parsed.total != parsed.a + parsed.b
    assert broken == 4


def test_parse_of_a_model_with_relations_carries_them(oai: openai.OpenAI) -> None:
    # Sum's own schema carries its relation: parse needs no extension field
    for seed in range(4):
        completion = oai.chat.completions.parse(
            model=MODEL,
            messages=MESSAGES,  # type: ignore[arg-type]
            response_format=Sum,
            temperature=1.0,
            seed=seed,
        )
        parsed = completion.choices[0].message.parsed
        assert isinstance(parsed, Sum) and parsed.total == parsed.a + parsed.b


def test_parse_raises_the_422_when_the_time_limit_ends_first() -> None:
    with running(create_app(slow_engine(), model_name=MODEL)) as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        with pytest.raises(openai.UnprocessableEntityError) as info:  # no partial record
            client.chat.completions.parse(
                model=MODEL,
                messages=[{"role": "user", "content": "notes"}],
                response_format=Slow,
                extra_body={"factorspec": {"ir": to_ir(Slow), "timeout_s": 0.3}},
            )
        assert info.value.body["code"] == "timeout_reached"  # type: ignore[index]
        # the same answer through from_openai is a GenerationTimeoutError
        with pytest.raises(GenerationTimeoutError) as incomplete:
            factorspec_sdk.from_openai(client).chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "notes"}],
                response_model=Slow,
                extra_body={"factorspec": {"timeout_s": 0.3}},
            )
        assert incomplete.value.partial_text.startswith('{"notes": [')


# ---------------------------------------------------------------- Instructor's shape


def test_from_openai_gives_the_same_class_as_instructor(url: str) -> None:
    raw = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    theirs = instructor.from_openai(raw, mode=instructor.Mode.JSON_SCHEMA)
    ours = factorspec_sdk.from_openai(raw)
    assert isinstance(ours, StructuredOpenAI) and ours.client is raw
    # Instructor sends the schema alone: a model without relations, so that it succeeds
    a = theirs.chat.completions.create(
        model=MODEL, messages=MESSAGES, response_model=PlainPick, max_retries=3
    )
    b = ours.chat.completions.create(
        model=MODEL, messages=MESSAGES, response_model=Pick, max_retries=3
    )
    # Instructor returns its own subclass of the response model (a ResponseSchema mixin)
    assert isinstance(a, PlainPick) and type(a) is not PlainPick
    assert isinstance(b, Pick) and type(b) is Pick
    Pick.model_validate(b.model_dump())  # its relation holds


def test_from_openai_satisfies_relations_instructor_cannot(url: str) -> None:
    raw = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    theirs = instructor.from_openai(raw, mode=instructor.Mode.JSON_SCHEMA)
    ours = factorspec_sdk.from_openai(raw)
    # Instructor sends the schema only and re-asks; the scripted model never finds the trip
    with pytest.raises(InstructorRetryException):
        theirs.chat.completions.create(
            model=MODEL, messages=MESSAGES, response_model=Trip, context=TRIP_CONTEXT, max_retries=2
        )
    before = requests_served(url)
    trip, completion = ours.chat.completions.create_with_completion(
        model=MODEL, messages=MESSAGES, response_model=Trip, context=TRIP_CONTEXT, max_retries=2
    )
    assert requests_served(url) == before + 1  # right the first time: no re-ask
    assert type(trip) is Trip
    Trip.model_validate(trip.model_dump(), context=TRIP_CONTEXT)
    assert sorted(leg.city for leg in trip.legs) == sorted(TRIP_CONTEXT)
    assert isinstance(completion, ChatCompletion)
    text = completion.choices[0].message.content or ""
    assert Trip.model_validate_json(text, context=TRIP_CONTEXT) == trip


def test_async_from_openai(url: str) -> None:
    async def main() -> tuple[Trip, Sum]:
        raw = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        client = factorspec_sdk.from_openai(raw)
        assert isinstance(client, AsyncStructuredOpenAI)
        try:
            trip, s = await asyncio.gather(
                client.chat.completions.create(
                    model=MODEL, messages=MESSAGES, response_model=Trip, context=TRIP_CONTEXT
                ),
                client.chat.completions.create(model=MODEL, messages=MESSAGES, response_model=Sum),
            )
        finally:
            await raw.close()
        return trip, s

    trip, s = asyncio.run(main())
    Trip.model_validate(trip.model_dump(), context=TRIP_CONTEXT)
    assert s.total == s.a + s.b


def test_retries_run_out_on_a_validator_the_server_cannot_enforce(url: str) -> None:
    client = factorspec_sdk.from_openai(openai.OpenAI(base_url=url + "/v1", api_key="none"))
    before = requests_served(url)
    with pytest.raises(RetriesExhaustedError) as info:
        client.chat.completions.create(
            model=MODEL, messages=MESSAGES, response_model=Never, max_retries=2
        )
    assert info.value.attempts == 3 and requests_served(url) == before + 3
    assert isinstance(info.value.last_error, ValidationError)
    assert isinstance(info.value.last_completion, ChatCompletion)


def test_errors_are_factorspec_errors(url: str) -> None:
    client = factorspec_sdk.from_openai(openai.OpenAI(base_url=url + "/v1", api_key="none"))
    kw = {"model": MODEL, "messages": MESSAGES}
    with pytest.raises(UnsatisfiableSpecError):
        client.chat.completions.create(**kw, response_model=Trip, context=dict.fromkeys("ABCDE", 1))
    with pytest.raises(TokenBudgetError) as budget:
        client.chat.completions.create(
            **kw, response_model=Trip, context=TRIP_CONTEXT, max_tokens=3
        )
    assert budget.value.max_tokens == 3 and budget.value.min_tokens > 3
    with pytest.raises(ContextError):
        client.chat.completions.create(**kw, response_model=Trip)
    with pytest.raises(RemoteError) as info:
        client.chat.completions.create(model="other", messages=MESSAGES, response_model=Pick)
    assert info.value.status == 404
    with pytest.raises(TypeError, match="response_format"):
        client.chat.completions.create(**kw, response_model=Pick, response_format={})
    with pytest.raises(TypeError, match="stream"):
        client.chat.completions.create(**kw, response_model=Pick, stream=True)
    with pytest.raises(TypeError, match="pydantic model class"):
        client.chat.completions.create(**kw, response_model=dict)  # type: ignore[type-var]
    with pytest.raises(ValueError, match="max_retries"):
        client.chat.completions.create(**kw, response_model=Pick, max_retries=-1)
    with pytest.raises(TypeError, match=r"openai\.OpenAI"):
        factorspec_sdk.from_openai(object())  # type: ignore[call-overload]


# ---------------------------------------------------------------- the re-ask loop, by hand


def completion(text: str, finish: str = "stop") -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": finish,
                    "message": {"role": "assistant", "content": text},
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10},
        }
    )


def test_a_failing_validator_is_re_asked_by_name() -> None:
    attempts = Attempts.start(Tagged, MESSAGES, None, 1, {"temperature": 0.5})  # type: ignore[arg-type]
    first = attempts.request()
    assert first["temperature"] == 0.5 and first["messages"] == MESSAGES
    assert first["response_format"]["json_schema"]["name"] == "Tagged"
    assert first["extra_body"]["factorspec"]["ir"]["name"] == "Tagged"
    bad = '{"letter": "y", "n": 2, "big": true}'
    assert attempts.take(completion(bad)) is None
    reask = attempts.request()["messages"]
    assert reask[:-2] == MESSAGES
    assert reask[-2] == {"role": "assistant", "content": bad}
    assert reask[-1]["role"] == "user"
    assert reask[-1]["content"].startswith(REASK_PROMPT)
    assert "letter must be 'x'" in reask[-1]["content"]
    assert "Failing validators: Tagged.letter_is_x" in reask[-1]["content"]
    good = attempts.take(completion('{"letter": "x", "n": 0, "big": false}'))
    assert isinstance(good, Tagged) and good.letter == "x"


def test_the_last_failure_raises_with_the_evidence() -> None:
    attempts = Attempts.start(Tagged, MESSAGES, None, 0, {})  # type: ignore[arg-type]
    last = completion('{"letter": "y", "n": 0, "big": false}')
    with pytest.raises(RetriesExhaustedError) as info:
        attempts.take(last)
    err = info.value
    assert err.attempts == 1 and err.last_completion is last and err.code == "retries-exhausted"
    assert err.last_text == '{"letter": "y", "n": 0, "big": false}'


def test_a_broken_relation_is_a_server_bug_never_a_re_ask() -> None:
    attempts = Attempts.start(Tagged, MESSAGES, None, 3, {})  # type: ignore[arg-type]
    with pytest.raises(RemoteError, match="big_means_n_above_one"):
        attempts.take(completion('{"letter": "x", "n": 0, "big": true}'))


def test_length_is_incomplete_not_a_re_ask() -> None:
    attempts = Attempts.start(Pick, MESSAGES, None, 3, {})  # type: ignore[arg-type]
    with pytest.raises(IncompleteGenerationError) as info:
        attempts.take(completion('{"letter": "x", ', finish="length"))
    assert info.value.tokens == 7


def test_failing_validators_name_nested_and_model_validators() -> None:
    from pydantic import model_validator

    class Inner(BaseModel):
        v: int

        @field_validator("v")
        @classmethod
        def small(cls, value: int) -> int:
            if value > 1:
                raise ValueError("too big")
            return value

        @model_validator(mode="after")
        def whole(self) -> Inner:
            return self

    class Outer(BaseModel):
        items: list[Inner]

        @field_validator("*")
        @classmethod
        def anything(cls, value: object) -> object:
            return value

    with pytest.raises(ValidationError) as info:
        Outer.model_validate({"items": [{"v": 0}, {"v": 5}]})
    assert failing_validators(Outer, info.value) == ["Inner.small"]
    with pytest.raises(ValidationError) as info:
        Outer.model_validate({"items": [{"v": "no"}]})
    assert failing_validators(Outer, info.value) == []  # a type error: no validator raised it


# ---------------------------------------------------------------- partial and iterable


def test_create_partial_streams_views_then_the_record_as_instructor_does(url: str) -> None:
    raw = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    theirs = list(
        instructor.from_openai(
            raw, mode=instructor.Mode.JSON_SCHEMA
        ).chat.completions.create_partial(
            model=MODEL, messages=MESSAGES, response_model=SumInSchema, max_retries=0
        )
    )
    ours = list(
        factorspec_sdk.from_openai(raw).chat.completions.create_partial(
            model=MODEL, messages=MESSAGES, response_model=Sum
        )
    )
    # both: partial objects with fields None until written, the whole record last
    assert len(theirs) >= 2 and len(ours) >= 2
    assert theirs[0].total is None and ours[0].total is None
    assert type(ours[-1]) is Sum and ours[-1].total == ours[-1].a + ours[-1].b
    last = theirs[-1]
    assert last.total == last.a + last.b  # the relation travelled in the schema
    assert ours[-2].model_dump() == ours[-1].model_dump()  # the last view is the record
    for view in ours[:-1]:
        for name, value in view.model_dump().items():
            assert value in (None, getattr(ours[-1], name))


def test_create_partial_gives_determined_values_with_their_choice(url: str) -> None:
    """A trip leg's days come in the same view as its city: the server streams them ahead."""
    client = factorspec_sdk.from_openai(openai.OpenAI(base_url=url + "/v1", api_key="none"))
    views = list(
        client.chat.completions.create_partial(
            model=MODEL, messages=MESSAGES, response_model=Trip, context=TRIP_CONTEXT
        )
    )
    trip = views[-1]
    assert type(trip) is Trip
    Trip.model_validate(trip.model_dump(), context=TRIP_CONTEXT)
    for k, leg in enumerate(trip.legs):
        first = next(v for v in views if len(v.legs or []) > k and v.legs[k].city == leg.city)
        assert first.legs[k].first_day == leg.first_day and first.legs[k].last_day == leg.last_day


class Point(BaseModel):
    x: int = Field(ge=0, le=9)
    y: int = Field(ge=0, le=9)


def test_create_iterable_gives_records_as_instructor_does(url: str) -> None:
    # Instructor's wrapper schema leaves "tasks" optional and its objects open: the random
    # model may write a valid record without tasks, which Instructor cannot read, so its
    # request goes to a model that writes what Instructor asks
    writes = ScriptedEngine.from_script(tiny_tokenizer(), '{"tasks": [{"x": 1, "y": 2}]}')
    with running(create_app(writes, model_name=MODEL)) as base:
        asked = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        theirs = list(
            instructor.from_openai(
                asked, mode=instructor.Mode.JSON_SCHEMA
            ).chat.completions.create_iterable(
                model=MODEL, messages=MESSAGES, response_model=Point, max_retries=0
            )
        )
    raw = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    ours = list(
        factorspec_sdk.from_openai(raw).chat.completions.create_iterable(
            model=MODEL, messages=MESSAGES, response_model=Point
        )
    )
    assert theirs and all(isinstance(p, Point) for p in theirs)
    assert ours and all(type(p) is Point for p in ours)
    # relations hold in every item (Instructor's wrapper schema would not carry them)
    sums = list(
        factorspec_sdk.from_openai(raw).chat.completions.create_iterable(
            model=MODEL, messages=MESSAGES, response_model=Sum
        )
    )
    assert sums and all(type(s) is Sum and s.total == s.a + s.b for s in sums)


def test_async_partial_and_iterable(url: str) -> None:
    async def main() -> tuple[list[object], list[Sum]]:
        raw = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        client = factorspec_sdk.from_openai(raw)
        try:
            views = [
                v
                async for v in client.chat.completions.create_partial(
                    model=MODEL, messages=MESSAGES, response_model=Trip, context=TRIP_CONTEXT
                )
            ]
            items = [
                s
                async for s in client.chat.completions.create_iterable(
                    model=MODEL, messages=MESSAGES, response_model=Sum
                )
            ]
        finally:
            await raw.close()
        return views, items

    views, items = asyncio.run(main())
    sync = factorspec_sdk.from_openai(openai.OpenAI(base_url=url + "/v1", api_key="none"))
    want = list(
        sync.chat.completions.create_partial(
            model=MODEL, messages=MESSAGES, response_model=Trip, context=TRIP_CONTEXT
        )
    )
    assert [v.model_dump() for v in views] == [v.model_dump() for v in want]  # type: ignore[attr-defined]
    assert items and all(s.total == s.a + s.b for s in items)


def test_partial_errors_are_factorspec_errors(url: str) -> None:
    client = factorspec_sdk.from_openai(openai.OpenAI(base_url=url + "/v1", api_key="none"))
    bad = {"Paris": 3, "Rome": 2, "Parma": 4, "Oslo": 1, "Nice": 2}  # 5 cities > max_length 4
    with pytest.raises(UnsatisfiableSpecError):
        list(
            client.chat.completions.create_partial(
                model=MODEL, messages=MESSAGES, response_model=Trip, context=bad
            )
        )
    with pytest.raises(RetriesExhaustedError):
        list(
            client.chat.completions.create_partial(
                model=MODEL, messages=MESSAGES, response_model=Never, max_retries=1
            )
        )
    with pytest.raises(TypeError, match="stream"):
        client.chat.completions.create(
            model=MODEL, messages=MESSAGES, response_model=Sum, stream=True
        )


# ---------------------------------------------------------------- a plain vLLM server


@pytest.fixture(scope="module")
def plain_vllm() -> Iterator[str]:
    """A vLLM-like server (scripted model, ``owned_by: vllm``) that knows nothing of relations."""
    from tests.server.scripted_upstream import ScriptedUpstream

    upstream = ScriptedUpstream(scripted_engine()).start()
    try:
        yield upstream.url
    finally:
        upstream.kill()


def on_plain(url: str) -> StructuredOpenAI:
    from tests.server.scripted_upstream import ScriptedTokenizer

    raw = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
    return factorspec_sdk.from_openai(raw, tokenizer=ScriptedTokenizer(scripted_engine()))


def test_from_openai_on_a_plain_vllm_server_decodes_segments_here(plain_vllm: str) -> None:
    """The same call on a plain vLLM server: FactorSpec's masks here, the forwards there."""
    from tests.server.scripted_upstream import UPSTREAM_MODEL

    client = on_plain(plain_vllm)
    try:
        trip, completion = client.chat.completions.create_with_completion(
            model=UPSTREAM_MODEL, messages=MESSAGES, response_model=Trip, context=TRIP_CONTEXT
        )
        # token for token what the local client decodes with the same model and messages
        local = factorspec_sdk.Client(scripted_engine()).generate(
            Trip, MESSAGES, context=TRIP_CONTEXT, schema_in_prompt=False
        )
        assert type(trip) is Trip and trip == local
        text = completion.choices[0].message.content or ""
        assert Trip.model_validate_json(text, context=TRIP_CONTEXT) == trip
        assert completion.usage is not None and completion.usage.completion_tokens > 0
        views = list(
            client.chat.completions.create_partial(
                model=UPSTREAM_MODEL, messages=MESSAGES, response_model=Trip, context=TRIP_CONTEXT
            )
        )
        assert views[-1] == trip and len(views) >= 2
        sums = list(
            client.chat.completions.create_iterable(
                model=UPSTREAM_MODEL, messages=MESSAGES, response_model=Sum
            )
        )
        assert sums and all(s.total == s.a + s.b for s in sums)
        with pytest.raises(RetriesExhaustedError) as info:  # re-asked, then out of retries
            client.chat.completions.create(
                model=UPSTREAM_MODEL, messages=MESSAGES, response_model=Never, max_retries=1
            )
        assert info.value.attempts == 2
        with pytest.raises(TypeError, match="cannot be sent"):
            client.chat.completions.create(
                model=UPSTREAM_MODEL, messages=MESSAGES, response_model=Sum, extra_body={}
            )
        with pytest.raises(UnsatisfiableSpecError):
            bad = {"Paris": 3, "Rome": 2, "Parma": 4, "Oslo": 1, "Nice": 2}
            client.chat.completions.create(
                model=UPSTREAM_MODEL, messages=MESSAGES, response_model=Trip, context=bad
            )
    finally:
        client.close()


def test_async_from_openai_on_a_plain_vllm_server(plain_vllm: str) -> None:
    from tests.server.scripted_upstream import UPSTREAM_MODEL, ScriptedTokenizer

    async def main() -> tuple[Trip, list[object]]:
        raw = openai.AsyncOpenAI(base_url=plain_vllm, api_key="none", max_retries=0)
        client = factorspec_sdk.from_openai(raw, tokenizer=ScriptedTokenizer(scripted_engine()))
        try:
            trip = await client.chat.completions.create(
                model=UPSTREAM_MODEL, messages=MESSAGES, response_model=Trip, context=TRIP_CONTEXT
            )
            views = [
                v
                async for v in client.chat.completions.create_partial(
                    model=UPSTREAM_MODEL,
                    messages=MESSAGES,
                    response_model=Trip,
                    context=TRIP_CONTEXT,
                )
            ]
        finally:
            client.close()
            await raw.close()
        return trip, views

    trip, views = asyncio.run(main())
    Trip.model_validate(trip.model_dump(), context=TRIP_CONTEXT)
    assert views[-1] == trip
