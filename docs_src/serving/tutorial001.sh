# Start the server (embedded engine, default model) in another terminal:
#   factorspec serve --engine embedded --host 127.0.0.1 --port 8000
URL="${FACTORSPEC_URL:-http://127.0.0.1:8000}"
curl -s "$URL/v1/models"
echo
# A plain JSON schema (no relations), as with any OpenAI-compatible server
curl -s "$URL/v1/chat/completions" -H "Content-Type: application/json" -d '{
  "model": "SmolLM2-135M-Instruct",
  "messages": [{"role": "user", "content": "A meeting on a weekday, as JSON."}],
  "response_format": {"type": "json_schema", "json_schema": {"name": "Slot", "schema": {
    "type": "object",
    "properties": {
      "day": {"enum": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]},
      "start_hour": {"type": "integer", "minimum": 9, "maximum": 17}
    },
    "required": ["day", "start_hour"],
    "additionalProperties": false
  }}}
}'
