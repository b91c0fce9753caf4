"""Worker processes for benchmarks that must survive a hang: one library each, a deadline per ask.

A benchmark that runs a library over thousands of third-party schemas meets schemas that
hang (in Z3, or in a library's native code, which a thread could not be stopped from) or
crash the process. Each library therefore runs in a worker process of its own
(``multiprocessing`` ``forkserver``, whose server imports the heavy modules once; ``spawn``
where forkserver is missing), built by a picklable factory, that answers ``(verb, payload)``
requests: ``compile`` a schema, then ``run`` something over it (`Library`). The parent asks
with a deadline (`WorkerProcess.ask`); a worker past its deadline is killed and a fresh one
is started on the next ask, so a hang costs one time limit and never stalls the run.
`WorkerGone` says which: a ``timeout``, or an ``error`` (the worker died, or raised
something the library does not document).

Scripts that start workers need the ``if __name__ == "__main__":`` guard multiprocessing
asks for. Used by ``factorspec bench schemas`` (`factorspec_sdk.bench.schemas`) and
``factorspec bench maskbench`` (`factorspec_sdk.bench.maskbench`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import tempfile
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any, Protocol

__all__ = [
    "PRELOAD",
    "START_LIMIT_S",
    "Library",
    "WorkerGone",
    "WorkerProcess",
    "captured_stderr",
    "short_text",
]

START_LIMIT_S = 300.0
"""A worker's start: imports and the tokenizer, on a busy machine."""

PRELOAD = ("torch", "transformers.models.auto.tokenization_auto")
"""Modules the forkserver imports once, for every worker it forks."""

_DETAIL_CHARS = 300


def short_text(exc: BaseException | str, limit: int = _DETAIL_CHARS) -> str:
    """An exception (``Type: message``) or a text on one line, cut to ``limit`` characters."""
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@contextlib.contextmanager
def captured_stderr() -> Iterator[Callable[[], str]]:
    """Send file descriptor 2 to a temporary file (native libraries' warnings land there).

    Yields a function that returns what was written, once the block has ended.
    """
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        text: list[str] = []

        def read() -> str:
            return "".join(text)

        try:
            yield read
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text.append(sink.read().decode("utf-8", errors="replace"))


class Library(Protocol):
    """What a worker process drives: a compile, then runs over its result."""

    def compile(self, schema: dict[str, Any]) -> object:
        """Compile ``schema`` (the answer says whether the library accepted it)."""
        ...

    def run(self, payload: Any) -> object:
        """Run over the last compiled schema."""
        ...


def serve(factory: Callable[[], Library], conn: Connection) -> None:
    """A worker process: build the library, then answer ``(verb, payload)`` requests."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    worker = factory()
    conn.send("ready")
    while True:
        try:
            verb, payload = conn.recv()
        except EOFError:
            return
        try:
            answer: object = worker.compile(payload) if verb == "compile" else worker.run(payload)
        except Exception as exc:
            answer = exc if _picklable(exc) else RuntimeError(short_text(exc))
        conn.send(answer)


def _picklable(exc: Exception) -> bool:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return False
    return True


def _context(preload: Sequence[str]) -> SpawnContext | ForkServerContext:
    """``forkserver`` with the heavy imports preloaded once (``spawn`` where it is missing)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(preload))
    return ctx


class WorkerGone(Exception):
    """The worker did not answer in time (``timeout``), or died or raised (``error``)."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class WorkerProcess:
    """The parent's handle on one library's worker process, restarted after a kill.

    Args:
        name: the library's name, for messages.
        factory: builds the library in the worker (picklable: a module-level function, or a
            ``functools.partial`` of one).
        preload: modules the forkserver imports once (the benchmark's own module first).
    """

    def __init__(
        self, name: str, factory: Callable[[], Library], preload: Sequence[str] = PRELOAD
    ) -> None:
        self.name = name
        self.factory = factory
        self.preload = tuple(preload)
        self.proc: BaseProcess | None = None
        self.conn: Connection | None = None
        self.ready = False

    def launch(self) -> None:
        """Start the process (it builds its library while the others start too)."""
        ctx = _context(self.preload)
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=serve, args=(self.factory, child), daemon=True)
        proc.start()
        child.close()
        self.proc, self.conn, self.ready = proc, parent, False

    def _connection(self) -> Connection:
        if self.conn is None:
            self.launch()
        if not self.ready:
            self._wait(START_LIMIT_S, "start")
            self.ready = True
        assert self.conn is not None
        return self.conn

    def _wait(self, limit: float, what: str) -> object:
        assert self.conn is not None
        try:
            if self.conn.poll(limit):
                return self.conn.recv()
        except (EOFError, OSError):
            self.stop()
            raise WorkerGone("error", f"the {self.name} worker died during {what}") from None
        self.stop()
        raise WorkerGone("timeout", f"{what} took more than {limit:g} s")

    def ask(self, verb: str, payload: object, limit: float) -> object:
        """Send ``(verb, payload)`` and wait up to ``limit`` seconds for the answer.

        Raises:
            WorkerGone: no answer in time (the worker is killed), the worker died, or it
                raised (its exception's text).
        """
        conn = self._connection()
        conn.send((verb, payload))
        answer = self._wait(limit, verb)
        if isinstance(answer, Exception):
            raise WorkerGone("error", short_text(answer))
        return answer

    def stop(self) -> None:
        """Kill the process if it runs; the next ask starts a fresh one."""
        if self.conn is not None:
            self.conn.close()
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join()
        self.proc, self.conn, self.ready = None, None, False
