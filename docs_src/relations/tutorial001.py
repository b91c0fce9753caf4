from pydantic import BaseModel, Field

from factorspec_sdk import distinct, relation
from factorspec_sdk.domains.trip import TripProblem


class Stay(BaseModel):
    city: str
    first_day: int = Field(ge=1, le=60)
    last_day: int = Field(ge=1, le=60)


class Itinerary(BaseModel):
    stays: list[Stay] = Field(max_length=10)

    @relation
    def visits_every_city_once(self, trip: TripProblem) -> bool:
        """One stay per city, none repeated."""
        return (
            len(self.stays) == len(trip.cities)
            and all(s.city in trip.cities for s in self.stays)
            and distinct(s.city for s in self.stays)
        )


trip = TripProblem(
    cities=["Paris", "Rome"],
    days={"Paris": 3, "Rome": 2},
    total_days=4,
    direct_flights=[("Paris", "Rome")],
)
ok = Itinerary.model_validate(
    {
        "stays": [
            {"city": "Paris", "first_day": 1, "last_day": 3},
            {"city": "Rome", "first_day": 3, "last_day": 4},
        ]
    },
    context=trip,
)
print(ok)
