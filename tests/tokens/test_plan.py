import numpy as np
import pytest
from pydantic import BaseModel, Field

from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import Finished, FreeCursor, Planner, TrieNode
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import TRIP_CONTEXT, Pick, Trip, tiny_tokenizer

TOK = tiny_tokenizer()


def planner_for(model: type[BaseModel], context: object = None) -> Planner:
    return Planner(Writer(compile_spec(model, context)), TOK)


def walk_certain(planner: Planner, cursor: object) -> tuple[list[int], object]:
    tokens = []
    while (t := planner.certain(cursor)) is not None:  # type: ignore[arg-type]
        tokens.append(t)
        cursor = planner.advance(cursor, t)  # type: ignore[arg-type]
    return tokens, cursor


def test_forced_prefix_is_canonical_tokenization() -> None:
    planner = planner_for(Pick)
    tokens, cursor = walk_certain(planner, planner.start())
    text = TOK.decode(tokens).decode()
    # every option starts with a quote, so the quote is certain too
    assert text == '{"letter": "'
    # the certain tokens are the canonical tokens of the forced text
    assert tokens == TOK.encode(text)[: len(tokens)]
    assert isinstance(cursor, TrieNode)
    # at the choice, the allowed tokens are the letters
    allowed = sorted(TOK.decode([int(t)]).decode() for t in planner.allowed(cursor))
    assert allowed == ["x", "y", "z"]


def test_relation_determines_tokens() -> None:
    planner = planner_for(Pick)
    cursor = planner.start()
    text = ""
    # choose x, then n = 2: `big` is then determined to be true, so it must be certain
    script = '{"letter": "x", "n": 2'
    while len(text) < len(script):
        allowed = [int(t) for t in planner.allowed(cursor)]
        pick = next(t for t in allowed if script.startswith(text + TOK.decode([t]).decode()))
        text += TOK.decode([pick]).decode()
        cursor = planner.advance(cursor, pick)
    rest, end = walk_certain(planner, cursor)
    assert text + TOK.decode(rest).decode() == '{"letter": "x", "n": 2, "big": true}'
    assert isinstance(end, Finished)


def test_every_path_validates_and_no_other() -> None:
    """Enumerate the whole token tree: exactly the 12 valid records, each once."""
    planner = planner_for(Pick)
    found: list[str] = []

    def dfs(cursor: object, text: str) -> None:
        if isinstance(cursor, Finished):
            found.append(text)
            return
        for t in planner.allowed(cursor).tolist():  # type: ignore[arg-type]
            dfs(planner.advance(cursor, t), text + TOK.decode([t]).decode())  # type: ignore[arg-type]

    dfs(planner.start(), "")
    assert len(found) == len(set(found)) == 12
    for text in found:
        Pick.model_validate_json(text)


def test_multi_token_options_share_a_trie() -> None:
    planner = planner_for(Trip, TRIP_CONTEXT)
    tokens, cursor = walk_certain(planner, planner.start())
    assert TOK.decode(tokens).decode() == '{"legs": [{"city": "'
    assert isinstance(cursor, TrieNode)
    first = {TOK.decode([t]).decode() for t in planner.allowed(cursor).tolist()}
    # Paris and Parma share the token "Par"; Rome is its own token
    assert "Rome" in first and ("Par" in first or "Paris" in first)


def test_trip_records_all_valid() -> None:
    planner = planner_for(Trip, TRIP_CONTEXT)
    rng = np.random.default_rng(0)
    for _ in range(20):
        cursor = planner.start()
        text = ""
        while not isinstance(cursor, Finished):
            allowed = planner.allowed(cursor)
            t = int(rng.choice(allowed))
            text += TOK.decode([t]).decode()
            cursor = planner.advance(cursor, t)
        Trip.model_validate_json(text, context=TRIP_CONTEXT)


class Note(BaseModel):
    title: str = Field(max_length=6)
    n: int = Field(ge=0, le=9)


def test_free_string_masks() -> None:
    planner = planner_for(Note)
    tokens, cursor = walk_certain(planner, planner.start())
    assert TOK.decode(tokens).decode() == '{"title": "'
    assert isinstance(cursor, FreeCursor)
    allowed = {TOK.decode([t]).decode() for t in planner.allowed(cursor).tolist()}
    assert "a" in allowed and '"' in allowed and "\\" in allowed  # an escape begins
    assert "\n" not in allowed  # a raw control character: JSON writes it escaped
    assert '"}' not in allowed  # a closing quote may only be followed by the forced ', "n": '
    # six characters fill the string; then only closing tokens remain
    for ch in "abcdef":
        cursor = planner.advance(cursor, TOK.encode(ch)[0])
    allowed = {TOK.decode([t]).decode() for t in planner.allowed(cursor).tolist()}
    assert all(a.startswith('"') for a in allowed)
    cursor = planner.advance(cursor, TOK.encode('",')[0])
    rest, cursor = walk_certain(planner, cursor)
    assert TOK.decode(rest).decode() == ' "n": '


def test_cursors_are_immutable_for_rollback() -> None:
    planner = planner_for(Pick)
    start = planner.start()
    _, choice = walk_certain(planner, start)
    allowed = planner.allowed(choice).tolist()  # type: ignore[arg-type]
    a = planner.advance(choice, allowed[0])  # type: ignore[arg-type]
    b = planner.advance(choice, allowed[-1])  # type: ignore[arg-type]
    assert planner.advance(choice, allowed[0]) is a  # type: ignore[arg-type]
    assert a is not b or len(allowed) == 1
    with pytest.raises(ValueError):
        planner.advance(choice, 10_000)  # type: ignore[arg-type]
