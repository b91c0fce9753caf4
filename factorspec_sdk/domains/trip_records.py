"""Trip plans as records and back, and what an answer to a trip problem breaks.

A plan is the ordered list of (city, stay length); its record is the ``Itinerary`` JSON
(`itinerary_record`), and a record's plan is read back as the official evaluation reads
"Day a-b" (`plan_of`). `parse_answer` reads a model's JSON answer out of text (a fenced or
embedded object is accepted), and `violations_of` names every schema error or broken relation
of a record; `factorspec_sdk.domains.trip.evaluate` scores an answer with them.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from factorspec_sdk.relations.decorator import evaluate as run_relation
from factorspec_sdk.relations.decorator import relations_of

if TYPE_CHECKING:
    from factorspec_sdk.domains.trip import TripProblem

__all__ = [
    "Evaluation",
    "itinerary_record",
    "parse_answer",
    "plan_of",
    "plan_spans",
    "violations_of",
]


def plan_spans(plan: Sequence[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """(city, first_day, last_day) of each stay of an ordered plan."""
    out = []
    day = 1
    for city, length in plan:
        out.append((city, day, day + length - 1))
        day += length - 1
    return out


def itinerary_record(plan: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """The JSON record (``{"stays": [...], "flights": [...]}``) of an ordered plan.

    Consecutive stays share their boundary day, and each flight is on that day.
    """
    spans = plan_spans(plan)
    return {
        "stays": [{"city": c, "first_day": f, "last_day": last} for c, f, last in spans],
        "flights": [
            {"day": a[2], "origin": a[0], "destination": b[0]} for a, b in itertools.pairwise(spans)
        ],
    }


def plan_of(record: Mapping[str, Any]) -> list[tuple[str, int]] | None:
    """The ordered (city, days) list of a record's stays, or ``None`` if it has no such list.

    Days are counted as the official evaluation reads "Day a-b": ``b - a + 1``. A dated
    record's stays (``first_date``, ``last_date``) count their dates the same way.
    """
    stays = record.get("stays")
    if not isinstance(stays, list):
        return None
    plan = []
    for s in stays:
        if not isinstance(s, Mapping):
            return None
        city, first, last = s.get("city"), s.get("first_day"), s.get("last_day")
        if "first_date" in s:
            first, last = _ordinal(s.get("first_date")), _ordinal(s.get("last_date"))
        if (
            not isinstance(city, str)
            or not isinstance(first, int)
            or not isinstance(last, int)
            or isinstance(first, bool)
            or isinstance(last, bool)
        ):
            return None
        plan.append((city, last - first + 1))
    return plan


def _ordinal(text: object) -> int | None:
    """The ordinal of an ISO date text (``YYYY-MM-DD``), or None."""
    if not isinstance(text, str):
        return None
    try:
        return dt.date.fromisoformat(text).toordinal()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The score of one answer.

    Attributes:
        valid: the record passes ``Itinerary.model_validate(data, context=problem)``.
        exact_match: the ordered (city, days) list of its stays equals the golden plan.
        parse_ok: the answer parsed as JSON (always true for a dict or a model instance).
        violations: what failed: ``"parse: ..."``, ``"schema: <loc>: <msg>"`` or the names of
            the violated relations (all of them, not only the first pydantic reports).
        plan: the ordered (city, days) list read from the stays, when readable.
    """

    valid: bool
    exact_match: bool
    parse_ok: bool
    violations: list[str] = field(default_factory=list)
    plan: list[tuple[str, int]] | None = None


def parse_answer(text: str) -> Any:
    """``json.loads``, falling back to the outermost ``{...}`` in the text (code fences, prose)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            try:
                return json.loads(text[start : end + 1])
            except json.JSONDecodeError:
                pass
        raise ValueError(str(exc)) from exc


@lru_cache(maxsize=32)
def _field_adapters(model: type[BaseModel]) -> tuple[tuple[str, str, bool, TypeAdapter[Any]], ...]:
    """(name, key, required, adapter) of each field; the adapter keeps the Field constraints."""
    out = []
    for name, info in model.model_fields.items():
        annotation: Any = info.annotation
        if info.metadata:
            annotation = Annotated[(annotation, *info.metadata)]
        out.append((name, info.alias or name, info.is_required(), TypeAdapter(annotation)))
    return tuple(out)


def violations_of(model: type[BaseModel], data: Any, problem: TripProblem) -> list[str]:
    """Schema errors, else the names of every relation that does not hold."""
    if not isinstance(data, Mapping):
        return [f"schema: the record must be a JSON object, got {type(data).__name__}"]
    values: dict[str, Any] = {}
    errors: list[str] = []
    for name, key, required, adapter in _field_adapters(model):
        if key not in data:
            if required:
                errors.append(f"schema: {key}: Field required")
            continue
        try:
            values[name] = adapter.validate_python(data[key], context=problem)
        except ValidationError as exc:
            for err in exc.errors():
                loc = ".".join(str(p) for p in (key, *err["loc"]))
                errors.append(f"schema: {loc}: {err['msg']}")
    if errors:
        return errors
    instance = model.model_construct(**values)
    broken = [
        info.name for info in relations_of(model) if not run_relation(info, instance, problem)
    ]
    if broken:
        return broken
    try:  # some other validator failed: report pydantic's own messages
        model.model_validate(data, context=problem)
    except ValidationError as exc:
        return [f"schema: {err['msg']}" for err in exc.errors()]
    return []  # pragma: no cover
