"""FactorSpec on any vLLM or SGLang server, or a router in front of several, with no plug-in.

``Client(base_url="http://127.0.0.1:8000/v1", model="...")`` on a plain ``vllm serve`` or
``python -m sglang.launch_server`` decodes with `factorspec_sdk.drafter.segments`: each
request carries the token ids so far (chat prompt + the record, certain tokens included, so
the server's prefix cache turns them into one prefill forward) and the server's own
constraint parameter, limited to what the oracle still allows.

The two server families differ in where the request goes and what it holds, all in
`Dialect`:

=================  ==================================  ===================================
                   vLLM (``owned_by: vllm``)            SGLang (``owned_by: sglang``)
=================  ==================================  ===================================
route              ``POST /v1/completions``             ``POST /generate`` (its native API;
                                                        sglang-router takes no token-id
                                                        prompt on ``/v1/completions``)
constraint         ``allowed_token_ids`` (exact mask,   ``sampling_params.regex`` (the
                   one token),                          feasible values of the next field,
                   ``structured_outputs.regex`` or      a free string) or ``.ebnf`` (a
                   ``.grammar`` (a free string, a       grammar segment's Lark grammar,
                   grammar segment's Lark grammar)      ``--grammar-backend llguidance``)
token ids back     ``return_token_ids``                 ``output_ids``
special tokens     ``skip_special_tokens: false``       ``skip_special_tokens: false``
=================  ==================================  ===================================

**Behind a router.** The same engine talks to a router in front of several servers
(vllm-router, sglang-router, a Kubernetes gateway) as to one server. Every request of one
record carries the record's affinity key (`Completion.session`) in the routers' session
headers (`AFFINITY_HEADERS`): vllm-router's ``consistent_hash`` policy and sglang-router's
``manual`` policy then send all of a record to one server, whose prefix cache holds it.
Health checks, retries and the choice of a server are the router's; a request the router
could not serve is an `EngineError` that `is_server_failure` tells apart from a refused
request (`factorspec_sdk.backends.upstreams` restarts the record on it).

The tokenizer is needed locally (FactorSpec computes the masks): by default the model id when
it is a local folder (``vllm serve /path/to/model``), else pass ``tokenizer=``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from factorspec_sdk.engines.completion import (
    TAKES_TOKENS,
    Completion,
    CompletionReply,
    ConstraintStyle,
    HFTokenizer,
)
from factorspec_sdk.engines.protocol import ChatMessage
from factorspec_sdk.engines.sglang_engine import sampling_params
from factorspec_sdk.errors import EngineError
from factorspec_sdk.tokens.vocab import TokenizerInfo

__all__ = [
    "AFFINITY_HEADERS",
    "DIALECTS",
    "Dialect",
    "OpenAIServerEngine",
    "ServerKind",
    "TokenizerSource",
    "detect_server",
    "is_server_failure",
    "v1_root",
]

ServerKind = Literal["vllm", "sglang"]

AFFINITY_HEADERS = ("X-Session-ID", "X-SMG-Routing-Key")
"""The headers a record's affinity key travels in: vllm-router's ``consistent_hash`` policy
keys on ``X-Session-ID`` (its first choice of key), sglang-router's ``manual`` policy on
``X-SMG-Routing-Key``. A server without a router ignores both."""

_MAX_ERROR_CHARS = 500

Reply = tuple[str, list[int] | None, int]
"""A reply's text, its token ids (None when not returned) and the tokens it generated."""


def v1_root(url: str) -> str:
    """``url`` as an OpenAI API root: ``http://host:8000`` -> ``http://host:8000/v1``."""
    root = url.strip().rstrip("/")
    return root if root.endswith("/v1") else root + "/v1"


def is_server_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) says the server itself failed.

    A refused or dropped connection, a timeout, a 5xx answer and a 429 (a router's queue is
    full) are the server's failures: the same request may succeed later or elsewhere. Any
    other 4xx is the request's own (every server would refuse it).
    """
    import httpx

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, httpx.TransportError):
            return True
        if isinstance(seen, httpx.HTTPStatusError):
            status = seen.response.status_code
            return status >= 500 or status == 429
        seen = seen.__cause__
    return False


def _vllm_body(request: Completion, model: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(request.prompt_ids),
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "skip_special_tokens": False,
        "return_token_ids": True,
    }
    if request.seed is not None:
        body["seed"] = request.seed
    if request.allowed_ids is not None:
        body["allowed_token_ids"] = list(request.allowed_ids)
    elif request.regex is not None:
        body["structured_outputs"] = {"regex": request.regex}
    else:
        body["structured_outputs"] = {"grammar": request.grammar}
    return body


def _vllm_reply(data: Mapping[str, Any]) -> Reply:
    choice = data["choices"][0]
    ids = choice.get("token_ids")
    usage = data.get("usage") or {}
    generated = usage.get("completion_tokens", len(ids or [0]))
    return str(choice["text"]), None if ids is None else [int(t) for t in ids], int(generated)


def _sglang_body(request: Completion, model: str) -> dict[str, Any]:
    return {"input_ids": list(request.prompt_ids), "sampling_params": sampling_params(request)}


def _sglang_reply(data: Mapping[str, Any]) -> Reply:
    ids = data.get("output_ids")
    generated = (data.get("meta_info") or {}).get("completion_tokens", len(ids or [0]))
    return str(data["text"]), None if ids is None else [int(t) for t in ids], int(generated)


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one server family takes a segment request and answers it.

    Attributes:
        kind: ``"vllm"`` or ``"sglang"``.
        styles: constraint styles it supports, preferred first.
        route: the request's path from the server's root (``/v1`` not included).
        body: the JSON body of a request for a model id.
        reply: (text, token ids, tokens generated) from the answer's JSON.
    """

    kind: ServerKind
    styles: tuple[ConstraintStyle, ...]
    route: str
    body: Callable[[Completion, str], dict[str, Any]]
    reply: Callable[[Mapping[str, Any]], Reply]

    def request(self, request: Completion, model: str) -> dict[str, Any]:
        """The JSON body of ``request``.

        Raises:
            EngineError: a constraint style this family does not take.
        """
        if request.allowed_ids is not None and not any(TAKES_TOKENS[s] for s in self.styles):
            raise EngineError(f"a {self.kind} server takes no token constraint")
        return self.body(request, model)


DIALECTS: dict[ServerKind, Dialect] = {
    "vllm": Dialect(
        "vllm", ("tokens", "spans", "regex"), "/v1/completions", _vllm_body, _vllm_reply
    ),
    "sglang": Dialect("sglang", ("regex",), "/generate", _sglang_body, _sglang_reply),
}


class TokenizerSource(Protocol):
    """A local tokenizer: the vocabulary and the chat template (e.g. `HFTokenizer`)."""

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
    """A `CompletionEngine` over a vLLM or SGLang server, or a router in front of several.

    Args:
        base_url: the server's API root, e.g. ``"http://127.0.0.1:8000/v1"``.
        model: the model id to request (default: the server's first model).
        api_key: the server's API key, if it needs one.
        tokenizer: a local folder with the model's tokenizer (default: ``model`` when it is a
            local folder), or a loaded `TokenizerSource` to share.
        server: ``"vllm"``, ``"sglang"`` or ``"auto"`` (from ``/v1/models``' ``owned_by``;
            sglang-router answers ``owned_by: local``, so name ``"sglang"`` behind it).
        constraint: ``"tokens"``, ``"spans"`` (vLLM) or ``"regex"`` (default: the
            server's first style, ``"tokens"`` on vLLM: ``"spans"`` sends grammar segments
            as llguidance Lark grammars, which a vLLM server reads as FactorSpec's masks do
            only with its ``guidance`` structured-output backend, a server-wide setting this
            engine cannot see).
        timeout: seconds per HTTP request.
        max_concurrency: requests in flight at once (the HTTP connections).
        max_retries: times a request that could not connect is tried again (a server
            that answers an error is not asked again: that is the router's, or the
            record's restart, `factorspec_sdk.backends.upstreams`).

    Raises:
        EngineError: the server cannot be reached, it is not a known family, or the
            tokenizer cannot be found.
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
        import httpx

        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.base_url = v1_root(base_url)
        self.root = self.base_url.removesuffix("/v1")
        self.max_concurrency = max_concurrency
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            timeout=timeout,
            headers=headers,
            transport=httpx.HTTPTransport(
                retries=max_retries,
                limits=httpx.Limits(max_connections=max_concurrency),
            ),
        )
        try:
            self._model, owned_by = self._pick_model(model)
            self.dialect = DIALECTS[self._kind(server, owned_by)]
            style = constraint or self.dialect.styles[0]
            if style not in self.dialect.styles:
                raise EngineError(f"a {self.dialect.kind} server takes no {style!r} constraint")
            self._tok = self._tokenizer(tokenizer)
        except BaseException:
            self._http.close()
            raise
        self._style: ConstraintStyle = style
        self._pool = ThreadPoolExecutor(max_concurrency, thread_name_prefix="factorspec-http")
        self._lock = threading.Lock()
        self.requests = 0
        """Requests sent so far."""
        self.http_seconds = 0.0
        """Wall time spent waiting for the server."""
        self.failures = 0
        """Requests the server failed (`is_server_failure`)."""
        self.last_error: str | None = None
        """The last failure's message (None while there was none)."""

    def _pick_model(self, model: str | None) -> tuple[str, str]:
        """(the model id, its ``owned_by``) from ``GET /v1/models``."""
        import httpx

        try:
            answer = self._http.get(self.base_url + "/models")
            answer.raise_for_status()
            models = [m for m in answer.json()["data"] if isinstance(m, dict)]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise EngineError(f"cannot list the models of {self.base_url}: {exc!r}") from exc
        if not models:
            raise EngineError(f"{self.base_url} serves no model")
        chosen = next((m for m in models if m.get("id") == model), None) if model else models[0]
        if chosen is None:
            served = ", ".join(str(m.get("id")) for m in models)
            raise EngineError(f"{self.base_url} does not serve {model!r}; it serves: {served}")
        return str(chosen["id"]), str(chosen.get("owned_by") or "")

    def _kind(self, server: ServerKind | Literal["auto"], owned_by: str) -> ServerKind:
        if server != "auto":
            return server
        found = detect_server(owned_by)
        if found == "factorspec":
            raise EngineError(
                f"{self.base_url} is a FactorSpec server: use Client(base_url=...) without "
                "server=, relations travel as the relation IR"
            )
        if found not in DIALECTS:
            raise EngineError(
                f"cannot tell which server {self.base_url} is (owned_by {owned_by!r}; "
                "sglang-router answers 'local'); pass server='vllm' or 'sglang'"
            )
        return "vllm" if found == "vllm" else "sglang"

    def _tokenizer(self, tokenizer: str | Path | TokenizerSource | None) -> TokenizerSource:
        if tokenizer is not None and not isinstance(tokenizer, (str, Path)):
            return tokenizer
        folder = tokenizer if tokenizer is not None else self._model
        if not Path(folder).is_dir():
            raise EngineError(
                f"FactorSpec needs the model's tokenizer locally; {str(folder)!r} is not a "
                "folder: pass tokenizer='/path/to/model-or-tokenizer-folder'"
            )
        return HFTokenizer(folder)

    @property
    def name(self) -> str:
        """``"vllm-server"`` or ``"sglang-server"``."""
        return f"{self.dialect.kind}-server"

    @property
    def model(self) -> str:
        """The model id requested from the server."""
        return self._model

    @property
    def model_path(self) -> str | None:
        """The local tokenizer folder (None for a tokenizer passed loaded)."""
        folder = getattr(self._tok, "folder", None)
        return None if folder is None else str(folder)

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
        import httpx

        if request.allowed_ids is not None and not TAKES_TOKENS[self._style]:
            raise EngineError("this engine sends regex and grammar constraints only")
        body = self.dialect.request(request, self._model)
        headers = {h: request.session for h in AFFINITY_HEADERS} if request.session else None
        try:
            answer = self._http.post(self.root + self.dialect.route, json=body, headers=headers)
            answer.raise_for_status()
            text, ids, generated = self.dialect.reply(answer.json())
        except (httpx.HTTPError, ValueError, KeyError, TypeError, IndexError) as exc:
            raise self._failed(exc) from exc
        eos = self.tokenizer.eos_ids
        if ids is not None:
            while ids and ids[-1] in eos:
                ids.pop()
        return CompletionReply(text, ids, max(1, generated))

    def _failed(self, exc: Exception) -> EngineError:
        """The `EngineError` for a failed request, counted when the server failed."""
        import httpx

        detail = repr(exc)
        if isinstance(exc, httpx.HTTPStatusError):
            detail = f"{exc.response.status_code} {exc.response.text.strip()}"
        error = EngineError(f"the {self.name} at {self.root} failed: {detail[:_MAX_ERROR_CHARS]}")
        if is_server_failure(exc):
            with self._lock:
                self.failures += 1
                self.last_error = error.message
        return error

    def complete(self, requests: Sequence[Completion]) -> list[CompletionReply]:
        """Send the requests concurrently (the server batches them); replies in order."""
        t0 = time.perf_counter()
        try:
            return list(self._pool.map(self._one, requests))
        finally:
            with self._lock:
                self.requests += len(requests)
                self.http_seconds += time.perf_counter() - t0

    def close(self) -> None:
        """Close the HTTP client and its threads."""
        self._pool.shutdown(wait=False)
        self._http.close()
