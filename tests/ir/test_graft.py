"""IRs put together (`IRComposer`): each part's relations hold where it is placed, and only there.

The calls record of a server's ``tools`` request is the consumer: its IR, built from each
function's own IR, must mean what the Pydantic calls record of the same tools means (the
local client's `calls_model`), string codes of different tables included.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import (
    IRError,
    IRLimits,
    RecordInvalidError,
    RelationIR,
    check_record,
    spec_from_ir,
    to_ir,
)
from factorspec_sdk.ir.graft import IRComposer
from factorspec_sdk.server.protocol import ChatRequest
from factorspec_sdk.server.tool_calls import plan_tools
from factorspec_sdk.tools import calls_model, function_tool, tools_of
from tests.helpers import sampled_record


class Route(BaseModel):
    origin: Literal["Oslo", "Rome", "Paris"]
    destination: Literal["Oslo", "Rome", "Paris"]

    @relation
    def moves(self) -> bool:
        return self.origin != self.destination


class Stay(BaseModel):
    city: Literal["Paris", "Berlin"]  # "Paris" is code 1 here, 3 once after Route's table
    nights: int = Field(ge=1, le=5)

    @relation
    def paris_is_short(self) -> bool:
        return self.nights <= 2 if self.city == "Paris" else self.nights >= 3


MODELS: dict[str, type[BaseModel]] = {"Route": Route, "Stay": Stay}


def server_spec(max_calls: int, tool_choice: str = "required") -> Any:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "plan"}],
        "tools": [function_tool(Route), function_tool(Stay)],
        "tool_choice": tool_choice,
        "factorspec": {"max_tool_calls": max_calls},
    }
    plan = plan_tools(ChatRequest.model_validate(body), IRLimits())
    return spec_from_ir(json.loads(json.dumps(plan.ir)))


def calls_of(text: str, auto: bool) -> list[dict[str, Any]]:
    record = json.loads(text)
    return list(record["reply"]["calls"] if auto else record["calls"])


@pytest.mark.parametrize("auto", [False, True], ids=["required", "auto"])
def test_each_call_holds_its_tools_relations(auto: bool) -> None:
    spec = server_spec(3, "auto" if auto else "required")
    seen = set()
    for seed in range(24):
        text = sampled_record(spec, seed)
        if auto and json.loads(text)["reply"]["type"] == "message":
            continue
        for call in calls_of(text, auto):
            MODELS[call["name"]].model_validate(call["arguments"])  # its relation holds
            seen.add((call["name"], json.dumps(call["arguments"], sort_keys=True)))
    assert {name for name, _ in seen} == {"Route", "Stay"}
    stays = {a for name, a in seen if name == "Stay"}
    assert any('"Paris"' in a for a in stays) and any('"Berlin"' in a for a in stays)


def test_the_server_record_means_the_local_one() -> None:
    """Records of the local calls record pass the server's, and the other way round."""
    ours = server_spec(2)
    local = compile_spec(calls_model(tools_of([Route, Stay]), 2))
    for seed in range(16):
        check_record(ours, sampled_record(local, seed))
        check_record(local, sampled_record(ours, seed))
    broken = {"calls": [{"name": "Stay", "arguments": {"city": "Paris", "nights": 4}}]}
    with pytest.raises(RecordInvalidError):
        check_record(ours, json.dumps(broken))
    fine = {"calls": [{"name": "Stay", "arguments": {"city": "Berlin", "nights": 4}}]}
    check_record(ours, json.dumps(fine))


SWITCH: dict[str, Any] = {
    "factorspec_ir": 1,
    "name": "Switch",
    "layout": {
        "type": "object",
        "name": "Switch",
        "fields": [
            {"name": "flag", "key": "flag", "node": {"type": "leaf", "kind": "bool"}},
            {
                "name": "city",
                "key": "city",
                "node": {"type": "leaf", "kind": "enum", "choices": ["Rome", "Oslo"]},
            },
            {"name": "n", "key": "n", "node": {"type": "leaf", "kind": "int", "ge": 0, "le": 3}},
        ],
    },
    "strings": ["Rome", "Oslo"],
    "variables": [
        {"name": "flag", "path": ["flag"], "kind": "bool"},
        {"name": "city", "path": ["city"], "kind": "str"},
        {"name": "n", "path": ["n"], "kind": "int"},
    ],
    # one shared subterm read as a city (Rome if flag else Oslo) and as a number (1 or 2)
    "defs": [{"op": "ite", "args": [{"var": "flag"}, {"int": 1}, {"int": 2}]}],
    "factors": [
        {"name": "city_by_flag", "formula": {"op": "eq", "args": [{"var": "city"}, {"def": 0}]}},
        {"name": "n_by_flag", "formula": {"op": "eq", "args": [{"var": "n"}, {"def": 0}]}},
    ],
}


def test_a_shared_constant_is_renumbered_only_where_it_is_a_string() -> None:
    composer = IRComposer()
    first = RelationIR.model_validate(to_ir(Route))  # its table puts Oslo first
    second = RelationIR.model_validate(SWITCH)
    composer.place(first, ("a",), [], "a")
    composer.place(second, ("b",), [], "b")
    layout = {
        "type": "object",
        "name": "Both",
        "fields": [
            {"name": "a", "key": "a", "node": to_ir(Route)["layout"]},
            {"name": "b", "key": "b", "node": SWITCH["layout"]},
        ],
    }
    spec = spec_from_ir(composer.document("Both", layout))
    a = {"origin": "Oslo", "destination": "Rome"}
    check_record(spec, json.dumps({"a": a, "b": {"flag": True, "city": "Rome", "n": 1}}))
    check_record(spec, json.dumps({"a": a, "b": {"flag": False, "city": "Oslo", "n": 2}}))
    for bad in (
        {"flag": True, "city": "Oslo", "n": 1},
        {"flag": True, "city": "Rome", "n": 2},
        {"flag": False, "city": "Rome", "n": 2},
    ):
        with pytest.raises(RecordInvalidError):
            check_record(spec, json.dumps({"a": a, "b": bad}))
    with pytest.raises(RecordInvalidError):
        bad_a = {"origin": "Rome", "destination": "Rome"}
        check_record(spec, json.dumps({"a": bad_a, "b": {"flag": True, "city": "Rome", "n": 1}}))


def test_a_variable_not_named_after_its_path_is_refused() -> None:
    ir = RelationIR.model_validate(
        {**SWITCH, "variables": [{"name": "flagged", "path": ["flag"], "kind": "bool"}]}
    )
    with pytest.raises(IRError, match="not named after its path"):
        IRComposer().place(ir, ("b",), [], "b")


def test_a_factor_reads_the_variables_of_its_defs() -> None:
    """SWITCH's factors list no variables: ``flag`` is read only through def 0, yet bound."""
    spec = spec_from_ir(SWITCH)
    check_record(spec, json.dumps({"flag": True, "city": "Rome", "n": 1}))
    for bad in ({"flag": True, "city": "Oslo", "n": 1}, {"flag": False, "city": "Oslo", "n": 1}):
        with pytest.raises(RecordInvalidError):
            check_record(spec, json.dumps(bad))
