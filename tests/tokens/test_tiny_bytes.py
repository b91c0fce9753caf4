"""`TokenizerInfo.tiny_bytes`: a byte-level test vocabulary that encodes every text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.tokens.vocab import TokenizerInfo


@given(st.text())
def test_every_text_encodes_and_decodes_back(text: str) -> None:
    tok = TokenizerInfo.tiny_bytes(['{"', '": '])
    ids = tok.encode(text)
    assert tok.decode(ids) == text.encode("utf-8")


def test_longest_piece_wins_and_eos_is_last() -> None:
    tok = TokenizerInfo.tiny_bytes(['{"', '": '])
    assert tok.encode('{"a": 1') == [256, ord("a"), 257, ord("1")]
    assert tok.eos_ids == (258,) and tok.vocab[258] == b""


def test_scripted_engine_defaults_to_a_byte_level_random_model() -> None:
    engine = ScriptedEngine()
    assert engine.tokenizer.vocab_size > 256
    seq = engine.new_sequence(
        engine.apply_chat_template([{"role": "user", "content": "caf\u00e9"}])
    )
    rows = engine.extend([(seq, [ord("x")])])
    assert rows[0].shape == (1, engine.tokenizer.vocab_size)
