"""Prepared check for a machine with a GPU: the embedded engine on CUDA, and SGLang if present.

On SGLang, trips (regex requests) and a record whose grammar segment goes as one ``ebnf``
request (Issue #42).

The CPU test suite cannot run either; a task that is lent a GPU runs this once (see
``docs/engines.md``). It prints one line per check and a JSON summary (also written to
``$OUT/gpu_check.json`` when ``OUT`` is set), and exits 1 if a check failed.

    python -m factorspec_sdk.bench.gpu_check --model FOLDER       # a real model folder
    python -m factorspec_sdk.bench.gpu_check --tiny TOKENIZER_DIR  # random 2-layer Llama

``--tiny`` exists because the default model (~100 MB as GGUF) does not fit the 64 MiB a
device call carries: validity and greedy exactness do not depend on the weights, so a random
model on SmolLM2's tokenizer (a few MB) checks them. Needs pydantic, z3-solver, typer, rich,
platformdirs and numpy next to torch and transformers (carry the missing ones as wheels).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field


class Rated(BaseModel):
    """A free string and a float no relation reads: one grammar segment."""

    note: str = Field(max_length=200)
    score: float = Field(ge=0, le=10)


def check(name: str, results: dict[str, Any], fn: Any) -> None:
    """Run one check, record its outcome under ``name`` and print it."""
    started = time.perf_counter()
    try:
        detail = fn()
        results[name] = {"ok": True, "seconds": round(time.perf_counter() - started, 2), **detail}
    except Exception as exc:
        results[name] = {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}",
            "trace": traceback.format_exc()[-2000:],
        }
    print(name, json.dumps(results[name])[:600], flush=True)


def main() -> int:
    """Run the checks; 0 when all passed (or were skipped), 1 otherwise."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--model", help="a Hugging Face model folder")
    group.add_argument("--tiny", help="tokenizer folder for a random 2-layer Llama")
    parser.add_argument("--n", type=int, default=10, help="trip problems per check")
    args = parser.parse_args()

    from factorspec_sdk import Client
    from factorspec_sdk.domains.trip import Itinerary, evaluate, generate_problem, prompt_for
    from factorspec_sdk.engines.embedded import EmbeddedEngine
    from factorspec_sdk.engines.torch_setup import cuda_device, random_llama

    model = args.model or random_llama(args.tiny, Path("/tmp/factorspec-tiny-llama"))
    device = cuda_device()
    results: dict[str, Any] = {
        "cuda": device is not None,
        "device": device,
        "model": model,
    }
    trips = [generate_problem(4 + i % 5, 500 + i, unique=False) for i in range(args.n)]
    prompts = [prompt_for(t) for t in trips]

    def embedded_valid() -> dict[str, Any]:
        client = Client(EmbeddedEngine(model, device="cuda"))
        out = client.generate_batch(Itinerary, prompts, contexts=trips, return_result=True)
        valid = sum(evaluate(t, r.text, Itinerary).valid for t, r in zip(trips, out, strict=True))
        steps = sum(r.stats.verify_steps for r in out)
        tokens = sum(r.stats.tokens for r in out)
        assert valid == len(trips), f"{valid}/{len(trips)} valid"
        return {"valid": valid, "tokens_per_step": round(tokens / max(steps, 1), 2)}

    def embedded_exact() -> dict[str, Any]:
        engine = EmbeddedEngine(model, device="cuda", dtype="float32")
        spec = Client(engine)
        plain = Client(engine, speculative=False)
        same = 0
        for t, p in zip(trips[:4], prompts[:4], strict=True):
            a = spec.generate(Itinerary, p, context=t, return_result=True)
            b = plain.generate(Itinerary, p, context=t, return_result=True)
            same += a.tokens == b.tokens
        assert same == 4, f"speculative equals plain greedy on {same}/4"
        return {"same": same}

    def sglang_valid() -> dict[str, Any]:
        import importlib.util

        if importlib.util.find_spec("sglang") is None:
            return {"skipped": "sglang is not installed on this machine"}
        from factorspec_sdk.engines.sglang_engine import SGLangEngine

        engine = SGLangEngine(model)
        try:
            client = Client(engine)
            out = client.generate_batch(Itinerary, prompts, contexts=trips, return_result=True)
            valid = sum(
                evaluate(t, r.text, Itinerary).valid for t, r in zip(trips, out, strict=True)
            )
            assert valid == len(trips), f"{valid}/{len(trips)} valid"
            trip_requests = engine.requests
            # a free string and a float no relation reads: one grammar segment, sent as
            # its Lark grammar in ``ebnf`` (SGLang's llguidance grammar backend)
            rated = client.generate(Rated, "Rate the blender in one sentence.", max_tokens=200)
            Rated.model_validate(rated.model_dump())
            spans = engine.requests - trip_requests
            assert spans == 1, f"{spans} requests for one grammar segment"
            return {"valid": valid, "requests": trip_requests, "grammar_requests": spans}
        finally:
            engine.close()

    check("embedded_cuda_valid", results, embedded_valid)
    check("embedded_cuda_greedy_exact", results, embedded_exact)
    check("sglang_valid", results, sglang_valid)
    text = json.dumps(results, indent=1)
    print(text)
    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir, "gpu_check.json").write_text(text)
    ok = all(v.get("ok", True) for v in results.values() if isinstance(v, dict))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
