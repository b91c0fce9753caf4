"""The JSON Schema benchmark's report: per-dataset summaries, results.md, results.json, the plot.

`summarize` folds the `SchemaResult` rows of `factorspec_sdk.bench.schemas` into one summary
per dataset and one overall; `SchemaBenchReport.markdown` renders the tables and
`write_outputs` writes ``results.json`` (run facts, summaries and one row per schema),
``results.md`` and ``acceptance.png`` (the share of schemas each library accepts, per
dataset; needs matplotlib) into the output folder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from factorspec_sdk.bench.schemas import LIBRARIES, MAX_TOKENS, SchemaResult

__all__ = [
    "FS_DECODER",
    "OUTCOMES",
    "SchemaBenchReport",
    "fmt_number",
    "quantiles",
    "summarize",
    "write_outputs",
]

OUTCOMES = ("valid", "invalid", "max_tokens", "error")
"""What a decoded record can come out as."""

_STATUSES = ("accepted", "rejected", "timeout", "error")
_MASKED = ("llguidance", "xgrammar")
_OVERALL = "overall"
FS_DECODER = "factorspec-decoder"
"""FactorSpec's time outside the forwards per token (the masks of free leaves included)."""
_MASK_ROWS = ("factorspec", FS_DECODER, *_MASKED)


def quantiles(values: Sequence[float], qs: Sequence[float], scale: float) -> dict[str, Any]:
    """The ``qs`` percentiles of ``values`` times ``scale`` (``p50`` named ``median``), and ``n``.

    Rounded to 3 decimals; None each when there are no values.
    """
    if not values:
        return {f"p{q:g}" if q != 50 else "median": None for q in qs} | {"n": 0}
    got = np.percentile(np.asarray(values, dtype=np.float64), list(qs)) * scale
    named = {f"p{q:g}" if q != 50 else "median": round(float(v), 3) for q, v in zip(qs, got)}
    return named | {"n": len(values)}


def _summary(rows: Sequence[SchemaResult]) -> dict[str, Any]:
    status = {lib: dict.fromkeys(_STATUSES, 0) for lib in LIBRARIES}
    warned = dict.fromkeys(LIBRARIES, 0)
    compile_s: dict[str, list[float]] = {lib: [] for lib in LIBRARIES}
    outcomes = dict.fromkeys(OUTCOMES, 0)
    fs_plan: list[float] = []
    fs_decoder: list[float] = []
    mask_s: dict[str, list[float]] = {lib: [] for lib in _MASKED}
    mask_means: dict[str, list[float]] = {lib: [] for lib in _MASKED}
    whole = {lib: [0, 0] for lib in _MASKED}
    for row in rows:
        for lib in LIBRARIES:
            got = row.compile[lib]
            status[lib][got.status] += 1
            if got.status == "accepted":
                warned[lib] += got.warnings > 0
                if got.seconds is not None:
                    compile_s[lib].append(got.seconds)
        for rec in row.records:
            outcomes[rec.outcome] += 1
            if rec.outcome == "valid" and rec.tokens:
                fs_plan.append(rec.plan_seconds / len(rec.tokens))
                fs_decoder.append(rec.decoder_seconds / len(rec.tokens))
        for lib, run in row.masks.items():
            mask_s[lib] += run.seconds
            mask_means[lib] += run.record_means
            whole[lib][0] += run.accepted
            whole[lib][1] += run.tried
    return {
        "schemas": len(rows),
        "status": status,
        "accepted_with_warnings": warned,
        "compile_ms": {lib: quantiles(compile_s[lib], (50, 95), 1e3) for lib in LIBRARIES},
        "records": outcomes,
        "mask_us": {
            "factorspec": quantiles(fs_plan, (50, 99), 1e6),
            FS_DECODER: quantiles(fs_decoder, (50, 99), 1e6),
            **{lib: quantiles(mask_s[lib], (50, 99), 1e6) for lib in _MASKED},
        },
        "mask_record_mean_us": {
            "factorspec": quantiles(fs_plan, (50,), 1e6),
            FS_DECODER: quantiles(fs_decoder, (50,), 1e6),
            **{lib: quantiles(mask_means[lib], (50,), 1e6) for lib in _MASKED},
        },
        "records_accepted_whole": {
            lib: {"accepted": a, "tried": t} for lib, (a, t) in whole.items()
        },
        "run_errors": sum(bool(r.run_error) for r in rows),
    }


def summarize(rows: Sequence[SchemaResult]) -> dict[str, dict[str, Any]]:
    """One summary per dataset (sorted by name) and ``overall`` last."""
    datasets = sorted({r.dataset for r in rows})
    out = {name: _summary([r for r in rows if r.dataset == name]) for name in datasets}
    out[_OVERALL] = _summary(rows)
    return out


def _row_json(row: SchemaResult) -> dict[str, Any]:
    return {
        "dataset": row.dataset,
        "name": row.name,
        "compile": {
            lib: {
                "status": c.status,
                "ms": None if c.seconds is None else round(c.seconds * 1e3, 3),
                "warnings": c.warnings,
                "detail": c.detail,
            }
            for lib, c in row.compile.items()
        },
        "records": [
            {"outcome": r.outcome, "tokens": len(r.tokens), "detail": r.detail} for r in row.records
        ],
        "masks": {
            lib: {"tokens": len(m.seconds), "accepted": m.accepted, "tried": m.tried}
            | ({"detail": m.detail} if m.detail else {})
            for lib, m in row.masks.items()
        },
        "run_error": row.run_error,
    }


def fmt_number(value: object, digits: int = 1) -> str:
    """A number for a table (thousands separated, ``digits`` decimals), ``-`` for None."""
    return "-" if value is None else f"{value:,.{digits}f}"


@dataclass(slots=True)
class SchemaBenchReport:
    """A finished run: its facts, the per-dataset summaries and the per-schema rows."""

    meta: dict[str, Any]
    rows: list[SchemaResult]
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.summaries:
            self.summaries = summarize(self.rows)

    def to_json(self) -> dict[str, Any]:
        """The run as JSON: ``meta``, ``summaries`` and one entry per schema in ``schemas``."""
        return {
            "meta": self.meta,
            "summaries": self.summaries,
            "schemas": [_row_json(r) for r in self.rows],
        }

    def markdown(self) -> str:
        """The acceptance, records, compile-time and mask-time tables."""
        s = self.summaries
        libs = " | ".join(LIBRARIES)
        lines = [
            f"Schemas accepted (of those tried), records decoded by FactorSpec's random model "
            f"({self.meta.get('records')} per accepted schema; max_tokens={MAX_TOKENS}).",
            "",
            f"| dataset | schemas | {libs} | valid | invalid | max_tokens |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, d in s.items():
            acc = " | ".join(str(d["status"][lib]["accepted"]) for lib in LIBRARIES)
            rec = d["records"]
            label = f"**{name}**" if name == _OVERALL else name
            lines.append(
                f"| {label} | {d['schemas']} | {acc} | {rec['valid']} | {rec['invalid']} "
                f"| {rec['max_tokens']} |"
            )
        o = s[_OVERALL]
        n = max(o["schemas"], 1)
        shares = ", ".join(
            f"{lib} {100 * o['status'][lib]['accepted'] / n:.1f}%" for lib in LIBRARIES
        )
        lines += ["", f"Overall acceptance: {shares}.", ""]
        lines += [
            "| library | rejected | timeout | run error | accepted with warnings "
            "| compile median ms | compile p95 ms |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for lib in LIBRARIES:
            st, cm = o["status"][lib], o["compile_ms"][lib]
            lines.append(
                f"| {lib} | {st['rejected']} | {st['timeout']} | {st['error']} "
                f"| {o['accepted_with_warnings'][lib]} | {fmt_number(cm['median'], 2)} "
                f"| {fmt_number(cm['p95'], 2)} |"
            )
        lines += [
            "",
            "Mask time per token, µs, on the tokens of FactorSpec's valid records. "
            "factorspec: the stats' planning time per token of each record; "
            f"{FS_DECODER}: the decoder's time outside the forwards per token (planning, "
            "free-leaf masks computed while verifying, sampling); both per record, so their "
            "quantiles run over records, the libraries' over tokens.",
            "",
            "| library | median | p99 | tokens (records) | median of record means "
            "| records accepted whole |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for lib in _MASK_ROWS:
            mu, mean = o["mask_us"][lib], o["mask_record_mean_us"][lib]
            if lib in ("factorspec", FS_DECODER):
                whole, count = "-", f"({mu['n']})"
            else:
                w = o["records_accepted_whole"][lib]
                whole, count = f"{w['accepted']}/{w['tried']}", f"{mu['n']:,}"
            lines.append(
                f"| {lib} | {fmt_number(mu['median'])} | {fmt_number(mu['p99'])} | {count} "
                f"| {fmt_number(mean['median'])} | {whole} |"
            )
        lines += ["", "Compile time per dataset, ms (median / p95 over accepted schemas).", ""]
        lines += [f"| dataset | {libs} |", "|---|---:|---:|---:|"]
        for name, d in s.items():
            cells = " | ".join(
                f"{fmt_number(d['compile_ms'][lib]['median'], 2)} / "
                f"{fmt_number(d['compile_ms'][lib]['p95'], 2)}"
                for lib in LIBRARIES
            )
            lines.append(f"| {name} | {cells} |")
        lines += ["", "Mask time per dataset, µs (median / p99).", ""]
        lines += [f"| dataset | {' | '.join(_MASK_ROWS)} |", "|---|---:|---:|---:|---:|"]
        for name, d in s.items():
            cells = " | ".join(
                f"{fmt_number(mu['median'])} / {fmt_number(mu['p99'])}"
                for mu in (d["mask_us"][lib] for lib in _MASK_ROWS)
            )
            lines.append(f"| {name} | {cells} |")
        return "\n".join(lines) + "\n"


def _plot(report: SchemaBenchReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report.summaries)
    x = np.arange(len(names))
    width = 0.8 / len(LIBRARIES)
    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(names)), 4.5))
    for i, lib in enumerate(LIBRARIES):
        shares = [
            100 * d["status"][lib]["accepted"] / max(d["schemas"], 1)
            for d in report.summaries.values()
        ]
        ax.bar(x + (i - (len(LIBRARIES) - 1) / 2) * width, shares, width, label=lib)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("schemas accepted (%)")
    ax.set_ylim(0, 115)
    ax.set_yticks(range(0, 101, 20))
    ax.set_title("JSON Schema acceptance per dataset (compile within the time limit)")
    ax.legend(ncols=len(LIBRARIES), loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(report: SchemaBenchReport, out: Path) -> list[Path]:
    """Write ``results.json``, ``results.md`` and ``acceptance.png`` into ``out``.

    The plot is skipped when matplotlib is not installed. Returns the files written (also
    kept in ``report.files``).
    """
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "results.json", out / "results.md"]
    written[0].write_text(json.dumps(report.to_json(), indent=1) + "\n", encoding="utf-8")
    written[1].write_text(
        f"# JSON Schema benchmark\n\n{report.meta.get('command', '')}\n\n{report.markdown()}",
        encoding="utf-8",
    )
    try:
        _plot(report, out / "acceptance.png")
        written.append(out / "acceptance.png")
    except ImportError:
        pass
    report.files = written
    return written
