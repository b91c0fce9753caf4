"""The relation IR: model -> IR -> spec behaves exactly as model -> spec."""

from __future__ import annotations

import json
import random
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from examples.invoice import SAMPLE_CONTEXT as INVOICE_CONTEXT
from examples.invoice import Invoice
from examples.meeting import SAMPLE_CONTEXT as MEETING_CONTEXT
from examples.meeting import Meeting
from factorspec_sdk import UnsatisfiableSpecError, relation
from factorspec_sdk.bench.solver_tail import random_facts
from factorspec_sdk.domains.trip import Itinerary, generate_problem
from factorspec_sdk.graph import CompiledSpec, compile_spec
from factorspec_sdk.ir import (
    IR_JSON_SCHEMA,
    IRCompiler,
    IRError,
    RecordInvalidError,
    RelationIR,
    check_record,
    ir_from_json_schema,
    spec_from_ir,
    spec_to_ir,
    to_ir,
)
from tests.helpers import TRIP_CONTEXT, Pick, Trip, sampled_record

CASES: list[tuple[type[BaseModel], object]] = [
    (Pick, None),
    (Trip, TRIP_CONTEXT),
    (Itinerary, generate_problem(4, 7)),
    (Itinerary, generate_problem(7, 3)),
    (Invoice, INVOICE_CONTEXT),
    (Meeting, MEETING_CONTEXT),
]
IDS = ["pick", "trip", "itinerary4", "itinerary7", "invoice", "meeting"]


def roundtrip(model: type[BaseModel], context: object) -> tuple[CompiledSpec, CompiledSpec]:
    ir = to_ir(model, context)
    return compile_spec(model, context), spec_from_ir(json.loads(json.dumps(ir)))


@pytest.mark.parametrize(("model", "context"), CASES, ids=IDS)
def test_same_graph_and_fixpoint(model: type[BaseModel], context: object) -> None:
    ir = to_ir(model, context)
    RelationIR.model_validate(ir)  # matches its own schema models
    orig, back = roundtrip(model, context)
    assert spec_to_ir(back) == ir
    assert dict(back.variables) == dict(orig.variables)
    assert back.factors == orig.factors
    assert back.components == orig.components
    assert back._list_bounds == orig._list_bounds
    assert back.strings.strings == orig.strings.strings


def test_schema_is_generated() -> None:
    assert IR_JSON_SCHEMA["title"] == "FactorSpecRelationIR"
    assert "Apply" in json.dumps(IR_JSON_SCHEMA)


@pytest.mark.parametrize(("model", "context"), CASES[1:5], ids=IDS[1:5])
def test_same_feasible_sets(model: type[BaseModel], context: object) -> None:
    orig, back = roundtrip(model, context)
    o1, o2 = orig.new_oracle(), back.new_oracle()
    rng = random.Random(0)
    names = list(orig.variables)
    for _ in range(40):
        facts = tuple(random_facts(orig, rng))
        assert o1.feasible(facts) == o2.feasible(facts)  # type: ignore[arg-type]
        var = rng.choice(names)
        got1 = o1.feasible_values(facts, var, limit=16)  # type: ignore[arg-type]
        got2 = o2.feasible_values(facts, var, limit=16)  # type: ignore[arg-type]
        assert got1 == got2
    facts = tuple(random_facts(orig, random.Random(5))[:2])
    assert o1.determined(facts) == o2.determined(facts)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "context"), [CASES[0], CASES[1], CASES[5]], ids=[*IDS[:2], "meeting"]
)
def test_same_records_on_scripted_engine(model: type[BaseModel], context: object) -> None:
    orig, back = roundtrip(model, context)
    for seed in range(3):
        text = sampled_record(orig, seed)
        assert sampled_record(back, seed) == text
        model.model_validate_json(text, context=context)
        check_record(back, text)


def test_check_record_rejects_broken_records() -> None:
    _, back = roundtrip(Trip, TRIP_CONTEXT)
    good = sampled_record(back, 1)
    check_record(back, good)
    data = json.loads(good)
    data["legs"][0]["first_day"] = 2  # breaks the chain relation
    with pytest.raises(RecordInvalidError, match="relations"):
        check_record(back, json.dumps(data))
    with pytest.raises(RecordInvalidError, match="schema"):
        check_record(back, json.dumps({"legs": "x"}))
    with pytest.raises(RecordInvalidError, match="JSON"):
        check_record(back, "{")


class U1(BaseModel):
    a: int = Field(ge=0, le=5)
    b: int = Field(ge=0, le=5)
    c: Literal["p", "q"] = "p"

    @relation
    def small_sum(self) -> bool:
        return self.a + self.b <= 3


class U2(U1):
    @relation
    def big_a(self) -> bool:
        return self.a >= 4 and self.c == "q"


class U3(BaseModel):
    a: int = Field(ge=0, le=5)
    b: int = Field(ge=0, le=5)
    c: Literal["p", "q"] = "p"

    @relation
    def big_a(self) -> bool:
        return self.a >= 4 and self.c == "q"


def test_same_unsat_core() -> None:
    with pytest.raises(UnsatisfiableSpecError) as direct:
        compile_spec(U2)
    ir, extra = to_ir(U1), to_ir(U3)
    known = {v["name"] for v in ir["variables"]}  # type: ignore[union-attr]
    assert extra["strings"] == ir["strings"] or not ir["strings"]
    ir["strings"] = extra["strings"]
    ir["variables"] = [*ir["variables"], *(v for v in extra["variables"] if v["name"] not in known)]  # type: ignore[misc, index, union-attr]
    ir["factors"] = [*ir["factors"], *extra["factors"]]  # type: ignore[misc]
    assert not extra["defs"] and not ir["defs"]
    with pytest.raises(UnsatisfiableSpecError) as rebuilt:
        spec_from_ir(ir)
    assert rebuilt.value.core == direct.value.core
    assert "big_a" in direct.value.core


def _pick_ir() -> dict[str, object]:
    return json.loads(json.dumps(to_ir(Pick)))  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda ir: ir.update(factorspec_ir=2), "version"),
        (lambda ir: ir["factors"][0].update(formula={"op": "pow", "args": []}), "Input should be"),
        (lambda ir: ir["factors"][0].update(formula={"var": "nope"}), "unknown variable"),
        (
            lambda ir: ir["factors"][0].update(formula={"op": "add", "args": [{"bool": True}]}),
            "integer",
        ),
        (lambda ir: ir["factors"][0].update(formula={"def": 0}), "def 0"),
        (lambda ir: ir["factors"][0].update(formula={"int": 10**40}), "constant"),
        (lambda ir: ir["factors"][0].update(formula={"op": "not", "args": []}), "takes 1"),
        (lambda ir: ir["variables"][0].update(name="zzz"), "named after its path"),
        (lambda ir: ir["variables"][0].update(kind="str"), "kind"),
        (lambda ir: ir["layout"]["fields"][1]["node"].update(ge=5, le=1), "empty range"),
        (lambda ir: ir.update(variables=ir["variables"] * 2), "twice"),
        (lambda ir: ir["factors"].append(ir["factors"][0]), "repeats"),
        (lambda ir: ir["layout"]["fields"][1].update(default="1"), "optional field only"),
        (
            lambda ir: ir["layout"]["fields"][1].update(optional=True, default="7"),
            "not a value of the field",  # n is 0..3
        ),
        (
            lambda ir: ir["layout"]["fields"][2].update(optional=True, default="null"),
            "not a value of the field",  # big is not nullable
        ),
        (
            lambda ir: ir["layout"]["fields"][0].update(optional=True, default='"\\u0078"'),
            "not the text the writer writes",  # "x", spelled with an escape
        ),
        (lambda ir: ir["layout"]["fields"][1].update(optional=True, default="{"), "not JSON"),
    ],
)
def test_malformed_ir_is_an_ir_error(mutate: object, message: str) -> None:
    ir = _pick_ir()
    mutate(ir)  # type: ignore[operator]
    with pytest.raises(IRError, match=message):
        spec_from_ir(ir)


def test_limits() -> None:
    ir = _pick_ir()
    deep: dict[str, object] = {"bool": True}
    for _ in range(80):
        deep = {"op": "not", "args": [deep]}
    ir["factors"][0]["formula"] = deep  # type: ignore[index]
    with pytest.raises(IRError, match="deeper"):
        spec_from_ir(ir)
    big = {
        "factorspec_ir": 1,
        "layout": {
            "type": "object",
            "fields": [
                {
                    "name": "xs",
                    "key": "xs",
                    "node": {
                        "type": "list",
                        "max_length": 250,
                        "item": {
                            "type": "list",
                            "max_length": 250,
                            "item": {"type": "leaf", "kind": "int"},
                        },
                    },
                }
            ],
        },
    }
    with pytest.raises(IRError, match="unrolled"):
        spec_from_ir(big)


def closed(schema: object) -> object:
    """``schema`` with ``additionalProperties: false`` on every object that has properties."""
    if isinstance(schema, list):
        return [closed(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) for k, v in schema.items()}
    if "properties" in out:
        out.setdefault("additionalProperties", False)
    return out


def test_json_schema_to_ir() -> None:
    # Pydantic leaves additionalProperties unset: a record may hold keys the model does not
    # declare, so the writer does not lay it out, and it is one grammar value
    assert ir_from_json_schema(Itinerary.model_json_schema())["layout"]["type"] == "grammar"  # type: ignore[index]
    ir = ir_from_json_schema(closed(Itinerary.model_json_schema()), name="Itinerary")
    spec = spec_from_ir(ir)
    assert [f.key for f in spec.layout.fields] == ["stays", "flights"]
    assert not spec.factors
    text = sampled_record(spec, 0)
    check_record(spec, text)
    number = ir_from_json_schema(
        {"type": "object", "properties": {"x": {"type": "number"}}, "additionalProperties": False}
    )
    assert number["layout"]["fields"][0]["node"] == {
        "type": "grammar",
        "schema": {"type": "number"},
    }
    for bad, msg in [
        ({"$defs": {"A": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"}, "cycle of"),
        (
            {
                "type": "object",
                "properties": {"x": {"oneOf": [{"type": "number"}, {"type": "integer"}]}},
            },
            "coerce_one_of",
        ),
    ]:
        with pytest.raises(IRError, match=msg):
            ir_from_json_schema(bad)


def test_the_specs_of_one_document_share_what_an_oracle_found_of_their_components(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`CheckedIR.traits`: the first spec's oracle finds whether each component is linear
    and tunable (a walk of its constraints); the next spec rebuilt from the same document
    (a served trip asked again once its spec left the compiler's ``specs``) has them, and
    its oracle walks nothing."""
    from factorspec_sdk.graph import component_solver

    walks: list[int] = []
    real = component_solver.largest_divisor

    def counted(formulas: object) -> int:
        walks.append(1)
        return real(formulas)  # type: ignore[arg-type]

    monkeypatch.setattr(component_solver, "largest_divisor", counted)
    compiler = IRCompiler(max_specs=0)  # every call rebuilds the spec
    doc = to_ir(Itinerary, generate_problem(3, 5))
    first = compiler.spec_from_ir(doc)
    for index in range(len(first.components)):
        assert first.new_oracle()._solver(index).solver is not None
    assert walks
    assert all(first.component(i).traits.linear is not None for i in range(len(first.components)))
    done = len(walks)
    second = compiler.spec_from_ir(doc)
    oracle = second.new_oracle()
    for index in range(len(second.components)):
        assert oracle._solver(index).solver is not None
        assert second.component(index).traits is first.component(index).traits
    assert len(walks) == done  # found once for the document
    other = compiler.spec_from_ir(to_ir(Itinerary, generate_problem(3, 6)))
    assert all(other.component(i).traits.linear is None for i in range(len(other.components)))
