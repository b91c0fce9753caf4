"""What the embedded engine settles at load: its weights' dtype, its verify cost curve, a warm-up.

A folder's weights dtype is measured unless given (`factorspec_sdk.engines.dtype_choice`):
`measured_choice` times a few forward shapes in each candidate dtype, keeps the cheapest for
a typical record and caches that choice per machine and model; the same timings are its
verify cost curve. Each candidate's weights are loaded from the folder in that dtype, never
cast from another (`EmbeddedEngine._set_dtype` says why). `choose_dtype` reads a given, an
environment or a cached dtype first.

The verify cost curve is settled here too (`settle_cost_curve`), never inside a request: a
measured or cached dtype choice holds it; an engine whose dtype was given (or a model passed
to `from_transformers`) reads it from the same per-machine cache (a cached choice's timings of
that dtype, or a curve stored before) or times it now and caches it under the machine, model
and dtype. Timings taken on a busy machine are used, not cached (`cache_note`). `warm_up` runs
each shape the decoder needs first, unless the load's timings just ran them, so the first
request is not the slow one.

The timings run on the `ModelRunner` alone, on sequences of their own (a `SequenceTable` the
engine never sees): they neither read nor feed the prefix cache, take no sequence id from the
engine and count no forward in `EmbeddedEngine.forward_calls`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from factorspec_sdk.engines.dtype_choice import (
    CURVE_SHAPES,
    CURVE_WIDTHS,
    CostCurve,
    CurveHow,
    DtypeChoice,
    Measure,
    Shape,
    busy_reason,
    candidate_dtypes,
    canonical_dtype,
    dtype_from_env,
    load_choice,
    load_curve,
    machine_key,
    measure_choice,
    repeats,
    store_choice,
    store_curve,
    timed,
)

if TYPE_CHECKING:
    from transformers import DynamicCache, PreTrainedTokenizerBase

    from factorspec_sdk.engines.embedded.runner import ModelRunner
    from factorspec_sdk.engines.protocol import SequenceId
    from factorspec_sdk.engines.sequences import SequenceTable

__all__ = [
    "WARM_UP_PROMPT",
    "SetDtype",
    "cache_note",
    "choose_dtype",
    "measured_choice",
    "settle_cost_curve",
    "shape_timer",
    "warm_up",
]

WARM_UP_PROMPT = 32
"""Tokens of the warm-up prefill."""

SetDtype = Callable[[str], bool]
"""``set_dtype(name)``: run in dtype ``name`` from now on (the engine's weights loaded again in
it); True when the dtype changed."""


def choose_dtype(
    path: str, device: str, dtype: str | None
) -> tuple[DtypeChoice | None, str, tuple[str, ...]]:
    """The dtype choice of a folder engine before its weights load, if it needs no timing.

    ``dtype`` given, else ``$FACTORSPEC_DTYPE``, else the cached choice for this machine and
    model. Returns the choice (``None``: measure), the cache key and the candidate dtypes to
    measure (both empty for a given dtype).

    Raises:
        EngineError: ``dtype`` or the environment names no dtype.
    """
    given = canonical_dtype(dtype) if dtype is not None else dtype_from_env()
    if given is not None:
        return DtypeChoice(given, "explicit" if dtype is not None else "environment"), "", ()
    key = machine_key(path, device)
    candidates = candidate_dtypes(device)
    return load_choice(key, candidates), key, candidates


def measured_choice(
    runner: ModelRunner,
    tok: PreTrainedTokenizerBase,
    candidates: tuple[str, ...],
    key: str,
    set_dtype: SetDtype,
) -> tuple[DtypeChoice, bool]:
    """Time ``candidates`` (`measure_choice`), switch to the one chosen and cache the choice.

    Returns the choice and whether its first shapes just ran in its dtype (the last dtype
    measured), so no warm-up is needed.
    """
    with shape_timer(runner, tok, set_dtype) as measure:
        measured = measure_choice(candidates, measure, key)
    warm = runner.dtype_name == measured.dtype  # the last dtype measured: its shapes ran
    set_dtype(measured.dtype)
    return replace(measured, note=cache_note(lambda: store_choice(measured))), warm


def settle_cost_curve(
    runner: ModelRunner, tok: PreTrainedTokenizerBase, choice: DtypeChoice, set_dtype: SetDtype
) -> tuple[CostCurve, bool]:
    """The engine's verify cost curve, and whether it was timed now (its shapes ran).

    A measured or cached dtype choice holds it (its timings of the chosen dtype). Else
    (a given dtype, a caller's model) the cache holds it (`load_curve`: a curve stored
    before, or a cached choice's timings of this dtype) under this machine and model;
    else it is timed now and cached, unless the machine is busy, as a choice is. A
    model with neither a folder nor a name (built in memory) has no key: timed, not
    cached.
    """
    how: CurveHow = "cached" if choice.how == "cached" else "measured"
    curve = CostCurve.of(choice.costs.get(choice.dtype, {}), how, choice.key, choice.note)
    if curve is not None:
        return curve, False
    dtype = runner.dtype_name
    key = machine_key(runner.model_path, str(runner.device)) if runner.model_path else ""
    curve = load_curve(key, dtype)
    if curve is not None:
        return curve, False
    with shape_timer(runner, tok, set_dtype) as measure:
        seconds = dict(zip(CURVE_WIDTHS, measure(dtype, CURVE_SHAPES), strict=True))
    measured = CostCurve(seconds, "measured", key)
    if key:
        note = cache_note(lambda: store_curve(measured, dtype))
    else:
        note = "not cached: the model has neither a folder nor a name"
    return replace(measured, note=note), True


def cache_note(store: Callable[[], None]) -> str:
    """Cache timings taken now with ``store``, unless the machine is busy.

    Returns ``""``, or why they were not cached: timings taken while other work holds the
    CPU mislead (`busy_reason`), so they are used, not cached, and the next load measures
    again. A dtype choice and a cost curve are cached alike.
    """
    busy = busy_reason()
    if busy:
        return f"not cached: {busy}"
    store()
    return ""


@contextlib.contextmanager
def shape_timer(
    runner: ModelRunner, tok: PreTrainedTokenizerBase, set_dtype: SetDtype
) -> Iterator[Measure]:
    """A `Measure` over the runner: best-of-`repeats` seconds of each forward shape.

    Each dtype's first forward only warms up. The cached contexts of the shapes are built
    once and cast when the weights change dtype (only timings are read from them); they
    are dropped on exit.
    """
    table = runner.sequence_table()
    contexts: dict[int, SequenceId] = {}

    def measure(dtype: str, shapes: Sequence[Shape]) -> Iterator[float]:
        if set_dtype(dtype):
            for state in table.states():
                if state.run:
                    state.cache = runner.kv.cast(state.cache, runner.dtype)
        ids = _filler(tok, max(past + new for past, new in shapes))
        warm = False
        for past, new in shapes:
            seq = contexts.get(past)
            if seq is None:
                seq = contexts[past] = table.open(ids[:past], runner.kv.empty())
                if past:
                    _extend(runner, table, seq, ids[past - 1 : past])
                    table.truncate(seq, past)
                    warm = True
            if not warm:
                _extend(runner, table, seq, ids[past : past + 1])
                table.truncate(seq, past)
                warm = True
            best = float("inf")
            for _ in range(repeats((past, new))):
                started = time.perf_counter()
                _extend(runner, table, seq, ids[past : past + new])
                best = min(best, time.perf_counter() - started)
                table.truncate(seq, past)
            yield timed(best)  # as the cache keeps it: the same widths either way

    try:
        yield measure
    finally:
        for seq in contexts.values():
            table.release(seq)


def warm_up(runner: ModelRunner, tok: PreTrainedTokenizerBase) -> None:
    """One forward of each shape a request starts with: a prefill, one token, a draft."""
    ids = _filler(tok, WARM_UP_PROMPT + 17)
    table = runner.sequence_table()
    seq = table.open(ids[:WARM_UP_PROMPT], runner.kv.empty())
    _extend(runner, table, seq, ids[WARM_UP_PROMPT : WARM_UP_PROMPT + 1])
    _extend(runner, table, seq, ids[WARM_UP_PROMPT + 1 : WARM_UP_PROMPT + 17])
    _extend(runner, table, seq, ids[:1])
    table.release(seq)


def _extend(
    runner: ModelRunner, table: SequenceTable[DynamicCache], seq: SequenceId, new: list[int]
) -> None:
    """``extend`` one sequence of a timing table: every row of logits, as a request's."""
    import torch

    with torch.inference_mode():
        runner.run(table.plan([(seq, new)]))


def _filler(tok: PreTrainedTokenizerBase, n: int) -> list[int]:
    """``n`` token ids of plain English text, for timing and warm-up."""
    text = "The quick brown fox jumps over the lazy dog. "
    ids: list[int] = tok.encode(text * 8, add_special_tokens=False)
    return (ids * (n // len(ids) + 1))[:n]
