"""The NATURAL PLAN-style trip generator, prompt, reference solver and evaluator."""

from __future__ import annotations

import copy
import itertools
import json
import random
import re
from typing import Any

import pytest
from pydantic import ValidationError

from factorspec_sdk.domains.trip import (
    EUROPEAN_CITIES,
    MAX_TRIP_DAYS,
    Event,
    Itinerary,
    TripProblem,
    count_solutions,
    evaluate,
    generate_problem,
    generate_problems,
    itinerary_record,
    plan_of,
    prompt_for,
    solve,
    with_stays,
)

PROBLEMS = generate_problems(200, seed=0)


def _violated(data: Any, problem: TripProblem) -> str:
    with pytest.raises(ValidationError) as info:
        Itinerary.model_validate(data, context=problem)
    return str(info.value)


@pytest.fixture
def small() -> TripProblem:
    """A -> B -> C with A 3, B 2, C 4 days (7 in all), flights A<->B and B->C."""
    return TripProblem(
        cities=["C", "A", "B"],
        days={"A": 3, "B": 2, "C": 4},
        total_days=7,
        direct_flights=[("A", "B"), ("B", "A"), ("B", "C")],
        events=[],
        golden=[("A", 3), ("B", 2), ("C", 4)],
    )


# ------------------------------------------------------------------ generator


def test_city_pool() -> None:
    assert len(set(EUROPEAN_CITIES)) == len(EUROPEAN_CITIES) >= 40
    assert all(c.isascii() and c.isalpha() for c in EUROPEAN_CITIES)


@pytest.mark.parametrize("problem", PROBLEMS[:50] + PROBLEMS[150:], ids=lambda p: str(p.cities))
def test_generated_problem_is_consistent(problem: TripProblem) -> None:
    n = len(problem.cities)
    assert 3 <= n <= 10
    assert sorted(c for c, _ in problem.golden) == sorted(problem.cities)
    assert dict(problem.golden) == problem.days
    assert all(2 <= d <= 7 for d in problem.days.values())
    assert problem.total_days == sum(problem.days.values()) - (n - 1) <= MAX_TRIP_DAYS
    assert len(set(problem.direct_flights)) == len(problem.direct_flights)
    order = [c for c, _ in problem.golden]
    for a, b in itertools.pairwise(order):
        assert (a, b) in problem.direct_flights
    assert 0 <= len(problem.events) <= 2
    assert len({e.city for e in problem.events}) == len(problem.events)


def test_all_generated_problems_are_solvable_and_golden_validates() -> None:
    for problem in PROBLEMS:
        plan = solve(problem)
        assert plan is not None
        assert count_solutions(problem) == 1  # unique by default: exact match is fair
        assert plan == list(problem.golden)
        record = itinerary_record(problem.golden)
        Itinerary.model_validate(record, context=problem)
        result = evaluate(problem, json.dumps(record))
        assert result.valid and result.exact_match and result.parse_ok
        assert result.violations == []


def test_with_stays_keeps_the_shape_and_a_valid_golden_plan() -> None:
    from factorspec_sdk.graph.params import split_context

    rng = random.Random(0)
    for problem in PROBLEMS[:60]:
        stays = [rng.randint(2, 7) for _ in problem.golden]
        other = with_stays(problem, stays)
        assert [n for _, n in other.golden] == stays
        assert other.total_days == sum(stays) - (len(stays) - 1)
        assert [e.city for e in other.events] == [e.city for e in problem.events]
        assert split_context(other)[0] == split_context(problem)[0]
        record = itinerary_record(other.golden)
        Itinerary.model_validate(record, context=other)
        assert evaluate(other, json.dumps(record)).valid
    with pytest.raises(ValueError, match="stay lengths"):
        with_stays(PROBLEMS[0], [1] * len(PROBLEMS[0].golden))


def test_city_counts_cover_the_range() -> None:
    assert {len(p.cities) for p in PROBLEMS} == set(range(3, 11))
    assert any(len(p.events) == 0 for p in PROBLEMS)
    assert any(len(p.events) == 2 for p in PROBLEMS)


def test_flights_have_distractors_and_one_way_pairs() -> None:
    one_way = two_way = extra = 0
    for p in PROBLEMS:
        pairs = set(p.direct_flights)
        golden = {
            frozenset(x)
            for x in zip([c for c, _ in p.golden], [c for c, _ in p.golden][1:], strict=False)
        }
        for a, b in pairs:
            if (b, a) in pairs:
                two_way += 1
            else:
                one_way += 1
            if frozenset((a, b)) not in golden:
                extra += 1
    assert one_way and two_way and extra


def test_cities_are_shuffled() -> None:
    assert any(p.cities != [c for c, _ in p.golden] for p in PROBLEMS)


def test_events_come_from_the_golden_plan() -> None:
    for p in PROBLEMS:
        spans = {s["city"]: s for s in itinerary_record(p.golden)["stays"]}
        for e in p.events:
            s = spans[e.city]
            assert s["first_day"] <= e.first_day < e.last_day <= s["last_day"]


def test_reproducible_by_seed() -> None:
    assert generate_problem(7, seed=42) == generate_problem(7, seed=42)
    assert generate_problem(7, seed=42) != generate_problem(7, seed=43)
    assert generate_problems(20, seed=3) == generate_problems(20, seed=3)
    assert generate_problems(20, seed=3) != generate_problems(20, seed=4)
    assert prompt_for(generate_problem(7, seed=42)) == prompt_for(generate_problem(7, seed=42))


def test_cities_range() -> None:
    assert {len(p.cities) for p in generate_problems(30, cities_range=(4, 4))} == {4}


@pytest.mark.parametrize("n", [2, 11])
def test_city_count_out_of_range(n: int) -> None:
    with pytest.raises(ValueError):
        generate_problem(n, seed=0)


def test_non_unique_mode_keeps_more_flights() -> None:
    loose = [generate_problem(8, seed=s, unique=False) for s in range(10)]
    strict = [generate_problem(8, seed=s) for s in range(10)]
    assert all(count_solutions(p) >= 1 for p in loose)
    assert any(count_solutions(p) > 1 for p in loose)
    for a, b in zip(loose, strict, strict=True):
        assert set(b.direct_flights) <= set(a.direct_flights)


def test_problem_validation_rejects_inconsistent_total() -> None:
    with pytest.raises(ValidationError, match="total_days"):
        TripProblem(cities=["A", "B"], days={"A": 2, "B": 2}, total_days=4, direct_flights=[])


def test_problem_round_trips_through_json() -> None:
    p = PROBLEMS[7]
    assert TripProblem.model_validate_json(p.model_dump_json()) == p


# ------------------------------------------------------------------ prompt


def test_prompt_wording_and_numbers() -> None:
    p = generate_problem(5, seed=1)
    text = prompt_for(p)
    assert text.startswith(
        f"You plan to visit 5 European cities for {p.total_days} days in total. "
        "You only take direct flights to commute between cities."
    )
    assert "\n\nHere are the cities that have direct flights:\n" in text
    assert text.endswith(
        f"Find a trip plan of visiting the cities for {p.total_days} days by taking direct "
        "flights to commute between them."
    )
    for city, days in p.days.items():
        assert re.search(rf"{days} days in {city}\.|{city} for {days} days\.", text)
    for e in p.events:
        assert re.search(
            rf"in {e.city} (between|from) day {e.first_day} (and|to) day {e.last_day}", text
        )
    # cities appear in the (shuffled) problem order
    head = text.split("\n\n")[0]
    positions = [head.index(c) for c in p.cities]
    assert positions == sorted(positions)


def test_prompt_flight_list() -> None:
    p = TripProblem(
        cities=["Porto", "Berlin", "Nice"],
        days={"Porto": 3, "Berlin": 2, "Nice": 2},
        total_days=5,
        direct_flights=[("Porto", "Berlin"), ("Nice", "Porto"), ("Berlin", "Porto")],
        events=[Event(city="Porto", first_day=1, last_day=3, description="attend a wedding")],
    )
    text = prompt_for(p)
    flights = text.split("direct flights:\n")[1].split("\n\n")[0]
    assert flights == "Porto and Berlin, from Nice to Porto."
    assert "You are going to attend a wedding in Porto between day 1 and day 3." in text


def test_prompt_mentions_every_flight() -> None:
    for p in PROBLEMS[:40]:
        flights = prompt_for(p).split("direct flights:\n")[1].split("\n\n")[0]
        for a, b in p.direct_flights:
            assert (
                f"{a} and {b}" in flights
                or f"{b} and {a}" in flights
                or (f"from {a} to {b}" in flights)
            )


# ------------------------------------------------------------------ solver


def test_solver_on_hand_made_problem(small: TripProblem) -> None:
    assert solve(small) == [("A", 3), ("B", 2), ("C", 4)]
    assert count_solutions(small) == 1


def test_solver_respects_events(small: TripProblem) -> None:
    more = small.model_copy(update={"direct_flights": [*small.direct_flights, ("C", "A")]})
    assert count_solutions(more) == 3  # A B C, B C A, C A B
    p = more.model_copy(
        update={
            "events": [Event(city="C", first_day=1, last_day=2, description="attend a workshop")]
        }
    )
    assert count_solutions(p) == 1
    assert solve(p) == [("C", 4), ("A", 3), ("B", 2)]


def test_solver_returns_none_without_a_path() -> None:
    p = TripProblem(
        cities=["A", "B", "C"],
        days={"A": 2, "B": 2, "C": 2},
        total_days=4,
        direct_flights=[("A", "B")],
    )
    assert solve(p) is None
    assert count_solutions(p) == 0


# ------------------------------------------------------------------ known-bad plans


def test_wrong_order_without_direct_flight(small: TripProblem) -> None:
    # B -> A -> C: days chain fine, but A -> C has no direct flight.
    bad = itinerary_record([("B", 2), ("A", 3), ("C", 4)])
    assert "flights_link_stays" in _violated(bad, small)
    assert evaluate(small, bad).violations == ["flights_link_stays"]


def test_wrong_stay_length(small: TripProblem) -> None:
    bad = itinerary_record([("A", 2), ("B", 3), ("C", 4)])
    assert "stay_lengths" in _violated(bad, small)
    result = evaluate(small, bad)
    assert not result.valid and not result.exact_match
    assert result.violations == ["stay_lengths"]
    assert result.plan == [("A", 2), ("B", 3), ("C", 4)]


def test_repeated_city(small: TripProblem) -> None:
    bad = itinerary_record([("A", 3), ("B", 2), ("A", 4)])
    assert "visits_every_city_once" in _violated(bad, small)
    assert "visits_every_city_once" in evaluate(small, bad).violations


def test_unknown_city(small: TripProblem) -> None:
    bad = itinerary_record([("A", 3), ("B", 2), ("Z", 4)])
    assert "visits_every_city_once" in _violated(bad, small)


def test_missing_flight(small: TripProblem) -> None:
    bad = itinerary_record(small.golden)
    del bad["flights"][-1]
    assert "flights_link_stays" in _violated(bad, small)
    assert evaluate(small, bad).violations == ["flights_link_stays"]


def test_flight_on_wrong_day(small: TripProblem) -> None:
    bad = itinerary_record(small.golden)
    bad["flights"][0]["day"] += 1
    assert "flights_link_stays" in _violated(bad, small)


def test_gap_between_stays(small: TripProblem) -> None:
    bad = itinerary_record(small.golden)
    bad["stays"][1]["first_day"] += 1
    bad["stays"][1]["last_day"] += 1
    assert "stays_follow_each_other" in _violated(bad, small)


def test_trip_too_short(small: TripProblem) -> None:
    bad = itinerary_record([("A", 3), ("B", 2)])
    assert "visits_every_city_once" in _violated(bad, small)


def test_event_not_covered(small: TripProblem) -> None:
    p = small.model_copy(
        update={
            "direct_flights": [*small.direct_flights, ("A", "C"), ("C", "B")],
            "events": [Event(city="B", first_day=6, last_day=7, description="meet a friend")],
            "golden": [("A", 3), ("C", 4), ("B", 2)],
        }
    )
    good = itinerary_record(p.golden)
    Itinerary.model_validate(good, context=p)
    bad = itinerary_record(small.golden)  # B on days 3-4 misses days 6-7
    assert "events_covered" in _violated(bad, p)
    result = evaluate(p, bad)
    assert result.violations == ["events_covered"] and not result.exact_match


def test_evaluate_lists_every_violated_relation(small: TripProblem) -> None:
    bad = itinerary_record([("A", 3), ("B", 2), ("C", 4)])
    bad["stays"][0]["last_day"] = 2
    del bad["flights"][0]
    result = evaluate(small, bad)
    assert result.violations == ["stays_follow_each_other", "stay_lengths", "flights_link_stays"]


def test_generated_bad_plans_are_rejected() -> None:
    for p in PROBLEMS[:60]:
        good = itinerary_record(p.golden)
        swapped = list(p.golden)
        swapped[0], swapped[1] = swapped[1], swapped[0]
        result = evaluate(p, itinerary_record(swapped))
        assert not result.valid and not result.exact_match  # the golden plan is unique
        short = copy.deepcopy(good)
        short["stays"][-1]["last_day"] += 1
        assert "stays_follow_each_other" in evaluate(p, short).violations


# ------------------------------------------------------------------ evaluator inputs


def test_broken_json(small: TripProblem) -> None:
    text = json.dumps(itinerary_record(small.golden))[:-5]
    result = evaluate(small, text)
    assert not result.parse_ok and not result.valid and not result.exact_match
    assert result.violations[0].startswith("parse:")
    with pytest.raises(ValidationError, match=r"json_invalid|Invalid JSON"):
        Itinerary.model_validate_json(text, context=small)


def test_fenced_json_and_bytes(small: TripProblem) -> None:
    text = "Here is the plan:\n```json\n" + json.dumps(itinerary_record(small.golden)) + "\n```"
    assert evaluate(small, text).valid
    assert evaluate(small, text.encode()).exact_match


def test_model_instance_and_dict(small: TripProblem) -> None:
    record = itinerary_record(small.golden)
    instance = Itinerary.model_validate(record, context=small)
    assert evaluate(small, instance).valid
    assert evaluate(small, record, model=Itinerary).exact_match


def test_schema_error(small: TripProblem) -> None:
    bad = itinerary_record(small.golden)
    bad["stays"][0]["first_day"] = "one"
    result = evaluate(small, bad)
    assert result.parse_ok and not result.valid
    assert result.violations and result.violations[0].startswith("schema: stays.0.first_day")
    assert evaluate(small, "[1, 2]").violations[0].startswith("schema:")
    assert evaluate(small, {"stays": []}).violations == ["schema: flights: Field required"]


def test_exact_match_without_flights_is_still_exact(small: TripProblem) -> None:
    record = itinerary_record(small.golden)
    record["flights"] = []
    result = evaluate(small, record)
    assert result.exact_match and not result.valid  # official scoring reads the stays only
    assert plan_of(record) == [("A", 3), ("B", 2), ("C", 4)]
    assert plan_of({"stays": [{"city": "A"}]}) is None
