"""Backends: where `factorspec_sdk.client.Client` has its records decoded.

One `Backend` protocol (`backends.base`), three implementations:

- `LogitsBackend` (`backends.local`): a logits engine (embedded, scripted, vLLM logits)
  driven by `factorspec_sdk.drafter.loop.Decoder`;
- `CompletionBackend` (`backends.local`): a completion engine (vLLM, SGLang, an OpenAI
  server) driven by `factorspec_sdk.drafter.segments.SegmentDecoder`;
- `RemoteBackend` (`backends.remote`): a ``factorspec serve`` server, sent the relation IR.

`backends.connect` picks the backend for a server URL. The client owns the arguments, the
results and their validation; a backend turns requests into outcomes, one batch at a time.
"""
