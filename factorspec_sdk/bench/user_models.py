"""User-models benchmark: where a record's time goes on the models users write.

``python -m factorspec_sdk.bench.user_models --engine scripted`` (``factorspec bench
models``, ``make bench-models``) decodes one record of each model of the suite
(`factorspec_sdk.bench.models`: meeting plans with datetimes, invoices and expenses in
``Decimal``, a ticket and a form with ``Optional``/``Literal``/``Enum``/patterns, dated
stays, a shift roster, an order with nested look-ups, a workout with products of two
fields) through `Client.generate`, as a user calls it, and prints per model: the spec's
compile, the oracle's checks and time, the planning (oracle + masks) and the part of it on
the critical path, the forwards, the wall, and the call's parts (`GenerationStats.parts`,
which add up to the wall).

Engines:

* ``scripted`` (the default): a model with free forwards that writes each request's golden
  record (`GoldenEngine`) over the default model's vocabulary when its tokenizer is on this
  machine (else a tiny one), so what a record costs is FactorSpec's own planning, over the
  masks the embedded engine would need;
* ``embedded``: the default model (SmolLM2-135M) on this machine, greedy.

Every record is checked with the model's own validators (``model_validate_json`` with the
context); a scripted record must be the golden one. Each model is compiled cold (one
`SpecCompiler` per run, and a warm-up record of another model first, so imports and the
engine's first call are out of the way). Run it on an otherwise idle machine; the CPU is
the process's (``time.process_time``, the planning worker and torch's threads included).
"""

from __future__ import annotations

import argparse
import datetime as dt
import enum
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from factorspec_sdk.engines.scripted import ScriptedEngine

if TYPE_CHECKING:
    from pydantic import BaseModel

    from factorspec_sdk.bench.models import UserModel
    from factorspec_sdk.client import Client
    from factorspec_sdk.engines.protocol import Engine, SequenceId
    from factorspec_sdk.tokens.vocab import TokenizerInfo

__all__ = [
    "ENGINES",
    "GoldenEngine",
    "ModelRun",
    "golden_text",
    "main",
    "markdown",
    "run",
    "run_model",
]

ENGINES = ("scripted", "embedded")
"""The engines the benchmark runs on (see the module)."""

MAX_TOKENS = 1024
"""Every record's token budget (the longest golden record takes about 450)."""


def golden_text(record: BaseModel) -> str:
    """``record`` as the writer writes it: keys in field order, ``", "`` and ``": "``.

    Numbers in fixed point without trailing zeros (``18.5``, ``222``), dates, times and
    datetimes in ISO form to the second, enums by value, ``None`` as ``null``.
    """

    def value(x: object) -> object:
        if isinstance(x, dict):
            return {k: value(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [value(v) for v in x]
        if isinstance(x, enum.Enum):
            return value(x.value)
        if isinstance(x, dt.date | dt.time):  # datetime is a date
            return x.isoformat()
        if isinstance(x, Decimal | float) and not isinstance(x, bool):
            return _Number(x)
        return x

    def dumps(x: object) -> str:
        if isinstance(x, _Number):
            return x.text()
        if isinstance(x, dict):
            return "{" + ", ".join(f"{json.dumps(k)}: {dumps(v)}" for k, v in x.items()) + "}"
        if isinstance(x, list):
            return "[" + ", ".join(dumps(v) for v in x) + "]"
        return json.dumps(x, ensure_ascii=False)

    return dumps(value(record.model_dump(mode="python")))


@dataclass(frozen=True, slots=True)
class _Number:
    """A float or Decimal, written in fixed point."""

    x: Decimal | float

    def text(self) -> str:
        d = Decimal(repr(self.x)) if isinstance(self.x, float) else self.x
        if d == d.to_integral_value():
            return str(int(d))
        return format(d.normalize(), "f")


class GoldenEngine(ScriptedEngine):
    """A scripted engine whose model writes a given record (`follow`), with free forwards.

    At each position, the tokens that continue the record's text from what the sequence
    has written since its prompt get logits by their length (the longest wins, so the
    model writes the record in as few tokens as the masks allow); once the text is done,
    end of sequence. Where the masks made the text leave the record (they never do for a
    valid record), every logit is 0.
    """

    def __init__(self, tokenizer: TokenizerInfo) -> None:
        super().__init__(tokenizer, self._logits, name="scripted-golden")
        vocab = tokenizer.vocab
        self._ids: dict[bytes, int] = {}
        for i, piece in enumerate(vocab):
            if piece and i not in tokenizer.special_ids:
                self._ids.setdefault(piece, i)
        self._longest = max(len(p) for p in self._ids)
        self._eos = tokenizer.eos_ids[0]
        self._text = b""
        self._start = 0

    def follow(self, text: str) -> None:
        """Write ``text`` in the sequences made from now on."""
        self._text = text.encode("utf-8")

    def new_sequence(self, prompt_ids: Sequence[int]) -> SequenceId:
        """A sequence of ``prompt_ids`` (the record starts after them and one more)."""
        self._start = len(prompt_ids) + 1  # the decoder extends with the prompt's last token
        return super().new_sequence(prompt_ids)

    def _logits(self, prefix: Sequence[int]) -> npt.NDArray[np.float32]:
        row = np.zeros(self.tokenizer.vocab_size, dtype=np.float32)
        written = self.tokenizer.decode(prefix[self._start :])
        if not self._text.startswith(written):
            return row
        rest = self._text[len(written) :]
        if not rest:
            row[self._eos] = 1.0
        for k in range(1, min(self._longest, len(rest)) + 1):
            token = self._ids.get(rest[:k])
            if token is not None:
                row[token] = float(k)
        return row


def scripted_engine(vocabulary: str = "model") -> GoldenEngine:
    """The benchmark's scripted engine (`GoldenEngine`).

    ``vocabulary``: ``"model"``, the default model's tokenizer when it is on this machine
    (the embedded engine's masks), else ``"tiny"``; ``"tiny"``: printable ASCII.
    """
    from factorspec_sdk.tokens.vocab import TokenizerInfo

    if vocabulary == "model":
        tokenizer = _model_tokenizer()
        if tokenizer is not None:
            return GoldenEngine(tokenizer)
    pieces = [*sorted({chr(c) for c in range(32, 127)} | {"\n"}), '{"', '": ', ', "']
    return GoldenEngine(TokenizerInfo.tiny(pieces))


def _model_tokenizer() -> TokenizerInfo | None:
    """The default model's vocabulary, if its converted folder is on this machine."""
    from factorspec_sdk.engines.model_store import default_model_folder
    from factorspec_sdk.tokens.vocab import TokenizerInfo

    folder = default_model_folder()
    if not (folder / "tokenizer.json").is_file():
        return None
    try:
        import transformers
    except ImportError:
        return None
    tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return TokenizerInfo.from_hf(tok)


@dataclass(slots=True)
class ModelRun:
    """One record of one model of the suite.

    Attributes:
        name: the model's name in the suite.
        has: what the model has.
        engine: the engine's name.
        valid: the record passed the model's validators with the context.
        golden: the record is the request's golden one.
        tokens: record tokens.
        verify_steps: forwards.
        spec_seconds: the spec's compile (cold).
        oracle_queries: the oracle's answers.
        solver_checks: Z3 checks they took.
        oracle_seconds: time inside the oracle.
        plan_seconds: oracle, writer, tokenization and masks, on any thread.
        critical_plan_seconds: the planning the decoding thread waited for.
        forward_seconds: the engine's forwards.
        wall_seconds: the whole `generate` call.
        cpu_seconds: the process's CPU during the call (every thread).
        parts: the call's parts (`GenerationStats.parts`; they add up to the wall).
        text: the record.
    """

    name: str
    has: str
    engine: str
    valid: bool
    golden: bool
    tokens: int
    verify_steps: int
    spec_seconds: float
    oracle_queries: int
    solver_checks: int
    oracle_seconds: float
    plan_seconds: float
    critical_plan_seconds: float
    forward_seconds: float
    wall_seconds: float
    cpu_seconds: float
    parts: dict[str, float] = field(default_factory=dict)
    text: str = ""

    @property
    def critical_share(self) -> float:
        """Planning on the critical path, as a share of the wall."""
        return self.critical_plan_seconds / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def named_share(self) -> float:
        """The share of the wall the named parts cover (all but ``other_seconds``)."""
        if not self.wall_seconds:
            return 1.0
        return 1.0 - self.parts.get("other_seconds", 0.0) / self.wall_seconds


def run_model(client: Client, case: UserModel) -> ModelRun:
    """Decode one record of ``case`` greedily on ``client`` and measure it."""
    engine = client.engine
    golden = golden_text(case.golden)
    if isinstance(engine, GoldenEngine):
        engine.follow(golden)
    c0 = time.process_time()
    result = client.generate(
        case.model,
        case.prompt,
        context=case.context,
        return_result=True,
        temperature=0.0,
        max_tokens=MAX_TOKENS,
    )
    cpu = time.process_time() - c0
    s = result.stats
    case.model.model_validate_json(result.text, context=case.context)  # raises if invalid
    return ModelRun(
        name=case.name,
        has=case.has,
        engine=engine.name,
        valid=True,
        golden=result.text == golden,
        tokens=s.tokens,
        verify_steps=s.verify_steps,
        spec_seconds=s.spec_seconds,
        oracle_queries=s.oracle_queries,
        solver_checks=s.solver_checks,
        oracle_seconds=s.oracle_query_seconds,
        plan_seconds=s.plan_seconds,
        critical_plan_seconds=s.critical_plan_seconds + s.grammar_seconds,
        forward_seconds=s.forward_seconds,
        wall_seconds=s.wall_seconds,
        cpu_seconds=cpu,
        parts=s.parts(),
        text=result.text,
    )


def make_engine(name: str, vocabulary: str = "model") -> Engine:
    """The engine called ``name`` (`ENGINES`).

    Raises:
        ValueError: an unknown name.
    """
    if name == "scripted":
        return scripted_engine(vocabulary)
    if name == "embedded":
        from factorspec_sdk.engines import create_logits_engine

        return create_logits_engine("embedded")
    raise ValueError(f"unknown engine {name!r}; the benchmark runs on {', '.join(ENGINES)}")


def run(
    names: list[str] | None = None,
    engine: Engine | None = None,
    *,
    warm_up: bool = True,
    log: bool = False,
) -> list[ModelRun]:
    """One record of each model of the suite (``names``: these; None: all) on ``engine``.

    ``engine``: None, the scripted engine. ``warm_up``: decode one record of the first model
    on another compiler first (imports, the engine's first call), and build the vocabulary's
    tables (free strings', grammar values'), built once per tokenizer as a server builds
    them before its first request; else the first record that writes a free string or a
    grammar value would count them.
    """
    from factorspec_sdk.bench.models import suite
    from factorspec_sdk.client import Client
    from factorspec_sdk.graph import SpecCompiler
    from factorspec_sdk.tokens.free import free_tables
    from factorspec_sdk.tokens.grammar import grammar_tables

    cases = suite(names)
    eng = engine if engine is not None else scripted_engine()
    if warm_up and cases:
        Client(eng, compiler=SpecCompiler()).generate(
            cases[0].model, cases[0].prompt, context=cases[0].context, max_tokens=MAX_TOKENS
        )
        free_tables(eng.tokenizer)
        grammar_tables(eng.tokenizer)
    client = Client(eng, compiler=SpecCompiler())  # each model's first compile is cold
    out = []
    for case in cases:
        out.append(run_model(client, case))
        if log:
            r = out[-1]
            print(
                f"{r.name}: {r.tokens} tokens, {r.verify_steps} steps, wall {r.wall_seconds:.2f}s",
                flush=True,
            )
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def markdown(runs: Sequence[ModelRun]) -> str:
    """The runs as two Markdown tables: the figures, then each call's parts in ms."""
    lines = [
        "| model | tokens, steps | spec ms | oracle ms (checks) | oracle + masks ms "
        "(critical) | forward ms | wall ms | critical / wall | parts named | CPU ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r.name}{'' if r.golden or r.engine != 'scripted-golden' else ' (not golden)'} "
            f"| {r.tokens}, {r.verify_steps} | {_ms(r.spec_seconds)} "
            f"| {_ms(r.oracle_seconds)} ({r.solver_checks}) "
            f"| {_ms(r.plan_seconds)} ({_ms(r.critical_plan_seconds)}) "
            f"| {_ms(r.forward_seconds)} | {_ms(r.wall_seconds)} "
            f"| {r.critical_share:.1%} | {r.named_share:.1%} | {_ms(r.cpu_seconds)} |"
        )
    shown = [p for p in (runs[0].parts if runs else {}) if any(r.parts[p] >= 5e-4 for r in runs)]
    lines += ["", "| model | " + " | ".join(p.removesuffix("_seconds") for p in shown) + " |"]
    lines.append("|---|" + "---:|" * len(shown))
    for r in runs:
        lines.append(f"| {r.name} | " + " | ".join(_ms(r.parts[p]) for p in shown) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    from factorspec_sdk.bench.models import NAMES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--engine", choices=ENGINES, default="scripted")
    parser.add_argument(
        "--models", default="all", help=f"all, or a comma list of: {', '.join(NAMES)}"
    )
    parser.add_argument(
        "--vocabulary",
        choices=("model", "tiny"),
        default="model",
        help="the scripted engine's vocabulary: the default model's (when on this machine) "
        "or printable ASCII",
    )
    parser.add_argument("--json", default=None, help="also write the runs here")
    args = parser.parse_args(argv)
    names = None if args.models == "all" else [n.strip() for n in args.models.split(",")]
    try:
        from factorspec_sdk.bench.models import suite

        suite(names)
    except ValueError as exc:
        parser.error(str(exc))
    engine = make_engine(args.engine, args.vocabulary)
    runs = run(names, engine, log=True)
    print(f"{len(runs)} models, one record each, engine {engine.name}, greedy")
    print(markdown(runs))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in runs], indent=2) + "\n")


if __name__ == "__main__":
    main()
