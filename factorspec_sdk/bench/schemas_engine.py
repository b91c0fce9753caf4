"""JSON Schemas end to end on a real engine (``factorspec bench schemas --engine embedded|vllm``).

For a seeded sample of the corpus's schemas (``--sample N`` of them, drawn with ``--seed``)
every method decodes one greedy record from the same prompt, with the same token budget, on
the same engine:

* ``factorspec`` — the schema's spec (`ir_from_json_schema`, then ``spec_from_ir`` on a
  fresh `IRCompiler`, so each record pays its compile), decoded by ``Client(engine).backend``
  (a `GenerationRequest` with that spec, as ``factorspec serve`` decodes a JSON schema sent
  in ``response_format``);
* ``syntax`` — the engine's own structured outputs. Embedded: XGrammar's mask, one token per
  forward (`baselines.syntax_steps`). vLLM: ``structured_outputs`` json under vLLM's default
  backend, on a second ``vllm.LLM`` started with vLLM's defaults
  (`completion_baselines.second_llm`);
* ``llguidance`` — embedded: llguidance's mask, one token per forward. vLLM:
  ``structured_outputs`` json under the guidance backend, on FactorSpec's own ``vllm.LLM``;
* ``llguidance-compact`` — vLLM: the guidance backend with ``disable_any_whitespace``, on a
  second ``vllm.LLM`` (vLLM reads the setting from the engine's config only), so that its
  JSON has no free whitespace, as FactorSpec's has not: per token the two then compare the
  same kind of text, where vLLM's default indented JSON has more, cheaper tokens to spread
  a request's fixed costs over. Embedded: ``llguidance`` (its text is compact already);
* ``syntax+ngram-kK`` — ``syntax`` plus n-gram prompt-lookup drafts of up to K tokens.
  Embedded: `baselines.syntax_ngram_steps`. vLLM: a ``vllm.LLM`` with vLLM's ``ngram``
  speculator.

The embedded baselines write FactorSpec's compact text (``", "`` and ``": "``, no free
whitespace). vLLM's do not: vLLM 0.32 reads ``disable_any_whitespace`` from the engine's
``structured_outputs_config`` only (the per-request ``StructuredOutputsParams`` field that
`completion_baselines.structured_runs` sets is never read), and refuses it with the ``auto``
backend, so the vLLM baselines write JSON with vLLM's default whitespace (newlines and
indentation count among their tokens), as a vLLM user gets by default; all but
``llguidance-compact``, whose second engine is started with the setting.

The prompt of a schema (`schema_prompt`) names its title and description and asks for one
JSON record; FactorSpec's schema hint is appended as the client appends it, and the
baselines get the same token ids. Every record is checked with the `jsonschema` package
(`check_json_schema_record`): valid or not, with the reason.

**The sample.** The corpus's files are shuffled with ``seed`` and screened in that order
until ``sample`` of them pass: FactorSpec compiles the schema and every library the chosen
baselines use compiles it too (XGrammar for ``syntax`` and the n-gram methods, llguidance for
``llguidance``), each within ``timeout_s``. The screen runs in a worker process
(`factorspec_sdk.bench.workers`), so a schema that hangs a library costs one time limit;
every schema screened out is counted with its reason.

**Timing.** Before the timed records, every method decodes one more schema, the first one
drawn (vLLM's first requests, the second engines' start, the libraries' first grammar), and
that warm-up is dropped; it is a schema of its own, so no cache of the timed schemas is warm
(vLLM caches compiled grammars). Where the corpus has no schema to spare, the warm-up
decodes the first timed one. A record's wall is the method's whole call, its compile
included (the embedded XGrammar's cache is off; FactorSpec's compiler is fresh for every
record) and, for FactorSpec, the chat template applied to its prompt (the baselines get the
ids ready). Every record starts from a cold prompt: the engine's prefix cache is emptied
before each (`forget_prompts`); the methods of a schema share its prompt, and without that
every method after the first would find the prompt's prefill cached (~0.2 s of a
one-request record on vLLM-CPU, charged to FactorSpec, which runs first). Forwards are
counted on the embedded engine (`baselines.DecodeRun.forwards`,
``GenerationStats.verify_steps``), requests on vLLM (one per baseline record; FactorSpec's
from ``engine.requests``). Summaries and ratios are
`factorspec_sdk.bench.schemas_engine_report`'s job.
"""

from __future__ import annotations

import functools
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from factorspec_sdk.bench import baselines
from factorspec_sdk.bench.tools.names import parse_names
from factorspec_sdk.bench.trip.options import NGRAM_KS, NGRAM_PREFIX, ngram_k
from factorspec_sdk.bench.workers import WorkerGone, WorkerProcess, captured_stderr, short_text
from factorspec_sdk.engines.completion import CompletionEngine
from factorspec_sdk.engines.protocol import Engine
from factorspec_sdk.errors import FactorSpecError
from factorspec_sdk.tokens.vocab import TokenizerInfo

if TYPE_CHECKING:
    from factorspec_sdk.bench.schemas_engine_report import SchemaRecordsReport
    from factorspec_sdk.client import Client
    from factorspec_sdk.engines.vllm_engine import VLLMEngine
    from factorspec_sdk.graph import CompiledSpec

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_SAMPLE",
    "LIBRARY_OF",
    "METHODS",
    "SchemaRecord",
    "SchemaTask",
    "ScreenLibrary",
    "Setup",
    "compile_cold",
    "draw_sample",
    "forget_prompts",
    "parse_methods",
    "rotated",
    "run_method",
    "run_schema_records",
    "schema_prompt",
    "screen_library",
]

DEFAULT_SAMPLE = 20
"""Schemas in the sample by default."""

DEFAULT_MAX_TOKENS = 512
"""Every record's token budget by default."""

METHODS: dict[str, str] = {
    "factorspec": "FactorSpec: the schema's spec decoded by Client(engine)'s backend",
    "syntax": "the engine's own structured outputs: XGrammar (embedded), vLLM's default backend",
    "llguidance": "llguidance's mask (embedded), vLLM's guidance backend (vllm)",
    "llguidance-compact": "llguidance without free whitespace: the embedded llguidance (whose "
    "text is compact already); vLLM's guidance backend with disable_any_whitespace (vllm)",
    **{
        f"{NGRAM_PREFIX}{k}": f"syntax + n-gram prompt-lookup drafts of {k} tokens"
        for k in NGRAM_KS
    },
}
"""Every method, in the order each schema runs them; FactorSpec first (the ratios' base)."""

LIBRARY_OF: dict[str, str] = {
    "factorspec": "factorspec",
    "syntax": "xgrammar",
    "llguidance": "llguidance",
    "llguidance-compact": "llguidance",
    **{f"{NGRAM_PREFIX}{k}": "xgrammar" for k in NGRAM_KS},
}
"""The library whose compile a method's sample schemas must pass (vLLM's default backend is
XGrammar for the schemas it supports)."""

_PROMPT_CHARS = 400


def parse_methods(spec: str) -> list[str]:
    """Method names from a comma list, in `METHODS` order (FactorSpec always first).

    ``all`` is every method, ``syntax+ngram`` every ``syntax+ngram-kK``; ``factorspec`` is
    added when missing (the ratios are against it).

    Raises:
        ValueError: an unknown name (the message lists the known ones), or none chosen.
    """
    family = ",".join(f"{NGRAM_PREFIX}{k}" for k in NGRAM_KS)
    items = [family if s.strip() == "syntax+ngram" else s for s in spec.split(",")]
    chosen = parse_names(",".join(items), list(METHODS), "method")
    return chosen if "factorspec" in chosen else ["factorspec", *chosen]


def schema_prompt(schema: dict[str, Any]) -> str:
    """The user message for ``schema``: its title and description, and the request.

    ``Write one JSON record for "Title": description.`` (the description cut to 400
    characters); a schema with neither asks for ``one JSON record``.
    """
    title = schema.get("title")
    about = schema.get("description")
    parts = []
    if isinstance(title, str) and title.strip():
        parts.append(f'"{" ".join(title.split())}"')
    if isinstance(about, str) and about.strip():
        text = " ".join(about.split())
        parts.append(text if len(text) <= _PROMPT_CHARS else text[: _PROMPT_CHARS - 1] + "…")
    what = ": ".join(parts).rstrip(". ")
    return f"Write one JSON record for {what}." if what else "Write one JSON record."


def compile_cold(schema: dict[str, Any]) -> CompiledSpec:
    """FactorSpec's compile of a JSON Schema on a fresh `IRCompiler` (nothing cached).

    Raises:
        FactorSpecError: the schema is refused.
    """
    from factorspec_sdk.ir import IRCompiler, ir_from_json_schema

    return IRCompiler().spec_from_ir(ir_from_json_schema(schema))


# ---------------------------------------------------------------------- the sample


class ScreenLibrary:
    """The sample's screen, in a worker process: does each library compile a schema?

    ``compile`` answers ``{library: ""}`` where it compiles and ``{library: reason}`` where it
    refuses (its own error, shortened); ``run`` is unused.
    """

    def __init__(self, tokenizer: TokenizerInfo, libraries: Sequence[str]) -> None:
        self.libraries = list(libraries)
        self.backends: dict[str, baselines.MaskBackend] = {}
        if "xgrammar" in self.libraries:
            self.backends["xgrammar"] = baselines.XGrammarBackend(tokenizer, max_threads=1)
        if "llguidance" in self.libraries:
            self.backends["llguidance"] = baselines.LLGuidanceBackend(tokenizer)

    def compile(self, schema: dict[str, Any]) -> dict[str, str]:
        """Each library's answer: ``""`` (compiles) or why it refuses."""
        answers: dict[str, str] = {}
        for lib in self.libraries:
            try:
                if lib == "factorspec":
                    compile_cold(schema)
                else:
                    with captured_stderr():
                        self.backends[lib].compile_json_schema(schema)
            except (FactorSpecError, RecursionError, RuntimeError, ValueError, TypeError) as exc:
                answers[lib] = short_text(exc, 160)
            else:
                answers[lib] = ""
        return answers

    def run(self, payload: Any) -> None:
        """Nothing to run: the screen only compiles."""
        del payload


def screen_library(tokenizer: TokenizerInfo, libraries: Sequence[str]) -> ScreenLibrary:
    """The worker's `ScreenLibrary` (a module-level factory, so it pickles)."""
    return ScreenLibrary(tokenizer, libraries)


@dataclass(slots=True)
class SchemaTask:
    """One sampled schema as every method sees it."""

    key: str
    schema: dict[str, Any]
    prompt: str
    prompt_ids: list[int]


def draw_sample(
    files: Sequence[Path],
    n: int,
    seed: int,
    libraries: Sequence[str],
    tokenizer: TokenizerInfo,
    timeout_s: float,
    log: Callable[[str], None] | None = None,
) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, int]]:
    """Up to ``n`` schemas of ``files`` (shuffled with ``seed``) that every library compiles.

    Returns:
        The chosen ``(dataset/name, schema)`` pairs, and the count of schemas screened out
        by reason (``"xgrammar refuses"``, ``"factorspec timeout"``, ``"unreadable"``...).
    """
    order = list(files)
    random.Random(seed).shuffle(order)
    chosen: list[tuple[str, dict[str, Any]]] = []
    skipped: dict[str, int] = {}
    worker = WorkerProcess(
        "screen",
        functools.partial(screen_library, tokenizer, list(libraries)),
        ("factorspec_sdk.bench.schemas_engine",),
    )
    try:
        worker.launch()
        for path in order:
            if len(chosen) >= n:
                break
            key = f"{path.parent.name}/{path.name}"
            reason = ""
            try:
                schema = json.loads(path.read_text(encoding="utf-8"))
                answers = worker.ask("compile", schema, timeout_s)
                assert isinstance(answers, dict)
                reason = next((f"{lib} refuses" for lib, why in answers.items() if why), "")
            except (OSError, ValueError):
                reason = "unreadable"
            except WorkerGone as gone:
                reason = f"screen {gone.status}"
            if reason:
                skipped[reason] = skipped.get(reason, 0) + 1
                if log is not None:
                    log(f"skip {key}: {reason}")
                continue
            if not isinstance(schema, dict):
                skipped["not an object"] = skipped.get("not an object", 0) + 1
                continue
            chosen.append((key, schema))
    finally:
        worker.stop()
    return chosen, skipped


# ---------------------------------------------------------------------- the methods


@dataclass(slots=True)
class SchemaRecord:
    """One method's record of one schema.

    Attributes:
        method: the method's name (`METHODS`).
        schema: ``dataset/file`` of the schema.
        valid: the text passed `jsonschema` against the schema.
        tokens: record tokens (end tokens excluded).
        forwards: forward passes (embedded engine; 0 on vLLM).
        requests: requests sent to the engine (vLLM; 0 on the embedded engine).
        wall_seconds: the method's whole call, compile included.
        stopped: ``done`` (FactorSpec), ``eos``, ``grammar`` or ``max_tokens`` (baselines), or
            ``error``.
        detail: why the record is invalid, or the error that ended it.
        text: the record's text.
        repeat: which of the run's repeats (``--repeat``) it is, from 0.
    """

    method: str
    schema: str
    valid: bool = False
    tokens: int = 0
    forwards: int = 0
    requests: int = 0
    wall_seconds: float = 0.0
    stopped: str = ""
    detail: str = ""
    text: str = ""
    repeat: int = 0


@dataclass(slots=True)
class Setup:
    """What the methods share for one run: the engine, its client, the budget, the masks."""

    engine: Engine | CompletionEngine
    client: Client
    max_tokens: int
    masks: dict[str, baselines.MaskBackend] = field(default_factory=dict)

    def mask(self, library: str) -> baselines.MaskBackend:
        """XGrammar's or llguidance's masks over the engine's vocabulary (built on first use)."""
        if library not in self.masks:
            tok = self.engine.tokenizer
            made: baselines.MaskBackend = (
                baselines.XGrammarBackend(tok)
                if library == "xgrammar"
                else baselines.LLGuidanceBackend(tok)
            )
            self.masks[library] = made
        return self.masks[library]


def _factorspec(record: SchemaRecord, task: SchemaTask, setup: Setup) -> None:
    from factorspec_sdk.backends.base import GenerationRequest
    from factorspec_sdk.drafter.verify import SamplingParams

    before = getattr(setup.engine, "requests", 0)
    spec = compile_cold(task.schema)
    params = SamplingParams(max_tokens=setup.max_tokens)
    request = GenerationRequest(spec.model, task.prompt, params=params, spec=spec)
    (out,) = setup.client.backend.run([request])
    record.requests = getattr(setup.engine, "requests", 0) - before
    record.text = out.text
    record.tokens = out.stats.tokens
    record.forwards = out.stats.verify_steps
    record.stopped = "done"
    if out.error is not None:
        raise out.error


def _logits_baseline(record: SchemaRecord, task: SchemaTask, setup: Setup) -> None:
    engine = setup.engine
    assert isinstance(engine, Engine)
    k = ngram_k(record.method)
    if k is not None:
        xgr = setup.mask("xgrammar")
        assert isinstance(xgr, baselines.XGrammarBackend)
        steps = baselines.syntax_ngram_steps(
            engine, xgr, task.prompt_ids, task.schema, setup.max_tokens, k
        )
    else:
        backend = setup.mask(LIBRARY_OF[record.method])
        steps = baselines.syntax_steps(
            engine, backend, task.prompt_ids, task.schema, setup.max_tokens
        )
    (run,) = baselines.drive(engine, [steps])
    if isinstance(run, Exception):
        raise run
    record.text = run.text
    record.tokens = len(run.tokens)
    record.forwards = run.forwards
    record.stopped = run.stopped


def _vllm_llm(method: str, engine: VLLMEngine) -> Any:
    """The ``vllm.LLM`` a baseline runs on (`completion_baselines.second_llm` but llguidance)."""
    from factorspec_sdk.bench.trip.completion_baselines import second_llm

    if method == "llguidance":
        return engine.llm
    return second_llm(engine, ngram_k(method), compact=method == "llguidance-compact")


def _completion_baseline(record: SchemaRecord, task: SchemaTask, setup: Setup) -> None:
    from factorspec_sdk.bench.trip.completion_baselines import structured_runs
    from factorspec_sdk.engines.vllm_engine import VLLMEngine

    engine = setup.engine
    if not isinstance(engine, VLLMEngine):
        raise TypeError(f"the baselines run on the in-process vLLM engine, not on {engine.name}")
    llm = _vllm_llm(record.method, engine)
    speculative = ngram_k(record.method) is not None
    (run,) = structured_runs(
        llm, engine, [task.prompt_ids], setup.max_tokens, [task.schema], speculative
    )
    record.text = run.text
    record.tokens = len(run.tokens)
    record.forwards = run.forwards
    record.requests = 1
    record.stopped = run.stopped


def rotated(methods: Sequence[str], repeat: int) -> list[str]:
    """``methods`` in the order of round ``repeat``: the list turned left by ``repeat``.

    Over as many rounds as methods, each method runs first once, so no method always
    follows another's record (whatever that leaves behind: caches, a busier host).
    """
    k = repeat % len(methods) if methods else 0
    return [*methods[k:], *methods[:k]]


def forget_prompts(engine: Engine | CompletionEngine) -> None:
    """Empty ``engine``'s prefix cache (vLLM's, the embedded engine's), if it has one.

    The second ``vllm.LLM`` s of the n-gram and compact baselines see each prompt once.
    """
    llm = getattr(engine, "llm", None)
    reset = getattr(llm, "reset_prefix_cache", None)
    if callable(reset):
        reset()
    cache = getattr(engine, "prefix_cache", None)
    clear = getattr(cache, "clear", None)
    if callable(clear):
        clear()


def run_method(method: str, task: SchemaTask, setup: Setup) -> SchemaRecord:
    """``method``'s record of ``task``, timed and checked; a method that raises is invalid.

    The record starts from a cold prompt (`forget_prompts`).
    """
    from factorspec_sdk.ir import check_json_schema_record, json_schema_validator

    record = SchemaRecord(method, task.key)
    forget_prompts(setup.engine)
    started = time.perf_counter()
    try:
        if method == "factorspec":
            _factorspec(record, task, setup)
        elif isinstance(setup.engine, CompletionEngine):
            _completion_baseline(record, task, setup)
        else:
            _logits_baseline(record, task, setup)
    except Exception as exc:  # a crashing method is an invalid record with its message
        record.wall_seconds = time.perf_counter() - started
        record.stopped = "error"
        record.detail = short_text(exc)
        return record
    record.wall_seconds = time.perf_counter() - started
    try:
        check_json_schema_record(
            json_schema_validator(task.schema, check_schema=False), record.text
        )
    except FactorSpecError as exc:
        record.detail = short_text(exc)
    else:
        record.valid = True
    return record


# ---------------------------------------------------------------------- the run


def _tasks(client: Client, chosen: Sequence[tuple[str, dict[str, Any]]]) -> list[SchemaTask]:
    """One task per schema: the prompt and its token ids (with FactorSpec's hint)."""
    tasks = []
    for key, schema in chosen:
        prompt = schema_prompt(schema)
        ids = client.prompt_ids(prompt, layout=compile_cold(schema).layout)
        tasks.append(SchemaTask(key, schema, prompt, ids))
    return tasks


def run_schema_records(
    engine: Engine | CompletionEngine,
    files: Sequence[Path],
    methods: Sequence[str],
    *,
    sample: int = DEFAULT_SAMPLE,
    seed: int = 0,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    timeout_s: float = 10.0,
    log: Callable[[str], None] | None = None,
    facts: dict[str, Any] | None = None,
    warm_up: bool = True,
    repeats: int = 1,
) -> SchemaRecordsReport:
    """Every method on the same sampled schemas (see the module docstring).

    Args:
        engine: the engine (a logits engine, or the in-process vLLM engine).
        files: the corpus's schema files (`factorspec_sdk.bench.schemas.schema_files`).
        methods: method names (`parse_methods`).
        sample: schemas in the sample.
        seed: seed of the sample's order.
        max_tokens: every record's token budget.
        timeout_s: each screen's time limit.
        log: called with one line per record as it ends (and per schema screened out).
        facts: what the report says of the run (command, machine); the run adds its own.
        warm_up: decode the warm-up schema first (False: the first timed records pay the
            first-use costs; for tests).
        repeats: every schema's records this many times, each round over the whole sample
            with the methods in another order (`rotated`), so that a drift of the host's
            speed falls on every method alike; the report takes each schema's median.

    Returns:
        The `factorspec_sdk.bench.schemas_engine_report.SchemaRecordsReport`.

    Raises:
        ValueError: ``sample`` < 1, ``max_tokens`` < 1, ``repeats`` < 1 or an unknown method.
    """
    from factorspec_sdk.bench.schemas import machine_facts
    from factorspec_sdk.bench.schemas_engine_report import SchemaRecordsReport
    from factorspec_sdk.client import Client

    if sample < 1 or max_tokens < 1 or repeats < 1:
        raise ValueError("the sample, the token budget and the repeats must be >= 1")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; known: {', '.join(METHODS)}")
    libraries = list(dict.fromkeys(LIBRARY_OF[m] for m in methods))
    tok = engine.tokenizer
    drawn = sample + warm_up  # the first schema drawn warms up, the others are timed
    chosen, skipped = draw_sample(files, drawn, seed, libraries, tok, timeout_s, log)
    client = Client(engine)
    setup = Setup(engine, client, max_tokens)
    tasks = _tasks(client, chosen)
    warm = tasks[0] if tasks and warm_up else None
    if len(tasks) > sample:
        tasks = tasks[1:]
    config: dict[str, Any] = {
        **(facts or {}),
        **machine_facts(),
        "engine": engine.name,
        "model": str(getattr(engine, "model_path", "")),
        "methods": list(methods),
        "sample": sample,
        "sampled": len(tasks),
        "seed": seed,
        "max_tokens": max_tokens,
        "repeats": repeats,
        "screen_timeout_s": timeout_s,
        "screened_out": skipped,
        "warm_up": None if warm is None else warm.key,
    }
    records: list[SchemaRecord] = []
    if warm is not None:
        for method in methods:  # the warm-up, dropped
            run_method(method, warm, setup)
    for repeat in range(repeats):
        for i, task in enumerate(tasks, 1):
            for method in rotated(methods, repeat):
                record = run_method(method, task, setup)
                record.repeat = repeat
                records.append(record)
                if log is None:
                    continue
                round_ = f" repeat {repeat + 1}/{repeats}" if repeats > 1 else ""
                log(
                    f"[{i}/{len(tasks)}{round_}] {task.key} {method}: valid={record.valid} "
                    f"tokens={record.tokens} forwards={record.forwards} "
                    f"requests={record.requests} wall={record.wall_seconds:.2f}s"
                    + (f" ({record.detail})" if record.detail else "")
                )
    if isinstance(engine, CompletionEngine):
        from factorspec_sdk.bench.trip.completion_baselines import close_ngram_engines

        close_ngram_engines()
    return SchemaRecordsReport(config, records)
