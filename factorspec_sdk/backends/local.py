"""Backends over a local engine object: `LogitsBackend` and `CompletionBackend`.

Both build one `DecodeJob` per request the same way (compile the spec for the request's
context, a writer and a token planner over the engine's tokenizer, the prompt through the
engine's chat template) and run every job of a batch in one decoder run; they differ in the
decoder: `factorspec_sdk.drafter.loop.Decoder` needs logits, a completion engine (vLLM,
SGLang, an OpenAI server) gets `factorspec_sdk.drafter.segments.SegmentDecoder`.
`engine_backend` picks the one for an engine.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from typing import Generic, TypeVar

from factorspec_sdk.backends.base import GenerationRequest
from factorspec_sdk.drafter.loop import (
    DecodeJob,
    DecodeOutcome,
    Decoder,
    DecoderConfig,
    GenerationStats,
)
from factorspec_sdk.drafter.segments import SegmentDecoder
from factorspec_sdk.engines.completion import CompletionEngine
from factorspec_sdk.engines.protocol import Engine
from factorspec_sdk.partials import PartialStream
from factorspec_sdk.prompts import Prompt, chat_messages
from factorspec_sdk.relations.layout import RootLayout
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import Writer

__all__ = ["CompletionBackend", "EngineBackend", "LogitsBackend", "engine_backend"]

E = TypeVar("E", bound=Engine | CompletionEngine)


class EngineBackend(ABC, Generic[E]):
    """What the local backends share: jobs from requests, one decoder run per batch.

    Args:
        engine: the engine to decode on (the backend closes it in `close`).
        config: drafting options; a request's ``speculative`` overrides its setting.
    """

    def __init__(self, engine: E, config: DecoderConfig | None = None) -> None:
        self.engine: E = engine
        self.config = config or DecoderConfig()
        self._lock = threading.Lock()  # one decoder drives the engine at a time

    @property
    def name(self) -> str:
        """The engine's name."""
        return self.engine.name

    def prompt_ids(
        self,
        prompt: Prompt,
        *,
        system: str | None = None,
        layout: RootLayout | None = None,
        hint: bool = True,
    ) -> list[int]:
        """Token ids of `factorspec_sdk.prompts.chat_messages` with the chat template applied."""
        messages = chat_messages(prompt, system=system, layout=layout, hint=hint)
        return self.engine.apply_chat_template(messages)

    def job(self, request: GenerationRequest) -> DecodeJob:
        """The decoder job of ``request`` (compiles its spec: spec errors raise here)."""
        from factorspec_sdk.graph import compile_spec

        spec = compile_spec(request.model, request.context)
        planner = Planner(Writer(spec), self.engine.tokenizer)
        ids = self.prompt_ids(
            request.prompt,
            system=request.system,
            layout=spec.layout,
            hint=request.schema_in_prompt,
        )
        job = DecodeJob(planner, ids, request.params)
        sink = request.on_partial
        if sink is not None:
            stream = PartialStream(request.model, planner, request.params.max_tokens)

            def watch(tokens: Sequence[int]) -> None:
                for view in stream.feed_tokens(tokens):
                    sink(view)

            first = stream.start()
            if first is not None:
                sink(first)
            job.watch = watch
        return job

    def run(self, requests: Sequence[GenerationRequest]) -> list[DecodeOutcome]:
        """Decode ``requests`` in one decoder run (one per ``speculative`` setting asked)."""
        outcomes: dict[int, DecodeOutcome] = {}
        groups: dict[bool, list[tuple[int, DecodeJob]]] = {}
        for i, request in enumerate(requests):
            try:
                job = self.job(request)
            except Exception as exc:
                outcomes[i] = DecodeOutcome("", [], GenerationStats(), exc)
                continue
            speculative = request.speculative
            if speculative is None:
                speculative = self.config.speculative
            groups.setdefault(speculative, []).append((i, job))
        with self._lock:
            for speculative, items in groups.items():
                config = replace(self.config, speculative=speculative)
                jobs = [job for _, job in items]
                try:
                    done = self.decoder(config).run(jobs)
                except Exception as exc:  # the decoder refused the whole run
                    done = [DecodeOutcome("", [], GenerationStats(), exc) for _ in jobs]
                for (i, _), out in zip(items, done, strict=True):
                    outcomes[i] = out
        return [outcomes[i] for i in range(len(requests))]

    @abstractmethod
    def decoder(self, config: DecoderConfig) -> Decoder | SegmentDecoder:
        """A decoder over the engine with ``config``."""

    def close(self) -> None:
        """Close the engine (if it has a ``close``)."""
        closer = getattr(self.engine, "close", None)
        if callable(closer):
            closer()


class LogitsBackend(EngineBackend[Engine]):
    """A logits engine (embedded, scripted, vLLM logits) with the speculative `Decoder`."""

    def decoder(self, config: DecoderConfig) -> Decoder:
        """A `Decoder` over the engine."""
        return Decoder(self.engine, config)


class CompletionBackend(EngineBackend[CompletionEngine]):
    """A completion engine (vLLM, SGLang, an OpenAI server) with the `SegmentDecoder`."""

    def decoder(self, config: DecoderConfig) -> SegmentDecoder:
        """A `SegmentDecoder` over the engine.

        Raises:
            EngineError: ``speculative=False`` on an engine that constrains by regex.
        """
        return SegmentDecoder(self.engine, config)


def engine_backend(
    engine: Engine | CompletionEngine, config: DecoderConfig | None = None
) -> LogitsBackend | CompletionBackend:
    """The backend for ``engine``: `CompletionBackend` for a completion engine, else logits."""
    if isinstance(engine, CompletionEngine):
        return CompletionBackend(engine, config)
    return LogitsBackend(engine, config)
