r"""Free strings written with JSON escapes: masks, lengths, texts, the budget and the regex.

The model writes a free string's JSON text, every escape included (``\n``, ``\"``, ``\\``,
``\/``, ``\b\f\r\t``, ``\uXXXX`` of either case, surrogate pairs); the writer, the masks, the
token budget, the segment regex and the relations all count the value, escapes read.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from pydantic import BaseModel, Field, ValidationError

from factorspec_sdk import relation
from factorspec_sdk.drafter.loop import DecodeJob, Decoder, DecoderConfig
from factorspec_sdk.drafter.segments import _free_regex
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import Cursor, Finished, FreeCursor, Planner
from factorspec_sdk.tokens.vocab import TokenizerInfo
from factorspec_sdk.writer.automaton import FreeString, Writer
from factorspec_sdk.writer.escapes import ESCAPE_CLASSES, class_of, decode, next_chars
from tests.helpers import CHARS, MULTI, random_record, tiny_tokenizer

TOK = tiny_tokenizer()
WIDE = TokenizerInfo.tiny([*CHARS, *MULTI, "é", "\u2603", "\U0001f600"])
"""The tiny vocabulary and a few characters beyond ASCII, whole."""
PROMPT = TOK.encode("write the record")


class Letter(BaseModel):
    body: str = Field(max_length=40)
    title: str = Field(max_length=8)


class Short(BaseModel):
    s: str = Field(max_length=3)


class Emoji(BaseModel):
    s: str = Field(min_length=1, max_length=1)


class Three(BaseModel):
    s: str

    @relation
    def three(self) -> bool:
        return len(self.s) == 3


class NotQuoted(BaseModel):
    s: str = Field(max_length=3)

    @relation
    def rule(self) -> bool:
        return self.s != 'a"b'


def planner_of(model: type[BaseModel]) -> Planner:
    return Planner(Writer(compile_spec(model)), TOK)


def walk(planner: Planner, text: str, cursor: Cursor | None = None) -> Cursor:
    """The cursor after ``text``'s tokens, each checked against the mask."""
    cursor = planner.start() if cursor is None else cursor
    for token in TOK.encode(text):
        assert token in planner.allowed(cursor).tolist(), (text, TOK.vocab[token])
        cursor = planner.advance(cursor, token)
    return cursor


def allowed_texts(planner: Planner, cursor: Cursor) -> set[str]:
    return {TOK.vocab[t].decode() for t in planner.allowed(cursor).tolist()}


def string_cursor(planner: Planner) -> FreeCursor:
    cursor = walk(planner, '{"s": "')
    assert isinstance(cursor, FreeCursor)
    return cursor


# ------------------------------------------------------------------ escapes


def test_every_pending_escape_of_a_class_goes_on_alike() -> None:
    """Two pending escapes of one class accept the same characters, with the same counts."""
    for escape in [r"\u00e9", r"\uD83D\uDE00", r"\uDBFF\uDFFF", r"\uD7FF", r"\uE000", r"\u0041"]:
        for i in range(1, len(escape)):
            pending = escape[:i]
            rep = ESCAPE_CLASSES[class_of(pending)]
            for ch in map(chr, range(128)):
                a, b = decode(pending, ch), decode(rep, ch)
                assert (a is None) == (b is None), (pending, rep, ch)
                if a is not None and b is not None:
                    assert (len(a.chars), class_of(a.escape)) == (len(b.chars), class_of(b.escape))
            assert all(decode("", json.dumps(c)[1:-1]) for c in next_chars(pending, frozenset()))


def test_decode_reads_what_json_and_pydantic_read() -> None:
    rng = np.random.default_rng(0)
    alphabet = list('ab\\u0dDcCeEf8"/nt')
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet, size=int(rng.integers(1, 14))).tolist())
        piece = decode("", text)
        try:
            value = Short.model_validate_json('{"s": "' + text + '"}').s if len(text) < 3 else None
        except ValidationError:
            value = None
        if piece is None or piece.close is not None or piece.escape:
            continue  # refused, or not a whole string body
        assert json.loads('"' + text + '"') == piece.chars, text
        if value is not None:
            assert value == piece.chars


# ------------------------------------------------------------------ masks


def test_masks_allow_escapes_but_no_raw_control_character_nor_invalid_escape() -> None:
    planner = planner_of(Letter)
    cursor = walk(planner, '{"body": "')
    start = allowed_texts(planner, cursor)
    assert "\\" in start and "\n" not in start  # a raw newline: JSON writes it ``\n``
    after = {
        "\\": {'"', "\\", "/", "b", "f", "n", "r", "t", "u"},
        "\\u": set("0123456789abcdefABCDEF"),
        "\\u12": set("0123456789abcdefABCDEF"),
        "\\uD": set("01234567") | set("89abAB"),  # no ``\uDC``: a low surrogate alone
        "\\uD83D": {"\\"},  # a high surrogate needs its low one
        "\\uD83D\\u": {"d", "D"},
        "\\uD83D\\uD": set("cdefCDEF"),
    }
    for text, expected in after.items():
        allowed = allowed_texts(planner, walk(planner, text, cursor))
        assert {t[0] for t in allowed} == expected, text  # ``true`` after ``\`` is ``\t``...
        assert expected <= allowed  # each character is a token of its own
    assert "x" not in after["\\"] and "G" not in after["\\u12"]


def test_random_records_hold_escapes_and_parse() -> None:
    """Records drawn from the masks, escapes preferred, parse to what ``json.loads`` reads."""
    planner = planner_of(Letter)
    rng = np.random.default_rng(1)
    for _ in range(30):
        cursor, ids = planner.start(), []
        while not isinstance(cursor, Finished):
            allowed = planner.allowed(cursor).tolist()
            escapes = [t for t in allowed if "\\" in TOK.vocab[t].decode()]
            if isinstance(cursor, FreeCursor) and escapes and rng.random() < 0.4:
                allowed = escapes
            ids.append(int(rng.choice(allowed)))
            cursor = planner.advance(cursor, ids[-1])
        text = TOK.decode(ids).decode()
        assert "\\" in text
        assert json.loads(text) == Letter.model_validate_json(text).model_dump()
    for _ in range(10):  # and uniformly
        Letter.model_validate_json(random_record(planner, TOK, rng, close=0.05))


def test_a_scripted_model_that_wants_a_newline_and_quotes_writes_them_escaped() -> None:
    value = {"body": 'line one\nsaid "hi" \\ é \u2603 \x01 \U0001f600 /', "title": 'a"b'}
    for ensure_ascii in (False, True):  # ``\u00e9`` and ``\ud83d\ude00`` too
        text = json.dumps(value, ensure_ascii=ensure_ascii)
        engine = ScriptedEngine.from_script(WIDE, text)
        spec = compile_spec(Letter)
        outs = []
        for config in (DecoderConfig(speculative=False), DecoderConfig(speculative=True)):
            planner = Planner(Writer(spec), WIDE)
            job = DecodeJob(planner, WIDE.encode("write"), SamplingParams(max_tokens=300))
            [out] = Decoder(engine, config).run([job])
            assert out.error is None, out.error
            outs.append(out.text)
        assert outs[0] == outs[1] == text
        assert Letter.model_validate_json(text).model_dump() == value


# ------------------------------------------------------------------ lengths


def test_max_length_counts_the_value_not_its_escapes() -> None:
    planner = planner_of(Short)
    full = walk(planner, '{"s": "a\\nb')  # three characters: only closing tokens
    assert isinstance(full, FreeCursor) and full.free.written == "a\nb"
    assert all(t.startswith('"') for t in allowed_texts(planner, full))
    done = walk(planner, '"}', full)
    assert isinstance(done, Finished)
    assert Short.model_validate_json('{"s": "a\\nb"}').s == "a\nb"
    two = walk(planner, '{"s": "a\\n')  # an escape begun counts as a character already
    assert "\\" in allowed_texts(planner, two)
    pending = walk(planner, "\\", two)
    assert isinstance(pending, FreeCursor) and pending.free.chars == 3
    assert allowed_texts(planner, pending) == {'"', "\\", "/", "b", "f", "n", "r", "t", "u"}
    assert allowed_texts(planner, walk(planner, "n", pending)) == {'"', '"}'}


def test_a_surrogate_pair_is_one_character() -> None:
    planner = planner_of(Emoji)
    cursor = walk(planner, '{"s": "\\uD83D')
    assert not any('"' in t for t in allowed_texts(planner, cursor))  # no lone surrogate
    done = walk(planner, '\\uDE00"}', cursor)
    assert isinstance(done, Finished)
    assert Emoji.model_validate_json('{"s": "\\uD83D\\uDE00"}').s == "\U0001f600"


def test_a_relation_over_len_counts_an_escaped_quote_once() -> None:
    planner = planner_of(Three)
    cursor = walk(planner, '{"s": "a\\"')
    assert isinstance(cursor, FreeCursor) and cursor.free.written == 'a"'
    assert not any(t.startswith('"') for t in allowed_texts(planner, cursor))  # len 2
    done = walk(planner, 'b"}', cursor)
    assert isinstance(done, Finished)
    assert Three.model_validate_json('{"s": "a\\"b"}').s == 'a"b'


# ------------------------------------------------------------------ texts


def test_a_banned_named_text_with_a_quote_is_banned_in_every_spelling() -> None:
    planner = planner_of(NotQuoted)
    for spelled in ('a\\"', "a\\u0022", "a\\u0022"):
        cursor = walk(planner, '{"s": "' + spelled)
        assert isinstance(cursor, FreeCursor) and cursor.free.written == 'a"'
        nxt = allowed_texts(planner, cursor)
        assert "b" not in nxt and "c" in nxt and '"' in nxt, spelled
    free = string_cursor(planner)
    pattern = _free_regex(free)
    for text, ok in [('a\\"b', False), ("a\\u0022b", False), ('a\\"c', True), ("a\\nb", True)]:
        assert (re.fullmatch(pattern, text + '"') is not None) == ok, text


# ------------------------------------------------------------------ the token budget


@pytest.mark.parametrize(
    "inside", ["", "ab", "ab\\", "ab\\u", "ab\\u00", "ab\\uD83D", "ab\\uD83D\\u", "ab\\uD83D\\uDE0"]
)
def test_the_budget_finishes_an_escape_within_its_bound(inside: str) -> None:
    """From inside an escape, the cheapest completion takes exactly ``min_tokens`` tokens."""
    planner = planner_of(Letter)
    cursor = walk(planner, '{"body": "' + inside)
    need = planner.min_tokens(cursor)
    tokens = 0
    while not isinstance(cursor, Finished):
        allowed = planner.allowed(cursor, need - tokens)
        assert len(allowed), inside
        token = planner.bound.cheapest(cursor)  # type: ignore[arg-type]
        assert token in allowed.tolist()
        cursor = planner.advance(cursor, token)
        tokens += 1
    assert tokens == need
    text = TOK.decode(TOK.encode('{"body": "' + inside)).decode()
    assert text.endswith(inside)


@pytest.mark.parametrize("seed", range(4))
def test_random_walks_under_a_tight_budget_through_escapes(seed: int) -> None:
    """Every token a tight budget allows leaves a record that finishes within it."""
    planner = planner_of(Letter)
    rng = np.random.default_rng(seed)
    budget = planner.min_tokens(planner.start()) + 6
    cursor, ids = walk(planner, '{"body": "x\\'), TOK.encode('{"body": "x\\')
    while not isinstance(cursor, Finished):
        allowed = planner.allowed(cursor, budget - len(ids))
        assert len(allowed)
        token = int(rng.choice(allowed))
        ids.append(token)
        cursor = planner.advance(cursor, token)
    assert len(ids) <= budget
    Letter.model_validate_json(TOK.decode(ids).decode())


# ------------------------------------------------------------------ the segment regex


def test_the_segment_regex_counts_escaped_characters() -> None:
    def cursor(written: str, lo: int, hi: int | None) -> FreeCursor:
        free = FreeString(None, written, lo, hi, "")  # type: ignore[arg-type]
        return FreeCursor(free)

    pattern = _free_regex(cursor("", 0, 3))
    for text in ["a\\nb", 'a\\"b', "\\\\\\/\\t", "\\u00e9\\u00E9x", "\\uD83D\\uDE00ab", "é\x7f"]:
        assert re.fullmatch(pattern, text + '"'), text
        assert len(json.loads('"' + text + '"')) <= 3
    for text in ["a\\nbc", "a\\x", "\\uD83D", "\\uDE00", "\\uD83Dab", "a\nb", 'a"b', "\\u12G4"]:
        assert not re.fullmatch(pattern, text + '"'), text
    lengths = _free_regex(cursor("ab", 4, 4))
    assert re.fullmatch(lengths, '\\n\\u0041"') and not re.fullmatch(lengths, '\\n"')


def test_the_segment_regex_spells_named_texts_as_json_does() -> None:
    class Quoted(BaseModel):
        s: str = Field(max_length=3)

        @relation
        def rule(self) -> bool:
            return self.s == 'a"' or (len(self.s) == 1 and self.s != "a")

    pattern = _free_regex(string_cursor(planner_of(Quoted)))
    for text, ok in [('a\\"', True), ("\\n", True), ("b", True), ("a", False), ('a\\"b', False)]:
        assert (re.fullmatch(pattern, text + '"') is not None) == ok, (text, pattern)
