"""The trip benchmark's outputs: ``results.md`` (Markdown tables), the PNG plots, the files.

`write_outputs` writes ``results.json`` (`BenchReport.to_json`), ``results.md`` (`markdown`)
and, when asked, the two plots into a folder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from factorspec_sdk.bench.trip.results import BenchReport, Summary, best_ngram, ratios

__all__ = ["draw_plots", "markdown", "write_outputs"]


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


def markdown(report: BenchReport) -> str:
    """The results as Markdown: overall table, ratios, per city count tables."""
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


def draw_plots(report: BenchReport, out_dir: Path) -> list[Path]:
    """Plot tokens per forward by city count and valid records/s per method into ``out_dir``."""
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
    md_path.write_text(markdown(report) + "\n")
    files = [json_path, md_path]
    if plots and report.records:
        files += draw_plots(report, out_dir)
    report.out_dir = out_dir
    report.files = files
    return files
