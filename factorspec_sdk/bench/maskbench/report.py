"""MaskBench's report: per-category summaries, results.md, results.json and the plot.

Per category (then the JSONSchemaBench categories together, then overall) and per engine:

* **compiled**: files whose schema the engine compiled;
* **pass**: MaskBench's criterion: compiled, every valid instance written, no invalid one
  (an ``undecided`` or ``error`` instance fails it: nothing is claimed that was not shown);
* **valid writable**: valid instances written, of the valid instances of compiled schemas;
* **invalid writable**: invalid instances written (must be 0);
* **undecided**: instances of compiled schemas whose search ran out of nodes or time;
* **mask ms/token**: p50 and p99 over every step of the written instances' replays;
* **under 95%**: compiled schemas (with valid instances) of which under 95% of the valid
  instances are written.

The failure reasons (`failure_reasons`) count, for one engine, its refusals (messages with
their paths and numbers blanked, so that one cause counts once) and the places where its
masks stopped valid instances (`factorspec_sdk.bench.maskbench.reasons`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factorspec_sdk.bench.maskbench.data import JSONSCHEMABENCH
from factorspec_sdk.bench.maskbench.runner import FileResult
from factorspec_sdk.bench.schemas_report import fmt_number, quantiles

__all__ = [
    "OVERALL",
    "SHARE_TARGET",
    "MaskBenchReport",
    "failure_reasons",
    "summarize",
    "write_outputs",
]

OVERALL = "overall"
_JSB = "JSONSchemaBench categories"
SHARE_TARGET = 0.95
"""The share of a compiled schema's valid instances that must be writable (the issue's target)."""

_TOP_REASONS = 15


def _engine_summary(rows: Sequence[FileResult], engine: str) -> dict[str, Any]:
    compiled = passed = under = 0
    counts = Counter[str]()
    steps: list[float] = []
    for row in rows:
        run = row.engines.get(engine)
        if run is None or not run.compiled:
            continue
        compiled += 1
        valid = [v for v, ok in zip(run.instances, row.valid, strict=True) if ok]
        invalid = [v for v, ok in zip(run.instances, row.valid, strict=True) if not ok]
        written = sum(v.verdict == "writable" for v in valid)
        wrong = sum(v.verdict == "writable" for v in invalid)
        passed += written == len(valid) and wrong == 0
        under += bool(valid) and written < SHARE_TARGET * len(valid)
        counts.update(
            valid=len(valid), valid_writable=written, invalid=len(invalid), invalid_writable=wrong
        )
        counts.update(v.verdict for v in run.instances if v.verdict in ("undecided", "error"))
        for v in run.instances:
            steps += v.mask_seconds
    return {
        "compiled": compiled,
        "pass": passed,
        "valid_writable": counts["valid_writable"],
        "valid_of_compiled": counts["valid"],
        "invalid_writable": counts["invalid_writable"],
        "invalid_of_compiled": counts["invalid"],
        "undecided": counts["undecided"],
        "errors": counts["error"],
        "under_95": under,
        "mask_ms": quantiles(steps, (50, 99), 1e3),
    }


def _summary(rows: Sequence[FileResult], engines: Sequence[str]) -> dict[str, Any]:
    return {
        "files": len(rows),
        "instances": {
            "valid": sum(sum(r.valid) for r in rows),
            "invalid": sum(len(r.valid) - sum(r.valid) for r in rows),
        },
        "unreadable": sum(bool(r.error) for r in rows),
        "engines": {e: _engine_summary(rows, e) for e in engines},
    }


def summarize(rows: Sequence[FileResult], engines: Sequence[str]) -> dict[str, dict[str, Any]]:
    """One summary per category (sorted), the JSONSchemaBench categories, then ``overall``."""
    categories = sorted({r.category for r in rows})
    out = {c: _summary([r for r in rows if r.category == c], engines) for c in categories}
    jsb = [r for r in rows if r.category in JSONSCHEMABENCH]
    if jsb and len(jsb) < len(rows):
        out[_JSB] = _summary(jsb, engines)
    out[OVERALL] = _summary(rows, engines)
    return out


_BLANKS = (
    (re.compile(r"#/[^\s,;:)'\"]*"), "#/…"),
    (re.compile(r"'[^']*'"), "'…'"),
    (re.compile(r"\b\d+(\.\d+)?\b"), "N"),
)


def _blanked(message: str) -> str:
    for pattern, blank in _BLANKS:
        message = pattern.sub(blank, message)
    return message[:160]


def failure_reasons(rows: Sequence[FileResult], engine: str) -> dict[str, list[list[Any]]]:
    """Why ``engine`` failed: its refusals and where its masks stopped valid instances.

    Returns ``{"refusals": [[message, count], ...], "valid_not_written": [[label,
    count], ...], "invalid_written": [[file, instance index], ...]}``, most frequent first.
    A refusal message has its JSON pointers, quoted names and numbers blanked.
    """
    refusals = Counter[str]()
    places = Counter[str]()
    wrong: list[list[Any]] = []
    for row in rows:
        run = row.engines.get(engine)
        if run is None:
            continue
        if not run.compiled:
            refusals[f"{run.compile.status}: {_blanked(run.compile.detail)}"] += 1
            continue
        for i, (v, ok) in enumerate(zip(run.instances, row.valid, strict=True)):
            if ok and v.verdict != "writable":
                places[v.label if v.verdict == "unwritable" else f"{v.verdict}: {v.label}"] += 1
            elif not ok and v.verdict == "writable":
                wrong.append([row.name, i])
    return {
        "refusals": [[m, n] for m, n in refusals.most_common()],
        "valid_not_written": [[m, n] for m, n in places.most_common()],
        "invalid_written": wrong,
    }


def _instance_json(v: Any, valid: bool, texts: int) -> dict[str, Any]:
    out: dict[str, Any] = {"valid": valid, "verdict": v.verdict, "texts": texts}
    if v.verdict == "writable":
        steps = quantiles(v.mask_seconds, (50,), 1e3)
        out |= {"text": v.text, "tokens": v.tokens, "mask_ms_median": steps["median"]}
    out["nodes"] = v.nodes
    if v.label:
        out |= {"label": v.label, "reason": v.reason}
    return out


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e3, 3)


def _row_json(row: FileResult) -> dict[str, Any]:
    return {
        "name": row.name,
        "category": row.category,
        "error": row.error,
        "engines": {
            name: {
                "compile": {
                    "status": run.compile.status,
                    "ms": None
                    if run.compile.seconds is None
                    else round(run.compile.seconds * 1e3, 3),
                    "warnings": run.compile.warnings,
                    "detail": run.compile.detail,
                },
                "instances": [
                    _instance_json(v, ok, n)
                    for v, ok, n in zip(run.instances, row.valid, row.texts, strict=False)
                ],
            }
            for name, run in row.engines.items()
        },
    }


_COLUMNS: tuple[Callable[[dict[str, Any]], str], ...] = (
    lambda s: str(s["compiled"]),
    lambda s: str(s["pass"]),
    lambda s: f"{s['valid_writable']}/{s['valid_of_compiled']}",
    lambda s: str(s["invalid_writable"]),
    lambda s: str(s["undecided"] + s["errors"]),
    lambda s: fmt_number(s["mask_ms"]["median"], 3),
    lambda s: fmt_number(s["mask_ms"]["p99"], 3),
)
"""The table's cells after ``files``, from one engine's summary (`MaskBenchReport.table`)."""


def _cells(d: dict[str, Any], engines: Sequence[str], cell: Callable[[dict[str, Any]], str]) -> str:
    return " · ".join(cell(d["engines"][e]) for e in engines)


@dataclass(slots=True)
class MaskBenchReport:
    """A finished run: its facts, engines, per-file rows and summaries."""

    meta: dict[str, Any]
    engines: list[str]
    rows: list[FileResult]
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.summaries:
            self.summaries = summarize(self.rows, self.engines)

    def to_json(self) -> dict[str, Any]:
        """``meta``, ``summaries``, each engine's ``failure_reasons`` and one row per file."""
        return {
            "meta": self.meta,
            "engines": self.engines,
            "summaries": self.summaries,
            "failure_reasons": {e: failure_reasons(self.rows, e) for e in self.engines},
            "files": [_row_json(r) for r in self.rows],
        }

    def table(self) -> str:
        """The per-category table (each cell: the engines in order, separated by ``·``)."""
        order = " · ".join(self.engines)
        lines = [
            f"Each cell: {order}.",
            "",
            "| category | files | compiled | pass | valid writable | invalid writable "
            "| undecided | mask ms/token p50 | mask ms/token p99 |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, d in self.summaries.items():
            label = f"**{name}**" if name in (OVERALL, _JSB) else name
            cells = [_cells(d, self.engines, column) for column in _COLUMNS]
            lines.append(f"| {label} | {d['files']} | " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def markdown(self) -> str:
        """The table, the schemas under the 95% target, and the failure reasons."""
        o = self.summaries[OVERALL]
        under = ", ".join(
            f"{e} {o['engines'][e]['under_95']} of {o['engines'][e]['compiled']}"
            for e in self.engines
        )
        errors = ", ".join(f"{e} {o['engines'][e]['errors']}" for e in self.engines)
        lines = [
            self.table(),
            f"Compiled schemas with under {SHARE_TARGET:.0%} of their valid instances "
            f"writable: {under}. Undecided counts include engine errors ({errors}).",
            "",
        ]
        for e in self.engines:
            reasons = failure_reasons(self.rows, e)
            lines += [f"**{e}**: top refusals, and where its masks stopped valid instances.", ""]
            lines += ["| count | refusal |", "|---:|---|"]
            lines += [f"| {n} | {_cell(m)} |" for m, n in reasons["refusals"][:_TOP_REASONS]]
            lines += ["", "| count | valid instance stopped at |", "|---:|---|"]
            lines += [
                f"| {n} | {_cell(m)} |" for m, n in reasons["valid_not_written"][:_TOP_REASONS]
            ]
            wrong = reasons["invalid_written"]
            if wrong:
                listed = ", ".join(f"{f} #{i}" for f, i in wrong[:20])
                lines += ["", f"Invalid instances written: {len(wrong)} ({listed})."]
            lines.append("")
        return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _pass_share(summary: dict[str, Any], engine: dict[str, Any]) -> float:
    return float(engine["pass"] / max(summary["files"], 1))


def _valid_share(summary: dict[str, Any], engine: dict[str, Any]) -> float:
    return float(engine["valid_writable"] / max(summary["instances"]["valid"], 1))


def _plot(report: MaskBenchReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(report.summaries)
    x = np.arange(len(names))
    width = 0.8 / len(report.engines)
    fig, axes = plt.subplots(2, 1, figsize=(max(9.0, 0.7 * len(names)), 8.0), sharex=True)
    panels: tuple[tuple[str, Callable[[dict[str, Any], dict[str, Any]], float]], ...] = (
        ("files passing (%)", _pass_share),
        ("valid instances writable (% of all)", _valid_share),
    )
    for ax, (ylabel, share) in zip(axes, panels, strict=True):
        for i, e in enumerate(report.engines):
            values = [100 * share(d, d["engines"][e]) for d in report.summaries.values()]
            ax.bar(x + (i - (len(report.engines) - 1) / 2) * width, values, width, label=e)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 110)
        ax.set_yticks(range(0, 101, 20))
    axes[0].set_title("MaskBench per category: every tokenization and key order through the masks")
    axes[0].legend(ncols=len(report.engines), loc="upper left")
    axes[1].set_xticks(x, names, rotation=40, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(report: MaskBenchReport, out: Path) -> list[Path]:
    """Write ``results.json``, ``results.md`` and ``maskbench.png`` into ``out``.

    The plot is skipped (and ``results.md`` says so) when matplotlib is not installed.
    Returns the files written (also kept in ``report.files``).
    """
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "results.json", out / "results.md"]
    written[0].write_text(json.dumps(report.to_json(), indent=1) + "\n", encoding="utf-8")
    try:
        _plot(report, out / "maskbench.png")
        written.append(out / "maskbench.png")
        plot_note = ""
    except ImportError:
        plot_note = "\n(No plot: matplotlib is not installed.)\n"
    facts = "\n".join(f"- {k}: {v}" for k, v in report.meta.items() if k != "command")
    written[1].write_text(
        f"# MaskBench\n\n`{report.meta.get('command', '')}`\n\n{facts}\n\n"
        f"{report.markdown()}{plot_note}",
        encoding="utf-8",
    )
    report.files = written
    return written
