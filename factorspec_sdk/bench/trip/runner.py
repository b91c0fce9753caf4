"""Running the trip benchmark: the problem set, the batches, every method on each, the files.

`run_trip_bench` is what ``factorspec bench trip`` calls: it draws the problems
(`generate_bench_problems`), builds the engine and the clients, runs every method
(`methods.run_batch`) batch by batch and rewrites ``results.json`` / ``results.md`` after each.
"""

from __future__ import annotations

import os
import platform
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from factorspec_sdk.bench.trip import completion_baselines
from factorspec_sdk.bench.trip.engines import make_engine, warm_up
from factorspec_sdk.bench.trip.methods import mark_error, run_batch
from factorspec_sdk.bench.trip.options import expand_methods
from factorspec_sdk.bench.trip.report import write_outputs
from factorspec_sdk.bench.trip.results import BenchReport, RecordResult, resumed_report
from factorspec_sdk.bench.trip.tasks import Setup, Task, make_tasks
from factorspec_sdk.domains.trip import Itinerary, TripProblem, generate_problem
from factorspec_sdk.domains.trip_dates import BENCH_START, DatedItinerary, dated_problem
from factorspec_sdk.engines.completion import CompletionEngine
from factorspec_sdk.engines.protocol import Engine

if TYPE_CHECKING:
    from pydantic import BaseModel

    from factorspec_sdk.bench.baselines import DecodeRun

__all__ = ["generate_bench_problems", "run_trip_bench"]


def generate_bench_problems(
    n: int, cities: tuple[int, int], seed: int, unique: bool = True
) -> list[TripProblem]:
    """``n`` problems with a city count drawn uniformly from ``cities``.

    With ``unique`` these are exactly `factorspec_sdk.domains.trip.generate_problems`; without
    it the same draws keep every valid plan (the model must make genuine choices).
    """
    low, high = cities
    master = random.Random(seed)
    problems = []
    for _ in range(n):
        num = master.randint(low, high)
        problems.append(generate_problem(num, master.randrange(2**31), unique=unique))
    return problems


def _batches(tasks: Sequence[Task], size: int) -> list[list[Task]]:
    """``size`` 1: one task per batch, in order; else same-city-count groups of ``size``."""
    if size <= 1:
        return [[t] for t in tasks]
    by_cities: dict[int, list[Task]] = {}
    for t in tasks:
        by_cities.setdefault(len(t.problem.cities), []).append(t)
    return [
        group[i : i + size]
        for _, group in sorted(by_cities.items())
        for i in range(0, len(group), size)
    ]


def _machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def run_trip_bench(
    n: int,
    cities: tuple[int, int] = (3, 10),
    methods: str | Sequence[str] = "all",
    engine: Engine | CompletionEngine | str = "embedded",
    out_dir: Path | None = Path("bench-results"),
    seed: int = 0,
    unique: bool = True,
    *,
    max_tokens: int = 1024,
    max_retries: int = 3,
    plots: bool = True,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    shard: tuple[int, int] | None = None,
    batch: int = 1,
    resume: bool = False,
    dated: bool = False,
) -> BenchReport:
    """Run every method on the same ``n`` trip problems and write the results.

    Args:
        n: number of problems.
        cities: inclusive range of city counts (drawn uniformly per problem).
        methods: ``"all"``, a comma-separated string or a list (see `expand_methods`).
        engine: an `Engine`, or an engine name (see `make_engine`).
        out_dir: where results go (``None``: nothing is written); ``results.json`` and
            ``results.md`` are rewritten after every problem.
        seed: seed of the problem set.
        unique: problems whose golden plan is the only valid one (exact match is then a fair
            score); False keeps every valid plan.
        max_tokens: token budget of every record (per attempt for retries).
        max_retries: retries of ``syntax+retry``.
        plots: write the PNG plots at the end.
        progress: show a rich progress bar.
        log: called with one line per record (e.g. to follow a run in a log file).
        shard: ``(k, m)`` runs only problems whose index is ``k`` modulo ``m`` (of the same
            ``n`` problems), so ``m`` processes can share a machine; `merge_reports` joins
            their ``results.json`` files into the full run.
        batch: problems decoded together by every method (one batched forward per step, as
            a serving engine batches requests); batches hold problems of one city count and
            each record is charged the batch's wall time over its size. 1 decodes one
            problem at a time, in order.
        resume: continue the run whose ``results.json`` is in ``out_dir`` (stopped or
            crashed): its records are kept and only problems without records are decoded.
            The configuration must be the same. Batches are timed on their own, so a pause
            between them changes no record's time.
        dated: the same problems with calendar dates (`DatedItinerary`, day 1 on
            `BENCH_START`): every method writes dates, the baselines' schema has date strings.

    Returns:
        The `BenchReport` (records, summaries via ``.summaries``, written files).
    """
    from rich.progress import Progress

    from factorspec_sdk.client import Client

    chosen = expand_methods(methods)
    if shard is not None and not 0 <= shard[0] < shard[1]:
        raise ValueError(f"shard {shard[0]}/{shard[1]}: need 0 <= K < M")
    eng = make_engine(engine) if isinstance(engine, str) else engine
    problems = generate_bench_problems(n, cities, seed, unique)
    model: type[BaseModel] = Itinerary
    if dated:
        problems = [dated_problem(p, BENCH_START) for p in problems]
        model = DatedItinerary
    setup = Setup(eng, model, max_tokens, max_retries)
    setup.clients = {
        "factorspec-certain": Client(eng, max_guesses=0),
        "factorspec": Client(eng),
    }
    config: dict[str, Any] = {
        "n": n,
        "cities": f"{cities[0]}-{cities[1]}",
        "methods": chosen,
        "engine": eng.name,
        "model": str(getattr(eng, "model_path", "")),
        "dtype": str(getattr(eng, "dtype", "")),
        "seed": seed,
        "unique": unique,
        "itinerary": "dates" if dated else "days",
        "max_tokens": max_tokens,
        "max_retries": max_retries,
        "machine": _machine(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "complete": False,
    }
    if shard is not None:
        config["shard"] = f"{shard[0]}/{shard[1]}"
    if batch < 1:
        raise ValueError("batch must be >= 1")
    config["batch"] = batch
    report = BenchReport(config, [])
    done: set[int] = set()
    if resume:
        report, done = resumed_report(report, out_dir)
        config = report.config
    verify_cost = getattr(eng, "verify_cost", None)
    if callable(verify_cost):
        verify_cost(1)  # the cost curve is measured on first use: not inside a timed record
    todo = [
        (i, problem)
        for i, problem in enumerate(problems)
        if not ((shard is not None and i % shard[1] != shard[0]) or i in done)
    ]
    tasks = make_tasks(setup.clients["factorspec"], model, todo)
    if tasks and isinstance(eng, CompletionEngine):
        completion_baselines.prepare(setup, chosen, tasks[0].prompt_ids)
    elif tasks and isinstance(eng, Engine):
        warm_up(eng, tasks[0].prompt_ids)  # first-call overheads, outside the timed records

    syntax_runs: dict[int, DecodeRun] = {}
    with Progress(disable=not progress) as bar:
        job = bar.add_task("trip bench", total=len(tasks) * len(chosen))
        for group in _batches(tasks, batch):
            for method in chosen:
                where = ", ".join(f"#{t.index}" for t in group)
                bar.update(job, description=f"{method} {where} ({len(group[0].problem.cities)}c)")
                started = time.perf_counter()
                try:
                    records = run_batch(method, group, setup, syntax_runs)
                except Exception as exc:  # a crashing method is an error on these records
                    records = []
                    for task in group:
                        record = RecordResult(method, task.index, len(task.problem.cities))
                        mark_error(record, exc)
                        record.wall_seconds = (time.perf_counter() - started) / len(group)
                        records.append(record)
                report.records.extend(records)
                for record in records:
                    if log is not None:
                        log(
                            f"{method} #{record.problem} {record.cities}c: valid={record.valid} "
                            f"exact={record.exact_match} tokens={record.tokens} "
                            f"forwards={record.forwards} wall={record.wall_seconds:.2f}s"
                            + (f" error={record.error}" if record.error else "")
                        )
                bar.advance(job, len(group))
            for task in group:
                syntax_runs.pop(task.index, None)
            if out_dir is not None:
                write_outputs(report, out_dir, plots=False)
    if isinstance(eng, CompletionEngine):
        completion_baselines.close_ngram_engines()
    config["complete"] = True
    config["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    if out_dir is not None:
        write_outputs(report, out_dir, plots=plots)
    return report
