"""Where a ``from_openai`` client's records are decoded: by the server, or here (`Route`).

A ``factorspec serve`` gets the relation IR and decodes; a plain vLLM or SGLang server gets
FactorSpec's constrained segments from a local decoder, and the record decoded here becomes
the ``ChatCompletion`` a FactorSpec server would have answered (`decoded_completion`).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import TYPE_CHECKING

from factorspec_sdk.backends.base import Backend, RecordOutcome
from factorspec_sdk.backends.connect import ServerKind, connect, probe_server
from factorspec_sdk.errors import FactorSpecError, RemoteError

if TYPE_CHECKING:
    from pathlib import Path

    from openai import AsyncOpenAI, OpenAI
    from openai.types.chat import ChatCompletion

    from factorspec_sdk.engines.openai_server import TokenizerSource

__all__ = ["Route", "decoded_completion"]


class Route:
    """Where a client's records are decoded: by the FactorSpec server it talks to, or here.

    A ``factorspec serve`` gets the relation IR and decodes; a plain vLLM or SGLang server
    gets FactorSpec's constrained segments from a local decoder (`connect`, one backend per
    model id), as ``Client(base_url=...)`` does. The server is asked who it is once.
    """

    def __init__(
        self,
        client: OpenAI | AsyncOpenAI,
        server: ServerKind,
        tokenizer: str | Path | TokenizerSource | None,
    ) -> None:
        self._base_url = str(client.base_url)
        self._api_key = client.api_key
        self._server = server
        self._tokenizer = tokenizer
        self._backends: dict[str, Backend] = {}
        self._lock = threading.Lock()

    def backend(self, model: str) -> Backend | None:
        """The local backend of ``model`` on a plain server; None for a FactorSpec server.

        Raises:
            EngineError: the server cannot be probed.
        """
        with self._lock:
            if self._server == "auto":
                self._server = probe_server(self._base_url, self._api_key)
            if self._server == "factorspec":
                return None
            if model not in self._backends:
                self._backends[model] = connect(
                    self._base_url,
                    model=model,
                    api_key=self._api_key,
                    server=self._server,
                    tokenizer=self._tokenizer,
                )
            return self._backends[model]

    def close(self) -> None:
        """Close the local backends (their HTTP connections)."""
        with self._lock:
            for backend in self._backends.values():
                backend.close()
            self._backends.clear()


def decoded_completion(outcome: RecordOutcome, model: str) -> ChatCompletion:
    """A record decoded here, as the ``ChatCompletion`` a server would have answered.

    Raises:
        FactorSpecError: the record's error (a spec that does not compile, a budget, ...).
    """
    from openai.types.chat import ChatCompletion

    if outcome.error is not None:
        if isinstance(outcome.error, FactorSpecError):
            raise outcome.error
        raise RemoteError(f"decoding on the server failed: {outcome.error}") from outcome.error
    stats = outcome.stats
    return ChatCompletion.model_validate(
        {
            "id": f"chatcmpl-factorspec-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": outcome.text},
                }
            ],
            "usage": {
                "prompt_tokens": stats.prompt_tokens,
                "completion_tokens": stats.tokens,
                "total_tokens": stats.prompt_tokens + stats.tokens,
                "prompt_tokens_details": {"cached_tokens": stats.cached_prompt_tokens},
            },
        }
    )
