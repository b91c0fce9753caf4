"""The trip benchmark's results: one record per (problem, method), summaries, ratios, a report.

`BenchReport` is what a run returns and what ``results.json`` holds (`BenchReport.to_json`,
`BenchReport.from_json`); `merge_reports` joins the shards of one run and `resumed_report`
reads a stopped run back to continue it. Rendering (Markdown, plots, files) is `report`'s job.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from factorspec_sdk.bench.trip.options import BASELINES, FACTORSPEC_METHODS, METHODS, NGRAM_PREFIX

__all__ = [
    "SAME_IN_EVERY_SHARD",
    "BenchReport",
    "RecordResult",
    "Summary",
    "best_ngram",
    "merge_reports",
    "ratios",
    "resumed_report",
    "summarize",
]


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
    runs = [m for m in summaries if m.startswith(NGRAM_PREFIX)]
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
        from factorspec_sdk.bench.trip.report import markdown  # report renders this class

        return markdown(self)


SAME_IN_EVERY_SHARD: tuple[str, ...] = (
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
"""Configuration keys that every shard of one run (and a resumed run) must agree on."""


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
        for key in SAME_IN_EVERY_SHARD:
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


def resumed_report(fresh: BenchReport, out_dir: Path | None) -> tuple[BenchReport, set[int]]:
    """The stopped run in ``out_dir`` with ``fresh``'s settings, and its finished problems.

    A problem counts as finished when it has a record for every method; records of
    unfinished problems are dropped (they are decoded again).

    Raises:
        ValueError: no ``results.json`` there, or one of a run with other settings.
    """
    if out_dir is None or not (out_dir / "results.json").is_file():
        raise ValueError(f"nothing to resume: no results.json in {out_dir}")
    old = BenchReport.from_json(json.loads((out_dir / "results.json").read_text()))
    for key in (*SAME_IN_EVERY_SHARD, "shard"):
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
