"""Backends over a local engine object: `LogitsBackend` and `CompletionBackend`.

Both build one `DecodeJob` per request the same way (the spec compiled for the request's
context, its planner over the engine's tokenizer from `factorspec_sdk.tokens.plan.planner_for`,
the prompt through the engine's chat template) and run every job of a batch in one decoder
run, each decoder outcome turned into the backend's `RecordOutcome` (its provenance replayed
from the job's planner on demand); they differ in the decoder:
`factorspec_sdk.drafter.loop.Decoder` needs logits, a completion engine (vLLM, SGLang, an
OpenAI server) gets `factorspec_sdk.drafter.segments.SegmentDecoder`.
`engine_backend` picks the one for an engine.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from typing import Generic, TypeVar

from factorspec_sdk.backends.base import GenerationRequest, RecordOutcome
from factorspec_sdk.drafter.loop import DecodeJob, DecodeOutcome, Decoder, DecoderConfig
from factorspec_sdk.drafter.segments import SegmentDecoder
from factorspec_sdk.drafter.stats import others
from factorspec_sdk.engines.completion import CompletionEngine
from factorspec_sdk.engines.protocol import Engine
from factorspec_sdk.partials import PartialStream
from factorspec_sdk.prompts import Prompt, chat_messages
from factorspec_sdk.provenance import replayed
from factorspec_sdk.relations.layout import RootLayout
from factorspec_sdk.tokens.plan import planner_for

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

    def job(self, request: GenerationRequest, parts: dict[str, float] | None = None) -> DecodeJob:
        """The decoder job of ``request`` (compiles its spec: spec errors raise here).

        Args:
            request: the record.
            parts: where to add the time of each step (``spec_seconds``, ``prompt_seconds``,
                ``start_seconds``; planning the start waited for is left to the planner).
        """
        from factorspec_sdk.graph import compile_spec

        spent = {} if parts is None else parts
        t0 = time.perf_counter()
        spec = request.spec
        if spec is None:
            spec = compile_spec(request.model, request.context)
        t1 = time.perf_counter()
        spent["spec_seconds"] = spent.get("spec_seconds", 0.0) + t1 - t0
        planner = planner_for(spec, self.engine.tokenizer)
        t2 = time.perf_counter()
        ids = self.prompt_ids(
            request.prompt,
            system=request.system,
            layout=spec.layout,
            hint=request.schema_in_prompt,
        )
        t3 = time.perf_counter()
        spent["prompt_seconds"] = spent.get("prompt_seconds", 0.0) + t3 - t2
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
        start = (t2 - t1) + (time.perf_counter() - t3) - planner.stats.critical_seconds
        spent["start_seconds"] = spent.get("start_seconds", 0.0) + start
        return job

    def run(self, requests: Sequence[GenerationRequest]) -> list[RecordOutcome]:
        """Decode ``requests`` in one decoder run (one per ``speculative`` setting asked).

        Each record's stats add the time of its job (spec, prompt, start) and the wait for
        the engine (``queue_seconds``); the other records' jobs, and the decoder runs of
        another ``speculative`` setting, are its ``batch_seconds``.
        """
        started = time.perf_counter()
        outcomes: dict[int, RecordOutcome] = {}
        spent: list[dict[str, float]] = [{} for _ in requests]
        planned = [0.0] * len(requests)  # planning in a job (a stream's first view)
        groups: dict[bool, list[tuple[int, DecodeJob]]] = {}
        for i, request in enumerate(requests):
            try:
                job = self.job(request, spent[i])
            except Exception as exc:
                outcomes[i] = RecordOutcome.failed(exc)
                continue
            planned[i] = job.planner.stats.critical_seconds  # the decoder counts it
            speculative = request.speculative
            if speculative is None:
                speculative = self.config.speculative
            groups.setdefault(speculative, []).append((i, job))
        waiting = time.perf_counter()
        runs: dict[bool, float] = {}
        with self._lock:
            queued = time.perf_counter() - waiting
            for speculative, items in groups.items():
                config = replace(self.config, speculative=speculative)
                jobs = [job for _, job in items]
                t0 = time.perf_counter()
                try:
                    done = [_outcome(out) for out in self.decoder(config).run(jobs)]
                except Exception as exc:  # the decoder refused the whole run
                    done = [RecordOutcome.failed(exc) for _ in jobs]
                runs[speculative] = time.perf_counter() - t0
                for (i, _), out in zip(items, done, strict=True):
                    outcomes[i] = out
        ran = {i: s for s, items in groups.items() for i, _ in items}
        prep = [sum(parts.values()) + plan for parts, plan in zip(spent, planned, strict=True)]
        wall = time.perf_counter() - started
        for i in range(len(requests)):
            runs_apart = sum(t for s, t in runs.items() if s != ran.get(i))
            stats = outcomes[i].stats
            stats.add(spent[i])
            stats.add({"queue_seconds": queued})
            stats.add({"batch_seconds": others(sum(prep), prep[i]) + runs_apart})
            stats.settle(wall)
        return [outcomes[i] for i in range(len(requests))]

    @abstractmethod
    def decoder(self, config: DecoderConfig) -> Decoder | SegmentDecoder:
        """A decoder over the engine with ``config``."""

    def close(self) -> None:
        """Close the engine (if it has a ``close``)."""
        closer = getattr(self.engine, "close", None)
        if callable(closer):
            closer()


def _outcome(out: DecodeOutcome) -> RecordOutcome:
    """The decoder's outcome as the backend's: the record, its provenance from its planner."""
    job = out.job
    explain = None if job is None else replayed(job.planner, out.tokens, job.params.max_tokens)
    return RecordOutcome(out.text, out.tokens, out.stats, out.error, explain)


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
