"""Stopping a worker thread's oracle queries between two solver checks.

The decoder plans the next segments on a worker thread while the engine runs a forward
(`factorspec_sdk.drafter.overlap`). When the forward is back, the decoding thread needs one
segment, and the worker was planning some other option's as often as not: a query there
may run tens of checks (a meeting's 37 start times). A worker that plans inside
`stoppable` (with the event the decoder sets) stops at its next check instead
(`stop_point`, called before each check by `factorspec_sdk.graph.component_solver`), by
raising `QueriesStopped`, a ``BaseException`` so that no ``except Exception`` on the way
mistakes it for an answer.

Nothing is lost: every query answered before it stays cached, the models its checks found
stay witnesses, and the planner keeps no segment that was not finished, so the decoding
thread plans a stopped segment again, from those, if it needs it. Other threads are never
stopped: the event is the worker thread's own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["QueriesStopped", "stop_point", "stoppable"]

_local = threading.local()


class QueriesStopped(BaseException):
    """The thread's `stoppable` event was set: the queries it was running stop here."""


@contextmanager
def stoppable(event: threading.Event) -> Iterator[None]:
    """Within it, this thread's queries stop at their next check once ``event`` is set."""
    before = getattr(_local, "event", None)
    _local.event = event
    try:
        yield
    finally:
        _local.event = before


def stop_point() -> None:
    """Raise `QueriesStopped` where this thread runs `stoppable` and its event is set.

    Raises:
        QueriesStopped: the event is set.
    """
    event: threading.Event | None = getattr(_local, "event", None)
    if event is not None and event.is_set():
        raise QueriesStopped
