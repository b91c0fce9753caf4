"""The trip planning domain: problem, ``Itinerary`` model, generator, prompt, solver, evaluator.

The NATURAL PLAN data file (Zheng et al. 2024, arXiv 2406.04520) is not available offline, so
this module follows the paper's construction of its *trip planning* task:

- N European cities (3-10), each with a stay length (2-7 days). The day of a flight counts
  for both cities, so the trip lasts ``sum(stays) - (N - 1)`` days.
- A list of direct flights that contains the consecutive pairs of a golden order plus
  distractor pairs. Flights are *directed*: a two-way connection is listed both ways (and
  written "X and Y" in the prompt), a one-way one once ("from X to Y").
- 0-2 event windows taken from the golden plan ("attend a wedding in X between day a and
  day b": the stay in X covers days a..b).
- The golden plan: the ordered list of (city, stay length).

Scoring follows the official evaluation: *exact match* compares the ordered (city, days) list
of a plan with the golden one; *validity* is stricter than the paper and means the record
passes every relation of the `Itinerary` model below.

This module is the one home of the domain: ``examples/itinerary.py`` (``make run``), the
benchmarks (``factorspec_sdk.bench``), the docs snippets and the tests import it from here,
so an installed wheel can run all of them. Two jobs live beside it and are imported from
here too: the exhaustive solver (`factorspec_sdk.domains.trip_solver`: `solve`,
`count_solutions`) and plans as records and back (`factorspec_sdk.domains.trip_records`:
`itinerary_record`, `plan_of`, `Evaluation` and what `evaluate` reads an answer with).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from factorspec_sdk.domains.trip_records import (
    Evaluation,
    itinerary_record,
    parse_answer,
    plan_of,
    plan_spans,
    violations_of,
)
from factorspec_sdk.domains.trip_solver import count_solutions, solutions, solve
from factorspec_sdk.relations.decorator import distinct, relation

__all__ = [
    "EUROPEAN_CITIES",
    "MAX_CITIES",
    "MAX_STAY",
    "MAX_TRIP_DAYS",
    "MIN_CITIES",
    "MIN_STAY",
    "SAMPLE_CONTEXT",
    "SAMPLE_PROMPT",
    "Evaluation",
    "Event",
    "Flight",
    "Itinerary",
    "Stay",
    "TripProblem",
    "count_solutions",
    "evaluate",
    "generate_problem",
    "generate_problems",
    "itinerary_record",
    "plan_of",
    "prompt_for",
    "with_stays",
    "solve",
]

EUROPEAN_CITIES: tuple[str, ...] = (
    "Amsterdam",
    "Athens",
    "Barcelona",
    "Belgrade",
    "Berlin",
    "Brussels",
    "Bucharest",
    "Budapest",
    "Copenhagen",
    "Dublin",
    "Dubrovnik",
    "Edinburgh",
    "Florence",
    "Frankfurt",
    "Geneva",
    "Hamburg",
    "Helsinki",
    "Istanbul",
    "Krakow",
    "Lisbon",
    "London",
    "Lyon",
    "Madrid",
    "Manchester",
    "Milan",
    "Munich",
    "Naples",
    "Nice",
    "Oslo",
    "Paris",
    "Porto",
    "Prague",
    "Reykjavik",
    "Riga",
    "Rome",
    "Seville",
    "Split",
    "Stockholm",
    "Tallinn",
    "Valencia",
    "Venice",
    "Vienna",
    "Vilnius",
    "Warsaw",
    "Zurich",
)
"""The pool the generator draws cities from (ASCII spellings)."""

MIN_CITIES = 3
MAX_CITIES = 10
MIN_STAY = 2
MAX_STAY = 7
MAX_TRIP_DAYS = MAX_CITIES * MAX_STAY - (MAX_CITIES - 1)
"""Longest trip the generator makes (61 days): a bound for day fields."""

# (description, sentence template) of event windows, in the paper's phrasings.
_EVENTS: tuple[tuple[str, str], ...] = (
    (
        "attend a wedding",
        "You are going to attend a wedding in {city} between day {a} and day {b}.",
    ),
    (
        "attend a conference",
        "You have to attend a conference in {city} between day {a} and day {b}.",
    ),
    ("attend a workshop", "You have to attend a workshop in {city} between day {a} and day {b}."),
    (
        "attend an annual show",
        "There is an annual show you want to attend in {city} from day {a} to day {b}.",
    ),
    (
        "meet your friends to tour together",
        "You would like to meet your friends at {city} between day {a} and day {b} "
        "to tour together.",
    ),
    ("visit relatives", "You plan to visit relatives in {city} between day {a} and day {b}."),
    ("meet a friend", "You want to meet a friend in {city} between day {a} and day {b}."),
)
_EVENT_TEMPLATES = dict(_EVENTS)

_STAY_TEMPLATES: tuple[str, ...] = (
    "You want to spend {n} days in {city}.",
    "You would like to visit {city} for {n} days.",
    "You plan to stay in {city} for {n} days.",
)


class Event(BaseModel):
    """An event window: the stay in ``city`` must cover days ``first_day``..``last_day``."""

    city: str
    first_day: int
    last_day: int
    description: str


class TripProblem(BaseModel):
    """One trip planning problem; it is the per-request context of ``Itinerary``.

    Attributes:
        cities: the cities to visit, in a shuffled order (not the golden order).
        days: stay length of each city (the flight day counts for both cities).
        total_days: length of the trip, ``sum(days.values()) - (len(cities) - 1)``.
        direct_flights: directed pairs (origin, destination); a two-way connection is listed
            both ways.
        events: event windows that the stay in their city must cover.
        golden: the generator's plan, ordered (city, stay length) pairs.
    """

    cities: list[str]
    days: dict[str, int]
    total_days: int
    direct_flights: list[tuple[str, str]]
    events: list[Event] = Field(default_factory=list)
    golden: list[tuple[str, int]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> TripProblem:
        if sorted(self.days) != sorted(self.cities) or len(set(self.cities)) != len(self.cities):
            raise ValueError("`days` must give one stay length per city, cities distinct")
        expected = sum(self.days.values()) - (len(self.cities) - 1)
        if self.total_days != expected:
            raise ValueError(f"total_days is {self.total_days}, the stays give {expected}")
        known = set(self.cities)
        if any(a not in known or b not in known for a, b in self.direct_flights):
            raise ValueError("direct_flights may only name the problem's cities")
        if any(e.city not in known for e in self.events):
            raise ValueError("events may only name the problem's cities")
        return self


# --------------------------------------------------------------------------- the record model


class Stay(BaseModel):
    """Days ``first_day``..``last_day`` spent in ``city`` (the flight days count for both)."""

    city: str
    first_day: int = Field(ge=1, le=MAX_TRIP_DAYS)
    last_day: int = Field(ge=1, le=MAX_TRIP_DAYS)


class Flight(BaseModel):
    """A direct flight on ``day`` from ``origin`` to ``destination``."""

    day: int = Field(ge=1, le=MAX_TRIP_DAYS)
    origin: str
    destination: str


class Itinerary(BaseModel):
    """An ordered trip: one stay per city, linked by direct flights.

    The per-request context is a `TripProblem`; the relations make every plan a valid trip.
    """

    stays: list[Stay] = Field(max_length=10)
    flights: list[Flight] = Field(max_length=9)

    @relation
    def visits_every_city_once(self, trip: TripProblem) -> bool:
        """One stay per city of the trip, none repeated."""
        return (
            len(self.stays) == len(trip.cities)
            and all(s.city in trip.cities for s in self.stays)
            and distinct(s.city for s in self.stays)
        )

    @relation
    def stays_follow_each_other(self, trip: TripProblem) -> bool:
        """The trip starts on day 1, ends on its last day; a stay starts when the last ends."""
        return (
            self.stays[0].first_day == 1
            and self.stays[-1].last_day == trip.total_days
            and all(b.first_day == a.last_day for a, b in zip(self.stays, self.stays[1:]))
        )

    @relation
    def stay_lengths(self, trip: TripProblem) -> bool:
        """Each stay lasts as many days as asked for its city."""
        return all(s.last_day - s.first_day + 1 == trip.days[s.city] for s in self.stays)

    @relation
    def flights_link_stays(self, trip: TripProblem) -> bool:
        """A direct flight from each stay to the next, on the day the first ends."""
        return len(self.flights) == len(self.stays) - 1 and all(
            f.day == a.last_day
            and f.origin == a.city
            and f.destination == b.city
            and (a.city, b.city) in trip.direct_flights
            for f, a, b in zip(self.flights, self.stays, self.stays[1:])
        )

    @relation
    def events_covered(self, trip: TripProblem) -> bool:
        """The stay in an event's city covers the event's days."""
        return all(
            any(
                s.city == e.city and s.first_day <= e.first_day and e.last_day <= s.last_day
                for s in self.stays
            )
            for e in trip.events
        )


# --------------------------------------------------------------------------- generation


def generate_problem(num_cities: int, seed: int, *, unique: bool = True) -> TripProblem:
    """Generate one solvable trip problem with ``num_cities`` cities (3-10), reproducibly.

    The golden order is drawn first; its consecutive pairs become direct flights (two-way
    with probability 0.7, else one-way in the golden direction), then distractor pairs among
    the same cities are added (two-way with probability 0.6, else one-way in a random
    direction), and 0-2 event windows are cut out of the golden stays.

    With ``unique`` (the default) the golden plan is the only valid one, so that exact match
    is a fair score: while another order is valid, one of its flights that the golden plan
    does not take is dropped (the golden path alone admits no other order).
    """
    if not MIN_CITIES <= num_cities <= MAX_CITIES:
        raise ValueError(f"num_cities must be in {MIN_CITIES}..{MAX_CITIES}, got {num_cities}")
    rng = random.Random(seed)
    order = rng.sample(EUROPEAN_CITIES, num_cities)
    stays = [rng.randint(MIN_STAY, MAX_STAY) for _ in order]
    golden = list(zip(order, stays, strict=True))

    directed: set[tuple[str, str]] = set()
    connected: set[frozenset[str]] = set()
    for a, b in itertools.pairwise(order):
        directed.add((a, b))
        if rng.random() < 0.7:
            directed.add((b, a))
        connected.add(frozenset((a, b)))
    free = [
        (a, b)
        for i, a in enumerate(order)
        for b in order[i + 1 :]
        if frozenset((a, b)) not in connected
    ]
    if free:
        low = min(len(free), num_cities // 2)
        extra = rng.randint(low, min(len(free), num_cities + num_cities // 2))
        for a, b in rng.sample(free, extra):
            if rng.random() < 0.6:
                directed.update({(a, b), (b, a)})
            else:
                directed.add((a, b) if rng.random() < 0.5 else (b, a))
    flights = sorted(directed)
    rng.shuffle(flights)

    events: list[Event] = []
    spans = plan_spans(golden)
    for i in sorted(rng.sample(range(num_cities), rng.randint(0, 2))):
        city, first, last = spans[i]
        start = rng.randint(first, last - 1)
        end = rng.randint(start + 1, last)
        description = rng.choice(_EVENTS)[0]
        events.append(Event(city=city, first_day=start, last_day=end, description=description))

    cities = list(order)
    rng.shuffle(cities)
    problem = TripProblem(
        cities=cities,
        days=dict(golden),
        total_days=sum(stays) - (num_cities - 1),
        direct_flights=flights,
        events=events,
        golden=golden,
    )
    golden_pairs = set(itertools.pairwise(order))
    while unique:
        other = next((p for p in solutions(problem, 2) if p != golden), None)
        if other is None:
            break
        names = [c for c, _ in other]
        removable = [pair for pair in itertools.pairwise(names) if pair not in golden_pairs]
        drop = rng.choice(removable)
        problem.direct_flights = [pair for pair in problem.direct_flights if pair != drop]
    return problem


def generate_problems(
    n: int, cities_range: tuple[int, int] = (MIN_CITIES, MAX_CITIES), seed: int = 0
) -> list[TripProblem]:
    """Generate ``n`` problems with a city count drawn uniformly from ``cities_range``."""
    low, high = cities_range
    master = random.Random(seed)
    problems = []
    for _ in range(n):
        num_cities = master.randint(low, high)
        problems.append(generate_problem(num_cities, master.randrange(2**31)))
    return problems


def with_stays(problem: TripProblem, stays: Sequence[int]) -> TripProblem:
    """The same trip with other stay lengths (``stays[i]`` for the i-th golden city).

    Cities, flights and events' cities stay; the trip length follows; each event keeps its
    offset into its city's stay and its length, cut to fit the new stay. The golden plan
    stays valid (other orders may become valid too). Only the context's ints change, so a
    spec compiled for ``problem`` has the same shape (`factorspec_sdk.graph.compile_spec`).

    Raises:
        ValueError: ``stays`` has not one length per city, or a length below `MIN_STAY`.
    """
    if len(stays) != len(problem.golden) or min(stays, default=MIN_STAY) < MIN_STAY:
        raise ValueError(f"need {len(problem.golden)} stay lengths of at least {MIN_STAY}")
    old = {c: (f, last) for c, f, last in plan_spans(problem.golden)}
    golden = [(c, n) for (c, _), n in zip(problem.golden, stays, strict=True)]
    new = {c: (f, last) for c, f, last in plan_spans(golden)}
    events = []
    for e in problem.events:
        (f0, _), (f1, l1) = old[e.city], new[e.city]
        first = f1 + min(e.first_day - f0, l1 - f1 - 1)
        last = min(first + e.last_day - e.first_day, l1)
        events.append(e.model_copy(update={"first_day": first, "last_day": last}))
    return TripProblem(
        cities=problem.cities,
        days=dict(golden),
        total_days=sum(stays) - (len(stays) - 1),
        direct_flights=problem.direct_flights,
        events=events,
        golden=golden,
    )


# --------------------------------------------------------------------------- prompt


def prompt_for(problem: TripProblem) -> str:
    """The problem in the paper's wording (cities in ``problem.cities`` order)."""
    rng = random.Random("|".join(problem.cities) + f"|{problem.total_days}")
    parts = [
        f"You plan to visit {len(problem.cities)} European cities for {problem.total_days} "
        "days in total. You only take direct flights to commute between cities."
    ]
    for city in problem.cities:
        parts.append(rng.choice(_STAY_TEMPLATES).format(n=problem.days[city], city=city))
        for e in problem.events:
            if e.city == city:
                template = _EVENT_TEMPLATES.get(
                    e.description,
                    "You want to " + e.description + " in {city} between day {a} and day {b}.",
                )
                parts.append(template.format(city=city, a=e.first_day, b=e.last_day))
    pairs = set(problem.direct_flights)
    said: set[tuple[str, str]] = set()
    links = []
    for a, b in problem.direct_flights:
        if (a, b) in said:
            continue
        said.add((a, b))
        if (b, a) in pairs:
            said.add((b, a))
            links.append(f"{a} and {b}")
        else:
            links.append(f"from {a} to {b}")
    return (
        " ".join(parts)
        + "\n\nHere are the cities that have direct flights:\n"
        + ", ".join(links)
        + ".\n\nFind a trip plan of visiting the cities for "
        + f"{problem.total_days} days by taking direct flights to commute between them."
    )


# --------------------------------------------------------------------------- evaluation


def evaluate(
    problem: TripProblem,
    record_or_text: str | bytes | Mapping[str, Any] | BaseModel,
    model: type[BaseModel] | None = None,
) -> Evaluation:
    """Score an answer: JSON text (a fenced or embedded object is accepted), a dict or a model.

    Args:
        problem: the trip problem (also the validation context).
        record_or_text: the answer.
        model: the record model; defaults to `Itinerary`.
    """
    if model is None:
        model = Itinerary
    if isinstance(record_or_text, BaseModel):
        data: Any = record_or_text.model_dump(mode="json")
    elif isinstance(record_or_text, (str, bytes)):
        text = (
            record_or_text.decode("utf-8", "replace")
            if isinstance(record_or_text, bytes)
            else record_or_text
        )
        try:
            data = parse_answer(text)
        except ValueError as exc:
            return Evaluation(False, False, False, [f"parse: {exc}"])
    else:
        data = dict(record_or_text)

    plan = plan_of(data) if isinstance(data, Mapping) else None
    golden = [(c, d) for c, d in problem.golden]
    exact = plan is not None and bool(golden) and plan == golden
    try:
        model.model_validate(data, context=problem)
        valid = True
    except ValidationError:
        valid = False
    violations = [] if valid else violations_of(model, data, problem)
    return Evaluation(valid, exact, True, violations, plan)


# --------------------------------------------------------------------------- sample

SAMPLE_CONTEXT: TripProblem = generate_problem(5, seed=1)
"""A sample 5-city problem with two events, for the docs and ``factorspec check``'s examples
(golden: Copenhagen, Split, Berlin, Helsinki, Budapest)."""

SAMPLE_PROMPT: str = prompt_for(SAMPLE_CONTEXT)
"""`SAMPLE_CONTEXT` in the paper's wording."""
