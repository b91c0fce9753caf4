"""MaskBench's files: a schema with valid and invalid test instances, and its category.

A MaskBench file (guidance-ai/jsonschemabench, ``maskbench/data``) is one JSON object,
``{"description", "meta", "schema", "tests": [{"description", "valid", "data"}]}``. The
category is in its name: ``BFCL_simple_12.json`` is in ``BFCL_simple`` (the name up to the
trailing ``_<n>``), and a file derived from another corpus names it before ``---``
(``Github_easy---o10013.json``, ``Kubernetes---kb_1033_Normalized.json``,
``Handwritten---allIt4.json``).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "JSONSCHEMABENCH",
    "MaskFile",
    "TestInstance",
    "category_of",
    "load_mask_file",
    "mask_files",
]

JSONSCHEMABENCH = (
    "Github_trivial",
    "Github_easy",
    "Github_medium",
    "Github_hard",
    "Github_ultra",
    "Glaiveai2K",
    "JsonSchemaStore",
    "Kubernetes",
    "Snowplow",
    "WashingtonPost",
)
"""The categories whose schemas come from JSONSchemaBench (Geng et al. 2025)."""

_NUMBERED = re.compile(r"^(?P<category>.+?)_\d+$")


def category_of(name: str) -> str:
    """The category of a MaskBench file name (see the module docstring)."""
    stem = name.removesuffix(".json")
    if "---" in stem:
        return stem.split("---", 1)[0]
    match = _NUMBERED.match(stem)
    return match.group("category") if match else stem


@dataclass(frozen=True, slots=True)
class TestInstance:
    """One test instance of a file: a JSON value the schema accepts (``valid``) or not."""

    __test__ = False  # not a pytest class

    description: str
    valid: bool
    data: Any


@dataclass(frozen=True, slots=True)
class MaskFile:
    """A MaskBench file, read.

    Attributes:
        name: the file name.
        category: its category (`category_of`).
        schema: the JSON Schema.
        tests: the test instances, in the file's order.
    """

    name: str
    category: str
    schema: Any
    tests: tuple[TestInstance, ...]


def load_mask_file(path: Path) -> MaskFile:
    """Read one MaskBench file.

    Raises:
        ValueError: the file is not JSON, or not a MaskBench object (``schema`` and a list
            ``tests`` of objects with ``valid`` and ``data``).
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path.name}: cannot read it: {exc}") from None
    tests = raw.get("tests") if isinstance(raw, dict) else None
    if not isinstance(tests, list) or "schema" not in raw:
        raise ValueError(f"{path.name}: not a MaskBench file (no 'schema' and 'tests' list)")
    instances: list[TestInstance] = []
    for i, t in enumerate(tests):
        if not isinstance(t, dict) or not isinstance(t.get("valid"), bool) or "data" not in t:
            raise ValueError(f"{path.name}: test {i} has no boolean 'valid' and 'data'")
        instances.append(TestInstance(str(t.get("description", "")), t["valid"], t["data"]))
    return MaskFile(path.name, category_of(path.name), raw["schema"], tuple(instances))


def mask_files(
    root: Path, *, per_category: int | None = None, seed: int = 0, categories: Sequence[str] = ()
) -> list[Path]:
    """The ``*.json`` files of ``root``, sorted by category then name.

    Args:
        root: a folder of MaskBench files (``maskbench-dev``).
        per_category: a sample of at most this many files per category, drawn with
            ``random.Random(seed)`` from the category's sorted names (all files when None).
        seed: the sample's seed.
        categories: only these categories (all when empty).

    Raises:
        ValueError: ``root`` is not a folder, has no ``*.json`` file, or none of
            ``categories``.
    """
    if not root.is_dir():
        raise ValueError(f"{root} is not a folder (the MaskBench files; see --data)")
    by_category: dict[str, list[Path]] = {}
    for path in sorted(root.glob("*.json")):
        by_category.setdefault(category_of(path.name), []).append(path)
    if not by_category:
        raise ValueError(f"{root} has no *.json MaskBench files")
    if categories:
        unknown = sorted(set(categories) - set(by_category))
        if unknown:
            raise ValueError(
                f"no files of the categories {', '.join(unknown)} in {root}; there are: "
                + ", ".join(sorted(by_category))
            )
    files: list[Path] = []
    rng = random.Random(seed)
    for category in sorted(by_category):
        names = by_category[category]
        if per_category is not None and len(names) > per_category:
            names = sorted(rng.sample(names, per_category))
        if not categories or category in categories:
            files += names
    return files
