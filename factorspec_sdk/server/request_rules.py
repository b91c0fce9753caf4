"""Which requests `factorspec serve` can serve, as JSON Schema and as the errors it gives.

A chat request answers with tool calls (``tools``, and no other spec) or with a record,
whose spec comes from exactly one source (a relation IR in the ``factorspec`` extension
field, a ``json_schema`` ``response_format`` or vLLM's ``structured_outputs``); streaming
takes ``n=1``; ``factorspec.max_tool_calls`` goes with tools only. `REQUEST_RULES` and
`CHAT_RULES` state this in the request models' JSON schema (so ``/openapi.json`` names every
reason for a 400), and the models' validators in `factorspec_sdk.server.protocol` raise the
same messages (`NEEDS_A_SPEC`, `TWO_SPECS`...).
"""

from __future__ import annotations

from pydantic.config import JsonDict, JsonValue

__all__ = [
    "CALLS_WITHOUT_TOOLS",
    "CHAT_RULES",
    "CHOICE_WITHOUT_TOOLS",
    "NEEDS_A_SPEC",
    "ONE_CALL",
    "REQUEST_RULES",
    "TOOLS_AND_SPEC",
    "TWO_SPECS",
]


NEEDS_A_SPEC = (
    "factorspec serve writes structured records: pass response_format="
    '{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}, '
    'a relation IR in the "factorspec" extension field, or vLLM\'s "structured_outputs"'
)


TWO_SPECS = (
    'pass either "structured_outputs" or a json_schema "response_format", not both '
    '(a relation IR in "factorspec" may go with either, and wins)'
)


TOOLS_AND_SPEC = (
    'tools (with tool_choice not "none") make the answer tool calls: pass no {} with them'
)


CALLS_WITHOUT_TOOLS = 'factorspec.max_tool_calls bounds tool calls: pass it with "tools"'


ONE_CALL = (
    "parallel_tool_calls false allows one call: factorspec.max_tool_calls above 1 contradicts it"
)


CHOICE_WITHOUT_TOOLS = (
    'tool_choice "required" or a named function asks for tool calls: pass the functions in '
    '"tools" (for a record, leave tool_choice out)'
)


_SPEC_SOURCES: list[JsonValue] = [
    {
        "required": ["factorspec"],
        "properties": {
            "factorspec": {
                "type": "object",
                "required": ["ir"],
                "properties": {"ir": {"type": "object"}},
            }
        },
    },
    {
        "required": ["response_format"],
        "properties": {
            "response_format": {
                "type": "object",
                "required": ["type", "json_schema"],
                "properties": {
                    "type": {"const": "json_schema"},
                    "json_schema": {"type": "object"},
                },
            }
        },
    },
    {
        "required": ["structured_outputs"],
        "properties": {"structured_outputs": {"type": "object"}},
    },
]
"""The ways a request gives its record's spec (one of them is needed without tools)."""


_ONE_STREAM: JsonDict = {
    "description": "streaming supports n=1 only",
    "anyOf": [
        {"properties": {"stream": {"const": False}}},
        {"properties": {"n": {"const": 1}}},
    ],
}


_NO_CALLS_BOUND: JsonDict = {
    "description": CALLS_WITHOUT_TOOLS,
    "not": {
        "required": ["factorspec"],
        "properties": {
            "factorspec": {
                "type": "object",
                "required": ["max_tool_calls"],
                "properties": {"max_tool_calls": {"type": "integer"}},
            }
        },
    },
}


REQUEST_RULES: JsonDict = {
    "allOf": [
        {
            "description": NEEDS_A_SPEC,
            "anyOf": _SPEC_SOURCES,
        },
        _NO_CALLS_BOUND,
        {
            "description": TWO_SPECS,
            "not": {
                "required": ["structured_outputs", "response_format"],
                "properties": {
                    "structured_outputs": {"type": "object"},
                    "response_format": {
                        "type": "object",
                        "required": ["type"],
                        "properties": {"type": {"const": "json_schema"}},
                    },
                },
            },
        },
        _ONE_STREAM,
    ]
}


_TOOLS_ACTIVE: JsonDict = {
    "required": ["tools"],
    "properties": {
        "tools": {"type": "array", "minItems": 1},
        "tool_choice": {"not": {"const": "none"}},
    },
}


_ONE_CALL_RULE: JsonDict = {
    "description": ONE_CALL,
    "not": {
        "required": ["parallel_tool_calls", "factorspec"],
        "properties": {
            "parallel_tool_calls": {"const": False},
            "factorspec": {
                "type": "object",
                "required": ["max_tool_calls"],
                "properties": {"max_tool_calls": {"type": "integer", "minimum": 2}},
            },
        },
    },
}


CHAT_RULES: JsonDict = {
    "anyOf": [
        {
            "allOf": [
                _TOOLS_ACTIVE,
                {"not": {"anyOf": _SPEC_SOURCES}},
                _ONE_STREAM,
                _ONE_CALL_RULE,
            ]
        },
        {
            "allOf": [
                {"not": _TOOLS_ACTIVE},
                REQUEST_RULES,
                {
                    "description": CHOICE_WITHOUT_TOOLS,
                    "not": {
                        "required": ["tool_choice"],
                        "properties": {
                            "tool_choice": {"anyOf": [{"const": "required"}, {"type": "object"}]}
                        },
                    },
                },
            ]
        },
    ]
}
"""Chat requests: tool calls (tools, and no other spec), or a record as `REQUEST_RULES` say
(and no ``tool_choice`` that asks for calls)."""
