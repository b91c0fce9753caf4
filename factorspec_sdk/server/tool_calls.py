"""Tool calls on ``factorspec serve``: OpenAI's ``tools`` as a record, and the answer back.

A request with ``tools`` (and ``tool_choice`` not ``"none"``) is decoded as one record, the
shape `factorspec_sdk.tools` gives a Python client's calls:

- ``"required"``, or a named function: ``{"calls": [{"name": ..., "arguments": {...}}]}``,
  a list of a union whose tag is the function's name (a named ``tool_choice`` leaves one
  branch); one call unless ``parallel_tool_calls`` (the default) allows several;
- ``"auto"`` (the default): ``{"reply": {"type": "message", "content": "..."}}`` or
  ``{"reply": {"type": "calls", "calls": [...]}}``, a union of a message and the calls.

Each function's ``parameters`` schema becomes its arguments' layout through the JSON Schema
front end (`factorspec_sdk.ir.ir_from_json_schema`), so every call's arguments are valid for
it (checked again with `jsonschema` before answering); the choice of function is a choice
point of the writer. The IR is put together here from the functions' layouts.

This module owns: the calls record's IR (`ToolPlan`), the system text that lists the
functions to the model, and the answer's ``content`` / ``tool_calls`` from a record.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from factorspec_sdk.ir import IRLimits, ir_from_json_schema, json_schema_validator
from factorspec_sdk.server.protocol import ApiError, ChatRequest, JsonObject, NamedToolChoice
from factorspec_sdk.tools import MAX_PARALLEL_CALLS, tools_prompt

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["ToolPlan", "plan_tools"]

_NO_ARGUMENTS: JsonObject = {"type": "object", "properties": {}, "additionalProperties": False}


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """The calls record of a request and how its answer is read.

    Attributes:
        ir: the record's relation IR.
        system: the system text listing the functions to the model.
        auto: the record is a message or calls (``tool_choice`` ``"auto"``).
        validators: each function's ``parameters`` validator, by name.
    """

    ir: JsonObject
    system: str
    auto: bool
    validators: dict[str, Validator]

    def answer(self, text: str) -> tuple[str | None, list[JsonObject] | None]:
        """The ``content`` and ``tool_calls`` of a finished record's ``text``.

        Raises:
            ApiError: 500 when a call's arguments break their schema (a server bug).
        """
        record = json.loads(text)
        if self.auto:
            reply = record["reply"]
            if reply["type"] == "message":
                return str(reply["content"]), None
            calls = reply["calls"]
        else:
            calls = record["calls"]
        out: list[JsonObject] = []
        for call in calls:
            name, arguments = call["name"], call["arguments"]
            errors = sorted(e.message for e in self.validators[name].iter_errors(arguments))
            if errors:
                raise ApiError(
                    500,
                    f"internal error: the arguments of {name} break its parameters schema "
                    f"({errors[0]})",
                    type="server_error",
                )
            out.append(
                {
                    "id": "call_" + uuid.uuid4().hex[:24],
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": json.dumps(arguments, ensure_ascii=False),
                    },
                }
            )
        return None, out


def plan_tools(req: ChatRequest, limits: IRLimits) -> ToolPlan:
    """The calls record of a request with tools.

    Raises:
        ApiError: 422 for two tools of one name, a ``tool_choice`` naming none of them, a
            function whose parameters the JSON Schema front end cannot lay
            out, or whose schema keeps values distinct (``uniqueItems``: a relation the
            calls record does not carry over), naming the function.
    """
    tools = list(req.tools or [])
    names = [t.function.name for t in tools]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # a 422: the request schema cannot say it
        raise ApiError(422, f"two tools share the name {', '.join(twice)}", param="tools")
    choice = req.tool_choice
    if isinstance(choice, NamedToolChoice):
        if choice.function.name not in names:
            raise ApiError(
                422,
                f"tool_choice names {choice.function.name!r}, which is not one of the tools",
                param="tool_choice",
            )
        tools = [t for t in tools if t.function.name == choice.function.name]
    parallel = req.parallel_tool_calls is not False
    max_calls = MAX_PARALLEL_CALLS if parallel else 1
    branches: list[JsonObject] = []
    validators: dict[str, Validator] = {}
    for k, tool in enumerate(tools):
        fn = tool.function
        params = fn.parameters if fn.parameters is not None else _NO_ARGUMENTS
        where = f"tools[{k}].function.parameters"
        try:
            ir = ir_from_json_schema(params, name=f"{fn.name} arguments", limits=limits)
        except Exception as exc:  # IRError, RecursionError: the schema's fault
            message = getattr(exc, "message", str(exc))
            raise ApiError(422, f"{fn.name}: {message}", code="spec_error", param=where) from None
        if ir.get("factors") or ir.get("variables"):
            raise ApiError(
                422,
                f"{fn.name}: uniqueItems in tool parameters is not supported",
                code="spec_error",
                param=where,
            )
        validators[fn.name] = json_schema_validator(params, check_schema=False)
        branches.append(
            _object(
                f"Call{k}",
                [("name", _enum(fn.name)), ("arguments", cast("JsonObject", ir["layout"]))],
            )
        )
    item: JsonObject = (
        branches[0]
        if len(branches) == 1
        else {"type": "union", "tag": "name", "branches": branches}
    )
    calls: JsonObject = {"type": "list", "item": item, "min_length": 1, "max_length": max_calls}
    auto = choice is None or choice == "auto"
    if auto:
        message = _object("Message", [("type", _enum("message")), ("content", _free_text())])
        called = _object("Calls", [("type", _enum("calls")), ("calls", calls)])
        reply: JsonObject = {"type": "union", "tag": "type", "branches": [message, called]}
        layout = _object("Reply", [("reply", reply)])
    else:
        layout = _object("ToolCalls", [("calls", calls)])
    functions: list[dict[str, Any]] = [
        {
            "name": t.function.name,
            "description": t.function.description or "",
            "parameters": t.function.parameters or _NO_ARGUMENTS,
        }
        for t in tools
    ]
    system = tools_prompt(functions, max_calls)
    if auto:
        system += " Or answer with a message when no function fits."
    ir_doc: JsonObject = {"factorspec_ir": 1, "name": str(layout["name"]), "layout": layout}
    return ToolPlan(ir_doc, system, auto, validators)


def _object(name: str, fields: list[tuple[str, JsonObject]]) -> JsonObject:
    return {
        "type": "object",
        "name": name,
        "fields": [{"name": key, "key": key, "node": node} for key, node in fields],
    }


def _enum(value: str) -> JsonObject:
    return {"type": "leaf", "kind": "enum", "choices": [value]}


def _free_text() -> JsonObject:
    return {"type": "leaf", "kind": "str"}
