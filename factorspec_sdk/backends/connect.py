"""`connect`: the backend for a server URL, after asking the server who it is.

A ``factorspec serve`` gets the relation IR (`RemoteBackend`); a plain vLLM or SGLang OpenAI
server gets constrained completions (`CompletionBackend` over
`factorspec_sdk.engines.openai_server.OpenAIServerEngine`), FactorSpec computing the masks
with the model's tokenizer locally.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from factorspec_sdk.backends.base import Backend
from factorspec_sdk.backends.remote import RemoteBackend, api_root
from factorspec_sdk.drafter.loop import DecoderConfig
from factorspec_sdk.errors import EngineError

if TYPE_CHECKING:
    from factorspec_sdk.engines.openai_server import TokenizerSource

__all__ = ["KnownServer", "ServerKind", "connect", "probe_server"]

ServerKind = Literal["auto", "factorspec", "vllm", "sglang"]
"""Which server ``base_url`` is; ``"auto"`` asks it (`probe_server`)."""
KnownServer = Literal["factorspec", "vllm", "sglang"]


def probe_server(base_url: str, api_key: str | None) -> KnownServer:
    """Who owns the served model, from ``GET /v1/models``.

    Raises:
        EngineError: the server cannot be reached, or is none of the three.
    """
    from openai import OpenAI, OpenAIError

    from factorspec_sdk.engines.openai_server import detect_server

    with OpenAI(
        base_url=api_root(base_url), api_key=api_key or "EMPTY", timeout=30, max_retries=1
    ) as probe:
        try:
            models = list(probe.models.list())
        except OpenAIError as exc:
            raise EngineError(
                f"cannot reach {base_url} to tell which server it is ({exc}); pass "
                "server='factorspec', 'vllm' or 'sglang' to skip this probe"
            ) from exc
    owners = {detect_server(str(getattr(m, "owned_by", "") or "")) for m in models}
    known: tuple[KnownServer, ...] = ("factorspec", "vllm", "sglang")
    for kind in known:
        if kind in owners:
            return kind
    raise EngineError(
        f"{base_url} is neither a FactorSpec, vLLM nor SGLang server (owned_by: "
        f"{sorted(str(getattr(m, 'owned_by', None)) for m in models)}); pass server="
    )


def connect(
    base_url: str,
    *,
    model: str | Path | None = None,
    api_key: str | None = None,
    server: ServerKind = "auto",
    tokenizer: str | Path | TokenizerSource | None = None,
    config: DecoderConfig | None = None,
) -> Backend:
    """The backend for the server at ``base_url`` (see `factorspec_sdk.client.Client`).

    Raises:
        EngineError: ``server="auto"`` and the probe fails.
        TypeError: ``tokenizer`` for a FactorSpec server (it tokenizes itself).
    """
    kind = server if server != "auto" else probe_server(base_url, api_key)
    if kind == "factorspec":
        if tokenizer is not None:
            raise TypeError("a factorspec server tokenizes itself: pass no tokenizer=")
        # drafting is the default on both sides: only a client's False asks the server for it
        speculative = None if config is None or config.speculative else False
        return RemoteBackend(
            base_url,
            api_key=api_key,
            model=None if model is None else str(model),
            speculative=speculative,
        )
    from factorspec_sdk.backends.local import CompletionBackend
    from factorspec_sdk.engines.openai_server import OpenAIServerEngine

    engine = OpenAIServerEngine(
        api_root(base_url),
        None if model is None else str(model),
        api_key=api_key,
        tokenizer=tokenizer,
        server="vllm" if kind == "vllm" else "sglang",
    )
    return CompletionBackend(engine, config)
