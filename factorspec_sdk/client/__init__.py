"""`Client` and `AsyncClient`: typed, always-valid records from a backend.

```python
client = Client()                                    # embedded engine, default model
plan = client.generate(Itinerary, prompt, context=trip)
result = client.generate(Itinerary, prompt, context=trip, return_result=True)
print(result.stats.summary())
```

Both share `BaseClient` (as httpx's ``Client`` and ``AsyncClient`` share ``BaseClient`` over
their transports), which owns everything but the waiting: the constructor arguments and the
`factorspec_sdk.backends.base.Backend` they choose, the keywords of ``generate`` turned into
`GenerationRequest` objects once (`GenerateOptions`, with one `SamplingParams` each), and the
results: every outcome validated against its model and context into a `GenerationResult`,
or mapped to a `FactorSpecError`, raised or returned per record (``return_exceptions``).
Every call compiles its records' specs (with the client's `SpecCompiler`, which keeps them)
before it asks for the backend, so a spec error (an unsupported construct, an unsatisfiable
spec) is raised without loading a model; the backend gets each request's spec with it, and
answers a `RecordOutcome` per request.
`Client` runs a batch on the backend in the calling thread. `AsyncClient` queues requests;
one background task per event loop drains whatever is waiting into one backend run (in a
worker thread), so concurrent callers are decoded together in one batch.

Each result's stats name where the call's time went (`factorspec_sdk.drafter.stats`): the
client adds the spec compile, the engine's load, the queue of `AsyncClient` and the
Pydantic validation to what the backend measured, and settles the call's wall.

One job per module: `base` (`BaseClient`: arguments, backend, requests, spec compiles),
`results` (`GenerateOptions`, `GenerationResult`, outcomes validated into results),
`sync_client` (`Client`), `async_client` (`AsyncClient` and its batcher).
"""

from factorspec_sdk.client.async_client import AsyncClient as AsyncClient
from factorspec_sdk.client.base import BaseClient as BaseClient
from factorspec_sdk.client.results import GenerateOptions as GenerateOptions
from factorspec_sdk.client.results import GenerationResult as GenerationResult
from factorspec_sdk.client.sync_client import Client as Client

__all__ = [
    "AsyncClient",
    "BaseClient",
    "Client",
    "GenerateOptions",
    "GenerationResult",
]
