"""The built wheel works on its own: check, generate, bench and serve from a fresh venv.

The wheel is built from a copy of the source (an in-tree build would leave ``build/`` and
``*.egg-info`` in the checkout, and a stale ``build/lib`` could slip deleted modules into the
wheel), installed with ``--no-deps --no-index`` into a new venv outside the checkout, and
given its dependencies by a ``.pth`` file naming this interpreter's site-packages. A plain
path line in a ``.pth`` file does not process that folder's own ``.pth`` files, so the
checkout's editable install does not leak in: every command below runs the installed copy,
from a temporary folder, with the scripted engine (no model).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

from factorspec_sdk.domains.trip import Itinerary, generate_problem, prompt_for
from factorspec_sdk.ir import to_ir

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.wheel

_NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "site",
    "*.egg-info",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    "bench-results",
)


class Venv:
    """A fresh venv with the wheel installed, and a working folder outside the checkout."""

    def __init__(self, root: Path, work: Path) -> None:
        self.root = root
        self.work = work
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        self.env.update(
            {
                "PATH": f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                "HF_HUB_OFFLINE": "1",
                "PIP_NO_INDEX": "1",
                "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            }
        )

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run a program of the venv (``factorspec``, ``python``) in the working folder."""
        return subprocess.run(
            [str(self.root / "bin" / args[0]), *args[1:]],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """Start a program of the venv in the working folder."""
        return subprocess.Popen(
            [str(self.root / "bin" / args[0]), *args[1:]],
            cwd=self.work,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    base = tmp_path_factory.mktemp("wheel")
    assert not base.resolve().is_relative_to(ROOT)
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=_NOT_SOURCE)
    dist = base / "dist"
    pip_wheel = ["pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist)]
    subprocess.run(
        [sys.executable, "-m", *pip_wheel, str(src)],
        check=True,
        capture_output=True,
        env={**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        timeout=300,
    )
    (wheel,) = dist.glob("factorspec_sdk-*.whl")
    root = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    work = base / "work"
    work.mkdir()
    env = Venv(root, work)
    _ok(env.run("pip", "install", "--no-deps", "--no-index", "-q", str(wheel)))
    site = _ok(env.run("python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
    deps = sysconfig.get_paths()["purelib"]  # this interpreter's site-packages: the dependencies
    Path(site.strip(), "factorspec_test_deps.pth").write_text(deps + "\n")
    return env


def test_the_installed_package_is_the_wheel(venv: Venv) -> None:
    code = (
        "import importlib.util, factorspec_sdk, factorspec_sdk.cli\n"
        "print(factorspec_sdk.__file__)\n"
        "print(factorspec_sdk.cli.__file__)\n"
        "print(importlib.util.find_spec('examples'))\n"
        "print(importlib.util.find_spec('cli'))\n"
    )
    sdk, cli, examples, top_cli = _ok(venv.run("python", "-c", code)).splitlines()
    for path in (sdk, cli):
        assert Path(path).resolve().is_relative_to(venv.root.resolve()), path
        assert not Path(path).resolve().is_relative_to(ROOT), path
    assert examples == "None"  # examples/ is not shipped, and the checkout is not on the path
    assert top_cli == "None"  # the cli lives in the package: no top-level `cli` to collide


def test_the_wheel_has_one_top_level_package(venv: Venv) -> None:
    """Only ``factorspec_sdk`` is installed at the top (a top-level ``cli`` collides)."""
    code = (
        "from importlib.metadata import distribution\n"
        "d = distribution('factorspec-sdk')\n"
        "print(' '.join((d.read_text('top_level.txt') or '').split()))\n"
        "print(sorted({f.parts[0] for f in d.files if f.suffix == '.py'}))\n"
        "print(d.entry_points['factorspec'].value)\n"
    )
    top_level, py_tops, entry = _ok(venv.run("python", "-c", code)).splitlines()
    assert top_level == "factorspec_sdk"
    assert py_tops == "['factorspec_sdk']"
    assert entry == "factorspec_sdk.cli.main:main"


def test_check_and_generate(venv: Venv) -> None:
    trip = generate_problem(3, seed=1)
    (venv.work / "trip.json").write_text(trip.model_dump_json())
    (venv.work / "prompt.txt").write_text(prompt_for(trip))
    target = "factorspec_sdk.domains.trip:Itinerary"
    out = _ok(venv.run("factorspec", "check", target, "--context", "trip.json"))
    assert "ok: the spec is satisfiable" in out
    out = _ok(
        venv.run(
            "factorspec",
            "generate",
            target,
            "--engine",
            "scripted",
            "--prompt-file",
            "prompt.txt",
            "--context",
            "trip.json",
        )
    )
    plan = Itinerary.model_validate(json.loads(out), context=trip)
    assert [s.city for s in plan.stays] == [c for c, _ in trip.golden]  # the only valid plan


def test_bench_trip(venv: Venv) -> None:
    out = _ok(
        venv.run("factorspec", "bench", "trip", "--n", "1", "--engine", "scripted", "--out", "b")
    )
    assert "# Trip-planning benchmark" in out
    data = json.loads((venv.work / "b" / "results.json").read_text())
    assert data["config"]["complete"] is True
    by_method = {r["method"]: r for r in data["records"]}
    assert not [r["error"] for r in data["records"] if r["error"]]
    assert by_method["factorspec"]["valid"] and by_method["factorspec-certain"]["valid"]
    assert (venv.work / "b" / "tokens_per_step.png").is_file()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_answers_a_request(venv: Venv) -> None:
    port = _free_port()
    server = venv.popen("factorspec", "serve", "--engine", "scripted", "--port", str(port))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=5) as r:
                    model = json.loads(r.read())["data"][0]["id"]
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    out = server.stdout.read() if server.stdout else ""
                    pytest.fail(f"factorspec serve did not start (exit {server.poll()}):\n{out}")
                time.sleep(0.3)
        trip = generate_problem(4, seed=2)
        body = {
            "model": model,
            "messages": [{"role": "user", "content": prompt_for(trip)}],
            "factorspec": {"ir": to_ir(Itinerary, trip)},
        }
        request = urllib.request.Request(
            url + "/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as r:
            answer = json.loads(r.read())
        choice = answer["choices"][0]
        assert choice["finish_reason"] == "stop"
        Itinerary.model_validate_json(choice["message"]["content"], context=trip)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.stdout:
            server.stdout.close()


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("cli/tutorial001.sh", "ok: the spec is satisfiable"),
        ("cli/tutorial003.sh", "exit code: 2"),
        ("getting_started/tutorial002.py", "relations violated"),
        ("relations/tutorial002.py", "components ("),
    ],
)
def test_docs_snippets_run_from_the_wheel(venv: Venv, snippet: str, expected: str) -> None:
    """A docs snippet that needs no model runs as written from a pip install (no examples/)."""
    path = ROOT / "docs_src" / snippet
    program = ("python", str(path)) if path.suffix == ".py" else ("bash", str(path))
    proc = subprocess.run(
        [shutil.which(program[0], path=venv.env["PATH"]) or program[0], program[1]],
        cwd=venv.work,
        env=venv.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert path.suffix == ".sh" or proc.returncode == 0, output[-3000:]
    assert expected in output, output[-3000:]
