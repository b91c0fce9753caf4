"""The tool-calling benchmark's outputs: ``results.md``, the PNG plot, the files.

`markdown` renders one table per category (and one over all of them): per method, the share
of schema-valid answers, BFCL AST accuracy, tokens per forward and wall seconds per call, then
FactorSpec against each baseline and BFCL's error types per method. `draw_plot` draws AST
accuracy and wall time per call by category; `write_outputs` writes ``results.json``,
``results.md`` and the plot into a folder.
"""

from __future__ import annotations

import json
from pathlib import Path

from factorspec_sdk.bench.tools.results import Summary, ToolBenchReport

__all__ = ["draw_plot", "markdown", "write_outputs"]


def _pct(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100.0 * part / whole:.0f}%)" if whole else "-"


def _table(rows: list[Summary]) -> list[str]:
    lines = [
        "| method | calls | schema-valid | BFCL AST accuracy | tokens/forward | wall s/call "
        "| errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        lines.append(
            f"| {s.method} | {s.records} | {_pct(s.schema_valid, s.records)} "
            f"| {_pct(s.ast_valid, s.records)} | {s.tokens_per_forward:.2f} "
            f"| {s.wall_per_call:.2f} | {s.errors} |"
        )
    return lines


def _versus(summaries: dict[str, dict[str | None, Summary]], keys: list[str | None]) -> list[str]:
    fs = summaries.get("factorspec")
    if fs is None:
        return []
    lines = [
        "| category | baseline | AST accuracy (FactorSpec - baseline) | wall/call speedup |",
        "|---|---|---|---|",
    ]
    for key in keys:
        mine = fs.get(key)
        if mine is None:
            continue
        for method, by in summaries.items():
            other = by.get(key)
            if method == "factorspec" or other is None:
                continue
            diff = 100.0 * (mine.ast_accuracy - other.ast_accuracy)
            speed = other.wall_per_call / mine.wall_per_call if mine.wall_per_call else 0.0
            lines.append(f"| {key or 'all'} | {method} | {diff:+.0f} points | {speed:.2f}x |")
    return lines


def markdown(report: ToolBenchReport) -> str:
    """The results as Markdown: all categories, per category, FactorSpec against each, errors."""
    cfg = report.config
    summaries = report.summaries
    cats: list[str | None] = [
        c for c in cfg.get("categories", []) if any(c in by for by in summaries.values())
    ]
    skipped = cfg.get("skipped") or []
    lines = [
        "# Tool calling (BFCL)",
        "",
        f"- cases: the first {cfg.get('n', '?')} of each of {', '.join(map(str, cats))} "
        f"({'complete' if cfg.get('complete') else 'partial: the run was still going'}); "
        f"{len(skipped)} skipped (function docs that could not be converted)",
        f"- engine: {cfg.get('engine', '?')} ({cfg.get('model', '')}), greedy, max_tokens "
        f"{cfg.get('max_tokens', '?')}, machine: {cfg.get('machine', '?')}",
        "- every method got the same prompt (tools listed in the system message, the calls "
        "record's JSON form after the question) and ran on the same engine in the same run, "
        "one after another per case; AST accuracy is BFCL's own checker",
        *([f"- command: `{cfg['command']}`"] if cfg.get("command") else []),
        "",
        "## All categories",
        "",
        *_table([by[None] for by in summaries.values()]),
        "",
    ]
    for cat in cats:
        rows = [by[cat] for by in summaries.values() if cat in by]
        lines += [f"## {cat}", "", *_table(rows), ""]
    versus = _versus(summaries, [None, *cats])
    if versus:
        lines += ["## FactorSpec against each method (same run)", "", *versus, ""]
    lines += ["## Why answers fail (BFCL error types)", ""]
    for method, by in summaries.items():
        kinds = by[None].error_types.most_common()
        listed = ", ".join(f"{k} {v}" for k, v in kinds) or "none"
        lines.append(f"- {method}: {listed}")
    lines.append("")
    if skipped:
        lines += ["## Skipped cases", ""]
        lines += [f"- {s['case']}: {s['reason']}" for s in skipped[:20]]
        lines.append("")
    return "\n".join(lines)


def draw_plot(report: ToolBenchReport, out_dir: Path) -> Path:
    """AST accuracy and wall seconds per call, by category and method, in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summaries = report.summaries
    cats: list[str | None] = [None, *[c for c in report.config.get("categories", [])]]
    cats = [c for c in cats if any(c in by for by in summaries.values())]
    methods = list(summaries)
    width = 0.8 / max(1, len(methods))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for j, method in enumerate(methods):
        by = summaries[method]
        xs = [i + j * width for i in range(len(cats))]
        acc = [100.0 * by[c].ast_accuracy if c in by else 0.0 for c in cats]
        wall = [by[c].wall_per_call if c in by else 0.0 for c in cats]
        axes[0].bar(xs, acc, width, label=method)
        axes[1].bar(xs, wall, width, label=method)
    labels = [c or "all" for c in cats]
    for ax, title, unit in (
        (axes[0], "BFCL AST accuracy", "% of calls"),
        (axes[1], "Wall time per call", "seconds"),
    ):
        ax.set_xticks(
            [i + 0.4 - width / 2 for i in range(len(cats))], labels, rotation=20, fontsize=8
        )
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "tools_bench.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_outputs(report: ToolBenchReport, out_dir: Path, plots: bool = True) -> list[Path]:
    """Write ``results.json``, ``results.md`` and (with ``plots``) the PNG into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "results.json"
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report.to_json(), indent=1))
    tmp.replace(json_path)
    md_path = out_dir / "results.md"
    md_path.write_text(markdown(report) + "\n")
    files = [json_path, md_path]
    if plots and report.records:
        files.append(draw_plot(report, out_dir))
    report.out_dir = out_dir
    report.files = files
    return files
