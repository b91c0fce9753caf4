"""Optional keys: a choice the model makes, present or absent, as Pydantic reads a record.

A key with a default (Pydantic) or not ``required`` (JSON Schema) may be left out; a record
without it holds the default. The writer offers leaving it out freely where no relation reads
under the field, as its default (with the default's facts, where the relations allow it)
where they read a leaf with a default, and never otherwise (a named restriction:
`factorspec_sdk.relations.restrictions`). Required keys are always written.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Sequence
from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
import pytest
from pydantic import BaseModel, Field, ValidationError

from factorspec_sdk import Places, relation
from factorspec_sdk.drafter.loop import DecodeJob, Decoder, DecoderConfig
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import check_record, spec_from_ir, to_ir
from factorspec_sdk.ir.record import RecordInvalidError
from factorspec_sdk.relations.pydantic_layout import build_layout
from factorspec_sdk.tokens.plan import planner_for
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import enumerate_texts, tiny_tokenizer

TOK = tiny_tokenizer()


def first_choices(model: type[BaseModel]) -> set[str]:
    """The option texts at the record's first choice point (after its forced text)."""
    writer = Writer(compile_spec(model))
    forced, at = writer.forced(writer.start())
    assert forced == "{"
    choice = writer.choices(at)
    assert isinstance(choice, list)
    return {o.text for o in choice}


# ------------------------------------------------------------------ a model that prefers `}`


class Query(BaseModel):
    """BFCL's ``sql.execute`` in small: a required table, optional arguments."""

    table: Literal["users", "orders"]
    conditions: list[Literal["a", "b"]] | None = Field(default=None, max_length=2)
    limit: int = Field(default=10, ge=1, le=100)
    update_values: dict[str, int] | None = None  # a grammar value


def closing_engine() -> ScriptedEngine:
    """A model that puts all its weight on ``}`` and is indifferent to everything else."""
    brace = TOK.encode("}")[0]

    def logits(prefix: Sequence[int]) -> npt.NDArray[np.float32]:
        row = np.zeros(TOK.vocab_size, dtype=np.float32)
        row[brace] = 10.0
        return row

    return ScriptedEngine(TOK, logits)


@pytest.mark.parametrize("speculative", [False, True])
def test_a_model_that_prefers_closing_leaves_the_optional_keys_out(speculative: bool) -> None:
    job = DecodeJob(
        planner_for(compile_spec(Query), TOK), TOK.encode("go"), SamplingParams(max_tokens=200)
    )
    (out,) = Decoder(closing_engine(), DecoderConfig(speculative=speculative)).run([job])
    assert out.error is None, out.error
    data = json.loads(out.text)
    assert set(data) == {"table"}  # the model was not made to invent an argument
    q = Query.model_validate_json(out.text)
    assert (q.conditions, q.limit, q.update_values) == (None, 10, None)  # Pydantic's defaults


def test_required_keys_are_always_written() -> None:
    texts = enumerate_texts(Writer(compile_spec(Bits)))
    assert all('"b"' in t for t in texts)  # required, after an optional key
    assert {json.dumps(json.loads(t), sort_keys=True) for t in texts} == {
        json.dumps(d, sort_keys=True)
        for a in (None, False, True, "left out")
        for b in (False, True)
        for d in [{"b": b} if a == "left out" else {"a": a, "b": b}]
    }
    # the first key is optional: `{` is certain, then `"a": ` or `"b": ` (never `}`)
    assert first_choices(Bits) == {'"a": ', '"b": '}


class Bits(BaseModel):
    a: bool | None = None
    b: bool


def test_optional_keys_in_a_row_are_one_choice_among_the_keys_that_may_come_next() -> None:
    class Row(BaseModel):
        x: bool = False
        y: bool = True
        z: bool | None = None

    assert first_choices(Row) == {'"x": ', '"y": ', '"z": ', "}"}
    texts = enumerate_texts(Writer(compile_spec(Row)))
    assert len(texts) == 3 * 3 * 4  # each key: left out or each value
    for t in texts:  # ", " only between keys written
        assert t == json.dumps(json.loads(t))
        assert Row.model_validate_json(t).model_dump(exclude_unset=True) == json.loads(t)


# ------------------------------------------------------------------ relations and defaults


class AtLeastFour(BaseModel):
    x: int | None = Field(default=None, ge=0, le=9)

    @relation
    def big(self) -> bool:
        return self.x is None or self.x > 3


class Given(BaseModel):
    x: int | None = Field(default=None, ge=0, le=9)

    @relation
    def given(self) -> bool:
        return self.x is not None


def test_a_left_out_none_default_reads_as_none() -> None:
    """``self.x is None`` is the same whether the model wrote ``null`` or left the key out."""
    allowed = enumerate_texts(Writer(compile_spec(AtLeastFour)))
    assert sorted(allowed) == sorted(
        ["{}", '{"x": null}', *(f'{{"x": {n}}}' for n in range(4, 10))]
    )
    AtLeastFour.model_validate_json("{}")
    writer = Writer(compile_spec(Given))
    forced, _ = writer.forced(writer.start())
    assert forced == '{"x": '  # left out is None: the relation forbids it, as it does null
    assert sorted(enumerate_texts(writer)) == sorted(f'{{"x": {n}}}' for n in range(10))
    with pytest.raises(ValidationError):
        Given.model_validate_json("{}")


class Kinded(BaseModel):
    kind: Literal["a", "b"] = "a"
    k: int = Field(ge=0, le=2)

    @relation
    def tie(self) -> bool:
        return (self.kind == "a") == (self.k == 1)


def test_a_left_out_default_commits_its_facts() -> None:
    """Left out, kind is "a": the relation then makes k 1, as if "a" had been written."""
    texts = enumerate_texts(Writer(compile_spec(Kinded)))
    assert sorted(texts) == sorted(
        ['{"kind": "a", "k": 1}', '{"k": 1}', '{"kind": "b", "k": 0}', '{"kind": "b", "k": 2}']
    )
    for t in texts:
        Kinded.model_validate_json(t)
    # the server's record check reads the missing key as the default too
    served = spec_from_ir(to_ir(Kinded))
    check_record(served, '{"k": 1}')
    with pytest.raises(RecordInvalidError):
        check_record(served, '{"k": 0}')


class Labels(BaseModel):
    label: str = Field(default="todo", max_length=6)
    day: dt.date = dt.date(2024, 2, 29)
    when: dt.datetime = dt.datetime(2024, 1, 1, 9, 30)
    took: dt.timedelta = dt.timedelta(minutes=2)
    price: Annotated[float, Places(2)] = Field(default=1.5, ge=0, le=9)
    ref: uuid.UUID = uuid.UUID(int=7)
    k: int = Field(ge=0, le=1)

    @relation
    def rules(self) -> bool:
        return (
            (len(self.label) == 4) == (self.k == 0)
            and self.day.month == 2
            and self.when.hour == 9
            and self.took.seconds < 200
            and self.price < 2
            and self.ref != uuid.UUID(int=8)
        )


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("label", '"todo"'),
        ("day", '"2024-02-29"'),
        ("when", '"2024-01-01T09:30:00"'),
        ("took", '"PT120S"'),
        ("price", "1.5"),
        ("ref", f'"{uuid.UUID(int=7)}"'),
    ],
)
def test_every_leaf_kind_is_left_out_as_its_default(key: str, text: str) -> None:
    """Each default's text is the one the writer writes (its facts then hold exactly)."""
    f = build_layout(Labels).field(key)
    assert (f.optional, f.default) == (True, text)


def test_defaults_of_every_kind_are_left_out_where_the_relations_allow() -> None:
    writer = Writer(compile_spec(Labels))
    forced, at = writer.forced(writer.start())
    assert forced == "{"
    choice = writer.choices(at)
    assert isinstance(choice, list)
    quoted = ["label", "day", "when", "took", "ref"]  # the quote is structure text
    want = [*(f'"{k}": "' for k in quoted), '"price": ', '"k": ']
    assert sorted(o.text for o in choice) == sorted(want)
    (all_left_out,) = [o for o in choice if o.text == '"k": ']
    # each default is feasible; label left out is "todo" (4 characters), so k is 0: certain
    forced, at = writer.forced(all_left_out.state)
    assert (forced, at.done) == ("0}", True)
    Labels.model_validate_json('{"k": 0}')
    with pytest.raises(ValidationError):
        Labels.model_validate_json('{"k": 1}')


@pytest.mark.parametrize(("length", "left_out"), [(4, True), (3, False)])
def test_a_string_default_with_escapes_is_left_out_as_its_value(
    length: int, left_out: bool
) -> None:
    """The default 'a"b' + newline is 4 characters, written with two escapes."""

    class Said(BaseModel):
        text: str = Field(default='a"b\n', max_length=8)

        @relation
        def sized(self) -> bool:
            return len(self.text) == length

    f = build_layout(Said).field("text")
    assert f.default == '"a\\"b\\n"'
    writer = Writer(compile_spec(Said))
    forced, at = writer.forced(writer.start())
    if left_out:
        assert forced == "{"
        choice = writer.choices(at)
        assert isinstance(choice, list) and "}" in {o.text for o in choice}
        Said.model_validate_json("{}")
    else:
        assert forced == '{"text": "'
        with pytest.raises(ValidationError):
            Said.model_validate_json("{}")


def test_a_default_the_relations_forbid_is_never_left_out() -> None:
    class Positive(BaseModel):
        n: int = Field(default=0, ge=0, le=5)

        @relation
        def positive(self) -> bool:
            return self.n > 0

    writer = Writer(compile_spec(Positive))
    assert writer.forced(writer.start())[0] == '{"n": '
    assert sorted(enumerate_texts(writer)) == sorted(f'{{"n": {n}}}' for n in range(1, 6))


# ------------------------------------------------------------------ restrictions


class Basket(BaseModel):
    items: list[bool] = Field(default_factory=list, max_length=2)  # read: always written
    coupon: bool | None = None  # no relation reads it: left out freely
    total: int = Field(ge=0, le=2)

    @relation
    def counted(self) -> bool:
        return self.total == len(self.items)


def test_an_optional_key_relations_read_without_a_usable_default_is_always_written() -> None:
    spec = compile_spec(Basket)
    texts = enumerate_texts(Writer(spec))
    assert all(t.startswith('{"items": ') for t in texts)
    assert any('"coupon"' not in t for t in texts)
    found = {(r.rule, r.path) for r in spec.restrictions()}
    assert ("optional key written", "items") in found
    assert not any(p == "coupon" for _, p in found)
    assert "items: an optional key always written" in spec.describe()


def test_restrictions_name_each_default_bound() -> None:
    class Bounds(BaseModel):
        xs: list[int] = Field(max_length=2)
        ys: list[bool]
        word: str
        n: int = Field(ge=0)

        @relation
        def short(self) -> bool:
            return len(self.word) < 5 and len(self.ys) < 3

    found = {(r.rule, r.path): r for r in compile_spec(Bounds).restrictions()}
    assert set(found) == {
        ("list bound", "ys"),
        ("string bound", "word"),
        ("int digits", "xs[]"),
        ("int digits", "n"),
    }
    assert "max_length" in found["list bound", "ys"].lift
    assert "no le bound" in found["int digits", "n"].what


# ------------------------------------------------------------------ the relation IR


def test_the_ir_carries_optional_keys_and_defaults() -> None:
    ir = to_ir(Kinded)
    kind, k = ir["layout"]["fields"]  # type: ignore[index]
    assert (kind["optional"], kind["default"]) == (True, '"a"')
    assert "optional" not in k and "default" not in k  # a required key as before
    served = spec_from_ir(ir)
    assert served.layout.field("kind") == build_layout(Kinded).field("kind")  # type: ignore[union-attr]
    local = enumerate_texts(Writer(compile_spec(Kinded)))
    assert sorted(enumerate_texts(Writer(served))) == sorted(local)
    # a document from before optional keys: every key written, as it meant then
    for f in ir["layout"]["fields"]:  # type: ignore[index]
        f.pop("optional", None)
        f.pop("default", None)
    old = enumerate_texts(Writer(spec_from_ir(ir)))
    assert sorted(old) == sorted(t for t in local if '"kind"' in t)


def test_the_pydantic_ir_and_the_json_schema_path_agree_on_optional_keys() -> None:
    """A model sent as its IR (``x-factorspec``) or as its plain JSON Schema: the same keys."""
    from factorspec_sdk import plain_json_schema
    from factorspec_sdk.ir import ir_from_json_schema

    def optional(ir: dict[str, object]) -> dict[str, bool]:
        layout = ir["layout"]
        assert isinstance(layout, dict)
        return {f["key"]: f.get("optional", False) for f in layout["fields"]}

    def closed(s: object) -> object:  # a Pydantic model writes its declared keys only
        if isinstance(s, list):
            return [closed(x) for x in s]
        if not isinstance(s, dict):
            return s
        out = {k: closed(v) for k, v in s.items()}
        if "properties" in s:
            out["additionalProperties"] = False
        return out

    for model in (Query, Bits, Kinded, AtLeastFour):
        schema = closed(plain_json_schema(model))
        assert isinstance(schema, dict)
        via_schema = optional(ir_from_json_schema(schema))
        assert via_schema == optional(to_ir(model)), model.__name__
    assert optional(to_ir(Query)) == {
        "table": False,
        "conditions": True,
        "limit": True,
        "update_values": True,
    }
