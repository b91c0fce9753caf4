"""Relations over the ``len()`` of free strings: compiled exactly, written exactly.

A free ``str`` read only through ``len()`` has a length variable and no finite domain; the
writer writes it character by character and closes it only at lengths the oracle allows.
"""

from __future__ import annotations

import datetime as dt
import enum
import itertools
from typing import Literal

import numpy as np
import pytest
from pydantic import BaseModel, Field, ValidationError

from factorspec_sdk import RelationDefinitionError, UnsatisfiableSpecError, relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import spec_from_ir, to_ir
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import FreeString, Writer
from tests.helpers import Post, random_record, tiny_tokenizer
from tests.relations.helpers import constants_of

TOK = tiny_tokenizer()


class Tags(BaseModel):
    """Lengths of list items, summed."""

    tags: list[str] = Field(min_length=1, max_length=3)

    @relation
    def total(self) -> bool:
        return sum(len(t) for t in self.tags) == 4 and all(len(t) > 0 for t in self.tags)


class Kind(BaseModel):
    """A str read both by value and by length: its values come from the relation."""

    kind: str
    size: int = Field(ge=0, le=9)

    @relation
    def named(self) -> bool:
        return self.kind in ("a", "bb", "cccc") and len(self.kind) == self.size


class Captioned(BaseModel):
    """Strings read only for their truth: ``bool(s)`` is ``len(s) > 0``."""

    caption: str
    alt: str = Field(max_length=5)

    @relation
    def needs_text(self) -> bool:
        return bool(self.caption) and not self.alt


class Event(BaseModel):
    """Grammar values (a date, a float) beside strings whose lengths relations read."""

    when: dt.date
    title: str = Field(max_length=9)
    price: float
    code: str = Field(max_length=6)

    @relation
    def lengths(self) -> bool:
        return len(self.title) % 2 == 1 and len(self.code) == 4


# ------------------------------------------------------------------ compiling


def test_a_string_read_only_by_len_has_no_code_variable() -> None:
    spec = compile_spec(Post)
    assert spec.variable_for(("title",)) is None
    assert spec.string_length_variable(("title",)) == "len(title)"
    assert spec.string_length_variable(("body",)) == "len(body)"
    assert spec.variables["len(title)"].le == 12  # the schema's max_length
    assert spec.variables["len(body)"].le == 256  # DEFAULT_MAX_STRING_LENGTH
    assert spec.variables["len(title)"].kind == "strlen"
    spec = compile_spec(Captioned)
    assert sorted(spec.variables) == ["len(alt)", "len(caption)"]
    oracle = spec.new_oracle()
    assert oracle.feasible_values((), "len(alt)") == [0]


def test_a_string_read_by_value_and_length_ties_both() -> None:
    spec = compile_spec(Kind)
    oracle = spec.new_oracle()
    assert oracle.feasible_values((), "kind") == ["a", "bb", "cccc"]
    assert oracle.feasible_values((("kind", "bb"),), "size") == [2]
    assert oracle.feasible_values((("size", 4),), "kind") == ["cccc"]
    assert "length of kind" in {f.name for f in spec.factors}


def test_lengths_beyond_the_default_bound_are_refused_with_the_bound_named() -> None:
    class Essay(BaseModel):
        text: str

        @relation
        def long(self) -> bool:
            return len(self.text) > 300

    with pytest.raises(UnsatisfiableSpecError) as info:
        compile_spec(Essay)
    assert "bounds of len(text)" in info.value.core


class Size(enum.Enum):
    S = "s"
    M = "m"


class LenOfEnum(BaseModel):
    size: Size

    @relation
    def r(self) -> bool:
        return len(self.size) == 1


class LenOfEnumValue(BaseModel):
    size: Size

    @relation
    def r(self) -> bool:
        return len(self.size.value) == 1


@pytest.mark.parametrize("model", [LenOfEnum, LenOfEnumValue])
def test_len_of_an_enum_is_refused(model: type[BaseModel]) -> None:
    with pytest.raises(RelationDefinitionError) as info:
        compile_spec(model)
    assert info.value.construct == "len() of a string value"
    assert info.value.relation == f"{model.__name__}.r"
    assert info.value.filename == __file__
    assert info.value.lineno > 0


def test_the_relation_ir_round_trips_string_lengths() -> None:
    spec = spec_from_ir(to_ir(Post))
    assert spec.string_length_variable(("title",)) == "len(title)"
    oracle = spec.new_oracle()
    assert oracle.feasible_values((), "len(title)") == [5, 7, 9, 11]


# ------------------------------------------------------------------ the writer, exactly


def _free_at(writer: Writer, text: str) -> FreeString:
    """The free string the writer is in after writing ``text`` (forced text included)."""
    state = writer.start()
    pos = 0
    while True:
        forced, state = writer.forced(state)
        assert text[pos:].startswith(forced) or text[pos:] == forced[: len(text) - pos]
        pos += len(forced)
        choice = writer.choices(state)
        if isinstance(choice, FreeString):
            rest = text[pos:]
            if '"' not in rest:
                return writer.extend_free(choice, rest) if rest else choice
            body = rest[: rest.index('"')]
            closed = writer.extend_free(choice, body) if body else choice
            assert closed.closes_at(len(body))
            state = writer.close_free(closed)
            pos += len(body) + 1
            continue
        assert isinstance(choice, list)
        [option] = [o for o in choice if text[pos:].startswith(o.text)]
        pos += len(option.text)
        state = option.state


def test_a_string_closes_exactly_at_the_lengths_some_record_allows() -> None:
    """Brute force: every (title length, n, body length) against the Python relations."""
    writer = Writer(compile_spec(Post))
    title_ok = {
        t
        for t, n in itertools.product(range(13), range(10))
        if t == 2 * n + 1 and n >= 2 and any(b > t and b % 3 == 0 for b in range(257))
    }
    free = _free_at(writer, '{"title": "')
    assert [k for k in range(20) if free.closes_at(k)] == sorted(title_ok)
    assert free.longest == 11 and free.shortest_close() == 5
    # with the title at 7 characters (n = 3), the body closes at multiples of 3 above 7
    free = _free_at(writer, '{"title": "abcdefg", "n": 3, "body": "')
    expect = [b for b in range(257) if b > 7 and b % 3 == 0]
    assert [k for k in range(300) if free.closes_at(k)] == expect
    assert free.longest == 255 and free.shortest_close() == 9
    assert free.lengths is not None and free.lengths.next_length(10) == 12
    free = _free_at(writer, '{"title": "abcdefg", "n": 3, "body": "abcdefghi", "note": "')
    assert [k for k in range(5) if free.closes_at(k)] == [1, 2]


def test_random_walks_write_only_valid_records() -> None:
    """Any token the masks allow leads on to a valid record (sampled walks)."""
    for model in (Post, Tags, Kind, Captioned, Event):
        planner = Planner(Writer(compile_spec(model)), TOK)
        rng = np.random.default_rng(0)
        for _ in range(8):
            model.model_validate_json(random_record(planner, TOK, rng))


def test_a_record_the_relations_reject_is_rejected_by_pydantic_too() -> None:
    with pytest.raises(ValidationError):
        Post.model_validate({"title": "abcd", "n": 2, "body": "abcdef"})
    Post.model_validate({"title": "abcde", "n": 2, "body": "abcdef"})
    with pytest.raises(ValidationError):
        Tags.model_validate({"tags": ["ab", "c"]})


def test_literal_leaves_still_compile_without_length() -> None:
    class Mode(BaseModel):
        mode: Literal["on", "off"]
        label: str = Field(max_length=3)

        @relation
        def label_fits(self) -> bool:
            return (self.mode == "on") == (len(self.label) == 2)

    spec = compile_spec(Mode)
    oracle = spec.new_oracle()
    assert oracle.feasible_values((("mode", "on"),), "len(label)") == [2]
    assert oracle.feasible_values((("mode", "off"),), "len(label)") == [0, 1, 3]


@pytest.mark.parametrize("name", ["post", "tags", "kind", "texts", "box", "itinerary", "invoice"])
def test_every_relation_lists_every_variable_its_formula_holds(name: str) -> None:
    """A free str's code counts as read exactly when a relation uses it (not for len() alone).

    A formula that held a variable its relation does not list would split the spec's
    components wrongly.
    """
    from examples import invoice, itinerary
    from factorspec_sdk.domains.trip import Itinerary
    from factorspec_sdk.relations import build_layout, relations_of
    from factorspec_sdk.relations.compiler import RelationCompiler
    from tests.relations.test_differential import CTX, Box, Texts

    model, context = {
        "post": (Post, None),
        "tags": (Tags, None),
        "kind": (Kind, None),
        "texts": (Texts, None),
        "box": (Box, CTX),
        "itinerary": (Itinerary, itinerary.SAMPLE_CONTEXT),
        "invoice": (invoice.Invoice, invoice.SAMPLE_CONTEXT),
    }[name]
    comp = RelationCompiler(build_layout(model), context)
    read: set[str] = set()
    for info in relations_of(model):
        compiled = comp.compile(info)
        assert constants_of(compiled.formula) <= compiled.variables, info.name
        read |= compiled.variables
    codes = {n for n, r in comp.records().items() if r.free_str}
    assert set(comp.records()) == read
    if name == "post":
        assert not codes  # read only through len()
    if name in ("kind", "texts"):
        assert "kind" in codes


def test_record_facts_read_string_lengths() -> None:
    from factorspec_sdk.ir import check_record, record_facts

    spec = compile_spec(Post)
    good = {"title": "abcde", "n": 2, "body": "abcdef", "note": "x"}
    bad = {**good, "body": "abcdefg"}  # not a multiple of 3
    assert ("len(body)", 6) in record_facts(spec, good)
    assert spec.new_oracle().feasible(record_facts(spec, good))
    assert not spec.new_oracle().feasible(record_facts(spec, bad))
    check_record(spec, '{"title": "abcde", "n": 2, "body": "abcdef", "note": "x"}')
