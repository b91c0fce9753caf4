"""The `Backend` protocol and the `GenerationRequest` that travels through it.

A backend turns a batch of requests into one outcome per request, in order: the record's
canonical JSON text, its tokens and stats, or the error that ended it. The stats add the
parts of the wall the backend measured (`factorspec_sdk.drafter.stats`) and are settled on
the backend's run: each record's ``wall_seconds`` is the whole `Backend.run`. It never raises for
one record's failure (a spec that does not compile, a refused request): that record's
outcome carries the error, and the others finish. The client validates every text against
its model and context, builds the `GenerationResult` and decides whether to raise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel

from factorspec_sdk.drafter.loop import DecodeOutcome
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.partials import PartialSink
from factorspec_sdk.prompts import Prompt

if TYPE_CHECKING:
    from factorspec_sdk.graph import CompiledSpec

__all__ = ["Backend", "GenerationRequest"]


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One record to generate.

    Attributes:
        model: the Pydantic model class (with ``@relation`` methods).
        prompt: the user's prompt, or a list of chat messages.
        context: the per-request context the relations read.
        params: how tokens are chosen and the record's token budget.
        system: an optional system prompt (with a plain-text prompt).
        schema_in_prompt: append `factorspec_sdk.prompts.hint_sentence` to the last user
            message.
        speculative: override the backend's drafting setting (None: keep it).
        on_partial: where to send the record's partial views as it is decoded
            (`factorspec_sdk.partials`), on the backend's thread; an exception it raises
            ends the record with it. None: no views are made.
        spec: ``model``'s spec compiled for ``context``, when the caller compiled it
            already (the client does, before its engine loads); None: the backend
            compiles it.
    """

    model: type[BaseModel]
    prompt: Prompt
    context: object = None
    params: SamplingParams = field(default_factory=SamplingParams)
    system: str | None = None
    schema_in_prompt: bool = True
    speculative: bool | None = None
    on_partial: PartialSink | None = None
    spec: CompiledSpec | None = None


@runtime_checkable
class Backend(Protocol):
    """Where records are decoded: a local engine, or a FactorSpec server."""

    @property
    def name(self) -> str:
        """Short name for logs, e.g. the engine's name or ``"factorspec-server"``."""
        ...

    def run(self, requests: Sequence[GenerationRequest]) -> list[DecodeOutcome]:
        """Decode ``requests`` together; one outcome per request, errors included.

        Safe to call from several threads: a backend serializes what its engine needs.
        """
        ...

    def close(self) -> None:
        """Release the engine or the connections (the backend is unusable after)."""
        ...
