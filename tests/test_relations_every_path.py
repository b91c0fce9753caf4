"""Every path that accepts a model enforces its relations or refuses the request: never drops one.

One relation (``from_hour < to_hour``) and one model that breaks it when nothing stops it: a
scripted engine that writes the largest digit it may, so that unconstrained it answers
``from_hour=9, to_hour=9`` (the controls below check that it does). Through each path the
model's relations can travel (the local client, the server's ``response_format``, ``parse``,
``tools``, streaming, ``from_openai``, ``Client(base_url=...)``, Instructor's own client) the
answer satisfies the relation, or the request is refused with an error that says why; a
path that can carry no relation (a plain JSON schema) is the control, never a silent success.

The model is the one a user writes: no hand-written ``json_schema_extra``. Its JSON schema
carries its relations (``@relation`` adds ``x-factorspec`` at its root), so
``openai.pydantic_function_tool(Hours)``, ``parse(response_format=Hours)`` and Instructor's
modes send them; a model whose relations read a context carries a marker naming them, and
the server refuses it with a 422 that says what to send instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import instructor
import numpy as np
import numpy.typing as npt
import openai  # noqa: TID253
import pytest
from pydantic import BaseModel, ConfigDict, Field

import factorspec_sdk
from factorspec_sdk import Client, plain_json_schema, relation
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.ir import to_ir
from factorspec_sdk.server import create_app
from factorspec_sdk.tools import function_tool
from tests.helpers import tiny_tokenizer
from tests.server.helpers import MODEL, running

MESSAGES: list[Any] = [{"role": "user", "content": "Book the room from 11 to 15."}]


class PlainHours(BaseModel):
    """Book the room from one hour to another (no relation: the control)."""

    from_hour: int = Field(ge=0, le=23)
    to_hour: int = Field(ge=0, le=23)


class Hours(PlainHours):
    """Book the room from one hour to a later one."""

    @relation
    def forward(self) -> bool:
        return self.from_hour < self.to_hour


class HoursInSchema(Hours):
    """`Hours` whose ``x-factorspec`` is written by hand (``json_schema_extra``): kept as is."""

    model_config = ConfigDict(
        json_schema_extra=lambda schema, cls: schema.update({"x-factorspec": {"ir": to_ir(cls)}})
    )


class ShopHours(PlainHours):
    """Book the room within the shop's opening hours (a relation that reads a context)."""

    @relation
    def within_opening(self, shop: dict[str, int]) -> bool:
        return shop["opens"] <= self.from_hour < self.to_hour <= shop["closes"]


SHOP = {"opens": 8, "closes": 20}


class Booking(BaseModel):
    """A model without relations holding `Hours`: its ``x-factorspec`` sits under ``$defs``."""

    hours: Hours


def holds(record: Any) -> bool:
    return bool(record.from_hour < record.to_hour)


def breaking_engine() -> ScriptedEngine:
    """A model that prefers the largest digit (unconstrained: ``from_hour=9, to_hour=9``) and
    opens a list's first item rather than closing it empty."""
    tok = tiny_tokenizer()
    row = np.zeros(tok.vocab_size, dtype=np.float32)
    for d in range(10):
        row[tok.encode(str(d))[0]] = 1.0 + d
    for opening in ("{", '{"'):
        row[tok.encode(opening)[0]] = 0.5
    row.setflags(write=False)

    def logits(prefix: object) -> npt.NDArray[np.float32]:
        return row

    return ScriptedEngine(tok, logits)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running(create_app(breaking_engine(), model_name=MODEL)) as base:
        yield base


@pytest.fixture(scope="module")
def oai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)


def schema_format(model: type[BaseModel]) -> Any:
    return {
        "type": "json_schema",
        "json_schema": {"name": model.__name__, "schema": model.model_json_schema()},
    }


def calls_of(message: Any) -> list[Hours]:
    calls = [Hours.model_construct(**json.loads(c.function.arguments)) for c in message.tool_calls]
    assert calls
    return calls


def shop_holds(record: Any) -> bool:
    return bool(SHOP["opens"] <= record.from_hour < record.to_hour <= SHOP["closes"])


# ---------------------------------------------------------------- the controls


def test_unconstrained_the_model_breaks_the_relation(oai: openai.OpenAI) -> None:
    local = Client(breaking_engine()).generate(PlainHours, "Book the room from 11 to 15.")
    assert (local.from_hour, local.to_hour) == (9, 9)
    r = oai.chat.completions.create(
        model=MODEL, messages=MESSAGES, response_format=schema_format(PlainHours)
    )
    # the plain schema allows keys it does not declare (this model writes one, of nines)
    got = json.loads(r.choices[0].message.content or "")
    assert {k: got[k] for k in ("from_hour", "to_hour")} == {"from_hour": 9, "to_hour": 9}
    # the plain schema (no x-factorspec) says nothing of relations: the server cannot know
    plain: Any = {
        "type": "function",
        "function": {"name": "Hours", "parameters": plain_json_schema(Hours)},
    }
    r = oai.chat.completions.create(
        model=MODEL, messages=MESSAGES, tools=[plain], tool_choice="required"
    )
    assert not any(holds(c) for c in calls_of(r.choices[0].message))


def test_a_models_schema_carries_its_relations() -> None:
    schema = Hours.model_json_schema()
    assert schema["x-factorspec"] == {"ir": to_ir(Hours)}
    assert "x-factorspec" not in plain_json_schema(Hours)
    assert plain_json_schema(Hours) == PlainHours.model_json_schema() | {
        "title": "Hours",
        "description": Hours.__doc__,
    }
    marker = ShopHours.model_json_schema()["x-factorspec"]["unexported"]
    assert marker["relations"] == ["ShopHours.within_opening"]
    assert "context" in marker["reason"]
    # the hand-written key is kept; validation is unchanged
    assert HoursInSchema.model_json_schema()["x-factorspec"] == {"ir": to_ir(HoursInSchema)}
    assert Hours.model_validate({"from_hour": 1, "to_hour": 2}).to_hour == 2
    with pytest.raises(ValueError, match="forward"):
        Hours.model_validate({"from_hour": 2, "to_hour": 2})


# ---------------------------------------------------------------- local


def test_local_generate_call_and_stream() -> None:
    client = Client(breaking_engine())
    prompt = "Book the room from 11 to 15."
    assert holds(client.generate(Hours, prompt))
    assert holds(client.call([Hours], prompt))
    calls = client.call([Hours, PlainHours], prompt, parallel=True, max_calls=3)
    assert all(holds(c) for c in calls if isinstance(c, Hours))
    with client.stream(Hours, prompt) as stream:
        views = list(stream)
    assert views and holds(stream.result.value)


# ---------------------------------------------------------------- the server, openai client


@pytest.mark.parametrize("model", [Hours, HoursInSchema])
def test_response_format_create_and_parse(oai: openai.OpenAI, model: type[Hours]) -> None:
    # the plain model, as a user writes it: the parse(response_format=Slot)
    r = oai.chat.completions.create(
        model=MODEL, messages=MESSAGES, response_format=schema_format(model)
    )
    assert holds(Hours.model_validate_json(r.choices[0].message.content or ""))
    for parse in (oai.chat.completions.parse, oai.beta.chat.completions.parse):
        parsed = parse(model=MODEL, messages=MESSAGES, response_format=model)
        assert holds(parsed.choices[0].message.parsed)


def test_response_format_with_the_ir_in_the_extension_field(oai: openai.OpenAI) -> None:
    r = oai.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        response_format=schema_format(PlainHours),
        extra_body={"factorspec": {"ir": to_ir(Hours)}},
    )
    assert holds(Hours.model_validate_json(r.choices[0].message.content or ""))
    r = oai.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        response_format=schema_format(ShopHours),  # the field's IR wins over the marker
        extra_body={"factorspec": {"ir": to_ir(ShopHours, SHOP)}},
    )
    assert shop_holds(
        ShopHours.model_validate_json(r.choices[0].message.content or "", context=SHOP)
    )


def test_response_format_streamed(oai: openai.OpenAI) -> None:
    text = ""
    with oai.chat.completions.create(
        model=MODEL, messages=MESSAGES, response_format=schema_format(Hours), stream=True
    ) as stream:
        for chunk in stream:
            text += "".join(c.delta.content or "" for c in chunk.choices)
    assert holds(Hours.model_validate_json(text))


def test_a_relation_the_server_cannot_read_is_refused(oai: openai.OpenAI) -> None:
    # Hours inside a model without relations: its x-factorspec sits under $defs, where no
    # server reads it; the request is refused, never decoded without the relation
    with pytest.raises(openai.UnprocessableEntityError, match=r"x-factorspec at #/\$defs"):
        oai.chat.completions.create(
            model=MODEL, messages=MESSAGES, response_format=schema_format(Booking)
        )
    with pytest.raises(openai.UnprocessableEntityError, match="Booking: x-factorspec at"):
        oai.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            tools=[openai.pydantic_function_tool(Booking)],
            tool_choice="required",
        )


def test_relations_that_read_a_context_are_refused_on_the_plain_paths(oai: openai.OpenAI) -> None:
    """The schema cannot hold the IR without the context: a 422 naming the relation."""
    named = r"ShopHours\.within_opening.*context"
    with pytest.raises(openai.UnprocessableEntityError, match=named) as info:
        oai.chat.completions.create(
            model=MODEL, messages=MESSAGES, response_format=schema_format(ShopHours)
        )
    assert "from_openai" in str(info.value) and info.value.code == "relations_not_sent"
    for parse in (oai.chat.completions.parse, oai.beta.chat.completions.parse):
        with pytest.raises(openai.UnprocessableEntityError, match=named):
            parse(model=MODEL, messages=MESSAGES, response_format=ShopHours)
    for choice in ("required", "auto"):
        with pytest.raises(openai.UnprocessableEntityError, match=named) as info:
            oai.chat.completions.create(
                model=MODEL,
                messages=MESSAGES,
                tools=[openai.pydantic_function_tool(ShopHours)],
                tool_choice=choice,
            )
        assert "function_tool(ShopHours, context=" in str(info.value)
    # what the error says to use instead works
    r = oai.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        tools=[function_tool(ShopHours, context=SHOP)],
        tool_choice="required",
    )
    assert all(shop_holds(c) for c in calls_of(r.choices[0].message))
    client = factorspec_sdk.from_openai(oai)
    kw: dict[str, Any] = {"model": MODEL, "messages": MESSAGES, "context": SHOP}
    assert shop_holds(client.chat.completions.create(response_model=ShopHours, **kw))


@pytest.mark.parametrize(
    "tool_choice",
    ["required", "auto", {"type": "function", "function": {"name": "Hours"}}],
    ids=["required", "auto", "named"],
)
def test_pydantic_function_tool_carries_the_relations(oai: openai.OpenAI, tool_choice: Any) -> None:
    """The issue's reproduction: ``pydantic_function_tool(Hours)`` came back 15 to 11."""
    tools = [openai.pydantic_function_tool(Hours)]
    r = oai.chat.completions.create(
        model=MODEL, messages=MESSAGES, tools=tools, tool_choice=tool_choice
    )
    assert r.choices[0].finish_reason == "tool_calls"
    assert all(holds(c) for c in calls_of(r.choices[0].message))
    calls: list[Any] = []
    with oai.chat.completions.create(
        model=MODEL, messages=MESSAGES, tools=tools, tool_choice=tool_choice, stream=True
    ) as stream:
        for chunk in stream:
            for choice in chunk.choices:
                calls += choice.delta.tool_calls or []
    assert calls and all(
        holds(Hours.model_construct(**json.loads(c.function.arguments))) for c in calls
    )


def test_function_tool_carries_the_relations_of_each_tool(oai: openai.OpenAI) -> None:
    tools: Any = [function_tool(PlainHours), function_tool(Hours)]
    for streamed in (False, True):
        kw: dict[str, Any] = {"tools": tools, "tool_choice": "required", "stream": streamed}
        if streamed:
            calls: list[Any] = []
            with oai.chat.completions.create(model=MODEL, messages=MESSAGES, **kw) as stream:
                for chunk in stream:
                    for choice in chunk.choices:
                        calls += choice.delta.tool_calls or []
        else:
            r = oai.chat.completions.create(model=MODEL, messages=MESSAGES, **kw)
            calls = list(r.choices[0].message.tool_calls or [])
        assert calls
        for call in calls:
            arguments = json.loads(call.function.arguments)
            if call.function.name == "Hours":
                assert holds(Hours.model_construct(**arguments))


# ---------------------------------------------------------------- factorspec's own clients


def test_from_openai_every_call(oai: openai.OpenAI) -> None:
    client = factorspec_sdk.from_openai(oai)
    kw: dict[str, Any] = {"model": MODEL, "messages": MESSAGES, "response_model": Hours}
    assert holds(client.chat.completions.create(**kw))
    record, _ = client.chat.completions.create_with_completion(**kw)
    assert holds(record)
    views = list(client.chat.completions.create_partial(**kw))
    assert type(views[-1]) is Hours and holds(views[-1])
    items = list(client.chat.completions.create_iterable(**kw))
    assert items and all(type(h) is Hours and holds(h) for h in items)


def test_client_with_a_base_url(url: str) -> None:
    with Client(base_url=url) as client:
        prompt = "Book the room from 11 to 15."
        assert holds(client.generate(Hours, prompt))
        assert holds(client.call([Hours], prompt))
        with client.stream(Hours, prompt) as stream:
            list(stream)
        assert holds(stream.result.value)
        # the client sends the IR of the whole record: a nested model's relations travel
        assert holds(client.generate(Booking, prompt).hours)
        assert shop_holds(client.generate(ShopHours, prompt, context=SHOP))


# ---------------------------------------------------------------- Instructor's own client


@pytest.mark.parametrize("model", [Hours, HoursInSchema])
def test_instructor_modes(oai: openai.OpenAI, model: type[Hours]) -> None:
    kw: dict[str, Any] = {
        "model": MODEL,
        "messages": MESSAGES,
        "response_model": model,
        "max_retries": 0,
    }
    for mode in (instructor.Mode.JSON_SCHEMA, instructor.Mode.TOOLS):
        theirs = instructor.from_openai(oai, mode=mode).chat.completions
        assert holds(theirs.create(**kw)), mode
        assert holds(list(theirs.create_partial(**kw))[-1]), mode
        # the iterable wrapper holds the model under $defs: refused, not decoded without it
        with pytest.raises(Exception, match="x-factorspec at") as info:
            list(theirs.create_iterable(**kw))
        assert "create_iterable" in str(info.value) or "root" in str(info.value), mode
    for mode in (instructor.Mode.JSON, instructor.Mode.MD_JSON):  # no schema: refused
        theirs = instructor.from_openai(oai, mode=mode).chat.completions
        with pytest.raises(Exception, match="400"):
            theirs.create(**kw)


def test_instructor_modes_refuse_relations_that_read_a_context(oai: openai.OpenAI) -> None:
    kw: dict[str, Any] = {
        "model": MODEL,
        "messages": MESSAGES,
        "response_model": ShopHours,
        "max_retries": 0,
        "context": SHOP,  # Instructor validates with it, but does not send it
    }
    for mode in (instructor.Mode.JSON_SCHEMA, instructor.Mode.TOOLS):
        theirs = instructor.from_openai(oai, mode=mode).chat.completions
        with pytest.raises(Exception, match=r"422.*ShopHours\.within_opening"):
            theirs.create(**kw)
