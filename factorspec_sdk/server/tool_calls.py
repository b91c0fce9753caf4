"""Tool calls on ``factorspec serve``: OpenAI's ``tools`` as a record, and the answer back.

A request with ``tools`` (and ``tool_choice`` not ``"none"``) is decoded as one record, the
shape `factorspec_sdk.tools` gives a Python client's calls:

- ``"required"``, or a named function: ``{"calls": [{"name": ..., "arguments": {...}}]}``,
  a list of a union whose tag is the function's name (a named ``tool_choice`` leaves one
  branch); one call with ``parallel_tool_calls`` false, and with a named function unless
  the request asks for several (``parallel_tool_calls`` true or ``max_tool_calls``), else
  up to `ChatRequest.max_tool_calls` (`DEFAULT_TOOL_CALLS` unless the ``factorspec``
  field's ``max_tool_calls`` says otherwise): closing the list is the model's choice, never
  forced before the bound;
- ``"auto"`` (the default): ``{"reply": {"type": "message", "content": "..."}}`` or
  ``{"reply": {"type": "calls", "calls": [...]}}``, a union of a message and the calls. The
  message is bounded: at most `MESSAGE_MAX_CHARS` characters unless the request sets
  ``max_tokens`` (then the token budget bounds it); a message that reaches the bound ends
  with ``finish_reason`` ``length``.

Each function's arguments are laid out from its relation IR when its ``parameters`` carry
one (``x-factorspec``: ``{"ir": ...}`` at their root, `factorspec_sdk.server.structured.
tool_extension`), else from its ``parameters`` schema through the JSON Schema front end
(`factorspec_sdk.ir.ir_from_json_schema`; every call checked again with `jsonschema` before
answering). Either IR's relations (an IR's ``@relation`` s, a schema's ``uniqueItems``) hold
in every call of the function: `factorspec_sdk.ir.graft.IRComposer` places them under each
call. An ``x-factorspec`` deeper in ``parameters`` than their root is refused (a 422 naming
the tool and the place), never dropped; so is the marker of relations a model's schema does
not carry (a 422 ``relations_not_sent``: they read a context). The choice of function is a
choice point of the writer.

The calls of one answer are distinct: a call of the same function with the same arguments as
an earlier one is no new call, and the answer stops before it (`ToolPlan.answer`). A model
that repeats a call is looping (SmolLM2 under ``"required"`` wrote one call four times): what
it writes from there on is the loop, so the answer is the calls before the repeat. Masking
the repeat instead would make the model write calls it did not choose (SmolLM2 then wrote
``to_hour`` 16, 17, 18 and 19 for one request).

This module owns: the calls record's IR (`ToolPlan`), the system text that lists the
functions to the model, and the answer's ``content`` / ``tool_calls`` from a record.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from factorspec_sdk.ir import (
    IRCompiler,
    IRError,
    IRLimits,
    RelationIR,
    ir_from_json_schema,
    json_schema_validator,
    parse_ir,
)
from factorspec_sdk.ir.graft import IRComposer, int_const
from factorspec_sdk.ir.model import Apply, Expr
from factorspec_sdk.relations.layout import Path, branch_name, length_name
from factorspec_sdk.server.protocol import (
    X_FACTORSPEC,
    ApiError,
    ChatRequest,
    JsonObject,
    NamedToolChoice,
)
from factorspec_sdk.server.render import Answer
from factorspec_sdk.server.structured import misplaced_extension, tool_extension
from factorspec_sdk.tools import tools_prompt

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["MESSAGE_MAX_CHARS", "ToolPlan", "plan_tools"]

MESSAGE_MAX_CHARS = 1000
"""The longest message (characters) a ``tool_choice`` ``"auto"`` answer writes when the
request sets no ``max_tokens``; with one, its token budget bounds the message instead."""

_NO_ARGUMENTS: JsonObject = {"type": "object", "properties": {}, "additionalProperties": False}


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """The calls record of a request and how its answer is read.

    Attributes:
        ir: the record's relation IR.
        system: the system text listing the functions to the model.
        auto: the record is a message or calls (``tool_choice`` ``"auto"``).
        validators: the ``parameters`` validator of each function laid out from its schema,
            by name (a function whose IR came is held to the IR, in the record's check).
        message_chars: the longest message of an ``"auto"`` answer (None: the token
            budget bounds it).
    """

    ir: JsonObject
    system: str
    auto: bool
    validators: dict[str, Validator]
    message_chars: int | None = None

    def answer(self, text: str) -> Answer:
        """The answer of a finished record's ``text``: a message, or tool calls.

        A message as long as `message_chars` was cut there: its finish reason is
        ``length``. The calls end before the first one that repeats an earlier call (the
        same function with the same arguments): the model is looping there.

        Raises:
            ApiError: 500 when a call's arguments break their schema (a server bug).
        """
        record = json.loads(text)
        if self.auto:
            reply = record["reply"]
            if reply["type"] == "message":
                content = str(reply["content"])
                cut = self.message_chars is not None and len(content) >= self.message_chars
                return Answer(content, "length" if cut else "stop", True)
            calls = reply["calls"]
        else:
            calls = record["calls"]
        out: list[JsonObject] = []
        seen: set[str] = set()
        for call in calls:
            name, arguments = call["name"], call["arguments"]
            key = json.dumps([name, arguments], sort_keys=True)
            if key in seen:
                break
            seen.add(key)
            validator = self.validators.get(name)
            errors = (
                [] if validator is None else [e.message for e in validator.iter_errors(arguments)]
            )
            if errors:
                raise ApiError(
                    500,
                    f"internal error: the arguments of {name} break its parameters schema "
                    f"({sorted(errors)[0]})",
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
        return Answer("", "tool_calls", True, out)


@dataclass(frozen=True, slots=True)
class _Function:
    """One function of the request: its name, its arguments' IR, where it was sent."""

    name: str
    ir: RelationIR
    layout: JsonObject
    where: str


def plan_tools(req: ChatRequest, limits: IRLimits, compiler: IRCompiler | None = None) -> ToolPlan:
    """The calls record of a request with tools.

    ``compiler``: the server's, which keeps each function's parameters converted
    (`IRCompiler.ir_from_json_schema`); None converts them afresh.

    Raises:
        ApiError: 422 for two tools of one name, a ``tool_choice`` naming none of them, a
            function whose parameters the JSON Schema front end cannot lay out, whose
            ``x-factorspec`` IR is malformed (400 for a malformed shape) or sits below the
            root of its parameters; each naming the function and the place.
    """
    tools = list(enumerate(req.tools or []))
    names = [t.function.name for _, t in tools]
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
        tools = [(j, t) for j, t in tools if t.function.name == choice.function.name]
    max_calls = req.max_tool_calls()
    validators: dict[str, Validator] = {}
    functions: list[_Function] = []
    for j, tool in tools:
        fn = tool.function
        params = fn.parameters if fn.parameters is not None else _NO_ARGUMENTS
        where = f"tools[{j}].function.parameters"
        carried = tool_extension(params, fn.name, where)
        if carried is None:
            validators[fn.name] = json_schema_validator(params, check_schema=False)
        functions.append(_function(fn.name, params, carried, where, limits, compiler))
    auto = choice is None or choice == "auto"
    message_chars = None if req.max_completion_tokens or req.max_tokens else MESSAGE_MAX_CHARS
    ir_doc = _record(functions, max_calls, auto, message_chars)
    described: list[dict[str, Any]] = [
        {
            "name": t.function.name,
            "description": t.function.description or "",
            "parameters": t.function.parameters or _NO_ARGUMENTS,
        }
        for _, t in tools
    ]
    system = tools_prompt(described, max_calls, message=auto)
    return ToolPlan(ir_doc, system, auto, validators, message_chars if auto else None)


def _function(
    name: str,
    params: JsonObject,
    carried: JsonObject | None,
    where: str,
    limits: IRLimits,
    compiler: IRCompiler | None,
) -> _Function:
    """A function's arguments IR: the one its parameters carry, else their schema's."""
    if carried is not None:
        at = f"{where}.{X_FACTORSPEC}.ir"
        try:
            parsed = parse_ir(carried, limits)
        except IRError as exc:
            raise ApiError(
                exc.status, f"{name}: {exc.message}", code="invalid_relation_ir", param=at
            ) from None
        return _Function(name, parsed, cast("JsonObject", carried["layout"]), at)
    nested = misplaced_extension(params)
    if nested is not None:
        raise ApiError(
            422,
            f"{name}: {X_FACTORSPEC} at {nested} of its parameters is not read (only at their "
            "root), and its relations would be dropped; put the relation IR of the whole "
            f'arguments model at the root ({{"{X_FACTORSPEC}": {{"ir": ...}}}}, as '
            "factorspec_sdk.tools.function_tool does)",
            code="spec_error",
            param=where,
        )
    try:
        convert = ir_from_json_schema if compiler is None else compiler.ir_from_json_schema
        ir = convert(params, name=f"{name} arguments", limits=limits)
        parsed = parse_ir(ir, limits)
    except Exception as exc:  # IRError, RecursionError: the schema's fault
        message = getattr(exc, "message", str(exc))
        raise ApiError(422, f"{name}: {message}", code="spec_error", param=where) from None
    return _Function(name, parsed, cast("JsonObject", ir["layout"]), where)


def _record(
    functions: list[_Function], max_calls: int, auto: bool, message_chars: int | None
) -> JsonObject:
    """The IR document of the calls record, each function's relations under each call."""
    branches = [
        _object(f"Call{k}", [("name", _enum(f.name)), ("arguments", f.layout)])
        for k, f in enumerate(functions)
    ]
    union = len(branches) > 1
    item: JsonObject = (
        {"type": "union", "tag": "name", "branches": branches} if union else branches[0]
    )
    calls: JsonObject = {"type": "list", "item": item, "min_length": 1, "max_length": max_calls}
    if auto:
        content: JsonObject = {"type": "leaf", "kind": "str"}
        if message_chars is not None:
            content["max_length"] = message_chars
        message = _object("Message", [("type", _enum("message")), ("content", content)])
        called = _object("Calls", [("type", _enum("calls")), ("calls", calls)])
        reply: JsonObject = {"type": "union", "tag": "type", "branches": [message, called]}
        layout = _object("Reply", [("reply", reply)])
        at: Path = ("reply", "<Calls>", "calls")
    else:
        layout = _object("ToolCalls", [("calls", calls)])
        at = ("calls",)
    composer = IRComposer()
    related = [(k, f) for k, f in enumerate(functions) if f.ir.variables or f.ir.factors]
    if related:
        outer: list[Expr] = []
        if auto:  # the calls branch of the reply (its second)
            taken = composer.declare(branch_name(("reply",)), ("reply",), "int")
            outer.append(Apply(op="eq", args=[taken, int_const(1)]))
        length = composer.declare(length_name(at), at, "len")
        for i in range(max_calls):
            exists = Apply(op="gt", args=[length, int_const(i)])
            for k, f in related:
                guard = [*outer, exists]
                prefix: Path = (*at, i)
                if union:
                    branch = composer.declare(branch_name(prefix), prefix, "int")
                    guard.append(Apply(op="eq", args=[branch, int_const(k)]))
                    prefix = (*prefix, f"<Call{k}>")
                try:
                    composer.place(f.ir, (*prefix, "arguments"), guard, f"{f.name}, call {i}")
                except IRError as exc:
                    raise ApiError(
                        422,
                        f"{f.name}: {exc.message}",
                        code="invalid_relation_ir",
                        param=f.where,
                    ) from None
    return composer.document(str(layout["name"]), layout)


def _object(name: str, fields: list[tuple[str, JsonObject]]) -> JsonObject:
    return {
        "type": "object",
        "name": name,
        "fields": [{"name": key, "key": key, "node": node} for key, node in fields],
    }


def _enum(value: str) -> JsonObject:
    return {"type": "leaf", "kind": "enum", "choices": [value]}
