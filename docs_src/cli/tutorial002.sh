# A context as JSON: validated into the type the relations annotate (here TripProblem)
python -c "from factorspec_sdk.domains.trip import SAMPLE_CONTEXT as c; print(c.model_dump_json())" > trip.json
python -c "from factorspec_sdk.domains.trip import SAMPLE_PROMPT as p; print(p)" > prompt.txt
factorspec generate factorspec_sdk.domains.trip:Itinerary --prompt-file prompt.txt --context trip.json
