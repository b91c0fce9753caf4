"""The `Backend` protocol, the `GenerationRequest` that travels in and the `RecordOutcome` out.

A backend turns a batch of requests into one `RecordOutcome` per request, in order: the
record's canonical JSON text, its tokens and stats, or the error that ended it, and how to
tell its provenance. The outcome is the backend layer's own plain result (as an httpx
transport returns a ``Response``, not its pool's internals): nothing of the decoder that
made it (its job, its planner) travels to the client. The stats add the parts of the wall
the backend measured (`factorspec_sdk.drafter.stats`) and are settled on the backend's run:
each record's ``wall_seconds`` is the whole `Backend.run`. It never raises for one record's
failure (a spec that does not compile, a refused request): that record's outcome carries
the error, and the others finish. The client validates every text against its model and
context, builds the `GenerationResult` and decides whether to raise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel

from factorspec_sdk.drafter.stats import GenerationStats
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.partials import PartialSink
from factorspec_sdk.prompts import Prompt
from factorspec_sdk.provenance import Explain

if TYPE_CHECKING:
    from factorspec_sdk.graph import CompiledSpec

__all__ = ["Backend", "GenerationRequest", "RecordOutcome"]


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
            already (the client does, with its own `factorspec_sdk.graph.SpecCompiler`,
            before its engine loads); None: the backend compiles it with
            `factorspec_sdk.graph.compile_spec` (the shared default compiler).
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


@dataclass(slots=True)
class RecordOutcome:
    """What a backend answers for one request: the record, or the error that ended it.

    Attributes:
        text: the record's canonical JSON text (what was written, for an error).
        tokens: its token ids.
        stats: what it cost and where the time went.
        error: the error that ended the record (None: it is complete).
        explain: computes the record's provenance once, on first call
            (`factorspec_sdk.provenance.replayed` from the planner that decoded it here, or
            `factorspec_sdk.provenance.received` from the JSON a server sent with it); None
            where nothing can tell it (a server asked for none, a failed record).
    """

    text: str
    tokens: list[int]
    stats: GenerationStats
    error: Exception | None = None
    explain: Explain | None = None

    @classmethod
    def failed(cls, error: Exception, stats: GenerationStats | None = None) -> RecordOutcome:
        """The outcome of a record that ended in ``error`` before any text."""
        return cls("", [], stats if stats is not None else GenerationStats(), error)


@runtime_checkable
class Backend(Protocol):
    """Where records are decoded: a local engine, or a FactorSpec server."""

    @property
    def name(self) -> str:
        """Short name for logs, e.g. the engine's name or ``"factorspec-server"``."""
        ...

    def run(self, requests: Sequence[GenerationRequest]) -> list[RecordOutcome]:
        """Decode ``requests`` together; one outcome per request, errors included.

        Safe to call from several threads: a backend serializes what its engine needs.
        """
        ...

    def close(self) -> None:
        """Release the engine or the connections (the backend is unusable after)."""
        ...
