"""Fixed-point float texts: canonical texts, and the values each next character leaves, exactly.

Brute force over small ranges of scaled values: the classes `char_classes` gives after a
prefix are exactly the values whose canonical text continues with each character.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Annotated

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, TypeAdapter

from factorspec_sdk import relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import RecordInvalidError, check_record, record_facts, spec_from_ir, to_ir
from factorspec_sdk.relations.floats import FLOAT_LIMIT, Places, float_of
from factorspec_sdk.relations.layout import LeafLayout, node_at
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import Writer, WriterState
from factorspec_sdk.writer.floats import (
    char_classes,
    fixed_text,
    fixed_value,
    longest_text_length,
    next_float_chars,
    shortest_text_length,
)
from tests.helpers import random_record, tiny_tokenizer

FLOAT = TypeAdapter(float)
CHARS = "-0123456789."

# ------------------------------------------------------------------ canonical texts

TOK = tiny_tokenizer()


@pytest.mark.parametrize(
    ("n", "places", "text"),
    [
        (1250, 2, "12.5"),
        (-5, 2, "-0.05"),
        (300, 2, "3"),
        (0, 2, "0"),
        (0, 0, "0"),
        (-7, 0, "-7"),
        (1, 12, "0.000000000001"),
        (-1001, 3, "-1.001"),
        (FLOAT_LIMIT, 6, "999999999.999999"),
        (-FLOAT_LIMIT, 0, "-" + "9" * 15),
    ],
)
def test_fixed_text_examples(n: int, places: int, text: str) -> None:
    assert fixed_text(n, places) == text
    assert fixed_value(text, places) == n


@pytest.mark.parametrize(
    ("text", "places"),
    [
        ("12.50", 2),
        ("012", 2),
        ("-0", 2),
        ("-0", 0),
        ("1.", 2),
        (".5", 2),
        ("+1", 2),
        ("1e5", 2),
        (" 1", 2),
        ("1 ", 2),
        ("", 2),
        ("-", 2),
        ("0.125", 2),
        ("1.5", 0),
        ("0.0", 1),
        ("--1", 2),
        ("1-", 2),
        ("\uff11", 2),  # a fullwidth digit
        ("1\u0661", 2),  # an Arabic-Indic digit
        ("1" * 16, 0),  # beyond FLOAT_LIMIT
        ("-1" + "0" * 15, 0),
        ("1" * 5000, 0),
    ],
)
def test_fixed_value_refuses_non_canonical_texts(text: str, places: int) -> None:
    assert fixed_value(text, places) is None


@settings(max_examples=400, deadline=None)
@given(n=st.integers(-FLOAT_LIMIT, FLOAT_LIMIT), places=st.integers(0, 12))
def test_texts_round_trip_and_parse_to_the_float(n: int, places: int) -> None:
    text = fixed_text(n, places)
    assert fixed_value(text, places) == n
    x = float_of(n, places)
    assert float(text) == x
    assert float(json.loads(text)) == x
    assert FLOAT.validate_json(text) == x
    assert FLOAT.validate_python(float(text)) == x


# ------------------------------------------------------------------ classes, by brute force


def _ranges(values: Iterable[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for v in sorted(values):
        if out and out[-1][1] + 1 == v:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def _brute(places: int, lo: int, hi: int) -> dict[str, dict[str, list[tuple[int, int]]]]:
    """Per prefix of some text, its classes: the values whose text goes on with each char."""
    found: dict[str, dict[str, list[int]]] = {}
    for n in range(lo, hi + 1):
        t = fixed_text(n, places)
        for k in range(len(t) + 1):
            found.setdefault(t[:k], {}).setdefault(t[k : k + 1], []).append(n)
    return {p: {c: _ranges(ns) for c, ns in cs.items()} for p, cs in found.items()}


EXTRA_PREFIXES = [
    "",
    "-",
    "0",
    "0.",
    "-0",
    "-0.",
    "-0.0",
    "12",
    "12.",
    "12.3",
    "12.30",
    "-12.05",
    "1",
    "-1",
    "9",
    "10",
    "1.0",
    "1.00",
    ".",
    "--",
    "00",
    "01",
    "-.",
    "1-",
    "1..",
    "12.5x",
]


@pytest.mark.parametrize("places", [0, 1, 2, 3])
@pytest.mark.parametrize(
    ("lo", "hi"),
    [(-1300, 1300), (0, 2500), (-2500, -1), (95, 1210), (-1210, -95), (7, 7), (0, 0)],
)
def test_char_classes_are_exactly_the_values_with_the_prefix(places: int, lo: int, hi: int) -> None:
    brute = _brute(places, lo, hi)
    for p in sorted(brute.keys() | set(EXTRA_PREFIXES)):
        assert char_classes(p, places, lo, hi) == brute.get(p, {}), (p, places)


@pytest.mark.parametrize("places", [0, 3, 6, 12])
@pytest.mark.parametrize("negative", [False, True])
def test_char_classes_at_the_limit(places: int, negative: bool) -> None:
    lo, hi = FLOAT_LIMIT - 1500, FLOAT_LIMIT + 50  # beyond the limit: no text
    if negative:
        lo, hi = -hi, -lo
    brute = _brute(places, max(lo, -FLOAT_LIMIT), min(hi, FLOAT_LIMIT))
    for p in sorted(brute):
        assert char_classes(p, places, lo, hi) == brute[p], p


@settings(max_examples=150, deadline=None)
@given(
    places=st.integers(0, 12),
    lo=st.integers(-FLOAT_LIMIT, FLOAT_LIMIT),
    span=st.integers(0, 400),
    pick=st.integers(0, 400),
    cut=st.integers(0, 30),
)
def test_char_classes_match_brute_force_anywhere(
    places: int, lo: int, span: int, pick: int, cut: int
) -> None:
    hi = min(lo + span, FLOAT_LIMIT)
    prefix = fixed_text(lo + pick % (hi - lo + 1), places)[:cut]
    assert char_classes(prefix, places, lo, hi) == _brute(places, lo, hi)[prefix]


def test_wide_ranges_give_few_exact_classes() -> None:
    classes = char_classes("12", 2, -FLOAT_LIMIT, FLOAT_LIMIT)
    assert classes[""] == [(1200, 1200)]
    assert classes["."] == [(1201, 1299)]
    # integer parts 120, 120x, 120xx, ... up to 13 digits
    assert classes["0"][:2] == [(12000, 12099), (120000, 120999)]
    assert len(classes["0"]) == 11 and classes["0"][-1] == (12 * 10**13, 121 * 10**12 - 1)
    assert set(char_classes("", 2, -FLOAT_LIMIT, FLOAT_LIMIT)) == set("-0123456789")
    assert char_classes("-", 2, -FLOAT_LIMIT, FLOAT_LIMIT)["0"] == [(-99, -1)]
    assert char_classes("12.30", 2, -FLOAT_LIMIT, FLOAT_LIMIT) == {}
    assert char_classes("12.3", 3, -FLOAT_LIMIT, FLOAT_LIMIT)["0"] == [(12301, 12309)]
    for p in ("", "-", "1", "-1", "12.", "0.0"):
        for ranges in char_classes(p, 6, -FLOAT_LIMIT, FLOAT_LIMIT).values():
            assert len(ranges) <= 16


# ------------------------------------------------------------------ text lengths


@pytest.mark.parametrize("places", [0, 1, 2, 3])
def test_text_lengths_match_brute_force(places: int) -> None:
    bounds = [(-1300, 1300), (1, 1), (10, 10), (95, 1210), (-1210, -95), (999, 1001)]
    bounds += [(100, 109), (-2000, -1000), (5, 4), (FLOAT_LIMIT - 20, FLOAT_LIMIT + 9)]
    bounds += [(lo, lo + w) for lo in range(-130, 130, 7) for w in (0, 1, 9, 10, 11, 99, 101)]
    for lo, hi in bounds:
        lengths = [len(fixed_text(n, places)) for n in range(lo, min(hi, FLOAT_LIMIT) + 1)]
        assert longest_text_length(lo, hi, places) == max(lengths, default=0), (lo, hi)
        assert shortest_text_length(lo, hi, places) == min(lengths, default=0), (lo, hi)


@settings(max_examples=200, deadline=None)
@given(
    places=st.integers(0, 12), lo=st.integers(-FLOAT_LIMIT, FLOAT_LIMIT), span=st.integers(0, 300)
)
def test_text_lengths_anywhere(places: int, lo: int, span: int) -> None:
    hi = min(lo + span, FLOAT_LIMIT)
    lengths = [len(fixed_text(n, places)) for n in range(lo, hi + 1)]
    assert longest_text_length(lo, hi, places) == max(lengths)
    assert shortest_text_length(lo, hi, places) == min(lengths)


def test_text_lengths_of_the_whole_range() -> None:
    assert longest_text_length(-FLOAT_LIMIT, FLOAT_LIMIT, 6) == len("-999999999.999999")
    assert shortest_text_length(-FLOAT_LIMIT, FLOAT_LIMIT, 6) == 1
    assert shortest_text_length(1, 10**6, 6) == 1  # "1"
    assert shortest_text_length(1, 10**6 - 1, 6) == 3  # "0.1"
    assert longest_text_length(10**6, 10**6, 6) == 1


# ------------------------------------------------------------------ with a feasibility filter


class _FeasibleIn:
    """A stand-in for the oracle's `feasible_range_sets`: the classes holding an allowed value."""

    def __init__(self, allowed: set[int]) -> None:
        self.allowed = allowed
        self.calls: list[list[list[tuple[int, int]]]] = []

    def __call__(self, classes: Sequence[Sequence[tuple[int, int]]]) -> frozenset[int]:
        self.calls.append([list(c) for c in classes])
        return frozenset(
            i for i, c in enumerate(classes) if any(a <= v <= b for a, b in c for v in self.allowed)
        )


@pytest.mark.parametrize("places", [0, 2])
def test_next_float_chars_keeps_the_feasible_classes(places: int) -> None:
    lo, hi = -3000, 3000
    allowed = {n for n in range(lo, hi + 1) if n % 97 == 5}
    texts = [fixed_text(n, places) for n in sorted(allowed)]
    prefixes = {t[:k] for t in texts for k in range(len(t) + 1)} | {"", "-", "7", "0."}
    for p in sorted(prefixes):
        feasible = _FeasibleIn(allowed)
        got = next_float_chars(p, places, lo, hi, feasible)
        want = {t[len(p) : len(p) + 1] for t in texts if t.startswith(p)}
        assert set(got) == want, p
        classes = char_classes(p, places, lo, hi)
        assert got == {c: classes[c] for c in want}
        assert feasible.calls == ([list(classes.values())] if classes else [])
    assert next_float_chars("1", places, lo, hi) == char_classes("1", places, lo, hi)


# ------------------------------------------------------------------ the oracle


class Sevens(BaseModel):
    n: int = Field(ge=0, le=5000)
    k: int = Field(ge=0, le=714)

    @relation
    def seven_k_plus_three(self) -> bool:
        return self.n == 7 * self.k + 3


def test_feasible_range_sets_match_brute_force() -> None:
    oracle = compile_spec(Sevens).new_oracle()
    for facts, values in [
        ((), {7 * k + 3 for k in range(715)}),  # many values: the search
        ((("k", 5),), {38}),  # one value: the few-values path
        ((("k", 5), ("n", 39)), set()),  # infeasible
    ]:
        for places, prefix in [(0, ""), (0, "1"), (0, "3"), (2, ""), (2, "1"), (2, "0."), (1, "-")]:
            classes = list(char_classes(prefix, places, -5000, 5000).values())
            classes.append([])  # a class without ranges holds nothing
            classes.append([(6000, 7000), (-5, -1)])
            want = {
                i for i, c in enumerate(classes) if any(a <= v <= b for a, b in c for v in values)
            }
            got = oracle.feasible_range_sets(facts, "n", classes)
            assert got == want, (facts, prefix)
        ranges = [(a, a + 99) for a in range(0, 5000, 100)]
        want = {i for i, (a, b) in enumerate(ranges) if any(a <= v <= b for v in values)}
        queries = oracle.stats.queries
        assert oracle.feasible_ranges(facts, "n", ranges) == want
        assert oracle.stats.queries == queries + 1


# ------------------------------------------------------------------ the writer, no relation on it


class Reader(BaseModel):
    price: int = Field(ge=1, le=3)
    opt: int = Field(ge=0, le=9)

    @relation
    def reads_price_and_opt(self) -> bool:  # makes fields so named floats leaves elsewhere
        return self.price == 2 and self.opt == 4


class Priced(BaseModel):
    price: Annotated[float, Places(2)] = Field(ge=-1.5, le=20)
    reader: Reader


class MaybePriced(BaseModel):
    reader: Reader
    opt: Annotated[float, Places(1)] | None = Field(default=None, ge=0, lt=3.05)


def _completions(writer: Writer, s: WriterState) -> list[str]:
    """Every text the writer may write from ``s``; checks the length bounds at each choice."""
    forced, at = writer.forced(s)
    if at.done:
        return [forced]
    choice = writer.choices(at)
    assert isinstance(choice, list)
    rests = [o.text + r for o in choice for r in _completions(writer, o.state)]
    assert writer.shortest_rest(at) <= min(len(r) for r in rests)
    assert writer.longest_rest_bytes(at) >= max(len(r) for r in rests)
    return [forced + r for r in rests]


@pytest.mark.parametrize(
    ("model", "texts"),
    [
        (
            Priced,
            [
                f'{{"price": {fixed_text(n, 2)}, "reader": {{"price": 2, "opt": 4}}}}'
                for n in range(-150, 2001)
            ],
        ),
        (
            MaybePriced,
            [
                '{"reader": {"price": 2, "opt": 4}}',  # opt left out: its default, None
                *(
                    f'{{"reader": {{"price": 2, "opt": 4}}, "opt": {t}}}'
                    for t in ["null", *(fixed_text(n, 1) for n in range(31))]
                ),
            ],
        ),
    ],
)
def test_a_float_no_relation_reads_is_written_in_every_canonical_text(
    model: type[BaseModel], texts: list[str]
) -> None:
    spec = compile_spec(model)
    node = node_at(spec.layout, ("price",) if model is Priced else ("opt",))
    assert isinstance(node, LeafLayout) and node.kind == "float"
    writer = Writer(spec)
    got = _completions(writer, writer.start())
    assert sorted(got) == sorted(texts)
    for t in got:
        model.model_validate_json(t)
    assert writer.shortest_rest(writer.start()) == min(len(t) for t in texts)
    assert writer.longest_bytes() == max(len(t) for t in texts)


# ------------------------------------------------------------------ the writer, with relations


class Split(BaseModel):
    a: Annotated[float, Places(1)] = Field(ge=0, le=2)
    b: Annotated[float, Places(3)] = Field(ge=-0.3, le=0.5)

    @relation
    def close(self) -> bool:
        return abs(self.a * 0.25 - self.b) < 0.0501 or round(self.a) == 2

    @relation
    def apart(self) -> bool:
        return self.b != 0.1 and max(self.a, self.b) >= 0.5


def test_the_writer_writes_exactly_the_records_the_float_relations_allow() -> None:
    """Oracle exactness by brute force: every valid (a, b) is writable, and nothing else."""
    writer = Writer(compile_spec(Split))
    got = sorted(_completions(writer, writer.start()))
    want = []
    for na in range(21):
        for nb in range(-300, 501):
            a, b = float_of(na, 1), float_of(nb, 3)
            try:
                Split.model_validate({"a": a, "b": b})
            except ValueError:
                continue
            want.append(f'{{"a": {fixed_text(na, 1)}, "b": {fixed_text(nb, 3)}}}')
    assert 500 < len(want) < 21 * 801
    assert got == sorted(want)


def test_random_receipts_are_valid_and_their_amounts_certain() -> None:
    from examples import receipt

    spec = compile_spec(receipt.Receipt, context=receipt.SAMPLE_CONTEXT)
    planner = Planner(Writer(spec), TOK)
    rng = np.random.default_rng(0)
    for _ in range(6):
        text = random_record(planner, TOK, rng, close=0.5)
        r = receipt.Receipt.model_validate_json(text, context=receipt.SAMPLE_CONTEXT)
        assert (r.total, r.change) == (13.8, 6.2)


class Scaled(BaseModel):
    x: Annotated[float, Places(1)] | None = Field(default=None, ge=-1, le=1)
    y: Annotated[float, Places(0)] = Field(ge=-3, le=3)

    @relation
    def r(self) -> bool:
        return (self.x is None or self.x > 0.5) and self.y < (self.x or 0) * 2


def test_optional_floats_scaled_by_two_are_written_exactly() -> None:
    writer = Writer(compile_spec(Scaled))
    got = sorted(_completions(writer, writer.start()))
    want = []
    for x in [None, *(n / 10 for n in range(-10, 11))]:
        for y in range(-3, 4):
            try:
                Scaled.model_validate({"x": x, "y": y})
            except ValueError:
                continue
            xt = "null" if x is None else fixed_text(round(x * 10), 1)
            want.append(f'{{"x": {xt}, "y": {y}}}')
            if x is None:  # x left out: its default, None
                want.append(f'{{"y": {y}}}')
    assert got == sorted(want)


def test_the_relation_ir_round_trips_floats() -> None:
    spec = compile_spec(Split)
    ir = to_ir(Split)
    assert {v["name"]: v["kind"] for v in ir["variables"]} == {"a": "int", "b": "int"}
    served = spec_from_ir(ir)
    assert served.variables["b"].kind == "float"
    assert {f.name for f in served.factors} == {f.name for f in spec.factors}
    for s in (spec, served):  # a = 0.8: b within 0.0501 of 0.2
        values = s.new_oracle().feasible_values((("a", 8),), "b", limit=200)
        assert values == list(range(150, 251))
    good, bad = '{"a": 0.8, "b": 0.175}', '{"a": 0.8, "b": 0.3}'
    assert record_facts(served, {"a": 0.8, "b": 0.175}) == (("a", 8), ("b", 175))
    check_record(served, good)
    with pytest.raises(RecordInvalidError, match="relations"):
        check_record(served, bad)
    with pytest.raises(RecordInvalidError):
        check_record(served, good.replace("0.175", "0.1751"))  # more decimals than places


class Change(BaseModel):
    due: Annotated[Decimal, Field(max_digits=2, decimal_places=1, ge=0)]
    paid: Annotated[Decimal, Field(max_digits=3, decimal_places=1, ge=0)]

    @relation
    def half_over(self) -> bool:
        return self.paid - self.due == Decimal(1) / 2


def test_the_writer_writes_decimals_as_pydantic_reads_them() -> None:
    writer = Writer(compile_spec(Change))
    got = sorted(_completions(writer, writer.start()))
    want = sorted(
        f'{{"due": {fixed_text(n, 1)}, "paid": {fixed_text(n + 5, 1)}}}' for n in range(100)
    )
    assert got == want
    for text in got:
        record = Change.model_validate_json(text)
        assert record.paid - record.due == Decimal("0.5")
