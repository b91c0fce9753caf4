# Schema *and* relations: the relation IR of a model for one context, built on the client
URL="${FACTORSPEC_URL:-http://127.0.0.1:8000}"
python - > request.json <<'PY'
import json

from factorspec_sdk.domains.trip import SAMPLE_CONTEXT, SAMPLE_PROMPT, Itinerary
from factorspec_sdk.ir import to_ir

print(json.dumps({
    "model": "SmolLM2-135M-Instruct",
    "messages": [{"role": "user", "content": SAMPLE_PROMPT}],
    "factorspec": {"ir": to_ir(Itinerary, SAMPLE_CONTEXT)},
}))
PY
curl -s "$URL/v1/chat/completions" -H "Content-Type: application/json" -d @request.json
