"""vLLM's ``structured_outputs`` and the ``x-factorspec`` schema key on a real server.

Code written for vLLM (``extra_body={"structured_outputs": {...}}``) runs unchanged against
`factorspec serve`; the official ``openai`` client sends it.
"""

from __future__ import annotations

import json
import re

import httpx
import jsonschema
import openai  # noqa: TID253
import pytest

from factorspec_sdk import plain_json_schema
from factorspec_sdk.ir import to_ir
from factorspec_sdk.server.protocol import ApiError
from factorspec_sdk.server.structured import misplaced_extension, regex_language, whole_match
from tests.helpers import TRIP_CONTEXT, Pick, Trip
from tests.server.helpers import MODEL

MESSAGES = [{"role": "user", "content": "answer"}]
FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER


def vllm_style(client: openai.OpenAI, constraint: dict[str, object], **kw: object) -> object:
    return client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,  # type: ignore[arg-type]
        extra_body={"structured_outputs": constraint},
        **kw,  # type: ignore[arg-type]
    )


def openai_style(client: openai.OpenAI, schema: dict[str, object], **kw: object) -> object:
    rf = {"type": "json_schema", "json_schema": {"name": "R", "schema": schema}}
    return client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,  # type: ignore[arg-type]
        response_format=rf,  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def content(r: object) -> tuple[str, str]:
    choice = r.choices[0]  # type: ignore[attr-defined]
    return choice.message.content, choice.finish_reason


def test_choice_answers_one_of_the_strings(client: openai.OpenAI) -> None:
    options = ["Paris", "Rome", "Berlin", 'say "hi"']
    seen = set()
    for seed in range(6):
        text, finish = content(vllm_style(client, {"choice": options}, temperature=1.0, seed=seed))
        assert finish == "stop"
        assert text in options  # the bare string, not JSON
        seen.add(text)
    assert len(seen) > 1  # sampled, not a constant


@pytest.mark.parametrize(
    ("pattern", "size"),
    [("(cat|dog)s?", 4), ("[0-9]{2}", 100), ("yes|no", 2), (r"[A-C]x\.", 3)],
)
def test_finite_regex_answers_a_full_match(client: openai.OpenAI, pattern: str, size: int) -> None:
    assert len(regex_language(pattern, 1024)) == size
    for seed in range(3):
        text, finish = content(vllm_style(client, {"regex": pattern}, temperature=1.0, seed=seed))
        assert finish == "stop"
        assert re.fullmatch(pattern, text), text


def test_json_schema_as_object_and_as_text(client: openai.OpenAI) -> None:
    schema = Pick.model_json_schema()
    for value in (schema, json.dumps(schema)):
        text, finish = content(vllm_style(client, {"json": value}))
        assert finish == "stop"
        jsonschema.validate(json.loads(text), schema)


def test_a_schema_whose_root_is_no_object(client: openai.OpenAI) -> None:
    # the whole record is one grammar value (llguidance), checked by the server as sent
    roots = [
        {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "maxItems": 3},
        {"anyOf": [{"type": "string", "format": "date"}, {"type": "boolean"}]},
        {"type": "number", "minimum": 0, "maximum": 1},  # it ends with the end token
        {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "integer"}]},
    ]
    for schema in roots:
        for seed in range(2):
            r = openai_style(client, schema, temperature=1.0, seed=seed, max_tokens=200)
            text, finish = content(r)
            assert finish == "stop"
            jsonschema.validate(json.loads(text), schema, format_checker=FORMATS)


def test_relations_travel_in_x_factorspec(client: openai.OpenAI) -> None:
    schema = {**Trip.model_json_schema(), "x-factorspec": {"ir": to_ir(Trip, TRIP_CONTEXT)}}
    for seed in range(3):
        via_vllm, _ = content(vllm_style(client, {"json": schema}, temperature=1.0, seed=seed))
        via_openai, _ = content(openai_style(client, schema, temperature=1.0, seed=seed))
        for text in (via_vllm, via_openai):
            Trip.model_validate_json(text, context=TRIP_CONTEXT)  # every relation holds


def test_without_x_factorspec_the_relations_do_not_hold(client: openai.OpenAI) -> None:
    # the control of the test above: the plain schema does not make the scripted model
    # satisfy Trip's relations, so records that satisfy them came from the IR
    schema = plain_json_schema(Trip)
    texts = [
        content(vllm_style(client, {"json": schema}, temperature=1.0, seed=seed))[0]
        for seed in range(3)
    ]
    broken = 0
    for text in texts:
        try:
            Trip.model_validate_json(text, context=TRIP_CONTEXT)
        except ValueError:
            broken += 1
    assert broken == len(texts)


def test_a_schema_that_says_its_relations_need_a_context_is_refused(
    client: openai.OpenAI,
) -> None:
    # Trip's own schema carries the marker of its relations (they read a context): the
    # server refuses it by either dialect, and takes it with the IR in the extension field
    schema = Trip.model_json_schema()
    assert "unexported" in schema["x-factorspec"]
    for ask in (vllm_style, openai_style):
        key = "json" if ask is vllm_style else None
        with pytest.raises(
            openai.UnprocessableEntityError, match=r"Trip\.cities.*Trip\.once.*to_ir\(Trip"
        ) as info:
            ask(client, {key: schema} if key else schema)  # type: ignore[operator]
        assert info.value.code == "relations_not_sent"
    r = openai_style(client, schema, extra_body={"factorspec": {"ir": to_ir(Trip, TRIP_CONTEXT)}})
    Trip.model_validate_json(content(r)[0], context=TRIP_CONTEXT)


def test_extension_field_overrides_x_factorspec(client: openai.OpenAI) -> None:
    schema = {**Pick.model_json_schema(), "x-factorspec": {"ir": to_ir(Trip, TRIP_CONTEXT)}}
    r = client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,  # type: ignore[arg-type]
        extra_body={"structured_outputs": {"json": schema}, "factorspec": {"ir": to_ir(Pick)}},
    )
    Pick.model_validate_json(r.choices[0].message.content or "")


def test_streamed_choice_comes_whole_in_the_last_chunk(url: str, client: openai.OpenAI) -> None:
    constraint = {"choice": ["Paris", "Rome"]}
    whole, _ = content(vllm_style(client, constraint))
    body = {"model": MODEL, "messages": MESSAGES, "stream": True, "structured_outputs": constraint}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30) as resp:
        events = [
            json.loads(line[len("data: ") :])
            for line in resp.iter_lines()
            if line.startswith("data: {")
        ]
    deltas = [e["choices"][0]["delta"].get("content") for e in events]
    assert deltas == ["", whole]
    assert events[-1]["choices"][0]["finish_reason"] == "stop"


BAD_400 = [
    {"choice": []},
    {"choice": [1, 2]},
    {"grammar": "root ::= 'a'"},
    {"json_object": True},
    {"regex": "a", "choice": ["a"]},
    {"json": None},
    {"regex": None, "choice": None, "grammar": None},
    {},
    "regex",
]


BAD_422 = [{"regex": "ab("}, {"json": "{not json"}, {"json": "[1, 2]"}]
"""Strings the request schema accepts but that say nothing servable: 422, never a 400 (a
contract tool counts a 400 on a schema-valid body as a failure)."""


@pytest.mark.parametrize("constraint", BAD_422)
def test_unservable_structured_outputs_strings_are_a_422(url: str, constraint: object) -> None:
    body = {"model": MODEL, "messages": MESSAGES, "structured_outputs": constraint}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 422, r.text
    assert "structured_outputs" in r.json()["error"]["message"]


@pytest.mark.parametrize("constraint", BAD_400)
def test_malformed_structured_outputs_are_a_400(url: str, constraint: object) -> None:
    body = {"model": MODEL, "messages": MESSAGES, "structured_outputs": constraint}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert set(err) >= {"message", "type", "param", "code"}
    assert "structured_outputs" in err["message"]


def test_nulls_beside_the_one_constraint_are_constraints_not_given(url: str) -> None:
    """As vLLM counts them: a client that serializes every field sends nulls beside it."""
    constraint = {"json": None, "regex": "(cat|dog)", "choice": None, "grammar": None}
    body = {"model": MODEL, "messages": MESSAGES, "structured_outputs": constraint}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] in {"cat", "dog"}


@pytest.mark.parametrize(
    "pattern", [r"\d+", r"[a-z]{3}", r"[A-Z][a-z]*", r"\d{3}-\d{4}", r"^[a-z]+ \d$", r"(?i)x\d+"]
)
def test_regex_beyond_a_finite_list_is_generated_by_its_pattern(url: str, pattern: str) -> None:
    body = {"model": MODEL, "messages": MESSAGES, "structured_outputs": {"regex": pattern}}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "stop", choice
    assert re.fullmatch(pattern, choice["message"]["content"]), choice


def test_a_regex_llguidance_cannot_compile_is_a_422(url: str) -> None:
    body = {"model": MODEL, "messages": MESSAGES, "structured_outputs": {"regex": r"(a+)\1"}}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 422, r.text
    assert "structured_outputs" in r.text or "value" in r.json()["error"]["message"]


def test_structured_outputs_with_a_response_format_schema_is_a_400(url: str) -> None:
    rf = {"type": "json_schema", "json_schema": {"name": "P", "schema": Pick.model_json_schema()}}
    body = {
        "model": MODEL,
        "messages": MESSAGES,
        "structured_outputs": {"choice": ["a"]},
        "response_format": rf,
    }
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 400 and "not both" in r.json()["error"]["message"]


def test_bad_x_factorspec_is_a_400(url: str) -> None:
    schema = {**Pick.model_json_schema(), "x-factorspec": {"timeout_s": -1}}
    body = {
        "model": MODEL,
        "messages": MESSAGES,
        "response_format": {"type": "json_schema", "json_schema": {"name": "P", "schema": schema}},
    }
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert "x-factorspec.timeout_s" in r.json()["error"]["message"]


def test_bad_x_factorspec_is_a_400_where_another_spec_serves(url: str) -> None:
    """A schema the request does not use still may not carry a malformed x-factorspec
    (the OpenAPI document says so; schemathesis found one answered 200)."""
    schema = {"type": "object", "x-factorspec": []}
    for fmt in ("json_object", "json_schema"):
        body = {
            "model": MODEL,
            "messages": MESSAGES,
            "response_format": {"type": fmt, "json_schema": {"name": "P", "schema": schema}},
            "factorspec": {"ir": to_ir(Trip, TRIP_CONTEXT)},
        }
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
        assert r.status_code == 400, r.text
        assert "x-factorspec" in r.json()["error"]["message"]
    marker = {"type": "object", "x-factorspec": {"max_tool_calls": 2}}
    body["response_format"] = {"type": "json_schema", "json_schema": {"schema": marker}}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 400 and "bounds tool calls" in r.json()["error"]["message"]


def test_regex_language_refuses_what_it_cannot_list() -> None:
    assert regex_language("a?b", 10) == ["b", "ab"]
    with pytest.raises(ApiError) as info:
        regex_language("[0-9]{2}", 99)
    assert info.value.status == 422 and "100 strings" in info.value.message
    with pytest.raises(ApiError) as info:
        regex_language("(", 10)
    assert info.value.status == 422


def test_an_x_factorspec_below_the_root_is_found_and_a_field_of_that_name_is_not() -> None:
    ir = {"x-factorspec": {"ir": {}}}
    assert misplaced_extension(ir) is None  # the root's is read
    field = {"type": "object", "properties": {"x-factorspec": {"type": "integer"}}}
    assert misplaced_extension(field) is None  # a property of that name is a field
    assert misplaced_extension({"enum": [ir], "default": ir}) is None  # data, not schemas
    nested = {"properties": {"a": {"$ref": "#/$defs/A~B"}}, "$defs": {"A~B": ir}}
    assert misplaced_extension(nested) == "#/$defs/A~0B"
    assert misplaced_extension({"anyOf": [{"type": "null"}, ir]}) == "#/anyOf/1"
    assert misplaced_extension({"items": {"properties": {"p": ir}}}) == "#/items/properties/p"


@pytest.mark.parametrize(
    ("pattern", "anchored"),
    [
        (r"\d+", r"^(?:\d+)$"),
        (r"^\d+$", r"^(?:\d+)$"),
        (r"(?i)^ab$", r"(?i)^(?:ab)$"),
        (r"a\$", r"^(?:a\$)$"),  # an escaped dollar stays
        (r"a|b", r"^(?:a|b)$"),
    ],
)
def test_a_request_regex_is_matched_whole(pattern: str, anchored: str) -> None:
    """A request's regex is the whole answer (a JSON Schema pattern is searched)."""
    assert whole_match(pattern) == anchored
    assert not re.search(anchored, "x1x" if "a" not in pattern else "xab-a$x")
