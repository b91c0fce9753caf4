from factorspec_sdk import Client
from factorspec_sdk.domains.trip import Itinerary, generate_problem, prompt_for


def main() -> None:
    client = Client("vllm")  # in-process vLLM 0.32 on the default SmolLM2 folder
    trip = generate_problem(6, seed=3, unique=False)  # several valid plans: real choices
    result = client.generate(Itinerary, prompt_for(trip), context=trip, return_result=True)
    print(result.value.stays[0])
    print(result.stats.summary())  # verify steps = forwards vLLM ran for this record
    client.close()  # shuts vLLM's engine processes down


if __name__ == "__main__":  # vLLM starts worker processes: scripts need this guard
    main()
