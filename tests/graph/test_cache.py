"""`SpecCache`: the LRU that each spec entry point owns."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.graph import SPEC_CACHE, SpecCache, compile_spec
from factorspec_sdk.ir import IR_CACHE, spec_from_ir, to_ir


class Limit(BaseModel):
    cap: int


class Pair(BaseModel):
    xs: list[int] = Field(max_length=4)

    @relation
    def short(self, limit: Limit) -> bool:
        return len(self.xs) <= limit.cap and all(0 <= x <= 9 for x in self.xs)


def test_lru_order_size_and_counters() -> None:
    cache: SpecCache[str, int] = SpecCache(max_size=2)
    assert cache.get("a") is None
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recently used
    cache.put("c", 3)  # evicts "b"
    assert cache.get("b") is None
    assert len(cache) == cache.size == 2
    assert (cache.hits, cache.misses, cache.max_size) == (1, 2, 2)
    calls: list[str] = []
    assert cache.get_or_compile("c", lambda: calls.append("c") or 0) == 3
    assert cache.get_or_compile("d", lambda: calls.append("d") or 4) == 4
    assert calls == ["d"]
    cache.clear()
    assert len(cache) == 0
    assert "2 hits" in repr(cache)
    with pytest.raises(ValueError, match="max_size"):
        SpecCache(max_size=0)


def test_entry_points_use_their_caches() -> None:
    SPEC_CACHE.clear()
    first = compile_spec(Pair, Limit(cap=2))
    hits = SPEC_CACHE.hits
    assert compile_spec(Pair, Limit(cap=2)) is first
    assert SPEC_CACHE.hits == hits + 1
    assert len(SPEC_CACHE) == 1
    IR_CACHE.clear()
    ir = to_ir(Pair, Limit(cap=2))
    spec_from_ir(ir)
    hits = IR_CACHE.hits
    again = spec_from_ir(ir)
    assert IR_CACHE.hits == hits + 1
    assert again.list_bounds == first.list_bounds == {("xs",): 2}


def test_the_ir_cache_keys_documents_by_value() -> None:
    IR_CACHE.clear()
    ir = to_ir(Pair, Limit(cap=2))
    spec_from_ir(json.loads(json.dumps(ir)))
    hits = IR_CACHE.hits
    spec_from_ir(json.loads(json.dumps(ir)))  # the same document, parsed again: a hit
    assert IR_CACHE.hits == hits + 1
    other = spec_from_ir(to_ir(Pair, Limit(cap=3)))  # another constant: its own entry
    assert IR_CACHE.hits == hits + 1
    assert other.list_bounds == {("xs",): 3}
    reordered = dict(reversed(list(json.loads(json.dumps(ir)).items())))
    assert spec_from_ir(reordered).list_bounds == {("xs",): 2}
