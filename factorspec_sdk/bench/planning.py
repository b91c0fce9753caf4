"""Planning benchmark: FactorSpec's own CPU per trip record, on the scripted engine.

``python -m factorspec_sdk.bench.planning --n 24 --cities 3-5`` decodes ``n`` trip records
(`factorspec_sdk.domains.trip.Itinerary`, a distinct problem each, so no cache serves one
record from another) on `factorspec_sdk.bench.load.scripted_engine` (random logits over a tiny
vocabulary: forwards cost ~nothing), the way ``factorspec serve`` handles a request with a
relation IR: the spec from the IR (`spec_from_ir`), then the record (`Decoder`, the oracle,
the writer, planning and masks). Each phase is timed in CPU seconds of this process
(``time.process_time``: the decoder's planning thread included) and in wall seconds; the
oracle's own counters say how many queries and solver checks the record took. Every record
is checked against the spec (`check_record`) and must be valid.

``--gc both`` (the default) runs the records twice, with Python's collector as it comes and
as `factorspec serve` tunes it (`factorspec_sdk.server.gc_policy.tune_gc`), and prints the
ratio. This is the figure the "cheaper planning" target of issue #16 is stated in (CPU per
3-5-city record); run it on an otherwise idle machine, one benchmark at a time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import asdict, dataclass

__all__ = ["RecordCost", "main", "run"]


@dataclass(frozen=True, slots=True)
class RecordCost:
    """What one record cost.

    Attributes:
        cities: cities of the trip.
        spec_cpu_ms: CPU of `spec_from_ir` on the record's IR (a cold one).
        decode_cpu_ms: CPU of decoding the record (oracle, writer, planning, masks, sampling).
        wall_ms: wall time of both.
        tokens: tokens of the record.
        oracle_queries: queries the oracle answered.
        solver_checks: Z3 checks those took.
        oracle_ms: wall time inside the oracle.
    """

    cities: int
    spec_cpu_ms: float
    decode_cpu_ms: float
    wall_ms: float
    tokens: int
    oracle_queries: int
    solver_checks: int
    oracle_ms: float

    @property
    def cpu_ms(self) -> float:
        """The record's whole CPU: spec and decode."""
        return self.spec_cpu_ms + self.decode_cpu_ms


def run(n: int, cities: tuple[int, int], seed: int = 0, *, unique: bool = True) -> list[RecordCost]:
    """Decode ``n`` records (``cities`` inclusive, cycled) and measure each.

    ``unique``: problems with one valid plan (the relations fix every value, as in the load
    script); else problems with several, where the sampled cities are real choices.

    Raises:
        RuntimeError: a record failed or is invalid (FactorSpec guarantees neither happens).
    """
    from factorspec_sdk.bench.load import scripted_engine
    from factorspec_sdk.domains.trip import Itinerary, generate_problem, prompt_for
    from factorspec_sdk.drafter.loop import DecodeJob, Decoder, DecoderConfig
    from factorspec_sdk.drafter.verify import SamplingParams
    from factorspec_sdk.ir import IRCompiler, check_record, to_ir
    from factorspec_sdk.tokens.plan import planner_for

    compiler = IRCompiler()  # every document cold, in each of several runs in one process
    engine = scripted_engine()
    tok = engine.tokenizer
    sizes = list(range(cities[0], cities[1] + 1))
    warm = generate_problem(sizes[0], seed + 10_000, unique=unique)  # imports, first tables
    compiler.spec_from_ir(to_ir(Itinerary, warm))
    out: list[RecordCost] = []
    for i in range(n):
        problem = generate_problem(sizes[i % len(sizes)], seed + i, unique=unique)
        ir = to_ir(Itinerary, problem)
        prompt = tok.encode(prompt_for(problem))
        w0, c0 = time.perf_counter(), time.process_time()
        spec = compiler.spec_from_ir(ir)
        c1 = time.process_time()
        planner = planner_for(spec, tok)
        job = DecodeJob(planner, prompt, SamplingParams(temperature=1.0, seed=i, max_tokens=2048))
        (result,) = Decoder(engine, DecoderConfig()).run([job])
        c2, w2 = time.process_time(), time.perf_counter()
        if result.error is not None:
            raise RuntimeError(f"record {i} failed: {result.error}")
        check_record(spec, result.text)
        stats = planner.writer.oracle.stats
        out.append(
            RecordCost(
                cities=len(problem.cities),
                spec_cpu_ms=(c1 - c0) * 1000,
                decode_cpu_ms=(c2 - c1) * 1000,
                wall_ms=(w2 - w0) * 1000,
                tokens=len(result.tokens),
                oracle_queries=stats.queries,
                solver_checks=stats.solver_checks,
                oracle_ms=stats.seconds * 1000,
            )
        )
    return out


def summary(costs: list[RecordCost]) -> dict[str, float]:
    """Medians and means of the per-record figures."""
    out: dict[str, float] = {"records": float(len(costs))}
    for name in (
        "cpu_ms",
        "spec_cpu_ms",
        "decode_cpu_ms",
        "wall_ms",
        "tokens",
        "oracle_queries",
        "solver_checks",
        "oracle_ms",
    ):
        values = [float(getattr(c, name)) for c in costs]
        out[f"{name}_median"] = statistics.median(values)
        out[f"{name}_mean"] = statistics.fmean(values)
    return out


def _cities(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition("-")
    a, b = int(lo), int(hi or lo)
    if not 2 <= a <= b:
        raise argparse.ArgumentTypeError(f"cities must be N or LO-HI with 2 <= LO <= HI: {text}")
    return a, b


_ROWS = (
    ("CPU ms, all", "cpu_ms"),
    ("CPU ms, spec from IR", "spec_cpu_ms"),
    ("CPU ms, decode", "decode_cpu_ms"),
    ("wall ms", "wall_ms"),
    ("oracle ms (wall)", "oracle_ms"),
    ("oracle queries", "oracle_queries"),
    ("solver checks", "solver_checks"),
    ("tokens", "tokens"),
)


def _table(summaries: dict[str, dict[str, float]]) -> str:
    modes = list(summaries)
    head = "| per record (median) | " + " | ".join(f"gc {m}" for m in modes)
    rule = "|---|" + "---:|" * len(modes)
    if len(modes) == 2:
        head += " | default / tuned"
        rule += "---:|"
    lines = [head + " |", rule]
    for label, key in _ROWS:
        values = [summaries[m][key + "_median"] for m in modes]
        cells = [f"{v:.1f}" for v in values]
        if len(modes) == 2:
            cells.append(f"{values[0] / values[1]:.2f}x" if values[1] else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=24, help="records (a distinct problem each)")
    parser.add_argument("--cities", type=_cities, default=(3, 5), help="N or LO-HI (3-5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first problem")
    parser.add_argument(
        "--gc",
        choices=["default", "tuned", "both"],
        default="both",
        help="Python's collector as it comes, as `factorspec serve` tunes it "
        "(factorspec_sdk.server.gc_policy), or both in this order (default)",
    )
    parser.add_argument(
        "--no-unique",
        dest="unique",
        action="store_false",
        help="problems with several valid plans (default: one, as the load script sends)",
    )
    parser.add_argument("--json", default=None, help="also write the records and summary here")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be at least 1")
    from factorspec_sdk.server.gc_policy import tune_gc

    modes = ["default", "tuned"] if args.gc == "both" else [args.gc]
    costs: dict[str, list[RecordCost]] = {}
    for mode in modes:
        if mode == "tuned":
            tune_gc()
        costs[mode] = run(args.n, args.cities, args.seed, unique=args.unique)
    summaries = {m: summary(c) for m, c in costs.items()}
    lo, hi = args.cities
    plans = "one valid plan" if args.unique else "several valid plans"
    print(f"{args.n} trip records, {lo}-{hi} cities ({plans}), scripted engine, a problem each")
    print(_table(summaries))
    if args.json:
        import json
        from pathlib import Path

        data = {
            m: {"summary": summaries[m], "records": [asdict(c) for c in costs[m]]} for m in modes
        }
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
