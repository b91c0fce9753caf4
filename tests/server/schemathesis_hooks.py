"""Schemathesis hooks of the contract run: generated requests end within its response limit.

A request may give its own time limit, up to an hour (``factorspec.timeout_s``, or
``x-factorspec.timeout_s`` at the root of its JSON schema), and the scripted model can write
a record that never closes (an unbounded number, a free string) within a large
``max_tokens``: such a request rightly runs until its limit, longer than schemathesis waits
for an answer. `map_body` caps each limit a generated body gives at the server's
``--request-timeout``, so every generation ends (a 422 ``timeout_reached`` at worst) in
time.
"""

from __future__ import annotations

from typing import Any

import schemathesis

LIMIT_S = 6.0
"""The contract run's ``--request-timeout`` (`tests.server.test_contract`)."""


@schemathesis.hook
def map_body(context: Any, body: Any) -> Any:
    """``body`` with every ``timeout_s`` above `LIMIT_S` lowered to it."""
    if not isinstance(body, dict):
        return body
    _cap(body.get("factorspec"))
    for schema in (_json_schema(body), _structured_schema(body)):
        if isinstance(schema, dict):
            _cap(schema.get("x-factorspec"))
    return body


def _json_schema(body: dict[str, Any]) -> object:
    rf = body.get("response_format")
    js = rf.get("json_schema") if isinstance(rf, dict) else None
    return js.get("schema") if isinstance(js, dict) else None


def _structured_schema(body: dict[str, Any]) -> object:
    so = body.get("structured_outputs")
    return so.get("json") if isinstance(so, dict) else None


def _cap(extension: object) -> None:
    if not isinstance(extension, dict):
        return
    limit = extension.get("timeout_s")
    if isinstance(limit, int | float) and not isinstance(limit, bool) and limit > LIMIT_S:
        extension["timeout_s"] = LIMIT_S
