"""Ordinary records on vLLM: FactorSpec's segments against vLLM's own structured outputs.

``python -m factorspec_sdk.bench.ordinary`` decodes one greedy record of each of three models
a user writes without relations (free text, a few enums and numbers: `Review` with a
600-character body, `Person`, `Recipe`) on ``Client(VLLMEngine(...))``, and one with vLLM's
own ``structured_outputs`` json (the model's JSON schema) on the same ``vllm.LLM``, from the
same prompt tokens (the client's chat messages and schema hint), and prints per model:
tokens, requests, the wall and the wall per token of each, and the ratio of the two per
token and per record. One record per model, after a warm-up record of the last one (vLLM's
first requests, a first spec compile and grammar build), each line printed as it ends. Each
record starts from a cold prompt (`factorspec_sdk.bench.schemas_engine.forget_prompts`): the
baseline's prompt is FactorSpec's, whose prefill would otherwise be cached for it.

``--repeat N`` decodes each model's pair N times, FactorSpec first in the even repeats and
the baseline first in the odd ones, and reports the median wall of each (greedy: the same
records each time) and the ratio of each repeat: on a shared 2-core host the same record's
wall moves by a fifth within minutes, and one pair cannot tell that from the protocol.

``--constraint`` is the engine's style (``spans``, the default, or ``tokens``: one request
per token the model chooses, the style before Issue #42) and ``--backend`` vLLM's
structured-output backend (``guidance``, the engine's default, or ``auto``: vLLM's own
default, XGrammar for these schemas; only ``tokens`` sends no grammar). vLLM runs one
backend per engine, so the baseline runs under the same one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from factorspec_sdk.engines.vllm_engine import VLLMEngine

__all__ = ["MODELS", "Person", "Recipe", "Review", "Run", "main", "markdown", "run"]

MAX_TOKENS = 1024
"""Every record's token budget, FactorSpec's and the baseline's."""


class Review(BaseModel):
    """A product review."""

    title: str = Field(max_length=80)
    body: str = Field(min_length=600, max_length=1200)
    tags: list[str] = Field(max_length=5)
    rating: int = Field(ge=1, le=5)


class Person(BaseModel):
    """A contact card."""

    name: str = Field(max_length=60)
    email: str = Field(max_length=80)
    city: str = Field(max_length=40)
    bio: str = Field(max_length=300)
    role: Literal["engineer", "designer", "manager", "sales", "other"]


class Recipe(BaseModel):
    """A recipe."""

    name: str = Field(max_length=60)
    ingredients: list[str] = Field(min_length=2, max_length=8)
    steps: list[str] = Field(min_length=2, max_length=6)
    minutes: int = Field(ge=1, le=600)


MODELS: dict[str, tuple[type[BaseModel], str]] = {
    "review": (
        Review,
        "Write a review of the blender you bought last week: a title, a body of about 600 "
        "characters, a few tags and a rating from 1 to 5.",
    ),
    "person": (
        Person,
        "Make a contact card for Ada Lovelace, a software engineer in London who writes "
        "about early computing.",
    ),
    "recipe": (Recipe, "Give me a simple recipe for pancakes."),
}
"""Each model with its prompt."""


@dataclass(slots=True)
class Run:
    """One model's record by FactorSpec and by vLLM's structured outputs.

    Attributes:
        name: the model's key in `MODELS`.
        tokens: FactorSpec's record tokens.
        requests: the requests FactorSpec sent vLLM for it.
        seconds: FactorSpec's wall for the record (the ``generate`` call).
        valid: FactorSpec's record passed the model's validation.
        baseline_tokens: vLLM's record tokens (structured outputs json).
        baseline_seconds: vLLM's wall for it.
        baseline_valid: vLLM's record passed the model's validation.
        text: FactorSpec's record.
        baseline_text: vLLM's record.
        walls: FactorSpec's wall in each repeat (``seconds`` is their median).
        baseline_walls: vLLM's wall in each repeat (``baseline_seconds``: their median).
    """

    name: str
    tokens: int
    requests: int
    seconds: float
    valid: bool
    baseline_tokens: int
    baseline_seconds: float
    baseline_valid: bool
    text: str = ""
    baseline_text: str = ""
    walls: list[float] = field(default_factory=list)
    baseline_walls: list[float] = field(default_factory=list)

    @property
    def repeat_ratios(self) -> list[float]:
        """Per repeat, vLLM's wall over FactorSpec's (per token: the same tokens each time)."""
        scale = max(1, self.tokens) / max(1, self.baseline_tokens)
        return [b / f * scale for f, b in zip(self.walls, self.baseline_walls, strict=True) if f]

    @property
    def ms_per_token(self) -> float:
        """FactorSpec's wall per record token, in ms."""
        return 1000 * self.seconds / max(1, self.tokens)

    @property
    def baseline_ms_per_token(self) -> float:
        """The wall per record token of vLLM's own structured outputs, in ms."""
        return 1000 * self.baseline_seconds / max(1, self.baseline_tokens)


def _valid(model: type[BaseModel], text: str) -> bool:
    try:
        model.model_validate_json(text)
    except ValueError:
        return False
    return True


def run(
    engine: VLLMEngine, names: list[str] | None = None, *, log: bool = False, repeats: int = 1
) -> list[Run]:
    """One record of each model (``names``: these; None: all) by FactorSpec and by vLLM.

    Each model's spec is compiled first, and a warm-up record of the last model runs by each
    (vLLM's first requests, the first grammar builds), outside the timing. With ``repeats``
    each pair is decoded that many times, the order turned each time (see the module).

    Raises:
        ValueError: ``repeats`` < 1.
    """
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    from factorspec_sdk.bench.schemas_engine import forget_prompts, rotated
    from factorspec_sdk.bench.trip.completion_baselines import structured_runs
    from factorspec_sdk.client import Client
    from factorspec_sdk.graph import SpecCompiler
    from factorspec_sdk.relations.pydantic_layout import build_layout

    compiler = SpecCompiler()
    client = Client(engine, compiler=compiler)
    chosen = names if names is not None else list(MODELS)
    for name in chosen:
        compiler.compile_spec(MODELS[name][0], None)
    out: list[Run] = []
    for k, name in enumerate([chosen[-1], *chosen]):
        model, prompt = MODELS[name]
        ids = client.prompt_ids(prompt, layout=build_layout(model))
        one: Run | None = None
        for repeat in range(repeats if k else 1):
            walls: dict[str, float] = {}
            for side in rotated(("factorspec", "vllm"), repeat):
                forget_prompts(engine)
                if side == "factorspec":
                    before = engine.requests
                    t0 = time.perf_counter()
                    result = client.generate(
                        model, prompt, max_tokens=MAX_TOKENS, return_result=True
                    )
                    walls[side] = time.perf_counter() - t0
                    requests = engine.requests - before
                else:
                    (base,) = structured_runs(
                        engine.llm, engine, [ids], MAX_TOKENS, [model.model_json_schema()]
                    )
                    walls[side] = base.wall_seconds
            if one is None:
                one = Run(
                    name,
                    len(result.tokens),
                    requests,
                    0.0,
                    _valid(model, result.text),
                    len(base.tokens),
                    0.0,
                    _valid(model, base.text),
                    result.text,
                    base.text,
                )
            one.walls.append(walls["factorspec"])
            one.baseline_walls.append(walls["vllm"])
            one.seconds = statistics.median(one.walls)
            one.baseline_seconds = statistics.median(one.baseline_walls)
            if log:
                round_ = f" repeat {repeat + 1}/{repeats}" if k and repeats > 1 else ""
                print(
                    f"{name}{'' if k else ' (warm-up)'}{round_}: "
                    f"{len(result.tokens)} tokens, {requests} requests, "
                    f"{walls['factorspec']:.1f} s; vLLM {len(base.tokens)} tokens, "
                    f"{walls['vllm']:.1f} s",
                    flush=True,
                )
        assert one is not None
        out.append(one)
    return out[1:]


def markdown(runs: list[Run]) -> str:
    """The runs as a Markdown table (with repeats: the median walls, and each repeat's ratio)."""
    repeated = any(len(r.walls) > 1 for r in runs)
    lines = [
        "| model | FactorSpec on vLLM: tokens, requests, ms/token, s/record | vLLM structured "
        "outputs: tokens, ms/token, s/record | per token | per record | valid (FactorSpec, vLLM) |"
        + (" per token, each repeat |" if repeated else ""),
        "|---|---|---|---:|---:|---|" + ("---|" if repeated else ""),
    ]
    for r in runs:
        per_token = r.baseline_ms_per_token / r.ms_per_token if r.ms_per_token else 0.0
        per_record = r.baseline_seconds / r.seconds if r.seconds else 0.0
        each = ", ".join(f"{x:.2f}x" for x in r.repeat_ratios)
        lines.append(
            f"| {r.name} | {r.tokens}, {r.requests}, {r.ms_per_token:.0f}, {r.seconds:.2f} "
            f"| {r.baseline_tokens}, {r.baseline_ms_per_token:.0f}, {r.baseline_seconds:.2f} "
            f"| {per_token:.2f}x | {per_record:.2f}x | {r.valid}, {r.baseline_valid} |"
            + (f" {each} |" if repeated else "")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--models", default="all", help=f"all, or a comma list: {', '.join(MODELS)}"
    )
    parser.add_argument("--constraint", choices=("spans", "tokens"), default="spans")
    parser.add_argument("--backend", choices=("guidance", "auto"), default="guidance")
    parser.add_argument("--dtype", default=None, help="vLLM's dtype (default: the engine's)")
    parser.add_argument("--json", default=None, help="also write the runs here")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="decode each pair this many times, the order turned each time (median walls)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    names = None if args.models == "all" else [n.strip() for n in args.models.split(",")]
    for n in names or []:
        if n not in MODELS:
            parser.error(f"no model {n!r}; models: {', '.join(MODELS)}")
    from factorspec_sdk.engines.vllm_engine import VLLMEngine

    engine = VLLMEngine(
        dtype=args.dtype,
        constraint=args.constraint,
        structured_outputs_config={"backend": args.backend},
    )
    try:
        runs = run(engine, names, log=True, repeats=args.repeat)
    finally:
        engine.close()
    each = (
        "one record per model"
        if args.repeat == 1
        else f"{args.repeat} records per model (median walls)"
    )
    print(
        f"vLLM {engine.vllm_version} ({engine.dtype}), constraint={args.constraint}, "
        f"structured-output backend {args.backend}, greedy, {each}"
    )
    print(markdown(runs))
    if args.json:
        rows = [
            {
                **asdict(r),
                "ms_per_token": r.ms_per_token,
                "baseline_ms_per_token": r.baseline_ms_per_token,
            }
            for r in runs
        ]
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":  # vLLM starts worker processes: scripts need this guard
    main()
