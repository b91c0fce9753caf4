"""Session-wide fixtures: the real SmolLM2 engine loads once per test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from factorspec_sdk.engines.embedded import EmbeddedEngine


@pytest.fixture(scope="session")
def embedded_engine() -> Iterator[EmbeddedEngine]:
    """The default embedded engine (SmolLM2-135M-Instruct, bf16 on CPU), as users get it."""
    from factorspec_sdk.engines.embedded import EmbeddedEngine

    yield EmbeddedEngine()


@pytest.fixture(scope="session")
def embedded_engine_fp32() -> Iterator[EmbeddedEngine]:
    """The default model in float32: logits agree across chunkings to ~1e-4."""
    from factorspec_sdk.engines.embedded import EmbeddedEngine

    yield EmbeddedEngine(dtype="float32")
