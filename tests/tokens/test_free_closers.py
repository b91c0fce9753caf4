"""A token that closes a free string goes on past its quote, where JSON's layout goes on.

Before an optional key or another list item the text after a string is a choice, not forced
text; the model's own token there is ``",`` or ``"],`` (one token in most vocabularies), and
masking it leaves a bare ``"``, which a small model reads as a cue to keep writing. The
planner lets such a closer through for a string no relation reads, as far as its text runs
along the tokens of the options' trie (`Planner.close_rests`), and the record it ends in is
one the writer writes anyway.
"""

from __future__ import annotations

import random

import numpy as np
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import Cursor, Finished, FreeCursor, Planner
from factorspec_sdk.tokens.vocab import TokenizerInfo
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import CHARS, MULTI

TOK = TokenizerInfo.tiny(
    CHARS + [m for m in MULTI if m != ', "'] + ['"]', '"],', '"]}', ' "', "],"]
)
"""SmolLM2's split: ``,`` and `` "`` are tokens of their own, and ``",`` and ``"],`` too."""

MERGED = TokenizerInfo.tiny([*CHARS, *MULTI, '", "'])
"""A vocabulary whose ``, "`` is one token: the options' trie starts with it."""


class Optional_(BaseModel):
    a: str
    b: str | None = None
    c: int = Field(ge=0, le=9)


class Items(BaseModel):
    steps: list[str] = Field(min_length=1, max_length=3)
    name: str


class Read(BaseModel):
    a: str = Field(max_length=4)
    b: str | None = None
    c: int = Field(ge=0, le=9)

    @relation
    def a_is_short(self) -> bool:
        return len(self.a) <= 2


def _at(planner: Planner, text: str) -> Cursor:
    """The cursor after ``text``, written one canonical token at a time."""
    cursor = planner.start()
    for token in TOK.encode(text):
        assert token in planner.allowed(cursor).tolist(), (text, TOK.vocab[token])
        cursor = planner.advance(cursor, token)
    return cursor


def _allows(planner: Planner, cursor: Cursor, piece: str) -> bool:
    return TOK.encode(piece)[0] in planner.allowed(cursor).tolist()


def test_a_closer_goes_on_into_the_options_after_a_string() -> None:
    planner = Planner(Writer(compile_spec(Optional_)), TOK)
    inside = _at(planner, '{"a": "xy')
    assert isinstance(inside, FreeCursor)
    assert TOK.encode('",') == [TOK.vocab.index(b'",')]
    assert _allows(planner, inside, '",')  # the key after it is optional: b or c
    assert not _allows(planner, inside, '"}')  # c is required
    after = planner.advance(inside, TOK.vocab.index(b'",'))
    for rest in (' "b": "z", "c": 1}', ' "c": 1}'):  # both keys stay the model's choice
        assert isinstance(_follow(planner, after, rest), Finished), rest


def _follow(planner: Planner, cursor: Cursor, text: str) -> Cursor:
    """The cursor after ``text``, each step the longest allowed token ``text`` goes on with."""
    while text:
        pieces = [(TOK.vocab[t].decode(), t) for t in planner.allowed(cursor).tolist()]
        piece, token = max(((p, t) for p, t in pieces if text.startswith(p) and p), key=_length)
        cursor = planner.advance(cursor, token)
        text = text[len(piece) :]
    return cursor


def test_a_list_item_closes_into_the_next_item_or_the_list_end() -> None:
    planner = Planner(Writer(compile_spec(Items)), TOK)
    inside = _at(planner, '{"steps": ["boil')
    assert _allows(planner, inside, '",')  # another item
    assert _allows(planner, inside, '"],')  # the list's end, then the next key's text
    at_max = _at(planner, '{"steps": ["a", "b", "c')
    assert not _allows(planner, at_max, '",')  # three items are the most
    assert _allows(planner, at_max, '"],')


def test_a_closer_runs_along_the_tokens_of_the_trie_only() -> None:
    # where the options begin with the token ``, "``, a closer whose text ends inside it
    # (``",``) has no node of the trie to go on from; ``", "`` has
    planner = Planner(Writer(compile_spec(Items)), MERGED)
    cursor = planner.start()
    for token in MERGED.encode('{"steps": ["boil'):
        cursor = planner.advance(cursor, token)
    allowed = planner.allowed(cursor).tolist()
    assert MERGED.vocab.index(b'", "') in allowed
    assert MERGED.vocab.index(b'",') not in allowed


def test_a_string_a_relation_reads_closes_only_into_forced_text() -> None:
    # its closing facts depend on its text, so the state after its quote is not one: the
    # closer keeps to the text forced after it, as before
    planner = Planner(Writer(compile_spec(Read)), TOK)
    inside = _at(planner, '{"a": "x')
    assert _allows(planner, inside, '"')
    assert not _allows(planner, inside, '",')


def test_random_walks_through_the_new_closers_write_valid_records() -> None:
    spec = compile_spec(Items)
    rng = random.Random(7)
    closers = {TOK.vocab.index(t) for t in (b'",', b'"],', b'"]}')}
    used: set[int] = set()
    for _ in range(60):
        planner = Planner(Writer(spec), TOK)
        cursor, ids = planner.start(), list[int]()
        while not isinstance(cursor, Finished):
            allowed = planner.allowed(cursor)
            assert len(allowed), TOK.decode(ids)
            pool = [t for t in allowed.tolist() if t in closers] if rng.random() < 0.3 else []
            token = rng.choice(pool or allowed.tolist())
            used.add(token)
            ids.append(token)
            cursor = planner.advance(cursor, token)
            assert len(ids) < 400
        Items.model_validate_json(TOK.decode(ids))
    assert closers & used >= {TOK.vocab.index(b'",'), TOK.vocab.index(b'"],')}


def test_the_closer_mask_agrees_with_the_move() -> None:
    # every closer the mask allows is one the planner can advance over, and no other
    planner = Planner(Writer(compile_spec(Optional_)), TOK)
    inside = _at(planner, '{"a": "q')
    allowed = set(planner.allowed(inside).tolist())
    tables = planner.free_tables()
    for tid in np.asarray(tables.quote_ids).tolist():
        try:
            planner.advance(inside, tid)
            moved = True
        except (ValueError, RuntimeError):
            moved = False
        assert moved == (tid in allowed), TOK.vocab[tid]


def _length(piece: tuple[str, int]) -> int:
    return len(piece[0])
