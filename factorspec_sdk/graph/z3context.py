"""Z3 contexts: the lock that guards Z3's main context, and a pool of private ones.

Z3 contexts are not thread-safe. `compile_spec` builds every term of a model's spec in Z3's
main context (the relation compiler's constants live there too), so anything that creates,
reads or translates terms of a spec compiled from a Pydantic model must hold
`MAIN_CONTEXT_LOCK`: `compile_spec` itself, the IR export (`factorspec_sdk.ir.spec_to_ir`)
and an oracle copying a spec's formulas into its private context (`Oracle`). Specs rebuilt
from the relation IR (`spec_from_ir`) live in private contexts of their own and need it only
where they meet main-context terms.

Private contexts come from `private_context`. A Z3 context is heavy: ~7 ms to make, ~1.5 ms
to free and ~16 MB of memory, whatever it holds (measured on z3-solver 4.15 and 5.4), while
a trip record's whole planning is a few tens of milliseconds; every request needs two (its
spec's and its oracle's). So contexts are reused. A context is idle when nothing but the
pool refers to it: every Z3 object (term, solver, model) holds its context, so a context
whose objects are all gone, in whatever thread they went, is one no thread can be using.
The pool keeps as many contexts as the requests in flight need, up to ``size``
(`CONTEXT_POOL`: 256, room for 128 requests in flight), and frees the ones beyond ``keep``
(8) that stayed idle for ``idle_seconds`` (30 s), so memory follows the load of the last
half minute, not its peak forever.
"""

from __future__ import annotations

import sys
import threading
import time

import z3

__all__ = ["CONTEXT_POOL", "MAIN_CONTEXT_LOCK", "ContextPool", "private_context"]

MAIN_CONTEXT_LOCK = threading.RLock()
"""Held while a thread creates, walks or translates terms of Z3's main context (re-entrant)."""


def _ref_counts(items: list[z3.Context] | list[object]) -> list[int]:
    """`sys.getrefcount` of each item, counted the same way for the pool and its probe."""
    counts = []
    for item in items:
        counts.append(sys.getrefcount(item))
    return counts


_IDLE_REFS = _ref_counts([object()])[0]
"""What `_ref_counts` says of an object only a list refers to (an idle pooled context), as
this interpreter counts (its loop variable and argument may or may not add a reference)."""


class ContextPool:
    """Private Z3 contexts kept for reuse, each lent while anything uses it.

    Args:
        size: the most contexts kept; past it, `get` makes contexts the pool does not keep.
        keep: contexts kept however long they stay idle.
        idle_seconds: how long a context beyond ``keep`` may stay idle before `get` (or
            `trim`) frees it.

    Attributes:
        made: contexts made so far (kept or not).
    """

    def __init__(self, size: int, keep: int = 8, idle_seconds: float = 30.0) -> None:
        if size < 0 or keep < 0:
            raise ValueError(f"size and keep must be >= 0, got {size} and {keep}")
        if idle_seconds < 0:
            raise ValueError(f"idle_seconds must be >= 0, got {idle_seconds}")
        self.size = size
        self.keep = keep
        self.idle_seconds = idle_seconds
        self.made = 0
        self._contexts: list[z3.Context] = []
        self._lent_at: list[float] = []  # when each was last lent (time.monotonic)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Contexts the pool holds now, lent or idle."""
        return len(self._contexts)

    def get(self) -> z3.Context:
        """A Z3 context no other object uses: an idle one of the pool, else a new one.

        The caller (and the objects it makes in the context) may use it from one thread at
        a time, as any private context; it is idle again once they are all gone.
        """
        now = time.monotonic()
        with self._lock:
            idle = self._idle()
            if idle:
                ctx = self._contexts[idle[0]]
                self._lent_at[idle[0]] = now
                self._trim(now)  # the local reference keeps ``ctx`` out of it
                return ctx
            self._trim(now)
            ctx = z3.Context()
            self.made += 1
            if len(self._contexts) < self.size:
                self._contexts.append(ctx)
                self._lent_at.append(now)
            return ctx

    def trim(self) -> int:
        """Free the contexts beyond ``keep`` idle for ``idle_seconds``; how many went."""
        with self._lock:
            return self._trim(time.monotonic())

    def _idle(self) -> list[int]:
        return [i for i, n in enumerate(_ref_counts(self._contexts)) if n == _IDLE_REFS]

    def _trim(self, now: float) -> int:
        stale = [
            i for i in self._idle() if i >= self.keep and now - self._lent_at[i] > self.idle_seconds
        ]
        for i in reversed(stale):
            del self._contexts[i], self._lent_at[i]
        return len(stale)


CONTEXT_POOL = ContextPool(256)
"""The process's pool of private contexts (specs from the IR, oracles): up to 256, 8 kept
when idle."""


def private_context() -> z3.Context:
    """A private Z3 context from `CONTEXT_POOL` (see `ContextPool.get`)."""
    return CONTEXT_POOL.get()
