"""Planning the next segments while the engine works: `Prefetch`, one step's prefetches.

Both decoders (logits: `factorspec_sdk.drafter.loop`; completions:
`factorspec_sdk.drafter.segments`) plan, on a worker thread, every segment the engine's answer
of a step can lead to (`Planner.prefetch`, one choice deep), while the engine computes that
answer. When the answer is back, `Prefetch.finish` stops them: the decoding thread needs the
segment of one answer, not of every option, so no further segment is started, and an
option's segment in progress stops at its next solver check (`factorspec_sdk.graph.stopping`:
the queries it answered stay cached, so the decoding thread plans it again cheaply if it is
the one it needs). `finish` waits for that stop, or for the ``first`` segment below to end
(never stopped: it is the one the decoding thread most likely needs), and counts the wait as
planning on the critical path of every record of the step (each of them waited for it).
Measured on the user-models suite (embedded engine, three runs each), stopping the options'
segments took the invoice's critical share from 20% to 13% (a second round: 13% to 8%);
stopping the ``first`` segment too made the meeting plan's worse (369 -> 637 ms), since the
decoding thread then planned again what it was waiting for. A segment not planned by then is
planned by the decoding thread itself, as critical planning too. Prefetching only fills the
planner's caches, so what is decoded does not depend on how far it got.

A draft that stops at a token whose segment is not planned yet (a guess, or a token after
one: `factorspec_sdk.drafter.loop`) names that token (``first``): its segment is planned
first, the one the decoding thread needs if the model takes the draft.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from factorspec_sdk.tokens.plan import Cursor, Planner

__all__ = ["Prefetch"]


class Prefetch:
    """The prefetches of one decoder step (see the module).

    Args:
        pool: the worker thread (None: no overlap, nothing is prefetched).
        work: each record's planner and the cursor whose next segments to plan.
        first: per record of ``work``, a token at its cursor whose segment to plan before
            the others (None: none).

    Attributes:
        pool_gone: the pool refused work (it was shut down); the caller drops it and plans
            on its own thread from now on.
        background: seconds the worker spent planning for each record of ``work`` (off
            the critical path); final once `finish` has returned.
    """

    def __init__(
        self,
        pool: ThreadPoolExecutor | None,
        work: Sequence[tuple[Planner, Cursor]],
        first: Sequence[int | None] | None = None,
    ) -> None:
        self.stop = threading.Event()
        self.futures: list[Future[None]] = []
        self.planners = [planner for planner, _ in work]
        self.background = [0.0] * len(work)
        self.pool_gone = False
        if pool is None:
            return
        try:
            for i, (planner, cursor) in enumerate(work):
                token = None if first is None else first[i]
                self.futures.append(pool.submit(self._prefetch, i, planner, cursor, token))
        except RuntimeError:  # the pool was shut down
            self.pool_gone = True

    def _prefetch(self, i: int, planner: Planner, cursor: Cursor, first: int | None) -> None:
        # here, not at the top: `factorspec_sdk.graph` loads Z3, which `factorspec --help`
        # (it imports the drafter) must not
        from factorspec_sdk.graph.stopping import QueriesStopped, stoppable

        t0 = time.perf_counter()
        try:
            if first is not None and not self.stop.is_set():
                planner.advance(cursor, first, critical=False)
            with stoppable(self.stop):
                planner.prefetch(cursor, 1, self.stop)
        except QueriesStopped:  # `finish` wants the thread back: planned so far is kept
            pass
        finally:
            self.background[i] += time.perf_counter() - t0

    def finish(self) -> float:
        """Stop the prefetches and wait for the segment in progress; returns the wait.

        The wait is added to each record's critical planning time. A prefetch that failed
        is ignored here: the decoding thread plans the same segment itself, and a real
        error of that record surfaces there, for that record alone.
        """
        self.stop.set()
        if not self.futures:
            return 0.0
        t0 = time.perf_counter()
        for f in self.futures:
            f.exception()
        waited = time.perf_counter() - t0
        for planner in self.planners:
            planner.stats.critical_seconds += waited
        return waited
