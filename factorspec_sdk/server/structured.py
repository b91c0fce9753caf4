"""What other servers' clients send instead of the ``factorspec`` field, read as FactorSpec specs.

Two dialects, so that code written for another server runs unchanged:

* ``x-factorspec``: a key at the root of a ``response_format`` (or vLLM ``json``) JSON
  schema that carries the ``factorspec`` extension field's content (a relation IR, a
  timeout...), as llguidance reads ``x-guidance``; `extension` merges it with the field,
  the field winning key by key. At the root of a tool's ``parameters`` it carries the
  relation IR of the function's arguments (`tool_extension`: ``{"ir": {...}}``, nothing
  else). A model with ``@relation`` s puts it in its own JSON schema
  (`factorspec_sdk.relations.schema`), or, where its relations cannot be exported without
  a per-request context, the marker ``{"unexported": {"relations": [...], "reason":
  ...}}`` (`Unexported`): a request whose record has no IR but that marker is refused with
  a 422 ``relations_not_sent`` naming the relations and what to send instead
  (`relations_not_sent`). Anywhere below a root (a nested model's schema under ``$defs``)
  it is read by no one, so a request with one there and no IR is refused
  (`misplaced_extension`), never decoded without its relations.
* vLLM's ``structured_outputs``: ``json`` is the JSON schema path; ``choice`` and ``regex``
  answer bare text, not a JSON record. The engine thread only writes records, so both are
  decoded as the record ``{"value": <one of the strings>}`` (`VALUE_KEY`, a string enum) and
  the answer carries the string (`Structured.bare`). A regex whose language is a short finite
  list (`regex_language`, with ``interegular``) is that enum, so relations and certain tokens
  work on it; any other regex is the wrapper's string with the regex as its ``pattern``, a
  grammar value llguidance generates (a regex llguidance cannot compile is a 422).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from factorspec_sdk.ir.standalone_strings import split_flags
from factorspec_sdk.relations.schema import DATA_KEYWORDS, NAME_MAPS, UNEXPORTED
from factorspec_sdk.server.protocol import (
    X_FACTORSPEC,
    ApiError,
    FactorSpecExtension,
    JsonObject,
    StructuredOutputs,
)

__all__ = [
    "VALUE_KEY",
    "Structured",
    "Unexported",
    "bare_text",
    "extension",
    "misplaced_extension",
    "regex_language",
    "relations_not_sent",
    "structured",
    "tool_extension",
    "unexported_relations",
    "whole_match",
]

VALUE_KEY = "value"
"""The key of the one-field record a ``choice`` or ``regex`` answer is decoded as."""


@dataclass(frozen=True, slots=True)
class Structured:
    """The JSON schema a ``structured_outputs`` constraint is decoded with.

    Attributes:
        schema: the JSON schema (for ``choice``/``regex``: the one-field wrapper record).
        name: the record's name.
        bare: the answer is the string under `VALUE_KEY`, not the record's JSON.
    """

    schema: JsonObject
    name: str
    bare: bool


class _FSM(Protocol):
    """The part of ``interegular.FSM`` used here (its methods carry no annotations)."""

    def cardinality(self) -> int: ...

    def strings(self) -> Iterator[Sequence[object]]: ...


def extension(own: FactorSpecExtension | None, schema: JsonObject | None) -> FactorSpecExtension:
    """The request's extension field: ``schema``'s ``x-factorspec`` overridden by ``own``.

    Raises:
        ApiError: 400 for an ``x-factorspec`` value the extension model rejects.
    """
    raw = None if schema is None else schema.get(X_FACTORSPEC)
    if isinstance(raw, dict) and UNEXPORTED in raw:  # a marker, read by unexported_relations
        raw = {k: v for k, v in raw.items() if k != UNEXPORTED} or None
    if raw is None:
        return own or FactorSpecExtension()
    try:
        embedded = FactorSpecExtension.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in (X_FACTORSPEC, *first["loc"]))
        raise ApiError(400, f"invalid request: {loc}: {first['msg']}", param=X_FACTORSPEC) from None
    if own is None:
        return embedded
    merged = embedded.model_dump(exclude_unset=True) | own.model_dump(exclude_unset=True)
    return FactorSpecExtension.model_validate(merged)


class Unexported(BaseModel):
    """The marker of relations a model's schema does not carry (``x-factorspec.unexported``).

    Attributes:
        model: the model's name.
        relations: the model's relations (``Model.method``).
        reason: why their IR is not in the schema (they read a per-request context, or do
            not compile).
    """

    model_config = ConfigDict(extra="ignore", strict=True)
    model: str = "Model"
    relations: list[str]
    reason: str = ""


class _ToolExtension(BaseModel):
    """``x-factorspec`` at the root of a tool's ``parameters``: its arguments' relation IR.

    Or the marker of relations its schema does not carry.
    """

    model_config = ConfigDict(extra="forbid", strict=True)
    ir: JsonObject | None = None
    unexported: Unexported | None = None


def tool_extension(parameters: JsonObject, name: str, where: str) -> JsonObject | None:
    """The relation IR at the root of a function's ``parameters`` (``x-factorspec.ir``).

    Args:
        parameters: the function's parameters schema.
        name: the function's name, for errors.
        where: its place in the request (``tools[0].function.parameters``), for errors.

    Raises:
        ApiError: 400 for an ``x-factorspec`` that is neither ``{"ir": {...}}`` nor the
            marker (timeouts and the like belong to the request's ``factorspec`` field, not
            to one tool); 422 ``relations_not_sent`` for the marker of relations the schema
            does not carry (`relations_not_sent`).
    """
    if X_FACTORSPEC not in parameters:
        return None
    try:
        carried = _ToolExtension.model_validate(parameters[X_FACTORSPEC])
        if (carried.ir is None) == (carried.unexported is None):
            raise ValueError("exactly one of ir, unexported")
    except (ValidationError, ValueError) as exc:
        if isinstance(exc, ValidationError):
            first = exc.errors()[0]
            loc = ".".join(str(x) for x in (where, X_FACTORSPEC, *first["loc"]))
            why = str(first["msg"])
        else:
            loc, why = f"{where}.{X_FACTORSPEC}", str(exc)
        raise ApiError(
            400,
            f"invalid request: {loc}: {why}; a tool's {X_FACTORSPEC} carries only "
            'the relation IR of its arguments ({"ir": {...}}); request options go in the '
            '"factorspec" field',
            param=f"{where}.{X_FACTORSPEC}",
        ) from None
    if carried.unexported is not None:
        model = carried.unexported.model
        raise relations_not_sent(
            f"tool {name!r}",
            carried.unexported,
            where,
            f"factorspec_sdk.tools.function_tool({model}, context=...) in place of "
            f"openai.pydantic_function_tool({model}) (it sends the relation IR for your "
            f"context), or factorspec_sdk.Client(base_url=...).call([{model}, ...], "
            "context=...)",
        )
    return carried.ir


def unexported_relations(schema: JsonObject) -> Unexported | None:
    """The marker at the root of ``schema`` of relations it does not carry, if any.

    Raises:
        ApiError: 400 for a marker that is not ``{"relations": [...], "reason": ...}``.
    """
    raw = schema.get(X_FACTORSPEC)
    if not isinstance(raw, dict) or UNEXPORTED not in raw:
        return None
    try:
        return Unexported.model_validate(raw[UNEXPORTED])
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in (X_FACTORSPEC, UNEXPORTED, *first["loc"]))
        raise ApiError(400, f"invalid request: {loc}: {first['msg']}", param=X_FACTORSPEC) from None


def relations_not_sent(subject: str, marker: Unexported, param: str, instead: str) -> ApiError:
    """The 422 for a schema whose model's relations it does not carry (the marker).

    Args:
        subject: what the schema belongs to (``tool 'BookRoom'``, ``response_format``).
        marker: the schema's marker.
        param: the request parameter the schema came in.
        instead: what to send instead.
    """
    names = ", ".join(marker.relations) or "(unnamed)"
    why = f" ({marker.reason})" if marker.reason else ""
    return ApiError(
        422,
        f"{subject}: the relations {names} are not in the schema{why}; this server enforces "
        f"the relations it is sent and never decodes without them. Use {instead}",
        code="relations_not_sent",
        param=param,
    )


_DATA = DATA_KEYWORDS | {X_FACTORSPEC}
"""Keywords whose value is data, not schemas (an ``x-factorspec`` below the root is found,
not searched)."""


def misplaced_extension(schema: object) -> str | None:
    """The JSON pointer of an ``x-factorspec`` key below the root of ``schema``, if any.

    A server reads ``x-factorspec`` at a schema's root only; one under ``$defs`` (a nested
    model's relations, as Instructor's iterable wrapper or a model inside a model sends
    them) would be dropped.
    """
    stack: list[tuple[object, str]] = [(schema, "")]
    while stack:
        node, at = stack.pop()
        if isinstance(node, list):
            stack += [(item, f"{at}/{i}") for i, item in enumerate(node)]
            continue
        if not isinstance(node, dict):
            continue
        if at and X_FACTORSPEC in node:
            return "#" + at
        for key, value in node.items():
            if not isinstance(key, str) or key in _DATA:
                continue
            here = f"{at}/{_pointer_part(key)}"
            if key in NAME_MAPS and isinstance(value, dict):
                stack += [(v, f"{here}/{_pointer_part(str(k))}") for k, v in value.items()]
            else:
                stack.append((value, here))
    return None


def _pointer_part(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def structured(so: StructuredOutputs, max_choices: int) -> Structured:
    """The schema ``so`` is decoded with.

    Args:
        so: the request's ``structured_outputs``.
        max_choices: the most strings a ``regex`` may match (`IRLimits.max_choices`).

    Raises:
        ApiError: 422 for ``json`` text that is not a JSON object or a regex that does not
            compile (strings the request schema lets through, so not a 400). A regex whose
            language is not a list of at most ``max_choices`` strings becomes a ``pattern``
            (llguidance refusing it is the spec's 422, later).
    """
    if so.json_ is not None:
        schema = so.json_
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as exc:
                raise ApiError(
                    422,
                    f"structured_outputs.json is not valid JSON: {exc}",
                    param="structured_outputs.json",
                ) from None
            if not isinstance(schema, dict):
                raise ApiError(
                    422,
                    "structured_outputs.json must be a JSON schema object",
                    param="structured_outputs.json",
                )
        return Structured(schema, "Record", bare=False)
    if so.choice is not None:
        return Structured(_wrapper(list(dict.fromkeys(so.choice))), "Choice", bare=True)
    assert so.regex is not None  # the request model lets exactly one through
    try:
        values = regex_language(so.regex, max_choices)
    except ApiError as exc:
        if exc.code != "unsupported_regex":
            raise
        # not a short finite list: the string is a grammar value with the regex as its pattern
        return Structured(_pattern_wrapper(so.regex), "Regex", bare=True)
    return Structured(_wrapper(values), "Regex", bare=True)


def regex_language(pattern: str, limit: int) -> list[str]:
    r"""Every string ``pattern`` matches in full, shortest first, if at most ``limit``.

    Raises:
        ApiError: 400 for a pattern Python's ``re`` cannot compile; 422
            (``unsupported_regex``) for an unbounded language (``\d+``, ``.``), one with more
            than ``limit`` strings, or syntax ``interegular`` does not read.
    """
    param = "structured_outputs.regex"
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ApiError(
            422, f"structured_outputs.regex does not compile: {exc}", param=param
        ) from None

    def refuse(why: str) -> ApiError:
        return ApiError(
            422,
            f"regex {pattern!r} cannot be served: {why}; factorspec serve decodes a regex as "
            f"the list of strings it matches (at most {limit})",
            code="unsupported_regex",
            param=param,
        )

    import interegular

    try:
        fsm = cast(_FSM, interegular.parse_pattern(pattern).to_fsm())
    except Exception as exc:  # interegular's syntax errors share no base class
        raise refuse(f"{type(exc).__name__}: {exc}") from None
    try:
        size = fsm.cardinality()
    except OverflowError:
        raise refuse("it matches unboundedly many strings") from None
    if size > limit:
        raise refuse(f"it matches {size} strings")
    out: list[str] = []
    for chars in itertools.islice(fsm.strings(), limit):
        parts = [c for c in chars if isinstance(c, str)]
        if len(parts) != len(chars):  # interegular's "anything else" symbol
            raise refuse("it matches any character at some position")
        text = "".join(parts)
        if compiled.fullmatch(text) is None:
            raise refuse(f"Python's re does not match {text!r}, which interegular says it does")
        out.append(text)
    if not out:
        raise refuse("it matches no string")
    return list(dict.fromkeys(out))


def bare_text(record: str) -> str:
    """The string a ``choice``/``regex`` answer carries, from its complete wrapper record."""
    value = json.loads(record)[VALUE_KEY]
    assert isinstance(value, str)
    return value


def whole_match(pattern: str) -> str:
    """``pattern`` anchored at both ends, as vLLM and SGLang read a ``regex`` constraint.

    A JSON Schema ``pattern`` is searched (any text around a match), while a request's
    ``regex`` is the whole answer; so the pattern of its wrapper record is anchored. The
    regex's own leading ``^`` and trailing unescaped ``$`` are dropped first (anchors only
    at the ends, as the writer reads them); global flags (``(?i)``) stay in front.
    """
    head, core = split_flags(pattern)
    core = core.removeprefix("^")
    if core.endswith("$"):
        backslashes = len(core[:-1]) - len(core[:-1].rstrip("\\"))
        if backslashes % 2 == 0:  # not an escaped dollar
            core = core[:-1]
    return f"{head}^(?:{core})$"


def _pattern_wrapper(pattern: str) -> JsonObject:
    return {
        "type": "object",
        "properties": {VALUE_KEY: {"type": "string", "pattern": whole_match(pattern)}},
        "required": [VALUE_KEY],
        "additionalProperties": False,
    }


def _wrapper(values: list[str]) -> JsonObject:
    return {
        "type": "object",
        "properties": {VALUE_KEY: {"type": "string", "enum": values}},
        "required": [VALUE_KEY],
        "additionalProperties": False,
    }
