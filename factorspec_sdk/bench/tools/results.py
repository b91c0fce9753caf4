"""The tool-calling benchmark's records and their summaries per method and category.

A `ToolRecord` is one method's answer to one BFCL case: its text, whether it is a record of
the calls schema (``schema_valid``), BFCL's verdict (``ast_valid``, with its error type), and
its cost (tokens, forwards, wall time). `summarize` sums them per method and category (and
over all categories, key ``None``); `ToolBenchReport` holds a run's configuration and records
and reads back from its ``results.json``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["Summary", "ToolBenchReport", "ToolRecord", "summarize"]


@dataclass(slots=True)
class ToolRecord:
    """One method's answer to one BFCL case.

    Attributes:
        method: the method's name.
        case: BFCL's case id.
        category: the benchmark's category name.
        text: the generated text.
        parsed: a JSON object was found in the text.
        schema_valid: that object is a record of the calls schema.
        ast_valid: BFCL's checker accepts its calls.
        error_type: BFCL's error type (or ``parse``, ``format``, ``error``) when not valid.
        error: BFCL's first error message, or the exception of a method that raised.
        tokens: generated tokens.
        forwards: forward passes run.
        wall_seconds: wall time of the call (compilation included).
        stopped: how decoding ended (``eos``, ``grammar``, ``max_tokens``, ``done``, ``error``).
    """

    method: str
    case: str
    category: str
    text: str = ""
    parsed: bool = False
    schema_valid: bool = False
    ast_valid: bool = False
    error_type: str = ""
    error: str = ""
    tokens: int = 0
    forwards: int = 0
    wall_seconds: float = 0.0
    stopped: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolRecord:
        """A record from its ``results.json`` entry (unknown keys ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(slots=True)
class Summary:
    """Sums over the records of one method (and one category, or all of them)."""

    method: str
    category: str | None
    records: int = 0
    schema_valid: int = 0
    ast_valid: int = 0
    tokens: int = 0
    forwards: int = 0
    wall_seconds: float = 0.0
    errors: int = 0
    error_types: Counter[str] = field(default_factory=Counter)

    @property
    def tokens_per_forward(self) -> float:
        """Generated tokens per forward pass."""
        return self.tokens / self.forwards if self.forwards else 0.0

    @property
    def wall_per_call(self) -> float:
        """Mean wall seconds per call."""
        return self.wall_seconds / self.records if self.records else 0.0

    @property
    def ast_accuracy(self) -> float:
        """Share of records BFCL's checker accepts."""
        return self.ast_valid / self.records if self.records else 0.0

    @property
    def schema_rate(self) -> float:
        """Share of schema-valid records."""
        return self.schema_valid / self.records if self.records else 0.0

    def add(self, r: ToolRecord) -> None:
        """Count one record."""
        self.records += 1
        self.schema_valid += r.schema_valid
        self.ast_valid += r.ast_valid
        self.tokens += r.tokens
        self.forwards += r.forwards
        self.wall_seconds += r.wall_seconds
        self.errors += r.stopped == "error"
        if not r.ast_valid:
            self.error_types[r.error_type or "?"] += 1


def summarize(records: list[ToolRecord]) -> dict[str, dict[str | None, Summary]]:
    """Per method (in run order), per category (``None``: all categories) summaries."""
    out: dict[str, dict[str | None, Summary]] = {}
    for r in records:
        by = out.setdefault(r.method, {None: Summary(r.method, None)})
        by[None].add(r)
        by.setdefault(r.category, Summary(r.method, r.category)).add(r)
    return out


@dataclass(slots=True)
class ToolBenchReport:
    """A run's configuration, its records, and the files written from it."""

    config: dict[str, Any]
    records: list[ToolRecord]
    out_dir: Path | None = None
    files: list[Path] = field(default_factory=list)

    @property
    def summaries(self) -> dict[str, dict[str | None, Summary]]:
        """`summarize` of the records."""
        return summarize(self.records)

    def to_json(self) -> dict[str, Any]:
        """The configuration, every record and the summaries, as JSON data."""
        sums = {
            method: {
                str(cat or "all"): {
                    "records": s.records,
                    "schema_valid": s.schema_valid,
                    "ast_valid": s.ast_valid,
                    "tokens_per_forward": round(s.tokens_per_forward, 3),
                    "wall_per_call": round(s.wall_per_call, 4),
                    "errors": s.errors,
                    "error_types": dict(s.error_types),
                }
                for cat, s in by.items()
            }
            for method, by in self.summaries.items()
        }
        return {
            "config": self.config,
            "summaries": sums,
            "records": [asdict(r) for r in self.records],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], out_dir: Path | None = None) -> ToolBenchReport:
        """A report from its ``results.json`` data."""
        return cls(data["config"], [ToolRecord.from_json(r) for r in data["records"]], out_dir)

    def markdown(self) -> str:
        """The report as Markdown (see `factorspec_sdk.bench.tools.report.markdown`)."""
        from factorspec_sdk.bench.tools.report import markdown

        return markdown(self)
