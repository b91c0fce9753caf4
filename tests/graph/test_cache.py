"""`SpecCache`: the LRU that each spec compiler owns; the compilers that own them."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.graph import (
    DEFAULT_SPEC_COMPILER,
    SpecCache,
    SpecCompiler,
    clear_spec_caches,
    compile_spec,
)
from factorspec_sdk.graph.spec import FormStats
from factorspec_sdk.ir import (
    DEFAULT_IR_COMPILER,
    IRCompiler,
    IRError,
    ir_from_json_schema,
    spec_from_ir,
    to_ir,
)

SPEC_CACHE = DEFAULT_SPEC_COMPILER.specs  # what the module-level compile_spec fills
IR_CACHE = DEFAULT_IR_COMPILER.documents  # and spec_from_ir


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
    DEFAULT_IR_COMPILER.clear()
    ir = to_ir(Pair, Limit(cap=2))
    built = spec_from_ir(ir)
    hits = IR_CACHE.hits
    again = spec_from_ir(ir)
    assert again is built  # the document's spec, from the compiler's specs
    assert IR_CACHE.hits == hits  # its checks are not even looked up
    assert again.list_bounds == first.list_bounds == {("xs",): 2}


def test_the_ir_caches_key_documents_by_value() -> None:
    compiler = IRCompiler()
    ir = to_ir(Pair, Limit(cap=2))
    built = compiler.spec_from_ir(json.loads(json.dumps(ir)))
    assert compiler.spec_from_ir(json.loads(json.dumps(ir))) is built  # parsed again: a hit
    assert compiler.spec_from_ir(ir, solver_timeout_ms=500) is not built  # its own time limit
    assert built.solver_timeout_ms is None
    other = compiler.spec_from_ir(to_ir(Pair, Limit(cap=3)))  # another constant: its own
    assert other.list_bounds == {("xs",): 3}
    reordered = dict(reversed(list(json.loads(json.dumps(ir)).items())))
    assert compiler.spec_from_ir(reordered) is not built  # a miss, never a wrong hit
    assert compiler.spec_from_ir(reordered).list_bounds == {("xs",): 2}
    assert compiler.specs is not None and len(compiler.specs) == 4

    unkept = IRCompiler(max_specs=0)  # no specs kept: each call builds, its checks kept
    assert unkept.specs is None
    first = unkept.spec_from_ir(json.loads(json.dumps(ir)))
    hits = unkept.documents.hits
    second = unkept.spec_from_ir(json.loads(json.dumps(ir)))
    assert second is not first and unkept.documents.hits == hits + 1
    assert second.list_bounds == first.list_bounds == {("xs",): 2}
    with pytest.raises(ValueError, match="max_specs"):
        IRCompiler(max_specs=-1)


def test_a_json_schema_is_converted_once_and_each_caller_gets_its_own_copy() -> None:
    compiler = IRCompiler()
    schema = Pair.model_json_schema()
    first = compiler.ir_from_json_schema(json.loads(json.dumps(schema)), name="Pair")
    assert first == ir_from_json_schema(schema, name="Pair")
    first["layout"] = "changed by the caller"
    second = compiler.ir_from_json_schema(schema, name="Pair")  # parsed again: a hit
    assert second == ir_from_json_schema(schema, name="Pair")
    assert (compiler.schemas.hits, compiler.schemas.misses) == (1, 1)
    compiler.ir_from_json_schema(schema, name="Other")  # the name is part of the document
    assert (compiler.schemas.misses, len(compiler.schemas)) == (2, 2)
    bad = {"type": "object", "properties": {"a": {"type": "nope"}}}
    for _ in range(2):  # a refusal is not kept: each call says it
        with pytest.raises(IRError):
            compiler.ir_from_json_schema(bad)
    assert len(compiler.schemas) == 2
    compiler.clear()
    assert len(compiler.schemas) == 0


def test_a_kept_spec_is_dropped_least_recently_used_first() -> None:
    compiler = IRCompiler(max_specs=2)
    docs = [to_ir(Pair, Limit(cap=cap)) for cap in (1, 2, 3)]
    one, two = (compiler.spec_from_ir(d) for d in docs[:2])
    assert compiler.spec_from_ir(docs[0]) is one  # the first is now the most recent
    compiler.spec_from_ir(docs[2])  # drops the second
    assert compiler.spec_from_ir(docs[0]) is one
    rebuilt = compiler.spec_from_ir(docs[1])
    assert rebuilt is not two and rebuilt.list_bounds == two.list_bounds == {("xs",): 2}
    compiler.clear()
    assert compiler.specs is not None and len(compiler.specs) == 0
    assert compiler.spec_from_ir(docs[0]) is not one


def test_two_spec_compilers_share_no_spec() -> None:
    a, b = SpecCompiler(), SpecCompiler(max_specs=8)
    first = a.compile_spec(Pair, Limit(cap=2))
    assert a.compile_spec(Pair, Limit(cap=2)) is first
    other = b.compile_spec(Pair, Limit(cap=2))
    assert other is not first and other.list_bounds == first.list_bounds == {("xs",): 2}
    assert (len(a.specs), a.specs.hits, len(b.specs), b.specs.hits) == (1, 1, 1, 0)
    assert b.specs.max_size == 8
    a.clear()
    assert (len(a.specs), len(b.specs)) == (0, 1)
    assert a.compile_spec(Pair, Limit(cap=2)) is not first


def test_each_spec_compiler_keeps_its_own_context_shapes() -> None:
    a, b = SpecCompiler(), SpecCompiler()
    for cap in (1, 2, 3):  # one shape: the second makes its lowering, then each binds
        a.compile_spec(Pair, Limit(cap=cap))
    assert (a.form_stats.made, a.form_stats.bound, len(a.forms)) == (1, 2, 1)
    assert (b.form_stats, len(b.forms)) == (FormStats(), 0)
    b.compile_spec(Pair, Limit(cap=4))  # a shape b has not seen: compiled from the model
    assert (b.form_stats, len(b.forms)) == (FormStats(), 1)


def test_the_module_level_functions_use_the_default_compilers() -> None:
    spec = compile_spec(Pair, Limit(cap=3))
    assert DEFAULT_SPEC_COMPILER.compile_spec(Pair, Limit(cap=3)) is spec
    mine = SpecCompiler()
    mine.compile_spec(Pair, Limit(cap=3))
    clear_spec_caches()  # the default's, and no other compiler's
    assert (len(DEFAULT_SPEC_COMPILER.specs), len(mine.specs)) == (0, 1)
    assert compile_spec(Pair, Limit(cap=3)) is not spec

    ir = to_ir(Pair, Limit(cap=3))
    DEFAULT_IR_COMPILER.clear()
    spec_from_ir(ir)
    assert (len(DEFAULT_IR_COMPILER.documents), len(DEFAULT_IR_COMPILER.layouts)) == (1, 1)
    hits = DEFAULT_IR_COMPILER.documents.hits
    own = IRCompiler(max_documents=4)
    kept = own.spec_from_ir(ir)  # not in its cache, though the default has it
    assert kept is not spec_from_ir(ir)
    assert (own.documents.hits, own.documents.misses, len(own.layouts)) == (0, 1, 1)
    assert own.spec_from_ir(ir) is kept
    assert DEFAULT_IR_COMPILER.documents.hits == hits
    own.clear()
    assert (len(own.documents), len(own.layouts), len(DEFAULT_IR_COMPILER.documents)) == (0, 0, 1)
