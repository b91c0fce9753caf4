"""Running each method of the trip benchmark on a batch of tasks, and scoring its records.

`run_batch` runs one method on tasks decoded together: the FactorSpec methods through their
`Client` (`decode_with_client`), the baselines as step generators of
`factorspec_sdk.bench.baselines` driven in lockstep (`baseline_steps`), or on a completion
engine through `completion_baselines`. Every record is scored with
`factorspec_sdk.domains.trip.evaluate`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from factorspec_sdk.bench import baselines
from factorspec_sdk.bench.trip.completion_baselines import run_completion_baseline
from factorspec_sdk.bench.trip.options import FACTORSPEC_METHODS, ngram_k
from factorspec_sdk.bench.trip.results import RecordResult
from factorspec_sdk.bench.trip.tasks import (
    Setup,
    Task,
    itinerary_schema,
    relation_docs,
    violation_sentences,
)
from factorspec_sdk.domains.trip import TripProblem, evaluate
from factorspec_sdk.engines.completion import CompletionEngine

if TYPE_CHECKING:
    from pydantic import BaseModel

    from factorspec_sdk.bench.baselines import DecodeRun, Steps
    from factorspec_sdk.client import Client, GenerationResult
    from factorspec_sdk.errors import FactorSpecError

__all__ = [
    "baseline_steps",
    "cold_spec_cache",
    "decode_with_client",
    "fill",
    "mark_error",
    "run_batch",
    "score",
]


def fill(record: RecordResult, run: DecodeRun, problem: TripProblem, model: type[Any]) -> None:
    """Copy a baseline decode's counts and text into ``record`` and score it."""
    record.tokens = len(run.tokens)
    record.forwards = run.forwards
    record.wall_seconds = run.wall_seconds
    record.forward_seconds = run.forward_seconds
    record.critical_seconds = run.mask_seconds
    record.attempts = run.attempts
    record.drafted = run.drafted
    record.draft_accepted = run.draft_accepted
    record.stopped = run.stopped
    record.text = run.text
    score(record, problem, model)


def mark_error(record: RecordResult, exc: BaseException) -> None:
    """A method that raised on this record: invalid, with the error's type and message."""
    record.error = f"{type(exc).__name__}: {exc}"
    record.stopped = "error"


def score(record: RecordResult, problem: TripProblem, model: type[Any]) -> None:
    """Validity, exact match, parse and violations of ``record.text``."""
    ev = evaluate(problem, record.text, model)
    record.valid = ev.valid
    record.exact_match = ev.exact_match
    record.parse_ok = ev.parse_ok
    record.violations = list(ev.violations)


def cold_spec_cache(client: Client) -> None:
    """Forget ``client``'s compiled specs so each FactorSpec record pays its own compilation."""
    client.compiler.clear()


def decode_with_client(
    client: Client, model: type[BaseModel], tasks: Sequence[Task], max_tokens: int
) -> list[GenerationResult[Any] | FactorSpecError]:
    """Decode ``tasks`` together with ``client``: each task's result, or its record's error.

    One decoder run over the batch (`Client.generate_batch` with ``return_exceptions``).
    """
    return client.generate_batch(
        model,
        [task.prompt for task in tasks],
        contexts=[task.problem for task in tasks],
        max_tokens=max_tokens,
        return_result=True,
        return_exceptions=True,
    )


def baseline_steps(method: str, task: Task, setup: Setup, first: DecodeRun | None) -> Steps:
    """The baseline ``method``'s step generator for ``task``."""
    problem = task.problem
    engine = setup.logits_engine
    if method == "free":
        return baselines.free_steps(engine, task.prompt_ids, setup.max_tokens)
    backend = setup.xgrammar()
    schema = itinerary_schema(problem)
    if method == "syntax":
        return baselines.syntax_steps(engine, backend, task.prompt_ids, schema, setup.max_tokens)
    k = ngram_k(method)
    if k is not None:
        return baselines.syntax_ngram_steps(
            engine, backend, task.prompt_ids, schema, setup.max_tokens, k
        )
    if method == "syntax+retry":
        docs = relation_docs(setup.model)

        def decode(ids: list[int]) -> Steps:
            return baselines.syntax_steps(engine, backend, ids, schema, setup.max_tokens)

        def check(text: str) -> list[str]:
            ev = evaluate(problem, text, setup.model)
            return [] if ev.valid else violation_sentences(ev.violations, docs)

        return baselines.retry_steps(engine, task.messages, decode, check, setup.max_retries, first)
    raise ValueError(f"unknown method {method!r}")  # pragma: no cover - expand_methods checks


def run_batch(
    method: str, tasks: Sequence[Task], setup: Setup, syntax_runs: dict[int, DecodeRun]
) -> list[RecordResult]:
    """Run ``method`` on ``tasks`` together (one batched forward per step for all of them).

    Every record of the batch gets the batch's wall time divided by its size (batches hold
    problems of one city count, so per-city-count figures stay meaningful). The greedy
    ``syntax`` runs are kept in ``syntax_runs``: ``syntax+retry``'s first attempt is the same
    prompt decoded the same way, so it is reused (with its cost) instead of decoded again.
    """
    records = [RecordResult(method, t.index, len(t.problem.cities)) for t in tasks]
    started = time.perf_counter()
    if method in FACTORSPEC_METHODS:
        client = setup.clients[method]
        cold_spec_cache(client)
        outcomes = decode_with_client(client, setup.model, tasks, setup.max_tokens)
        wall = (time.perf_counter() - started) / len(tasks)
        for record, result, task in zip(records, outcomes, tasks, strict=True):
            record.wall_seconds = wall
            if isinstance(result, Exception):
                mark_error(record, result)
                continue
            stats = result.stats
            record.tokens = stats.tokens
            record.forwards = stats.verify_steps
            record.forward_seconds = stats.forward_seconds
            record.critical_seconds = stats.critical_plan_seconds
            record.drafted = stats.drafted
            record.draft_accepted = stats.guesses_accepted
            record.stopped = "done"
            record.text = result.text
            score(record, task.problem, setup.model)
        return records
    firsts: list[DecodeRun | None] = []
    for task in tasks:
        first = syntax_runs.get(task.index) if method == "syntax+retry" else None
        if first is not None and setup.engine.apply_chat_template(task.messages) != task.prompt_ids:
            first = None  # pragma: no cover - the prompts are built to be identical
        firsts.append(first)
    runs: Sequence[DecodeRun | Exception]
    if isinstance(setup.engine, CompletionEngine):
        runs = run_completion_baseline(setup, method, tasks, firsts)
    else:
        loops = [baseline_steps(method, t, setup, f) for t, f in zip(tasks, firsts, strict=True)]
        runs = baselines.drive(setup.engine, loops)
    wall = (time.perf_counter() - started) / len(tasks)
    for record, run, task, first in zip(records, runs, tasks, firsts, strict=True):
        if isinstance(run, Exception):
            mark_error(record, run)
            record.wall_seconds = wall
            continue
        fill(record, run, task.problem, setup.model)
        record.wall_seconds = wall
        if first is not None:
            record.wall_seconds += syntax_runs[task.index].wall_seconds
        if method == "syntax":
            run.wall_seconds = wall
            syntax_runs[task.index] = run
    return records
