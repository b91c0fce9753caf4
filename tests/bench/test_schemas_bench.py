"""``factorspec bench schemas`` on a small fixed slice of JSONSchemaBench-dev.

Runs the command (its worker processes, SmolLM2's tokenizer, no model weights) on the first
schema of every dataset folder (two short ones for Kubernetes, whose first schema makes a
~1,100-token record that takes a minute of CPU), copied into a temporary corpus together
with a hand-made dataset whose schema has a look-ahead ``pattern``: llguidance refuses it,
and the report must count that as llguidance's rejection, not as an error of the run.
Checks the written files, the report's structure and that no record FactorSpec decoded is
invalid.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factorspec_sdk.bench.schemas import LIBRARIES
from factorspec_sdk.bench.schemas_report import FS_DECODER, OUTCOMES
from factorspec_sdk.cli.main import app
from factorspec_sdk.errors import FactorSpecError

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "schemas" / "jsonschemabench-dev"
PICKED = {"Kubernetes": ("kb_1003_Normalized.json", "kb_1022_Normalized.json")}
LOOKAHEAD = {
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "^(?=[A-Z])[A-Z0-9]{3}$"}},
    "required": ["code"],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("llguidance")
    pytest.importorskip("xgrammar")
    pytest.importorskip("transformers")
    if not CORPUS.is_dir():
        pytest.skip(f"the schema corpus is missing: {CORPUS}")
    from factorspec_sdk.bench.schemas import load_hf_tokenizer

    try:
        load_hf_tokenizer()
    except FactorSpecError as exc:
        pytest.skip(f"SmolLM2's tokenizer is not available: {exc}")
    root = tmp_path_factory.mktemp("corpus")
    for folder in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        (root / folder.name).mkdir()
        names = PICKED.get(folder.name) or [sorted(folder.glob("*.json"))[0].name]
        for name in names:
            shutil.copy(folder / name, root / folder.name / name)
    (root / "Handmade").mkdir()
    (root / "Handmade" / "lookahead.json").write_text(json.dumps(LOOKAHEAD))
    return root


def test_bench_schemas_writes_a_report(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["bench", "schemas", str(corpus), "--out", str(out), "--records", "1"]
    )
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} == {"results.json", "results.md", "acceptance.png"}
    data = json.loads((out / "results.json").read_text())
    datasets = sorted(p.name for p in corpus.iterdir())
    assert list(data["summaries"]) == [*datasets, "overall"]
    overall = data["summaries"]["overall"]
    assert overall["schemas"] == len(data["schemas"]) == len(list(corpus.glob("*/*.json")))
    for lib in LIBRARIES:
        assert sum(overall["status"][lib].values()) == overall["schemas"]
        assert overall["status"][lib]["error"] == 0, lib
        assert set(overall["compile_ms"][lib]) == {"median", "p95", "n"}
    for lib in (*LIBRARIES, FS_DECODER):
        assert set(overall["mask_us"][lib]) == {"median", "p99", "n"}
    assert set(overall["records"]) == set(OUTCOMES)
    assert overall["records"]["invalid"] == 0
    assert overall["records"]["error"] == 0
    assert overall["records"]["valid"] >= 1
    assert overall["run_errors"] == 0
    handmade = next(r for r in data["schemas"] if r["dataset"] == "Handmade")
    assert handmade["compile"]["llguidance"]["status"] == "rejected"
    assert "look-around" in handmade["compile"]["llguidance"]["detail"]
    assert data["summaries"]["Handmade"]["status"]["llguidance"]["rejected"] == 1
    report = (out / "results.md").read_text()
    assert "| **overall** |" in report
    assert "factorspec bench schemas" in report
    assert "| overall |" in result.output
