"""Prefix-cache benchmark: one system prompt and schema hint, many trips, with and without.

``python -m factorspec_sdk.bench.prefix_cache --n 20`` decodes ``n`` different trip problems
through `factorspec_sdk.Client` on one embedded engine, each twice: once with the engine's
prefix cache off and once with it on. Every request has the same system message (an
instruction block and the schema hint, `factorspec_sdk.prompts.hint_sentence`) and the trip in
its user message, so with the cache on every request after the first reuses the KV states of
the shared part of its prompt.

The two runs of a problem alternate in order (cache off first on even problems), each
problem's spec is compiled before either is timed, and the cache is empty when the first
problem starts, so the cached column includes its one cold request. Greedy decoding: both
runs must write the same record (the cache changes no logits beyond float rounding); the
report counts the records that differ.

It prints a markdown table: prompt tokens per record, the prompt tokens served from the cache
(``GenerationStats.cached_prompt_tokens``, as OpenAI's ``usage.prompt_tokens_details``), wall
and forward seconds per record each way, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from factorspec_sdk.client import Client
    from factorspec_sdk.domains.trip import TripProblem
    from factorspec_sdk.engines.embedded import EmbeddedEngine
    from factorspec_sdk.engines.protocol import ChatMessage

__all__ = ["SYSTEM_PROMPT", "ModeResult", "main", "messages_for", "run"]

SYSTEM_PROMPT = (
    "You are a careful travel planner. Each request describes a trip through European "
    "cities: how many days the whole trip lasts, how many days to spend in each city, events "
    "that fix when you must be in a city, and the pairs of cities that have direct flights. "
    "Write one itinerary that visits every city exactly once, in an order that only uses "
    "direct flights. The first stay starts on day 1 and the last stay ends on the last day "
    "of the trip. A flight day counts for both cities: you leave one city and arrive in the "
    "next on the same day, so each stay starts on the day the previous one ends. Give every "
    "stay its number of days, counting the arrival and the departure day. List one flight "
    "between each two consecutive stays, on the day they meet, from the earlier city to the "
    "later one. Answer with the JSON record only, without any explanation."
)
"""The instruction block every request of the benchmark starts with."""

MODES = ("off", "on")


@dataclass(slots=True)
class ModeResult:
    """Sums over the records decoded with the prefix cache off or on.

    Attributes:
        walls: wall seconds of each record (``Client.generate`` around it).
    """

    mode: str
    records: int = 0
    valid: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    tokens: int = 0
    forward_seconds: float = 0.0
    walls: list[float] = field(default_factory=list)

    @property
    def wall_per_record(self) -> float:
        """Mean wall seconds per record."""
        return sum(self.walls) / len(self.walls) if self.walls else 0.0

    @property
    def cached_share(self) -> float:
        """Share of prompt tokens served from the prefix cache."""
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def messages_for(problem: TripProblem, hint: str) -> list[ChatMessage]:
    """The shared system message (instructions and schema hint) and the trip as the user's."""
    from factorspec_sdk.domains.trip import prompt_for

    return [
        {"role": "system", "content": f"{SYSTEM_PROMPT}\n\n{hint}"},
        {"role": "user", "content": prompt_for(problem)},
    ]


def run(
    engine: EmbeddedEngine,
    problems: list[TripProblem],
    max_tokens: int = 1024,
    progress: bool = True,
) -> tuple[dict[str, ModeResult], int]:
    """Decode every problem with the cache off and on; the sums per mode and the mismatches.

    Raises:
        ValueError: the engine has no prefix cache (made with ``prefix_cache=0``).
    """
    from rich.progress import Progress

    from factorspec_sdk.bench.trip.engines import warm_up
    from factorspec_sdk.client import Client
    from factorspec_sdk.domains.trip import Itinerary
    from factorspec_sdk.errors import FactorSpecError
    from factorspec_sdk.graph.spec import compile_spec
    from factorspec_sdk.prompts import hint_sentence
    from factorspec_sdk.relations.pydantic_layout import build_layout

    cache = engine.prefix_cache
    if cache is None:
        raise ValueError("the engine has no prefix cache to compare with (prefix_cache=0)")
    hint = hint_sentence(build_layout(Itinerary))
    client: Client = Client(engine)
    results = {mode: ModeResult(mode) for mode in MODES}
    engine.verify_cost(1)  # the cost curve is measured on first use: not inside a record
    if problems:
        warm_up(engine, client.prompt_ids(messages_for(problems[0], hint)))
    cache.clear()  # the warm-up's prompt: not a head start for the first problem
    mismatches = 0
    with Progress(transient=True, disable=not progress) as bar:
        task = bar.add_task("prefix cache off / on", total=len(problems) * len(MODES))
        for i, problem in enumerate(problems):
            messages = messages_for(problem, hint)
            compile_spec(Itinerary, problem)  # the spec is cached: neither run pays for it
            records: dict[str, list[int] | None] = {}
            for mode in MODES if i % 2 == 0 else MODES[::-1]:
                engine.prefix_cache = cache if mode == "on" else None
                agg = results[mode]
                started = time.perf_counter()
                try:
                    res = client.generate(
                        Itinerary,
                        messages,
                        context=problem,
                        max_tokens=max_tokens,
                        schema_in_prompt=False,  # the hint is in the shared system message
                        return_result=True,
                    )
                except FactorSpecError as exc:
                    print(f"#{i} cache {mode}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    agg.walls.append(time.perf_counter() - started)
                    agg.records += 1
                    records[mode] = None
                else:
                    agg.walls.append(time.perf_counter() - started)
                    agg.records += 1
                    agg.valid += 1  # generate() validated it against every relation
                    stats = res.stats
                    agg.prompt_tokens += stats.prompt_tokens
                    agg.cached_prompt_tokens += stats.cached_prompt_tokens
                    agg.tokens += stats.tokens
                    agg.forward_seconds += stats.forward_seconds
                    records[mode] = res.tokens
                bar.advance(task)
            if records["off"] != records["on"]:
                mismatches += 1
    engine.prefix_cache = cache
    return results, mismatches


def table(results: dict[str, ModeResult]) -> str:
    """The markdown table of both modes, and the ratio off / on."""
    off, on = results["off"], results["on"]
    lines = [
        "| prefix cache | valid | prompt tokens / record | served from cache | wall / record "
        "| median wall | forward / record |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in (off, on):
        n = r.records or 1
        lines.append(
            f"| {r.mode} | {r.valid}/{r.records} | {r.prompt_tokens / n:.0f} "
            f"| {r.cached_prompt_tokens} ({100 * r.cached_share:.0f}%) "
            f"| {r.wall_per_record:.2f} s | {statistics.median(r.walls or [0.0]):.2f} s "
            f"| {r.forward_seconds / n:.2f} s |"
        )
    ratio = off.wall_per_record / on.wall_per_record if on.wall_per_record else 0.0
    lines.append(f"\nwall per record, off / on: **{ratio:.2f}x**")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=20, help="number of trip problems")
    parser.add_argument("--cities", default="3-5", help="cities per problem, N or LOW-HIGH")
    parser.add_argument("--seed", type=int, default=0, help="seed of the problem draw")
    parser.add_argument("--model", default=None, help="local HF model folder (default SmolLM2)")
    parser.add_argument("--dtype", default=None, help="weights dtype (default: measured/cached)")
    parser.add_argument("--max-tokens", type=int, default=1024, help="token budget per record")
    parser.add_argument(
        "--prefix-cache-mib", type=int, default=256, help="the prefix cache's bound in MiB"
    )
    parser.add_argument("--json", default=None, help="also write the sums to this file")
    args = parser.parse_args(argv)
    low, _, high = args.cities.partition("-")
    cities = (int(low), int(high or low))

    from factorspec_sdk.bench.trip.runner import generate_bench_problems
    from factorspec_sdk.engines.embedded import EmbeddedEngine

    started = time.perf_counter()
    engine = EmbeddedEngine(
        args.model, dtype=args.dtype, prefix_cache=args.prefix_cache_mib * 2**20
    )
    problems = generate_bench_problems(args.n, cities, args.seed)
    results, mismatches = run(engine, problems, args.max_tokens)
    print(table(results))
    cache = engine.prefix_cache
    if cache is not None:
        stats = cache.stats
        print(
            f"\ncache at the end: {stats.blocks} blocks of {cache.block_size} tokens, "
            f"{stats.bytes / 2**20:.1f} MiB of {stats.max_bytes / 2**20:.0f} MiB, "
            f"{stats.hits}/{stats.lookups} lookups hit, {stats.evictions} evictions"
        )
    print(
        f"{args.n} problems ({cities[0]}-{cities[1]} cities, seed {args.seed}), greedy, "
        f"{engine.dtype} on {engine.device}; records that differ between the runs: "
        f"{mismatches}; {time.perf_counter() - started:.0f} s in all"
    )
    if args.json:
        with open(args.json, "w") as fh:
            out = {
                m: {**asdict(r), "wall_per_record": r.wall_per_record} for m, r in results.items()
            }
            json.dump({"modes": out, "mismatches": mismatches, "cities": args.cities}, fh, indent=2)


if __name__ == "__main__":
    main()
