"""`factorspec serve` in a child process on a loopback port (for the contract run and the soak).

``with ServerProcess("scripted") as server: ...`` starts ``python -m factorspec_sdk.cli.main
serve --engine scripted`` on a free port of 127.0.0.1, waits until ``/health`` answers 200, and
stops the process (SIGTERM, then SIGKILL) when the block ends. `rss_bytes` reads the child's
resident set size from ``/proc`` (Linux).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Self

__all__ = ["ChildProcess", "ServerProcess", "free_port"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ChildProcess:
    """A child process that serves HTTP, healthy once its ``/health`` answers 200.

    A subclass names its `command` (and `environment`), its `url` and what it is
    (`what`, for errors); this class starts it, waits for it and stops it.

    Args:
        start_timeout: seconds to wait for ``/health``.
        log: a file for the child's output (default: discarded).
    """

    what = "the child process"
    """What the child is, in errors (``factorspec serve``, ``vllm-router``)."""

    def __init__(self, *, start_timeout: float = 60.0, log: Path | None = None) -> None:
        self.start_timeout = start_timeout
        self.log = log
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The child's root URL, e.g. ``http://127.0.0.1:8123``."""
        raise NotImplementedError

    def command(self) -> list[str]:
        """The child's command line."""
        raise NotImplementedError

    def environment(self) -> dict[str, str] | None:
        """The child's environment (``None``: this process's)."""
        return None

    @property
    def pid(self) -> int:
        """The child's process id."""
        if self._proc is None:
            raise RuntimeError(f"{self.what} is not running")
        return self._proc.pid

    def start(self) -> Self:
        """Start the child and wait until it is healthy.

        Raises:
            RuntimeError: the child exited, or was not healthy in time (its exit code or the
                limit is named).
        """
        cmd, env = self.command(), self.environment()
        with contextlib.ExitStack() as stack:
            out: IO[bytes] | int = subprocess.DEVNULL
            if self.log is not None:
                out = stack.enter_context(self.log.open("ab"))
            self._proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                raise RuntimeError(f"{self.what} exited with code {code} while starting")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.what} was not healthy in {self.start_timeout} s")
            time.sleep(0.1)

    def stop(self, timeout: float = 20.0) -> int | None:
        """Stop the child (SIGTERM, then SIGKILL); returns its exit code."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        return proc.returncode

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ServerProcess(ChildProcess):
    """A `factorspec serve` child process on a loopback address.

    Args:
        engine: the engine name (``"scripted"``: no model needed).
        model_name: the model id the server answers to.
        host: a loopback address (others are refused: this is a test and soak helper).
        port: the port (default: a free one).
        args: more ``factorspec serve`` options.
        start_timeout: seconds to wait for ``/health``.
        log: a file for the server's output (default: discarded).

    Raises:
        ValueError: ``host`` is not a loopback address.
        RuntimeError: the server did not become healthy in time (its exit code is named).
    """

    def __init__(
        self,
        engine: str = "scripted",
        *,
        model_name: str = "scripted",
        host: str = "127.0.0.1",
        port: int | None = None,
        args: tuple[str, ...] = (),
        start_timeout: float = 60.0,
        log: Path | None = None,
    ) -> None:
        if host not in _LOOPBACK:
            raise ValueError(f"ServerProcess serves on loopback only, not {host!r}")
        self.engine = engine
        self.model_name = model_name
        self.host = host
        self.port = port or free_port(host)
        self.args = args
        super().__init__(start_timeout=start_timeout, log=log)

    what = "factorspec serve"

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:8123``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def rss_bytes(self) -> int:
        """The server's resident set size now (``VmRSS`` in ``/proc/<pid>/status``)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS line in /proc/<pid>/status")

    def environment(self) -> dict[str, str]:
        """This process's environment, with the package's root first on ``PYTHONPATH``."""
        root = Path(__file__).resolve().parents[2]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        return env

    def command(self) -> list[str]:
        """``python -m factorspec_sdk.cli.main serve ...`` on this host and port."""
        return [
            sys.executable,
            "-m",
            "factorspec_sdk.cli.main",
            "serve",
            "--engine",
            self.engine,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--model-name",
            self.model_name,
            *self.args,
        ]
