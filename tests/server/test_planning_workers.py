"""``factorspec serve --planning-workers N``: N server processes plan for one engine.

Real child processes: the server (`ServerProcess`, the scripted engine) and its planning
workers, hit over HTTP by concurrent clients.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest

from factorspec_sdk.server.process import ServerProcess
from factorspec_sdk.server.soak import MODEL, run_soak, soak_request


def children(pid: int) -> set[int]:
    """The live child processes of ``pid`` (``/proc``)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == str(pid) and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def workers_of(server: ServerProcess) -> set[int]:
    """The server's planning workers (its spawned children)."""
    out = set()
    for pid in children(server.pid):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"spawn_main" in cmdline:
            out.add(pid)
    return out


def test_a_small_soak_over_two_planning_workers_loses_nothing() -> None:
    report = run_soak(120, clients=8, max_seconds=600, planning_workers=2)
    print(report.summary())
    assert report.requests == 120 and report.statuses == {200: 120}, report.examples
    assert report.valid == 120
    assert report.invalid == report.cut == report.lost == report.server_errors == 0


def test_metrics_count_every_workers_requests() -> None:
    body, _, _ = soak_request(1)
    with ServerProcess("scripted", model_name=MODEL, args=("--planning-workers", "2")) as server:
        for _ in range(8):  # a new connection each: the kernel picks the worker
            with httpx.Client(base_url=server.url, timeout=60) as http:
                assert http.post("/v1/chat/completions", json=body).status_code == 200
        line = 'factorspec_requests_total{route="/v1/chat/completions",status="200"} 8'
        deadline = time.monotonic() + 30
        while True:  # each worker posts its counters every second
            with httpx.Client(base_url=server.url, timeout=60) as http:
                text = http.get("/metrics").text
            if line in text:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.5)


def test_a_dead_worker_is_replaced_and_every_worker_stops_with_the_server() -> None:
    body, _, _ = soak_request(1)
    with ServerProcess("scripted", model_name=MODEL, args=("--planning-workers", "2")) as server:
        workers = workers_of(server)
        assert len(workers) == 2
        with httpx.Client(base_url=server.url, timeout=60) as http:
            assert http.post("/v1/chat/completions", json=body).status_code == 200
            victim = min(workers)
            os.kill(victim, signal.SIGKILL)
            deadline = time.monotonic() + 60
            while True:  # the server starts another worker
                now = workers_of(server)
                if len(now) == 2 and victim not in now:
                    break
                assert time.monotonic() < deadline, f"workers {now}"
                time.sleep(0.2)
            for _ in range(6):  # new connections reach either worker; each answers
                with httpx.Client(base_url=server.url, timeout=60) as fresh:
                    r = fresh.post("/v1/chat/completions", json=body)
                    assert r.status_code == 200, r.text
                    assert r.json()["choices"][0]["finish_reason"] == "stop"
        all_workers = workers_of(server)
    for pid in all_workers:  # SIGTERM to the server stopped them too
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("workers", ["-1"])
def test_a_negative_number_of_workers_is_refused(workers: str) -> None:
    with pytest.raises(RuntimeError, match="exit"):
        ServerProcess("scripted", args=("--planning-workers", workers), start_timeout=30).start()


@pytest.mark.parametrize("workers", ["0", "2"])
def test_the_log_says_once_where_the_server_listens(workers: str, tmp_path: Path) -> None:
    """One ``FactorSpec serving <model> on <url>`` line; uvicorn's start names no worker's PID."""
    log = tmp_path / "server.log"
    args = ("--planning-workers", workers)
    with ServerProcess("scripted", model_name=MODEL, args=args, log=log) as server:
        line = f"FactorSpec serving {MODEL} on {server.url}"
        deadline = time.monotonic() + 30
        while line not in log.read_text():  # logged once the first worker accepts connections
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        pid = server.pid
    text = log.read_text()
    assert text.count("FactorSpec serving") == 1, text
    started = re.findall(r"Started server process \[(\d+)\]", text)
    assert set(started) <= {str(pid)}, text  # with workers, uvicorn's PIDs are theirs
