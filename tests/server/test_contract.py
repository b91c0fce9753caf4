"""The OpenAPI contract, checked by schemathesis against a live `factorspec serve`.

A real ``factorspec serve --engine scripted`` child process on 127.0.0.1, and the
schemathesis command line with every check (``schemathesis.toml`` at the repository root
adds 422 to the answers valid data may get, and removes 5xx). By default a short run with a
fixed seed (``make test``); ``FACTORSPEC_CONTRACT_EXAMPLES=N`` runs N cases per operation
with a random seed (``make fuzz``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from factorspec_sdk.server import create_app
from factorspec_sdk.server.app import ServerOptions
from factorspec_sdk.server.process import ServerProcess
from tests.server.helpers import MODEL, scripted_engine
from tests.server.schemathesis_hooks import LIMIT_S

ROOT = Path(__file__).resolve().parents[2]
_N = os.environ.get("FACTORSPEC_CONTRACT_EXAMPLES")
EXAMPLES = int(_N) if _N else 20
SEED = None if _N else 20261201


def schemathesis() -> str:
    exe = Path(sys.executable).with_name("schemathesis")
    found = str(exe) if exe.exists() else shutil.which("schemathesis")
    if found is None:
        pytest.fail("schemathesis is not installed (pip install -e '.[dev]')")
    return found


@pytest.mark.parametrize("api_key", [None, "k-contract"])
def test_schemathesis_finds_no_failure(tmp_path: Path, api_key: str | None) -> None:
    log = tmp_path / "server.log"
    # generations end (a 422 timeout_reached at worst) within schemathesis's 30 s response
    # limit; the hooks cap the limits the generated requests give themselves at the same 6 s
    args: tuple[str, ...] = ("--request-timeout", str(LIMIT_S))
    if api_key:
        args += ("--api-key", api_key)
    examples = EXAMPLES if api_key is None else max(EXAMPLES // 4, 5)
    with ServerProcess("scripted", model_name="contract", log=log, args=args) as server:
        cmd = [
            schemathesis(),
            "--config-file",
            str(ROOT / "schemathesis.toml"),
            "--no-color",
            "run",
            server.url + "/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            str(examples),
            "--workers",
            "1",
            "--request-timeout",
            "30",
            "--generation-database",
            "none",
            "--report-dir",
            str(tmp_path / "report"),
        ]
        if SEED is not None:
            cmd += ["--seed", str(SEED)]
        if api_key:
            cmd += ["--header", f"Authorization: Bearer {api_key}"]
        env = {
            **os.environ,
            "SCHEMATHESIS_HOOKS": "tests.server.schemathesis_hooks",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        run = subprocess.run(
            cmd, capture_output=True, text=True, timeout=3600, cwd=tmp_path, env=env
        )
        assert httpx.get(server.url + "/health").json()["status"] == "ok"
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-8000:]
    m = re.search(r"(\d+) generated, (\d+) passed", out)
    assert m is not None, out[-3000:]
    generated, passed = int(m[1]), int(m[2])
    print(f"schemathesis: {generated} cases, {passed} passed")
    assert generated == passed and generated >= 6 * examples
    codes = re.findall(r'" (\d{3}) ', log.read_text())
    assert "200" in codes and not [c for c in codes if c.startswith("5")]
    assert ("401" in codes) == (api_key is not None)  # schemathesis tried without the key


def test_document_names_every_route_status_and_body() -> None:
    app = create_app(scripted_engine(), model_name=MODEL, options=ServerOptions(api_key="k"))
    doc = app.openapi()
    paths = doc["paths"]
    chat = paths["/v1/chat/completions"]["post"]
    assert chat["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ChatRequest"
    }
    assert sorted(chat["responses"]) == [
        "200",
        "400",
        "401",
        "404",
        "413",
        "422",
        "429",
        "500",
        "503",
    ]
    assert set(chat["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    schemas = doc["components"]["schemas"]
    assert schemas["ChatRequest"]["properties"]["model"]["enum"] == [MODEL]
    assert schemas["ChatRequest"]["properties"]["messages"]["minItems"] == 1
    ext = schemas["FactorSpecExtension"]["properties"]["ir"]["anyOf"][0]
    assert ext == {"$ref": "#/components/schemas/RelationIR"}
    assert chat["security"] == [{"bearer": []}] and "security" not in doc
    assert "401" not in paths["/v1/models"]["get"]["responses"]  # open, as the server is
    metrics = paths["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain; version=0.0.4; charset=utf-8"]
    assert set(paths) == {
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/models",
        "/v1/models/{model_id}",
        "/health",
        "/metrics",
    }
