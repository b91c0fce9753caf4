"""Relations over unions of models told apart by a tag: compiled exactly, written exactly.

Differential (hypothesis): ``isinstance``, tag comparisons, attribute reads under them (a
field of another branch raises ``AttributeError``: violated), ``Optional`` unions and lists
of unions, against the Python relation on the same record. The writer offers exactly the
feasible branches; a branch the relations fix is certain text; the IR carries unions.
"""

from __future__ import annotations

import json
from types import NoneType
from typing import Annotated, Any, Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import RecordInvalidError, check_record, record_facts, spec_from_ir, to_ir
from factorspec_sdk.relations.decorator import evaluate, relations_of
from factorspec_sdk.relations.layout import GrammarLayout, UnionLayout
from factorspec_sdk.relations.pydantic_layout import build_layout
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import random_record, tiny_tokenizer, walk_to
from tests.relations.helpers import refused
from tests.relations.test_differential import assert_agree

TOK = tiny_tokenizer()


class Calc(BaseModel):
    a: int = Field(ge=-4, le=4)
    kind: Literal["calc"] = "calc"  # not first: the writer writes the tag first anyway
    b: int = Field(ge=-4, le=4)

    @relation
    def ordered(self) -> bool:
        return self.a <= self.b


class Search(BaseModel):
    kind: Literal["search"]
    query: str = Field(max_length=8)
    limit: int = Field(ge=1, le=9)


class Stop(BaseModel):
    kind: Literal["stop"]
    code: int = Field(ge=0, le=2)


Action = Annotated[Calc | Search | Stop, Field(discriminator="kind")]


class Plan(BaseModel):
    n: int = Field(ge=0, le=9)
    action: Action
    fallback: Calc | Search | None = None
    steps: list[Calc | Stop] = Field(max_length=3)

    @relation
    def calc_sums_to_n(self) -> bool:
        return not isinstance(self.action, Calc) or self.action.a + self.action.b == self.n

    @relation
    def search_limit(self) -> bool:
        return self.action.kind != "search" or self.action.limit == self.n

    @relation
    def stop_code(self) -> bool:
        return self.action.kind != "stop" or self.action.code < 2

    @relation
    def unguarded(self) -> bool:
        return self.n != 7 or self.action.code == 0  # AttributeError unless a Stop: violated

    @relation
    def fallback_differs(self) -> bool:
        return self.fallback is None or self.fallback.kind != self.action.kind

    @relation
    def fallback_type(self) -> bool:
        return isinstance(self.fallback, (Search, NoneType)) or self.n > 3

    @relation
    def steps_end_with_stop(self) -> bool:
        return len(self.steps) == 0 or isinstance(self.steps[-1], Stop)

    @relation
    def calc_steps(self) -> bool:
        return sum(s.a for s in self.steps if isinstance(s, Calc)) <= self.n


_CALC = st.builds(lambda a, d: Calc(a=a, b=min(4, a + d)), st.integers(-4, 4), st.integers(0, 3))
_SEARCH = st.builds(
    lambda q, k: Search(kind="search", query=q, limit=k),
    st.sampled_from(["", "x"]),
    st.integers(1, 9),
)
_STOP = st.builds(lambda c: Stop(kind="stop", code=c), st.integers(0, 2))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    n=st.integers(0, 9),
    action=st.one_of(_CALC, _SEARCH, _STOP),
    fallback=st.one_of(st.none(), _CALC, _SEARCH),
    steps=st.lists(st.one_of(_CALC, _STOP), max_size=3),
)
def test_compiled_union_relations_agree_with_python(
    n: int, action: BaseModel, fallback: BaseModel | None, steps: list[BaseModel]
) -> None:
    data: dict[str, Any] = {"n": n, "action": action, "fallback": fallback, "steps": steps}
    assert_agree(Plan, None, data)


def test_every_union_relation_is_seen_both_true_and_false() -> None:
    seen: dict[str, set[bool]] = {}
    calc, search, stop = (
        Calc(a=1, b=2),
        Search(kind="search", query="", limit=3),
        Stop(kind="stop", code=1),
    )
    for n in (0, 3, 5, 7):
        for action in (calc, search, stop, Stop(kind="stop", code=2)):
            for fallback in (None, calc, search):
                for steps in ([], [calc], [calc, stop], [Calc(a=4, b=4), stop]):
                    data = {"n": n, "action": action, "fallback": fallback, "steps": steps}
                    assert_agree(Plan, None, data, seen)
    one_sided = {name for name, truths in seen.items() if truths != {True, False}}
    assert one_sided == set()


def test_the_layout_writes_the_tag_first_and_keeps_untagged_unions_as_grammar() -> None:
    class Untagged(BaseModel):
        x: int

    class Other(BaseModel):
        y: int

    class Holder(BaseModel):
        plan: Plan
        loose: Untagged | Other

        @relation
        def reads(self) -> bool:
            return self.plan.n >= 0 and self.loose is not None

    top = build_layout(Holder)
    plan = top.field("plan").node
    assert not isinstance(plan, GrammarLayout)
    action = plan.field("action").node  # type: ignore[union-attr]
    assert isinstance(action, UnionLayout) and action.tag == "kind"
    assert [b.fields[0].name for b in action.branches] == ["kind", "kind", "kind"]
    assert isinstance(top.field("loose").node, GrammarLayout)  # no tag: the grammar's


class Box(BaseModel):
    """A union no relation of its holder reads, whose ``Calc`` branch has a relation."""

    item: Annotated[Calc | Stop, Field(discriminator="kind")]
    items: list[Calc | Search] = Field(max_length=3)


def test_relations_inside_an_unread_union_are_laid_out_and_hold() -> None:
    """Relations inside a union's models make it the writer's, even when nothing reads it."""
    top = build_layout(Box)
    assert isinstance(top.field("item").node, UnionLayout)
    spec = compile_spec(Box)
    assert any(
        name.startswith("ordered (item<Calc>)")
        for name in spec.relations_mentioning("item<Calc>.a")
    )
    planner = Planner(Writer(spec), TOK)
    rng = np.random.default_rng(1)
    calcs = 0
    for _ in range(20):
        box = Box.model_validate_json(random_record(planner, TOK, rng))
        for calc in [box.item, *box.items]:
            if isinstance(calc, Calc):
                calcs += 1
                assert calc.a <= calc.b
    assert calcs > 5


def test_relations_a_grammar_value_would_drop_are_refused() -> None:
    """An untagged union (or a recursive model) with relations inside cannot be written."""
    from factorspec_sdk.errors import UnsupportedFieldTypeError

    class Loose(BaseModel):
        item: Calc | int

    with pytest.raises(UnsupportedFieldTypeError, match="Calc in it has relations"):
        build_layout(Loose)


@pytest.mark.parametrize(
    ("body", "construct"),
    [
        ("isinstance(self.n, int)", "isinstance() of a field value"),
        ("self.action.nothing == 1", "attribute that is not a field"),
        ("isinstance(self.action, self.n)", "call to isinstance()"),
    ],
)
def test_unsupported_union_constructs_are_refused_with_place(body: str, construct: str) -> None:
    err = refused(Plan, body, "/tmp/factorspec_refused_unions.py")
    assert err.construct == construct, str(err)
    assert err.relation.endswith("Bad.bad") and err.lineno == 7


# ------------------------------------------------------------------ the writer


def _holds(record: Plan) -> bool:
    objs: list[BaseModel] = [record, record.action, *record.steps]
    if record.fallback is not None:
        objs.append(record.fallback)
    try:
        return all(evaluate(r, o, None) for o in objs for r in relations_of(type(o)))
    except Exception:
        return False


def test_random_walks_write_only_valid_records() -> None:
    planner = Planner(Writer(compile_spec(Plan)), TOK)
    rng = np.random.default_rng(0)
    kinds: set[str] = set()
    for _ in range(20):
        plan = Plan.model_validate_json(random_record(planner, TOK, rng))
        assert _holds(plan), plan
        kinds |= {plan.action.kind, plan.fallback.kind if plan.fallback else "none"}
    assert kinds == {"calc", "search", "stop", "none"}


def test_the_branches_offered_are_exactly_the_feasible_ones() -> None:
    writer = Writer(compile_spec(Plan))
    state, rest = walk_to(writer, '{"n": 3, "action": ')
    assert rest == ""
    choice = writer.choices(state)
    assert isinstance(choice, list)
    assert sorted(o.text for o in choice) == [
        '{"kind": "calc", "a": ',
        '{"kind": "search", "query": "',
        '{"kind": "stop", "code": ',
    ]


def test_a_branch_the_relations_fix_is_certain_text() -> None:
    """n = 7: only a Stop has a ``code`` (``unguarded``), and only code 0 passes."""
    writer = Writer(compile_spec(Plan))
    state, rest = walk_to(writer, '{"n": 7')
    assert rest == "7"  # n's options carry the certain text after them
    choice = writer.choices(state)
    assert isinstance(choice, list)
    (seven,) = [o for o in choice if o.text.startswith("7")]
    forced, at = writer.forced(seven.state)
    assert seven.text + forced == '7, "action": {"kind": "stop", "code": 0}'
    # then the optional fallback: written, or left out (its default, None) before steps
    keys = writer.choices(at)
    assert isinstance(keys, list)
    assert sorted(o.text for o in keys) == [', "fallback": ', ', "steps": [']
    (three,) = [o for o in choice if o.text.startswith("3")]
    assert writer.forced(three.state)[0] == ""  # three branches are feasible: a choice


# ------------------------------------------------------------------ the IR and the server


def test_the_relation_ir_round_trips_unions() -> None:
    spec = compile_spec(Plan)
    ir = to_ir(Plan)
    action = next(f["node"] for f in ir["layout"]["fields"] if f["name"] == "action")
    assert action["type"] == "union" and action["tag"] == "kind"
    served = spec_from_ir(ir)
    assert {f.name for f in served.factors} == {f.name for f in spec.factors}
    assert served.variables["branch(action)"].kind == "int"
    good = {
        "n": 3,
        "action": {"kind": "calc", "a": 1, "b": 2},
        "fallback": {"kind": "search", "query": "x", "limit": 2},
        "steps": [{"kind": "stop", "code": 1}],
    }
    facts = record_facts(served, good)
    assert ("branch(action)", 0) in facts and ("action<Calc>.a", 1) in facts
    assert not any(name.startswith("action<Search>") for name, _ in facts)
    check_record(served, json.dumps(good))
    for bad in (
        {**good, "n": 4},  # 1 + 2 != 4
        {**good, "fallback": {"kind": "calc", "a": 0, "b": 0}},  # same kind as the action
        {**good, "action": {"kind": "find", "a": 1, "b": 2}},  # no such branch
        {**good, "n": 7},  # not a Stop: AttributeError
    ):
        with pytest.raises(RecordInvalidError):
            check_record(served, json.dumps(bad))
    planner = Planner(Writer(served), TOK)
    rng = np.random.default_rng(1)
    for _ in range(5):
        assert _holds(Plan.model_validate_json(random_record(planner, TOK, rng)))
