"""`import factorspec_sdk` must stay light: no torch, transformers, vLLM, z3, server or cli."""

import subprocess
import sys

HEAVY = [
    "torch",
    "transformers",
    "vllm",
    "sglang",
    "z3",
    "fastapi",
    "uvicorn",
    "openai",
    "typer",
    "factorspec_sdk.cli",
]


def test_import_is_light() -> None:
    code = (
        "import sys, factorspec_sdk, factorspec_sdk.client\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"import factorspec_sdk pulled in: {out}"


def test_public_surface() -> None:
    import factorspec_sdk

    for name in factorspec_sdk.__all__:
        assert hasattr(factorspec_sdk, name), name
    assert factorspec_sdk.__all__ == sorted(factorspec_sdk.__all__)
