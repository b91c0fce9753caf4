from __future__ import annotations

import importlib
import subprocess
import sys

import numpy as np
import pytest

from factorspec_sdk.engines import ENGINES, Engine, create_engine, create_logits_engine
from factorspec_sdk.engines.scripted import ScriptedEngine, default_cost_curve
from factorspec_sdk.errors import EngineError
from factorspec_sdk.tokens.vocab import TokenizerInfo

PIECES = ['{"', "city", '": "', "Rome", "Paris", '"}', " ", "a", "b", "c", '"', "{", "}", ":"]


@pytest.fixture
def tok() -> TokenizerInfo:
    return TokenizerInfo.tiny(PIECES)


def test_satisfies_protocol_and_factory(tok: TokenizerInfo) -> None:
    engine = create_engine("scripted", tokenizer=tok, logits_fn=lambda p: np.zeros(tok.vocab_size))
    assert isinstance(engine, Engine)
    assert isinstance(ScriptedEngine.random(tok, seed=1), Engine)
    assert engine.name == "scripted"
    with pytest.raises(EngineError, match="known engines: embedded, scripted"):
        create_engine("nope")


@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_a_completion_engine_is_refused_logits_before_it_starts(
    name: str, tok: TokenizerInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``factorspec serve --engine vllm`` says what to do at once, not after vLLM's ~40 s load."""
    module_name, class_name = ENGINES[name]
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except ImportError:
        pytest.skip(f"{name} cannot be imported here")

    def started(self: object, *args: object, **kwargs: object) -> None:
        raise AssertionError(f"{name} was started")

    monkeypatch.setattr(cls, "__init__", started)
    with pytest.raises(EngineError, match=r"returns no logits.*--upstream URL"):
        create_logits_engine(name)
    engine = create_logits_engine("scripted", tokenizer=tok, logits_fn=lambda p: np.zeros(3))
    assert isinstance(engine, ScriptedEngine)


def test_importing_engines_does_not_import_torch() -> None:
    code = (
        "import sys, factorspec_sdk.engines, factorspec_sdk.engines.embedded, "
        "factorspec_sdk.engines.scripted, factorspec_sdk.engines.model_store; "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_random_is_deterministic_in_last_two_tokens(tok: TokenizerInfo) -> None:
    a = ScriptedEngine.random(tok, seed=3)
    b = ScriptedEngine.random(tok, seed=3)
    c = ScriptedEngine.random(tok, seed=4)
    sa, sb, sc = a.new_sequence([1, 2]), b.new_sequence([5, 1, 2]), c.new_sequence([1, 2])
    la, lb, lc = a.extend([(sa, [3])])[0], b.extend([(sb, [3])])[0], c.extend([(sc, [3])])[0]
    assert la.dtype == np.float32
    assert la.shape == (1, tok.vocab_size)  # a row for the new token "3" only
    assert lb.shape == (1, tok.vocab_size)
    np.testing.assert_array_equal(la, lb)  # same last two tokens, same logits
    assert not np.array_equal(la, lc)
    sd = a.new_sequence([1, 4])
    assert not np.array_equal(a.extend([(sd, [3])])[0], la)  # other second-to-last token
    scaled = ScriptedEngine.random(tok, seed=3, temperature_scale=2.0)
    ss = scaled.new_sequence([1, 2])
    np.testing.assert_allclose(scaled.extend([(ss, [3])])[0], 2 * la, rtol=1e-6)


def test_from_script_prefers_script_then_eos(tok: TokenizerInfo) -> None:
    text = '{"city": "Rome"}'
    engine = ScriptedEngine.from_script(tok, text)
    script = tok.encode(text)
    prompt = [7, 8]  # an unrelated prompt; its last token is kept back for the first extend
    seq = engine.new_sequence(prompt[:-1])
    row = engine.extend([(seq, [prompt[-1]])])[0][-1]
    out: list[int] = []
    for _ in range(20):
        token = int(row.argmax())
        out.append(token)
        if token in tok.eos_ids:
            break
        row = engine.extend([(seq, [token])])[0][-1]
    assert out == [*script, tok.eos_ids[0]]
    assert row.max() == 10.0
    assert tok.decode(out).decode() == text
    assert engine.forward_calls == len(out)


def test_chunked_equals_single_and_truncate(tok: TokenizerInfo) -> None:
    engine = ScriptedEngine.random(tok, seed=0)
    whole = engine.new_sequence([1])
    full = engine.extend([(whole, [2, 3, 4, 5, 6])])[0]
    assert full.shape == (5, tok.vocab_size)  # row i: after new token i (no row for "1")
    parts = engine.new_sequence([1])
    chunks = [engine.extend([(parts, [2, 3])])[0], engine.extend([(parts, [4, 5, 6])])[0]]
    assert [c.shape[0] for c in chunks] == [2, 3]
    np.testing.assert_array_equal(np.concatenate(chunks), full)
    engine.truncate(parts, 3)
    assert engine.length(parts) == 3
    np.testing.assert_array_equal(engine.extend([(parts, [4, 5, 6])])[0], full[2:])
    engine.truncate(parts, 1)
    np.testing.assert_array_equal(engine.extend([(parts, [2])])[0], full[:1])
    pending = engine.new_sequence([1, 2, 9])
    engine.truncate(pending, 2)  # cut un-run prompt tokens
    assert engine.tokens(pending) == [1, 2]
    np.testing.assert_array_equal(engine.extend([(pending, [3])])[0], full[1:2])
    assert engine.batch_log[-1] == (3,)  # the kept prompt tokens "1 2" ran, without rows
    with pytest.raises(EngineError):
        engine.truncate(parts, 10)


def test_keep_returns_the_last_rows_only(tok: TokenizerInfo) -> None:
    engine = ScriptedEngine.random(tok, seed=0)
    whole = engine.new_sequence([1])
    full = engine.extend([(whole, [2, 3, 4, 5, 6])])[0]
    a, b = engine.new_sequence([1]), engine.new_sequence([1, 2])
    engine.rows_computed = 0
    out = engine.extend([(a, [2, 3, 4, 5, 6]), (b, [3])], keep=[2, 1])
    np.testing.assert_array_equal(out[0], full[3:])
    np.testing.assert_array_equal(out[1], full[1:2])
    assert engine.rows_computed == 3
    assert engine.tokens(a) == [1, 2, 3, 4, 5, 6]  # every token ran, rows or not
    for bad in ([0, 1], [6, 1], [1]):
        with pytest.raises(EngineError, match="keep"):
            engine.extend([(a, [7]), (b, [7])], keep=bad)
    assert engine.length(a) == 6  # a rejected call changes nothing


def test_batch_counts_one_forward(tok: TokenizerInfo) -> None:
    engine = ScriptedEngine.random(tok, seed=0)
    s1, s2 = engine.new_sequence([1, 2, 3]), engine.new_sequence([4])
    out = engine.extend([(s1, [5]), (s2, [6, 7])])
    assert [o.shape[0] for o in out] == [1, 2]  # rows for the new tokens only
    assert engine.forward_calls == 1
    assert engine.tokens_processed == 7
    assert engine.batch_log == [(4, 3)]
    assert engine.tokens(s1) == [1, 2, 3, 5]


def test_errors(tok: TokenizerInfo) -> None:
    engine = ScriptedEngine.random(tok, seed=0)
    seq = engine.new_sequence([1])
    with pytest.raises(EngineError, match="outside the vocabulary"):
        engine.extend([(seq, [tok.vocab_size])])
    with pytest.raises(EngineError, match="twice"):
        engine.extend([(seq, [1]), (seq, [2])])
    fresh = engine.new_sequence([3, 4])
    with pytest.raises(EngineError, match="no new tokens"):
        engine.extend([(fresh, [])])  # pending prompt, but no new token
    with pytest.raises(EngineError, match="no new tokens"):
        engine.extend([(seq, [2]), (fresh, [])])
    assert engine.forward_calls == 0  # rejected before any forward
    assert (engine.tokens(seq), engine.tokens(fresh)) == ([1], [3, 4])
    assert engine.extend([(seq, [2])])[0].shape == (1, tok.vocab_size)
    with pytest.raises(EngineError, match="no new tokens"):
        engine.extend([(seq, [])])  # after a run, too
    engine.release(seq)
    with pytest.raises(EngineError, match="unknown sequence"):
        engine.length(seq)
    bad = ScriptedEngine(tok, lambda p: np.zeros(3))
    with pytest.raises(EngineError, match="shape"):
        bad.extend([(bad.new_sequence([1]), [2])])
    assert engine.extend([]) == []


def test_cost_and_chat(tok: TokenizerInfo) -> None:
    engine = ScriptedEngine.random(tok, seed=0)
    assert engine.verify_cost(1) == 1.0
    assert engine.verify_cost(11) == pytest.approx(1.3)
    assert engine.cost_profile()[16] == default_cost_curve(16)
    custom = ScriptedEngine.random(tok, cost_curve=lambda k: float(k))
    assert custom.verify_cost(8) == 8.0
    with pytest.raises(EngineError):
        engine.verify_cost(0)
    ids = engine.apply_chat_template(
        [{"role": "user", "content": "ab"}, {"role": "x", "content": "c"}]
    )
    assert ids == [7, 8, 9]
    with pytest.raises(EngineError, match="cannot encode"):
        engine.apply_chat_template([{"role": "user", "content": "zzz"}])
