"""Z3 contexts: the lock that guards Z3's main context, and a pool of private ones.

Z3 contexts are not thread-safe. `compile_spec` builds every term of a model's spec in Z3's
main context (the relation compiler's constants live there too), so anything that creates,
reads or translates terms of a spec compiled from a Pydantic model must hold
`MAIN_CONTEXT_LOCK`: `compile_spec` itself, the IR export (`factorspec_sdk.ir.spec_to_ir`)
and an oracle copying a spec's formulas into its private context (`Oracle`). Specs rebuilt
from the relation IR (`spec_from_ir`) live in private contexts of their own and need it only
where they meet main-context terms.

Private contexts come from `private_context`. A new Z3 context costs ~7 ms to make and
~1.5 ms to free, a large share of a small record's planning (a request makes two: its spec's
and its oracle's), so idle ones are reused. A context is idle when nothing but the pool
refers to it: every Z3 object (term, solver, model) holds its context, so a context whose
objects are all gone, in whatever thread they went, is one no thread can be using. The pool
keeps at most ``size`` contexts (`CONTEXT_POOL`: 8); past that, contexts are made and freed
as before.
"""

from __future__ import annotations

import sys
import threading

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
    """Private Z3 contexts kept for reuse: at most ``size``, each lent while anything uses it.

    Attributes:
        size: the most contexts kept; past it, `get` makes contexts the pool does not keep.
        made: contexts made so far (kept or not).
    """

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        self.size = size
        self.made = 0
        self._contexts: list[z3.Context] = []
        self._lock = threading.Lock()

    def get(self) -> z3.Context:
        """A Z3 context no other object uses: an idle one of the pool, else a new one.

        The caller (and the objects it makes in the context) may use it from one thread at
        a time, as any private context; it is idle again once they are all gone.
        """
        with self._lock:
            counts = _ref_counts(self._contexts)
            for i, n in enumerate(counts):
                if n == _IDLE_REFS:
                    return self._contexts[i]
            ctx = z3.Context()
            self.made += 1
            if len(self._contexts) < self.size:
                self._contexts.append(ctx)
            return ctx


CONTEXT_POOL = ContextPool(8)
"""The process's pool of private contexts (specs from the IR, oracles)."""


def private_context() -> z3.Context:
    """A private Z3 context from `CONTEXT_POOL` (see `ContextPool.get`)."""
    return CONTEXT_POOL.get()
