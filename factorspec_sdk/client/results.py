"""What a client call takes and returns: `GenerateOptions` in, `GenerationResult` out.

The keywords of ``generate`` besides prompts and contexts (`GenerateOptions`, with one
`SamplingParams` each, `sampling_params`), and the results: every outcome a backend answers
validated against its model and context into a `GenerationResult`, or mapped to a
`FactorSpecError`, raised or returned per record (`deliver`, by ``return_result`` and
``return_exceptions``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypedDict, TypeVar, cast

from pydantic import BaseModel, ValidationError

from factorspec_sdk.backends.base import GenerationRequest, RecordOutcome
from factorspec_sdk.drafter.loop import GenerationStats
from factorspec_sdk.drafter.stats import others
from factorspec_sdk.drafter.verify import SamplingParams
from factorspec_sdk.errors import FactorSpecError, GenerationError
from factorspec_sdk.provenance import Explain, Provenance

__all__ = [
    "GenerateOptions",
    "GenerationResult",
    "Results",
    "as_error",
    "checked_record",
    "deliver",
    "sampling_params",
]

T = TypeVar("T", bound=BaseModel)


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


def checked_record(
    model: type[BaseModel], request: GenerationRequest, out: RecordOutcome
) -> BaseModel | FactorSpecError:
    """The outcome's record, validated against its model and context; or its error."""
    if out.error is not None:
        return as_error(out.error)
    try:
        return model.model_validate_json(out.text, context=request.context)
    except ValidationError as exc:  # the writer guarantees validity: this is a bug
        err = GenerationError(
            f"internal error: the generated record does not validate ({exc}); "
            f"text: {out.text!r}. Please report this."
        )
        err.__cause__ = exc
        return err


def as_error(exc: Exception) -> FactorSpecError:
    """``exc`` as a `FactorSpecError` (one from outside the SDK becomes a `GenerationError`)."""
    if isinstance(exc, FactorSpecError):
        return exc
    err = GenerationError(f"decoding failed: {type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err


def deliver(
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
        checked.append((checked_record(model, request, out), time.perf_counter() - t1))
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
        results.append(GenerationResult(cast(T, value), out.text, out.tokens, stats, out.explain))
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
