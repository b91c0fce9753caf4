"""What a model's JSON Schema carries under ``x-factorspec``: its relation IR, or why not.

``@relation`` makes a model's JSON schema carry its relations
(`factorspec_sdk.relations.schema`); this module computes what it carries, once per class:
``{"ir": to_ir(Model)}`` when the IR exports without a per-request context, else the marker
``{"unexported": {"relations": [...], "reason": "..."}}`` (the relations read a context, or
do not compile: the reason is the error's message), on which ``factorspec serve`` refuses the
request instead of decoding without them. Never raises: ``model_json_schema()`` must work
for every model Pydantic accepts.
"""

from __future__ import annotations

import copy
import threading
import weakref
from typing import Any

from pydantic import BaseModel

from factorspec_sdk.errors import ContextError
from factorspec_sdk.relations.decorator import relations_of
from factorspec_sdk.relations.schema import unexported

__all__ = ["schema_extension"]

_CACHE: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = weakref.WeakKeyDictionary()
"""The extension of each class (weakly: a class that goes away takes its entry along)."""
_LOCK = threading.Lock()


def schema_extension(model: type[BaseModel]) -> dict[str, Any]:
    """What ``model``'s JSON schema carries under ``x-factorspec`` (a fresh copy).

    The first call per class compiles the relations (`factorspec_sdk.ir.to_ir`, with Z3);
    later calls copy the cached result.
    """
    with _LOCK:
        cached = _CACHE.get(model)
    if cached is None:
        cached = _export(model)
        with _LOCK:
            _CACHE[model] = cached
    return copy.deepcopy(cached)


def _export(model: type[BaseModel]) -> dict[str, Any]:
    from factorspec_sdk.ir.export import to_ir

    try:
        return {"ir": to_ir(model)}
    except ContextError as exc:
        reading = [r.qualname for r in relations_of(model) if r.takes_context]
        if not reading:  # a nested model's relations read it (the error says which)
            return unexported(model, str(exc))
        verb = "reads" if len(reading) == 1 else "read"
        return unexported(model, f"{', '.join(reading)} {verb} a per-request context")
    except Exception as exc:  # never raise from model_json_schema: the marker says why
        return unexported(model, f"they do not compile: {type(exc).__name__}: {exc}")
