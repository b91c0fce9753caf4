"""Who may call `factorspec serve` and how large a request may be.

Owns the API key check (``Authorization: Bearer <key>``, a 401) and the body limits: the
byte size (a 413, checked on ``Content-Length`` and again while reading) and the JSON
nesting depth (a 400), before any of the body is looked at.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from factorspec_sdk.ir import json_depth
from factorspec_sdk.server.protocol import ApiError, JsonObject

if TYPE_CHECKING:
    from fastapi import Request

__all__ = ["check_api_key", "read_body"]


def check_api_key(request: Request, api_key: str | None) -> None:
    """Let the request through when no key is set or it carries ``Bearer <api_key>``.

    Raises:
        ApiError: 401 ``invalid_api_key``.
    """
    if api_key is None:
        return
    if request.headers.get("authorization") != f"Bearer {api_key}":
        raise ApiError(401, "invalid or missing API key", code="invalid_api_key")


async def read_body(request: Request, *, max_bytes: int, max_depth: int) -> JsonObject:
    """The request body as a JSON object, read no further than ``max_bytes``.

    Raises:
        ApiError: 413 for a body larger than ``max_bytes``; 400 for one that is not JSON,
            not an object, or nests deeper than ``max_depth``.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ApiError(413, f"the request body is larger than {max_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise ApiError(413, f"the request body is larger than {max_bytes} bytes")
        chunks.append(chunk)
    try:
        data = json.loads(b"".join(chunks), parse_float=_json_number)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    if json_depth(data, max_depth) > max_depth:
        raise ApiError(400, f"the request nests deeper than {max_depth}")
    return data


def _json_number(text: str) -> float | int:
    """A JSON number with a fraction or exponent; an integral one is an int, as in JSON Schema.

    (``16.0`` is an integer to JSON Schema, so the documented schema allows ``"n": 2.0``.)
    """
    value = float(text)
    return int(value) if value.is_integer() else value
