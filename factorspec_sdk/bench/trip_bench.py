"""Trip-planning benchmark: FactorSpec against the baselines users would pick instead.

``factorspec bench trip --n 100 --cities 3-10 --methods all --out bench-results/`` decodes the
same NATURAL PLAN-style trip problems (`factorspec_sdk.bench.trip`) with every method on one
engine, greedily, with the same prompt text and the same token budget:

==================  ===========================================================================
method              what it is
==================  ===========================================================================
free                free generation; the JSON is parsed out of the text afterwards
syntax              XGrammar JSON-schema mask token by token (cities as an enum, days bounded
                    by the trip length, exact list lengths), one token per forward
syntax+retry        ``syntax`` plus up to 3 retries naming the violated relations (Instructor)
syntax+ngram-kK     ``syntax`` plus n-gram prompt-lookup drafts of K tokens (vLLM ``ngram``);
                    K in 3, 5, 8, the best one is the ``syntax+ngram`` baseline
factorspec-certain  ``Client(engine, max_guesses=0)``: certain drafts only
factorspec          ``Client(engine)``: certain drafts plus guesses, per-request width
==================  ===========================================================================

Every record is scored with `factorspec_sdk.bench.trip.evaluate` (validity against every
relation of ``examples.itinerary.Itinerary``, exact match against the golden plan). A method
that raises on a record is recorded as an error for that record (invalid, with the message).
Outputs: ``results.json`` (config, every record, summaries, ratios; rewritten after every
problem so a long run can be read while it runs), ``results.md`` and two PNG plots.
"""

from __future__ import annotations

import json
import os
import platform
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from factorspec_sdk.domains.trip import TripProblem, evaluate, generate_problem, prompt_for
from factorspec_sdk.engines.completion import CompletionEngine
from factorspec_sdk.engines.protocol import ChatMessage, Engine

if TYPE_CHECKING:
    from pydantic import BaseModel

    from factorspec_sdk.bench.baselines import DecodeRun, Steps, XGrammarBackend
    from factorspec_sdk.client import Client, GenerationResult

__all__ = [
    "BASELINES",
    "METHODS",
    "NGRAM_KS",
    "BenchReport",
    "RecordResult",
    "Summary",
    "expand_methods",
    "generate_bench_problems",
    "merge_reports",
    "parse_shard",
    "itinerary_schema",
    "make_engine",
    "parse_cities",
    "ratios",
    "run_trip_bench",
    "summarize",
    "write_outputs",
]

NGRAM_KS: tuple[int, ...] = (3, 5, 8)
"""Draft lengths tried for the n-gram baseline; the best is reported."""

METHODS: dict[str, str] = {
    "free": "free generation, JSON parsed afterwards",
    "syntax": "XGrammar JSON-schema mask, token by token",
    "syntax+retry": "XGrammar mask + up to 3 retries naming the violated relations",
    **{
        f"syntax+ngram-k{k}": f"XGrammar mask + n-gram prompt-lookup drafts of {k} tokens"
        for k in NGRAM_KS
    },
    "factorspec-certain": "FactorSpec, certain drafts only (max_guesses=0)",
    "factorspec": "FactorSpec, certain drafts + guesses (per-request width)",
}
"""Every method the benchmark knows, in the order it runs them."""

FACTORSPEC_METHODS: tuple[str, ...] = ("factorspec-certain", "factorspec")
BASELINES: tuple[str, ...] = ("free", "syntax", "syntax+retry", "syntax+ngram")
"""Baselines the ratios compare against (``syntax+ngram`` is its best ``k``)."""

_NGRAM_PREFIX = "syntax+ngram-k"


def expand_methods(spec: str | Iterable[str]) -> list[str]:
    """Method names from ``"all"``, a comma-separated string or a list.

    ``syntax+ngram`` stands for every ``syntax+ngram-kK``; ``baselines`` for the four
    baselines; the result is in `METHODS` order without repeats.

    Raises:
        ValueError: an unknown method name (the message lists the known ones).
    """
    items = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    chosen: set[str] = set()
    for item in items:
        if not item:
            continue
        if item == "all":
            chosen.update(METHODS)
        elif item == "baselines":
            chosen.update(m for m in METHODS if m not in FACTORSPEC_METHODS)
        elif item == "syntax+ngram":
            chosen.update(f"{_NGRAM_PREFIX}{k}" for k in NGRAM_KS)
        elif item in METHODS:
            chosen.add(item)
        else:
            known = ", ".join(["all", "baselines", "syntax+ngram", *METHODS])
            raise ValueError(f"unknown method {item!r}; known: {known}")
    if not chosen:
        raise ValueError("no method chosen")
    return [m for m in METHODS if m in chosen]


def parse_cities(text: str) -> tuple[int, int]:
    """``"3-10"`` -> ``(3, 10)``; ``"5"`` -> ``(5, 5)``.

    Raises:
        ValueError: not a count or a range of counts within 3..10.
    """
    from factorspec_sdk.domains.trip import MAX_CITIES, MIN_CITIES

    parts = text.replace("..", "-").split("-")
    try:
        low, high = (int(parts[0]), int(parts[-1])) if len(parts) <= 2 else (0, -1)
    except ValueError:
        raise ValueError(f"--cities takes N or LOW-HIGH, got {text!r}") from None
    if not MIN_CITIES <= low <= high <= MAX_CITIES:
        raise ValueError(f"--cities must lie within {MIN_CITIES}-{MAX_CITIES}, got {text!r}")
    return low, high


def generate_bench_problems(
    n: int, cities: tuple[int, int], seed: int, unique: bool = True
) -> list[TripProblem]:
    """``n`` problems with a city count drawn uniformly from ``cities``.

    With ``unique`` these are exactly `factorspec_sdk.bench.trip.generate_problems`; without
    it the same draws keep every valid plan (the model must make genuine choices).
    """
    low, high = cities
    master = random.Random(seed)
    problems = []
    for _ in range(n):
        num = master.randint(low, high)
        problems.append(generate_problem(num, master.randrange(2**31), unique=unique))
    return problems


def itinerary_schema(problem: TripProblem) -> dict[str, Any]:
    """The strongest JSON schema a user would write for one problem's itinerary.

    Cities are an enum of the trip's cities, every day is bounded to ``1..total_days``, and
    both lists have exact lengths (``minItems == maxItems``): one stay per city, one flight
    fewer. Everything the schema language cannot say (the day chain, the stay lengths, which
    flights exist, no repeated city) is left to the model.
    """
    cities = list(problem.cities)
    n = len(cities)
    day = {"type": "integer", "minimum": 1, "maximum": problem.total_days}
    city = {"type": "string", "enum": cities}

    def obj(props: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": props,
            "required": list(props),
            "additionalProperties": False,
        }

    stay = obj({"city": city, "first_day": day, "last_day": day})
    flight = obj({"day": day, "origin": city, "destination": city})
    return obj(
        {
            "stays": {"type": "array", "items": stay, "minItems": n, "maxItems": n},
            "flights": {"type": "array", "items": flight, "minItems": n - 1, "maxItems": n - 1},
        }
    )


# --------------------------------------------------------------------------- results


@dataclass(slots=True)
class RecordResult:
    """One method on one problem.

    Attributes:
        method: the method name.
        problem: index of the problem in the run.
        cities: number of cities of the problem.
        valid: the record passes every relation.
        exact_match: the ordered (city, days) list equals the golden plan.
        parse_ok: the answer parsed as JSON.
        tokens: generated tokens (all attempts for retries; end tokens excluded).
        forwards: forward passes (verify steps for FactorSpec).
        wall_seconds: wall time of the record (grammar or spec compilation included).
        forward_seconds: time in the engine's forwards.
        critical_seconds: oracle + mask time the decoding thread waited for (FactorSpec), or
            the grammar mask time (baselines, always on the critical path).
        attempts: decodes run (retries) — 1 otherwise.
        drafted: draft tokens sent for verification (n-gram and FactorSpec).
        draft_accepted: draft tokens accepted (n-gram; guesses accepted for FactorSpec).
        stopped: why decoding ended (``eos``, ``grammar``, ``max_tokens``, ``done``, ``error``).
        violations: what the record violates (relation names, schema or parse errors).
        error: the exception, when the method crashed on this record.
        text: the answer text.
    """

    method: str
    problem: int
    cities: int
    valid: bool = False
    exact_match: bool = False
    parse_ok: bool = False
    tokens: int = 0
    forwards: int = 0
    wall_seconds: float = 0.0
    forward_seconds: float = 0.0
    critical_seconds: float = 0.0
    attempts: int = 1
    drafted: int = 0
    draft_accepted: int = 0
    stopped: str = ""
    violations: list[str] = field(default_factory=list)
    error: str | None = None
    text: str = ""


@dataclass(slots=True)
class Summary:
    """Aggregates of one method over a set of records (all, or one city count).

    Rates are ratios of sums (tokens per step = all tokens / all forwards), so long records
    weigh more than short ones, as in a throughput measurement.
    """

    method: str
    cities: int | None
    records: int = 0
    valid: int = 0
    exact: int = 0
    parsed: int = 0
    errors: int = 0
    tokens: int = 0
    forwards: int = 0
    wall_seconds: float = 0.0
    forward_seconds: float = 0.0
    critical_seconds: float = 0.0

    @property
    def valid_pct(self) -> float:
        """Valid records, percent."""
        return 100.0 * self.valid / self.records if self.records else 0.0

    @property
    def exact_pct(self) -> float:
        """Exact matches, percent."""
        return 100.0 * self.exact / self.records if self.records else 0.0

    @property
    def tokens_per_step(self) -> float:
        """Generated tokens per forward."""
        return self.tokens / self.forwards if self.forwards else 0.0

    @property
    def tokens_per_second(self) -> float:
        """Generated tokens per second of wall time."""
        return self.tokens / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def wall_per_record(self) -> float:
        """Mean wall seconds per record."""
        return self.wall_seconds / self.records if self.records else 0.0

    @property
    def valid_per_second(self) -> float:
        """Valid records per second of wall time."""
        return self.valid / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def critical_share(self) -> float:
        """Share of wall time spent waiting for oracle + masks on the critical path."""
        return self.critical_seconds / self.wall_seconds if self.wall_seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        """The counts and the derived rates."""
        out = asdict(self)
        for name in (
            "valid_pct",
            "exact_pct",
            "tokens_per_step",
            "tokens_per_second",
            "wall_per_record",
            "valid_per_second",
            "critical_share",
        ):
            out[name] = getattr(self, name)
        return out


def summarize(records: Iterable[RecordResult]) -> dict[str, dict[int | None, Summary]]:
    """Per method: the overall `Summary` (key ``None``) and one per city count."""
    out: dict[str, dict[int | None, Summary]] = {}
    for r in records:
        by_city = out.setdefault(r.method, {})
        for key in (None, r.cities):
            s = by_city.get(key)
            if s is None:
                s = by_city[key] = Summary(r.method, key)
            s.records += 1
            s.valid += r.valid
            s.exact += r.exact_match
            s.parsed += r.parse_ok
            s.errors += r.error is not None
            s.tokens += r.tokens
            s.forwards += r.forwards
            s.wall_seconds += r.wall_seconds
            s.forward_seconds += r.forward_seconds
            s.critical_seconds += r.critical_seconds
    ordered = {m: out[m] for m in METHODS if m in out}
    ordered.update({m: v for m, v in out.items() if m not in ordered})
    for method, by_city in ordered.items():
        ordered[method] = dict(
            sorted(by_city.items(), key=lambda kv: -1 if kv[0] is None else kv[0])
        )
    return ordered


def best_ngram(summaries: dict[str, dict[int | None, Summary]]) -> str | None:
    """The n-gram setting with the most valid records/s, then the most tokens/s."""
    runs = [m for m in summaries if m.startswith(_NGRAM_PREFIX)]
    if not runs:
        return None
    return max(
        runs,
        key=lambda m: (summaries[m][None].valid_per_second, summaries[m][None].tokens_per_second),
    )


def ratios(summaries: dict[str, dict[int | None, Summary]]) -> list[dict[str, Any]]:
    """FactorSpec against every baseline measured in the same run.

    For each FactorSpec method and baseline (``syntax+ngram`` = its best ``k``): valid
    records/s ratio (``None`` when the baseline produced no valid record), decode tokens/s
    ratio and wall-time-per-record speedup (baseline / FactorSpec).
    """
    rows: list[dict[str, Any]] = []
    ngram = best_ngram(summaries)
    for fs in FACTORSPEC_METHODS:
        if fs not in summaries:
            continue
        ours = summaries[fs][None]
        for base in BASELINES:
            name = ngram if base == "syntax+ngram" else base
            if name is None or name not in summaries:
                continue
            theirs = summaries[name][None]
            rows.append(
                {
                    "method": fs,
                    "baseline": name,
                    "valid_per_second": (
                        ours.valid_per_second / theirs.valid_per_second
                        if theirs.valid_per_second
                        else None
                    ),
                    "tokens_per_second": (
                        ours.tokens_per_second / theirs.tokens_per_second
                        if theirs.tokens_per_second
                        else None
                    ),
                    "wall_speedup": (
                        theirs.wall_per_record / ours.wall_per_record
                        if ours.wall_per_record
                        else None
                    ),
                }
            )
    return rows


@dataclass(slots=True)
class BenchReport:
    """A benchmark run: its configuration, every record, and where the outputs went.

    Attributes:
        config: what was run (n, cities, methods, engine, seed, unique, budget, machine).
        records: one `RecordResult` per (problem, method), in run order.
        out_dir: folder of ``results.json``, ``results.md`` and the plots (None: not written).
        files: the files written.
    """

    config: dict[str, Any]
    records: list[RecordResult]
    out_dir: Path | None = None
    files: list[Path] = field(default_factory=list)

    @property
    def summaries(self) -> dict[str, dict[int | None, Summary]]:
        """Per method, overall (key ``None``) and per city count."""
        return summarize(self.records)

    def to_json(self) -> dict[str, Any]:
        """Everything, JSON-ready."""
        summaries = self.summaries
        return {
            "config": self.config,
            "summaries": {
                m: {"all" if k is None else str(k): s.to_json() for k, s in by.items()}
                for m, by in summaries.items()
            },
            "best_ngram": best_ngram(summaries),
            "ratios": ratios(summaries),
            "records": [asdict(r) for r in self.records],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], out_dir: Path | None = None) -> BenchReport:
        """A report back from ``results.json`` (e.g. of a run still in progress)."""
        records = [RecordResult(**r) for r in data.get("records", [])]
        return cls(dict(data.get("config", {})), records, out_dir)

    def markdown(self) -> str:
        """The results as Markdown: overall table, ratios, per city count tables."""
        return _markdown(self)


_SAME_IN_EVERY_SHARD = (
    "n",
    "cities",
    "methods",
    "engine",
    "model",
    "dtype",
    "seed",
    "unique",
    "max_tokens",
    "max_retries",
    "batch",
)


def parse_shard(text: str) -> tuple[int, int]:
    """``"0/2"`` -> ``(0, 2)``: shard ``K`` of ``M`` (problems whose index is K mod M).

    Raises:
        ValueError: not ``K/M`` with ``0 <= K < M``.
    """
    try:
        k_text, m_text = text.split("/")
        k, m = int(k_text), int(m_text)
    except ValueError:
        raise ValueError(f"--shard wants K/M (e.g. 0/2), got {text!r}") from None
    if not 0 <= k < m:
        raise ValueError(f"--shard {text}: need 0 <= K < M")
    return k, m


def merge_reports(reports: Sequence[BenchReport], out_dir: Path | None = None) -> BenchReport:
    """One report from the shards of one run (``run_trip_bench(..., shard=(k, m))``).

    The shards must agree on what was run (problem set, methods, engine, budget); records are
    ordered by problem, then method, as an unsharded run orders them. The merged run is
    complete when every shard is and no problem index is missing.

    Raises:
        ValueError: no reports, shards of different runs, or a problem in two shards.
    """
    if not reports:
        raise ValueError("nothing to merge")
    first = reports[0].config
    for other in reports[1:]:
        for key in _SAME_IN_EVERY_SHARD:
            if other.config.get(key) != first.get(key):
                raise ValueError(
                    f"shards of different runs: {key} is {first.get(key)!r} in one and "
                    f"{other.config.get(key)!r} in another"
                )
    seen: dict[int, int] = {}
    for i, rep in enumerate(reports):
        for problem in {r.problem for r in rep.records}:
            if seen.setdefault(problem, i) != i:
                raise ValueError(f"problem #{problem} is in two of the merged results")
    order = {m: i for i, m in enumerate(METHODS)}
    records = sorted(
        (r for rep in reports for r in rep.records),
        key=lambda r: (r.problem, order.get(r.method, len(order))),
    )
    config = {k: v for k, v in first.items() if k != "shard"}
    config["shards"] = [rep.config.get("shard", "all") for rep in reports]
    config["started"] = min(str(rep.config.get("started", "")) for rep in reports)
    config["complete"] = all(rep.config.get("complete") for rep in reports) and len(seen) == int(
        first.get("n", len(seen))
    )
    if config["complete"]:
        config["finished"] = max(str(rep.config.get("finished", "")) for rep in reports)
    else:
        config.pop("finished", None)
    return BenchReport(config, records, out_dir)


# --------------------------------------------------------------------------- formatting


def _pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100.0 * part / whole:.0f}%)" if whole else "-"


def _ratio(x: float | None, baseline_zero: str = "∞ (baseline 0 valid)") -> str:
    if x is None:
        return baseline_zero
    return f"{x:.2f}x"


def _table(rows: Sequence[Summary], show_method: bool, best: str | None) -> list[str]:
    head = "method" if show_method else "cities"
    lines = [
        f"| {head} | records | valid | exact match | tokens/step | decode tok/s "
        "| wall s/record | valid records/s | oracle+mask on critical path | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        label = s.method if show_method else str(s.cities)
        if show_method and s.method == best:
            label += " (best k)"
        critical = f"{100.0 * s.critical_share:.1f}%"
        lines.append(
            f"| {label} | {s.records} | {_pct(s.valid, s.records)} "
            f"| {_pct(s.exact, s.records)} | {s.tokens_per_step:.2f} "
            f"| {s.tokens_per_second:.1f} | {s.wall_per_record:.2f} "
            f"| {s.valid_per_second:.4f} | {critical} | {s.errors} |"
        )
    return lines


def _run_lines(cfg: dict[str, Any]) -> list[str]:
    resumed = cfg.get("resumed") or []
    lines = (
        [
            f"- stopped between batches and continued with `--resume` {len(resumed)} time(s) "
            f"(at {', '.join(map(str, resumed))}); each batch is timed on its own"
        ]
        if resumed
        else []
    )
    return lines + _shard_lines(cfg)


def _shard_lines(cfg: dict[str, Any]) -> list[str]:
    if "shard" in cfg:
        return [f"- shard {cfg['shard']} of the problem set (problems whose index is K mod M)"]
    shards = cfg.get("shards")
    if shards and len(shards) > 1:
        return [
            f"- run as {len(shards)} shards ({', '.join(map(str, shards))}) in parallel "
            "processes on the same machine; each record's times are its own process's"
        ]
    return []


def _markdown(report: BenchReport) -> str:
    cfg = report.config
    summaries = report.summaries
    best = best_ngram(summaries)
    problems = len({r.problem for r in report.records})
    lines = [
        "# Trip-planning benchmark",
        "",
        f"- problems: {problems} of {cfg.get('n', '?')} "
        f"({'complete' if cfg.get('complete') else 'partial: the run was still going'}), "
        f"{cfg.get('cities', '?')} cities, seed {cfg.get('seed', '?')}, "
        f"{'unique golden plan' if cfg.get('unique', True) else 'several valid plans allowed'}",
        f"- engine: {cfg.get('engine', '?')} ({cfg.get('model', '')} {cfg.get('dtype', '')}), "
        f"greedy, max_tokens {cfg.get('max_tokens', '?')}, machine: {cfg.get('machine', '?')}",
        *(
            [
                f"- batch {cfg['batch']}: every method decoded up to {cfg['batch']} problems of "
                "one city count together (one batched forward per step); each record is "
                "charged its batch's wall time over the batch size"
            ]
            if int(cfg.get("batch", 1)) > 1
            else []
        ),
        "- rates are ratios of sums over the records; every method ran on the same problems "
        "in the same run, one after another per problem",
        *_run_lines(cfg),
        "",
        "## All records",
        "",
        *_table([by[None] for by in summaries.values()], True, best),
        "",
    ]
    rows = ratios(summaries)
    if rows:
        lines += [
            "## FactorSpec against each baseline (same run)",
            "",
            "| FactorSpec method | baseline | valid records/s ratio | decode tok/s ratio "
            "| wall/record speedup |",
            "|---|---|---|---|---|",
        ]
        for row in rows:
            lines.append(
                f"| {row['method']} | {row['baseline']} | {_ratio(row['valid_per_second'])} "
                f"| {_ratio(row['tokens_per_second'], '-')} | {_ratio(row['wall_speedup'], '-')} |"
            )
        lines.append("")
    lines += ["## Per city count", ""]
    for method, by in summaries.items():
        per_city = [s for k, s in by.items() if k is not None]
        lines += [f"### {method}", "", *_table(per_city, False, None), ""]
    errors = [r for r in report.records if r.error]
    if errors:
        lines += ["## Errors", ""]
        for r in errors[:20]:
            lines.append(f"- {r.method}, problem {r.problem}: {r.error}")
        lines.append("")
    return "\n".join(lines)


def _plots(report: BenchReport, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summaries = report.summaries
    written: list[Path] = []

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for method, by in summaries.items():
        keys = sorted(k for k in by if k is not None)
        ax.plot(keys, [by[k].tokens_per_step for k in keys], marker="o", label=method)
    ax.set_xlabel("cities")
    ax.set_ylabel("tokens per verify step (forward)")
    ax.set_title("Tokens per forward by city count")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "tokens_per_step.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = list(summaries)
    values = [summaries[m][None].valid_per_second for m in names]
    bars = ax.bar(range(len(names)), values, color="tab:blue")
    for bar, m in zip(bars, names, strict=True):
        s = summaries[m][None]
        ax.annotate(
            f"{s.valid_per_second:.3f}\n({s.valid}/{s.records} valid)",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=7,
        )
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("valid records per second")
    ax.set_title("Valid records per second of wall time")
    ax.margins(y=0.2)
    fig.tight_layout()
    path = out_dir / "valid_records_per_second.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)
    return written


def write_outputs(report: BenchReport, out_dir: Path, plots: bool = True) -> list[Path]:
    """Write ``results.json``, ``results.md`` and (with ``plots``) the PNGs into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = report.to_json()
    json_path = out_dir / "results.json"
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(json_path)
    md_path = out_dir / "results.md"
    md_path.write_text(report.markdown() + "\n")
    files = [json_path, md_path]
    if plots and report.records:
        files += _plots(report, out_dir)
    report.out_dir = out_dir
    report.files = files
    return files


# --------------------------------------------------------------------------- engines


def _tiny_scripted_engine() -> Engine:
    """A numpy random model over printable ASCII, so the whole runner works without torch."""
    from factorspec_sdk.engines.scripted import ScriptedEngine
    from factorspec_sdk.tokens.vocab import TokenizerInfo

    pieces = sorted({chr(c) for c in range(32, 127)} | {"\n"})
    pieces += ['{"', '": ', ', "', '"}', "}, {", "city", "first_day", "last_day", "day"]
    return ScriptedEngine.random(TokenizerInfo.tiny(pieces), seed=0, temperature_scale=2.0)


def make_engine(name: str, **options: object) -> Engine | CompletionEngine:
    """An engine by name: every name `factorspec_sdk.engines.create_engine` knows.

    ``"scripted"`` without options builds a tiny random model over printable ASCII (a smoke
    test of the runner; its scores mean nothing).

    Raises:
        EngineError: an unknown name (the message lists the known ones) or a backend that
            cannot be loaded.
    """
    from factorspec_sdk.engines import ENGINES, create_engine
    from factorspec_sdk.errors import EngineError

    if name not in ENGINES:
        known = ", ".join(sorted(ENGINES))
        raise EngineError(f"unknown engine {name!r}; known engines: {known}")
    if name == "scripted" and not options:
        return _tiny_scripted_engine()
    return create_engine(name, **options)


# --------------------------------------------------------------------------- runner


@dataclass(slots=True)
class _Setup:
    """What the methods share for one run."""

    engine: Engine | CompletionEngine
    model: type[BaseModel]
    max_tokens: int
    max_retries: int
    backend: XGrammarBackend | None = None
    clients: dict[str, Client] = field(default_factory=dict)

    @property
    def logits_engine(self) -> Engine:
        """The engine as a logits `Engine` (the token-level baselines need one)."""
        if isinstance(self.engine, CompletionEngine):
            raise TypeError(f"the {self.engine.name} engine returns no logits")
        return self.engine

    def xgrammar(self) -> XGrammarBackend:
        if self.backend is None:
            from factorspec_sdk.bench.baselines import XGrammarBackend

            self.backend = XGrammarBackend(self.logits_engine.tokenizer)
        return self.backend


@dataclass(slots=True)
class _Task:
    """One problem as the methods see it."""

    index: int
    problem: TripProblem
    prompt: str
    messages: list[ChatMessage]
    prompt_ids: list[int]


def _relation_docs(model: type[BaseModel]) -> dict[str, str]:
    from factorspec_sdk.relations.decorator import relations_of

    out = {}
    for info in relations_of(model):
        doc = (info.func.__doc__ or "").strip().splitlines()
        out[info.name] = doc[0].strip() if doc else ""
    return out


def violation_sentences(violations: Sequence[str], docs: dict[str, str]) -> list[str]:
    """The retry message's items: ``name (docstring)`` for relations, errors as they are."""
    out = []
    for v in violations:
        doc = docs.get(v)
        out.append(f"{v} ({doc.rstrip('.')})." if doc else v.rstrip(".") + ".")
    return out


def _fill(record: RecordResult, run: DecodeRun, problem: TripProblem, model: type[Any]) -> None:
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
    _score(record, problem, model)


def _mark_error(record: RecordResult, exc: BaseException) -> None:
    """A method that raised on this record: invalid, with the error's type and message."""
    record.error = f"{type(exc).__name__}: {exc}"
    record.stopped = "error"


def _score(record: RecordResult, problem: TripProblem, model: type[Any]) -> None:
    ev = evaluate(problem, record.text, model)
    record.valid = ev.valid
    record.exact_match = ev.exact_match
    record.parse_ok = ev.parse_ok
    record.violations = list(ev.violations)


def _cold_spec_cache() -> None:
    """Forget compiled specs so each FactorSpec record pays its own compilation."""
    from factorspec_sdk.graph import spec as spec_module

    with spec_module._LOCK:
        spec_module._CACHE.clear()


def _loop(method: str, task: _Task, setup: _Setup, first: DecodeRun | None) -> Steps:
    """The baseline ``method``'s step generator for ``task``."""
    from factorspec_sdk.bench import baselines

    problem = task.problem
    engine = setup.logits_engine
    if method == "free":
        return baselines.free_steps(engine, task.prompt_ids, setup.max_tokens)
    backend = setup.xgrammar()
    schema = itinerary_schema(problem)
    if method == "syntax":
        return baselines.syntax_steps(engine, backend, task.prompt_ids, schema, setup.max_tokens)
    if method.startswith(_NGRAM_PREFIX):
        k = int(method.removeprefix(_NGRAM_PREFIX))
        return baselines.syntax_ngram_steps(
            engine, backend, task.prompt_ids, schema, setup.max_tokens, k
        )
    if method == "syntax+retry":
        docs = _relation_docs(setup.model)

        def decode(ids: list[int]) -> Steps:
            return baselines.syntax_steps(engine, backend, ids, schema, setup.max_tokens)

        def check(text: str) -> list[str]:
            ev = evaluate(problem, text, setup.model)
            return [] if ev.valid else violation_sentences(ev.violations, docs)

        return baselines.retry_steps(engine, task.messages, decode, check, setup.max_retries, first)
    raise ValueError(f"unknown method {method!r}")  # pragma: no cover - expand_methods checks


def _run_batch(
    method: str, tasks: Sequence[_Task], setup: _Setup, syntax_runs: dict[int, DecodeRun]
) -> list[RecordResult]:
    """Run ``method`` on ``tasks`` together (one batched forward per step for all of them).

    Every record of the batch gets the batch's wall time divided by its size (batches hold
    problems of one city count, so per-city-count figures stay meaningful). The greedy
    ``syntax`` runs are kept in ``syntax_runs``: ``syntax+retry``'s first attempt is the same
    prompt decoded the same way, so it is reused (with its cost) instead of decoded again.
    """
    from factorspec_sdk.bench import baselines

    records = [RecordResult(method, t.index, len(t.problem.cities)) for t in tasks]
    started = time.perf_counter()
    if method in FACTORSPEC_METHODS:
        from factorspec_sdk.drafter.verify import SamplingParams

        client = setup.clients[method]
        _cold_spec_cache()
        # Client.generate_batch raises the first error; the bench wants each record's outcome,
        # so it runs the client's own job/decoder/finish steps.
        params = SamplingParams(max_tokens=setup.max_tokens)
        outcomes: list[GenerationResult[Any] | Exception] = []
        jobs = []
        for task in tasks:
            jobs.append(client._job(setup.model, task.prompt, task.problem, None, params, True))
        for task, out in zip(tasks, client._decoder(None).run(jobs), strict=True):
            try:
                outcomes.append(client._finish(setup.model, task.problem, out))
            except Exception as exc:
                outcomes.append(exc)
        wall = (time.perf_counter() - started) / len(tasks)
        for record, result, task in zip(records, outcomes, tasks, strict=True):
            record.wall_seconds = wall
            if isinstance(result, Exception):
                _mark_error(record, result)
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
            _score(record, task.problem, setup.model)
        return records
    firsts: list[DecodeRun | None] = []
    for task in tasks:
        first = syntax_runs.get(task.index) if method == "syntax+retry" else None
        if first is not None and setup.engine.apply_chat_template(task.messages) != task.prompt_ids:
            first = None  # pragma: no cover - the prompts are built to be identical
        firsts.append(first)
    runs: Sequence[DecodeRun | Exception]
    if isinstance(setup.engine, CompletionEngine):
        from factorspec_sdk.bench.completion_baselines import run_completion_baseline

        runs = run_completion_baseline(setup, method, tasks, firsts)
    else:
        loops = [_loop(method, t, setup, f) for t, f in zip(tasks, firsts, strict=True)]
        runs = baselines.drive(setup.engine, loops)
    wall = (time.perf_counter() - started) / len(tasks)
    for record, run, task, first in zip(records, runs, tasks, firsts, strict=True):
        if isinstance(run, Exception):
            _mark_error(record, run)
            record.wall_seconds = wall
            continue
        _fill(record, run, task.problem, setup.model)
        record.wall_seconds = wall
        if first is not None:
            record.wall_seconds += syntax_runs[task.index].wall_seconds
        if method == "syntax":
            run.wall_seconds = wall
            syntax_runs[task.index] = run
    return records


def _resumed(fresh: BenchReport, out_dir: Path | None) -> tuple[BenchReport, set[int]]:
    """The stopped run in ``out_dir`` with ``fresh``'s settings, and its finished problems.

    A problem counts as finished when it has a record for every method; records of
    unfinished problems are dropped (they are decoded again).

    Raises:
        ValueError: no ``results.json`` there, or one of a run with other settings.
    """
    if out_dir is None or not (out_dir / "results.json").is_file():
        raise ValueError(f"nothing to resume: no results.json in {out_dir}")
    old = BenchReport.from_json(json.loads((out_dir / "results.json").read_text()))
    for key in (*_SAME_IN_EVERY_SHARD, "shard"):
        if old.config.get(key) != fresh.config.get(key):
            raise ValueError(
                f"cannot resume: {key} was {old.config.get(key)!r}, now {fresh.config.get(key)!r}"
            )
    methods = set(fresh.config["methods"])
    by_problem: dict[int, set[str]] = {}
    for r in old.records:
        by_problem.setdefault(r.problem, set()).add(r.method)
    done = {p for p, m in by_problem.items() if m >= methods}
    config = dict(old.config)
    config["complete"] = False
    config["resumed"] = [*config.get("resumed", []), fresh.config["started"]]
    kept = [r for r in old.records if r.problem in done]
    return BenchReport(config, kept), done


def _batches(tasks: Sequence[_Task], size: int) -> list[list[_Task]]:
    """``size`` 1: one task per batch, in order; else same-city-count groups of ``size``."""
    if size <= 1:
        return [[t] for t in tasks]
    by_cities: dict[int, list[_Task]] = {}
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

    Returns:
        The `BenchReport` (records, summaries via ``.summaries``, written files).
    """
    from rich.progress import Progress

    from factorspec_sdk.client import Client, schema_hint
    from factorspec_sdk.domains.trip import Itinerary
    from factorspec_sdk.relations.layout import build_layout

    chosen = expand_methods(methods)
    if shard is not None and not 0 <= shard[0] < shard[1]:
        raise ValueError(f"shard {shard[0]}/{shard[1]}: need 0 <= K < M")
    eng = make_engine(engine) if isinstance(engine, str) else engine
    problems = generate_bench_problems(n, cities, seed, unique)
    setup = _Setup(eng, Itinerary, max_tokens, max_retries)
    setup.clients = {
        "factorspec-certain": Client(eng, max_guesses=0),
        "factorspec": Client(eng),
    }
    layout = build_layout(Itinerary)
    hint = schema_hint(layout)
    config: dict[str, Any] = {
        "n": n,
        "cities": f"{cities[0]}-{cities[1]}",
        "methods": chosen,
        "engine": eng.name,
        "model": str(getattr(eng, "model_path", "")),
        "dtype": str(getattr(eng, "dtype", "")),
        "seed": seed,
        "unique": unique,
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
        report, done = _resumed(report, out_dir)
        config = report.config
    verify_cost = getattr(eng, "verify_cost", None)
    if callable(verify_cost):
        verify_cost(1)  # the cost curve is measured on first use: not inside a timed record
    tasks: list[_Task] = []
    client = setup.clients["factorspec"]
    for i, problem in enumerate(problems):
        if (shard is not None and i % shard[1] != shard[0]) or i in done:
            continue
        prompt = prompt_for(problem)
        messages: list[ChatMessage] = [
            {"role": "user", "content": prompt + "\n\nAnswer with JSON of this form: " + hint}
        ]
        ids = client.prompt_ids(prompt, layout=layout)
        tasks.append(_Task(i, problem, prompt, messages, ids))
    if tasks and isinstance(eng, CompletionEngine):
        from factorspec_sdk.bench import completion_baselines

        completion_baselines.prepare(setup, chosen, tasks[0].prompt_ids)
    elif tasks and isinstance(eng, Engine):
        # warm the engine up (first-call overheads) outside the timed records
        ids = tasks[0].prompt_ids
        seq = eng.new_sequence(ids[:-1])
        try:
            eng.extend([(seq, ids[-1:])])
        finally:
            eng.release(seq)

    syntax_runs: dict[int, DecodeRun] = {}
    with Progress(disable=not progress) as bar:
        job = bar.add_task("trip bench", total=len(tasks) * len(chosen))
        for group in _batches(tasks, batch):
            for method in chosen:
                where = ", ".join(f"#{t.index}" for t in group)
                bar.update(job, description=f"{method} {where} ({len(group[0].problem.cities)}c)")
                started = time.perf_counter()
                try:
                    records = _run_batch(method, group, setup, syntax_runs)
                except Exception as exc:  # a crashing method is an error on these records
                    records = []
                    for task in group:
                        record = RecordResult(method, task.index, len(task.problem.cities))
                        _mark_error(record, exc)
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
        from factorspec_sdk.bench import completion_baselines

        completion_baselines.close_ngram_engines()
    config["complete"] = True
    config["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    if out_dir is not None:
        write_outputs(report, out_dir, plots=plots)
    return report
