"""The request parameters `factorspec serve` does not honour, and why (`Unhonoured`).

A parameter the server does not honour (``stop``, ``logit_bias``, the penalties,
``logprobs``, vLLM's ``top_k``...) takes only its neutral values, which change nothing
(``null``, and the defaults clients send: ``0``, ``[]``, ``{}``); any other value is a 400
`UNSUPPORTED_PARAMETER` naming the parameter and what to do instead, never silently dropped.
The request models of `factorspec_sdk.server.protocol` declare each such field as
``Annotated[object, Unhonoured(neutral, instead)]`` with one of the reasons here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.config import JsonValue
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

__all__ = [
    "BIAS",
    "GUIDED",
    "LENGTH",
    "LOGPROBS",
    "ONE_SAMPLE",
    "PENALTY",
    "STOP",
    "TEXT",
    "TOP_P",
    "UNSUPPORTED_PARAMETER",
    "Unhonoured",
]


UNSUPPORTED_PARAMETER = "unsupported_parameter"
"""The error type (and the 400's ``code``) of a value an `Unhonoured` parameter refuses."""


def _same(value: object, neutral: JsonValue) -> bool:
    """Whether ``value`` is the JSON value ``neutral`` (``0`` and ``0.0`` are; ``false`` is not)."""
    if isinstance(neutral, bool) or isinstance(value, bool):
        return value is neutral
    if isinstance(neutral, (int, float)):
        return isinstance(value, (int, float)) and value == neutral
    return type(value) is type(neutral) and value == neutral


@dataclass(frozen=True, slots=True, eq=False)  # by identity: typing caches Annotated[...]
class Unhonoured:
    """The metadata of a request parameter the server does not honour.

    Its ``neutral`` values, which change nothing (``null``, and the defaults clients send:
    ``0``, ``[]``, ``{}``...), are accepted; any other value would change the answer, so it
    is a 400 (`UNSUPPORTED_PARAMETER`) saying what to do ``instead``, never silently
    dropped. The field's JSON schema is the enum of the neutral values, so the OpenAPI
    contract states the refusal.

    Attributes:
        neutral: the accepted values.
        instead: what to do instead, as the error says it.
    """

    neutral: tuple[JsonValue, ...]
    instead: str

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        """Any JSON value, then `check`."""
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The enum of the neutral values, with the refusal as the description."""
        return {"enum": list(self.neutral), "description": f"Not supported: {self.instead}."}

    def check(self, value: object) -> object:
        """``value`` when it is neutral.

        Raises:
            PydanticCustomError: `UNSUPPORTED_PARAMETER`, for any other value.
        """
        if any(_same(value, n) for n in self.neutral):
            return value
        accepted = " or ".join(json.dumps(n) for n in self.neutral)
        shown = json.dumps(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise PydanticCustomError(
            UNSUPPORTED_PARAMETER,
            "{value} is not supported ({accepted} is accepted): {instead}",
            {"value": shown, "instead": self.instead, "accepted": accepted},
        )


PENALTY = (
    "factorspec serve applies no repetition penalty; leave it out (a relation such as "
    "distinct() keeps values from repeating)"
)


BIAS = (
    "token biases are not applied; say which values are allowed in the schema (enum, "
    "pattern, bounds) or in a relation"
)


STOP = (
    "a record ends when it is complete, never at a stop string (a cut record is not valid); "
    "keep a text out of a value with the schema (pattern, enum, maxLength)"
)


LOGPROBS = (
    "logprobs are not returned (the record's token ids are in the answer's factorspec.token_ids)"
)


TOP_P = "use top_p (nucleus sampling) and temperature"


LENGTH = "a record's length is its schema's: bound it with maxLength, maxItems or max_tokens"


ONE_SAMPLE = "each choice is one sample; ask for several with n"


GUIDED = (
    'vLLM\'s older guided_* fields are not read: pass "structured_outputs": {"json" | "regex" '
    '| "choice": ...} (vLLM 0.10+) or a json_schema response_format'
)


TEXT = "the answer is text (a record or tool calls)"
