"""Generation benchmark: certain drafts and guesses vs one token per forward, same engine.

``python -m factorspec_sdk.bench.gen_bench --n 20 --cities 5`` (``make bench-gen``) decodes the
same random trip problems three ways on one engine, greedily:

* ``plain``   — the masked record, one token per forward (no drafts);
* ``certain`` — certain drafts only;
* ``guesses`` — certain drafts plus guesses with the per-request width.

Problems may have several valid plans (``--unique`` restricts to problems whose plan is
unique, where the oracle determines every token and the model only confirms them).
``--itinerary dates`` decodes the dated itinerary (`factorspec_sdk.domains.trip_dates`:
``datetime.date`` fields, the trip starting on 2026-12-28) instead of the int-day one;
``--itinerary both`` decodes both on the same problems and prints how their tokens per verify
step compare.

All three must produce the same record token for token (greedy exactness); the table reports
tokens per verify step, wall time, the speedup over ``plain`` measured in the same run, and the
share of wall time the decoding thread waited for oracle and mask work.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel

    from factorspec_sdk.domains.trip import TripProblem
    from factorspec_sdk.engines.protocol import Engine

__all__ = ["ModeResult", "main", "run"]

MODES: dict[str, dict[str, object]] = {
    "plain": {"speculative": False},
    "certain": {"speculative": True, "max_guesses": 0},
    "guesses": {"speculative": True, "max_guesses": 2},
}


@dataclass(slots=True)
class ModeResult:
    """Aggregates of one decoding mode over all problems."""

    mode: str
    valid: int
    records: int
    tokens: int
    verify_steps: int
    wall_seconds: float
    forward_seconds: float
    plan_seconds: float
    critical_plan_seconds: float
    guesses_proposed: int
    guesses_accepted: int

    @property
    def tokens_per_step(self) -> float:
        """Record tokens per forward."""
        return self.tokens / self.verify_steps if self.verify_steps else 0.0

    @property
    def critical_share(self) -> float:
        """Share of wall time spent waiting for oracle + masks."""
        return self.critical_plan_seconds / self.wall_seconds if self.wall_seconds else 0.0


def run(
    n: int,
    cities: int,
    seed: int,
    model: str | None = None,
    unique: bool = False,
    dated: bool = False,
    engine: Engine | None = None,
) -> dict[str, ModeResult]:
    """Decode ``n`` problems in every mode; returns the aggregates per mode."""
    from rich.progress import Progress

    from factorspec_sdk.client import Client
    from factorspec_sdk.domains.trip import Itinerary, generate_problem, prompt_for
    from factorspec_sdk.domains.trip_dates import (
        BENCH_START,
        DatedItinerary,
        dated_problem,
        dated_prompt_for,
    )
    from factorspec_sdk.engines import create_logits_engine

    if engine is None:
        engine = create_logits_engine("embedded", **({"model": model} if model else {}))
        engine.verify_cost(1)  # measure the cost curve before timing anything
    problems: list[TripProblem] = [
        generate_problem(cities, seed + i, unique=unique) for i in range(n)
    ]
    record_model: type[BaseModel] = Itinerary
    prompts = [prompt_for(p) for p in problems]
    if dated:
        problems = [dated_problem(p, BENCH_START) for p in problems]
        record_model = DatedItinerary
        prompts = [dated_prompt_for(p) for p in problems]  # type: ignore[arg-type]
    results = {m: ModeResult(m, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0, 0) for m in MODES}
    mismatches = 0
    with Progress(transient=True) as progress:
        what = "dated itineraries" if dated else "itineraries"
        task = progress.add_task(f"decoding {what}", total=n * len(MODES))
        for problem, prompt in zip(problems, prompts, strict=True):
            texts = {}
            for mode, options in MODES.items():
                client = Client(engine, **options)  # type: ignore[arg-type]
                t0 = time.perf_counter()
                res = client.generate(record_model, prompt, context=problem, return_result=True)
                wall = time.perf_counter() - t0
                texts[mode] = res.tokens
                agg = results[mode]
                agg.records += 1
                agg.valid += 1  # generate() validated it against every relation
                agg.tokens += res.stats.tokens
                agg.verify_steps += res.stats.verify_steps
                agg.wall_seconds += wall
                agg.forward_seconds += res.stats.forward_seconds
                agg.plan_seconds += res.stats.plan_seconds
                agg.critical_plan_seconds += res.stats.critical_plan_seconds
                agg.guesses_proposed += res.stats.guesses_proposed
                agg.guesses_accepted += res.stats.guesses_accepted
                progress.advance(task)
            if len({tuple(t) for t in texts.values()}) != 1:
                mismatches += 1
    if mismatches:
        print(f"WARNING: {mismatches} problems decoded differently across modes", file=sys.stderr)
    return results


def _table(results: dict[str, ModeResult]) -> str:
    plain = results["plain"].wall_seconds
    lines = [
        "| mode | valid | tokens | verify steps | tokens/step | wall s | speedup vs plain "
        "| guesses accepted | oracle+mask on critical path |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results.values():
        guesses = f"{r.guesses_accepted}/{r.guesses_proposed}" if r.guesses_proposed else "-"
        lines.append(
            f"| {r.mode} | {r.valid}/{r.records} | {r.tokens} | {r.verify_steps} "
            f"| {r.tokens_per_step:.1f} | {r.wall_seconds:.1f} | {plain / r.wall_seconds:.2f}x "
            f"| {guesses} | {100 * r.critical_share:.1f}% |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=20, help="number of trip problems")
    parser.add_argument("--cities", type=int, default=5, help="cities per problem")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first problem")
    parser.add_argument("--model", default=None, help="local HF model folder (default SmolLM2)")
    parser.add_argument("--json", default=None, help="also write the aggregates to this file")
    parser.add_argument(
        "--unique",
        action="store_true",
        help="only problems with a unique valid plan (then the oracle fixes every token)",
    )
    parser.add_argument(
        "--itinerary",
        choices=["days", "dates", "both"],
        default="days",
        help="day numbers (Itinerary), calendar dates (DatedItinerary), or both on the same "
        "problems",
    )
    args = parser.parse_args(argv)
    from factorspec_sdk.engines import create_logits_engine

    started = time.perf_counter()
    engine = create_logits_engine("embedded", **({"model": args.model} if args.model else {}))
    engine.verify_cost(1)  # measure the cost curve before timing anything
    kinds = ["days", "dates"] if args.itinerary == "both" else [args.itinerary]
    runs = {
        kind: run(args.n, args.cities, args.seed, args.model, args.unique, kind == "dates", engine)
        for kind in kinds
    }
    for kind, results in runs.items():
        print(f"\n{'Dated' if kind == 'dates' else 'Int-day'} itinerary:\n")
        print(_table(results))
    if len(runs) == 2:
        for mode in MODES:
            days, dates = runs["days"][mode], runs["dates"][mode]
            ratio = dates.tokens_per_step / days.tokens_per_step if days.tokens_per_step else 0
            print(
                f"{mode}: tokens/step dated {dates.tokens_per_step:.1f} vs int-day "
                f"{days.tokens_per_step:.1f} ({100 * ratio:.0f}%), valid "
                f"{dates.valid}/{dates.records} and {days.valid}/{days.records}"
            )
    print(
        f"\n{args.n} problems x {len(MODES)} modes, {args.cities} cities "
        f"({'unique' if args.unique else 'several valid plans allowed'}), greedy, "
        f"{time.perf_counter() - started:.0f}s in all (columns are sums over the problems)."
    )
    if args.json:
        with open(args.json, "w") as fh:
            out = {k: {m: asdict(r) for m, r in res.items()} for k, res in runs.items()}
            json.dump(out if len(runs) > 1 else out[kinds[0]], fh, indent=2)


if __name__ == "__main__":
    main()
