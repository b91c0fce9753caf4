"""FactorSpec on any OpenAI-compatible vLLM or SGLang server, with no server plug-in.

``Client(base_url="http://127.0.0.1:8000/v1", model="...")`` on a plain ``vllm serve`` or
``python -m sglang.launch_server`` decodes with `factorspec_sdk.drafter.segments`: each
request to ``/v1/completions`` carries the token ids so far (chat prompt + the record,
certain tokens included, so the server's prefix cache turns them into one prefill forward)
and the server's own constraint parameter, limited to what the oracle still allows.

The two servers differ in three places, all in `Dialect`:

=================  ==================================  ===================================
                   vLLM (``owned_by: vllm``)            SGLang (``owned_by: sglang``)
=================  ==================================  ===================================
constraint         ``allowed_token_ids`` (exact mask,   ``regex`` (the feasible values of
                   one token) or                        the next field)
                   ``structured_outputs.regex``
token ids back     ``return_token_ids``                 not returned: the text is
                                                        re-tokenized canonically
special tokens     ``skip_special_tokens: false``       ``skip_special_tokens: false``
=================  ==================================  ===================================

The tokenizer is needed locally (FactorSpec computes the masks): by default the model id when
it is a local folder (``vllm serve /path/to/model``), else pass ``tokenizer=``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from factorspec_sdk.engines.completion import (
    Completion,
    CompletionReply,
    ConstraintStyle,
    HFTokenizer,
)
from factorspec_sdk.engines.protocol import ChatMessage
from factorspec_sdk.errors import EngineError
from factorspec_sdk.tokens.vocab import TokenizerInfo

__all__ = [
    "DIALECTS",
    "Dialect",
    "OpenAIServerEngine",
    "ServerKind",
    "TokenizerSource",
    "detect_server",
]

ServerKind = Literal["vllm", "sglang"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one server family takes constraints and reports tokens.

    Attributes:
        kind: ``"vllm"`` or ``"sglang"``.
        styles: constraint styles it supports, preferred first.
        returns_token_ids: the reply carries the generated token ids.
    """

    kind: ServerKind
    styles: tuple[ConstraintStyle, ...]
    returns_token_ids: bool

    def extra_body(self, request: Completion) -> dict[str, Any]:
        """The non-OpenAI request fields for ``request``."""
        body: dict[str, Any] = {"skip_special_tokens": False}
        if request.allowed_ids is not None:
            if "tokens" not in self.styles:
                raise EngineError(f"a {self.kind} server takes no token constraint")
            body["allowed_token_ids"] = list(request.allowed_ids)
        elif self.kind == "vllm":
            body["structured_outputs"] = {"regex": request.regex}
        else:
            body["regex"] = request.regex
        if self.returns_token_ids:
            body["return_token_ids"] = True
        return body

    def token_ids(self, choice: Any) -> list[int] | None:
        """The generated token ids of a completion choice, when this server returns them."""
        if not self.returns_token_ids:
            return None
        extra = getattr(choice, "model_extra", None) or {}
        ids = extra.get("token_ids", getattr(choice, "token_ids", None))
        return None if ids is None else [int(t) for t in ids]


DIALECTS: dict[ServerKind, Dialect] = {
    "vllm": Dialect("vllm", ("tokens", "regex"), returns_token_ids=True),
    "sglang": Dialect("sglang", ("regex",), returns_token_ids=False),
}


class TokenizerSource(Protocol):
    """A local tokenizer: the vocabulary and the chat template (e.g. `HFTokenizer`).

    Several engines over servers of one model (`factorspec_sdk.engines.upstreams`) share one.
    """

    @property
    def info(self) -> TokenizerInfo:
        """The vocabulary FactorSpec plans its masks on."""
        ...

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` with the chat template and generation prompt."""
        ...


def detect_server(owned_by: str) -> str:
    """The server family from ``/v1/models``' ``owned_by`` (``"unknown"`` if none fits)."""
    owner = owned_by.lower()
    for kind in ("factorspec", "vllm", "sglang"):
        if kind in owner:
            return kind
    return "unknown"


class OpenAIServerEngine:
    """A `CompletionEngine` over an OpenAI-compatible vLLM or SGLang server.

    Args:
        base_url: the server's API root, e.g. ``"http://127.0.0.1:8000/v1"``.
        model: the model id to request (default: the server's first model).
        api_key: the server's API key, if it needs one.
        tokenizer: a local folder with the model's tokenizer (default: ``model`` when it is a
            local folder), or a loaded `TokenizerSource` to share.
        server: ``"vllm"``, ``"sglang"`` or ``"auto"`` (from ``/v1/models``' ``owned_by``).
        constraint: ``"tokens"`` or ``"regex"`` (default: the server's preferred style).
        timeout: seconds per HTTP request.
        max_concurrency: requests in flight at once for a batch.
        max_retries: times the HTTP client retries a request that failed to connect or got
            a 5xx answer (a pool of servers sets 0 and tries another server instead).

    Raises:
        EngineError: openai is missing, the server cannot be reached, it is not a known
            family, or the tokenizer cannot be found.
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        tokenizer: str | Path | TokenizerSource | None = None,
        server: ServerKind | Literal["auto"] = "auto",
        constraint: ConstraintStyle | None = None,
        timeout: float = 600.0,
        max_concurrency: int = 16,
        max_retries: int = 2,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise EngineError(f"server engines need the openai package ({exc})") from exc
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "EMPTY",
            timeout=timeout,
            max_retries=max_retries,
        )
        self.base_url = base_url
        try:
            models = list(self._client.models.list())
        except openai.OpenAIError as exc:
            raise EngineError(f"cannot list the models of {base_url}: {exc}") from exc
        if not models:
            raise EngineError(f"{base_url} serves no model")
        chosen = next((m for m in models if m.id == model), None) if model else models[0]
        if chosen is None:
            served = ", ".join(m.id for m in models)
            raise EngineError(f"{base_url} does not serve {model!r}; it serves: {served}")
        self._model = str(chosen.id)
        kind = server
        if kind == "auto":
            found = detect_server(str(getattr(chosen, "owned_by", "") or ""))
            if found == "factorspec":
                raise EngineError(
                    f"{base_url} is a FactorSpec server: use Client(base_url=...) without "
                    "server=, relations travel as the relation IR"
                )
            if found not in DIALECTS:
                raise EngineError(
                    f"cannot tell which server {base_url} is (owned_by "
                    f"{getattr(chosen, 'owned_by', None)!r}); pass server='vllm' or 'sglang'"
                )
            kind = "vllm" if found == "vllm" else "sglang"
        self.dialect = DIALECTS[kind]
        style = constraint or self.dialect.styles[0]
        if style not in self.dialect.styles:
            raise EngineError(f"a {kind} server takes no {style!r} constraint")
        self._style: ConstraintStyle = style
        self._tok: TokenizerSource
        if tokenizer is None or isinstance(tokenizer, (str, Path)):
            folder = tokenizer if tokenizer is not None else self._model
            if not Path(folder).is_dir():
                raise EngineError(
                    f"FactorSpec needs the model's tokenizer locally; {str(folder)!r} is not a "
                    "folder: pass tokenizer='/path/to/model-or-tokenizer-folder'"
                )
            self._tok = HFTokenizer(folder)
        else:
            self._tok = tokenizer
        self._pool = ThreadPoolExecutor(max_concurrency, thread_name_prefix="factorspec-http")
        self.requests = 0
        """Completion requests sent so far."""
        self.http_seconds = 0.0
        """Wall time spent waiting for the server."""

    @property
    def name(self) -> str:
        """``"vllm-server"`` or ``"sglang-server"``."""
        return f"{self.dialect.kind}-server"

    @property
    def model(self) -> str:
        """The model id requested from the server."""
        return self._model

    @property
    def tokenizer(self) -> TokenizerInfo:
        """The model's vocabulary, read from the local tokenizer folder."""
        return self._tok.info

    @property
    def constraint_style(self) -> ConstraintStyle:
        """The constraint style this engine sends."""
        return self._style

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` with the model's chat template and generation prompt."""
        return self._tok.apply_chat_template(messages)

    def _one(self, request: Completion) -> CompletionReply:
        import openai

        if request.allowed_ids is not None and self._style != "tokens":
            raise EngineError("this engine sends regex constraints only")
        try:
            response = self._client.completions.create(
                model=self._model,
                prompt=list(request.prompt_ids),
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                top_p=request.top_p,
                seed=request.seed,
                extra_body=self.dialect.extra_body(request),
            )
        except openai.OpenAIError as exc:
            raise EngineError(f"the {self.name} at {self.base_url} failed: {exc}") from exc
        choice = response.choices[0]
        ids = self.dialect.token_ids(choice)
        eos = self.tokenizer.eos_ids
        if ids is not None:
            while ids and ids[-1] in eos:
                ids.pop()
        usage = response.usage
        forwards = int(usage.completion_tokens) if usage is not None else len(ids or [0])
        return CompletionReply(str(choice.text), ids, max(1, forwards))

    def complete(self, requests: Sequence[Completion]) -> list[CompletionReply]:
        """Send the requests concurrently (the server batches them); replies in order."""
        t0 = time.perf_counter()
        try:
            return list(self._pool.map(self._one, requests))
        finally:
            self.requests += len(requests)
            self.http_seconds += time.perf_counter() - t0

    def close(self) -> None:
        """Close the HTTP client and its threads."""
        self._pool.shutdown(wait=False)
        self._client.close()
