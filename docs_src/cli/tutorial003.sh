# Exit codes: 0 ok, 1 spec error, 2 usage error, 3 engine error, 4 generation error
factorspec check factorspec_sdk.domains.trip:Itinerary  # no --context: the relations need one
echo "exit code: $?"  # 1
factorspec check factorspec_sdk.domains.trip:NoSuchModel
echo "exit code: $?"  # 2
