"""Counters of several server processes summed into one ``/metrics`` (`Metrics.merged`)."""

from __future__ import annotations

from factorspec_sdk.drafter.loop import GenerationStats
from factorspec_sdk.server.metrics import Metrics


def counters(requests: int, latency: float, tokens: int, active: int) -> Metrics:
    m = Metrics()
    for _ in range(requests):
        m.request("/v1/chat/completions", 200, latency)
    m.request("/v1/chat/completions", 422, 0.01)
    stats = GenerationStats(tokens=tokens, verify_steps=2)
    m.generation(stats)
    m.add("engine_steps", 3)
    m.active = active
    m.queue_depth = active + 1
    return m


def test_merged_counters_sum_every_process_and_gauges_only_the_live_ones() -> None:
    a, b, gone = counters(3, 0.2, 40, 2), counters(5, 3.0, 60, 4), counters(7, 0.07, 10, 9)
    merged = Metrics.merged([(a.snapshot(), True), (b.snapshot(), True), (gone.snapshot(), False)])
    assert merged.requests[("/v1/chat/completions", 200)] == 15
    assert merged.requests[("/v1/chat/completions", 422)] == 3
    assert merged.totals["completion_tokens"] == 110 and merged.totals["engine_steps"] == 9
    assert merged.active == 6 and merged.queue_depth == 8  # the gone process's gauges: none
    assert sum(merged.latency_counts) == 18
    assert abs(merged.latency_sum - (0.6 + 15.0 + 0.49 + 0.03)) < 1e-9
    text = merged.render()
    assert 'factorspec_requests_total{route="/v1/chat/completions",status="200"} 15' in text
    assert "factorspec_completion_tokens_total 110" in text
    assert "factorspec_request_seconds_count 18" in text


def test_a_snapshot_is_a_copy() -> None:
    m = counters(1, 0.1, 5, 0)
    snap = m.snapshot()
    m.request("/v1/chat/completions", 200, 0.1)
    assert snap.requests[("/v1/chat/completions", 200)] == 1
