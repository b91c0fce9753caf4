"""Choose the weights dtype of a local engine by measuring it, and remember the choice.

Which dtype is fastest depends on the machine, not on the model alone. On a 2-core AMD EPYC
with AVX2 only (no AVX-512, no native bf16), one SmolLM2-135M forward over K new tokens took
(bf16 vs fp32): K=1 37 vs 71 ms, K=64 932 vs 226 ms, K=256 3,676 vs 644 ms, K=600 9,214 vs
1,404 ms. bf16 wins the one-token steps and loses the wide certain-draft forwards 4-6x; on a
CPU with AMX or a GPU it wins everywhere. So an engine without an explicit dtype times a few
forward shapes in each candidate dtype (`measure_choice`) and keeps the one whose expected
cost over `WORKLOAD` is lowest.

The same kind of timings make an engine's verify cost curve (`CostCurve`: one forward over
`CURVE_WIDTHS` new tokens after `CONTEXT`), which the drafter's width policy reads: a measured
dtype choice holds the curve of every candidate it timed fully; an engine whose dtype was
given times the curve alone, once per machine, model and dtype, at load.

This module owns: the dtype names (`canonical_dtype`), the candidates per device, the
measured shapes and the workload that weighs them, the choice itself (`DtypeChoice`), the
cost curve (`CostCurve`), and the per-machine cache of both (`load_choice`/`store_choice`,
`load_curve`/`store_curve`: a small JSON file ``dtype-choices.json`` in
`factorspec_sdk.engines.model_store.cache_root`, keyed by `choice_key`, the dtype too for a
curve). The engines own the forwards (`EmbeddedEngine` times them; `VLLMEngine` reuses the
embedded engine's choice on CPU, see `vllm_dtype`).

Only `machine_key` and `candidate_dtypes` import torch, lazily.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from factorspec_sdk.errors import EngineError

__all__ = [
    "CACHE_FILE",
    "CONTEXT",
    "CURVE_SHAPES",
    "CURVE_WIDTHS",
    "DTYPE_ENV",
    "DTYPE_NAMES",
    "SHAPES",
    "WORKLOAD",
    "busy_reason",
    "ChoiceHow",
    "CostCurve",
    "CurveHow",
    "DtypeChoice",
    "Measure",
    "Shape",
    "candidate_dtypes",
    "canonical_dtype",
    "choice_key",
    "dtype_from_env",
    "engine_threads",
    "expected_cost",
    "load_choice",
    "load_curve",
    "machine_key",
    "measure_choice",
    "repeats",
    "store_choice",
    "store_curve",
    "timed",
    "vllm_dtype",
]

DTYPE_ENV = "FACTORSPEC_DTYPE"
"""Environment variable naming a dtype for engines built without ``dtype=`` (``auto``: measure)."""

DTYPE_NAMES: dict[str, str] = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
}
"""Accepted dtype spellings -> torch dtype names."""

Shape = tuple[int, int]
"""A forward's shape: (tokens already in the KV cache, new tokens)."""

CONTEXT = 200
"""Cached tokens before the measured widths (a prompt of a typical request)."""

CURVE_WIDTHS: tuple[int, ...] = (1, 4, 8, 16, 32, 64)
"""The verify widths of an engine's cost curve (`CostCurve`)."""

CURVE_SHAPES: tuple[Shape, ...] = tuple((CONTEXT, k) for k in CURVE_WIDTHS)
"""The forwards a cost curve times: `CURVE_WIDTHS` new tokens after `CONTEXT` cached ones."""

SHAPES: tuple[Shape, ...] = (
    *CURVE_SHAPES,
    (CONTEXT, 128),
    (0, CONTEXT),
)
"""The shapes `measure_choice` times, in order of new tokens (the cheap ones first, so that
a dtype that cannot win is dropped before its wide forwards are timed). The first ones are
`CURVE_SHAPES`: a dtype timed fully has its cost curve in its timings."""

WORKLOAD: dict[Shape, float] = {
    (0, CONTEXT): 1.0,
    (CONTEXT, 128): 2.0,
    (CONTEXT, 32): 4.0,
    (CONTEXT, 1): 30.0,
}
"""Forwards of each shape in one typical record, the weights of `expected_cost`.

One prompt prefill (~200 tokens with the chat template); two wide certain runs (a record's
keys, punctuation and determined values are drafted as certain tokens, up to hundreds at a
time: a trip's ~600-token record is mostly certain); four narrower drafts (a few certain
tokens plus guesses); and ~30 one-token choices (the free values the model must pick). The
one-token steps are many but cheap, the wide forwards few but costly; on the AVX2 machine
above this makes fp32 ~2x cheaper than bf16 per record, and a trip record measured 10.8 s in
bf16 against 2.9 s in fp32."""

CACHE_FILE = "dtype-choices.json"
"""File name of the choice cache in the FactorSpec cache folder."""

_CACHE_VERSION = 1
_CACHE_ENTRIES = 32  # most entries kept (choices and curves); the oldest go first
_WIDE = 64  # shapes with more new tokens are timed twice, the others three times

_TIMING_DIGITS = 6  # seconds are kept to the microsecond, in memory as in the cache

ChoiceHow = Literal["measured", "cached", "explicit", "environment", "runtime"]
"""How a dtype was chosen: timed now, read from the cache, passed as ``dtype=``, read from
``$FACTORSPEC_DTYPE``, or left to the runtime (vLLM's ``"auto"`` on a GPU)."""

Measure = Callable[[str, Sequence[Shape]], Iterator[float]]
"""``measure(dtype, shapes)`` yields the seconds of one forward of each shape in ``dtype``,
in order; the caller may stop early (the iterator is closed)."""


def canonical_dtype(name: str) -> str:
    """The torch dtype name of ``name`` (``"bf16"`` -> ``"bfloat16"``).

    Raises:
        EngineError: ``name`` is not a known dtype.
    """
    try:
        return DTYPE_NAMES[name]
    except KeyError:
        raise EngineError(f"unknown dtype {name!r}; use one of {sorted(DTYPE_NAMES)}") from None


def dtype_from_env() -> str | None:
    """The dtype ``$FACTORSPEC_DTYPE`` names, or ``None`` when unset, empty or ``auto``.

    Raises:
        EngineError: the variable names no known dtype.
    """
    value = os.environ.get(DTYPE_ENV, "").strip()
    if not value or value == "auto":
        return None
    try:
        return canonical_dtype(value)
    except EngineError:
        raise EngineError(
            f"${DTYPE_ENV}={value!r} is not a dtype; use auto or one of {sorted(DTYPE_NAMES)}"
        ) from None


def engine_threads() -> int:
    """Threads a CPU engine runs its forwards on: every core."""
    return os.cpu_count() or 1


def busy_reason() -> str:
    """Why timings taken now would mislead, or ``""``: other work holds the CPU.

    Busy means a 1-minute load average above the cores plus one (the engine's own threads
    count up to the cores). On an oversubscribed CPU small multi-threaded forwards slow
    down far more than wide ones (seen on 2 cores at load 8: one-token steps 20x, 128-token
    forwards 7x in bf16), so such timings choose the wrong dtype; they are used, not cached.
    """
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - Windows
        return ""
    cores = engine_threads()
    return f"load average {load:.1f} on {cores} cores" if load > cores + 1 else ""


def timed(seconds: float) -> float:
    """A measured forward's ``seconds`` as they are kept: to the microsecond.

    The engine rounds its timings as the cache stores them, so an engine that measured its
    cost curve now and one that read it back from the cache get the same numbers, and
    choose the same draft widths.
    """
    return round(seconds, _TIMING_DIGITS)


def repeats(shape: Shape) -> int:
    """How many times a shape is timed (the best run counts): 3, or 2 for wide forwards."""
    return 2 if shape[1] > _WIDE else 3


def expected_cost(
    curve: Mapping[Shape, float], workload: Mapping[Shape, float] = WORKLOAD
) -> float:
    """Seconds of ``workload`` on a measured ``curve``; a lower bound where it lacks shapes.

    A shape the curve lacks counts as the dearest measured shape with no more new tokens (a
    forward over more new tokens costs at least as much), or as free if there is none.
    """
    total = 0.0
    for shape, weight in workload.items():
        seconds = curve.get(shape)
        if seconds is None:
            seconds = max((s for (_, n), s in curve.items() if n <= shape[1]), default=0.0)
        total += weight * seconds
    return total


@dataclass(frozen=True, slots=True)
class DtypeChoice:
    """The dtype an engine runs in and how it was chosen.

    Attributes:
        dtype: the torch dtype name (``"float32"``...), or ``"auto"`` (the runtime decides).
        how: see `ChoiceHow`.
        costs: seconds of one forward per measured shape, per candidate dtype (empty unless
            measured or cached). A candidate dropped early lacks its wider shapes.
        key: the cache key digest of this machine and model (``""`` when no cache applies).
        note: why a measured choice was not cached (``""`` when it was, or not measured).
    """

    dtype: str
    how: ChoiceHow
    costs: Mapping[str, Mapping[Shape, float]] = field(default_factory=dict)
    key: str = ""
    note: str = ""

    @property
    def expected(self) -> dict[str, float]:
        """Seconds of `WORKLOAD` per candidate dtype (a lower bound for one dropped early)."""
        return {dtype: expected_cost(curve) for dtype, curve in self.costs.items()}

    def complete(self, dtype: str) -> bool:
        """Whether every shape of `SHAPES` was timed in ``dtype``."""
        return all(shape in self.costs.get(dtype, {}) for shape in SHAPES)

    def summary(self) -> str:
        """One line, e.g. ``float32 (measured; per record: float32 4.1 s, bfloat16 >= 4.5 s)``."""
        how = f"{self.how}, {self.note}" if self.note else self.how
        if not self.costs:
            return f"{self.dtype} ({how})"
        parts = [
            f"{dtype} {'' if self.complete(dtype) else '>= '}{cost:.2f} s"
            for dtype, cost in sorted(self.expected.items(), key=lambda item: item[1])
        ]
        return f"{self.dtype} ({how}; per record: {', '.join(parts)})"


CurveHow = Literal["measured", "cached"]
"""How an engine got its cost curve: timed at its load (by the dtype measurement, or alone
for a given dtype), or read from the cache (a cached dtype choice's timings, or a curve)."""


@dataclass(frozen=True, slots=True)
class CostCurve:
    """An engine's verify cost curve: what one forward costs by the number of new tokens.

    The drafter's width policy weighs a wider draft against what its forward costs more
    (`factorspec_sdk.drafter.width`), by this curve; a batched forward is split where
    padding costs more than another forward (`EmbeddedEngine.extend`).

    Attributes:
        seconds: seconds of one forward over ``k`` new tokens after `CONTEXT` cached ones,
            for each ``k`` of `CURVE_WIDTHS` (the best of `repeats` runs, `timed`).
        how: see `CurveHow`.
        key: the cache key of this machine and model (`choice_key`; ``""``: none applies,
            a model with neither a folder nor a name).
        note: why a measured curve was not cached (``""`` when it was, or not measured).
    """

    seconds: Mapping[int, float]
    how: CurveHow
    key: str = ""
    note: str = ""

    @classmethod
    def of(
        cls, timings: Mapping[Shape, float], how: CurveHow, key: str = "", note: str = ""
    ) -> CostCurve | None:
        """The curve in one dtype's timings (`DtypeChoice.costs`); None if a width is missing."""
        if not all(shape in timings for shape in CURVE_SHAPES):
            return None
        return cls({k: timings[(CONTEXT, k)] for k in CURVE_WIDTHS}, how, key, note)

    def summary(self) -> str:
        """One line, e.g. ``1 token 37 ms, 4 tokens 46 ms, ..., 64 tokens 95 ms (cached)``."""
        how = f"{self.how}, {self.note}" if self.note else self.how
        widths = ", ".join(
            f"{k} token{'s' if k > 1 else ''} {s * 1000:.3g} ms"
            for k, s in sorted(self.seconds.items())
        )
        return f"{widths} ({how})"


def measure_choice(candidates: Sequence[str], measure: Measure, key: str = "") -> DtypeChoice:
    """Time `SHAPES` in each candidate and choose the one of least `expected_cost`.

    A candidate is dropped as soon as the lower bound of its cost (`expected_cost` of the
    shapes timed so far; they come in order of new tokens) exceeds the best complete
    candidate's cost, so a dtype that cannot win skips its slowest forwards. Put the likely
    winner first.

    Raises:
        EngineError: no candidates.
    """
    if not candidates:
        raise EngineError("no candidate dtypes to measure")
    costs: dict[str, dict[Shape, float]] = {}
    best: float | None = None
    for dtype in candidates:
        curve: dict[Shape, float] = {}
        costs[dtype] = curve
        timings = measure(dtype, SHAPES)
        try:
            for shape, seconds in zip(SHAPES, timings, strict=False):
                curve[shape] = seconds
                if best is not None and expected_cost(curve) > best:
                    break
        finally:
            close = getattr(timings, "close", None)
            if callable(close):
                close()
        if len(curve) == len(SHAPES):
            cost = expected_cost(curve)
            if best is None or cost < best:
                best = cost
    complete = [d for d in candidates if len(costs[d]) == len(SHAPES)]
    chosen = min(complete, key=lambda d: expected_cost(costs[d]))
    return DtypeChoice(chosen, "measured", costs, key)


# --------------------------------------------------------------------------- the cache key


def choice_key(
    model_path: str,
    device: str,
    *,
    torch_version: str,
    cpu_capability: str,
    threads: int,
    device_name: str = "",
) -> str:
    """Digest of what a measured choice depends on: model, runtime, device, ISA, threads.

    The model counts by its folder, its ``config.json`` bytes and its weight files' names,
    sizes and modification times (a hub id, not a folder, counts by name). The measured
    shapes and the workload count too, so changing them invalidates old choices.
    """
    folder = Path(model_path).expanduser()
    model: dict[str, object] = {"path": str(folder.resolve()) if folder.is_dir() else model_path}
    if folder.is_dir():
        config = folder / "config.json"
        if config.is_file():
            model["config"] = hashlib.sha256(config.read_bytes()).hexdigest()
        weights = []
        for path in sorted(folder.iterdir()):
            if path.suffix in {".safetensors", ".bin", ".pt", ".gguf"} and path.is_file():
                stat = path.stat()
                weights.append([path.name, stat.st_size, stat.st_mtime_ns])
        model["weights"] = weights
    facts = {
        "model": model,
        "torch": torch_version,
        "device": device,
        "device_name": device_name,
        "cpu_capability": cpu_capability,
        "threads": threads,
        "shapes": [list(s) for s in SHAPES],
        "workload": sorted([*s, w] for s, w in WORKLOAD.items()),
    }
    text = json.dumps(facts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def machine_key(model_path: str, device: str) -> str:
    """`choice_key` for this process's torch, the given device and `engine_threads`."""
    import torch

    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else ""
    return choice_key(
        model_path,
        device,
        torch_version=str(torch.__version__),
        cpu_capability=str(torch.backends.cpu.get_cpu_capability()),
        threads=engine_threads() if device == "cpu" else 1,
        device_name=name,
    )


def candidate_dtypes(device: str) -> tuple[str, ...]:
    """Dtypes worth measuring on ``device``, the likely winner first.

    CPU: float32, bfloat16 (float16 matmuls are slow on CPUs). CUDA: bfloat16 where the GPU
    has it, float16, float32.
    """
    if not device.startswith("cuda"):
        return ("float32", "bfloat16")
    import torch

    with torch.cuda.device(device):
        bf16 = torch.cuda.is_bf16_supported()
    return ("bfloat16", "float16", "float32") if bf16 else ("float16", "float32")


# ------------------------------------------------------------------------------ the cache


def _cache_path(cache_dir: Path | None) -> Path:
    if cache_dir is None:
        from factorspec_sdk.engines.model_store import cache_root

        cache_dir = cache_root()
    return cache_dir / CACHE_FILE


def _read_entries(path: Path) -> dict[str, object]:
    """The file's entries; a missing, unreadable or malformed file holds none."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _CACHE_VERSION:
        return {}
    entries = data.get("entries")
    return entries if isinstance(entries, dict) else {}


def _parse_timings(raw: object) -> dict[Shape, float] | None:
    """Timings by shape from their JSON form (``{"200+1": 0.037, ...}``); None if malformed."""
    if not isinstance(raw, dict):
        return None
    parsed: dict[Shape, float] = {}
    for label, seconds in raw.items():
        past, _, new = str(label).partition("+")
        if not (past.isdigit() and new.isdigit()) or not isinstance(seconds, int | float):
            return None
        parsed[(int(past), int(new))] = float(seconds)
    return parsed


def _parse_costs(raw: object) -> dict[str, dict[Shape, float]] | None:
    if not isinstance(raw, dict):
        return None
    costs: dict[str, dict[Shape, float]] = {}
    for dtype, curve in raw.items():
        parsed = _parse_timings(curve)
        if dtype not in DTYPE_NAMES.values() or parsed is None:
            return None
        costs[dtype] = parsed
    return costs


def load_choice(
    key: str, candidates: Sequence[str], cache_dir: Path | None = None
) -> DtypeChoice | None:
    """The cached choice for ``key`` (``how="cached"``), or ``None`` if there is none.

    An entry that is malformed, or names a dtype outside ``candidates``, counts as none (the
    caller measures again and overwrites it); so does an unreadable file.
    """
    entry = _read_entries(_cache_path(cache_dir)).get(key)
    if not isinstance(entry, dict):
        return None
    dtype = entry.get("dtype")
    costs = _parse_costs(entry.get("costs"))
    if not isinstance(dtype, str) or dtype not in candidates or costs is None:
        return None
    choice = DtypeChoice(dtype, "cached", costs, key)
    return choice if choice.complete(dtype) else None


def store_choice(choice: DtypeChoice, cache_dir: Path | None = None) -> None:
    """Record a measured choice under its key (atomic replace; best effort).

    Two processes storing at once may lose one entry, which is measured again next time; a
    cache folder that cannot be written is skipped silently (the choice still applies now).
    """
    if not choice.key:
        return
    entry = {
        "dtype": choice.dtype,
        "costs": {dtype: _timings_json(curve) for dtype, curve in choice.costs.items()},
    }
    _store_entry(choice.key, entry, cache_dir)


def _curve_key(key: str, dtype: str) -> str:
    """The cache entry of the cost curve of ``dtype`` under the machine and model ``key``."""
    return f"{key}/{dtype}"


def load_curve(key: str, dtype: str, cache_dir: Path | None = None) -> CostCurve | None:
    """The cached cost curve of ``dtype`` for ``key`` (``how="cached"``), or ``None``.

    The curve stored by `store_curve`, else the timings of ``dtype`` in the dtype choice
    cached for ``key`` (a measured choice timed the curve's shapes in each candidate it did
    not drop early: one measurement serves both). A malformed entry counts as none.
    """
    if not key:
        return None
    entries = _read_entries(_cache_path(cache_dir))
    stored = entries.get(_curve_key(key, dtype))
    choice = entries.get(key)
    costs = _parse_costs(choice.get("costs")) if isinstance(choice, dict) else None
    for timings in (
        _parse_timings(stored.get("curve")) if isinstance(stored, dict) else None,
        costs.get(dtype) if costs else None,
    ):
        curve = CostCurve.of(timings, "cached", key) if timings else None
        if curve is not None:
            return curve
    return None


def store_curve(curve: CostCurve, dtype: str, cache_dir: Path | None = None) -> None:
    """Record a measured cost curve of ``dtype`` under its key (best effort, as `store_choice`)."""
    if not curve.key:
        return
    timings = {(CONTEXT, k): s for k, s in curve.seconds.items()}
    _store_entry(_curve_key(curve.key, dtype), {"curve": _timings_json(timings)}, cache_dir)


def _timings_json(timings: Mapping[Shape, float]) -> dict[str, float]:
    return {f"{p}+{n}": timed(s) for (p, n), s in timings.items()}


def _store_entry(key: str, entry: Mapping[str, object], cache_dir: Path | None) -> None:
    """Put ``entry`` (stamped with the time) under ``key``, the newest; keep the newest few."""
    path = _cache_path(cache_dir)
    entries = _read_entries(path)
    entries.pop(key, None)
    entries[key] = {**entry, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    kept = dict(list(entries.items())[-_CACHE_ENTRIES:])
    text = json.dumps({"version": _CACHE_VERSION, "entries": kept}, indent=1)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(prefix=f".{CACHE_FILE}.", dir=path.parent)
        try:
            with os.fdopen(handle, "w") as out:
                out.write(text)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


# -------------------------------------------------------------------------------- vLLM


def vllm_dtype(
    dtype: str | None,
    *,
    on_gpu: bool,
    cached: Callable[[], DtypeChoice | None],
    measure: Callable[[], DtypeChoice],
) -> DtypeChoice:
    """The dtype to start vLLM with.

    An explicit ``dtype`` (or ``$FACTORSPEC_DTYPE``) wins. On a GPU vLLM's own default
    (``"auto"``) stands. On CPU vLLM runs the same oneDNN/torch kernels as the embedded
    engine, so the embedded engine's per-machine choice applies: ``cached()`` reads it,
    else ``measure()`` measures it with the torch model of the same folder (and caches it).
    """
    if dtype is not None:
        return DtypeChoice(canonical_dtype(dtype), "explicit")
    env = dtype_from_env()
    if env is not None:
        return DtypeChoice(env, "environment")
    if on_gpu:
        return DtypeChoice("auto", "runtime")
    return cached() or measure()
