"""`SpecCache`: the LRU cache that each spec compiler owns, with hit and miss counters.

A `factorspec_sdk.graph.SpecCompiler` keeps its compiled specs in one (keyed by model and
context value) and its context shapes in another; a `factorspec_sdk.ir.IRCompiler` keeps
what the checks of an IR document found in one (keyed by the document's digest) and the
documents' layouts in another, as XGrammar's ``GrammarCompiler`` owns its cache of compiled
grammars.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["SpecCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SpecCache(Generic[K, V]):
    """A thread-safe LRU map with at most ``max_size`` entries, counting hits and misses.

    The cache's own lock guards only its map: `get_or_compile` runs ``compile`` outside it,
    so a caller that must not compile one key twice at once serialises the calls itself
    (`SpecCompiler.compile_spec` holds `MAIN_CONTEXT_LOCK` around them).

    Attributes:
        max_size: the most entries kept; the least recently used one goes first.
        hits: lookups that found their key (since the cache was made).
        misses: lookups that did not.
    """

    def __init__(self, max_size: int) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size}")
        self.max_size = max_size
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The entry for ``key`` (now the most recently used), or None (a miss)."""
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: K, value: V) -> None:
        """Store ``value`` for ``key``, dropping the least recently used entries beyond the size."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_size:
                self._entries.popitem(last=False)

    def get_or_compile(self, key: K, compile: Callable[[], V]) -> V:
        """The entry for ``key``; on a miss, ``compile()`` it and store it (errors propagate)."""
        value = self.get(key)
        if value is None:
            value = compile()
            self.put(key, value)
        return value

    def clear(self) -> None:
        """Forget every entry (the counters stay)."""
        with self._lock:
            self._entries.clear()

    @property
    def size(self) -> int:
        """The number of entries."""
        return len(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return (
            f"SpecCache({len(self._entries)}/{self.max_size} entries, "
            f"{self.hits} hits, {self.misses} misses)"
        )
