"""Run a real uvicorn server on 127.0.0.1 in a thread, for the server tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import numpy.typing as npt
import uvicorn  # noqa: TID253
from fastapi import FastAPI  # noqa: TID253
from pydantic import BaseModel, Field

from factorspec_sdk.engines.scripted import ScriptedEngine
from tests.helpers import tiny_tokenizer

MODEL = "scripted-test"


def scripted_engine(seed: int = 2) -> ScriptedEngine:
    return ScriptedEngine.random(tiny_tokenizer(), seed=seed, temperature_scale=2.0)


class Slow(BaseModel):
    """Twelve free strings: long enough for `slow_engine` to outlast a 0.3 s timeout."""

    notes: list[str] = Field(min_length=12, max_length=12)


def slow_engine() -> ScriptedEngine:
    """A scripted engine that sleeps 2 ms per forward."""
    tok = tiny_tokenizer()
    base = ScriptedEngine.random(tok, seed=3, temperature_scale=0.5)
    fn = base._logits_fn

    def logits(prefix: Sequence[int]) -> npt.NDArray[np.floating]:
        time.sleep(0.002)
        return fn(prefix)

    return ScriptedEngine(tok, logits)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running(app: FastAPI) -> Iterator[str]:
    """Serve ``app`` on a free loopback port; yields the base URL (``http://127.0.0.1:N``)."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
