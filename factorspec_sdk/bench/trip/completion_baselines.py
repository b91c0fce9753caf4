"""Running the trip benchmark's baselines on vLLM (``factorspec bench trip --engine vllm``).

On a completion engine the baselines are what a vLLM user runs, on the same ``vllm.LLM``
instance that FactorSpec uses (prompts as token ids, greedy, the same budget):

* ``free`` — ``LLM.generate`` without a constraint;
* ``syntax`` — vLLM structured outputs, ``StructuredOutputsParams(json=schema)``, under the
  backend FactorSpec's engine starts vLLM with (llguidance,
  `factorspec_sdk.engines.vllm_engine.STRUCTURED_BACKEND`; vLLM runs one backend per
  engine), the same schema as the embedded baseline, with vLLM's default whitespace (vLLM
  0.32 reads ``disable_any_whitespace`` from the engine's ``structured_outputs_config``
  only: the field of the same name in a request's ``StructuredOutputsParams`` is never
  read), so its records may hold newlines and indentation where FactorSpec's are compact;
* ``syntax+retry`` — the same, then up to 3 retries whose user message names the violated
  relations (the first attempt is the ``syntax`` record, reused);
* ``syntax+ngram-kK`` — the same schema on a second ``vllm.LLM`` started with
  ``speculative_config={"method": "ngram", "num_speculative_tokens": K}`` (vLLM's own n-gram
  speculator verifying under the grammar masks of its default backend, XGrammar). Forward
  passes are counted from vLLM's metrics: every forward yields one token past its accepted
  draft tokens, so forwards = generated tokens - accepted draft tokens.

A batch of problems is one ``LLM.generate`` call (vLLM batches them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from factorspec_sdk.bench.baselines import DecodeRun
from factorspec_sdk.bench.trip.options import ngram_k
from factorspec_sdk.bench.trip.tasks import (
    Setup,
    Task,
    itinerary_schema,
    relation_docs,
    violation_sentences,
)
from factorspec_sdk.domains.trip import evaluate
from factorspec_sdk.engines.protocol import ChatMessage

if TYPE_CHECKING:
    from factorspec_sdk.engines.vllm_engine import VLLMEngine

__all__ = [
    "accepted_draft_tokens",
    "close_ngram_engines",
    "prepare",
    "run_completion_baseline",
    "second_llm",
    "structured_runs",
]

_NGRAM_LLMS: dict[tuple[int, int | None, bool], Any] = {}


def accepted_draft_tokens(llm: Any) -> int:
    """The running count of accepted speculative tokens of a ``vllm.LLM`` that logs stats."""
    total = 0
    for metric in llm.get_metrics():
        name = str(getattr(metric, "name", ""))
        if name.startswith("vllm:spec_decode_num_accepted_tokens") and "per_pos" not in name:
            total += int(getattr(metric, "value", 0) or 0)
    return total


def second_llm(engine: VLLMEngine, k: int | None = None, *, compact: bool = False) -> Any:
    """A second ``vllm.LLM`` on the engine's model with vLLM's own defaults (cached).

    Its structured outputs run under vLLM's default backend (``auto``: XGrammar where it
    supports the schema), not the guidance backend FactorSpec's engine starts vLLM with.
    ``k``: vLLM's n-gram speculator proposes up to ``k`` draft tokens per step (the
    ``syntax+ngram-kK`` baselines); None: no speculator (vLLM's plain structured outputs).
    ``compact``: instead, the guidance backend with ``disable_any_whitespace`` (JSON without
    free whitespace, as FactorSpec writes it; vLLM 0.32 reads that setting from the
    engine's config only). Started once per engine, ``k`` and ``compact``;
    `close_ngram_engines` shuts them down.
    """
    key = (id(engine), k, compact)
    if key not in _NGRAM_LLMS:
        import vllm

        speculative: dict[str, Any] = {}
        if k is not None:
            speculative["speculative_config"] = {
                "method": "ngram",
                "num_speculative_tokens": k,
                "prompt_lookup_max": 4,
                "prompt_lookup_min": 1,
            }
        if compact:
            speculative["structured_outputs_config"] = {
                "backend": "guidance",
                "disable_any_whitespace": True,
            }
        _NGRAM_LLMS[key] = vllm.LLM(
            model=engine.model_path,
            dtype=engine.dtype,
            enforce_eager=True,
            max_model_len=4096,
            enable_prefix_caching=True,
            disable_log_stats=False,
            **speculative,
        )
    return _NGRAM_LLMS[key]


def structured_runs(
    llm: Any,
    engine: VLLMEngine,
    prompts: Sequence[list[int]],
    max_tokens: int,
    schema: Any,
    speculative: bool = False,
) -> list[DecodeRun]:
    """Greedy runs of ``prompts`` on ``llm``, each under vLLM's structured outputs.

    ``schema[i]`` is prompt ``i`` 's JSON schema (``StructuredOutputsParams(json=...)``, the
    engine's whitespace setting; None: no constraint); one ``LLM.generate`` call for all,
    its wall shared evenly. ``speculative``: ``llm`` drafts (n-gram), whose accepted draft
    tokens are taken off the forwards.
    """
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import StructuredOutputsParams

    params = [
        SamplingParams(
            max_tokens=max_tokens,
            temperature=0.0,
            structured_outputs=None if s is None else StructuredOutputsParams(json=s),
        )
        for s in schema
    ]
    before = accepted_draft_tokens(llm) if speculative else 0
    started = time.perf_counter()
    outputs = llm.generate(
        [TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params, use_tqdm=False
    )
    seconds = time.perf_counter() - started
    accepted = accepted_draft_tokens(llm) - before if speculative else 0
    eos = engine.tokenizer.eos_ids
    runs: list[DecodeRun] = []
    for out in outputs:
        gen = out.outputs[0]
        ids = [int(t) for t in gen.token_ids]
        forwards = len(ids)
        stopped = "max_tokens" if gen.finish_reason == "length" else "eos"
        while ids and ids[-1] in eos:
            ids.pop()
        text = engine.tokenizer.decode(ids).decode("utf-8", errors="replace")
        run = DecodeRun(text, ids, forwards=forwards, stopped=stopped)
        run.forward_seconds = seconds / len(prompts)
        run.wall_seconds = seconds / len(prompts)
        runs.append(run)
    if accepted and runs:
        # vLLM counts accepted draft tokens per engine, not per request: spread them over the
        # batch in proportion to the tokens each request generated
        total = sum(r.forwards for r in runs) or 1
        left = accepted
        for r in runs:
            share = min(left, round(accepted * r.forwards / total), r.forwards - 1)
            r.draft_accepted = share
            r.forwards -= share
            left -= share
    return runs


def run_completion_baseline(
    setup: Setup, method: str, tasks: Sequence[Task], firsts: Sequence[DecodeRun | None]
) -> list[DecodeRun | Exception]:
    """Run a baseline ``method`` for ``tasks`` on the vLLM engine of ``setup``.

    Raises:
        TypeError: the engine is not the in-process vLLM engine.
    """
    from factorspec_sdk.engines.vllm_engine import VLLMEngine

    engine = setup.engine
    if not isinstance(engine, VLLMEngine):
        raise TypeError(f"the baselines run on the in-process vLLM engine, not on {engine.name!r}")
    llm = engine.llm
    prompts = [t.prompt_ids for t in tasks]
    schemas = [itinerary_schema(t.problem) for t in tasks]
    if method == "free":
        return list(structured_runs(llm, engine, prompts, setup.max_tokens, [None] * len(tasks)))
    if method == "syntax":
        return list(structured_runs(llm, engine, prompts, setup.max_tokens, schemas))
    k = ngram_k(method)
    if k is not None:
        ngram = second_llm(engine, k)
        return list(structured_runs(ngram, engine, prompts, setup.max_tokens, schemas, True))
    if method != "syntax+retry":
        raise ValueError(f"unknown method {method!r}")
    docs = relation_docs(setup.model)
    conversations: list[list[ChatMessage]] = [[dict(m) for m in t.messages] for t in tasks]
    totals = [DecodeRun("", [], attempts=0) for _ in tasks]
    active = list(range(len(tasks)))
    for attempt in range(setup.max_retries + 1):
        if not active:
            break
        todo = [i for i in active if not (attempt == 0 and firsts[i] is not None)]
        made = dict(
            zip(
                todo,
                structured_runs(
                    llm,
                    engine,
                    [engine.apply_chat_template(conversations[i]) for i in todo],
                    setup.max_tokens,
                    [schemas[i] for i in todo],
                )
                if todo
                else [],
                strict=True,
            )
        )
        still = []
        for i in active:
            one = made.get(i) or firsts[i]
            assert one is not None
            totals[i].add_attempt(one)
            totals[i].wall_seconds += one.wall_seconds
            ev = evaluate(tasks[i].problem, one.text, setup.model)
            if ev.valid or attempt == setup.max_retries:
                continue
            conversations[i].append({"role": "assistant", "content": one.text})
            conversations[i].append(
                {
                    "role": "user",
                    "content": "Your answer violates: "
                    + " ".join(violation_sentences(ev.violations, docs))
                    + " Fix it.",
                }
            )
            still.append(i)
        active = still
    return list(totals)


def prepare(setup: Setup, methods: Sequence[str], prompt_ids: list[int]) -> None:
    """Start what the methods need (the n-gram engines) and warm vLLM up, outside the timing."""
    from factorspec_sdk.engines.vllm_engine import VLLMEngine

    engine = setup.engine
    if not isinstance(engine, VLLMEngine):
        return
    llms = [engine.llm]
    for method in methods:
        k = ngram_k(method)
        if k is not None:
            llms.append(second_llm(engine, k))
    for llm in llms:
        structured_runs(llm, engine, [prompt_ids], 4, [None])


def close_ngram_engines() -> None:
    """Shut down the second engines `prepare` (or `second_llm`) started."""
    while _NGRAM_LLMS:
        _, llm = _NGRAM_LLMS.popitem()
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        shutdown = getattr(core, "shutdown", None)
        if callable(shutdown):
            shutdown()
