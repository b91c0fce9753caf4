"""Engines: model runtimes FactorSpec decodes on, behind the `Engine` protocol.

Backends are imported lazily by `create_engine`, so importing this package never imports
torch or transformers.
"""

from __future__ import annotations

import importlib
from typing import cast

from factorspec_sdk.engines.protocol import ChatMessage, Engine, Logits, SequenceId
from factorspec_sdk.errors import EngineError

__all__ = ["ENGINES", "ChatMessage", "Engine", "Logits", "SequenceId", "create_engine"]

ENGINES: dict[str, tuple[str, str]] = {
    "embedded": ("factorspec_sdk.engines.embedded", "EmbeddedEngine"),
    "scripted": ("factorspec_sdk.engines.scripted", "ScriptedEngine"),
}
"""Engine name -> (module, class), imported on first use."""


def create_engine(name: str, **kwargs: object) -> Engine:
    """Build the engine called ``name`` with ``kwargs`` passed to its constructor.

    Args:
        name: ``"embedded"`` (PyTorch + transformers, the default model SmolLM2-135M) or
            ``"scripted"`` (numpy test engine; needs ``tokenizer`` and ``logits_fn``).
        **kwargs: constructor arguments of the backend.

    Raises:
        EngineError: ``name`` is unknown, or its backend cannot be imported.
    """
    try:
        module_name, class_name = ENGINES[name]
    except KeyError:
        known = ", ".join(sorted(ENGINES))
        raise EngineError(f"unknown engine {name!r}; known engines: {known}") from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EngineError(f"engine {name!r} cannot be imported: {exc}") from exc
    factory = getattr(module, class_name)
    return cast(Engine, factory(**kwargs))
