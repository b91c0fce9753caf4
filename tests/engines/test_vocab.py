from __future__ import annotations

import json
import pickle
from typing import TYPE_CHECKING

import numpy as np
import pytest

from factorspec_sdk.tokens.vocab import TokenizerInfo, byte_level_decoder

if TYPE_CHECKING:
    from factorspec_sdk.engines.embedded import EmbeddedEngine

PIECES = ["a", "b", "c", " ", "ab", "abc", "bc", "{", "}", '"', ":", "é", "日本"]


def test_tiny_layout() -> None:
    info = TokenizerInfo.tiny(PIECES)
    assert info.vocab_size == len(PIECES) + 1
    assert info.vocab[0] == b"a"
    assert info.vocab[11] == "é".encode()
    assert info.eos_ids == (len(PIECES),)
    assert info.special_ids == frozenset({len(PIECES)})
    assert info.vocab[len(PIECES)] == b""
    assert isinstance(info.vocab, tuple)


def test_tiny_greedy_longest_match() -> None:
    info = TokenizerInfo.tiny(PIECES)
    assert info.encode("abc") == [5]
    assert info.encode("abab c") == [4, 4, 3, 2]
    assert info.encode("bca") == [6, 0]
    assert info.encode("") == []
    text = '{"abc": "é日本"}'
    with pytest.raises(ValueError, match="no piece matches"):
        info.encode("日")  # only the two-character piece covers it
    assert info.decode(info.encode('{"abc":"é"}')) == '{"abc":"é"}'.encode()
    with pytest.raises(ValueError, match="no piece matches 'x'"):
        info.encode("abx")
    assert info.decode(info.encode(text.replace(" ", " "))) == text.encode()


def test_tiny_duplicates_first_id_wins_and_empty_rejected() -> None:
    info = TokenizerInfo.tiny(["a", "a", "aa"])
    assert info.encode("aaa") == [2, 0]
    with pytest.raises(ValueError):
        TokenizerInfo.tiny(["a", ""])


def test_token_lengths_cached_and_readonly() -> None:
    info = TokenizerInfo.tiny(PIECES)
    lengths = info.token_lengths()
    assert lengths.dtype == np.int32
    assert lengths.tolist() == [len(p.encode()) for p in PIECES] + [0]
    assert info.token_lengths() is lengths
    with pytest.raises(ValueError):
        lengths[0] = 5


def test_pickle_roundtrip_and_equality() -> None:
    info = TokenizerInfo.tiny(PIECES)
    info.token_lengths()
    clone = pickle.loads(pickle.dumps(info))
    assert clone.vocab == info.vocab
    assert clone.encode("abcab") == info.encode("abcab")


def _no_encode(text: str) -> list[int]:
    return []


def test_list_vocab_is_stored_as_tuple_and_ids_checked() -> None:
    info = TokenizerInfo(
        vocab=[b"a", b""], eos_ids=(1,), special_ids=frozenset({1}), encode=_no_encode
    )
    assert info.vocab == (b"a", b"")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        TokenizerInfo(vocab=[b"a"], eos_ids=(3,), special_ids=frozenset(), encode=_no_encode)


def test_byte_level_table_is_a_bijection() -> None:
    table = byte_level_decoder()
    assert len(table) == 256
    assert sorted(table.values()) == list(range(256))
    assert table["Ġ"] == ord(" ")
    assert table["Ċ"] == ord("\n")


def test_from_hf_sentencepiece_style() -> None:
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    models, normalizers, decoders = tokenizers.models, tokenizers.normalizers, tokenizers.decoders
    pieces = [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0)]
    pieces += [(f"<0x{b:02X}>", -10.0) for b in range(256)]
    pieces += [("▁hello", -1.0), ("▁world", -1.0), ("▁", -2.0)]
    pieces += [(ch, -3.0) for ch in "helowrdé"]
    backend = tokenizers.Tokenizer(models.Unigram(pieces, unk_id=0, byte_fallback=True))
    backend.normalizer = normalizers.Sequence(
        [normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]
    )
    backend.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    info = TokenizerInfo.from_hf(tok)
    assert info.eos_ids == (2,)
    assert {0, 1, 2} <= info.special_ids
    assert info.vocab[0] == info.vocab[1] == info.vocab[2] == b""
    assert info.vocab[3 + 0x41] == b"A"
    assert info.vocab[3 + 0xE2] == b"\xe2"
    assert info.vocab[259] == b" hello"
    for text in ["hello world", "hello €", "héllo wörld"]:
        ids = info.encode(text)
        assert info.decode(ids) == (" " + text).encode()  # SentencePiece's dummy prefix


ROUND_TRIP = [
    '{"city": "Zürich", "first_day": 1, "last_day": 4}',
    json.dumps({"stays": [{"city": "Kraków", "days": 3}], "flights": []}, ensure_ascii=False),
    json.dumps({"x": [1, 2.5, None, True, "a\\nb"]}),
    "  leading spaces\n\ttabs and\r\nnewlines  ",
    "emoji 🎉🇫🇷 and CJK 日本語 and RTL עברית",
    "\x00\x01\x7f control bytes",
    "“smart quotes” — dashes … ellipsis",
    "a" * 300,
    "<|im_start|> looks special but is plain text",
]


@pytest.mark.model
def test_smollm2_vocab_round_trip(embedded_engine: EmbeddedEngine) -> None:
    info = embedded_engine.tokenizer
    assert info.vocab_size == 49152
    assert info.eos_ids == (2,)
    assert {0, 1, 2} <= info.special_ids
    assert info.vocab[198] == b"\n"
    assert info.vocab[260] == b" the"
    for text in ROUND_TRIP:
        ids = info.encode(text)
        assert info.decode(ids) == text.encode(), text
    nonspecial = [i for i in range(info.vocab_size) if i not in info.special_ids]
    assert all(info.vocab[i] for i in nonspecial)
    lengths = info.token_lengths()
    assert int(lengths.max()) > 10
    assert int(lengths[0]) == 0
