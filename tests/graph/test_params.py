"""Context shapes: a context's ints bound into its shape's lowering give the spec a compile would.

`compile_spec` lowers a context shape once with its ints as Z3 parameters and binds later
contexts of that shape (`factorspec_sdk.graph.params`). These tests hold the bound specs to
the specs compiled from the model (same variables and components, same oracle answers on
random facts, same records decoded), check that a lowering that reads a parameter's value
in Python is declined, and that errors are the compile's own.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import pytest
import z3
from pydantic import BaseModel, Field

from examples.booking import SAMPLE_CONTEXT as BOOKING_CONTEXT
from examples.booking import Booking, HotelCalendar, later_season
from examples.invoice import Invoice, InvoiceContext
from examples.meeting import SAMPLE_CONTEXT as MEETING_CONTEXT
from examples.meeting import Meeting
from factorspec_sdk import UnsatisfiableSpecError, distinct, relation
from factorspec_sdk.bench.solver_tail import random_facts
from factorspec_sdk.domains.trip import Itinerary, generate_problem, with_stays
from factorspec_sdk.domains.trip_dates import DatedItinerary, dated_problem
from factorspec_sdk.graph import (
    DEFAULT_SPEC_COMPILER,
    CompiledSpec,
    clear_spec_caches,
    compile_spec,
    params,
)
from factorspec_sdk.relations.decorator import relations_of
from tests.helpers import sampled_record
from tests.relations.helpers import compiled_truths

FORM_STATS = DEFAULT_SPEC_COMPILER.form_stats  # the shape tier of the module-level compile_spec


@pytest.fixture(autouse=True)
def _cold_caches() -> Iterator[None]:
    clear_spec_caches()
    yield
    clear_spec_caches()


# --------------------------------------------------------------------------- shapes


@dataclass(frozen=True)
class Window:
    start: int
    end: int


class Ctx(BaseModel):
    lo: int
    hi: int
    weights: dict[str, int]
    sizes: list[int]
    windows: list[Window] = Field(default_factory=list)
    name: str = "x"
    strict: bool = False
    rate: float = 0.5
    ids: frozenset[int] = frozenset()


def ctx(lo: int = 0, hi: int = 5, **kw: object) -> Ctx:
    base: dict[str, object] = {
        "lo": lo,
        "hi": hi,
        "weights": {"a": 1, "b": 2, "c": 3},
        "sizes": [1, 2, 3],
    }
    return Ctx.model_validate({**base, **kw})


def test_shape_keeps_everything_but_the_ints() -> None:
    s1, v1 = params.split_context(ctx(0, 5, windows=[Window(1, 2)]))
    s2, v2 = params.split_context(
        ctx(3, 9, weights={"a": 7, "b": 0, "c": 3}, windows=[Window(4, 4)])
    )
    assert s1 == s2
    assert v1 == (0, 5, 1, 2, 3, 1, 2, 3, 1, 2)
    assert v2 == (3, 9, 7, 0, 3, 1, 2, 3, 4, 4)
    for other in (
        ctx(name="y"),  # a str
        ctx(strict=True),  # a bool is not a slot: branches may differ
        ctx(rate=0.25),  # a float
        ctx(sizes=[1, 2]),  # a list's length
        ctx(weights={"a": 1, "b": 2, "z": 3}),  # a dict key
        ctx(ids=frozenset({1})),  # set elements are not slots
    ):
        assert params.split_context(other)[0] != s1
    assert params.split_context(None) == (("NoneType", None), ())
    assert params.split_context(7) == (("int-slot",), (7,))
    day = dt.date(2024, 2, 29)
    assert params.split_context([day, 3]) == (
        ("list", (("date-slot",), ("int-slot",))),
        (day.toordinal(), 3),
    )
    moment = dt.datetime(2024, 2, 29, 12)  # a datetime is not a slot
    assert params.split_context(moment)[1] == ()
    assert params.split_context(moment)[0] != params.split_context(moment.replace(hour=13))[0]


def test_unwalkable_context_is_unfreezable() -> None:
    with pytest.raises(params.Unfreezable):
        params.split_context(object())
    nested: list[object] = []
    for _ in range(30):
        nested = [nested]
    with pytest.raises(params.Unfreezable):
        params.split_context(nested)


def test_with_parameters_copies_and_leaves_the_context_alone() -> None:
    c = ctx(2, 7, windows=[Window(1, 3)])
    ps = params.parameters(len(params.split_context(c)[1]))
    p = params.with_parameters(c, ps)
    assert isinstance(p, Ctx)
    assert p.lo.eq(ps[0])  # type: ignore[attr-defined]
    assert p.weights["b"].eq(ps[3])  # type: ignore[attr-defined]
    assert p.windows[0].end.eq(ps[9])  # type: ignore[attr-defined]
    assert p.name == "x" and p.ids == frozenset()
    assert (c.lo, c.weights["b"], c.windows[0].end) == (2, 2, 3)
    with pytest.raises(ValueError, match="slots"):
        params.with_parameters(c, ps[:3])
    with pytest.raises(ValueError, match="slots"):
        params.with_parameters(c, params.parameters(len(ps) + 1))


# --------------------------------------------------------------------------- the guard


def test_guard_raises_on_every_read_of_a_value() -> None:
    (p, q) = params.parameters(2)
    x = z3.Int("x")
    same, four, plus = p == p, p == 4, p + 1  # made by the compiler, say: not guarded here
    reads = [  # this module is not the compiler: its operators on parameters leak too
        lambda: bool(p == 3),
        lambda: bool(plus == q),
        lambda: bool(four),
        lambda: 3 in [p, q],
        lambda: len({p, q}),
        lambda: hash(plus),
        lambda: str(p),
        lambda: f"{p}",
        lambda: int(p),
        lambda: range(p),
        lambda: round(p),
        lambda: p // 2,
        lambda: divmod(p, 2),
        lambda: max([p, q]),
        lambda: p / 2,  # Z3's integer division: Python's would be a float
        lambda: -7 % p,
        lambda: 2**p,
        lambda: p * 0.5,
        lambda: x + p,
    ]
    with params.reading_guarded((p, q)) as guard:
        for read in reads:
            with pytest.raises(params.ParameterLeak):
                read()
        assert bool(same)  # the same term: equal whatever its value
        assert hash(x + 1) == hash(x + 1) and str(x + 1) == "x + 1"
        try:
            bool(four)
        except Exception:  # the compiler's own except clauses
            pytest.fail("a leak must not be an Exception")
        except params.ParameterLeak:
            pass
        assert guard.leak == "truth value"
    assert not bool(p == 3)  # z3py as it was
    assert str(p).startswith("fs!param!")
    with pytest.raises(TypeError):
        int(p)
    assert "__index__" not in vars(z3.ArithRef)
    assert (p / 2).sort() == z3.IntSort()


def test_a_date_parameter_refuses_pythons_comparisons() -> None:
    (p,) = params.parameters(1)
    d = params.ParamDate(p)
    assert d.e.eq(p) and d.path is None
    other = dt.date(2024, 1, 1)
    for read in (
        lambda: d == other,
        lambda: d != other,
        lambda: d < other,
        lambda: other >= d,
        lambda: hash(d),
        lambda: str(d),
        lambda: f"{d}",
        lambda: other in [d],
        lambda: sorted([d, other]),
    ):
        with pytest.raises(params.ParameterLeak):
            read()
    c = params.with_parameters({"start": other, "n": 2}, params.parameters(2))
    assert isinstance(c, dict) and isinstance(c["start"], params.ParamDate)


def test_guard_is_for_its_own_thread() -> None:
    (p,) = params.parameters(1)
    seen: list[bool] = []
    with params.reading_guarded((p,)):
        t = threading.Thread(target=lambda: seen.append(bool(p == 3)))
        t.start()
        t.join()
    assert seen == [False]


# --------------------------------------------------------------------------- bound = compiled


class Rec(BaseModel):
    n: int = Field(ge=-6, le=6)
    m: int = Field(ge=-6, le=6)
    tag: Literal["a", "b", "c"]
    xs: list[int] = Field(max_length=3)


class Bounds(Rec):
    @relation
    def between(self, c: Ctx) -> bool:
        return c.lo <= self.n <= c.hi and len(self.xs) <= c.hi

    @relation
    def weight(self, c: Ctx) -> bool:
        return c.weights[self.tag] == self.m or self.m == c.sizes[0] * self.n


class Arith(Rec):
    @relation
    def sums(self, c: Ctx) -> bool:
        return sum(self.xs) + sum(c.sizes) == self.n + c.hi

    @relation
    def divides(self, c: Ctx) -> bool:
        return c.lo == 0 or (self.m // c.lo == self.n % c.lo)


class Lookup(Rec):
    @relation
    def member(self, c: Ctx) -> bool:
        return self.n in c.sizes and c.sizes[self.m] > c.lo

    @relation
    def windows(self, c: Ctx) -> bool:
        return any(w.start <= self.m <= w.end for w in c.windows)


class Members(Rec):  # a constant in constants: the compiler's own `in`, symbolic
    @relation
    def constant_member(self, c: Ctx) -> bool:
        return c.lo in c.sizes or self.n == 0


class Leaks(Rec):  # max() of constants: Python compares them
    @relation
    def maximum(self, c: Ctx) -> bool:
        return self.n <= max(c.sizes)


class Distincts(Rec):
    @relation
    def distinct_sizes(self, c: Ctx) -> bool:
        return self.n == 0 or distinct(c.sizes)


class Ranges(Rec):
    @relation
    def ranged(self, c: Ctx) -> bool:
        return all(self.n != i for i in range(c.hi))


def _contexts(seed: int) -> list[Ctx]:
    """Four satisfiable contexts of one shape for the models above."""
    rng = random.Random(seed)
    out = []
    for _ in range(4):
        lo = rng.randint(-3, 2)
        out.append(
            ctx(
                lo,
                rng.randint(max(lo, 0), 6),
                weights={k: rng.randint(-6, 6) for k in "abc"},
                sizes=[rng.randint(-3, 3), rng.randint(-3, 3), 3],
                windows=[Window(rng.randint(-3, -1), rng.randint(2, 4))],
            )
        )
    return out


def assert_same_spec(bound: CompiledSpec, compiled: CompiledSpec, seed: int = 0) -> None:
    """The same oracle answers on random facts; the same graph where no branch was folded.

    A compile folds a branch a constant decides (``c.lo == 0 or ...`` with ``lo`` 0 reads
    nothing); the bound spec keeps it, true, with the variables it reads: more variables,
    the same records.
    """
    assert set(bound.variables) >= set(compiled.variables)
    if set(bound.variables) == set(compiled.variables):
        assert dict(bound.variables) == dict(compiled.variables)
        assert [f.name for f in bound.factors] == [f.name for f in compiled.factors]
        assert bound.components == compiled.components
    assert bound.strings.strings == compiled.strings.strings
    o1, o2 = bound.new_oracle(), compiled.new_oracle()
    rng = random.Random(seed)
    names = list(compiled.variables)
    for _ in range(30 if names else 0):
        facts = tuple(random_facts(compiled, rng))
        assert o1.feasible(facts) == o2.feasible(facts), facts  # type: ignore[arg-type]
        var = rng.choice(names)
        got = o1.feasible_values(facts, var, limit=16)  # type: ignore[arg-type]
        assert got == o2.feasible_values(facts, var, limit=16), (facts, var)  # type: ignore[arg-type]
    facts = tuple(random_facts(compiled, random.Random(seed + 1))[:2])
    assert o1.determined(facts) == o2.determined(facts)  # type: ignore[arg-type]


def bound_and_compiled(model: type[BaseModel], contexts: list[object]) -> list[tuple[object, ...]]:
    """(context, bound spec, compiled spec) for each context after the first of one shape."""
    compile_spec(model, contexts[0])  # the shape's first context: a compile
    bound = [compile_spec(model, c) for c in contexts[1:]]
    out = []
    for c, spec in zip(contexts[1:], bound, strict=True):
        clear_spec_caches()
        out.append((c, spec, compile_spec(model, c)))  # a new shape again: compiled
    return out


def _stats() -> tuple[int, int, int, int]:
    s = FORM_STATS
    return s.made, s.declined, s.bound, s.diverged


@pytest.mark.parametrize("model", [Bounds, Arith, Lookup, Members], ids=lambda m: m.__name__)
def test_bound_specs_answer_as_compiled_ones(model: type[BaseModel]) -> None:
    contexts = _contexts(1)
    made, declined, bound, diverged = _stats()
    pairs = bound_and_compiled(model, list(contexts))
    assert _stats() == (made + 1, declined, bound + 3, diverged), FORM_STATS.last_declined
    for i, (_, b, c) in enumerate(pairs):
        assert_same_spec(b, c, seed=i)  # type: ignore[arg-type]


@pytest.mark.parametrize("model", [Leaks, Distincts, Ranges], ids=lambda m: m.__name__)
def test_a_lowering_that_reads_a_value_is_declined(model: type[BaseModel]) -> None:
    contexts = _contexts(2)
    made, declined, bound, diverged = _stats()
    pairs = bound_and_compiled(model, list(contexts))
    assert _stats() == (made, declined + 1, bound, diverged)
    assert FORM_STATS.last_declined is not None
    assert FORM_STATS.last_declined.startswith(model.__name__)
    for i, (_, b, c) in enumerate(pairs):
        assert_same_spec(b, c, seed=i)  # type: ignore[arg-type]


class Rates(BaseModel):
    num: int
    den: int

    @property
    def ratio(self) -> float:  # Python's division: with parameters, Z3's integer division
        return self.num / self.den


class Priced(Rec):
    @relation
    def under(self, c: Rates) -> bool:
        return self.n <= c.ratio * 2


def test_a_context_property_that_computes_is_declined() -> None:
    contexts: list[object] = [Rates(num=5, den=2), Rates(num=7, den=2), Rates(num=3, den=4)]
    made, declined, bound, diverged = _stats()
    pairs = bound_and_compiled(Priced, contexts)
    assert _stats() == (made, declined + 1, bound, diverged)
    assert FORM_STATS.last_declined == "Priced: __truediv__ of a context parameter"
    for i, (_, b, c) in enumerate(pairs):
        assert_same_spec(b, c, seed=i)  # type: ignore[arg-type]


def test_an_unguarded_read_is_silently_wrong() -> None:
    """Why the guard: ``lo in sizes`` on Z3 terms is structural equality, False, no error."""
    c = ctx(2, 5, sizes=[2, 3, 4])
    ps = params.parameters(len(params.split_context(c)[1]))
    p = params.with_parameters(c, ps)
    assert isinstance(p, Ctx)
    assert (p.lo in p.sizes) is False  # what an unguarded lowering would have read
    assert (c.lo in c.sizes) is True


class Floor(Rec):
    @relation
    def at_least(self, c: Ctx) -> bool:
        return self.n >= c.lo


def test_an_unsatisfiable_binding_raises_the_compiles_error() -> None:
    compile_spec(Floor, ctx(0))
    compile_spec(Floor, ctx(1))  # makes the form
    made, declined, bound, diverged = _stats()
    recompiled = FORM_STATS.recompiled
    with pytest.raises(UnsatisfiableSpecError) as bound_err:
        compile_spec(Floor, ctx(40))
    assert FORM_STATS.recompiled == recompiled + 1
    assert _stats() == (made, declined, bound, diverged)
    clear_spec_caches()
    with pytest.raises(UnsatisfiableSpecError) as compiled_err:
        compile_spec(Floor, ctx(40))
    assert str(bound_err.value) == str(compiled_err.value)
    assert "at_least" in str(bound_err.value)


# --------------------------------------------------------------------------- the examples


def _season(cal: HotelCalendar, k: int) -> HotelCalendar:
    """The same hotel ``k`` weeks later (`later_season`), with other stay limits."""
    return later_season(cal, k).model_copy(update={"min_nights": 1 + k, "nights_wanted": 3 + k})


def _example_contexts() -> list[tuple[type[BaseModel], list[object]]]:
    trip = generate_problem(4, seed=7)
    assert len(trip.events) == 2
    return [
        (
            Invoice,
            [InvoiceContext(tax_rate_percent=r, max_items=m) for r, m in [(8, 5), (9, 3), (25, 6)]],
        ),
        (
            Meeting,
            [
                MEETING_CONTEXT,
                MEETING_CONTEXT.model_copy(update={"duration": 1}),
                MEETING_CONTEXT.model_copy(update={"work_start": 10, "work_end": 16}),
            ],
        ),
        (Booking, [BOOKING_CONTEXT, *(_season(BOOKING_CONTEXT, k) for k in (1, 3))]),
        (Itinerary, [trip, with_stays(trip, [3, 5, 2, 7]), with_stays(trip, [6, 2, 4, 4])]),
        (
            DatedItinerary,
            [
                dated_problem(trip, dt.date(2026, 5, 4)),
                dated_problem(with_stays(trip, [3, 5, 2, 7]), dt.date(2026, 12, 30)),
                dated_problem(with_stays(trip, [6, 2, 4, 4]), dt.date(2028, 2, 27)),
            ],
        ),
    ]


@pytest.mark.parametrize(
    ("model", "contexts"),
    _example_contexts(),
    ids=["invoice", "meeting", "booking", "trip", "dated-trip"],
)
def test_examples_bind_and_answer_as_compiled(
    model: type[BaseModel], contexts: list[object]
) -> None:
    made, _, bound, _ = _stats()
    pairs = bound_and_compiled(model, contexts)
    assert (FORM_STATS.made, FORM_STATS.bound) == (made + 1, bound + 2), FORM_STATS.last_declined
    for i, (_, b, c) in enumerate(pairs):
        assert_same_spec(b, c, seed=i)  # type: ignore[arg-type]


def test_bound_trip_decodes_the_same_records() -> None:
    trip = generate_problem(5, seed=1)  # two events
    assert len(trip.events) == 2
    contexts: list[object] = [trip, with_stays(trip, [2, 7, 3, 6, 4])]
    ((c, bound, compiled),) = bound_and_compiled(Itinerary, contexts)
    for seed in range(3):
        text = sampled_record(bound, seed)  # type: ignore[arg-type]
        assert sampled_record(compiled, seed) == text  # type: ignore[arg-type]
        Itinerary.model_validate_json(text, context=c)


def test_a_dataclass_context_binds() -> None:
    @dataclass(frozen=True)
    class Limits:
        most: int
        names: tuple[str, ...] = field(default=("a", "b"))

    class Capped(Rec):
        @relation
        def capped(self, c: Limits) -> bool:
            return self.n <= c.most and (self.tag in c.names or self.m == c.most)

    contexts: list[object] = [Limits(1), Limits(3), dataclasses.replace(Limits(0), most=-2)]
    made, _, bound, _ = _stats()
    pairs = bound_and_compiled(Capped, contexts)
    assert (FORM_STATS.made, FORM_STATS.bound) == (made + 1, bound + 2)
    for i, (_, b, c) in enumerate(pairs):
        assert_same_spec(b, c, seed=i)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- differential


@dataclass
class Knobs:
    k: int
    j: int
    ws: list[int]
    table: dict[str, int]
    pairs: list[tuple[str, int]]
    start: dt.date = dt.date(2024, 2, 1)
    holidays: list[dt.date] = field(
        default_factory=lambda: [dt.date(2024, 2, 3), dt.date(2024, 2, 5)]
    )
    label: str = "a"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class Counted(BaseModel):
    n: int = Field(ge=-5, le=5)
    m: int = Field(ge=-5, le=5)
    flag: bool
    tag: Literal["a", "b", "c"]
    xs: list[int] = Field(max_length=3)
    day: dt.date
    note: int | None = None
    level: Level
    size: Literal[1, 2, 4]
    price: float = Field(ge=-5, le=5)

    @relation
    def chained(self, c: Knobs) -> bool:
        return c.j <= self.n < c.k or self.m == c.k - c.j

    @relation
    def lookup(self, c: Knobs) -> bool:
        return c.table[self.tag] >= self.m

    @relation
    def lookup_get(self, c: Knobs) -> bool:
        return c.table.get(self.tag, c.k) != self.n

    @relation
    def index(self, c: Knobs) -> bool:
        return c.ws[self.n] == self.m

    @relation
    def index_const(self, c: Knobs) -> bool:
        return c.ws[-1] + c.ws[0] * self.n > self.m

    @relation
    def member(self, c: Knobs) -> bool:
        return self.n in c.ws and self.m not in c.ws[1:]

    @relation
    def member_symbolic(self, c: Knobs) -> bool:
        return c.k in [self.n, self.m] or c.j in self.xs

    @relation
    def tuple_member(self, c: Knobs) -> bool:
        return (self.tag, self.n) in c.pairs

    @relation
    def sums(self, c: Knobs) -> bool:
        return sum(self.xs) == sum(c.ws) - c.k or len(self.xs) == c.j

    @relation
    def arith(self, c: Knobs) -> bool:
        return self.n * c.k - self.m // c.j + self.n % c.k == abs(c.j - self.m)

    @relation
    def power(self, c: Knobs) -> bool:
        return c.k**2 - self.n**2 >= c.j

    @relation
    def min_max(self, c: Knobs) -> bool:
        return min(self.n, c.k) < max(self.m, c.j, 0)

    @relation
    def conditional(self, c: Knobs) -> bool:
        return (c.k if self.flag else c.j) == self.n

    @relation
    def any_window(self, c: Knobs) -> bool:
        return any(w > self.n for w in c.ws) and all(w != self.m for w in c.ws)

    @relation
    def enumerated(self, c: Knobs) -> bool:
        return all(w + i != self.n for i, w in enumerate(c.ws))

    @relation
    def zipped(self, c: Knobs) -> bool:
        return all(x <= w for x, w in zip(self.xs, c.ws))

    @relation
    def shifted_date(self, c: Knobs) -> bool:
        return self.day <= c.start + dt.timedelta(days=c.k)

    @relation
    def holiday(self, c: Knobs) -> bool:
        return self.day not in c.holidays and (self.day - c.start).days != self.n

    @relation
    def weekdays(self, c: Knobs) -> bool:
        return self.day.weekday() != c.start.weekday() or c.start.day == self.m + 5

    @relation
    def date_chain(self, c: Knobs) -> bool:
        return self.day < c.start < dt.date(2024, 2, 4) or c.holidays[0] == self.day

    @relation
    def start_in_holidays(self, c: Knobs) -> bool:  # the compiler's own `in`, symbolic
        return c.start in c.holidays or self.flag

    @relation
    def latest_holiday(self, c: Knobs) -> bool:  # max() of dates: Python compares them
        return max(c.holidays) >= self.day

    @relation
    def optional(self, c: Knobs) -> bool:
        return self.note is None or self.note < c.j

    @relation
    def true_division(self, c: Knobs) -> bool:
        return self.n / c.k > 0.5

    @relation
    def int_enum(self, c: Knobs) -> bool:
        return self.level == c.k or self.level in c.ws

    @relation
    def int_literal(self, c: Knobs) -> bool:
        return self.size == c.j or self.size in c.ws or self.size < c.k

    @relation
    def float_field(self, c: Knobs) -> bool:
        return self.price < c.k and self.price != c.j

    @relation
    def float_arith(self, c: Knobs) -> bool:
        return self.price * c.k >= c.j + 0.5

    @relation
    def maximum(self, c: Knobs) -> bool:  # max() of constants: Python compares them
        return self.n <= max(c.ws)

    @relation
    def ranged(self, c: Knobs) -> bool:  # range() of a constant
        return all(self.n != i for i in range(c.k))

    @relation
    def distinct_constants(self, c: Knobs) -> bool:
        return distinct(c.ws) or self.flag


DECLINED = {"maximum", "ranged", "distinct_constants", "true_division", "latest_holiday"}
DECLINED |= {"float_field", "float_arith"}  # a float against an int of unknown size: rounding


def _knobs(rng: random.Random) -> Knobs:
    return Knobs(
        k=rng.choice([-3, -1, 1, 2, 3, 4]),
        j=rng.choice([-2, -1, 1, 2, 5]),
        ws=[rng.randint(-4, 4) for _ in range(3)],
        table={"a": rng.randint(-5, 5), "b": rng.randint(-5, 5), "c": rng.randint(-5, 5)},
        pairs=[("a", rng.randint(-2, 2)), ("c", rng.randint(-2, 2))],
        start=dt.date(2024, 2, 1) + dt.timedelta(days=rng.randint(-3, 3)),
        holidays=[dt.date(2024, 2, 1) + dt.timedelta(days=rng.randint(-3, 6)) for _ in "ab"],
    )


def _counted(rng: random.Random) -> dict[str, object]:
    return {
        "n": rng.randint(-5, 5),
        "m": rng.randint(-5, 5),
        "flag": rng.random() < 0.5,
        "tag": rng.choice("abc"),
        "xs": [rng.randint(-4, 4) for _ in range(rng.randint(0, 3))],
        "day": dt.date(2024, 2, 1) + dt.timedelta(days=rng.randint(-3, 6)),
        "note": rng.choice([None, rng.randint(-5, 5)]),
        "level": rng.choice([1, 3]),
        "size": rng.choice([1, 2, 4]),
        "price": rng.randint(-10, 10) / 2,
    }


def test_bound_relations_agree_with_python() -> None:
    """Each relation lowered with parameters and bound gives Python's truth on random records."""
    rng = random.Random(0)
    seen: dict[str, set[bool]] = {}
    for _ in range(12):
        knobs = _knobs(rng)
        for _ in range(25):
            data = _counted(rng)
            truths = compiled_truths(Counted, knobs, data, bound=True)
            assert set(truths) == {r.name for r in relations_of(Counted)} - DECLINED
            for name, (py, got) in truths.items():
                assert py == got, f"{name}: python {py}, bound {got} on {data} with {knobs}"
                seen.setdefault(name, set()).add(py)
    assert all(v == {True, False} for v in seen.values()), seen


def test_box_relations_agree_with_python_when_bound() -> None:
    """The differential suite's `Box` relations, lowered with the context's ints bound."""
    from tests.relations.test_differential import Box, Ctx, random_box

    rng = random.Random(1)
    for days in ({"x": 2, "y": 0, "a": 1}, {"x": -1, "y": 3, "a": 0}, {"x": 0, "y": 0, "a": 4}):
        ctx_ = Ctx(days=days, k=rng.randint(-2, 3))
        for _ in range(40):
            data = random_box(rng)
            truths = compiled_truths(Box, ctx_, data, bound=True)
            assert "context_const" not in truths  # max() of constants: declined
            assert {"lookup", "lookup_get", "lazy_errors"} <= set(truths)
            for name, (py, got) in truths.items():
                assert py == got, f"{name}: python {py}, bound {got} on {data} with {ctx_}"


def test_date_relations_agree_with_python_when_bound() -> None:
    """The date suite's `Stay` relations, lowered with the season's dates bound."""
    from tests.relations.test_dates import Season, Stay

    rng = random.Random(2)
    first = dt.date(2024, 2, 1)
    seen: dict[str, set[bool]] = {}
    for shift in (0, 3, 29):
        opens = first + dt.timedelta(days=shift - 10)
        season = Season(
            opens=opens,
            closes=opens + dt.timedelta(days=rng.randint(20, 60)),
            blackout=[opens + dt.timedelta(days=rng.randint(0, 30)) for _ in "ab"],
        )
        for _ in range(60):
            start = first + dt.timedelta(days=rng.randint(-20, 50))
            end = start + dt.timedelta(days=rng.randint(-3, 30))
            data = {
                "start": start,
                "end": end,
                "nights": rng.randint(-3, 40),
                "late": rng.choice([None, end + dt.timedelta(days=rng.randint(-2, 2))]),
            }
            truths = compiled_truths(Stay, season, data, bound=True)
            assert {"in_season", "not_blackout"} <= set(truths)
            for name, (py, got) in truths.items():
                assert py == got, f"{name}: python {py}, bound {got} on {data} with {season}"
                seen.setdefault(name, set()).add(py)
    assert seen["in_season"] == {True, False} and seen["not_blackout"] == {True, False}


def test_aware_relations_agree_with_python_when_bound() -> None:
    """`Flight` against an `Airport` whose day is a bound date (its datetimes stay constants)."""
    from tests.relations.test_datetimes import Airport, Flight

    rng = random.Random(3)
    seen: set[bool] = set()
    for day in (dt.date(2024, 2, 29), dt.date(2024, 3, 1), dt.date(2024, 2, 28)):
        port = Airport(day=day)
        for _ in range(60):
            base = dt.datetime(2024, 2, 28, 22, 0, tzinfo=dt.UTC)
            dep = base + dt.timedelta(minutes=5 * rng.randint(0, 600))
            minutes = rng.randint(0, 180)
            data = {"dep": dep, "arr": dep + dt.timedelta(minutes=minutes), "minutes": minutes}
            truths = compiled_truths(Flight, port, data, bound=True)
            assert "utc_wall_clock" in truths
            for name, (py, got) in truths.items():
                assert py == got, f"{name}: python {py}, bound {got} on {data} with {port}"
            seen.add(truths["utc_wall_clock"][0])
    assert seen == {True, False}
