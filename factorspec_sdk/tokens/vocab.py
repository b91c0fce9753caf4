"""Vocabulary facts the masks and drafts need: token byte strings, special tokens, the encoder.

`TokenizerInfo` is engine-neutral: it is built from a Hugging Face tokenizer
(`TokenizerInfo.from_hf`, byte-level BPE and SentencePiece alike) or by hand for unit tests
(`TokenizerInfo.tiny`). Its ``encode`` is a picklable callable, so a `TokenizerInfo` can be
sent to worker processes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["TokenIds", "TokenizerInfo", "byte_level_decoder"]

TokenIds = npt.NDArray[np.int64]
"""Token ids, ascending (a mask), or in order (a sequence)."""


@lru_cache(maxsize=1)
def byte_level_decoder() -> dict[str, int]:
    """The inverse of GPT-2's ``bytes_to_unicode`` map: printable character -> byte value."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    byte_values = printable[:]
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            byte_values.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(byte_values, chars, strict=True)}


_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def _byte_level_bytes(piece: str) -> bytes:
    table = byte_level_decoder()
    try:
        return bytes(table[ch] for ch in piece)
    except KeyError:  # not a byte-level piece (e.g. an added token stored as plain text)
        return piece.encode("utf-8")


def _sentencepiece_bytes(piece: str) -> bytes:
    match = _BYTE_FALLBACK.match(piece)
    if match:
        return bytes([int(match.group(1), 16)])
    return piece.replace("\u2581", " ").encode("utf-8")


def _detect_style(tokenizer: object, pieces: Sequence[str]) -> str:
    """``"byte_level"`` or ``"sentencepiece"``, from the fast tokenizer's JSON or the pieces."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        try:
            spec = json.loads(backend.to_str())
        except (AttributeError, TypeError, ValueError):
            spec = {}
        text = json.dumps([spec.get("decoder"), spec.get("pre_tokenizer"), spec.get("normalizer")])
        if '"ByteLevel"' in text:
            return "byte_level"
        model = spec.get("model") or {}
        if (
            '"Metaspace"' in text
            or '"ByteFallback"' in text
            or "\u2581" in text
            or "\\u2581" in text
            or model.get("byte_fallback")
        ):
            return "sentencepiece"
    gpt2 = sum(1 for p in pieces if p.startswith("\u0120") or p == "\u010a")
    metaspace = sum(1 for p in pieces if "\u2581" in p or _BYTE_FALLBACK.match(p))
    return "sentencepiece" if metaspace > gpt2 else "byte_level"


class _HFEncode:
    """Picklable ``encode``: the tokenizer's own encoding, without special tokens.

    Text that spells a special token (``"<|im_start|>"``) is encoded as plain text
    (``split_special_tokens=True``): generated text never contains special tokens.
    """

    __slots__ = ("tokenizer",)

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer

    def __call__(self, text: str) -> list[int]:
        ids = self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)
        return [int(t) for t in ids]


class _GreedyEncode:
    """Picklable deterministic greedy longest-match encoder over a piece table."""

    __slots__ = ("by_first", "name")

    def __init__(self, pieces: Sequence[str]) -> None:
        by_first: dict[str, list[tuple[str, int]]] = {}
        seen: set[str] = set()
        for i, piece in enumerate(pieces):
            if not piece or piece in seen:
                continue  # first id wins for duplicates
            seen.add(piece)
            by_first.setdefault(piece[0], []).append((piece, i))
        for options in by_first.values():
            options.sort(key=lambda item: (-len(item[0]), item[1]))
        self.by_first = by_first
        self.name = "greedy"

    def __call__(self, text: str) -> list[int]:
        ids: list[int] = []
        pos = 0
        while pos < len(text):
            for piece, token in self.by_first.get(text[pos], ()):
                if text.startswith(piece, pos):
                    ids.append(token)
                    pos += len(piece)
                    break
            else:
                raise ValueError(
                    f"cannot encode {text!r}: no piece matches {text[pos]!r} at offset {pos}"
                )
        return ids


class _GreedyByteEncode:
    """Picklable greedy longest-match encoder over byte pieces that include every byte."""

    __slots__ = ("by_first",)

    def __init__(self, pieces: Sequence[bytes]) -> None:
        by_first: dict[int, list[tuple[bytes, int]]] = {}
        seen: set[bytes] = set()
        for i, piece in enumerate(pieces):
            if piece and piece not in seen:
                seen.add(piece)
                by_first.setdefault(piece[0], []).append((piece, i))
        for options in by_first.values():
            options.sort(key=lambda item: (-len(item[0]), item[1]))
        self.by_first = by_first

    def __call__(self, text: str) -> list[int]:
        data = text.encode("utf-8")
        ids: list[int] = []
        pos = 0
        while pos < len(data):
            for piece, token in self.by_first[data[pos]]:
                if data.startswith(piece, pos):
                    ids.append(token)
                    pos += len(piece)
                    break
        return ids


@dataclass(frozen=True, slots=True)
class TokenizerInfo:
    """Byte strings of every token, the special tokens and the canonical encoder.

    Attributes:
        vocab: ``vocab[i]`` is the exact byte string token ``i`` stands for (special tokens map
            to ``b""``). Stored as a tuple.
        eos_ids: tokens that end a sequence.
        special_ids: tokens that never appear inside generated text (eos, pad, chat markers).
        encode: canonical tokenization of a text, without special tokens.
    """

    vocab: Sequence[bytes]
    eos_ids: tuple[int, ...]
    special_ids: frozenset[int]
    encode: Callable[[str], list[int]]
    _token_lengths: npt.NDArray[np.int32] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.vocab, tuple):
            object.__setattr__(self, "vocab", tuple(self.vocab))
        size = len(self.vocab)
        bad = [t for t in (*self.eos_ids, *self.special_ids) if not 0 <= t < size]
        if bad:
            raise ValueError(f"token ids {sorted(set(bad))} are outside the vocabulary (0..{size})")

    @property
    def vocab_size(self) -> int:
        """Number of token ids (rows of the logits)."""
        return len(self.vocab)

    def token_lengths(self) -> npt.NDArray[np.int32]:
        """Byte length of every token (``0`` for special tokens), computed once, read-only."""
        lengths = self._token_lengths
        if lengths is None:
            lengths = np.fromiter(
                (len(b) for b in self.vocab), dtype=np.int32, count=len(self.vocab)
            )
            lengths.setflags(write=False)
            object.__setattr__(self, "_token_lengths", lengths)
        return lengths

    def decode(self, ids: Iterable[int]) -> bytes:
        """Concatenated byte strings of ``ids`` (special tokens contribute nothing)."""
        vocab = self.vocab
        return b"".join(vocab[i] for i in ids)

    @classmethod
    def from_hf(
        cls, tokenizer: PreTrainedTokenizerBase, extra_eos_ids: Iterable[int] = ()
    ) -> TokenizerInfo:
        """Vocabulary facts of a Hugging Face tokenizer.

        Handles byte-level BPE (GPT-2's byte-to-unicode pieces, as SmolLM2, Llama 3 and Qwen
        use) and SentencePiece-style pieces (``▁`` for a space, ``<0xAB>`` byte-fallback
        tokens). Special added tokens map to ``b""`` and go into ``special_ids``; other added
        tokens map to their UTF-8 text.

        Args:
            tokenizer: a ``transformers`` tokenizer (fast tokenizers are read exactly; slow
                ones by inspecting their pieces).
            extra_eos_ids: more end-of-sequence ids, e.g. from the model's generation config.

        Returns:
            The `TokenizerInfo`; its ``encode`` is ``tokenizer.encode(text,
            add_special_tokens=False, split_special_tokens=True)`` (text spelling a special
            token is encoded as plain text). SentencePiece tokenizers may prepend a ``▁`` to the
            first word, which the byte strings faithfully report as a space.
        """
        size = len(tokenizer)
        pieces: list[str | None] = list(tokenizer.convert_ids_to_tokens(list(range(size))))
        added: dict[int, object] = dict(getattr(tokenizer, "added_tokens_decoder", {}) or {})
        special: set[int] = set(getattr(tokenizer, "all_special_ids", []) or [])
        for token_id, token in added.items():
            if getattr(token, "special", False):
                special.add(int(token_id))
        style = _detect_style(tokenizer, [p for p in pieces if p is not None])
        to_bytes = _byte_level_bytes if style == "byte_level" else _sentencepiece_bytes
        vocab: list[bytes] = []
        for token_id, piece in enumerate(pieces):
            if token_id in special or piece is None:
                vocab.append(b"")
                if piece is None:
                    special.add(token_id)
            elif token_id in added:
                content = getattr(added[token_id], "content", piece)
                vocab.append(str(content).encode("utf-8"))
            else:
                vocab.append(to_bytes(piece))
        eos: list[int] = []
        for candidate in (tokenizer.eos_token_id, *extra_eos_ids):
            if candidate is not None and 0 <= candidate < size and candidate not in eos:
                eos.append(int(candidate))
        special.update(eos)
        return cls(
            vocab=tuple(vocab),
            eos_ids=tuple(eos),
            special_ids=frozenset(special),
            encode=_HFEncode(tokenizer),
        )

    @classmethod
    def tiny(cls, pieces: Sequence[str], eos: str = "<eos>") -> TokenizerInfo:
        """A hand-made vocabulary for unit tests.

        Token ``i`` is ``pieces[i]`` as UTF-8; one more token, ``eos``, ends sequences (its
        byte string is ``b""``). ``encode`` is a deterministic greedy longest-match tokenizer
        (ties go to the lower id); it encodes every string whose characters all have a
        single-character piece and raises `ValueError` on text it cannot cover.

        Args:
            pieces: the non-special pieces, in id order (non-empty strings).
            eos: the text of the end-of-sequence token (never produced by ``encode``).

        Raises:
            ValueError: a piece is empty.
        """
        if any(not p for p in pieces):
            raise ValueError("tiny vocabulary pieces must be non-empty strings")
        eos_id = len(pieces)
        del eos  # the eos token's text is only a label; it maps to b"" like every special
        return cls(
            vocab=(*(p.encode("utf-8") for p in pieces), b""),
            eos_ids=(eos_id,),
            special_ids=frozenset({eos_id}),
            encode=_GreedyEncode(pieces),
        )

    @classmethod
    def tiny_bytes(cls, pieces: Sequence[str] = ()) -> TokenizerInfo:
        """A small byte-level vocabulary that encodes every text (like byte-level BPE).

        Tokens ``0..255`` are the single bytes, then ``pieces`` as UTF-8, then one
        end-of-sequence token (``b""``). ``encode`` is a greedy longest match over the
        text's UTF-8 bytes (ties go to the lower id), so it never fails.

        Args:
            pieces: multi-byte pieces to add (non-empty strings), e.g. ``'{"'``.

        Raises:
            ValueError: a piece is empty.
        """
        if any(not p for p in pieces):
            raise ValueError("vocabulary pieces must be non-empty strings")
        vocab = [bytes([b]) for b in range(256)] + [p.encode("utf-8") for p in pieces]
        eos_id = len(vocab)
        return cls(
            vocab=(*vocab, b""),
            eos_ids=(eos_id,),
            special_ids=frozenset({eos_id}),
            encode=_GreedyByteEncode(vocab),
        )
