"""Running the tool-calling benchmark: the cases, every method on each, the files.

`run_tools_bench` is what ``factorspec bench tools`` calls: it loads the first ``n`` cases of
each category (`load_cases`), converts their function docs (a case with a doc that cannot be
converted is counted as skipped, with the reason, and run by no method), warms the engine up,
runs every method on each case one after another (`run_method`), and rewrites
``results.json`` / ``results.md`` after every case.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from factorspec_sdk.bench.tools.convert import UnsupportedFunctionDoc
from factorspec_sdk.bench.tools.data import CATEGORIES, load_cases, parse_categories
from factorspec_sdk.bench.tools.methods import Setup, ToolTask, make_task, parse_methods, run_method
from factorspec_sdk.bench.tools.report import write_outputs
from factorspec_sdk.bench.tools.results import ToolBenchReport
from factorspec_sdk.engines.protocol import Engine

__all__ = ["run_tools_bench"]


def _machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def _warm_up(setup: Setup, task: ToolTask, methods: Sequence[str]) -> None:
    """Build the mask backends and run each method briefly, untimed (first-call overheads)."""
    for method in methods:
        if method in ("xgrammar", "llguidance"):
            setup.backend(method)
    short = Setup(setup.engine, 8, setup.client, setup.xgrammar, setup.llguidance)
    for method in methods:
        run_method(method, task, short)  # a budget error here is expected and ignored


def run_tools_bench(
    n: int,
    categories: str | Sequence[str] = "all",
    methods: str | Sequence[str] = "all",
    engine: Engine | None = None,
    out_dir: Path | None = Path("bench-results/tools"),
    *,
    max_tokens: int = 512,
    plots: bool = True,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    command: str = "",
) -> ToolBenchReport:
    """Run every method on the first ``n`` BFCL cases of each category and write the results.

    Args:
        n: cases per category (the first ones of BFCL's file).
        categories: ``"all"``, a comma list or a list of `CATEGORIES` names.
        methods: ``"all"``, a comma list or a list of `METHODS` names.
        engine: a logits `Engine` (default: the embedded engine, SmolLM2).
        out_dir: where results go (``None``: nothing is written).
        max_tokens: token budget of every answer.
        plots: write the PNG plot at the end.
        progress: show a rich progress bar.
        log: called with one line per answer.
        command: the command line, recorded in the report.

    Raises:
        ValueError: an unknown category or method.
        ImportError: ``bfcl-eval`` is not installed.
    """
    from rich.progress import Progress

    from factorspec_sdk.client import Client

    cats = (
        parse_categories(categories)
        if isinstance(categories, str)
        else parse_categories(",".join(categories))
    )
    chosen = (
        parse_methods(methods) if isinstance(methods, str) else parse_methods(",".join(methods))
    )
    if n < 1:
        raise ValueError("n must be >= 1")
    if engine is None:
        from factorspec_sdk.engines.embedded import EmbeddedEngine

        engine = EmbeddedEngine()
    setup = Setup(engine, max_tokens, Client(engine))
    tasks: list[ToolTask] = []
    skipped: list[dict[str, str]] = []
    for cat in cats:
        for case in load_cases(cat, n):
            try:
                tasks.append(make_task(case, engine))
            except UnsupportedFunctionDoc as exc:
                skipped.append({"case": case.id, "reason": str(exc)})
    config: dict[str, Any] = {
        "n": n,
        "categories": cats,
        "bfcl_categories": [CATEGORIES[c] for c in cats],
        "methods": chosen,
        "engine": engine.name,
        "model": str(getattr(engine, "model_path", "")),
        "max_tokens": max_tokens,
        "machine": _machine(),
        "command": command,
        "skipped": skipped,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "complete": False,
    }
    report = ToolBenchReport(config, [])
    if tasks:
        _warm_up(setup, tasks[0], chosen)
    with Progress(disable=not progress) as bar:
        job = bar.add_task("tools bench", total=len(tasks) * len(chosen))
        for task in tasks:
            for method in chosen:
                bar.update(job, description=f"{method} {task.case.id}")
                record = run_method(method, task, setup)
                report.records.append(record)
                if log is not None:
                    log(
                        f"{method} {record.case}: schema={record.schema_valid} "
                        f"ast={record.ast_valid} tokens={record.tokens} "
                        f"forwards={record.forwards} wall={record.wall_seconds:.2f}s"
                        + (
                            f" {record.error_type}: {record.error[:120]}"
                            if record.error_type
                            else ""
                        )
                    )
                bar.advance(job)
            if out_dir is not None:
                write_outputs(report, out_dir, plots=False)
    config["complete"] = True
    config["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    if out_dir is not None:
        write_outputs(report, out_dir, plots=plots)
    return report
