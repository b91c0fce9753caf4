# The factor graph of the packaged trip model for its sample 5-city trip
factorspec check factorspec_sdk.domains.trip:Itinerary --context factorspec_sdk.domains.trip:SAMPLE_CONTEXT
