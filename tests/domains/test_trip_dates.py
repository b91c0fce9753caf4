"""The dated itinerary: the same validity as the int-day one, dates the relations fix."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random

import pytest
from pydantic import ValidationError

from examples import itinerary_dates
from factorspec_sdk.domains.trip import Itinerary, generate_problem, itinerary_record
from factorspec_sdk.domains.trip_dates import (
    DatedItinerary,
    dated_problem,
    dated_prompt_for,
    dated_record,
)
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.writer.automaton import Writer

START = dt.date(2027, 2, 25)  # across the end of February


def _valid(model: type, record: object, context: object) -> bool:
    try:
        model.model_validate(record, context=context)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("seed", range(6))
def test_a_dated_plan_is_valid_exactly_when_the_int_day_plan_is(seed: int) -> None:
    """Random orders and stay lengths: both models agree on every plan (the golden one too)."""
    problem = generate_problem(3 + seed % 4, seed=seed, unique=False)
    dated = dated_problem(problem, START)
    rng = random.Random(seed)
    plans = [list(problem.golden)]
    for _ in range(30):
        cities = rng.sample(problem.cities, len(problem.cities))
        plans.append([(c, problem.days[c] + rng.choice([0, 0, 0, 1, -1])) for c in cities])
    seen = set()
    for plan in plans:
        plan = [(c, max(n, 1)) for c, n in plan]
        days = _valid(Itinerary, itinerary_record(plan), problem)
        assert _valid(DatedItinerary, dated_record(dated, plan), dated) == days, plan
        seen.add(days)
    assert seen == {True, False}


def test_the_relations_fix_every_date_of_a_unique_problem() -> None:
    """A problem with one valid plan: the writer's forced text is the whole dated record."""
    problem = dated_problem(generate_problem(5, seed=1), dt.date(2026, 12, 28))
    writer = Writer(compile_spec(DatedItinerary, context=problem))
    text, state = writer.forced(writer.start())
    assert state.done
    assert json.loads(text) == dated_record(problem, list(problem.golden))


def test_dates_cross_months_and_years_in_the_prompt_and_record() -> None:
    problem = itinerary_dates.SAMPLE_CONTEXT
    assert "starts on 2026-12-28 and ends on 2027-01-19" in itinerary_dates.SAMPLE_PROMPT
    record = dated_record(problem, list(problem.golden))
    DatedItinerary.model_validate(record, context=problem)
    assert record["stays"][-1]["last_date"] == "2027-01-19"
    for e in problem.events:
        assert f"from {problem.date_of(e.first_day)} to {problem.date_of(e.last_day)}" in (
            dated_prompt_for(problem)
        )


def test_every_stay_date_is_a_choice_only_through_the_cities() -> None:
    """With several valid orders, the only choice points are cities and list ends."""
    problem = dated_problem(generate_problem(4, seed=7, unique=False), START)
    writer = Writer(compile_spec(DatedItinerary, context=problem))
    state = writer.start()
    rng = random.Random(0)
    for _ in itertools.count():
        _, state = writer.forced(state)
        if state.done:
            break
        options = writer.choices(state)
        assert isinstance(options, list)
        texts = [o.text for o in options]
        assert not any(t[:1].isdigit() for t in texts), texts  # no date digit is chosen
        state = rng.choice(options).state
