"""Context shapes benchmark: a spec for a new context, compiled, and bound into its shape.

``python -m factorspec_sdk.bench.context_shapes --problems 10 --variants 6`` (from the
repository root) draws ``--problems`` trip problems (``--cities``, 3-5 by default) and for
each ``--variants`` others with the same cities, flights and events but other stay lengths
(`factorspec_sdk.domains.trip.with_stays`): contexts that differ in their ints only; the
same again as dated trips, each starting on its own date. For
every variant it times, in one run, `SpecCompiler.compile_spec` on a new shape (the
compiler's caches cleared: a compile from the model) against the same once the shape has
been seen (its ints bound into the shape's lowering, the compiler's ``forms``), and prints the
medians and their ratio, with the invoice example's tax rates and item limits and the
booking example's seasons beside them (`examples/`, when run from the repository root).
The CPU time is the process's (`time.process_time`); run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import importlib
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from pydantic import BaseModel

if TYPE_CHECKING:
    from factorspec_sdk.graph import SpecCompiler

__all__ = ["ShapeResult", "dated_contexts", "main", "run_contexts", "trip_contexts"]


@dataclass(frozen=True, slots=True)
class ShapeResult:
    """Per context after each shape's first: CPU ms compiled from the model, and bound.

    Attributes:
        name: what the contexts are.
        compiled_ms: `compile_spec` with both caches cold (a new shape).
        bound_ms: `compile_spec` after the shape's first context (the second makes the
            shape's lowering, so it is in ``first_bind_ms`` and not here).
        first_bind_ms: each shape's second context: the lowering with parameters, and a bind.
    """

    name: str
    compiled_ms: list[float]
    bound_ms: list[float]
    first_bind_ms: list[float]


def trip_contexts(
    problems: int, variants: int, cities: tuple[int, int], seed: int
) -> list[list[object]]:
    """Per problem: it and ``variants`` others of its shape (other stay lengths)."""
    from factorspec_sdk.domains.trip import MAX_STAY, MIN_STAY, generate_problems, with_stays

    rng = random.Random(seed)
    out: list[list[object]] = []
    for problem in generate_problems(problems, cities, seed=seed):
        group: list[object] = [problem]
        for _ in range(variants):
            stays = [rng.randint(MIN_STAY, MAX_STAY) for _ in problem.golden]
            group.append(with_stays(problem, stays))
        out.append(group)
    return out


def run_contexts(
    name: str,
    model: type[BaseModel],
    groups: Sequence[Sequence[object]],
    compiler: SpecCompiler | None = None,
) -> ShapeResult:
    """Time each group's contexts compiled cold and bound (see `ShapeResult`).

    ``compiler``: the compiler to time (its caches are cleared on the way; None: a new one).
    """
    from factorspec_sdk.graph import SpecCompiler

    compiler = compiler if compiler is not None else SpecCompiler()
    compile_spec = compiler.compile_spec

    def cpu_ms(fn: Callable[[], object]) -> float:
        t0 = time.process_time()
        fn()
        return (time.process_time() - t0) * 1000

    compiled: list[float] = []
    bound: list[float] = []
    first: list[float] = []
    for group in groups:
        for c in group[1:]:
            compiler.clear()
            compiled.append(cpu_ms(functools.partial(compile_spec, model, c)))
        compiler.clear()
        compile_spec(model, group[0])
        for i, c in enumerate(group[1:]):
            ms = cpu_ms(functools.partial(compile_spec, model, c))
            (first if i == 0 else bound).append(ms)
    return ShapeResult(name, compiled, bound, first)


def dated_contexts(groups: Sequence[Sequence[object]], seed: int) -> list[list[object]]:
    """The trip groups, each context starting on its own date (2026-2028)."""
    from factorspec_sdk.domains.trip import TripProblem
    from factorspec_sdk.domains.trip_dates import dated_problem

    rng = random.Random(seed)
    first = dt.date(2026, 1, 1)
    return [
        [
            dated_problem(cast(TripProblem, p), first + dt.timedelta(days=rng.randint(0, 1000)))
            for p in g
        ]
        for g in groups
    ]


def _invoice_contexts(n: int, seed: int) -> tuple[type[BaseModel], list[list[object]]] | None:
    try:
        invoice = importlib.import_module("examples.invoice")
    except ImportError:
        return None
    pairs = [(t, m) for t in range(31) for m in range(1, 7)]
    group: list[object] = [
        invoice.InvoiceContext(tax_rate_percent=t, max_items=m)
        for t, m in random.Random(seed).sample(pairs, min(n, len(pairs)))
    ]
    return invoice.Invoice, [group]


def _booking_contexts(n: int) -> tuple[type[BaseModel], list[list[object]]] | None:
    try:
        booking = importlib.import_module("examples.booking")
    except ImportError:
        return None
    group: list[object] = [booking.later_season(booking.SAMPLE_CONTEXT, k) for k in range(n)]
    return booking.Booking, [group]


def main(argv: Sequence[str] | None = None) -> None:
    """Print the medians of the compiled and the bound CPU time, and their ratio."""
    from factorspec_sdk.domains.trip import Itinerary
    from factorspec_sdk.domains.trip_dates import DatedItinerary
    from factorspec_sdk.graph import SpecCompiler

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--problems", type=int, default=10, help="trip problems (shapes)")
    parser.add_argument("--variants", type=int, default=6, help="other stay lengths per problem")
    parser.add_argument("--cities", default="3-5", help="city count range, e.g. 3-5")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    lo, _, hi = args.cities.partition("-")
    cities = (int(lo), int(hi or lo))
    trips = trip_contexts(args.problems, args.variants, cities, args.seed)
    compiler = SpecCompiler()
    results = [
        run_contexts(f"trip, {args.cities} cities (stay lengths)", Itinerary, trips, compiler),
        run_contexts(
            f"dated trip, {args.cities} cities (start date, stay lengths)",
            DatedItinerary,
            dated_contexts(trips, args.seed),
            compiler,
        ),
    ]
    n = args.problems * args.variants + 1
    invoice = _invoice_contexts(n, args.seed)
    booking = _booking_contexts(n)
    if invoice is not None and booking is not None:
        results.append(run_contexts("invoice (tax rate, item limit)", *invoice, compiler))
        results.append(run_contexts("booking (season dates)", *booking, compiler))
    print("| contexts | n | compiled ms | bound ms | ratio | first bind ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        c, b = statistics.median(r.compiled_ms), statistics.median(r.bound_ms)
        f = statistics.median(r.first_bind_ms)
        print(f"| {r.name} | {len(r.bound_ms)} | {c:.1f} | {b:.1f} | {c / b:.2f}x | {f:.1f} |")
    if invoice is None or booking is None:
        print("(invoice and booking skipped: examples/ is importable from the repository root)")
    stats = compiler.form_stats
    print(
        f"shape lowerings made {stats.made}, declined {stats.declined}, "
        f"binds {stats.bound}, diverged {stats.diverged}"
    )


if __name__ == "__main__":
    main()
