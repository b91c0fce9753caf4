"""Z3 contexts: oracles copy a spec's terms out of the main context under its lock; private
contexts are reused once nothing refers to them."""

from __future__ import annotations

import threading
import time

import pytest
import z3
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.graph import MAIN_CONTEXT_LOCK, compile_spec
from factorspec_sdk.graph.compiled import Value
from factorspec_sdk.graph.z3context import ContextPool
from factorspec_sdk.ir import spec_from_ir, to_ir
from tests.helpers import TRIP_CONTEXT, Trip


class Limit(BaseModel):
    cap: int


class Pair(BaseModel):
    a: int = Field(ge=0, le=9)
    b: int = Field(ge=0, le=9)

    @relation
    def sum_is_cap(self, limit: Limit) -> bool:
        return self.a + self.b == limit.cap


class Diff(BaseModel):
    a: int = Field(ge=0, le=9)
    b: int = Field(ge=0, le=9)

    @relation
    def difference_is_cap(self, limit: Limit) -> bool:
        return self.a - self.b == limit.cap


def test_oracle_translation_waits_for_the_main_context_lock() -> None:
    spec = compile_spec(Pair, Limit(cap=3))
    done = threading.Event()
    answers: list[list[Value] | None] = []
    errors: list[BaseException] = []

    def query() -> None:
        try:
            answers.append(spec.new_oracle().feasible_values((), "a"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    with MAIN_CONTEXT_LOCK:
        worker = threading.Thread(target=query)
        worker.start()
        # the oracle's first query copies the component's formulas out of the main context:
        # it must wait while another thread holds the lock (e.g. one compiling a spec)
        assert not done.wait(0.5)
    worker.join(60)
    assert done.is_set()
    assert not errors
    assert answers == [[0, 1, 2, 3]]


def test_an_ir_spec_oracle_does_not_wait_for_the_main_context_lock() -> None:
    spec = spec_from_ir(to_ir(Pair, Limit(cap=3)))
    assert spec.context_lock is not MAIN_CONTEXT_LOCK  # its terms live in a private context
    assert compile_spec(Pair, Limit(cap=3)).context_lock is MAIN_CONTEXT_LOCK
    answers: list[list[Value] | None] = []
    with MAIN_CONTEXT_LOCK:  # another thread compiling a model's spec, say
        worker = threading.Thread(
            target=lambda: answers.append(spec.new_oracle().feasible_values((), "a"))
        )
        worker.start()
        worker.join(60)
        assert not worker.is_alive()  # it copied the spec's terms under the spec's own lock
    assert answers == [[0, 1, 2, 3]]


def test_compiling_and_querying_in_many_threads() -> None:
    specs = {cap: compile_spec(Pair, Limit(cap=cap)) for cap in range(4)}
    errors: list[BaseException] = []

    def compile_many(model: type[BaseModel], caps: range) -> None:
        try:
            for cap in caps:  # fresh specs, built in the main context
                spec = compile_spec(model, Limit(cap=cap))
                lo, hi = (max(0, cap - 9), min(9, cap)) if model is Pair else (max(0, cap), 9 + cap)
                assert spec.new_oracle().feasible_values((), "a") == list(range(lo, min(hi, 9) + 1))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def query_many(cap: int) -> None:
        try:
            for _ in range(20):
                oracle = specs[cap].new_oracle()
                assert oracle.feasible_values((), "a") == list(range(cap + 1))
                assert oracle.feasible_values((("a", 0),), "b") == [cap]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=compile_many, args=(Pair, range(4, 19))),
        threading.Thread(target=compile_many, args=(Diff, range(-9, 10))),
    ]
    threads += [threading.Thread(target=query_many, args=(cap,)) for cap in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert not errors


def test_a_context_is_reused_only_once_nothing_refers_to_it() -> None:
    pool = ContextPool(2)
    first = pool.get()
    second = pool.get()
    assert first is not second and pool.made == 2  # the first is in use
    term = z3.Int("x", first)
    first_id = id(first)
    del first
    third = pool.get()
    assert id(third) != first_id and pool.made == 3  # a term still holds the first
    del term
    assert id(pool.get()) == first_id and pool.made == 3  # nothing refers to it now
    del second, third
    with pytest.raises(ValueError):
        ContextPool(-1)
    unkept = ContextPool(0)
    unkept.get()
    unkept.get()
    assert unkept.made == 2


def test_the_pool_grows_with_the_load_and_frees_what_stays_idle() -> None:
    pool = ContextPool(4, keep=1, idle_seconds=0.5)
    held = [pool.get() for _ in range(6)]
    assert pool.made == 6 and len(pool) == 4  # six in use at once; four kept
    kept_ids = {id(c) for c in held[:4]}
    del held
    again = [pool.get() for _ in range(4)]  # the load comes back: no context is made
    assert pool.made == 6 and {id(c) for c in again} == kept_ids
    first_id = id(again[0])
    del again
    assert pool.trim() == 0  # idle, but not for long
    time.sleep(0.6)
    # idle past idle_seconds: all but `keep` go, the first time the pool is asked
    assert pool.trim() == 3 and len(pool) == 1
    assert id(pool.get()) == first_id and pool.made == 6
    with pytest.raises(ValueError):
        ContextPool(4, keep=-1)
    with pytest.raises(ValueError):
        ContextPool(4, idle_seconds=-1.0)


def test_specs_from_ir_and_their_oracles_in_many_threads() -> None:
    """Pooled contexts handed to specs and oracles that come and go in many threads."""
    ir = to_ir(Trip, TRIP_CONTEXT)
    want = spec_from_ir(ir).new_oracle().feasible_values((), "legs[0].city")
    assert want
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(15):
                oracle = spec_from_ir(ir).new_oracle()
                assert oracle.feasible_values((), "legs[0].city") == want
                del oracle
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert not errors
