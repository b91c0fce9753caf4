"""Problem domains shipped with the library: the data, the Pydantic model and its relations.

A domain is what the benchmarks, the examples, the docs and the tests decode and score; it is
packaged (not kept in ``examples/``) so that an installed wheel can run them. `trip` is the
NATURAL PLAN-style trip planning domain (`trip.TripProblem`, `trip.Itinerary`, a sample
problem `trip.SAMPLE_CONTEXT` and its prompt), `trip_dates` the same trip with calendar
dates, `meeting` NATURAL PLAN's meeting scheduling (`meeting.Meeting`, a sample request).
"""
