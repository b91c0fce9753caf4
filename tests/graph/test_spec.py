"""Compiled specs: unsat cores, list bounds, contexts, str domains, components, the examples."""

from __future__ import annotations

import random
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from examples.invoice import Invoice, InvoiceContext
from examples.meeting import SAMPLE_CONTEXT as MEETING_CONTEXT
from examples.meeting import Meeting
from factorspec_sdk import relation
from factorspec_sdk.domains.trip import Itinerary, generate_problem, itinerary_record
from factorspec_sdk.errors import ContextError, SpecError, UnsatisfiableSpecError
from factorspec_sdk.graph import AtLeast, compile_spec
from factorspec_sdk.graph.compiled import Fact
from tests.relations.helpers import compiled_truths


class Clash(BaseModel):
    a: int = Field(ge=0, le=10)
    b: int = Field(ge=0, le=10)
    c: int = Field(ge=0, le=10)

    @relation
    def a_big(self) -> bool:
        return self.a > 5

    @relation
    def a_small(self) -> bool:
        return self.a < 3

    @relation
    def innocent(self) -> bool:
        return self.b + self.c == 4


def test_unsat_core_names_the_clashing_relations_only() -> None:
    with pytest.raises(UnsatisfiableSpecError) as err:
        compile_spec(Clash)
    assert set(err.value.core) >= {"a_big", "a_small"}
    assert "innocent" not in err.value.core
    assert all("b" not in name.split() for name in err.value.core)


def test_unsat_core_with_bounds() -> None:
    class Bounded(BaseModel):
        a: int = Field(ge=0, le=3)

        @relation
        def big(self) -> bool:
            return self.a >= 7

    with pytest.raises(UnsatisfiableSpecError) as err:
        compile_spec(Bounded)
    assert sorted(err.value.core) == ["big", "bounds of a"]


def test_list_needs_more_than_default_bound() -> None:
    class Long(BaseModel):
        xs: list[int]

        @relation
        def many(self) -> bool:
            return len(self.xs) == 20

    with pytest.raises(SpecError) as err:
        compile_spec(Long)
    assert not isinstance(err.value, UnsatisfiableSpecError)
    assert "needs more than 16 items" in str(err.value)
    assert "max_length" in str(err.value)


def test_schema_bound_too_small_is_unsat() -> None:
    class Long(BaseModel):
        xs: list[int] = Field(max_length=4)

        @relation
        def many(self) -> bool:
            return len(self.xs) >= 5

    with pytest.raises(UnsatisfiableSpecError) as err:
        compile_spec(Long)
    assert "length bounds of xs" in err.value.core


@pytest.mark.parametrize("total", [0, 2, 5, 9, 12])
def test_lists_of_one_component_get_their_longest_lengths(total: int) -> None:
    """Several lists tied by one relation: each bound is its own longest, by brute force."""

    class Ctx(BaseModel):
        total: int

    class M(BaseModel):
        xs: list[int] = Field(max_length=6)
        ys: list[int] = Field(max_length=6)
        zs: list[int] = Field(max_length=6)

        @relation
        def shared(self, ctx: Ctx) -> bool:
            return (
                len(self.xs) + 2 * len(self.ys) <= ctx.total
                and len(self.zs) >= len(self.ys)
                and len(self.zs) <= len(self.xs) + 1
            )

    sizes = [
        (x, y, z)
        for x in range(7)
        for y in range(7)
        for z in range(7)
        if x + 2 * y <= total and z >= y and z <= x + 1
    ]
    spec = compile_spec(M, Ctx(total=total))
    for k, name in enumerate(("xs", "ys", "zs")):
        assert spec.max_length((name,)) == max(size[k] for size in sizes), name


def test_list_bound_tightened_by_relations() -> None:
    class Ctx(BaseModel):
        names: list[str]

    class M(BaseModel):
        xs: list[str]
        ys: list[int]

        @relation
        def one_each(self, ctx: Ctx) -> bool:
            return len(self.xs) == len(ctx.names) and all(x in ctx.names for x in self.xs)

        @relation
        def ys_short(self) -> bool:
            return len(self.ys) <= 3

    spec = compile_spec(M, Ctx(names=["a", "b", "c"]))
    assert spec.max_length(("xs",)) == 3
    assert spec.max_length(("ys",)) == 3
    assert spec.variable_for(("xs", 2)) == "xs[2]"
    assert spec.variable_for(("xs", 3)) is None
    assert spec.length_variable(("xs",)) == "len(xs)"
    assert "xs: at most 3 items" in spec.describe()


def test_context_errors() -> None:
    with pytest.raises(ContextError):
        compile_spec(Meeting)

    class Wrong(BaseModel):
        other: int = 1

    with pytest.raises(ContextError) as err:
        compile_spec(Meeting, Wrong())
    assert "has no attribute" in str(err.value)


def test_a_free_string_read_by_value_needs_no_finite_domain() -> None:
    """``name != "x"`` leaves every other text: the code `OTHER_CODE` is feasible."""
    from factorspec_sdk.relations.compiler import OTHER_TEXT

    class M(BaseModel):
        name: str
        other: str

        @relation
        def differ(self) -> bool:
            return self.name != "x"

    oracle = compile_spec(M).new_oracle()
    assert oracle.feasible_values((), "name") == sorted([OTHER_TEXT])
    assert not oracle.feasible((("name", "x"),))
    assert oracle.feasible((("name", "y"),))


def test_independent_components_and_unconstrained_leaves() -> None:
    class M(BaseModel):
        a: int = Field(ge=0, le=9)
        b: int = Field(ge=0, le=9)
        c: int = Field(ge=0, le=9)
        d: int = Field(ge=0, le=9)
        free: int = 0

        @relation
        def ab(self) -> bool:
            return self.a + self.b == 9

        @relation
        def cd(self) -> bool:
            return self.c * self.d == 12

    spec = compile_spec(M)
    assert len(spec.components) == 2
    assert spec.variable_for(("free",)) is None
    o = spec.new_oracle()
    assert o.feasible_values((("a", 4),), "b") == [5]
    assert o.feasible_values((("a", 4),), "c") == [2, 3, 4, 6]
    assert o.feasible((("a", 4), ("c", 5))) is False
    assert o.feasible_values((("a", 4), ("c", 5)), "b") == []


def test_compile_cache_per_context_value() -> None:
    p1 = generate_problem(4, 3)
    p2 = generate_problem(4, 3)
    assert compile_spec(Itinerary, p1) is compile_spec(Itinerary, p2)
    assert compile_spec(Itinerary, generate_problem(4, 4)) is not compile_spec(Itinerary, p1)


def test_enum_and_optional_variables() -> None:
    class M(BaseModel):
        kind: Literal["a", "b"]
        note: int | None = Field(default=None, ge=0, le=5)

        @relation
        def note_for_a(self) -> bool:
            return (self.kind == "a") == (self.note is not None and self.note > 2)

    spec = compile_spec(M)
    assert spec.null_variable(("note",)) == "null(note)"
    o = spec.new_oracle()
    assert o.feasible_values((("kind", "b"),), "null(note)") == [False, True]
    assert o.feasible_values((("kind", "a"),), "null(note)") == [False]
    assert o.feasible_values((("kind", "a"), ("null(note)", False)), "note") == [3, 4, 5]


# --- the examples ------------------------------------------------------------------------


def _mutate(record: dict[str, Any], rnd: random.Random, cities: list[str]) -> dict[str, Any]:
    rec = {
        "stays": [dict(s) for s in record["stays"]],
        "flights": [dict(f) for f in record["flights"]],
    }
    for _ in range(rnd.randint(0, 3)):
        kind = rnd.random()
        if kind < 0.3 and rec["stays"]:
            s = rnd.choice(rec["stays"])
            s[rnd.choice(["first_day", "last_day"])] += rnd.choice([-1, 1])
        elif kind < 0.5 and rec["stays"]:
            rnd.choice(rec["stays"])["city"] = rnd.choice([*cities, "Atlantis"])
        elif kind < 0.6 and rec["stays"]:
            rec["stays"].pop(rnd.randrange(len(rec["stays"])))
        elif kind < 0.7 and rec["flights"]:
            rec["flights"].pop()
        elif kind < 0.8 and rec["flights"]:
            rnd.choice(rec["flights"])["origin"] = rnd.choice(cities)
        elif kind < 0.9 and len(rec["stays"]) > 1:
            i = rnd.randrange(len(rec["stays"]) - 1)
            a, b = rec["stays"][i], rec["stays"][i + 1]
            a["city"], b["city"] = b["city"], a["city"]
        else:
            rec["stays"] = rec["stays"][: rnd.randint(0, len(rec["stays"]))]
    for s in rec["stays"]:
        s["first_day"] = min(max(s["first_day"], 1), 60)
        s["last_day"] = min(max(s["last_day"], 1), 60)
    for f in rec["flights"]:
        f["day"] = min(max(f["day"], 1), 60)
    return rec


def test_itinerary_differential() -> None:
    rnd = random.Random(7)
    seen: dict[str, set[bool]] = {}
    for seed in range(6):
        problem = generate_problem(3 + seed, seed)
        golden = itinerary_record(problem.golden)
        for k in range(25):
            record = golden if k == 0 else _mutate(golden, rnd, problem.cities)
            for name, (py, compiled) in compiled_truths(Itinerary, problem, record).items():
                assert py == compiled, (name, record)
                seen.setdefault(name, set()).add(py)
    assert all(v == {True, False} for k, v in seen.items() if k != "events_covered"), seen


def test_invoice_and_meeting_differential() -> None:
    rnd = random.Random(3)
    ctx = InvoiceContext(tax_rate_percent=8, max_items=3)
    for _ in range(60):
        items = []
        for _ in range(rnd.randint(1, 4)):
            q, p = rnd.randint(1, 5), rnd.randint(1, 300)
            amount = q * p if rnd.random() < 0.8 else q * p + 1
            items.append(
                {"description": "x", "quantity": q, "unit_price_cents": p, "amount_cents": amount}
            )
        sub = sum(i["amount_cents"] for i in items) + (rnd.random() < 0.2)
        tax = sub * 8 // 100 + (rnd.random() < 0.2)
        record = {"items": items, "subtotal_cents": sub, "tax_cents": tax, "total_cents": sub + tax}
        for name, (py, compiled) in compiled_truths(Invoice, ctx, record).items():
            assert py == compiled, (name, record)
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
    for _ in range(100):
        start = rnd.randint(0, 22)
        record = {
            "day": rnd.choice(days),
            "start_hour": start,
            "end_hour": start + rnd.randint(0, 2),
        }
        for name, (py, compiled) in compiled_truths(Meeting, MEETING_CONTEXT, record).items():
            assert py == compiled, (name, record)


def test_invoice_nonlinear_oracle() -> None:
    spec = compile_spec(Invoice, InvoiceContext(tax_rate_percent=8, max_items=5))
    o = spec.new_oracle()
    base: tuple[Fact, ...] = (("len(items)", AtLeast(1)), ("items[0].quantity", 3))
    det = o.determined((*base, ("items[0].unit_price_cents", 450)))
    assert det["items[0].amount_cents"][0] == 1350
    assert "amount_is_quantity_times_price (items[0])" in det["items[0].amount_cents"][1]
    digits = o.next_digits(base, "items[0].amount_cents", "1")
    assert "" not in digits  # 1 is not a multiple of 3
    assert o.next_digits(base, "items[0].amount_cents", "") == frozenset("123456789")
    full = (
        *base,
        ("items[0].unit_price_cents", 450),
        ("items[0].amount_cents", 1350),
        ("len(items)", 1),
    )
    det2 = o.determined(full)
    assert det2["subtotal_cents"][0] == 1350
    assert det2["tax_cents"][0] == 108
    assert det2["total_cents"][0] == 1458


def test_itinerary_writer_flow() -> None:
    """Walk the golden plan as the writer would; every golden value stays feasible.

    (Query speed is measured by ``python -m factorspec_sdk.bench.oracle_bench``, not here: a
    timed assertion fails by chance on a busy machine.)
    """
    problem = generate_problem(10, 5, unique=False)
    spec = compile_spec(Itinerary, problem)
    assert spec.max_length(("stays",)) == 10
    assert spec.max_length(("flights",)) == 9
    o = spec.new_oracle()
    record = itinerary_record(problem.golden)
    facts: list[Fact] = []
    for i, stay in enumerate(record["stays"]):
        facts.append(("len(stays)", AtLeast(i + 1)))
        cities = o.feasible_values(tuple(facts), f"stays[{i}].city")
        assert cities is not None and stay["city"] in cities
        facts.append((f"stays[{i}].city", stay["city"]))
        for key in ("first_day", "last_day"):
            var = f"stays[{i}].{key}"
            det = o.determined(tuple(facts))
            if var in det:
                assert det[var][0] == stay[key]
            text = str(stay[key])
            for k in range(len(text) + 1):
                allowed = o.next_digits(tuple(facts), var, text[:k])
                assert (text[k] if k < len(text) else "") in allowed
            facts.append((var, stay[key]))
    assert o.feasible_values(tuple(facts), "len(stays)") == [10]
    facts.append(("len(stays)", 10))
    for i, flight in enumerate(record["flights"]):
        facts.append(("len(flights)", AtLeast(i + 1)))
        for key in ("day", "origin", "destination"):
            var = f"flights[{i}].{key}"
            assert o.feasible_values(tuple(facts), var) == [flight[key]]
            facts.append((var, flight[key]))
    facts.append(("len(flights)", 9))
    assert o.feasible(tuple(facts))


@pytest.mark.parametrize("which", ["trip", "invoice", "meeting"])
def test_the_bound_value_of_every_variable_is_within_its_bound(which: str) -> None:
    from factorspec_sdk.graph.assemble import bound_constraint, bound_value
    from factorspec_sdk.graph.z3raw import TermBuilder, true_under

    if which == "trip":
        spec = compile_spec(Itinerary, generate_problem(4, 1))
    elif which == "invoice":
        spec = compile_spec(Invoice, InvoiceContext(tax_rate_percent=8, max_items=3))
    else:
        spec = compile_spec(Meeting, MEETING_CONTEXT)
    codes = dict(spec.strings.codes)
    with spec.context_lock:
        for name in spec.variables:
            rec = spec.record(name)
            value = bound_value(rec, spec.strings)
            with TermBuilder(rec.term.ctx) as tb:
                bound = bound_constraint(rec, spec.strings, tb)
            if bound is not None:
                assert true_under([bound], [(rec.term, value)]), (name, value)
    assert spec.strings.codes == codes  # nothing interned
