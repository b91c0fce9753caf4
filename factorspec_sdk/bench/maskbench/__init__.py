"""MaskBench (``factorspec bench maskbench``): can each engine write every value the schema allows?

MaskBench (guidance-ai/jsonschemabench, ``maskbench/data``) gives each schema valid and
invalid test instances. Its criterion for an engine and a schema: the engine compiles it,
every valid instance *can be written*, and no invalid one can. "Can be written" means some
sequence of tokens that the engine's real masks allow, step by step through to the end of
the record, spells a JSON text of the instance: any tokenization, any key order, any
spelling of its numbers, in the writer's whitespace (``", "``, ``": "``). So the check is a
search, not one serialization fed token by token:

* `texts`: the instance's candidate texts (key orders, number and string spellings), the
  same for every engine;
* `search`: a depth-first search over every tokenization of a text through an engine's
  masks (SmolLM2's vocabulary), with dead ends remembered by (text position, engine
  state) and a node budget whose exhaustion is ``undecided``, never a verdict;
* `engines`: FactorSpec (compiled as a server's ``response_format``, masks of the planner
  `planner_for` builds), llguidance and XGrammar (their JSON-schema masks with the same
  separators), and the replay that times each step of a written instance;
* `reasons`: where in an instance's text the masks stopped it (what the writer would need);
* `data`: the files and their categories; `runner`: every file and engine in worker
  processes, with a time limit per schema; `report`: the per-category table, the failure
  reasons, results.json, results.md and the plot.

Run it with ``factorspec bench maskbench --per-category 5 --seed 0`` (the data defaults to
``../shared/schemas/maskbench-dev`` beside the repository).
"""

from factorspec_sdk.bench.maskbench.data import JSONSCHEMABENCH as JSONSCHEMABENCH
from factorspec_sdk.bench.maskbench.data import MaskFile as MaskFile
from factorspec_sdk.bench.maskbench.data import TestInstance as TestInstance
from factorspec_sdk.bench.maskbench.data import category_of as category_of
from factorspec_sdk.bench.maskbench.data import load_mask_file as load_mask_file
from factorspec_sdk.bench.maskbench.data import mask_files as mask_files
from factorspec_sdk.bench.maskbench.engines import ENGINES as ENGINES
from factorspec_sdk.bench.maskbench.engines import InstanceResult as InstanceResult
from factorspec_sdk.bench.maskbench.engines import MaskEngine as MaskEngine
from factorspec_sdk.bench.maskbench.engines import judge as judge
from factorspec_sdk.bench.maskbench.engines import make_engine as make_engine
from factorspec_sdk.bench.maskbench.report import MaskBenchReport as MaskBenchReport
from factorspec_sdk.bench.maskbench.report import failure_reasons as failure_reasons
from factorspec_sdk.bench.maskbench.report import write_outputs as write_outputs
from factorspec_sdk.bench.maskbench.runner import DEFAULT_TIMEOUT_S as DEFAULT_TIMEOUT_S
from factorspec_sdk.bench.maskbench.runner import FileResult as FileResult
from factorspec_sdk.bench.maskbench.runner import run_maskbench as run_maskbench
from factorspec_sdk.bench.maskbench.search import DEFAULT_BUDGET as DEFAULT_BUDGET
from factorspec_sdk.bench.maskbench.search import search as search
from factorspec_sdk.bench.maskbench.texts import candidate_texts as candidate_texts

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_TIMEOUT_S",
    "ENGINES",
    "JSONSCHEMABENCH",
    "FileResult",
    "InstanceResult",
    "MaskBenchReport",
    "MaskEngine",
    "MaskFile",
    "TestInstance",
    "candidate_texts",
    "category_of",
    "failure_reasons",
    "judge",
    "load_mask_file",
    "make_engine",
    "mask_files",
    "run_maskbench",
    "search",
    "write_outputs",
]
