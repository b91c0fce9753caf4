"""A support ticket: ``Optional`` fields, a ``Literal``, a str ``Enum``, patterned tags.

Triage writes a ticket from a customer's message: a title, the team (a str ``Enum``), the
priority (a ``Literal``), one to three tags that follow a pattern, the order number when
there is one (an ``Optional`` str), a refund amount when one is owed (an
``Optional`` bounded float) and the customer's sentiment (a bounded float). Refunds go to
billing, and an urgent ticket names its order (``ORD-`` and six digits).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from factorspec_sdk import relation

__all__ = ["CONTEXT", "GOLDEN", "PROMPT", "Team", "Ticket"]

Tag = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{1,19}$")]


class Team(str, Enum):  # noqa: UP042 (the spelling users write)
    """Who handles the ticket."""

    BILLING = "billing"
    SHIPPING = "shipping"
    TECHNICAL = "technical"
    ACCOUNT = "account"


class Ticket(BaseModel):
    """The triaged ticket."""

    title: str = Field(max_length=80)
    team: Team
    priority: Literal["low", "normal", "high", "urgent"]
    tags: list[Tag] = Field(min_length=1, max_length=3)
    order_id: str | None = Field(default=None, max_length=10)
    refund: float | None = Field(default=None, ge=0, le=500)
    sentiment: float = Field(ge=-1, le=1)

    @relation
    def refunds_go_to_billing(self) -> bool:
        """A refund is billing's."""
        return self.refund is None or self.team == Team.BILLING

    @relation
    def urgent_names_the_order(self) -> bool:
        """An urgent ticket names its order, and an order number starts with ``ORD-``."""
        return (self.priority != "urgent" or self.order_id is not None) and (
            self.order_id is None or self.order_id.startswith("ORD-")
        )


CONTEXT = None

PROMPT = (
    'Triage this message into a ticket. "Hi, my order ORD-204518 arrived with the blender '
    "jar cracked. I paid $89.99 and I need it for a party on Saturday. Please refund me or "
    'send a new jar as soon as possible." Give a short title, the team, the priority, 1 to '
    "3 lowercase tags, the order id, the refund owed (if any) and the customer's sentiment "
    "from -1 to 1."
)

GOLDEN = Ticket.model_validate(
    {
        "title": "Blender jar arrived cracked",
        "team": "billing",
        "priority": "urgent",
        "tags": ["damaged-item", "refund"],
        "order_id": "ORD-204518",
        "refund": 89.99,
        "sentiment": -0.6,
    }
)
"""The ticket the message asks for."""
