"""``startswith``/``endswith`` of free strings: compiled exactly, written exactly.

A free str read with ``s.startswith(c)`` / ``s.endswith(d)`` (constants) needs no finite
domain: each affix is a Bool tied to the string's code and length (`codes.affix_links`),
and the writer decides it by the text (`factorspec_sdk.writer.affixes`). Checked against
brute force over small alphabets (``z`` stands for every character no constant has) at the
writer, the token masks and the segment regex.
"""

from __future__ import annotations

import enum
import itertools
import re
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from factorspec_sdk import relation
from factorspec_sdk.drafter.segments import _free_regex
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import check_record, spec_from_ir, to_ir
from factorspec_sdk.tokens.free import FreeTables
from factorspec_sdk.tokens.plan import FreeCursor, Planner
from factorspec_sdk.tokens.vocab import TokenizerInfo
from factorspec_sdk.writer.automaton import FreeString, Writer
from tests.helpers import CHARS, MULTI, random_record, tiny_tokenizer
from tests.relations.helpers import refused
from tests.relations.test_differential import assert_agree
from tests.writer.test_string_texts import _choice_after, _closes

TOK = tiny_tokenizer()


class Tagged(BaseModel):
    """Prefixes, suffixes (one a tuple), a named text, and a length tied to another string."""

    code: str = Field(max_length=4)
    mail: str = Field(max_length=4)

    @relation
    def rules(self) -> bool:
        return (
            (self.code.startswith("ab") or self.code.endswith("b"))
            and not self.code.startswith("b")
            and self.code != "ab"
            and self.mail.endswith(("a", "ba")) == (len(self.code) == 3)
        )


TEXTS = ["".join(p) for k in range(5) for p in itertools.product("abz", repeat=k)]


def _valid(**fields: str) -> bool:
    try:
        Tagged.model_validate(fields)
    except ValidationError:
        return False
    return True


def test_each_string_closes_exactly_where_some_record_allows() -> None:
    writer = Writer(compile_spec(Tagged))
    at_code = _choice_after(writer, {}, "code")
    for code in TEXTS:
        expect = any(_valid(code=code, mail=m) for m in TEXTS)
        assert _closes(at_code, code) == expect, code
    for code in ["abz", "zb", "abzb", "azzb", "abb"]:
        at_mail = _choice_after(writer, {"code": code}, "mail")
        for mail in TEXTS:
            assert _closes(at_mail, mail) == _valid(code=code, mail=mail), (code, mail)


def test_the_token_masks_allow_exactly_the_characters_with_a_completion() -> None:
    planner = Planner(Writer(compile_spec(Tagged)), TOK)
    quote = TOK.encode('"')[0]
    for before, key in (({}, "code"), ({"code": "abz"}, "mail"), ({"code": "zb"}, "mail")):
        free = _choice_after(planner.writer, before, key)
        assert isinstance(free, FreeString)
        for written in [t for t in TEXTS if len(t) <= 3]:
            grown = planner.writer.extend_free(free, written) if written else free
            allowed = set(planner.allowed(FreeCursor(grown)).tolist())
            for ch in "abz":
                expect = any(t.startswith(written + ch) and free.closes(t) for t in TEXTS)
                assert (TOK.encode(ch)[0] in allowed) == expect, (before, written, ch)
            assert (quote in allowed) == free.closes(written), (before, written)


def test_the_segment_regex_allows_only_closing_texts_and_some_if_any() -> None:
    writer = Writer(compile_spec(Tagged))
    for before, key in (({}, "code"), ({"code": "abz"}, "mail"), ({"code": "zb"}, "mail")):
        free = _choice_after(writer, before, key)
        assert isinstance(free, FreeString)
        for written in ["", "a", "ab", "z", "b"]:
            grown = writer.extend_free(free, written) if written else free
            reachable = [t for t in TEXTS if t.startswith(written) and free.closes(t)]
            if not reachable:
                continue
            pattern = _free_regex(FreeCursor(grown))
            matched = [
                t
                for t in TEXTS
                if t.startswith(written) and re.fullmatch(pattern, t[len(written) :] + '"')
            ]
            assert matched, (before, written, pattern)
            assert all(free.closes(t) for t in matched), (before, written, matched)


def test_random_walks_write_only_valid_records() -> None:
    planner = Planner(Writer(compile_spec(Tagged)), TOK)
    rng = np.random.default_rng(4)
    seen = set()
    for _ in range(25):
        text = random_record(planner, TOK, rng, close=0.5)
        Tagged.model_validate_json(text)
        seen.add(text)
    assert len(seen) > 10


def test_a_required_prefix_is_certain_text() -> None:
    class Ticket(BaseModel):
        region: Literal["EU", "US"]
        code: str = Field(max_length=8)

        @relation
        def prefixed(self) -> bool:
            return self.region != "EU" or self.code.startswith("EU-")

    planner = Planner(Writer(compile_spec(Ticket)), TOK)
    free = _choice_after(planner.writer, {"region": "EU"}, "code")
    assert isinstance(free, FreeString)
    cursor: FreeCursor = FreeCursor(free)
    allowed = {TOK.vocab[t].decode() for t in planner.allowed(cursor).tolist()}
    # the prefix's characters, or a backslash: ``E`` may be written ``\u0045`` too
    assert allowed == {"E", "\\"}
    steps = [("\\", "u"), ("u", "0"), ("0", "0"), ("0", "4"), ("4", "5"), ("5", "U")]
    for piece, only in steps:  # after the backslash, only the escape of ``E`` goes on
        cursor = planner.advance(cursor, TOK.encode(piece)[0])  # type: ignore[assignment]
        allowed = {TOK.vocab[t].decode() for t in planner.allowed(cursor).tolist()}
        assert allowed == ({only, "\\"} if piece == "5" else {only}), (piece, allowed)
    assert isinstance(cursor, FreeCursor) and cursor.free.written == "E"


# ------------------------------------------------------------------ compiling


class Color(enum.Enum):
    RED = "red"


class Shade(enum.StrEnum):
    DARK = "dark-red"
    LIGHT = "light-red"


class Affixed(BaseModel):
    """Affixes of free strings, Literals, str-Enums; tuples; under Optional and in lists."""

    title: str
    kind: Literal["re: x", "fw: y", "note"]
    shade: Shade
    note: str | None = None
    tags: list[str] = Field(max_length=3)

    @relation
    def reply(self) -> bool:
        return self.title.startswith(("Re: ", "Fw: ")) == self.kind.startswith("re")

    @relation
    def shades(self) -> bool:
        return self.shade.endswith("-red") and not self.shade.startswith("light")

    @relation
    def optional(self) -> bool:
        return self.note is None or not self.note.endswith("!")

    @relation
    def hashtags(self) -> bool:
        return all(t.startswith("#") for t in self.tags)

    @relation
    def both_ends(self) -> bool:
        return self.title.startswith("R") and self.title.endswith("e")


affixed_st = st.fixed_dictionaries(
    {
        "title": st.sampled_from(["Re: x", "Fw: y", "R", "Rose", "e", "", "Re"])
        | st.text("Re: F", max_size=5),
        "kind": st.sampled_from(["re: x", "fw: y", "note"]),
        "shade": st.sampled_from(["dark-red", "light-red"]),
        "note": st.none() | st.text("a!", max_size=3),
        "tags": st.lists(st.text("#a", max_size=3), max_size=3),
    }
)


@settings(max_examples=300, deadline=None)
@given(affixed_st)
def test_affixes_agree_with_python(data: dict[str, Any]) -> None:
    assert_agree(Affixed, None, data)


def test_affixes_of_a_spec_write_valid_records() -> None:
    planner = Planner(Writer(compile_spec(Affixed)), TOK)
    rng = np.random.default_rng(1)
    for _ in range(10):
        Affixed.model_validate_json(random_record(planner, TOK, rng, close=0.4))


class Pair(BaseModel):
    a: str
    b: str
    c: Color
    n: int = 0


@pytest.mark.parametrize(
    ("body", "construct"),
    [
        ("self.a.startswith(self.b)", "call to startswith()"),
        ("self.a.startswith('x') and self.a == self.b", "startswith/endswith of a string"),
        ("self.b == self.a and self.a.endswith('x')", "startswith/endswith of a string"),
        ("self.c.startswith('r')", "startswith() of an Enum member"),
        ("(self.a if self.n else self.b).endswith('x')", "endswith() of a computed string"),
    ],
)
def test_what_cannot_be_compiled_is_refused_by_name(
    body: str, construct: str, tmp_path: Any
) -> None:
    err = refused(Pair, body, str(tmp_path / "bad.py"))
    assert construct in str(err), str(err)
    assert "bad.py:7" in str(err)


def test_the_relation_ir_carries_affix_variables() -> None:
    spec = compile_spec(Tagged)
    ir = to_ir(Tagged)
    assert any(v.get("text") == "ab" for v in ir["variables"])
    back = spec_from_ir(ir)
    assert set(back.variables) == set(spec.variables)
    for code in ["abz", "zb", "ab", "b", "azzb"]:
        for mail in ["a", "ba", "z", ""]:
            text = f'{{"code": "{code}", "mail": "{mail}"}}'
            if _valid(code=code, mail=mail):
                check_record(back, text)
            else:
                with pytest.raises(Exception, match=r"relations|schema"):
                    check_record(back, text)


class Order(BaseModel):
    """A prefix, and named texts (their characters are common letters) the code may not be."""

    code: str = Field(max_length=10)

    @relation
    def rules(self) -> bool:
        return self.code.startswith("ORD-") and self.code not in ("ORD-refund", "ORD-missing")


WORDS = ["".join(p) for p in itertools.product("adefgimnorsu", repeat=2)]
WORDS += ["refund", "missing", "ref", "und", "miss", "ing", "order", "item", "jar", "party"]
WORDS += ["20", "204", "518", "ORD", "RD-", "-r", "D-", "O-", "sRD", "ORD-r"]
WORD_TOK = TokenizerInfo.tiny(sorted({*CHARS, *MULTI, *WORDS}))


def _completable_tokens(free: FreeString, tables: FreeTables) -> set[int]:
    """Brute force: the plain tokens after which the string can still close."""
    hi = free.max_length
    assert hi is not None
    return {
        tid
        for tid, text in zip(tables.safe_ids.tolist(), tables.safe_text, strict=True)
        if len(free.written + text) <= hi and free.completable(free.written + text)
    }


def test_affix_masks_check_only_the_tokens_along_a_constant_or_a_named_text() -> None:
    planner = Planner(Writer(compile_spec(Order)), WORD_TOK)
    free = _choice_after(planner.writer, {}, "code")
    assert isinstance(free, FreeString)
    masks = planner.free_masks()
    tables = masks.tables
    along = {  # tokens with a character of the prefix, or toward a named text
        tid
        for tid, text in zip(tables.safe_ids.tolist(), tables.safe_text, strict=True)
        if set(text) & set("ORD-")
        or any(n.startswith(text, 4) for n in ("ORD-refund", "ORD-missing"))
    }
    for written in ["", "O", "ORD", "ORD-", "ORD-r", "ORD-ref", "ORD-refun", "ORD-2", "ORD-20mi"]:
        grown = planner.writer.extend_free(free, written) if written else free
        checked = masks.stats.checked
        plain = set(planner.allowed(FreeCursor(grown)).tolist()) & set(tables.safe_ids.tolist())
        assert plain == _completable_tokens(grown, tables), written
        # the letters of the named texts do not send every word to the one-by-one check
        assert masks.stats.checked - checked <= len(along), written
    assert masks.stats.masks == 9 and masks.stats.hits == 0


def test_a_free_strings_mask_is_computed_once_per_request() -> None:
    planner = Planner(Writer(compile_spec(Order)), WORD_TOK)
    free = _choice_after(planner.writer, {}, "code")
    assert isinstance(free, FreeString)
    grown = planner.writer.extend_free(free, "ORD-2")
    first = planner.allowed(FreeCursor(grown))
    again = planner.allowed(FreeCursor(planner.writer.extend_free(free, "ORD-2")))
    assert again is first and not first.flags.writeable
    assert planner.free_masks().stats.masks == 1 and planner.free_masks().stats.hits == 1
    assert set(first.tolist()) >= _completable_tokens(grown, planner.free_masks().tables)


def test_the_foreign_tokens_of_a_set_of_characters_are_kept_with_the_tokenizers_tables() -> None:
    spec = compile_spec(Order)
    first, second = (Planner(Writer(spec), WORD_TOK) for _ in range(2))
    chars = frozenset("ORD-")
    kept = first.free_tables().foreign(chars)
    assert second.free_tables().foreign(chars) is kept and not kept.flags.writeable
    texts = first.free_tables().safe_text
    assert kept.tolist() == [not set(t) & chars for t in texts]
