"""Tool-calling benchmark on BFCL: FactorSpec against free generation, XGrammar and llguidance.

``factorspec bench tools --n 20 --categories all --methods all --out bench-results/tools``
answers the first ``n`` cases of each Berkeley Function Calling Leaderboard category (simple,
multiple, parallel and their ``live_`` versions, from the ``bfcl-eval`` package's data) with
every method on one engine, with the same prompt and token budget, and scores every answer:
schema-valid (a record of the calls schema), BFCL AST accuracy (BFCL's own checker), tokens
per forward and wall time per call. Outputs: ``results.json`` (rewritten after every case),
``results.md`` and a PNG plot.

One job per module: `data` (BFCL's categories and cases), `convert` (function docs as tools,
calls back in BFCL's format), `checker` (BFCL's AST checker, imported with one module
stubbed), `methods` (the prompt, the four methods, scoring), `results` (records and
summaries), `report` (Markdown, plot, files), `names` (the command line's comma lists) and
`runner` (`run_tools_bench`).
"""

from factorspec_sdk.bench.tools.checker import Verdict as Verdict
from factorspec_sdk.bench.tools.checker import check_calls as check_calls
from factorspec_sdk.bench.tools.convert import UnsupportedFunctionDoc as UnsupportedFunctionDoc
from factorspec_sdk.bench.tools.convert import bfcl_calls as bfcl_calls
from factorspec_sdk.bench.tools.convert import tool_of as tool_of
from factorspec_sdk.bench.tools.data import CATEGORIES as CATEGORIES
from factorspec_sdk.bench.tools.data import BfclCase as BfclCase
from factorspec_sdk.bench.tools.data import load_cases as load_cases
from factorspec_sdk.bench.tools.data import parse_categories as parse_categories
from factorspec_sdk.bench.tools.methods import METHODS as METHODS
from factorspec_sdk.bench.tools.methods import parse_methods as parse_methods
from factorspec_sdk.bench.tools.report import write_outputs as write_outputs
from factorspec_sdk.bench.tools.results import ToolBenchReport as ToolBenchReport
from factorspec_sdk.bench.tools.results import ToolRecord as ToolRecord
from factorspec_sdk.bench.tools.runner import run_tools_bench as run_tools_bench

__all__ = [
    "CATEGORIES",
    "METHODS",
    "BfclCase",
    "ToolBenchReport",
    "ToolRecord",
    "UnsupportedFunctionDoc",
    "Verdict",
    "bfcl_calls",
    "check_calls",
    "load_cases",
    "parse_categories",
    "parse_methods",
    "run_tools_bench",
    "tool_of",
    "write_outputs",
]
