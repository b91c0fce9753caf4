"""Oracle benchmark: compile time and per-query time on NATURAL PLAN-style trips.

``python -m factorspec_sdk.bench.oracle_bench`` (``make bench-oracle``) compiles the
`factorspec_sdk.domains.trip.Itinerary` spec for trips of 3, 5, 7 and 10 cities and replays the
writer's typical queries along the golden plan: the feasible set of the next city, the
values the city determines, the digits of each day, the list continue/close checks.
"""

from __future__ import annotations

import argparse
import statistics
import time

__all__ = ["main", "run"]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(sizes: tuple[int, ...] = (3, 5, 7, 10), seeds: int = 5) -> list[dict[str, float]]:
    """Measure; one row per trip size (milliseconds)."""
    from factorspec_sdk.domains.trip import Itinerary, generate_problem, itinerary_record
    from factorspec_sdk.graph import AtLeast, SpecCompiler

    rows = []
    for n in sizes:
        compile_ms: list[float] = []
        query_ms: list[float] = []
        for seed in range(seeds):
            problem = generate_problem(n, seed, unique=False)
            compiler = SpecCompiler()  # the compile below is a cold one
            t0 = time.perf_counter()
            spec = compiler.compile_spec(Itinerary, problem)
            compile_ms.append((time.perf_counter() - t0) * 1000)
            oracle = spec.new_oracle()
            record = itinerary_record(problem.golden)
            facts: list[tuple[str, object]] = []

            def timed(f: object, *args: object, sink: list[float] = query_ms) -> object:
                t = time.perf_counter()
                out = f(*args)  # type: ignore[operator]
                sink.append((time.perf_counter() - t) * 1000)
                return out

            for i, stay in enumerate(record["stays"]):
                timed(oracle.feasible, (*facts, ("len(stays)", i)))
                facts.append(("len(stays)", AtLeast(i + 1)))
                timed(oracle.feasible_values, tuple(facts), f"stays[{i}].city")
                facts.append((f"stays[{i}].city", stay["city"]))
                timed(oracle.determined, tuple(facts))
                for key in ("first_day", "last_day"):
                    text = str(stay[key])
                    for k in range(len(text) + 1):
                        timed(oracle.next_digits, tuple(facts), f"stays[{i}].{key}", text[:k])
                    facts.append((f"stays[{i}].{key}", stay[key]))
        rows.append(
            {
                "cities": n,
                "compile_ms_median": statistics.median(compile_ms),
                "compile_ms_max": max(compile_ms),
                "query_ms_median": statistics.median(query_ms),
                "query_ms_p95": _pct(query_ms, 0.95),
                "queries": len(query_ms),
            }
        )
    return rows


def main() -> None:
    """Print the benchmark table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    print("cities  compile ms (median/max)  query ms (median/p95)  queries")
    for row in run(seeds=args.seeds):
        print(
            f"{row['cities']:>6}  {row['compile_ms_median']:>10.1f} / {row['compile_ms_max']:<8.1f}"
            f"  {row['query_ms_median']:>9.3f} / {row['query_ms_p95']:<8.3f}  {row['queries']:>7}"
        )


if __name__ == "__main__":
    main()
