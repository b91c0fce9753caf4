from factorspec_sdk import Client
from factorspec_sdk.domains.trip import Itinerary, generate_problem, prompt_for

trip = generate_problem(4, seed=101, unique=False)  # several valid orders: the model picks

client = Client()
result = client.generate(Itinerary, prompt_for(trip), context=trip, return_result=True)
prov = result.provenance
print(prov.summary())
for source in prov.sources.values():
    if source.name.startswith("stays["):
        print(f"{source.name}: {source.origin} {list(source.relations)}")
