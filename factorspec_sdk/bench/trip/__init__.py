"""Trip-planning benchmark: FactorSpec against the baselines users would pick instead.

``factorspec bench trip --n 100 --cities 3-10 --methods all --out bench-results/`` decodes the
same NATURAL PLAN-style trip problems (`factorspec_sdk.domains.trip`) with every method on one
engine, greedily, with the same prompt text and the same token budget:

==================  ===========================================================================
method              what it is
==================  ===========================================================================
free                free generation; the JSON is parsed out of the text afterwards
syntax              XGrammar JSON-schema mask token by token (cities as an enum, days bounded
                    by the trip length, exact list lengths), one token per forward
syntax+retry        ``syntax`` plus up to 3 retries naming the violated relations (Instructor)
syntax+ngram-kK     ``syntax`` plus n-gram prompt-lookup drafts of K tokens (vLLM ``ngram``);
                    K in 3, 5, 8, the best one is the ``syntax+ngram`` baseline
factorspec-certain  ``Client(engine, max_guesses=0)``: certain drafts only
factorspec          ``Client(engine)``: certain drafts plus guesses, per-request width
==================  ===========================================================================

Every record is scored with `factorspec_sdk.domains.trip.evaluate` (validity against every
relation of `factorspec_sdk.domains.trip.Itinerary`, exact match against the golden plan). A
method that raises on a record is recorded as an error for that record (invalid, with the
message). Outputs: ``results.json`` (config, every record, summaries, ratios; rewritten after
every problem so a long run can be read while it runs), ``results.md`` and two PNG plots.

One job per module: `options` (method names, ``--methods`` / ``--cities`` / ``--shard``
values), `tasks` (what the methods work on: prompts, the baselines' schema, the retry
message), `engines` (building and warming engines), `methods` (running each method),
`completion_baselines` (the baselines on vLLM), `results` (records, summaries, the report
data), `report` (Markdown, plots, files) and `runner` (`run_trip_bench`). The names below are
the package's public surface.
"""

from factorspec_sdk.bench.trip.engines import make_engine as make_engine
from factorspec_sdk.bench.trip.options import METHODS as METHODS
from factorspec_sdk.bench.trip.options import expand_methods as expand_methods
from factorspec_sdk.bench.trip.options import parse_cities as parse_cities
from factorspec_sdk.bench.trip.options import parse_shard as parse_shard
from factorspec_sdk.bench.trip.report import write_outputs as write_outputs
from factorspec_sdk.bench.trip.results import BenchReport as BenchReport
from factorspec_sdk.bench.trip.results import RecordResult as RecordResult
from factorspec_sdk.bench.trip.results import Summary as Summary
from factorspec_sdk.bench.trip.results import merge_reports as merge_reports
from factorspec_sdk.bench.trip.results import summarize as summarize
from factorspec_sdk.bench.trip.runner import run_trip_bench as run_trip_bench

__all__ = [
    "METHODS",
    "BenchReport",
    "RecordResult",
    "Summary",
    "expand_methods",
    "make_engine",
    "merge_reports",
    "parse_cities",
    "parse_shard",
    "run_trip_bench",
    "summarize",
    "write_outputs",
]
