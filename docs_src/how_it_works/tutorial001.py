"""Which tokens of a real record were certain, and which the model chose.

Generates an itinerary with the embedded engine, then replays the record's tokens through the
token planner: a token is *certain* when it is the only token the relations allow at that
point (it is drafted without asking the model), *chosen* otherwise.
"""

from factorspec_sdk import Client
from factorspec_sdk.domains.trip import Itinerary, generate_problem, prompt_for
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import planner_for

trip = generate_problem(4, seed=6, unique=False)  # 10 valid plans: real choices
client = Client()
result = client.generate(Itinerary, prompt_for(trip), context=trip, return_result=True)

tokenizer = client.engine.tokenizer
planner = planner_for(compile_spec(Itinerary, trip), tokenizer)  # a writer, its oracle
cursor = planner.start()
spans: list[tuple[bool, str]] = []  # (certain, text); consecutive tokens of a kind merged
n_certain = 0
for token in result.tokens:
    certain = planner.certain(cursor) is not None
    n_certain += certain
    text = tokenizer.decode([token]).decode("utf-8", errors="replace")
    if spans and spans[-1][0] == certain:
        spans[-1] = (certain, spans[-1][1] + text)
    else:
        spans.append((certain, text))
    cursor = planner.advance(cursor, token)

# Chosen tokens in [[double brackets]], certain text as is.
print("".join(text if certain else f"[[{text}]]" for certain, text in spans))
print(f"{n_certain} of {len(result.tokens)} tokens certain")
print(result.stats.summary())
