"""A sign-up form: ``Optional`` parts, ``Literal`` choices, a str ``Enum``, a pattern.

The context is the service's offer: the countries it serves and its promotion codes. The
form takes a name, an e-mail address (a pattern), an age, a country, a plan and a billing
period. A family plan lists two to five other members with distinct names, and only a
family plan lists any; members under 18 and account holders under 18 need the family plan;
a promotion code, when given, is one of the service's and only on annual billing.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, Field

from factorspec_sdk import distinct, relation

__all__ = ["CONTEXT", "GOLDEN", "PROMPT", "Country", "Member", "Offer", "Signup"]


class Country(str, Enum):  # noqa: UP042 (the spelling users write)
    """Where the account holder lives."""

    FRANCE = "FR"
    GERMANY = "DE"
    SPAIN = "ES"
    ITALY = "IT"
    NETHERLANDS = "NL"
    PORTUGAL = "PT"


class Offer(BaseModel):
    """The context: where the service is sold, and its promotion codes."""

    countries: list[Country]
    promo_codes: list[str]


class Member(BaseModel):
    """Another member of a family plan."""

    name: str = Field(max_length=30)
    age: int = Field(ge=0, le=120)


class Signup(BaseModel):
    """The form."""

    full_name: str = Field(max_length=60)
    email: str = Field(pattern=r"^[a-z0-9._-]{1,30}@[a-z0-9-]{1,20}\.[a-z]{2,6}$")
    age: int = Field(ge=13, le=120)
    country: Country
    plan: Literal["basic", "family", "pro"]
    billing: Literal["monthly", "annual"]
    members: list[Member] | None = Field(default=None, max_length=5)
    promo_code: str | None = Field(default=None, max_length=12)

    @relation
    def sold_there(self, offer: Offer) -> bool:
        """The service is sold in the holder's country."""
        return self.country in offer.countries

    @relation
    def family_members(self) -> bool:
        """A family plan lists two to five members with distinct names; no other plan any."""
        if self.plan == "family":
            return (
                self.members is not None
                and 2 <= len(self.members) <= 5
                and distinct(m.name for m in self.members)
            )
        return self.members is None

    @relation
    def minors_on_the_family_plan(self) -> bool:
        """Anyone under 18 is on a family plan."""
        return (self.age >= 18 or self.plan == "family") and (
            self.members is None or all(m.age >= 18 or self.plan == "family" for m in self.members)
        )

    @relation
    def promotion(self, offer: Offer) -> bool:
        """A promotion code is one of the service's, and only on annual billing."""
        return self.promo_code is None or (
            self.promo_code in offer.promo_codes and self.billing == "annual"
        )


CONTEXT = Offer(
    countries=[Country.FRANCE, Country.SPAIN, Country.PORTUGAL, Country.ITALY],
    promo_codes=["WINTER26", "FAMILY10", "STUDENT"],
)

PROMPT = (
    "Fill in the sign-up form from this message: \"Hello, I'm Lucia Fernandez, 41, from "
    "Spain (lucia.fernandez@correo.es). I want the family plan for me, my husband Pablo "
    '(43) and our kids Marta (12) and Leo (9), paid yearly, with the code FAMILY10."'
)

GOLDEN = Signup.model_validate(
    {
        "full_name": "Lucia Fernandez",
        "email": "lucia.fernandez@correo.es",
        "age": 41,
        "country": "ES",
        "plan": "family",
        "billing": "annual",
        "members": [
            {"name": "Pablo", "age": 43},
            {"name": "Marta", "age": 12},
            {"name": "Leo", "age": 9},
        ],
        "promo_code": "FAMILY10",
    },
    context=CONTEXT,
)
"""The form the message asks for."""
