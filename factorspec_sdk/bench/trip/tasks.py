"""What the methods of one trip benchmark run work on: the run's `Setup` and one `Task` each.

`make_tasks` builds every problem's prompt, chat messages and prompt ids in one place, so all
methods see the same prompt text; `itinerary_schema` is the JSON schema the syntax-only
baselines get, and `relation_docs` / `violation_sentences` word the retry message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from factorspec_sdk.domains.trip import TripProblem, prompt_for
from factorspec_sdk.domains.trip_dates import DatedTripProblem, dated_prompt_for
from factorspec_sdk.engines.completion import CompletionEngine
from factorspec_sdk.engines.protocol import ChatMessage, Engine

if TYPE_CHECKING:
    from pydantic import BaseModel

    from factorspec_sdk.bench.baselines import XGrammarBackend
    from factorspec_sdk.client import Client

__all__ = [
    "Setup",
    "Task",
    "itinerary_schema",
    "make_tasks",
    "relation_docs",
    "violation_sentences",
]


def itinerary_schema(problem: TripProblem) -> dict[str, Any]:
    """The strongest JSON schema a user would write for one problem's itinerary.

    Cities are an enum of the trip's cities, every day is bounded to ``1..total_days``, and
    both lists have exact lengths (``minItems == maxItems``): one stay per city, one flight
    fewer. Everything the schema language cannot say (the day chain, the stay lengths, which
    flights exist, no repeated city) is left to the model. For a dated problem the days are
    dates (``first_date``, ``last_date``, ``date``): strings of ``format: date``, as
    Pydantic's schema of a ``datetime.date`` says (JSON Schema has no date bounds).
    """
    cities = list(problem.cities)
    n = len(cities)
    day: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": problem.total_days}
    names = ("first_day", "last_day", "day")
    if isinstance(problem, DatedTripProblem):
        day = {"type": "string", "format": "date"}
        names = ("first_date", "last_date", "date")
    city = {"type": "string", "enum": cities}

    def obj(props: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": props,
            "required": list(props),
            "additionalProperties": False,
        }

    stay = obj({"city": city, names[0]: day, names[1]: day})
    flight = obj({names[2]: day, "origin": city, "destination": city})
    return obj(
        {
            "stays": {"type": "array", "items": stay, "minItems": n, "maxItems": n},
            "flights": {"type": "array", "items": flight, "minItems": n - 1, "maxItems": n - 1},
        }
    )


@dataclass(slots=True)
class Setup:
    """What the methods share for one run."""

    engine: Engine | CompletionEngine
    model: type[BaseModel]
    max_tokens: int
    max_retries: int
    backend: XGrammarBackend | None = None
    clients: dict[str, Client] = field(default_factory=dict)

    @property
    def logits_engine(self) -> Engine:
        """The engine as a logits `Engine` (the token-level baselines need one)."""
        if isinstance(self.engine, CompletionEngine):
            raise TypeError(f"the {self.engine.name} engine returns no logits")
        return self.engine

    def xgrammar(self) -> XGrammarBackend:
        """The XGrammar backend on the engine's vocabulary (built on first use)."""
        if self.backend is None:
            from factorspec_sdk.bench.baselines import XGrammarBackend

            self.backend = XGrammarBackend(self.logits_engine.tokenizer)
        return self.backend


@dataclass(slots=True)
class Task:
    """One problem as the methods see it."""

    index: int
    problem: TripProblem
    prompt: str
    messages: list[ChatMessage]
    prompt_ids: list[int]


def make_tasks(
    client: Client, model: type[BaseModel], problems: Iterable[tuple[int, TripProblem]]
) -> list[Task]:
    """One `Task` per ``(index, problem)``: the same prompt text for every method.

    The FactorSpec methods get ``client.prompt_ids`` (the prompt plus the schema hint the
    client adds); the baselines' chat messages carry the same hint, so their prompt ids are
    the same tokens.
    """
    from factorspec_sdk.prompts import chat_messages
    from factorspec_sdk.relations.pydantic_layout import build_layout

    layout = build_layout(model)
    tasks: list[Task] = []
    for i, problem in problems:
        if isinstance(problem, DatedTripProblem):
            prompt = dated_prompt_for(problem)
        else:
            prompt = prompt_for(problem)
        messages = chat_messages(prompt, layout=layout)
        ids = client.prompt_ids(prompt, layout=layout)
        tasks.append(Task(i, problem, prompt, messages, ids))
    return tasks


def relation_docs(model: type[BaseModel]) -> dict[str, str]:
    """The first docstring line of each relation of ``model``, by relation name."""
    from factorspec_sdk.relations.decorator import relations_of

    out = {}
    for info in relations_of(model):
        doc = (info.func.__doc__ or "").strip().splitlines()
        out[info.name] = doc[0].strip() if doc else ""
    return out


def violation_sentences(violations: Sequence[str], docs: dict[str, str]) -> list[str]:
    """The retry message's items: ``name (docstring)`` for relations, errors as they are."""
    out = []
    for v in violations:
        doc = docs.get(v)
        out.append(f"{v} ({doc.rstrip('.')})." if doc else v.rstrip(".") + ".")
    return out
