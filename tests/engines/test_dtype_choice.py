"""Choosing the weights dtype from measured cost curves, and caching the choice (no model)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from factorspec_sdk.engines import dtype_choice as dc
from factorspec_sdk.engines.dtype_choice import (
    CACHE_FILE,
    CONTEXT,
    CURVE_SHAPES,
    CURVE_WIDTHS,
    SHAPES,
    WORKLOAD,
    CostCurve,
    DtypeChoice,
    Shape,
    choice_key,
    expected_cost,
    load_choice,
    load_curve,
    measure_choice,
    store_choice,
    store_curve,
    timed,
    vllm_dtype,
)
from factorspec_sdk.errors import EngineError

# Per-token costs shaped like the AVX2 machine's: bf16 cheaper at one token, 4-6x dearer wide.
AVX2 = {
    "float32": lambda shape: 0.065 + 0.0022 * shape[1],
    "bfloat16": lambda shape: 0.022 + 0.0150 * shape[1],
}
AMX = {  # a CPU with native bf16: bf16 cheaper at every width
    "float32": lambda shape: 0.065 + 0.0022 * shape[1],
    "bfloat16": lambda shape: 0.030 + 0.0008 * shape[1],
}


class FakeMeasure:
    """A `Measure` from cost functions, recording which shapes it was asked to time."""

    def __init__(self, curves: dict[str, object]) -> None:
        self.curves = curves
        self.timed: dict[str, list[Shape]] = {}

    def __call__(self, dtype: str, shapes: Sequence[Shape]) -> Iterator[float]:
        cost = self.curves[dtype]
        assert callable(cost)
        for shape in shapes:
            self.timed.setdefault(dtype, []).append(shape)
            yield float(cost(shape))


def key(**changes: object) -> str:
    facts: dict[str, object] = {
        "model_path": "some/model",
        "device": "cpu",
        "torch_version": "2.13.0+cpu",
        "cpu_capability": "AVX2",
        "threads": 2,
    }
    facts.update(changes)
    return choice_key(**facts)  # type: ignore[arg-type]


def test_the_widths_of_the_profile_and_the_workload_are_measured() -> None:
    from factorspec_sdk.engines.embedded import PROFILE_KS

    assert {(CONTEXT, k) for k in PROFILE_KS} == set(CURVE_SHAPES) <= set(SHAPES)
    assert set(WORKLOAD) <= set(SHAPES)
    news = [new for _, new in SHAPES]
    assert news == sorted(news)  # the pruning bound relies on it


def test_avx2_curves_choose_float32_and_drop_bf16_before_its_wide_forwards() -> None:
    fake = FakeMeasure(AVX2)
    choice = measure_choice(["float32", "bfloat16"], fake)
    assert choice.dtype == "float32"
    assert choice.how == "measured"
    assert fake.timed["float32"] == list(SHAPES)
    assert len(fake.timed["bfloat16"]) < len(SHAPES)  # dropped early
    assert (0, CONTEXT) not in choice.costs["bfloat16"]
    assert choice.complete("float32") and not choice.complete("bfloat16")
    expected = choice.expected
    assert expected["float32"] < expected["bfloat16"]  # a lower bound, still above
    assert expected["float32"] == expected_cost(choice.costs["float32"])
    assert "float32" in choice.summary() and ">=" in choice.summary()


def test_amx_curves_choose_bfloat16() -> None:
    choice = measure_choice(["float32", "bfloat16"], FakeMeasure(AMX))
    assert choice.dtype == "bfloat16"
    assert choice.complete("float32") and choice.complete("bfloat16")
    assert choice.expected["bfloat16"] == min(choice.expected.values())


def test_cheap_one_token_steps_win_when_the_workload_is_mostly_choices() -> None:
    # bf16 cheaper at one token only: with WORKLOAD's wide runs fp32 wins ...
    assert measure_choice(["bfloat16", "float32"], FakeMeasure(AVX2)).dtype == "float32"
    # ... and bf16 would win a workload of one-token steps alone
    curve = {s: AVX2["bfloat16"](s) for s in SHAPES}
    fp32 = {s: AVX2["float32"](s) for s in SHAPES}
    ones = {(CONTEXT, 1): 1.0}
    assert expected_cost(curve, ones) < expected_cost(fp32, ones)


def test_no_candidates_is_an_error() -> None:
    with pytest.raises(EngineError, match="no candidate"):
        measure_choice([], FakeMeasure({}))


def test_cache_key_changes_with_torch_isa_threads_device_and_model(tmp_path: Path) -> None:
    base = key()
    assert key() == base
    assert key(torch_version="2.14.0+cpu") != base
    assert key(cpu_capability="AVX512") != base
    assert key(threads=16) != base
    assert key(device="cuda:0", device_name="NVIDIA H200") != base
    assert key(model_path="other/model") != base
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text('{"a": 1}')
    (folder / "model.safetensors").write_bytes(b"x" * 10)
    first = key(model_path=str(folder))
    (folder / "config.json").write_text('{"a": 2}')
    assert key(model_path=str(folder)) != first
    second = key(model_path=str(folder))
    (folder / "model.safetensors").write_bytes(b"y" * 11)
    assert key(model_path=str(folder)) != second


def test_cache_round_trip(tmp_path: Path) -> None:
    measured = measure_choice(["float32", "bfloat16"], FakeMeasure(AVX2), key="k1")
    store_choice(measured, tmp_path)
    cached = load_choice("k1", ["float32", "bfloat16"], tmp_path)
    assert cached is not None
    assert cached.how == "cached"
    assert cached.dtype == measured.dtype
    assert cached.key == "k1"
    for dtype, curve in measured.costs.items():
        assert cached.costs[dtype] == pytest.approx(curve)
    assert load_choice("other", ["float32", "bfloat16"], tmp_path) is None
    # a cached dtype the device cannot run is no choice
    assert load_choice("k1", ["float16"], tmp_path) is None
    # a second key joins the first
    amx = measure_choice(["float32", "bfloat16"], FakeMeasure(AMX), key="k2")
    store_choice(amx, tmp_path)
    assert load_choice("k1", ["float32", "bfloat16"], tmp_path) is not None
    assert load_choice("k2", ["float32", "bfloat16"], tmp_path) is not None
    # an entry whose chosen dtype lacks shapes is no choice
    partial = {"bfloat16": measured.costs["bfloat16"]}
    store_choice(DtypeChoice("bfloat16", "measured", partial, "k3"), tmp_path)
    assert load_choice("k3", ["float32", "bfloat16"], tmp_path) is None


def test_a_cost_curve_round_trips_exactly_beside_the_choices(tmp_path: Path) -> None:
    """What the width policy reads is the same, measured now or read back."""
    seconds = {k: timed(0.037 + 0.00089 * k + 1e-9 * k * k) for k in CURVE_WIDTHS}
    curve = CostCurve(seconds, "measured", "k1")
    store_curve(curve, "bfloat16", tmp_path)
    cached = load_curve("k1", "bfloat16", tmp_path)
    assert cached == CostCurve(seconds, "cached", "k1")  # equal floats, not approximately
    assert load_curve("k1", "float32", tmp_path) is None  # another dtype: none
    assert load_curve("k2", "bfloat16", tmp_path) is None  # another machine or model
    assert load_curve("", "bfloat16", tmp_path) is None  # no key: nothing cached
    store_curve(CostCurve(seconds, "measured"), "bfloat16", tmp_path / "none")
    assert not (tmp_path / "none").exists()
    # a choice stored under the same key leaves the curve; a curve is no choice
    assert load_choice("k1", ["float32", "bfloat16"], tmp_path) is None
    store_choice(measure_choice(["float32"], FakeMeasure(AVX2), key="k1"), tmp_path)
    assert load_curve("k1", "bfloat16", tmp_path) == cached
    assert load_choice("k1", ["float32", "bfloat16"], tmp_path) is not None


def test_a_cached_choice_holds_the_curve_of_each_dtype_it_timed_fully(tmp_path: Path) -> None:
    measured = measure_choice(["float32", "bfloat16"], FakeMeasure(AMX), key="k1")
    store_choice(measured, tmp_path)
    for dtype in ("float32", "bfloat16"):  # AMX: both timed fully
        curve = load_curve("k1", dtype, tmp_path)
        assert curve is not None
        assert curve.how == "cached"
        assert curve.seconds == {
            k: pytest.approx(measured.costs[dtype][shape])
            for k, shape in zip(CURVE_WIDTHS, CURVE_SHAPES, strict=True)
        }
    assert load_curve("k1", "float16", tmp_path) is None  # never timed
    # a candidate dropped before its widest curve shape holds no curve
    dropped = {shape: 0.1 for shape in CURVE_SHAPES[:-1]}
    store_choice(DtypeChoice("float32", "measured", {"bfloat16": dropped}, "k2"), tmp_path)
    assert load_curve("k2", "bfloat16", tmp_path) is None
    assert CostCurve.of(dropped, "measured") is None


@pytest.mark.parametrize(
    "entry",
    [
        {"curve": {"200+1": "fast"}},
        {"curve": {"x": 1.0}},
        {"curve": {"200+1": 0.1}},  # lacks widths
        {"curve": [0.1, 0.2]},
        "not an entry",
    ],
)
def test_a_malformed_curve_is_none(tmp_path: Path, entry: object) -> None:
    data = {"version": 1, "entries": {"k1/float32": entry}}
    (tmp_path / CACHE_FILE).write_text(json.dumps(data))
    assert load_curve("k1", "float32", tmp_path) is None


def test_a_curve_summary_names_each_width_and_how() -> None:
    curve = CostCurve({1: 0.037, 64: 0.095}, "measured", note="not cached: load average 9")
    assert (
        curve.summary() == "1 token 37 ms, 64 tokens 95 ms (measured, not cached: load average 9)"
    )


@pytest.mark.parametrize(
    "text",
    [
        "not json {",
        "[]",
        '{"version": 99, "entries": {}}',
        '{"version": 1, "entries": {"k1": {"dtype": "float32", "costs": {"float32": {"x": 1}}}}}',
        '{"version": 1, "entries": {"k1": {"dtype": "float32", "costs": {"float32": {}}}}}',
        '{"version": 1, "entries": {"k1": {"dtype": 3}}}',
    ],
)
def test_a_corrupt_cache_is_no_choice_and_is_overwritten(tmp_path: Path, text: str) -> None:
    (tmp_path / CACHE_FILE).write_text(text)
    assert load_choice("k1", ["float32", "bfloat16"], tmp_path) is None
    measured = measure_choice(["float32", "bfloat16"], FakeMeasure(AVX2), key="k1")
    store_choice(measured, tmp_path)
    assert json.loads((tmp_path / CACHE_FILE).read_text())["version"] == 1
    assert load_choice("k1", ["float32", "bfloat16"], tmp_path) is not None


def test_an_unwritable_cache_is_skipped(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    measured = measure_choice(["float32"], FakeMeasure(AVX2), key="k1")
    store_choice(measured, blocker / "below")  # a folder under a file: cannot be created
    assert load_choice("k1", ["float32"], blocker / "below") is None


def test_the_cache_keeps_a_bounded_number_of_keys(tmp_path: Path) -> None:
    measured = measure_choice(["float32"], FakeMeasure(AVX2))
    for i in range(40):
        store_choice(DtypeChoice("float32", "measured", measured.costs, f"k{i}"), tmp_path)
    entries = json.loads((tmp_path / CACHE_FILE).read_text())["entries"]
    assert len(entries) == 32
    assert "k39" in entries and "k0" not in entries


def test_dtype_names_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert dc.canonical_dtype("bf16") == "bfloat16"
    with pytest.raises(EngineError, match="unknown dtype"):
        dc.canonical_dtype("int8")
    monkeypatch.delenv(dc.DTYPE_ENV, raising=False)
    assert dc.dtype_from_env() is None
    monkeypatch.setenv(dc.DTYPE_ENV, "auto")
    assert dc.dtype_from_env() is None
    monkeypatch.setenv(dc.DTYPE_ENV, "fp32")
    assert dc.dtype_from_env() == "float32"
    monkeypatch.setenv(dc.DTYPE_ENV, "fp8")
    with pytest.raises(EngineError, match="FACTORSPEC_DTYPE"):
        dc.dtype_from_env()


def test_a_busy_machine_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dc, "engine_threads", lambda: 2)
    monkeypatch.setattr(dc.os, "getloadavg", lambda: (2.5, 1.0, 1.0))
    assert dc.busy_reason() == ""
    monkeypatch.setattr(dc.os, "getloadavg", lambda: (8.3, 8.0, 6.0))
    assert dc.busy_reason() == "load average 8.3 on 2 cores"
    noted = DtypeChoice("float32", "measured", note="not cached: load average 8.3 on 2 cores")
    assert "not cached" in noted.summary()


def test_cpu_candidates_need_no_gpu() -> None:
    assert dc.candidate_dtypes("cpu") == ("float32", "bfloat16")


def _never() -> DtypeChoice:
    raise AssertionError("measured although the choice was given")


def test_vllm_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(dc.DTYPE_ENV, raising=False)
    cached = DtypeChoice("float32", "cached", key="k")
    measured = DtypeChoice("bfloat16", "measured", key="k")
    # explicit: no cache, no measuring, on any device
    got = vllm_dtype("bf16", on_gpu=False, cached=_never, measure=_never)
    assert (got.dtype, got.how) == ("bfloat16", "explicit")
    # a GPU keeps vLLM's own default
    got = vllm_dtype(None, on_gpu=True, cached=_never, measure=_never)
    assert (got.dtype, got.how) == ("auto", "runtime")
    # CPU: the cached per-machine choice, else a measured one
    assert vllm_dtype(None, on_gpu=False, cached=lambda: cached, measure=_never) is cached
    assert vllm_dtype(None, on_gpu=False, cached=lambda: None, measure=lambda: measured) is (
        measured
    )
    monkeypatch.setenv(dc.DTYPE_ENV, "float16")
    got = vllm_dtype(None, on_gpu=False, cached=_never, measure=_never)
    assert (got.dtype, got.how) == ("float16", "environment")


@pytest.mark.model  # the default model folder's tokenizer; vLLM itself is a fake
def test_vllm_engine_starts_vllm_in_the_chosen_dtype(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys
    import types

    import torch

    from factorspec_sdk.engines.model_store import default_model_path
    from factorspec_sdk.engines.vllm_engine import VLLMEngine

    started: list[dict[str, object]] = []

    class FakeLLM:
        def __init__(self, **kwargs: object) -> None:
            started.append(kwargs)

    fake = types.ModuleType("vllm")
    fake.__dict__.update(__version__="0.32.0", LLM=FakeLLM)
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv(dc.DTYPE_ENV, raising=False)
    folder = str(default_model_path())  # before the cache folder moves
    monkeypatch.setenv("FACTORSPEC_CACHE_DIR", str(tmp_path))
    measured = measure_choice(
        ["float32", "bfloat16"], FakeMeasure(AMX), key=dc.machine_key(folder, "cpu")
    )
    store_choice(measured)
    engine = VLLMEngine(folder)
    assert started[-1]["dtype"] == "bfloat16" == engine.dtype
    assert engine.dtype_choice.how == "cached"
    engine = VLLMEngine(folder, dtype="fp32")
    assert started[-1]["dtype"] == "float32" == engine.dtype
    assert engine.dtype_choice.how == "explicit"
