"""The run: every file, every engine, in worker processes with a time limit per schema.

Each engine runs in a worker process of its own (`factorspec_sdk.bench.workers`: it loads
SmolLM2's tokenizer once, then compiles and judges on request). For each file the parent
computes the instances' candidate texts once (`candidate_texts`; the same texts for every
engine), then, engine by engine, asks for the compile and for a verdict per instance,
all within ``timeout_s`` seconds for the schema: past it, the worker is killed (a fresh
one starts for the next schema) and the instances not judged yet are ``undecided``, with
the label ``timeout``. A worker that dies on an instance (a crash in native code) makes that
instance an ``error``; the schema is compiled again for the next one.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from factorspec_sdk.bench.maskbench.data import category_of, load_mask_file
from factorspec_sdk.bench.maskbench.engines import ENGINES, InstanceResult, engine_library
from factorspec_sdk.bench.maskbench.search import DEFAULT_BUDGET
from factorspec_sdk.bench.maskbench.texts import candidate_texts
from factorspec_sdk.bench.progress import tracked
from factorspec_sdk.bench.schemas import CompileResult
from factorspec_sdk.bench.workers import PRELOAD, WorkerGone, WorkerProcess, short_text

__all__ = ["DEFAULT_TIMEOUT_S", "EngineRun", "FileResult", "run_maskbench"]

DEFAULT_TIMEOUT_S = 120.0
"""Seconds one engine may spend on one schema: the compile and every instance."""

_PRELOAD = ("factorspec_sdk.bench.maskbench", *PRELOAD)


@dataclass(slots=True)
class EngineRun:
    """One engine on one file: its compile, and a verdict per test instance (when compiled)."""

    compile: CompileResult
    instances: list[InstanceResult] = field(default_factory=list)

    @property
    def compiled(self) -> bool:
        """Whether the engine compiled the schema."""
        return self.compile.status == "accepted"


@dataclass(slots=True)
class FileResult:
    """Everything measured on one MaskBench file.

    Attributes:
        name: the file name.
        category: its category.
        valid: per test instance, whether the schema accepts it.
        texts: per test instance, how many candidate texts it has.
        engines: each engine's run.
        error: why the file could not be read (then nothing else is filled).
    """

    name: str
    category: str
    valid: list[bool] = field(default_factory=list)
    texts: list[int] = field(default_factory=list)
    engines: dict[str, EngineRun] = field(default_factory=dict)
    error: str = ""


def _judge_all(
    worker: WorkerProcess, schema: object, texts: Sequence[list[str] | str], deadline: float
) -> EngineRun:
    """One engine on one schema within ``deadline`` (see the module docstring).

    ``texts``: each instance's candidate texts, or why it has none (an ``error`` verdict).
    """

    def left() -> float:
        return deadline - time.monotonic()

    try:
        answer = worker.ask("compile", schema, max(left(), 0.001))
    except WorkerGone as gone:
        return EngineRun(CompileResult(gone.status, detail=gone.detail))
    assert isinstance(answer, CompileResult)
    run = EngineRun(answer)
    if not run.compiled:
        return run
    for i, candidates in enumerate(texts):
        if isinstance(candidates, str):
            run.instances.append(InstanceResult("error", label="no JSON text", reason=candidates))
            continue
        if left() <= 0:
            timed_out = "the schema's time limit ran out before this instance"
            run.instances += [
                InstanceResult("undecided", label="timeout", reason=timed_out) for _ in texts[i:]
            ]
            break
        try:
            if worker.conn is None:  # died on the previous instance: compile again
                worker.ask("compile", schema, max(left(), 0.001))
            verdict = worker.ask("run", candidates, max(left(), 0.001))
            assert isinstance(verdict, InstanceResult)
        except WorkerGone as gone:
            status = "undecided" if gone.status == "timeout" else "error"
            verdict = InstanceResult(status, label=gone.status, reason=gone.detail)
        run.instances.append(verdict)
    return run


def _measure(path: Path, workers: dict[str, WorkerProcess], timeout_s: float) -> FileResult:
    try:
        mask_file = load_mask_file(path)
    except ValueError as exc:
        return FileResult(path.name, category_of(path.name), error=short_text(exc))
    result = FileResult(mask_file.name, mask_file.category)
    texts: list[list[str] | str] = []
    for test in mask_file.tests:
        try:
            texts.append(candidate_texts(test.data, mask_file.schema))
        except Exception as exc:  # a fault of the candidates: this instance's error, reported
            texts.append(f"no candidate text: {short_text(exc)}")
    result.valid = [t.valid for t in mask_file.tests]
    result.texts = [len(t) if isinstance(t, list) else 0 for t in texts]
    for name, worker in workers.items():
        deadline = time.monotonic() + timeout_s
        result.engines[name] = _judge_all(worker, mask_file.schema, texts, deadline)
    return result


def _line(i: int, total: int, r: FileResult) -> str:
    """One line per file for runs without a terminal."""
    parts = []
    for name, run in r.engines.items():
        if not run.compiled:
            parts.append(f"{name} {run.compile.status}")
            continue
        valid = [v.verdict for v, ok in zip(run.instances, r.valid, strict=False) if ok]
        invalid = [v.verdict for v, ok in zip(run.instances, r.valid, strict=False) if not ok]
        parts.append(
            f"{name} valid {valid.count('writable')}/{len(valid)}, "
            f"invalid written {invalid.count('writable')}"
        )
    return f"[{i}/{total}] {r.name}: " + ("; ".join(parts) or r.error)


def run_maskbench(
    files: Sequence[Path],
    *,
    engines: Sequence[str] = tuple(ENGINES),
    timeout_s: float = DEFAULT_TIMEOUT_S,
    budget: int = DEFAULT_BUDGET,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> list[FileResult]:
    """Judge every test instance of every file with every engine (see the package docstring).

    Args:
        files: MaskBench files (`mask_files`).
        engines: names of `ENGINES`, in the report's order.
        timeout_s: seconds each engine may spend on one schema (compile and instances).
        budget: nodes each candidate text's search may take (past it: ``undecided``).
        progress: show a rich progress bar (on stderr).
        log: called with one line per file (for runs without a terminal).

    Raises:
        ValueError: an unknown engine, ``timeout_s`` <= 0 or ``budget`` < 1.
    """
    unknown = [e for e in engines if e not in ENGINES]
    if unknown or timeout_s <= 0 or budget < 1:
        raise ValueError(
            f"unknown engines {unknown} (known: {', '.join(ENGINES)})"
            if unknown
            else "the time limit must be > 0 and the node budget >= 1"
        )
    workers = {
        name: WorkerProcess(name, functools.partial(engine_library, name, budget), _PRELOAD)
        for name in engines
    }
    results: list[FileResult] = []
    try:
        for worker in workers.values():
            worker.launch()
        for i, path in enumerate(tracked(files, lambda p: p.name, progress=progress), 1):
            results.append(_measure(path, workers, timeout_s))
            if log is not None and not progress:
                log(_line(i, len(files), results[-1]))
    finally:
        for worker in workers.values():
            worker.stop()
    return results
