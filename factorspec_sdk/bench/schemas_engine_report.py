"""The end-to-end JSON Schema benchmark's report: summaries, ratios, results.md, results.json.

`summarize` folds the `SchemaRecord` rows of `factorspec_sdk.bench.schemas_engine` into one
summary per method: records valid of total, tokens, forwards or requests per record, and the
wall per record and per token (median and mean over the schemas; a schema decoded in
several repeats counts once, with its median over them). `ratios` divides each baseline's
walls by FactorSpec's from the same run (above 1: FactorSpec is faster), and
`repeat_ratios` the same within each repeat alone: their spread is the host's noise.
`SchemaRecordsReport.markdown` renders the tables; `write_outputs` writes ``results.json``
(run facts, summaries, ratios, every record) and ``results.md``.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from factorspec_sdk.bench.schemas_engine import METHODS, SchemaRecord
from factorspec_sdk.bench.schemas_report import fmt_number

__all__ = [
    "WALLS",
    "SchemaRecordsReport",
    "ratios",
    "repeat_ratios",
    "summarize",
    "write_outputs",
]

WALLS = ("record_median_s", "record_mean_s", "token_median_ms", "token_mean_ms")
"""The wall figures of a summary that `ratios` compares."""

_BASE = "factorspec"


def _centre(values: Sequence[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.median(values), statistics.fmean(values)


def summarize(records: Sequence[SchemaRecord]) -> dict[str, dict[str, Any]]:
    """One summary per method, in `METHODS` order.

    Keys: ``records``, ``valid``, ``errors``, ``at_max_tokens`` (records the budget ended),
    ``tokens`` (total), ``tokens_mean``,
    ``forwards_mean``, ``requests_mean`` (over every record), the walls of `WALLS` (per
    record in seconds, per token in ms over the records with tokens; None without any),
    each over the schemas, a schema's wall the median of its repeats (`_per_schema`).
    """
    by_method: dict[str, list[SchemaRecord]] = {}
    for r in records:
        by_method.setdefault(r.method, []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for method in sorted(by_method, key=lambda m: list(METHODS).index(m)):
        rows = by_method[method]
        n = len(rows)
        walls, per_token = _per_schema(rows)
        record_median, record_mean = _centre(walls)
        token_median, token_mean = _centre(per_token)
        out[method] = {
            "records": n,
            "valid": sum(r.valid for r in rows),
            "errors": sum(r.stopped == "error" for r in rows),
            "at_max_tokens": sum(r.stopped == "max_tokens" for r in rows),
            "tokens": sum(r.tokens for r in rows),
            "tokens_mean": sum(r.tokens for r in rows) / n,
            "forwards_mean": sum(r.forwards for r in rows) / n,
            "requests_mean": sum(r.requests for r in rows) / n,
            "record_median_s": record_median,
            "record_mean_s": record_mean,
            "token_median_ms": token_median,
            "token_mean_ms": token_mean,
        }
    return out


def _per_schema(rows: Sequence[SchemaRecord]) -> tuple[list[float], list[float]]:
    """Per schema of ``rows`` (one method's), the median of its repeats: wall and per token.

    The walls in seconds, the walls per token in ms (over the schemas with tokens).
    """
    by_schema: dict[str, list[SchemaRecord]] = {}
    for r in rows:
        by_schema.setdefault(r.schema, []).append(r)
    walls = [statistics.median(r.wall_seconds for r in group) for group in by_schema.values()]
    per_token = [
        statistics.median(1000 * r.wall_seconds / r.tokens for r in group if r.tokens)
        for group in by_schema.values()
        if any(r.tokens for r in group)
    ]
    return walls, per_token


def repeat_ratios(records: Sequence[SchemaRecord]) -> dict[str, list[dict[str, float | None]]]:
    """Each baseline's `ratios` within each repeat alone, in repeat order.

    The records of one repeat ran close together in time, a baseline's beside FactorSpec's
    for each schema; the spread of a ratio over the repeats is the host's noise.
    """
    out: dict[str, list[dict[str, float | None]]] = {}
    for repeat in sorted({r.repeat for r in records}):
        rows = [r for r in records if r.repeat == repeat]
        for method, row in ratios(summarize(rows)).items():
            out.setdefault(method, []).append(row)
    return out


def ratios(summaries: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Each baseline's walls over FactorSpec's (`WALLS`), from the same run.

    Above 1, FactorSpec is faster by that factor; None where either figure is missing or
    FactorSpec's is 0. Empty without a FactorSpec summary.
    """
    base = summaries.get(_BASE)
    if base is None:
        return {}
    out: dict[str, dict[str, float | None]] = {}
    for method, summary in summaries.items():
        if method == _BASE:
            continue
        row: dict[str, float | None] = {}
        for key in WALLS:
            mine, theirs = base[key], summary[key]
            row[key] = None if mine is None or theirs is None or mine == 0 else theirs / mine
        out[method] = row
    return out


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _records_each(repeats: int) -> str:
    if repeats == 1:
        return "one greedy record per method and schema"
    return (
        f"{repeats} greedy records per method and schema (repeats, the methods' order "
        "turned each time; each schema's median wall)"
    )


@dataclass(slots=True)
class SchemaRecordsReport:
    """A finished run: its facts (``config``), every record, the summaries and the ratios."""

    config: dict[str, Any]
    records: list[SchemaRecord]
    files: list[Path] = field(default_factory=list)

    @property
    def summaries(self) -> dict[str, dict[str, Any]]:
        """`summarize` of the records."""
        return summarize(self.records)

    def to_json(self) -> dict[str, Any]:
        """Facts, summaries, ratios and every record, as JSON data."""
        summaries = self.summaries
        return {
            "config": self.config,
            "summaries": summaries,
            "ratios": ratios(summaries),
            "repeat_ratios": repeat_ratios(self.records),
            "records": [asdict(r) for r in self.records],
        }

    def markdown(self) -> str:
        """The report: the run, the per-method table, the ratios, what was screened out."""
        c = self.config
        repeats = int(c.get("repeats") or 1)
        vllm = c.get("engine") == "vllm"
        calls = "requests / record" if vllm else "forwards / record"
        summaries = self.summaries
        lines = [
            "# JSON Schemas end to end",
            "",
            f"Engine `{c.get('engine')}` {c.get('model', '')}; {c.get('sampled')} schemas "
            f"sampled (seed {c.get('seed')}), {_records_each(repeats)}, "
            f"max_tokens {c.get('max_tokens')}. Machine: {c.get('machine', '?')}; load at "
            f"start {c.get('load_average_at_start')}.",
        ]
        if c.get("command"):
            lines += ["", f"`{c['command']}`"]
        if c.get("warm_up"):
            lines += ["", f"Warm-up (every method, dropped): `{c['warm_up']}`."]
        lines += [
            "",
            f"| method | valid | at max_tokens | errors | tokens / record | {calls} "
            "| s / record (median, mean) | ms / token (median, mean) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for method, s in summaries.items():
            per_call = s["requests_mean"] if vllm else s["forwards_mean"]
            lines.append(
                f"| {method} | {s['valid']}/{s['records']} | {s['at_max_tokens']} "
                f"| {s['errors']} | {fmt_number(s['tokens_mean'])} "
                f"| {fmt_number(per_call)} "
                f"| {fmt_number(s['record_median_s'], 2)}, {fmt_number(s['record_mean_s'], 2)} "
                f"| {fmt_number(s['token_median_ms'])}, {fmt_number(s['token_mean_ms'])} |"
            )
        table = ratios(summaries)
        if table:
            lines += [
                "",
                "Each baseline's wall over FactorSpec's, same run (above 1: FactorSpec faster):",
                "",
                "| method | per record (median) | per record (mean) | per token (median) "
                "| per token (mean) |",
                "|---|---:|---:|---:|---:|",
            ]
            for method, row in table.items():
                lines.append(f"| {method} | " + " | ".join(_ratio(row[k]) for k in WALLS) + " |")
        if table and repeats > 1:
            lines += [
                "",
                "The same within each repeat alone (one figure per repeat, in order):",
                "",
                "| method | per record (median) | per record (mean) | per token (median) "
                "| per token (mean) |",
                "|---|---:|---:|---:|---:|",
            ]
            for method, rows in repeat_ratios(self.records).items():
                cells = [", ".join(_ratio(row[k]) for row in rows) for k in WALLS]
                lines.append(f"| {method} | " + " | ".join(cells) + " |")
        out = c.get("screened_out") or {}
        if out:
            said = ", ".join(f"{reason}: {n}" for reason, n in sorted(out.items()))
            lines += ["", f"Screened out before the sample was full ({sum(out.values())}): {said}."]
        else:
            lines += ["", "No schema was screened out."]
        return "\n".join(lines) + "\n"


def write_outputs(report: SchemaRecordsReport, out_dir: Path) -> list[Path]:
    """Write ``results.json`` and ``results.md`` into ``out_dir``; the paths, also in ``files``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = out_dir / "results.json"
    data.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    text = out_dir / "results.md"
    text.write_text(report.markdown())
    report.files = [data, text]
    return report.files
