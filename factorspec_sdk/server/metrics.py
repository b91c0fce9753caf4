"""Server counters, rendered in the Prometheus text format at ``/metrics``."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from factorspec_sdk.drafter.loop import GenerationStats

__all__ = ["Metrics", "MetricsSnapshot"]

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """The counters of one `Metrics` at one moment (plain data: it pickles).

    Attributes:
        requests: answered requests by route and status.
        totals: the other counters.
        latency_counts: requests per latency bucket.
        latency_sum: their summed latency.
        gauges: ``queue_depth``, ``active``, ``in_flight``.
    """

    requests: dict[tuple[str, int], int]
    totals: dict[str, float]
    latency_counts: tuple[int, ...]
    latency_sum: float
    gauges: tuple[int, int, int]


class Metrics:
    """Thread-safe counters of one server process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, int]] = Counter()
        self.totals: Counter[str] = Counter()
        self.latency_counts = [0] * (len(_BUCKETS) + 1)
        self.latency_sum = 0.0
        self.queue_depth = 0
        self.active = 0
        self.in_flight = 0

    def request(self, route: str, status: int, seconds: float) -> None:
        """Count one answered request."""
        with self._lock:
            self.requests[(route, status)] += 1
            self.latency_sum += seconds
            i = next((k for k, b in enumerate(_BUCKETS) if seconds <= b), len(_BUCKETS))
            self.latency_counts[i] += 1

    def add(self, name: str, value: float = 1.0) -> None:
        """Add to a counter."""
        with self._lock:
            self.totals[name] += value  # type: ignore[assignment]

    def generation(self, stats: GenerationStats) -> None:
        """Count the work of one finished generation."""
        with self._lock:
            t = self.totals
            t["prompt_tokens"] += stats.prompt_tokens
            t["cached_prompt_tokens"] += stats.cached_prompt_tokens
            t["completion_tokens"] += stats.tokens
            t["verify_steps"] += stats.verify_steps
            t["drafted_tokens"] += stats.drafted
            t["certain_tokens"] += stats.certain_drafted
            t["guesses_proposed"] += stats.guesses_proposed
            t["guesses_accepted"] += stats.guesses_accepted
            t["oracle_seconds"] += stats.plan_seconds  # type: ignore[assignment]
            t["critical_oracle_seconds"] += stats.critical_plan_seconds  # type: ignore[assignment]
            t["forward_seconds"] += stats.forward_seconds  # type: ignore[assignment]

    def snapshot(self) -> MetricsSnapshot:
        """The counters now."""
        with self._lock:
            return MetricsSnapshot(
                dict(self.requests),
                dict(self.totals),
                tuple(self.latency_counts),
                self.latency_sum,
                (self.queue_depth, self.active, self.in_flight),
            )

    @classmethod
    def merged(cls, snapshots: Iterable[tuple[MetricsSnapshot, bool]]) -> Metrics:
        """The sum of several processes' counters; the gauges of the live ones only.

        ``snapshots``: each process's latest snapshot, with whether it still runs (a gone
        process's counters still count: they are cumulative).
        """
        out = cls()
        for snap, live in snapshots:
            out.requests.update(snap.requests)
            out.totals.update(snap.totals)
            pairs = zip(out.latency_counts, snap.latency_counts, strict=True)
            out.latency_counts = [a + b for a, b in pairs]
            out.latency_sum += snap.latency_sum
            if live:
                out.queue_depth += snap.gauges[0]
                out.active += snap.gauges[1]
                out.in_flight += snap.gauges[2]
        return out

    def render(self) -> str:
        """The Prometheus text exposition."""
        with self._lock:
            lines: list[str] = []

            def metric(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
                lines.append(f"# HELP factorspec_{name} {help_}")
                lines.append(f"# TYPE factorspec_{name} {kind}")
                for labels, v in samples:
                    lines.append(f"factorspec_{name}{labels} {v:g}")

            metric(
                "requests_total",
                "counter",
                "Requests answered, by route and HTTP status.",
                [
                    (f'{{route="{r}",status="{s}"}}', float(n))
                    for (r, s), n in sorted(self.requests.items())
                ],
            )
            t = self.totals
            for name, help_ in (
                ("prompt_tokens", "Prompt tokens of finished generations."),
                ("cached_prompt_tokens", "Of those, tokens served from the prefix cache."),
                ("completion_tokens", "Record tokens generated."),
                ("verify_steps", "Verify steps (forward passes) of finished generations."),
                ("drafted_tokens", "Draft tokens sent for verification."),
                ("certain_tokens", "Certain (constraint-determined) draft tokens."),
                ("guesses_proposed", "Guessed draft tokens."),
                ("guesses_accepted", "Guessed draft tokens the model accepted."),
                ("oracle_seconds", "Oracle, mask and tokenization time."),
                ("critical_oracle_seconds", "Oracle time the decoding thread waited for."),
                ("forward_seconds", "Time in engine forward passes (summed per request)."),
                ("cancelled", "Generations cancelled (client gone)."),
                ("timeouts", "Generations stopped by their timeout."),
                ("engine_steps", "Batched decoder steps run by the engine thread."),
            ):
                metric(f"{name}_total", "counter", help_, [("", float(t[name]))])
            steps = t["verify_steps"]
            metric(
                "tokens_per_verify_step",
                "gauge",
                "Record tokens per verify step, over all finished generations.",
                [("", t["completion_tokens"] / steps if steps else 0.0)],
            )
            metric(
                "queue_depth",
                "gauge",
                "Jobs waiting for a decoder slot.",
                [("", float(self.queue_depth))],
            )
            metric("active_jobs", "gauge", "Jobs in the decoder batch.", [("", float(self.active))])
            metric("in_flight", "gauge", "Requests being handled.", [("", float(self.in_flight))])
            lines.append("# HELP factorspec_request_seconds Request latency.")
            lines.append("# TYPE factorspec_request_seconds histogram")
            acc = 0
            for b, n in zip((*_BUCKETS, float("inf")), self.latency_counts, strict=True):
                acc += n
                le = "+Inf" if b == float("inf") else f"{b:g}"
                lines.append(f'factorspec_request_seconds_bucket{{le="{le}"}} {acc}')
            lines.append(f"factorspec_request_seconds_sum {self.latency_sum:g}")
            lines.append(f"factorspec_request_seconds_count {acc}")
            return "\n".join(lines) + "\n"
