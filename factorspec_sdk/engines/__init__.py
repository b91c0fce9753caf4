"""Engines: model runtimes FactorSpec decodes on, behind the `Engine` protocol.

Backends are imported lazily by `create_engine`, so importing this package never imports
torch or transformers.
"""

from __future__ import annotations

import importlib
from typing import cast

from factorspec_sdk.engines.completion import CompletionEngine
from factorspec_sdk.engines.protocol import ChatMessage, Engine, Logits, SequenceId
from factorspec_sdk.errors import EngineError

__all__ = [
    "ENGINES",
    "ChatMessage",
    "CompletionEngine",
    "Engine",
    "Logits",
    "SequenceId",
    "create_engine",
    "create_logits_engine",
]

ENGINES: dict[str, tuple[str, str]] = {
    "embedded": ("factorspec_sdk.engines.embedded", "EmbeddedEngine"),
    "scripted": ("factorspec_sdk.engines.scripted", "ScriptedEngine"),
    "vllm": ("factorspec_sdk.engines.vllm_engine", "VLLMEngine"),
    "sglang": ("factorspec_sdk.engines.sglang_engine", "SGLangEngine"),
}
"""Engine name -> (module, class), imported on first use."""


def create_engine(name: str, **kwargs: object) -> Engine | CompletionEngine:
    """Build the engine called ``name`` with ``kwargs`` passed to its constructor.

    Args:
        name: ``"embedded"`` (PyTorch + transformers, the default model SmolLM2-135M) or
            ``"scripted"`` (numpy test engine; needs ``tokenizer`` and ``logits_fn``),
            ``"vllm"`` (in-process vLLM 0.32) or ``"sglang"`` (in-process SGLang, GPU only).
        **kwargs: constructor arguments of the backend.

    Raises:
        EngineError: ``name`` is unknown, or its backend cannot be imported.
    """
    return cast(Engine | CompletionEngine, _engine_class(name)(**kwargs))


def _engine_class(name: str) -> type:
    """The class of the engine called ``name``, its module imported (not the runtime).

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
    return cast(type, getattr(module, class_name))


def create_logits_engine(name: str, **kwargs: object) -> Engine:
    """`create_engine` for tools that need logits (the server, the token-level baselines).

    A completion engine (vLLM, SGLang) is refused by its class, before it starts (vLLM
    loads its model for ~40 s on a CPU), and again by the instance where a class leaves it
    open.

    Raises:
        EngineError: as `create_engine`, or ``name`` is a completion engine (vLLM, SGLang).
    """
    refusal = (
        f"engine {name!r} samples constrained completions and returns no logits; this tool "
        "needs a logits engine (embedded, scripted); serve vLLM or SGLang as an upstream "
        "(factorspec serve --upstream URL) or decode on it with Client(engine)"
    )
    cls = _engine_class(name)
    if not callable(getattr(cls, "extend", None)):  # `Engine.extend`: the logits
        raise EngineError(refusal)
    engine = cls(**kwargs)
    if not isinstance(engine, Engine) or isinstance(engine, CompletionEngine):
        close = getattr(engine, "close", None)
        if callable(close):
            close()
        raise EngineError(refusal)
    return engine
