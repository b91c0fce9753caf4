"""Every snippet in the docs and the README is a file under docs_src/ that runs; the docs cover
every error code.

Snippets run in a fresh interpreter (or bash, for ``.sh`` files) in a temporary folder, with
the repository on ``PYTHONPATH``. They import only the package (``factorspec_sdk.domains`` has
the trip and meeting domains), never ``examples/``, which a wheel does not ship. Snippets that
load the real model carry the ``model`` marker; the serving snippets run in
``test_serving_snippets`` against a live ``factorspec serve``, the integration snippets (and
the README's ``from_openai``) in ``test_integration_snippets`` against a scripted-engine server
on loopback. The README shows each snippet's file under a ``<!-- docs_src/... -->`` marker,
and its code blocks must equal those files.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from factorspec_sdk import errors

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DOCS_SRC = ROOT / "docs_src"

NEEDS_MODEL = {
    "getting_started/tutorial001.py",
    "how_it_works/tutorial001.py",
    "engines/tutorial001.py",
    "engines/tutorial005.py",
    "relations/tutorial004.py",
    "relations/tutorial005.py",
    "relations/tutorial006.py",
    "relations/tutorial007.py",
    "relations/tutorial008.py",
    "relations/tutorial009.py",
    "cli/tutorial002.sh",
    "streaming/tutorial001.py",
    "streaming/tutorial002.py",
    "tools/tutorial001.py",
    "readme/tutorial001.py",
}
NEEDS_SERVER = {p.relative_to(DOCS_SRC).as_posix() for p in DOCS_SRC.glob("serving/*.*")}
NEEDS_SCRIPTED_SERVER = {
    p.relative_to(DOCS_SRC).as_posix() for p in DOCS_SRC.glob("integrations/*.py")
} | {"readme/tutorial002.py", "recipes/tutorial004.py", "tools/tutorial002.py"}
# run by tests/engines/test_vllm.py (in-process, on its module's vLLM) and
# tests/engines/test_vllm_server.py (against its module's vllm serve): one vLLM start each
NEEDS_VLLM = {"engines/tutorial003.py"}
NEEDS_VLLM_SERVER = {"engines/tutorial004.py"}
RUN_ELSEWHERE = NEEDS_SERVER | NEEDS_VLLM | NEEDS_VLLM_SERVER | NEEDS_SCRIPTED_SERVER

EXPECT: dict[str, list[str]] = {
    "getting_started/tutorial002.py": ["relations violated", "visits_every_city_once"],
    "relations/tutorial001.py": ["Stay(city='Paris', first_day=1, last_day=3)"],
    "relations/tutorial002.py": ["variables (", "components (", "['Copenhagen']"],
    "relations/tutorial010.py": [
        "True SpecCache(1/16 entries, 1 hits, 1 misses)",
        "the shared default's: False\nTrue",
    ],
    "relations/tutorial003.py": ["for loop", "Basket.all_positive True", "tutorial003.py:"],
    "relations/tutorial004.py": ["lengths ok: True"],
    "errors/tutorial001.py": ["unsatisfiable-spec", "['a_below_b', 'b_below_a']"],
    "errors/tutorial002.py": ["aaaaaaaa\n", "token-budget 10 12"],
    "errors/tutorial003.py": [
        "relation-raises\nTypeError: unsupported operand type(s) for *: 'decimal.Decimal' and",
        "Decimal(str(rules.rate))",
    ],
    "engines/tutorial002.py": ["color='red' go=False", "forward passes for"],
    "cli/tutorial001.sh": ["variables (", "ok: the spec is satisfiable"],
    "cli/tutorial003.sh": ["exit code: 1", "exit code: 2", "--context"],
    "getting_started/tutorial001.py": ["tokens/step"],
    "how_it_works/tutorial001.py": ["tokens certain", "[["],
    "how_it_works/tutorial002.py": ["forward_seconds", "parts add up to the wall: True"],
    "engines/tutorial001.py": ["default model:", "day='Tuesday' start_hour=12 end_hour=14"],
    "engines/tutorial003.py": ["city=", "verify steps"],
    "engines/tutorial004.py": ["vllm-server tokens", "day='Tuesday' start_hour=12 end_hour=14"],
    "engines/tutorial005.py": ["embedded cpu float32 explicit", "day='Tuesday' start_hour=12"],
    "cli/tutorial002.sh": ['"stays": [', "stats:"],
    "serving/tutorial001.sh": ["SmolLM2-135M-Instruct", '"finish_reason":"stop"', "start_hour"],
    "serving/tutorial002.sh": ['"finish_reason":"stop"', "Copenhagen"],
    "serving/tutorial003.py": ["stop", "Day 1-5: Copenhagen"],
    "client/tutorial001.py": ["['Ada', 'Bo']\nunsatisfiable-spec\n['Cy']"],
    "client/tutorial002.py": ["[4]"],
    "types/tutorial001.py": [
        "nights: writer",
        "check_in: writer",
        "arrives: grammar",
        "rating: grammar",
    ],
    "types/tutorial002.py": ["True True"],
    "types/tutorial003.py": [
        "None 10\noptional key written: rows\nlist bound: rows\nint digits: rows[]\n"
    ],
    "relations/tutorial005.py": ["2027-01-08 to 2027-01-12", "dates ok: True"],
    "relations/tutorial006.py": [" 2026-12-07 ", "length: 1:30:00", "in hours: True"],
    "relations/tutorial007.py": ["Escalate(kind='escalate', team='shipping')"],
    "relations/tutorial008.py": [" True\nconfirmed: True\n", "verify steps"],
    "relations/tutorial009.py": ["'rent': ", "sums to 100: True"],
    "integrations/tutorial001.py": [" True\nflights="],
    "integrations/tutorial002.py": ['"city": "'],
    "integrations/tutorial003.py": ["('Paris', 3)", "True stop"],
    "integrations/tutorial004.py": ["[100, 100, 100]"],
    "integrations/tutorial005.py": ["PartialSplit None None None", "Split ", "[90"],
    "streaming/tutorial001.py": ["stays so far: [('Stockholm', 1, 5)", "final: [('Stockholm'"],
    "tools/tutorial001.py": ["GetWeather city='Rome'"],
    "tools/tutorial002.py": [
        "pydantic_function_tool True",
        "refused: relations_not_sent",
        "function_tool True",
    ],
    "streaming/tutorial002.py": ["relations: 22 values", "stays[2].first_day: relations"],
    "readme/tutorial001.py": ["stays=[Stay(city="],
    "readme/tutorial002.py": ["[('Copenhagen', 1, 4), ('Split', 4, 5), ('Berlin', 5, 9)]"],
    "recipes/tutorial001.py": ["2026-12-07 12:15:00 to 2026-12-07 13:00:00"],
    "recipes/tutorial002.py": [" VAT\ntotal: ", "checked: True"],
    "recipes/tutorial003.py": [
        "Tolerance at 0.25: compiles\n"
        "Tolerance at 0.2: relation-definition: float comparison decided by rounding\n"
        "Equal at 0.2: relation-definition: float comparison decided by rounding\n"
        "Mixed at 0.2: relation-raises: Decimal * float\n"
    ],
    "recipes/tutorial004.py": [
        "Client: 3200\nfrom_openai: 3200\ncreate: 3200\n",
        "parse: Value error, relation 'spends_the_income' needs a context",
    ],
    "recipes/tutorial005.py": ["pizzas=2 drinks=1\nvalid: True\npizzas=5 drinks=0\n"],
}


def snippet_files() -> list[str]:
    files = sorted(
        p.relative_to(DOCS_SRC).as_posix()
        for p in DOCS_SRC.rglob("*")
        if p.suffix in (".py", ".sh") and "__pycache__" not in p.parts
    )
    return [f for f in files if f not in RUN_ELSEWHERE]


def params() -> list[object]:
    out: list[object] = []
    for f in snippet_files():
        if f in NEEDS_MODEL:
            out.append(pytest.param(f, marks=pytest.mark.model))
        else:
            out.append(f)
    return out


def run_snippet(rel: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    path = DOCS_SRC / rel
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("HF_HUB_OFFLINE", "1")
    command = [sys.executable, str(path)] if path.suffix == ".py" else ["bash", str(path)]
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize("rel", params())
def test_snippet_runs(rel: str, tmp_path: Path) -> None:
    proc = run_snippet(rel, tmp_path)
    output = proc.stdout + proc.stderr
    if rel.endswith(".py"):
        assert proc.returncode == 0, output[-3000:]
    for expected in EXPECT.get(rel, []):
        assert expected in output, f"{rel}: {expected!r} not in output:\n{output[-3000:]}"


def test_every_snippet_is_included_and_every_include_exists() -> None:
    included: set[str] = {ref for ref, _, _ in readme_blocks() if ref}
    for page in DOCS.rglob("*.md"):
        for ref in re.findall(r'--8<-- "([^"]+)"', page.read_text()):
            assert (ROOT / ref).is_file(), f"{page.name} includes missing {ref}"
            included.add(ref)
    for rel in snippet_files() + sorted(RUN_ELSEWHERE):
        assert f"docs_src/{rel}" in included, f"docs_src/{rel} is not included in any page"


README = ROOT / "README.md"
_FENCE = re.compile(r"^(?:<!-- (docs_src/\S+) -->\n)?```(\w*)\n(.*?)^```$", re.M | re.S)
_RUN = {"python", "bash", "sh"}
"""Fenced languages that are code to run; ``console`` blocks are shell sessions (installing,
``make``, a server that runs until stopped) whose ``factorspec`` commands must parse."""


def readme_blocks() -> list[tuple[str | None, str, str]]:
    """(marker file or None, language, body) of every fenced block of the README."""
    return [(m[1], m[2], m[3]) for m in _FENCE.finditer(README.read_text())]


def test_readme_code_blocks_are_the_snippet_files() -> None:
    blocks = readme_blocks()
    assert [lang for _, lang, _ in blocks if lang in _RUN], "no code block found in README.md"
    for ref, lang, body in blocks:
        if lang not in _RUN:
            continue
        assert ref is not None, (
            f"a ```{lang} block of README.md has no <!-- docs_src/... -->:\n{body}"
        )
        assert (ROOT / ref).is_file(), f"README.md shows {ref}, which does not exist"
        assert body == (ROOT / ref).read_text(), f"README.md's copy of {ref} differs from the file"


def test_no_snippet_imports_examples() -> None:
    """``examples/`` is not in the wheel: a snippet that needs it fails for a pip user."""
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in DOCS_SRC.rglob("*.*")}
    texts |= {f"README.md ({lang})": body for _, lang, body in readme_blocks()}
    for page in DOCS.rglob("*.md"):  # the console blocks of the pages
        for _, lang, body in _FENCE.findall(page.read_text()):
            texts[f"{page.relative_to(ROOT)} ({lang})"] = body
    wrong = [where for where, text in texts.items() if re.search(r"\bexamples[./:]\w", text)]
    assert not wrong, f"these snippets use examples/ (use factorspec_sdk.domains): {wrong}"


def console_commands() -> list[tuple[str, list[str]]]:
    """(where, argv) of every ``$ factorspec ...`` line in a console block of the docs."""
    import shlex

    pages = [README, *sorted(DOCS.rglob("*.md"))]
    found = []
    for page in pages:
        for _, lang, body in _FENCE.findall(page.read_text()):
            if lang != "console":
                continue
            for line in body.replace("\\\n", " ").splitlines():
                if line.startswith("$ factorspec "):
                    found.append((page.name, shlex.split(line[2:], comments=True)[1:]))
    return found


@pytest.mark.parametrize(
    ("where", "argv"),
    [pytest.param(w, argv, id=f"{w}: {' '.join(argv)}") for w, argv in console_commands()],
)
def test_console_commands_parse(where: str, argv: list[str]) -> None:
    """Every option a shown ``factorspec`` command uses exists (``--help`` after them)."""
    from typer.testing import CliRunner

    from factorspec_sdk.cli.main import app

    result = CliRunner().invoke(app, [*argv, "--help"])
    assert result.exit_code == 0, f"{where}: factorspec {' '.join(argv)}\n{result.output}"


def test_expectations_name_real_snippets() -> None:
    known = set(snippet_files()) | RUN_ELSEWHERE
    assert set(EXPECT) <= known
    assert known >= NEEDS_MODEL


def test_errors_page_has_a_heading_per_code() -> None:
    page = (DOCS / "errors.md").read_text()
    headings = set(re.findall(r"^## (\S+)$", page, flags=re.MULTILINE))
    codes = {getattr(errors, name).code for name in errors.__all__}
    assert codes <= headings, f"missing headings: {sorted(codes - headings)}"


def test_nav_names_every_page() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in DOCS.rglob("*.md"):
        rel = page.relative_to(DOCS).as_posix()
        assert rel in nav, f"{rel} is not in the mkdocs.yml nav"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.model
def test_serving_snippets(tmp_path: Path) -> None:
    import time
    import urllib.request

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "factorspec_sdk.cli.main", "serve", "--port", str(port)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(1)
        os.environ["FACTORSPEC_URL"] = url
        try:
            outputs = {rel: run_snippet(rel, tmp_path) for rel in sorted(NEEDS_SERVER)}
        finally:
            del os.environ["FACTORSPEC_URL"]
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()
    for rel, proc in outputs.items():
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"{rel}:\n{output[-3000:]}"
        for expected in EXPECT.get(rel, []):
            assert expected in output, f"{rel}: {expected!r} not in output:\n{output[-3000:]}"


@pytest.mark.parametrize("rel", sorted(NEEDS_SCRIPTED_SERVER))
def test_integration_snippets(rel: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from factorspec_sdk.server import create_app
    from tests.server.helpers import MODEL, running, scripted_engine

    with running(create_app(scripted_engine(), model_name=MODEL)) as url:
        monkeypatch.setenv("FACTORSPEC_URL", url)
        proc = run_snippet(rel, tmp_path, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    for expected in EXPECT.get(rel, []):
        assert expected in output, f"{rel}: {expected!r} not in output:\n{output[-3000:]}"
