"""BFCL's own AST checker on the benchmark's calls: whether a call is a correct answer.

The checker is ``bfcl_eval.eval_checker.ast_eval.ast_checker.ast_checker`` from the installed
``bfcl-eval`` package, called as BFCL's ``eval_runner`` calls it (the case's function docs as
written, the calls in BFCL's ``[{name: {arg: value}}]`` format, the possible answers, Python,
BFCL's category name).

What is stubbed, and why: the checker module imports ``bfcl_eval.constants.model_config`` for
one thing, ``MODEL_CONFIG_MAPPING[model].underscore_to_dot`` (whether a model's function names
had their dots replaced by underscores, as OpenAI's API requires). That module imports every
model handler of the leaderboard, and they import the packages ``bfcl-eval`` depends on
(openai, anthropic, tree-sitter, ...), which are not installed (``bfcl-eval`` is installed
with ``--no-deps``). `load_checker` puts a stub of that one module into ``sys.modules`` before
importing the checker: its ``MODEL_CONFIG_MAPPING`` answers ``underscore_to_dot=False`` for
every model, which is right here (the tools keep BFCL's names, dots included). Nothing else
is stubbed or copied; the checker's code runs as shipped.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from factorspec_sdk.bench.tools.data import BFCL_INSTALL, BfclCase

__all__ = ["CHECKER_MODEL_NAME", "Verdict", "check_calls", "load_checker"]

CHECKER_MODEL_NAME = "factorspec"
"""The model name the checker is told (it only looks up ``underscore_to_dot`` by it)."""

_MODEL_CONFIG = "bfcl_eval.constants.model_config"


@dataclass(frozen=True, slots=True)
class Verdict:
    """BFCL's verdict on one answer: valid, else its error type and first error."""

    valid: bool
    error_type: str = ""
    error: str = ""


class _NoDotRenaming:
    """The stub's model config: no model had dots in function names replaced."""

    underscore_to_dot = False


class _AnyModel(dict[str, _NoDotRenaming]):
    def __missing__(self, key: str) -> _NoDotRenaming:
        return _NoDotRenaming()


@cache
def load_checker() -> Callable[..., dict[str, Any]]:
    """BFCL's ``ast_checker``, imported with ``model_config`` stubbed (see the module doc).

    Raises:
        ImportError: ``bfcl-eval`` is not installed (the message says how to install it).
    """
    if _MODEL_CONFIG not in sys.modules:
        stub = types.ModuleType(_MODEL_CONFIG, "factorspec stub: no model renames dots")
        stub.MODEL_CONFIG_MAPPING = _AnyModel()  # type: ignore[attr-defined]
        sys.modules[_MODEL_CONFIG] = stub
    try:
        from bfcl_eval.eval_checker.ast_eval.ast_checker import (  # type: ignore[import-untyped]
            ast_checker,
        )
    except ImportError as exc:
        raise ImportError(f"BFCL's checker cannot be imported ({exc}); {BFCL_INSTALL}") from exc
    return cast("Callable[..., dict[str, Any]]", ast_checker)


def check_calls(case: BfclCase, calls: list[dict[str, dict[str, Any]]]) -> Verdict:
    """BFCL's verdict on ``calls`` (BFCL's answer format) for ``case``."""
    from bfcl_eval.constants.enums import Language  # type: ignore[import-untyped]

    checker = load_checker()
    result = checker(
        case.functions, calls, case.answer, Language.PYTHON, case.bfcl_category, CHECKER_MODEL_NAME
    )
    if result.get("valid"):
        return Verdict(True)
    errors = result.get("error") or [""]
    return Verdict(False, str(result.get("error_type", "")), str(errors[0])[:300])
