# The factor graph of the example itinerary for its bundled 5-city trip
factorspec check examples/itinerary.py:Itinerary --context examples/itinerary.py:SAMPLE_CONTEXT
