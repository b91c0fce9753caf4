"""The BFCL cases the tool-calling benchmark runs: categories, questions, functions, answers.

The Berkeley Function Calling Leaderboard ships its data in the ``bfcl-eval`` package
(``bfcl_eval/data/BFCL_v4_<category>.json``, one case a line; the possible answers under
``possible_answer/``). `load_cases` reads the first ``n`` cases of a category from there, with
their possible answers; nothing else of ``bfcl-eval`` is imported (it is installed with
``--no-deps``: its own dependencies are many and heavy, and only the data and the checker are
needed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factorspec_sdk.bench.tools.names import parse_names
from factorspec_sdk.engines.protocol import ChatMessage

__all__ = [
    "BFCL_INSTALL",
    "CATEGORIES",
    "BfclCase",
    "bfcl_data_dir",
    "load_cases",
    "parse_categories",
]

BFCL_INSTALL = "pip install --no-deps bfcl-eval==2026.3.23"
"""How to install the data and checker (the Makefile's install target runs it)."""

CATEGORIES: dict[str, str] = {
    "simple": "simple_python",
    "multiple": "multiple",
    "parallel": "parallel",
    "live_simple": "live_simple",
    "live_multiple": "live_multiple",
    "live_parallel": "live_parallel",
}
"""The benchmark's category names and BFCL's (``simple`` is BFCL v4's ``simple_python``)."""


@dataclass(frozen=True, slots=True)
class BfclCase:
    """One BFCL question with its function docs and possible answers.

    Attributes:
        id: BFCL's id (``simple_python_0``).
        category: the benchmark's category name (``simple``, ``live_parallel``, ...).
        bfcl_category: BFCL's name of it (what its checker is told).
        messages: the question's chat messages (its single turn).
        functions: BFCL's function docs, as written (its checker reads them).
        answer: BFCL's possible answers (``[{name: {arg: [allowed values]}}]``).
    """

    id: str
    category: str
    bfcl_category: str
    messages: list[ChatMessage]
    functions: list[dict[str, Any]]
    answer: list[dict[str, Any]]

    @property
    def parallel(self) -> bool:
        """Whether the category asks for several calls in one answer."""
        return "parallel" in self.bfcl_category


def bfcl_data_dir() -> Path:
    """The ``bfcl_eval/data`` folder of the installed ``bfcl-eval`` package.

    Raises:
        ImportError: ``bfcl-eval`` is not installed (the message says how to install it).
    """
    import importlib.util

    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the tool-calling benchmark needs BFCL's data: {BFCL_INSTALL}")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def parse_categories(spec: str) -> list[str]:
    """Category names from a comma list (``all``: every one), in `CATEGORIES` order.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    return parse_names(spec, list(CATEGORIES), "category")


def _lines(path: Path, n: int | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
            if n is not None and len(out) >= n:
                break
    return out


def load_cases(category: str, n: int | None = None, data_dir: Path | None = None) -> list[BfclCase]:
    """The first ``n`` cases of ``category`` (all with ``None``), with their possible answers.

    Raises:
        ValueError: an unknown category, or a case without a possible answer.
        ImportError: ``bfcl-eval`` is not installed.
    """
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}; known: {', '.join(CATEGORIES)}")
    name = CATEGORIES[category]
    folder = data_dir if data_dir is not None else bfcl_data_dir()
    questions = _lines(folder / f"BFCL_v4_{name}.json", n)
    answers = {
        a["id"]: a["ground_truth"]
        for a in _lines(folder / "possible_answer" / f"BFCL_v4_{name}.json", None)
    }
    cases = []
    for q in questions:
        if q["id"] not in answers:
            raise ValueError(f"BFCL case {q['id']} has no possible answer")
        turn = q["question"][0]
        messages: list[ChatMessage] = [{"role": m["role"], "content": m["content"]} for m in turn]
        cases.append(BfclCase(q["id"], category, name, messages, q["function"], answers[q["id"]]))
    return cases
