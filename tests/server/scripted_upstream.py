"""A scripted vLLM- or SGLang-like server on loopback: the engine server of the upstream tests.

`ScriptedUpstream` answers ``GET /v1/models`` (``owned_by: vllm`` or ``sglang``), ``GET
/health`` and ``GET /metrics`` and, as ``flavor`` says,

* ``"vllm"``: ``POST /v1/completions`` with token-id prompts and vLLM's ``allowed_token_ids``
  and ``return_token_ids``, the way ``vllm serve`` does, from a `ScriptedEngine`'s logits
  (masked greedy, or seeded sampling);
* ``"sglang"``: ``POST /generate`` (SGLang's native API: ``input_ids`` and
  ``sampling_params.regex``), for the alternations FactorSpec sends at a choice point
  (``(a|b|c)``), picking the alternative whose first token the engine scores highest;

after ``delay_s``. It keeps a prefix cache as vLLM counts it: each request's prompt is a
query of as many tokens, and a hit for as many leading tokens as a prompt or reply it served
before shares (``vllm:prefix_cache_queries_total`` and ``vllm:prefix_cache_hits_total`` on
``/metrics``). It logs every prompt, body and affinity header it serves, can die on its N-th
request (answers that one with a 500 and closes its port: the front sees a dead server),
fail given requests alone (a 500 each, ``fail_at``) and be made to refuse everything
(``broken``) and healed again.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import uvicorn  # noqa: TID253
from fastapi import FastAPI, Request  # noqa: TID253
from fastapi.responses import JSONResponse, PlainTextResponse  # noqa: TID253

from factorspec_sdk.engines.protocol import ChatMessage
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.tokens.vocab import TokenizerInfo
from tests.server.helpers import free_port

UPSTREAM_MODEL = "scripted-upstream"


class ScriptedTokenizer:
    """A `TokenizerSource` over a scripted engine's vocabulary and chat template."""

    def __init__(self, engine: ScriptedEngine) -> None:
        self.engine = engine

    @property
    def info(self) -> TokenizerInfo:
        return self.engine.tokenizer

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        return self.engine.apply_chat_template(messages)


class ScriptedUpstream:
    """One scripted engine server; `start` serves it on a free loopback port."""

    def __init__(
        self,
        engine: ScriptedEngine,
        *,
        die_at: int | None = None,
        fail_at: Sequence[int] = (),
        delay_s: float = 0.0,
        flavor: Literal["vllm", "sglang"] = "vllm",
    ) -> None:
        self.engine = engine
        self.die_at = die_at
        self.fail_at = set(fail_at)
        self.delay_s = delay_s
        self.flavor = flavor
        self.broken = False
        self.dead = False
        self.prompts: list[list[int]] = []
        self.bodies: list[dict[str, Any]] = []
        self.sessions: list[str | None] = []
        self.cache_queries = 0
        self.cache_hits = 0
        self._cache: dict[int, Any] = {}  # a trie of every sequence served
        self._lock = threading.Lock()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifetime

    def start(self) -> ScriptedUpstream:
        config = uvicorn.Config(
            self.app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the scripted upstream did not start")
            time.sleep(0.02)
        return self

    @property
    def root(self) -> str:
        """The server's root URL (no ``/v1``), as routers take it."""
        return self.url.removesuffix("/v1")

    def kill(self) -> None:
        """Stop serving and wait until the port is closed."""
        self.dead = True
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(20)

    # ------------------------------------------------------------------ the app

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/health")
        def health() -> JSONResponse:
            return self._refusal() or JSONResponse({})

        @app.get("/v1/models")
        def models() -> JSONResponse:
            card = {
                "id": UPSTREAM_MODEL,
                "object": "model",
                "created": 0,
                "owned_by": self.flavor,
            }
            return self._refusal() or JSONResponse({"object": "list", "data": [card]})

        @app.get("/metrics")
        def metrics() -> PlainTextResponse:
            labels = f'{{engine="0",model_name="{UPSTREAM_MODEL}"}}'
            return PlainTextResponse(
                f"vllm:prefix_cache_queries_total{labels} {self.cache_queries}\n"
                f"vllm:prefix_cache_hits_total{labels} {self.cache_hits}\n"
            )

        async def serve(request: Request, answer: Any) -> JSONResponse:
            refusal = self._refusal()
            if refusal is not None:
                return refusal
            body = await request.json()
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            prompt = body["prompt"] if "prompt" in body else body["input_ids"]
            with self._lock:
                self.prompts.append(list(prompt))
                self.bodies.append(body)
                self.sessions.append(
                    request.headers.get("x-session-id") or request.headers.get("x-smg-routing-key")
                )
                served = len(self.prompts)
            if self.die_at is not None and served >= self.die_at:
                self.dead = True
                assert self._server is not None
                self._server.should_exit = True  # the port closes after this answer
                return JSONResponse({"error": {"message": "upstream crashed"}}, 500)
            if served in self.fail_at:
                return JSONResponse({"error": {"message": "upstream hiccup"}}, 500)
            return JSONResponse(answer(body))

        if self.flavor == "vllm":

            @app.post("/v1/completions")
            async def completions(request: Request) -> JSONResponse:
                return await serve(request, self._complete)

        else:

            @app.post("/generate")
            async def generate(request: Request) -> JSONResponse:
                return await serve(request, self._generate)

        return app

    def _refusal(self) -> JSONResponse | None:
        if self.dead:
            return JSONResponse({"error": {"message": "upstream is dead"}}, 503)
        if self.broken:
            return JSONResponse({"error": {"message": "upstream is broken"}}, 503)
        return None

    def _complete(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = [int(t) for t in body["prompt"]]
        allowed = body.get("allowed_token_ids")
        if allowed is None or not prompt:
            raise ValueError("the scripted upstream takes token prompts with allowed_token_ids")
        temperature = float(body.get("temperature") or 0.0)
        rng = np.random.default_rng(body.get("seed"))
        eos = set(self.engine.tokenizer.eos_ids)
        out: list[int] = []
        with self._lock:
            seq = self.engine.new_sequence(prompt[:-1])
            try:
                new = prompt[-1:]
                for _ in range(int(body.get("max_tokens") or 1)):
                    row = self.engine.extend([(seq, new)])[0][-1]
                    token = self._pick(row, allowed, temperature, rng)
                    out.append(token)
                    if token in eos:
                        break
                    new = [token]
            finally:
                self.engine.release(seq)
        with self._lock:
            self._cached(prompt, out)
        text_ids = [t for t in out if t not in eos]
        text = self.engine.tokenizer.decode(text_ids).decode("utf-8", errors="replace")
        finish = "stop" if out and out[-1] in eos else "length"
        return {
            "id": f"cmpl-{len(self.prompts)}",
            "object": "text_completion",
            "created": 0,
            "model": UPSTREAM_MODEL,
            "choices": [
                {
                    "index": 0,
                    "text": text,
                    "finish_reason": finish,
                    "logprobs": None,
                    "token_ids": out,
                }
            ],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(out),
                "total_tokens": len(prompt) + len(out),
            },
        }

    @staticmethod
    def _pick(
        row: np.ndarray[Any, Any], allowed: list[int], temperature: float, rng: np.random.Generator
    ) -> int:
        ids = np.asarray(allowed, dtype=np.int64)
        logits = row[ids].astype(np.float64)
        if temperature <= 0:
            return int(ids[int(np.argmax(logits))])
        p = np.exp((logits - logits.max()) / temperature)
        return int(rng.choice(ids, p=p / p.sum()))

    def _generate(self, body: dict[str, Any]) -> dict[str, Any]:
        """SGLang's ``/generate`` for an alternation regex: the alternative scored highest."""
        prompt = [int(t) for t in body["input_ids"]]
        params = body["sampling_params"]
        regex = params["regex"]
        tok = self.engine.tokenizer
        choices = [c for c in _alternatives(regex) if c and re.fullmatch(regex, c, flags=re.DOTALL)]
        if not choices:
            raise ValueError(f"the scripted SGLang upstream answers alternations, not {regex!r}")
        encoded = [tok.encode(c) for c in choices]
        with self._lock:
            seq = self.engine.new_sequence(prompt[:-1])
            try:
                row = self.engine.extend([(seq, prompt[-1:])])[0][-1]
            finally:
                self.engine.release(seq)
        best = max(range(len(choices)), key=lambda i: (float(row[encoded[i][0]]), -i))
        out = encoded[best][: int(params["max_new_tokens"])]
        with self._lock:
            self._cached(prompt, out)
        return {
            "text": tok.decode(out).decode("utf-8", errors="replace"),
            "output_ids": out,
            "meta_info": {
                "id": f"gen-{len(self.prompts)}",
                "prompt_tokens": len(prompt),
                "completion_tokens": len(out),
                "finish_reason": {"type": "length"},
            },
        }

    def _cached(self, prompt: list[int], out: list[int]) -> None:
        """Count the prompt's prefix cache query and hits; cache prompt and reply (locked)."""
        node = self._cache
        hit = 0
        for token in prompt:
            if token not in node:
                break
            node = node[token]
            hit += 1
        self.cache_queries += len(prompt)
        self.cache_hits += hit
        node = self._cache
        for token in [*prompt, *out]:
            node = node.setdefault(token, {})


def _alternatives(regex: str) -> list[str]:
    """The texts of ``(a|b|c)`` as `factorspec_sdk.engines.completion.regex_alternatives`
    writes it (escapes undone)."""
    if not (regex.startswith("(") and regex.endswith(")")):
        return []
    texts, text, chars = [], "", iter(regex[1:-1])
    for ch in chars:
        if ch == "\\":
            nxt = next(chars)
            text += chr(int(next(chars) + next(chars), 16)) if nxt == "x" else nxt
        elif ch == "|":
            texts.append(text)
            text = ""
        else:
            text += ch
    return [*texts, text]
