"""A scripted vLLM-like OpenAI server on loopback: the upstream of the upstream-pool tests.

`ScriptedUpstream` answers ``GET /v1/models`` (``owned_by: vllm``), ``GET /health`` and
``POST /v1/completions`` with token-id prompts and vLLM's ``allowed_token_ids`` and
``return_token_ids``, the way ``vllm serve`` does, from a `ScriptedEngine`'s logits (masked
greedy, or seeded sampling), after ``delay_s``. It logs every completion prompt it serves, can
die on its N-th
completion request (answers that one with a 500 and closes its port: the front sees a
dead server) and can be made to refuse everything (``broken``) and healed again.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import uvicorn  # noqa: TID253
from fastapi import FastAPI, Request  # noqa: TID253
from fastapi.responses import JSONResponse  # noqa: TID253

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
    """One scripted vLLM-like server; `start` serves it on a free loopback port."""

    def __init__(
        self, engine: ScriptedEngine, *, die_at: int | None = None, delay_s: float = 0.0
    ) -> None:
        self.engine = engine
        self.die_at = die_at
        self.delay_s = delay_s
        self.broken = False
        self.dead = False
        self.prompts: list[list[int]] = []
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
            card = {"id": UPSTREAM_MODEL, "object": "model", "created": 0, "owned_by": "vllm"}
            return self._refusal() or JSONResponse({"object": "list", "data": [card]})

        @app.post("/v1/completions")
        async def completions(request: Request) -> JSONResponse:
            refusal = self._refusal()
            if refusal is not None:
                return refusal
            body = await request.json()
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            with self._lock:
                self.prompts.append(list(body["prompt"]))
                served = len(self.prompts)
            if self.die_at is not None and served >= self.die_at:
                self.dead = True
                assert self._server is not None
                self._server.should_exit = True  # the port closes after this answer
                return JSONResponse({"error": {"message": "upstream crashed"}}, 500)
            return JSONResponse(self._complete(body))

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
