"""``factorspec bench``: benchmarks (mounted under ``bench`` by ``cli.main``).

``factorspec bench trip --n 100 --cities 3-10 --methods all --engine embedded --out bench-results/``
runs the trip-planning benchmark: FactorSpec against free generation, an XGrammar
JSON-schema mask, the mask with retries, and the mask with an n-gram speculator, on the same
engine, prompts and token budget. ``factorspec bench tools`` measures tool calling on BFCL's
cases against free generation, XGrammar and llguidance (`factorspec_sdk.bench.tools`).
``factorspec bench models`` decodes the user-models suite and says where each record's time
goes (`factorspec_sdk.bench.user_models`). ``factorspec bench gen`` measures certain drafts
and guesses against one token per forward (`factorspec_sdk.bench.gen_bench`). ``factorspec
bench schemas DIR`` measures which JSON Schemas FactorSpec, llguidance and XGrammar accept,
and decodes records of FactorSpec's; with ``--engine embedded|vllm`` it decodes a seeded
sample of them end to end on a real model, FactorSpec against the engine's own structured
outputs (`factorspec_sdk.bench.schemas_engine`). ``factorspec bench maskbench`` asks of
MaskBench's test instances whether each engine's masks can write every valid one and no
invalid one (`factorspec_sdk.bench.maskbench`).
Heavy imports happen inside the commands.

Exit codes follow ``factorspec``: 2 for a usage error (bad ``--cities`` / ``--methods``),
3 for an engine error (unknown ``--engine`` or a backend that cannot load).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from factorspec_sdk.engines.completion import CompletionEngine
    from factorspec_sdk.engines.protocol import Engine

__all__ = ["bench_app"]

bench_app = typer.Typer(
    name="bench",
    help="Benchmarks: FactorSpec against the baselines users would pick instead.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

_USAGE_ERROR = 2
_ENGINE_ERROR = 3

EngineOption = Annotated[
    str, typer.Option("--engine", help="Engine name (see factorspec_sdk.engines.ENGINES).")
]
ModelOption = Annotated[
    str | None, typer.Option("--model", help="Model folder for the engine (default model).")
]
ThreadsOption = Annotated[
    int | None,
    typer.Option(
        "--threads",
        min=1,
        help="torch CPU threads (default: the engine's choice); 1 helps on a shared machine.",
    ),
]


def _say(line: str) -> None:
    """Print a progress line on stderr at once (for runs without a terminal)."""
    print(line, file=sys.stderr, flush=True)


def _bench_engine(
    engine: str, model: str | None, threads: int | None, err: Console, *, logits: bool = False
) -> Engine | CompletionEngine:
    """The engine of ``--engine``/``--model`` with ``--threads`` set; exit 3 if it cannot be.

    ``logits``: the benchmark needs an engine that returns logits (not a completion engine).
    """
    from factorspec_sdk.bench.trip import make_engine
    from factorspec_sdk.engines.completion import CompletionEngine
    from factorspec_sdk.errors import EngineError

    try:
        options: dict[str, object] = {} if model is None else {"model": model}
        eng = make_engine(engine, **options)
        if logits and isinstance(eng, CompletionEngine):
            raise EngineError(f"the {eng.name} engine returns no logits; the masks need them")
    except (EngineError, TypeError) as exc:
        err.print(f"[red]engine error:[/red] {exc}")
        raise typer.Exit(_ENGINE_ERROR) from None
    if threads is not None:
        from factorspec_sdk.engines.torch_setup import set_threads

        set_threads(threads)
    return eng


@bench_app.command("gen")
def gen(
    n: Annotated[int, typer.Option("--n", min=1, help="Number of trip problems.")] = 20,
    cities: Annotated[int, typer.Option("--cities", min=3, max=10, help="Cities per problem.")] = 5,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the first problem.")] = 0,
    model: Annotated[
        str | None, typer.Option("--model", help="Model folder (default: the default model).")
    ] = None,
    unique: Annotated[
        bool, typer.Option("--unique", help="Only problems with a unique valid plan.")
    ] = False,
    itinerary: Annotated[
        str,
        typer.Option(
            "--itinerary",
            help="days (Itinerary), dates (DatedItinerary) or both, on the same problems.",
        ),
    ] = "days",
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the aggregates to this file.")
    ] = None,
) -> None:
    """Certain drafts and guesses against one token per forward, on the embedded engine.

    Decodes the same trip problems greedily three ways (plain, certain drafts, certain drafts
    plus guesses) and prints tokens per verify step, wall time and the speedup measured in the
    same run; ``--itinerary both`` also compares the dated itinerary with the int-day one.
    """
    if itinerary not in ("days", "dates", "both"):
        typer.echo(f"--itinerary must be days, dates or both, not {itinerary!r}", err=True)
        raise typer.Exit(_USAGE_ERROR)
    from factorspec_sdk.bench import gen_bench

    argv = ["--n", str(n), "--cities", str(cities), "--seed", str(seed)]
    argv += ["--itinerary", itinerary] + (["--unique"] if unique else [])
    argv += [] if model is None else ["--model", model]
    argv += [] if json_out is None else ["--json", str(json_out)]
    gen_bench.main(argv)


@bench_app.command("models")
def models(
    engine: Annotated[
        str, typer.Option("--engine", help="scripted (golden records, free forwards) or embedded.")
    ] = "scripted",
    names: Annotated[
        str,
        typer.Option(
            "--models", help="all, or a comma list of the suite's models (see --help's list)."
        ),
    ] = "all",
    vocabulary: Annotated[
        str,
        typer.Option(
            "--vocabulary",
            help="The scripted engine's vocabulary: model (the default model's, when on this "
            "machine) or tiny (printable ASCII).",
        ),
    ] = "model",
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the runs to this file.")
    ] = None,
) -> None:
    """User models: where a record's time goes on the models users write.

    Decodes one record of each model of the suite (`factorspec_sdk.bench.models`: meeting
    plans, invoices, tickets, stays, rosters, expenses, a form, an order, a workout) and prints per
    model the spec's compile, the oracle's checks and time, planning and its part on the
    critical path, forwards, the wall and the parts that add up to it.
    """
    from factorspec_sdk.bench import user_models
    from factorspec_sdk.errors import EngineError

    argv = ["--engine", engine, "--models", names, "--vocabulary", vocabulary]
    argv += [] if json_out is None else ["--json", str(json_out)]
    try:
        user_models.main(argv)
    except EngineError as exc:
        typer.echo(f"engine error: {exc}", err=True)
        raise typer.Exit(_ENGINE_ERROR) from None


@bench_app.command("trip")
def trip(
    n: Annotated[int, typer.Option("--n", min=1, help="Number of trip problems.")] = 100,
    cities: Annotated[
        str, typer.Option("--cities", help="City count per problem: N or LOW-HIGH (3-10).")
    ] = "3-10",
    methods: Annotated[
        str,
        typer.Option(
            "--methods",
            help=(
                "all, baselines, or a comma list of: free, syntax, syntax+retry, syntax+ngram "
                "(k=3,5,8), syntax+ngram-k3/-k5/-k8, factorspec-certain, factorspec."
            ),
        ),
    ] = "all",
    engine: EngineOption = "embedded",
    model: ModelOption = None,
    out: Annotated[
        Path, typer.Option("--out", help="Folder for results.json, results.md and the plots.")
    ] = Path("bench-results"),
    seed: Annotated[int, typer.Option("--seed", help="Seed of the problem set.")] = 0,
    unique: Annotated[
        bool,
        typer.Option(
            "--unique/--no-unique",
            help="Only problems whose golden plan is the only valid one (exact match is fair).",
        ),
    ] = True,
    itinerary: Annotated[
        str,
        typer.Option(
            "--itinerary",
            help="days (Itinerary, day numbers) or dates (DatedItinerary, calendar dates).",
        ),
    ] = "days",
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=1, help="Token budget of every record.")
    ] = 1024,
    retries: Annotated[int, typer.Option("--retries", min=0, help="Retries of syntax+retry.")] = 3,
    log: Annotated[
        bool, typer.Option("--log/--no-log", help="Print one line per record to stderr.")
    ] = False,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            help=(
                "K/M: run only problems whose index is K mod M, to split one run over M "
                "processes; join them with `factorspec bench report A.json B.json --out DIR`."
            ),
        ),
    ] = None,
    batch: Annotated[
        int,
        typer.Option(
            "--batch",
            min=1,
            help=(
                "Problems every method decodes together (one batched forward per step, as a "
                "serving engine batches); 1 decodes one at a time."
            ),
        ),
    ] = 1,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue the stopped run in --out (same options): decode only the problems "
            "it has no records for.",
        ),
    ] = False,
    threads: ThreadsOption = None,
) -> None:
    """Trip planning: validity, exact match and speed of every method on the same problems."""
    from rich.console import Console

    from factorspec_sdk.bench.trip import (
        expand_methods,
        parse_cities,
        parse_shard,
        run_trip_bench,
    )

    err = Console(stderr=True)
    try:
        city_range = parse_cities(cities)
        chosen = expand_methods(methods)
        shard_km = None if shard is None else parse_shard(shard)
        if itinerary not in ("days", "dates"):
            raise ValueError(f"--itinerary must be days or dates, not {itinerary!r}")
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(_USAGE_ERROR) from None
    eng = _bench_engine(engine, model, threads, err)

    try:
        report = run_trip_bench(
            n,
            city_range,
            chosen,
            eng,
            out,
            seed,
            unique,
            max_tokens=max_tokens,
            max_retries=retries,
            progress=sys.stderr.isatty(),
            log=_say if log or not sys.stderr.isatty() else None,
            shard=shard_km,
            batch=batch,
            resume=resume,
            dated=itinerary == "dates",
        )
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(_USAGE_ERROR) from None
    print(report.markdown())
    err.print(f"wrote {', '.join(str(p) for p in report.files)}")


@bench_app.command("tools")
def tools(
    n: Annotated[int, typer.Option("--n", min=1, help="Cases per category (BFCL's first).")] = 20,
    categories: Annotated[
        str,
        typer.Option(
            "--categories",
            help="all, or a comma list of: simple, multiple, parallel, live_simple, "
            "live_multiple, live_parallel.",
        ),
    ] = "all",
    methods: Annotated[
        str,
        typer.Option(
            "--methods", help="all, or a comma list of: free, xgrammar, llguidance, factorspec."
        ),
    ] = "all",
    engine: EngineOption = "embedded",
    model: ModelOption = None,
    out: Annotated[
        Path, typer.Option("--out", help="Folder for results.json, results.md and the plot.")
    ] = Path("bench-results/tools"),
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=1, help="Token budget of every answer.")
    ] = 512,
    log: Annotated[
        bool, typer.Option("--log/--no-log", help="Print one line per answer to stderr.")
    ] = False,
    threads: ThreadsOption = None,
) -> None:
    """Tool calling on BFCL: schema-valid calls, BFCL AST accuracy, tokens/forward, wall/call."""
    from rich.console import Console

    from factorspec_sdk.bench.tools import parse_categories, parse_methods, run_tools_bench
    from factorspec_sdk.engines.completion import CompletionEngine

    err = Console(stderr=True)
    try:
        cats = parse_categories(categories)
        chosen = parse_methods(methods)
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(_USAGE_ERROR) from None
    eng = _bench_engine(engine, model, threads, err, logits=True)
    assert not isinstance(eng, CompletionEngine)  # refused by _bench_engine

    command = (
        f"factorspec bench tools --n {n} --categories {','.join(cats)} "
        f"--methods {','.join(chosen)} --engine {engine} --max-tokens {max_tokens} --out {out}"
        + ("" if threads is None else f" --threads {threads}")
    )
    try:
        rep = run_tools_bench(
            n,
            cats,
            chosen,
            eng,
            out,
            max_tokens=max_tokens,
            progress=sys.stderr.isatty(),
            log=_say if log or not sys.stderr.isatty() else None,
            command=command,
        )
    except ImportError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(_USAGE_ERROR) from None
    print(rep.markdown())
    err.print(f"wrote {', '.join(str(p) for p in rep.files)}")


@bench_app.command("report")
def report(
    results: Annotated[
        list[Path],
        typer.Argument(
            help="A results.json (also of a run in progress), or the shards of one run to merge."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Folder to write into (default: the first file's folder)."),
    ] = None,
) -> None:
    """Re-render results.md and the plots from a results.json, or merge shards of one run."""
    import json

    from factorspec_sdk.bench.trip import BenchReport, merge_reports, write_outputs

    target = out if out is not None else results[0].parent
    reports = []
    for path in results:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"error: cannot read {path}: {exc}", file=sys.stderr)
            raise typer.Exit(_USAGE_ERROR) from None
        reports.append(BenchReport.from_json(data, target))
    if len(reports) == 1:
        rep = reports[0]
    else:
        if out is None:
            print("error: merging shards needs --out DIR", file=sys.stderr)
            raise typer.Exit(_USAGE_ERROR)
        try:
            rep = merge_reports(reports, target)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(_USAGE_ERROR) from None
    write_outputs(rep, target)
    print(rep.markdown())


@bench_app.command("schemas")
def schemas(
    corpus: Annotated[
        Path | None,
        typer.Argument(
            help="Folder of dataset folders of *.json schemas (JSONSchemaBench; default: "
            "../shared/schemas/jsonschemabench-dev beside the repository)."
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Folder for results.json, results.md (and the plot).")
    ] = Path("bench-results/schemas"),
    records: Annotated[
        int, typer.Option("--records", min=0, help="Records decoded per schema FactorSpec accepts.")
    ] = 2,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="First N schemas of each dataset only.")
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=0.001,
            help="Time limit of each compile (of each screen with --engine).",
        ),
    ] = 10.0,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="End to end on a real model: embedded or vllm (also scripted). Without it, the "
            "acceptance benchmark (compile, a random scripted model, mask time).",
        ),
    ] = None,
    model: ModelOption = None,
    methods: Annotated[
        str | None,
        typer.Option(
            "--methods",
            help="With --engine: all, or a comma list of: factorspec, syntax (XGrammar; vLLM's "
            "default backend), llguidance, llguidance-compact (vLLM: without free whitespace, "
            "on a second engine), syntax+ngram (k=3,5,8), syntax+ngram-k3/-k5/-k8.",
        ),
    ] = None,
    sample: Annotated[
        int | None,
        typer.Option("--sample", min=1, help="With --engine: schemas in the seeded sample (20)."),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="With --engine: seed of the sample (0).")
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option("--max-tokens", min=1, help="With --engine: every record's budget (512)."),
    ] = None,
    repeat: Annotated[
        int | None,
        typer.Option(
            "--repeat",
            min=1,
            help="With --engine: decode the sample this many times, the methods' order turned "
            "each time; each schema's median wall, and the ratios of each repeat (1).",
        ),
    ] = None,
    threads: ThreadsOption = None,
) -> None:
    """JSON Schemas: acceptance, compile and mask time of FactorSpec, llguidance, XGrammar.

    With --engine embedded|vllm, the end-to-end mode instead: on a seeded sample of the
    schemas every method accepts, one greedy record per method and schema on a real model,
    FactorSpec against the engine's own structured outputs (and with n-gram drafts): valid
    records, tokens, forwards or requests, wall per record and per token, and the ratios.
    """
    from rich.console import Console

    from factorspec_sdk.bench.schemas import (
        run_facts,
        run_schema_bench,
        schema_files,
        shared_schemas,
    )
    from factorspec_sdk.bench.schemas_report import SchemaBenchReport, write_outputs

    err = Console(stderr=True)
    root = corpus if corpus is not None else shared_schemas("jsonschemabench-dev")
    engine_options = {
        "--methods": methods,
        "--sample": sample,
        "--seed": seed,
        "--max-tokens": max_tokens,
        "--repeat": repeat,
        "--model": model,
        "--threads": threads,
    }
    try:
        files = schema_files(root, limit)
        if engine is None:
            given = [name for name, value in engine_options.items() if value is not None]
            if given:
                raise ValueError(f"{', '.join(given)}: only with --engine (embedded or vllm)")
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(_USAGE_ERROR) from None
    if engine is not None:
        _schemas_end_to_end(
            err,
            files,
            root,
            out,
            engine,
            model,
            threads,
            methods or "all",
            sample,
            seed or 0,
            max_tokens,
            timeout,
            limit,
            repeat or 1,
        )
        return
    facts = run_facts(root, records=records, timeout_s=timeout, limit=limit)
    limit_option = "" if limit is None else f" --limit {limit}"
    facts["command"] = (
        f"factorspec bench schemas {root} --out {out} --records {records}{limit_option} "
        f"--timeout {timeout:g}"
    )

    tty = err.is_terminal
    rows = run_schema_bench(
        files, records=records, timeout_s=timeout, progress=tty, log=None if tty else _say
    )
    rep = SchemaBenchReport(facts, rows)
    write_outputs(rep, out)
    print(rep.markdown())
    err.print(f"wrote {', '.join(str(p) for p in rep.files)}")


def _schemas_end_to_end(
    err: Console,
    files: list[Path],
    root: Path,
    out: Path,
    engine: str,
    model: str | None,
    threads: int | None,
    methods: str,
    sample: int | None,
    seed: int,
    max_tokens: int | None,
    timeout: float,
    limit: int | None,
    repeats: int,
) -> None:
    """``factorspec bench schemas --engine ...``: `run_schema_records`, its report written."""
    from factorspec_sdk.bench.schemas_engine import (
        DEFAULT_MAX_TOKENS,
        DEFAULT_SAMPLE,
        parse_methods,
        run_schema_records,
    )
    from factorspec_sdk.bench.schemas_engine_report import write_outputs

    try:
        chosen = parse_methods(methods)
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(_USAGE_ERROR) from None
    n = DEFAULT_SAMPLE if sample is None else sample
    budget = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
    eng = _bench_engine(engine, model, threads, err)
    command = (
        f"factorspec bench schemas {root} --engine {engine} --methods {','.join(chosen)} "
        f"--sample {n} --seed {seed} --max-tokens {budget} --timeout {timeout:g} --out {out}"
        + ("" if limit is None else f" --limit {limit}")
        + ("" if repeats == 1 else f" --repeat {repeats}")
        + ("" if model is None else f" --model {model}")
        + ("" if threads is None else f" --threads {threads}")
    )

    try:
        rep = run_schema_records(
            eng,
            files,
            chosen,
            sample=n,
            seed=seed,
            max_tokens=budget,
            timeout_s=timeout,
            log=_say,
            facts={"command": command, "corpus": str(root)},
            repeats=repeats,
        )
    finally:
        closer = getattr(eng, "close", None)
        if callable(closer):
            closer()
    write_outputs(rep, out)
    print(rep.markdown())
    err.print(f"wrote {', '.join(str(p) for p in rep.files)}")


@bench_app.command("maskbench")
def maskbench(
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="Folder of MaskBench *.json files (default: ../shared/schemas/maskbench-dev "
            "beside the repository).",
        ),
    ] = None,
    per_category: Annotated[
        int | None,
        typer.Option(
            "--per-category", min=1, help="A seeded sample of N files per category (default: all)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the per-category sample.")] = 0,
    engines: Annotated[
        str,
        typer.Option(
            "--engines", help="all, or a comma list of: factorspec, llguidance, xgrammar."
        ),
    ] = "all",
    out: Annotated[
        Path, typer.Option("--out", help="Folder for results.json, results.md and the plot.")
    ] = Path("bench-results/maskbench"),
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            min=0.001,
            help="Seconds each engine may spend on one schema, compile and instances "
            "(default 120); past it the rest are undecided.",
        ),
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget",
            min=1,
            help="Masks one candidate text's search may compute before it is undecided "
            "(default 50,000).",
        ),
    ] = None,
) -> None:
    """MaskBench: can each engine write every valid instance, and no invalid one?

    Searches every tokenization and key order of each test instance through the real masks
    (SmolLM2's vocabulary) of FactorSpec, llguidance and XGrammar, and reports per category
    the files compiled, MaskBench's pass, valid and invalid instances writable, undecided
    searches and the mask time per token.
    """
    from rich.console import Console

    from factorspec_sdk.bench.maskbench import (
        DEFAULT_BUDGET,
        DEFAULT_TIMEOUT_S,
        ENGINES,
        MaskBenchReport,
        mask_files,
        run_maskbench,
        write_outputs,
    )
    from factorspec_sdk.bench.schemas import machine_facts, shared_schemas
    from factorspec_sdk.bench.tools.names import parse_names

    err = Console(stderr=True)
    root = data if data is not None else shared_schemas("maskbench-dev")
    timeout_s = DEFAULT_TIMEOUT_S if timeout is None else timeout
    nodes = DEFAULT_BUDGET if budget is None else budget
    try:
        chosen = parse_names(engines, list(ENGINES), "engine")
        files = mask_files(root, per_category=per_category, seed=seed)
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(_USAGE_ERROR) from None
    sample = "" if per_category is None else f" --per-category {per_category} --seed {seed}"
    command = (
        f"factorspec bench maskbench --data {root}{sample} --engines {','.join(chosen)} "
        f"--timeout {timeout_s:g} --budget {nodes} --out {out}"
    )

    tty = err.is_terminal
    facts = {"command": command, **machine_facts(), "data": str(root), "files": len(files)}
    rows = run_maskbench(
        files,
        engines=chosen,
        timeout_s=timeout_s,
        budget=nodes,
        progress=tty,
        log=None if tty else _say,
    )
    rep = MaskBenchReport(facts, chosen, rows)
    write_outputs(rep, out)
    print(rep.markdown())
    err.print(f"wrote {', '.join(str(p) for p in rep.files)}")
