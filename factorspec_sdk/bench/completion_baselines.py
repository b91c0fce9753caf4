"""The trip benchmark's baselines on completion engines (vLLM)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from factorspec_sdk.bench.baselines import DecodeRun
    from factorspec_sdk.bench.trip_bench import _Setup, _Task


def run_completion_baseline(
    setup: _Setup, method: str, tasks: Sequence[_Task], firsts: Sequence[DecodeRun | None]
) -> list[DecodeRun | Exception]:
    """Run a baseline ``method`` on a completion engine (not written yet)."""
    raise NotImplementedError(f"{method} on the {setup.engine.name} engine")
