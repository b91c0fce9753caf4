"""``factorspec serve --planning-workers N``: N server processes plan for one engine.

A record's FactorSpec work (the request, the spec, the oracle, the planner, the decoding loop,
the re-check) is Python that holds the GIL: one server process plans on one core, however
many the machine has. With N planning workers, this process keeps the engine (the model is
loaded once) and serves it through an `EngineHost`; N worker processes, started with
multiprocessing's ``spawn``, each run the whole app of `factorspec_sdk.server.app` over an
`EngineProxy` and accept connections on one listening socket opened here (the kernel hands
each new connection to one of them, as with uvicorn's ``--workers``). The host runs the
forwards the workers wait on together as one batch (`factorspec_sdk.engines.shared`), so the
engine still sees one batch while N cores plan; each worker plans its next segments while its
forward runs (`factorspec_sdk.drafter.loop.DecoderConfig.overlap`).

* Each worker has its own counters and queue: ``/metrics`` and ``/health`` describe the
  worker that answered the request, ``max_batch`` and ``max_queue`` hold per worker.
* A worker that dies is started again; its records end with an error, the others go on.
  Workers that keep dying at start (three times within `_FAST_EXIT_S`) stop the server
  with an `EngineError` naming the exit code.
* SIGTERM or Ctrl-C stops the workers (they finish as uvicorn does), then the host; a worker
  whose parent is gone stops too.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from typing import TYPE_CHECKING

from factorspec_sdk.engines.shared import EngineHost
from factorspec_sdk.errors import EngineError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess
    from multiprocessing.synchronize import Event

    import uvicorn

    from factorspec_sdk.drafter.loop import DecoderConfig
    from factorspec_sdk.engines.protocol import Engine
    from factorspec_sdk.server.app import ServerOptions

__all__ = ["MAX_DEFAULT_WORKERS", "default_planning_workers", "run_worker", "serve_workers"]

log = logging.getLogger("factorspec.server")

MAX_DEFAULT_WORKERS = 8
"""The most planning workers `default_planning_workers` picks."""

_FAST_EXIT_S = 10.0
"""A worker that exits sooner than this after its start counts as failing to start."""


def default_planning_workers() -> int:
    """The planning workers ``factorspec serve`` runs when not told: one per core it may use.

    At most `MAX_DEFAULT_WORKERS`; 0 (plan in the server's own process) on one core, where
    a worker would only add the calls between processes.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform (macOS, Windows)
        cores = os.cpu_count() or 1
    return 0 if cores < 2 else min(cores, MAX_DEFAULT_WORKERS)


def serve_workers(
    engine: Engine,
    *,
    workers: int,
    host: str,
    port: int,
    model_name: str | None,
    options: ServerOptions,
    config: DecoderConfig | None = None,
    log_level: str = "info",
) -> None:
    """Serve ``engine`` from ``workers`` planning processes until SIGTERM or Ctrl-C.

    Raises:
        ValueError: ``workers`` below 1.
        EngineError: the workers keep exiting at start, or the engine host stopped.
    """
    import logging.config

    from factorspec_sdk.server.app import served_model_name
    from factorspec_sdk.server.serving_log import log_config, serving_line

    if workers < 1:
        raise ValueError(f"planning workers must be >= 1, got {workers}")
    logging.config.dictConfig(log_config(log_level))  # as uvicorn does in each worker
    engine_host = EngineHost(engine)
    listener = _listen(host, port)
    ctx = multiprocessing.get_context("spawn")
    stop = threading.Event()
    ready = ctx.Event()  # set by the first worker that accepts connections
    line = serving_line(served_model_name(engine, model_name), host, port)
    threading.Thread(
        target=_announce,
        args=(ready, stop, f"{line} ({workers} planning workers)"),
        name="factorspec-announce",
        daemon=True,
    ).start()

    def start(i: int) -> tuple[BaseProcess, float]:
        conn = engine_host.connect()
        proc = ctx.Process(
            target=run_worker,
            args=(listener, conn, model_name, options, config, log_level, ready),
            name=f"factorspec-planning-{i}",
        )
        proc.start()
        conn.close()  # the worker holds its own copy now
        return proc, time.monotonic()

    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    procs: list[tuple[BaseProcess, float]] = []
    fast_exits = 0
    try:
        procs = [start(i) for i in range(workers)]
        while not stop.wait(0.5):
            if not engine_host.alive:
                raise EngineError("the engine host thread stopped")
            for i, (proc, started) in enumerate(procs):
                if proc.is_alive():
                    continue
                fast_exits = fast_exits + 1 if time.monotonic() - started < _FAST_EXIT_S else 0
                if fast_exits >= 3:
                    raise EngineError(
                        f"planning workers keep exiting at start (last exit code {proc.exitcode})"
                    )
                log.warning("%s exited (code %s); starting another", proc.name, proc.exitcode)
                procs[i] = start(i)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        for proc, _ in procs:
            if proc.is_alive():
                proc.terminate()  # SIGTERM: uvicorn finishes its requests
        for proc, _ in procs:
            proc.join(15.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        engine_host.close()
        listener.close()


def run_worker(
    listener: socket.socket,
    conn: Connection,
    model_name: str | None,
    options: ServerOptions,
    config: DecoderConfig | None,
    log_level: str,
    ready: Event,
) -> None:
    """One planning worker (the target of its process): the app over the shared engine.

    Its uvicorn logs warnings, errors and requests; it sets ``ready`` once it accepts
    connections, and the server's process logs where it listens.
    """
    import uvicorn

    from factorspec_sdk.engines.shared import EngineProxy
    from factorspec_sdk.graph.z3_gil import keep_gil_in_short_calls
    from factorspec_sdk.server.app import create_app
    from factorspec_sdk.server.gc_policy import tune_gc
    from factorspec_sdk.server.serving_log import ReadyServer, log_config, quiet_worker

    engine = EngineProxy(conn)
    app = create_app(engine, model_name=model_name, config=config, options=options)
    uvicorn_config = uvicorn.Config(app, log_level=log_level, log_config=log_config(log_level))
    quiet_worker()
    server = ReadyServer(uvicorn_config, on_ready=ready.set)
    threading.Thread(target=_stop_with_parent, args=(server,), daemon=True).start()
    tune_gc()  # as `serve` does in a single process
    keep_gil_in_short_calls()
    try:
        server.run(sockets=[listener])
    finally:
        engine.close()


def _announce(ready: Event, stop: threading.Event, line: str) -> None:
    """Log ``line`` once the first worker is ready (not at all if the server stops first)."""
    while not stop.is_set():
        if ready.wait(0.5):
            log.info(line)
            return


def _stop_with_parent(server: uvicorn.Server) -> None:
    """Ask uvicorn to stop once the process that started this one is gone."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    parent.join()
    server.should_exit = True


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv6 for an address with a colon)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock
