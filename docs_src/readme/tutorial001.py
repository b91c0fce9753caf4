from pydantic import BaseModel

from factorspec_sdk import Client, distinct, relation
from factorspec_sdk.domains.trip import TripProblem, generate_problem, prompt_for


class Stay(BaseModel):
    city: str
    first_day: int
    last_day: int


class Itinerary(BaseModel):
    stays: list[Stay]

    @relation
    def visits_every_city_once(self, trip: TripProblem) -> bool:
        return (
            len(self.stays) == len(trip.cities)
            and all(s.city in trip.cities for s in self.stays)
            and distinct(s.city for s in self.stays)
        )

    @relation
    def stay_lengths(self, trip: TripProblem) -> bool:
        return all(s.last_day - s.first_day + 1 == trip.days[s.city] for s in self.stays)


trip = generate_problem(3, seed=1)  # cities, stay lengths, direct flights (the context)
prompt = prompt_for(trip)  # the trip in words

client = Client()  # embedded engine, CPU is fine
plan = client.generate(Itinerary, prompt, context=trip)  # -> Itinerary, always valid
Itinerary.model_validate(plan.model_dump(), context=trip)  # the same relations, in Python
print(plan)
