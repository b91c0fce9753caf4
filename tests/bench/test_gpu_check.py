"""The GPU check script's parts that run on CPU (the script itself needs a GPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from factorspec_sdk import Client
from factorspec_sdk.domains.trip import Itinerary, evaluate, generate_problem, prompt_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.model
def test_the_tiny_model_decodes_valid_records(tmp_path: Path) -> None:
    from factorspec_sdk.engines.embedded import EmbeddedEngine
    from factorspec_sdk.engines.model_store import default_model_path
    from factorspec_sdk.engines.torch_setup import random_llama

    folder = random_llama(str(default_model_path()), tmp_path / "tiny")
    client = Client(EmbeddedEngine(folder, device="cpu", dtype="float32"))
    trip = generate_problem(4, 1, unique=False)
    result = client.generate(Itinerary, prompt_for(trip), context=trip, return_result=True)
    assert evaluate(trip, result.text, Itinerary).valid


def test_the_script_needs_a_model_argument() -> None:
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "factorspec_sdk.bench.gpu_check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "--model" in proc.stderr
