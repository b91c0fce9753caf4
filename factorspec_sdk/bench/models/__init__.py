"""The user-models suite: models written the way users write them, each with a request.

Each module holds one model as a user would write it from scratch (Pydantic fields and
``@relation`` methods, nothing shaped to the planner), the context of one request, its prompt
and the record a good model writes for it (``GOLDEN``). `factorspec_sdk.bench.user_models`
decodes them (``factorspec bench models``) and says where each record's time goes.

`NAMES` lists them, with what each has: meeting plans with datetimes chained by travel
times from a nested context, an invoice and expenses in ``Decimal`` at context rates, a
ticket and a sign-up form with ``Optional``/``Literal``/``Enum``/patterns, hotel stays with
dates, a roster of shifts with times, an order with nested stock look-ups, a workout whose
minutes cover a sum of products of two fields.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["NAMES", "UserModel", "load", "suite"]

NAMES: dict[str, str] = {
    "meeting_plan": "datetimes chained by travel times (nested dict context), windows, "
    "minimum lengths, 5-minute marks",
    "invoice": "Decimal lines, sum, round(subtotal * context rate, 2), due = issue + 30 days",
    "ticket": "Optional, Literal, str Enum, 1-3 patterned tags, bounded floats",
    "hotel_stays": "dates chained stay to stay, nights from a context dict, trains, weekdays",
    "shifts": "1-8 shifts with times: quarter hours, minutes, order, no overlap, budget",
    "expenses": "1-8 Decimal expenses at context rates, dates, order, limit, total",
    "signup": "form: Optional list, Literal, str Enum, e-mail pattern, distinct names",
    "order": "1-8 lines with nested stock look-ups, prices, weights, one warehouse",
    "workout": "2-6 exercises: sets x (reps x context pace + rest) summed, Optional note, "
    "str Enum, no group twice in a row",
}
"""Each model of the suite, by module name, with what it has."""


@dataclass(frozen=True, slots=True)
class UserModel:
    """One model of the suite with its request.

    Attributes:
        name: its module's name.
        has: what the model has (the kinds of fields and relations).
        model: the Pydantic model.
        context: the request's context (None: the relations read none).
        prompt: the request's prompt.
        golden: the record a good model writes for the request.
    """

    name: str
    has: str
    model: type[BaseModel]
    context: object
    prompt: str
    golden: BaseModel


def load(name: str) -> UserModel:
    """The suite's model called ``name`` (see `NAMES`).

    Raises:
        ValueError: no model of the suite has that name.
    """
    if name not in NAMES:
        raise ValueError(f"no model {name!r} in the suite; models: {', '.join(NAMES)}")
    module = importlib.import_module(f"{__name__}.{name}")
    golden = module.GOLDEN
    return UserModel(name, NAMES[name], type(golden), module.CONTEXT, module.PROMPT, golden)


def suite(names: list[str] | None = None) -> list[UserModel]:
    """The suite's models (``names``: these, in this order; None: all of them)."""
    return [load(name) for name in (names if names is not None else list(NAMES))]
