# A context as JSON: validated into the type the relations annotate (here TripProblem)
python -c "from examples.itinerary import SAMPLE_CONTEXT as c; print(c.model_dump_json())" > trip.json
python -c "from examples.itinerary import SAMPLE_PROMPT as p; print(p)" > prompt.txt
factorspec generate examples/itinerary.py:Itinerary --prompt-file prompt.txt --context trip.json
