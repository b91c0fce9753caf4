"""Solver tail benchmark: the slowest oracle queries on a nonlinear spec, and their restarts.

``python -m factorspec_sdk.bench.solver_tail --oracles 100`` (from the repository root)
compiles the invoice example (`examples.invoice`: ``amount == quantity * unit_price`` per
line item, so nonlinear; ``--model`` and ``--context`` name another) and,
for each of ``--oracles`` oracles in one process, asks ``--queries`` random queries: whether
some random facts are feasible, then the feasible values of a random variable (up to 16).
It prints the query times (median, p99, slowest), the checks, and how many checks the warm
solver did not settle within its budget and a fresh solver answered
(`factorspec_sdk.graph.z3check`). Before those restarts, this run met single queries of
15 s to 467 s (which ones depends on the process's history); the slowest is now bounded by
the warm budget plus a fresh solve. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import importlib
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from factorspec_sdk.graph import AtLeast, CompiledSpec, Fact
from factorspec_sdk.relations.kinds import VarKind

__all__ = ["TailResult", "main", "random_facts", "run"]

_LIMIT = 16
"""The most feasible values a query enumerates (as the writer's small domains do)."""


@dataclass(frozen=True, slots=True)
class TailResult:
    """What one run measured.

    Attributes:
        query_ms: wall time of each query, in order.
        solver_checks: Z3 checks the oracles made.
        restarts: checks a fresh solver answered after the warm one ran out of its budget.
    """

    query_ms: list[float]
    solver_checks: int
    restarts: int


def random_facts(spec: CompiledSpec, rng: random.Random) -> list[Fact]:
    """Up to six random facts about ``spec``'s variables, each within its own bounds."""
    names = list(spec.variables)
    facts: list[Fact] = []
    for name in rng.sample(names, k=rng.randint(0, min(len(names), 6))):
        v = spec.variables[name]
        if v.kind == VarKind.LEN:
            assert v.ge is not None and v.le is not None
            n = rng.randint(v.ge, v.le)
            facts.append((name, AtLeast(n) if rng.random() < 0.5 else n))
        elif v.domain is not None:
            facts.append((name, rng.choice(v.domain)))
        elif v.kind == VarKind.STR:  # a free str: a named text or any other
            facts.append((name, rng.choice([*spec.strings.strings[1:], "some other text"])))
        else:
            lo, hi = max(v.ge or 0, -50), min(v.le or 50, 50)
            facts.append((name, rng.randint(min(lo, hi), hi)))
    return facts


def load(ref: str) -> object:
    """The object ``module:name`` names (``examples.invoice:Invoice``)."""
    module, _, name = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"cannot load {ref!r} ({exc}); run from the repository root") from None


def run(
    oracles: int,
    queries: int,
    seed: int = 0,
    model: str = "examples.invoice:Invoice",
    context: str | None = "examples.invoice:SAMPLE_CONTEXT",
) -> TailResult:
    """Ask ``queries`` random queries of each of ``oracles`` oracles of ``model``; time each."""
    from factorspec_sdk.graph import compile_spec

    cls = load(model)
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        raise SystemExit(f"{model!r} is not a pydantic model")
    spec = compile_spec(cls, None if context is None else load(context))
    names = list(spec.variables)
    times: list[float] = []
    checks = restarts = 0
    for k in range(oracles):
        oracle = spec.new_oracle()
        rng = random.Random(seed + k)
        for _ in range(queries):
            facts = tuple(random_facts(spec, rng))
            var = rng.choice(names)
            t0 = time.perf_counter()
            oracle.feasible(facts)
            oracle.feasible_values(facts, var, limit=_LIMIT)
            times.append((time.perf_counter() - t0) * 1000)
        checks += oracle.stats.solver_checks
        restarts += oracle.stats.restarts
    return TailResult(times, checks, restarts)


def main(argv: Sequence[str] | None = None) -> None:
    """Print the tail of the query times."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--oracles", type=int, default=100, help="oracles, one after another")
    parser.add_argument("--queries", type=int, default=40, help="queries per oracle")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first oracle's queries")
    parser.add_argument("--model", default="examples.invoice:Invoice", help="module:Model")
    parser.add_argument(
        "--context", default="examples.invoice:SAMPLE_CONTEXT", help="module:NAME, or none"
    )
    args = parser.parse_args(argv)
    context = None if args.context == "none" else args.context
    r = run(args.oracles, args.queries, args.seed, args.model, context)
    ordered = sorted(r.query_ms)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    print(f"{len(ordered)} queries of {args.model} ({args.oracles} oracles x {args.queries})")
    print("| query ms | median | p99 | slowest |")
    print("|---|---:|---:|---:|")
    print(f"| | {statistics.median(ordered):.2f} | {p99:.2f} | {ordered[-1]:.1f} |")
    print(f"solver checks {r.solver_checks}, answered by a fresh solver {r.restarts}")
    print(f"queries over 1 s: {sum(t > 1000 for t in ordered)}")


if __name__ == "__main__":
    main()
