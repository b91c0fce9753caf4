"""Free strings compared by value (``==``, ``!=``, ``in``), with constants and each other.

Such a string needs no finite domain: a text no relation names has the code ``OTHER_CODE``,
and two strings compared with each other share a ``same(a, b)`` variable. The writer writes
the string freely and closes it only as a text some record allows; these tests check that
against brute force over small alphabets, at the writer, the token masks and the segment
regex.
"""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest
from pydantic import BaseModel, Field, ValidationError

from factorspec_sdk import RelationDefinitionError, distinct, relation
from factorspec_sdk.drafter.segments import _free_regex
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import check_record, spec_from_ir, to_ir
from factorspec_sdk.relations.compiler import OTHER_TEXT
from factorspec_sdk.tokens.plan import FreeCursor, Planner
from factorspec_sdk.writer.automaton import FreeString, Option, Writer
from tests.helpers import Signup, random_record, tiny_tokenizer

TOK = tiny_tokenizer()


class Trio(BaseModel):
    """Small enough to enumerate: texts over ``abz`` (``z`` stands for any unnamed char)."""

    a: str = Field(max_length=2)
    b: str = Field(max_length=2)
    c: str = Field(max_length=3)

    @relation
    def rules(self) -> bool:
        return (
            self.a != self.b
            and self.a not in ("", "b")
            and (self.c == self.a or self.c == "abz")
            and (self.b == "a") == (len(self.c) == 3)
        )


class Crew(BaseModel):
    """Distinct free names in a list, and a captain who is one of them."""

    names: list[str] = Field(min_length=1, max_length=3)
    captain: str

    @relation
    def unique_names(self) -> bool:
        return distinct(self.names) and all(n != "" for n in self.names)

    @relation
    def captain_in_crew(self) -> bool:
        return any(self.captain == n for n in self.names)


def _texts(alphabet: str, most: int) -> list[str]:
    return ["".join(p) for k in range(most + 1) for p in itertools.product(alphabet, repeat=k)]


SHORT = _texts("abz", 2)
LONG = _texts("abz", 3)


def _valid(**fields: str) -> bool:
    try:
        Trio.model_validate(fields)
    except ValidationError:
        return False
    return True


def _choice_after(writer: Writer, fields: dict[str, str], key: str) -> FreeString | list[Option]:
    """The writer's choice at field ``key``, after ``fields`` (the earlier ones) are written.

    A value the writer forces comes back as a list of one option.
    """
    done = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in fields.items()]
    prefix = "{" + "".join(d + ", " for d in done) + json.dumps(key) + ": "
    state, pos = writer.start(), 0
    while True:
        forced, after = writer.forced(state)
        rest = prefix[pos:]
        if len(forced) > len(rest):  # the prefix ends inside forced text
            assert forced.startswith(rest), (forced, rest)
            if forced[len(rest) :] == '"' and not after.done:  # a free string's opening
                choice = writer.choices(after)
                if isinstance(choice, FreeString):
                    return choice
            return [Option(forced[len(rest) :], after)]
        assert rest.startswith(forced), (forced, rest)
        pos, state = pos + len(forced), after
        rest = prefix[pos:]
        choice = writer.choices(state)
        if isinstance(choice, FreeString):
            if not rest:
                return choice
            body = rest[: rest.index('"')]
            grown = writer.extend_free(choice, body) if body else choice
            assert grown.closes(body)
            state, pos = writer.close_free(grown), pos + len(body) + 1
            continue
        assert isinstance(choice, list)
        if not rest:
            if [o.text for o in choice] == ['"']:  # the opening quote of a free string
                state = choice[0].state
                continue
            return choice
        [option] = [o for o in choice if rest.startswith(o.text)]
        state, pos = option.state, pos + len(option.text)


def _closes(choice: FreeString | list[Option], text: str) -> bool:
    if isinstance(choice, FreeString):
        return choice.closes(text)
    return any(o.text.startswith(json.dumps(text)) for o in choice)


# ------------------------------------------------------------------ compiling


def test_strings_compared_with_each_other_share_a_same_variable() -> None:
    spec = compile_spec(Trio)
    assert {"same(a, b)", "same(a, c)", "same(b, c)"} <= set(spec.variables)
    oracle = spec.new_oracle()
    assert OTHER_TEXT in (oracle.feasible_values((), "a") or [])
    # two texts no relation names, equal or not: the same code, told apart by same(a, c)
    assert oracle.feasible((("a", "zz"), ("b", "z"), ("same(a, b)", False), ("c", "zz")))
    assert not oracle.feasible((("a", "zz"), ("same(a, c)", False), ("len(c)", 2)))


def test_a_leaf_that_is_always_named_compares_by_code() -> None:
    """``city in context`` rules the unnamed code out: no same() variable is made."""
    from tests.helpers import TRIP_CONTEXT, Trip

    spec = compile_spec(Trip, TRIP_CONTEXT)
    assert not [v for v in spec.variables if v.startswith("same(")]


def test_comparing_a_chosen_free_string_is_refused() -> None:
    with pytest.raises(RelationDefinitionError) as err:

        class Chosen(BaseModel):
            a: str
            b: str
            c: str
            n: int = Field(ge=0, le=3)

            @relation
            def pick(self) -> bool:
                return (self.a if self.n > 1 else self.b) == self.c

        compile_spec(Chosen)
    assert "== between computed strings" in str(err.value)
    assert "pick" in str(err.value)


# ------------------------------------------------------------------ the writer, exactly


def test_each_string_closes_exactly_where_some_record_allows() -> None:
    """Brute force over texts of ``abz``: the writer's closes == a valid completion exists."""
    writer = Writer(compile_spec(Trio))
    at_a = _choice_after(writer, {}, "a")
    for a in SHORT:
        expect = any(_valid(a=a, b=b, c=c) for b in SHORT for c in [*LONG, a])
        assert _closes(at_a, a) == expect, a
    for a in ["a", "ab", "z", "zz"]:
        at_b = _choice_after(writer, {"a": a}, "b")
        for b in SHORT:
            expect = any(_valid(a=a, b=b, c=c) for c in [*LONG, a])
            assert _closes(at_b, b) == expect, (a, b)
        for b in [b for b in SHORT if any(_valid(a=a, b=b, c=c) for c in [*LONG, a])]:
            at_c = _choice_after(writer, {"a": a, "b": b}, "c")
            for c in [*LONG, a]:
                assert _closes(at_c, c) == _valid(a=a, b=b, c=c), (a, b, c)


def test_a_string_equal_to_an_earlier_one_is_certain_text() -> None:
    writer = Writer(compile_spec(Signup))
    choice = _choice_after(writer, {"username": "bob", "password": "x1!"}, "again")
    assert isinstance(choice, list)  # it copies the password
    assert [o.text for o in choice] == ['"x1!", "role": "']
    user = {"username": "bobo", "password": "pw", "again": "pw"}
    role = _choice_after(writer, user, "role")  # a four-character name: an admin
    assert isinstance(role, list) and [o.text for o in role] == ['"admin"}']


def test_the_token_masks_allow_exactly_the_characters_with_a_completion() -> None:
    """At every prefix of ``a`` and ``b`` over ``abz``: single-character tokens and the quote."""
    planner = Planner(Writer(compile_spec(Trio)), TOK)
    writer = planner.writer
    quote = TOK.encode('"')
    chars = {ch: TOK.encode(ch) for ch in "abz"}
    for before, key in (({}, "a"), ({"a": "ab"}, "b"), ({"a": "z"}, "b")):
        free = _choice_after(writer, before, key)
        assert isinstance(free, FreeString)
        for written in _texts("abz", 2):
            cursor = FreeCursor(writer.extend_free(free, written) if written else free)
            allowed = set(planner.allowed(cursor).tolist())
            for ch, ids in chars.items():
                grown = [t for t in SHORT if t.startswith(written + ch)]
                expect = any(_closes(free, t) for t in grown)
                assert (ids[0] in allowed) == expect, (before, written, ch)
            assert (quote[0] in allowed) == _closes(free, written), (before, written)


def test_the_segment_regex_matches_exactly_the_texts_the_writer_closes_at() -> None:
    writer = Writer(compile_spec(Trio))
    for before, key in (({}, "a"), ({"a": "a"}, "b"), ({"a": "ab"}, "b"), ({"a": "z"}, "b")):
        free = _choice_after(writer, before, key)
        assert isinstance(free, FreeString)
        for written in ["", "a", "z"]:
            grown = writer.extend_free(free, written) if written else free
            pattern = _free_regex(FreeCursor(grown))
            for rest in LONG:
                matched = re.fullmatch(pattern, rest + '"') is not None
                assert matched == grown.closes(written + rest), (before, written, rest)


@pytest.mark.parametrize("model", [Trio, Signup, Crew])
def test_random_walks_write_only_valid_records(model: type[BaseModel]) -> None:
    planner = Planner(Writer(compile_spec(model)), TOK)
    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(25):
        text = random_record(planner, TOK, rng, close=0.5)
        model.model_validate_json(text)
        seen.add(text)
    assert len(seen) > 10  # the strings are free: many records, not a few


def test_distinct_free_names_never_repeat() -> None:
    planner = Planner(Writer(compile_spec(Crew)), TOK)
    rng = np.random.default_rng(0)
    for _ in range(20):
        crew = Crew.model_validate_json(random_record(planner, TOK, rng, close=0.6))
        assert len(set(crew.names)) == len(crew.names) and crew.captain in crew.names


# ------------------------------------------------------------------ the IR


def test_the_relation_ir_carries_same_variables() -> None:
    spec = compile_spec(Signup)
    ir = to_ir(Signup)
    assert any(v.get("other") for v in ir["variables"])
    back = spec_from_ir(ir)
    assert set(back.variables) == set(spec.variables)
    o1, o2 = spec.new_oracle(), back.new_oracle()
    for facts in [
        (("password", "ab"), ("again", "ab"), ("same(again, password)", True)),
        (("password", "ab"), ("again", "ab"), ("same(again, password)", False)),
        (("username", "root"),),
        (("username", "bobo"), ("role", "admin")),
    ]:
        assert o1.feasible(facts) == o2.feasible(facts), facts
    good = '{"username": "bobo", "password": "pw", "again": "pw", "role": "admin"}'
    check_record(back, good)
    with pytest.raises(Exception, match="relations"):
        check_record(back, good.replace('"again": "pw"', '"again": "pv"'))


def test_a_named_text_with_a_quote_is_written_escaped() -> None:
    """``'a"'`` is the JSON text ``"a\\""``: written freely, escape and all, and no dead end."""

    class Quoted(BaseModel):
        s: str = Field(max_length=3)

        @relation
        def rule(self) -> bool:
            return self.s == 'a"' or (len(self.s) == 1 and self.s != "a")

    planner = Planner(Writer(compile_spec(Quoted)), TOK)
    free = _choice_after(planner.writer, {}, "s")
    assert isinstance(free, FreeString) and free.texts is not None
    assert 'a"' in free.texts.feasible
    cursor = FreeCursor(free)
    for piece in ("a", "\\", '"'):  # toward 'a"': ``a``, then ``\"`` in two tokens
        token = TOK.encode(piece)[0]
        assert token in planner.allowed(cursor).tolist(), piece
        cursor = planner.advance(cursor, token)
    assert isinstance(cursor, FreeCursor) and cursor.free.written == 'a"'
    closing = {TOK.vocab[t].decode() for t in planner.allowed(cursor).tolist()}
    assert closing == {'"', '"}'}  # 'a"' is whole: only the quote may follow it
    cursor = FreeCursor(free)
    cursor = planner.advance(cursor, TOK.encode("a")[0])  # 'a' alone is banned
    assert TOK.encode('"}')[0] not in planner.allowed(cursor).tolist()
    text = '{"s": "a\\""}'
    cursor = planner.start()
    for token in TOK.encode(text):
        assert token in planner.allowed(cursor).tolist(), (text, token)
        cursor = planner.advance(cursor, token)
    assert Quoted.model_validate_json(text).s == 'a"'
    rng = np.random.default_rng(0)
    for _ in range(10):
        Quoted.model_validate_json(random_record(planner, TOK, rng, close=0.5))


def test_a_relations_nul_text_is_not_the_sentinel_of_other_texts() -> None:
    """``"\\x00<other>"`` is a named text like any other (written ``"\\u0000<other>"``).

    The value of a text no relation names (`OTHER_TEXT`) was that very string: the writer
    took the relation's text for "any other text" and wrote records the relation refuses.
    """

    class Sentinel(BaseModel):
        s: str = Field(max_length=12)

        @relation
        def rule(self) -> bool:
            return self.s in ("\x00<other>", "b")

    planner = Planner(Writer(compile_spec(Sentinel)), TOK)
    rng = np.random.default_rng(0)
    seen = {Sentinel.model_validate_json(random_record(planner, TOK, rng)).s for _ in range(12)}
    assert seen == {"\x00<other>", "b"}
    assert OTHER_TEXT != "\x00<other>"


def test_the_segment_regex_escapes_what_a_character_class_needs() -> None:
    """A banned text with ``-`` or ``]`` makes a class of its own characters: escaped."""

    class Dash(BaseModel):
        s: str = Field(max_length=2)

        @relation
        def rule(self) -> bool:
            return self.s not in ("-a", "]", "^")

    free = _choice_after(Writer(compile_spec(Dash)), {}, "s")
    assert isinstance(free, FreeString)
    pattern = _free_regex(FreeCursor(free))
    for text in ["-a", "]", "^", "-", "-b", "a", "", "ab", "b]"]:
        matched = re.fullmatch(pattern, text + '"') is not None
        assert matched == (text not in ("-a", "]", "^")), (text, pattern)
