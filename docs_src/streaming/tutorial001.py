from factorspec_sdk import Client
from factorspec_sdk.domains.trip import Itinerary, generate_problem, prompt_for

trip = generate_problem(4, seed=101, unique=False)  # several valid orders: the model picks

client = Client()
with client.stream(Itinerary, prompt_for(trip), context=trip) as stream:
    for partial in stream:  # a PartialItinerary: fields are None until written
        stays = partial.stays or []
        print(len(stays), "stays so far:", [(s.city, s.first_day, s.last_day) for s in stays])
plan = stream.result.value  # the validated Itinerary
print("final:", [(s.city, s.first_day, s.last_day) for s in plan.stays])
