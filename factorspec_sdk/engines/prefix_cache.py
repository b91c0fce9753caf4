"""A prefix cache: the KV states of prompt prefixes, reused by later prompts that share them.

Requests that share a prompt prefix (a system prompt, a schema hint, an instruction block, the
same problem asked twice) need not run it again: the engine stores the KV states of a prompt
once it has run, and a later prompt starts from the longest prefix stored.

Storage is in **blocks** of `PrefixCache.block_size` tokens (as vLLM's automatic prefix
caching): block ``i`` of a prompt holds the KV states of its tokens ``i*B .. (i+1)*B - 1``
and is keyed by its own tokens under its parent block, so the blocks form a token trie whose
paths are prompts. Prompts that share a prefix share its blocks (the shared part is stored
once), a prompt's last partial block is not stored, and a lookup matches whole blocks only.

Memory is bounded in bytes (the ``nbytes`` of every key and value tensor stored) and blocks
are evicted least recently used first. Every lookup and store touches a path's blocks from
the deepest to the root, so a block is always more recently used than its descendants: the
least recently used block is a leaf, and eviction never strands a block behind a missing
parent.

The cache holds tensors but never computes with them: the engine slices what it stores and
concatenates what it reuses, so this module imports no torch, and its tests run on numpy
arrays. It is not thread-safe: the engine that owns it is driven from one thread.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "BlockKV",
    "PrefixCache",
    "PrefixCacheStats",
    "PrefixMatch",
    "Tensor",
]

DEFAULT_BLOCK_SIZE = 16
"""Tokens per stored block."""


class Tensor(Protocol):
    """What the cache needs of a key or value tensor: its size in bytes."""

    @property
    def nbytes(self) -> int:
        """Bytes the tensor's elements take."""
        ...


T = TypeVar("T", bound=Tensor)

BlockKV = Sequence[tuple[T, T]]
"""One block's KV states: a ``(keys, values)`` pair per layer, each holding the block's tokens."""


@dataclass(eq=False, slots=True)
class _Block(Generic[T]):
    """A node of the trie: the KV states of ``tokens``, after those of its parent's path."""

    tokens: tuple[int, ...]
    parent: _Block[T] | None
    kv: BlockKV[T]
    nbytes: int
    serial: int
    children: dict[tuple[int, ...], _Block[T]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PrefixMatch(Generic[T]):
    """The longest stored prefix of a prompt.

    Attributes:
        tokens: how many leading tokens of the prompt the blocks hold (a multiple of the
            block size; 0 when nothing matched).
        blocks: the matched blocks' KV states, in prompt order; concatenating them along the
            token axis gives the KV states of the first ``tokens`` tokens.
    """

    tokens: int
    blocks: tuple[BlockKV[T], ...]


@dataclass(frozen=True, slots=True)
class PrefixCacheStats:
    """Counters of a `PrefixCache` since it was made (or cleared).

    Attributes:
        lookups: prompts looked up.
        hits: lookups that matched at least one block.
        tokens_served: prompt tokens served from the cache, over all lookups.
        tokens_stored: prompt tokens stored (in new blocks).
        evictions: blocks evicted to stay within the memory bound.
        blocks: blocks held now.
        bytes: bytes held now (keys and values of every block).
        max_bytes: the memory bound.
    """

    lookups: int
    hits: int
    tokens_served: int
    tokens_stored: int
    evictions: int
    blocks: int
    bytes: int
    max_bytes: int


class PrefixCache(Generic[T]):
    """KV states of token prefixes in blocks, longest-prefix lookup, LRU eviction by bytes.

    Args:
        max_bytes: the memory bound, the ``nbytes`` of all keys and values held; a block
            larger than it is never stored. ``0`` stores nothing.
        block_size: tokens per block: a lookup matches whole blocks, so up to
            ``block_size - 1`` tokens of a shared prefix run again.

    Raises:
        ValueError: a negative ``max_bytes`` or a ``block_size`` below 1.
    """

    def __init__(self, max_bytes: int, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.max_bytes = max_bytes
        self.block_size = block_size
        self._root: _Block[T] = _Block((), None, (), 0, -1)
        self._lru: OrderedDict[int, _Block[T]] = OrderedDict()  # serial -> block, oldest first
        self._serials = itertools.count()
        self._bytes = 0
        self._lookups = self._hits = self._served = self._stored = self._evictions = 0

    # ------------------------------------------------------------------ lookup

    def match(self, tokens: Sequence[int]) -> PrefixMatch[T]:
        """The longest stored prefix of ``tokens``, leaving at least its last token out.

        The last token is never served, so a prompt looked up here always has a token left
        to run, and the forward that runs it yields logits. The matched blocks count as used
        now (see the module docstring for the order).
        """
        self._lookups += 1
        path = self._walk(tokens, len(tokens) - 1)
        if path:
            self._hits += 1
            self._served += len(path) * self.block_size
            self._touch(path)
        return PrefixMatch(len(path) * self.block_size, tuple(b.kv for b in path))

    def cached_length(self, tokens: Sequence[int]) -> int:
        """How many leading tokens of ``tokens`` are stored (whole blocks; no counters moved)."""
        return len(self._walk(tokens, len(tokens))) * self.block_size

    # ------------------------------------------------------------------- store

    def store(self, tokens: Sequence[int], kv_of: Callable[[int, int], BlockKV[T]]) -> int:
        """Store the whole blocks of ``tokens`` not stored yet; returns how many tokens.

        Args:
            tokens: a prompt whose KV states the caller holds.
            kv_of: ``kv_of(start, end)`` gives the KV states of ``tokens[start:end]``, called
                only for blocks not stored yet, as copies the cache may keep (not views of
                tensors that will change).

        Blocks past the memory bound are evicted least recently used first, which may be this
        prompt's own last blocks when it alone does not fit.
        """
        if not self.max_bytes:
            return 0
        size = self.block_size
        path = self._walk(tokens, len(tokens))
        node = path[-1] if path else self._root
        added = 0
        for start in range(len(path) * size, len(tokens) - size + 1, size):
            key = tuple(int(t) for t in tokens[start : start + size])
            kv = kv_of(start, start + size)
            nbytes = sum(int(k.nbytes) + int(v.nbytes) for k, v in kv)
            if nbytes > self.max_bytes:
                break
            block = _Block(key, node, kv, nbytes, next(self._serials))
            node.children[key] = block
            self._lru[block.serial] = block
            self._bytes += nbytes
            path.append(block)
            node = block
            added += size
        self._stored += added
        if path:
            self._touch(path)
        self._evict()
        return added

    def clear(self) -> None:
        """Drop every block and reset the counters."""
        self._root.children.clear()
        self._lru.clear()
        self._bytes = 0
        self._lookups = self._hits = self._served = self._stored = self._evictions = 0

    # ------------------------------------------------------------------- facts

    @property
    def nbytes(self) -> int:
        """Bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        """Blocks held now."""
        return len(self._lru)

    @property
    def stats(self) -> PrefixCacheStats:
        """The counters now."""
        return PrefixCacheStats(
            lookups=self._lookups,
            hits=self._hits,
            tokens_served=self._served,
            tokens_stored=self._stored,
            evictions=self._evictions,
            blocks=len(self._lru),
            bytes=self._bytes,
            max_bytes=self.max_bytes,
        )

    # ----------------------------------------------------------------- helpers

    def _walk(self, tokens: Sequence[int], limit: int) -> list[_Block[T]]:
        """The stored blocks along ``tokens[:limit]``, from the root (whole blocks only)."""
        size = self.block_size
        node = self._root
        path: list[_Block[T]] = []
        for start in range(0, limit - size + 1, size):
            child = node.children.get(tuple(int(t) for t in tokens[start : start + size]))
            if child is None:
                break
            path.append(child)
            node = child
        return path

    def _touch(self, path: list[_Block[T]]) -> None:
        """Mark a path used now, deepest block first: parents end up more recent."""
        for block in reversed(path):
            self._lru.move_to_end(block.serial)

    def _evict(self) -> None:
        """Drop least recently used blocks (always leaves) until within the bound."""
        while self._bytes > self.max_bytes and self._lru:
            _, block = self._lru.popitem(last=False)
            parent = block.parent
            if parent is not None:
                del parent.children[block.tokens]
            self._bytes -= block.nbytes
            self._evictions += 1
