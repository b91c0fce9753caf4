"""Session-scoped engines for the engine tests (the real SmolLM2 loads once per session)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from factorspec_sdk.engines.embedded import EmbeddedEngine


@pytest.fixture(scope="session")
def embedded_engine() -> Iterator[EmbeddedEngine]:
    """The default embedded engine (SmolLM2-135M-Instruct, bf16 on CPU), as users get it."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from factorspec_sdk.engines.embedded import EmbeddedEngine

    yield EmbeddedEngine()


@pytest.fixture(scope="session")
def embedded_engine_fp32() -> Iterator[EmbeddedEngine]:
    """The default model in float32, for logits comparisons that must agree to ~1e-4."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from factorspec_sdk.engines import create_engine
    from factorspec_sdk.engines.embedded import EmbeddedEngine

    engine = create_engine("embedded", dtype="float32")
    assert isinstance(engine, EmbeddedEngine)
    yield engine
