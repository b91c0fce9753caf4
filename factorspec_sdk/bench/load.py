"""Load test for `factorspec serve` (a script, not a test).

``python -m factorspec_sdk.bench.load --engine scripted --clients 64 --seconds 60`` (``make
load``) starts ``factorspec serve`` in a child process on a free loopback port
(`ServerProcess`; ``--in-process``: a server thread in this process, as before; ``--url``:
a server already running), then runs N concurrent clients in this process (official
``openai`` client, one thread each), each sending structured requests with a relation IR
(trip plans of 3-5 cities, the packaged `factorspec_sdk.domains.trip.Itinerary`): first
for ``--warmup`` seconds (the server's pools and caches fill), then for the measured time.
Prints throughput, p50/p99 latency and errors, and, for a child server, its CPU per record.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from factorspec_sdk.domains.trip import generate_problem, prompt_for
from factorspec_sdk.engines.protocol import Engine
from factorspec_sdk.ir import to_ir

if TYPE_CHECKING:
    from factorspec_sdk.engines.scripted import ScriptedEngine

__all__ = ["main", "run_load", "scripted_engine"]


def scripted_engine() -> ScriptedEngine:
    """The load's scripted engine: random logits over a tiny vocabulary (forwards cost ~0).

    Every printable character plus three JSON merges, so what a record costs is FactorSpec's
    own work (spec, oracle, planning, masks), not the model's.
    """
    from factorspec_sdk.engines.scripted import ScriptedEngine
    from factorspec_sdk.tokens.vocab import TokenizerInfo

    pieces = [*sorted({chr(c) for c in range(32, 127)} | {"\n"}), '{"', '": ', ', "']
    return ScriptedEngine.random(TokenizerInfo.tiny(pieces), seed=1, temperature_scale=2.0)


def _engine(name: str) -> Engine:
    if name == "scripted":
        return scripted_engine()
    from factorspec_sdk.engines import create_logits_engine

    return create_logits_engine(name)


def _serve(engine: Engine, model_name: str) -> tuple[str, object]:
    import uvicorn

    from factorspec_sdk.graph.z3_gil import keep_gil_in_short_calls
    from factorspec_sdk.server import create_app
    from factorspec_sdk.server.gc_policy import tune_gc

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    config = uvicorn.Config(
        create_app(engine, model_name=model_name), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    tune_gc()  # as `factorspec serve` does
    keep_gil_in_short_calls()
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server


def run_load(
    url: str, model: str, clients: int, seconds: float, max_tokens: int
) -> dict[str, float]:
    """Run the load; returns the summary numbers (also printed)."""
    from openai import OpenAI, OpenAIError

    from factorspec_sdk.domains.trip import Itinerary

    problems = [generate_problem(n, seed) for seed, n in enumerate((3, 4, 5, 3, 4, 5, 3, 4))]
    work = [(prompt_for(p), to_ir(Itinerary, p)) for p in problems]
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    tokens = [0]
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds

    def client(k: int) -> None:
        api = OpenAI(base_url=url + "/v1", api_key="load", max_retries=0, timeout=600)
        i = k
        while time.perf_counter() < stop_at:
            prompt, ir = work[i % len(work)]
            i += 1
            t0 = time.perf_counter()
            try:
                r = api.chat.completions.create(
                    model=model,
                    messages=[{"role": "user", "content": prompt}],
                    max_tokens=max_tokens,
                    extra_body={"factorspec": {"ir": ir}},
                )
                ok = r.choices[0].finish_reason == "stop"
                json.loads(r.choices[0].message.content or "")
            except OpenAIError as exc:
                with lock:
                    errors[type(exc).__name__] += 1
                continue
            dt = time.perf_counter() - t0
            with lock:
                latencies.append(dt)
                tokens[0] += r.usage.completion_tokens if r.usage else 0
                if not ok:
                    errors["finish_reason=length"] += 1

    t_start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t_start
    lat = sorted(latencies)

    def p(q: float) -> float:
        return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")

    out = {
        "clients": float(clients),
        "wall_s": wall,
        "requests": float(len(lat)),
        "requests_per_s": len(lat) / wall,
        "tokens_per_s": tokens[0] / wall,
        "p50_s": p(0.50),
        "p99_s": p(0.99),
        "mean_s": statistics.fmean(lat) if lat else float("nan"),
        "errors": float(sum(errors.values())),
    }
    print(
        f"{clients} clients, {wall:.1f} s: {len(lat)} records ({out['requests_per_s']:.2f}/s, "
        f"{out['tokens_per_s']:.0f} tokens/s), latency p50 {out['p50_s']:.2f} s, p99 "
        f"{out['p99_s']:.2f} s, errors {dict(errors) or 0}"
    )
    return out


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process and its live children so far (Linux ``/proc``).

    The children are the server's planning workers and multiprocessing's helper.
    """
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if stat.parent.name == str(pid) or fields[1] == str(pid):  # itself, or its child
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def main() -> None:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url", help="an already running server (default: start one)")
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="serve from a thread of this process, beside the clients (default: a child process)",
    )
    ap.add_argument("--engine", default="scripted", help="engine to serve: scripted or embedded")
    ap.add_argument("--model", default=None, help="model id (with --url)")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds of load not measured")
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument(
        "--planning-workers",
        type=int,
        default=None,
        help="the child server's planning worker processes (0: it plans in its own process; "
        "default: the server's, one per core)",
    )
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        pid = None
        if args.url:
            from openai import OpenAI

            url = args.url.rstrip("/").removesuffix("/v1")
            model = args.model or OpenAI(base_url=url + "/v1", api_key="x").models.list().data[0].id
        elif args.in_process:
            model = f"load-{args.engine}"
            url, _server = _serve(_engine(args.engine), model)
        else:
            from factorspec_sdk.server.process import ServerProcess

            model = f"load-{args.engine}"
            server = stack.enter_context(
                ServerProcess(
                    args.engine,
                    model_name=model,
                    args=()
                    if args.planning_workers is None
                    else ("--planning-workers", str(args.planning_workers)),
                    start_timeout=300.0,
                )
            )
            url, pid = server.url, server.pid
        if args.warmup > 0:
            print(f"warm-up, {args.warmup:.0f} s:", end=" ")
            run_load(url, model, args.clients, args.warmup, args.max_tokens)
        cpu0 = _cpu_seconds(pid) if pid is not None else 0.0
        out = run_load(url, model, args.clients, args.seconds, args.max_tokens)
        if pid is not None and out["requests"]:
            cpu = _cpu_seconds(pid) - cpu0
            print(
                f"server processes: {cpu:.1f} CPU s, {cpu / out['requests'] * 1000:.1f} ms of CPU "
                "per record"
            )


if __name__ == "__main__":
    main()
