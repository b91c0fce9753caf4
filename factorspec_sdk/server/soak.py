"""Soak test of `factorspec serve` (a script; ``make soak``): many distinct specs, one server.

``python -m factorspec_sdk.server.soak --requests 10000`` starts ``factorspec serve --engine
scripted`` in a child process on a free loopback port (`ServerProcess`), then sends the
requests from concurrent clients, each over a spec no other request uses: half are plain
JSON schemas (an enum set, integer bounds, list and string lengths that vary with the
request number), half relation IRs of a small trip model over a per-request context (its
own city names and stay lengths). Every answer is checked on the client side with Pydantic
(the schema's model, or the trip model with its relations and context). While it runs, the
server's resident set size is sampled from ``/proc``.

It reports the answers by status, records lost (no answer), invalid, cut short, 5xx, and the
RSS at the start, after the warm-up (the first tenth of the requests), at the end and at its
peak. Bounded in count (``--requests``) and time (``--max-seconds``); loopback only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, cast

from pydantic import BaseModel, Field, ValidationError, create_model

from factorspec_sdk.ir import to_ir
from factorspec_sdk.relations import distinct, relation
from factorspec_sdk.server.process import ServerProcess

__all__ = ["SoakReport", "SoakTrip", "main", "run_soak", "soak_request"]

MODEL = "soak-scripted"
CUT_CODES = frozenset({"max_tokens_reached", "timeout_reached"})
"""The error codes of a record cut short (`factorspec_sdk.server.dispatch`)."""


class SoakLeg(BaseModel):
    """One stay of a `SoakTrip`."""

    city: str
    first_day: int = Field(ge=1, le=40)
    last_day: int = Field(ge=1, le=40)


class SoakTrip(BaseModel):
    """Every city of the context once, consecutive days, the context's stay lengths."""

    legs: list[SoakLeg] = Field(max_length=3)

    @relation
    def cities(self, ctx: dict[str, int]) -> bool:
        """Each city of the context, and only those."""
        return len(self.legs) == len(ctx) and all(leg.city in ctx for leg in self.legs)

    @relation
    def chain(self, ctx: dict[str, int]) -> bool:
        """Day 1 first; a stay starts on the day the previous one ends; stay lengths."""
        return (
            self.legs[0].first_day == 1
            and all(b.first_day == a.last_day for a, b in zip(self.legs, self.legs[1:]))
            and all(leg.last_day - leg.first_day + 1 == ctx[leg.city] for leg in self.legs)
        )

    @relation
    def once(self) -> bool:
        """No city twice."""
        return distinct(leg.city for leg in self.legs)


def _schema_model(i: int) -> type[BaseModel]:
    """The ``i``-th plain-schema model: its own enum set and bounds."""
    choices = tuple(f"v{i}x{k}" for k in range(2 + i % 5))
    kind = cast(Any, Literal)[choices]  # a Literal of values known only here
    low = (i * 7919) % 101 - 50
    return create_model(
        f"Soak{i}",
        kind=(kind, ...),
        n=(int, Field(ge=low, le=low + 1 + (i * 31) % 200)),
        flags=(list[bool], Field(max_length=1 + i % 4)),
        label=(str, Field(max_length=1 + i % 6)),
    )


def _trip_context(i: int) -> dict[str, int]:
    """The ``i``-th trip context: 1-3 cities named after ``i``, stays of 1-4 days."""
    return {f"C{i}n{k}": 1 + (i + 3 * k) % 4 for k in range(1 + i % 3)}


def soak_request(i: int) -> tuple[dict[str, object], type[BaseModel], object]:
    """The body of request ``i``, the model its record must validate as, and its context."""
    messages = [{"role": "user", "content": f"record number {i}"}]
    if i % 2 == 0:
        model = _schema_model(i)
        fmt = {
            "type": "json_schema",
            "json_schema": {"name": model.__name__, "schema": model.model_json_schema()},
        }
        return {"model": MODEL, "messages": messages, "response_format": fmt}, model, None
    ctx = _trip_context(i)
    ir = to_ir(SoakTrip, ctx)
    return {"model": MODEL, "messages": messages, "factorspec": {"ir": ir}}, SoakTrip, ctx


@dataclass(slots=True)
class SoakReport:
    """What a soak found.

    Attributes:
        requests: requests sent.
        statuses: answers by HTTP status.
        valid: complete records that validate.
        invalid: complete records that do not (must be 0).
        cut: records cut short: a 422 ``max_tokens_reached`` or ``timeout_reached`` (or a
            ``finish_reason`` other than ``stop``).
        lost: requests with no answer (connection error, timeout).
        server_errors: 5xx answers.
        wall_seconds: time from the first request to the last answer.
        rss_start_mb: server RSS before the first request.
        rss_warm_mb: server RSS after the warm-up (the first tenth of the requests).
        rss_end_mb: server RSS after the last answer.
        rss_peak_mb: largest RSS sampled.
        examples: a few failures, for the log.
    """

    requests: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    valid: int = 0
    invalid: int = 0
    cut: int = 0
    lost: int = 0
    server_errors: int = 0
    wall_seconds: float = 0.0
    rss_start_mb: float = 0.0
    rss_warm_mb: float = 0.0
    rss_end_mb: float = 0.0
    rss_peak_mb: float = 0.0
    examples: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One paragraph of figures."""
        rate = self.requests / self.wall_seconds if self.wall_seconds else 0.0
        return (
            f"{self.requests} requests in {self.wall_seconds:.1f} s ({rate:.1f}/s); statuses "
            f"{dict(sorted(self.statuses.items()))}; valid {self.valid}, invalid "
            f"{self.invalid}, cut {self.cut}, lost {self.lost}, 5xx {self.server_errors}; "
            f"server RSS start {self.rss_start_mb:.1f} MB, after warm-up "
            f"{self.rss_warm_mb:.1f} MB, end {self.rss_end_mb:.1f} MB, peak "
            f"{self.rss_peak_mb:.1f} MB"
        )


def run_soak(
    requests: int = 10_000,
    *,
    clients: int = 16,
    max_seconds: float = 1800.0,
    max_tokens: int = 512,
    planning_workers: int = 0,
) -> SoakReport:
    """Start a scripted server, send ``requests`` distinct-spec requests, report.

    Args:
        requests: how many requests (each over its own spec).
        clients: concurrent clients (one thread and HTTP connection each).
        max_seconds: stop sending after this long (the report counts what was sent).
        max_tokens: token budget per record.
        planning_workers: the server's ``--planning-workers`` (its RSS is then the engine
            process's alone).
    """
    import httpx

    report = SoakReport()
    counter = itertools.count()
    lock = threading.Lock()
    statuses: Counter[int] = Counter()
    done = [0]
    warm_at = max(requests // 10, 1)
    args = ("--planning-workers", str(planning_workers))
    with ServerProcess("scripted", model_name=MODEL, args=args) as server:
        report.rss_start_mb = report.rss_peak_mb = server.rss_bytes() / 2**20
        stop_sampling = threading.Event()

        def sample() -> None:
            while not stop_sampling.wait(0.25):
                rss = server.rss_bytes() / 2**20
                with lock:
                    report.rss_peak_mb = max(report.rss_peak_mb, rss)

        def note(text: str) -> None:
            if len(report.examples) < 10:
                report.examples.append(text[:500])

        def client() -> None:
            with httpx.Client(base_url=server.url, timeout=300) as http:
                while time.perf_counter() < deadline:
                    i = next(counter)
                    if i >= requests:
                        return
                    body, model, ctx = soak_request(i)
                    body["max_tokens"] = max_tokens
                    try:
                        r = http.post("/v1/chat/completions", json=body)
                    except httpx.HTTPError as exc:
                        with lock:
                            report.lost += 1
                            note(f"request {i}: {exc!r}")
                        continue
                    outcome = _judge(r, model, ctx)
                    with lock:
                        statuses[r.status_code] += 1
                        done[0] += 1
                        if outcome == "valid":
                            report.valid += 1
                        elif outcome == "cut":
                            report.cut += 1
                        elif outcome == "invalid":
                            report.invalid += 1
                            note(f"request {i}: invalid record {r.text}")
                        else:
                            note(f"request {i}: {r.status_code} {r.text}")
                        if r.status_code >= 500:
                            report.server_errors += 1
                        if done[0] == warm_at:
                            report.rss_warm_mb = server.rss_bytes() / 2**20

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.perf_counter()
        deadline = t0 + max_seconds
        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        report.wall_seconds = time.perf_counter() - t0
        stop_sampling.set()
        sampler.join()
        report.rss_end_mb = server.rss_bytes() / 2**20
        report.rss_peak_mb = max(report.rss_peak_mb, report.rss_end_mb)
    report.requests = min(next(counter), requests)
    report.statuses = dict(statuses)
    return report


def _judge(
    r: object, model: type[BaseModel], ctx: object
) -> Literal["valid", "invalid", "cut", "error"]:
    import httpx

    assert isinstance(r, httpx.Response)
    if r.status_code == 422 and r.json()["error"]["code"] in CUT_CODES:
        return "cut"
    if r.status_code != 200:
        return "error"
    choice = r.json()["choices"][0]
    if choice["finish_reason"] != "stop":
        return "cut"
    try:
        model.model_validate_json(choice["message"]["content"], context=ctx)
    except (ValidationError, ValueError):
        return "invalid"
    return "valid"


def main() -> None:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--max-seconds", type=float, default=1800.0)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--planning-workers", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print the report as JSON too")
    args = ap.parse_args()
    report = run_soak(
        args.requests,
        clients=args.clients,
        max_seconds=args.max_seconds,
        max_tokens=args.max_tokens,
        planning_workers=args.planning_workers,
    )
    print(report.summary())
    for line in report.examples:
        print("  " + line)
    if args.json:
        print(json.dumps(asdict(report)))


if __name__ == "__main__":
    main()
