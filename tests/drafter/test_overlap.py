"""Prefetches of one decoder step (`factorspec_sdk.drafter.overlap.Prefetch`) and their stop."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.drafter.overlap import Prefetch
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.graph.stopping import QueriesStopped, stoppable
from factorspec_sdk.tokens.plan import Cursor, FreeCursor, Planner, TrieNode
from factorspec_sdk.writer.automaton import Writer, WriterState
from tests.helpers import TRIP_CONTEXT, Trip, tiny_tokenizer

TOK = tiny_tokenizer()


def choice(planner: Planner) -> TrieNode:
    """The first cursor of a Trip record with several segments behind it (a city choice)."""
    cursor: Cursor = planner.start()
    while True:
        assert isinstance(cursor, TrieNode)
        ends = terminals(cursor)
        if ends >= 2:
            return cursor
        cursor = planner.advance(cursor, int(cursor.ids[0]))


def terminals(node: TrieNode) -> int:
    stack, n = [node], 0
    while stack:
        for child in stack.pop().children.values():
            if child.terminal is not None:
                n += 1
            else:
                stack.append(child)
    return n


class CountingPlanner(Planner):
    """Sets ``stop`` once it has planned ``stop_after`` segments (``stop`` may be None)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.stop: threading.Event | None = None
        self.stop_after = 0
        self.planned = 0

    def _plan(self, state: WriterState, skip: str, owe: str = "") -> Cursor:
        out = super()._plan(state, skip, owe)
        self.planned += 1
        if self.stop is not None and self.planned >= self.stop_after:
            self.stop.set()
        return out


def test_a_stopped_prefetch_starts_no_further_segment() -> None:
    spec = compile_spec(Trip, TRIP_CONTEXT)
    full = CountingPlanner(Writer(spec), TOK)
    node = choice(full)
    before = full.planned
    full.prefetch(node, 1)
    every = full.planned - before
    assert every >= 2 and full.stats.critical_segments < full.stats.segments

    stopped = CountingPlanner(Writer(spec), TOK)
    node = choice(stopped)
    before = stopped.planned
    stop = threading.Event()
    stop.set()
    stopped.prefetch(node, 1, stop)
    assert stopped.planned == before  # stopped before it began

    one = CountingPlanner(Writer(spec), TOK)
    node = choice(one)
    one.stop, one.stop_after = threading.Event(), one.planned + 1
    one.prefetch(node, 1, one.stop)
    assert one.planned == one.stop_after  # the segment in progress finishes, no other starts


class SlowPlanner(Planner):
    def prefetch(self, cursor: Cursor, depth: int = 1, stop: threading.Event | None = None) -> None:
        time.sleep(0.05)


def test_finishing_waits_for_the_prefetch_and_counts_the_wait_as_critical() -> None:
    spec = compile_spec(Trip, TRIP_CONTEXT)
    planners = [SlowPlanner(Writer(spec), TOK) for _ in range(2)]
    with ThreadPoolExecutor(max_workers=1) as pool:
        prefetch = Prefetch(pool, [(p, p.start()) for p in planners])
        assert not prefetch.pool_gone
        critical = [p.stats.critical_seconds for p in planners]
        waited = prefetch.finish()
    assert waited > 0.0 and prefetch.stop.is_set()
    for p, c in zip(planners, critical, strict=True):
        assert abs(p.stats.critical_seconds - (c + waited)) < 1e-9
    assert all(f.done() for f in prefetch.futures)


def test_no_pool_prefetches_nothing_and_a_closed_pool_is_reported() -> None:
    spec = compile_spec(Trip, TRIP_CONTEXT)
    planner = Planner(Writer(spec), TOK)
    none = Prefetch(None, [(planner, planner.start())])
    assert none.futures == [] and none.finish() == 0.0
    pool = ThreadPoolExecutor(max_workers=1)
    pool.shutdown()
    gone = Prefetch(pool, [(planner, planner.start())])
    assert gone.pool_gone and gone.finish() == 0.0


class NoSiblings(Planner):
    """Prefetches no option of a choice (only what `Prefetch` plans before them)."""

    def prefetch(self, cursor: Cursor, depth: int = 1, stop: threading.Event | None = None) -> None:
        return None


def test_the_token_a_draft_left_unplanned_is_planned_first_off_the_critical_path() -> None:
    planner = NoSiblings(Writer(compile_spec(Trip, TRIP_CONTEXT)), TOK)
    node = choice(planner)
    while not any(c.terminal is not None for c in node.children.values()):
        node = node.children[int(node.ids[0])]
    token = next(t for t, c in node.children.items() if c.terminal is not None)
    assert not planner.advance_is_planned(node, token)
    critical = planner.stats.critical_segments
    with ThreadPoolExecutor(max_workers=1) as pool:
        prefetch = Prefetch(pool, [(planner, node)], [token])
        for f in prefetch.futures:
            f.result()
        prefetch.finish()
    assert planner.advance_is_planned(node, token)
    assert planner.stats.critical_segments == critical


class Marks(BaseModel):
    """Every digit of ``arrive`` is a choice whose next segment asks the oracle."""

    arrive: int = Field(ge=0, le=600)
    start: int = Field(ge=0, le=600)

    @relation
    def after_arriving(self) -> bool:
        return self.arrive <= self.start and self.start % 5 == 0


class StoppingPlanner(CountingPlanner):
    """Sets ``stop`` as it starts planning its ``stop_after``-th segment."""

    def _plan(self, state: WriterState, skip: str, owe: str = "") -> Cursor:
        if self.stop is not None and self.planned + 1 == self.stop_after:
            self.stop.set()
        return super()._plan(state, skip, owe)


def _options(node: TrieNode) -> list[tuple[int, ...]]:
    """The token paths from ``node`` that end an option (each leads to a segment of its own)."""
    out: list[tuple[int, ...]] = []
    stack: list[tuple[TrieNode, tuple[int, ...]]] = [(node, ())]
    while stack:
        at, path = stack.pop()
        for token, child in at.children.items():
            if child.terminal is not None:
                out.append((*path, token))
            else:
                stack.append((child, (*path, token)))
    return sorted(out)


def _follow(planner: Planner, cursor: Cursor, path: tuple[int, ...]) -> Cursor:
    for token in path:
        cursor = planner.advance(cursor, token)
    return cursor


def test_a_segment_in_progress_stops_at_its_next_check_and_is_planned_again_alike() -> None:
    """Once the decoder sets the event, the worker's segment in progress stops at its next
    solver check; the planner keeps no part of it, the oracle's solvers keep their scopes,
    and the decoding thread (never stopped) plans every option as a planner that was never
    stopped does."""
    spec = compile_spec(Marks)
    planner = StoppingPlanner(Writer(spec), TOK)
    node = choice(planner)
    options = _options(node)
    assert len(options) >= 3
    stop = threading.Event()
    planner.stop, planner.stop_after = stop, planner.planned + 2
    segments = planner.stats.segments
    checks = planner.writer.oracle.stats.solver_checks
    with stoppable(stop), pytest.raises(QueriesStopped):
        planner.prefetch(node, 1, stop)
    assert planner.planned == planner.stop_after - 1 and planner.stats.segments == segments + 1
    assert planner.writer.oracle.stats.solver_checks > checks  # the first one asked
    for s in planner.writer.oracle._solvers.values():
        assert s.solver.num_scopes() == len(s.pushed)
    fresh = Planner(Writer(spec), TOK)
    fresh_node = choice(fresh)
    assert _options(fresh_node) == options
    for path in options:  # the event is still set: only the worker thread stops
        after, want = _follow(planner, node, path), _follow(fresh, fresh_node, path)
        assert np.array_equal(planner.allowed(after), fresh.allowed(want)), path


class StoppedPlanner(Planner):
    def prefetch(self, cursor: Cursor, depth: int = 1, stop: threading.Event | None = None) -> None:
        raise QueriesStopped


def test_a_stopped_prefetch_ends_quietly() -> None:
    planner = StoppedPlanner(Writer(compile_spec(Trip, TRIP_CONTEXT)), TOK)
    with ThreadPoolExecutor(max_workers=1) as pool:
        prefetch = Prefetch(pool, [(planner, planner.start())])
        prefetch.finish()
    assert all(f.exception() is None for f in prefetch.futures)


class Memo(BaseModel):
    """A free string no relation reads, then minutes the oracle decides."""

    title: str = Field(max_length=12)
    minute: int = Field(ge=0, le=59)

    @relation
    def on_the_quarter(self) -> bool:
        return self.minute % 15 == 0


class Named(BaseModel):
    """A free string whose length a relation reads: its closing holds a fact."""

    title: str = Field(max_length=12)
    minute: int = Field(ge=0, le=59)

    @relation
    def as_long_as_the_title(self) -> bool:
        return self.minute == 5 * len(self.title)


def _free(planner: Planner) -> FreeCursor:
    cursor: Cursor = planner.start()
    while not isinstance(cursor, FreeCursor):
        assert isinstance(cursor, TrieNode)
        cursor = planner.advance(cursor, int(cursor.ids[0]))
    return cursor


def _closers(planner: Planner, cursor: FreeCursor) -> list[int]:
    """The tokens allowed at ``cursor`` that close the string."""
    vocab = planner.tok.vocab
    return [
        t
        for t in planner.allowed(cursor).tolist()
        if planner.writer.read_free(cursor.free, vocab[t].decode("utf-8"))[1] is not None
    ]


def test_inside_a_free_string_what_follows_its_closing_is_prefetched() -> None:
    """Prefetched at the string's first token, the segment after its quote is the one every
    closing meets later, after any text: closing then plans nothing, and allows what a
    planner that never prefetched allows."""
    spec = compile_spec(Memo)
    planner, fresh = Planner(Writer(spec), TOK), Planner(Writer(spec), TOK)
    cursor, fresh_cursor = _free(planner), _free(fresh)
    planner.prefetch(cursor, 1)
    assert planner.writer.oracle.stats.solver_checks > 0  # the minutes asked the oracle
    segments, critical = planner.stats.segments, planner.stats.critical_segments
    word = next(t for t in planner.allowed(cursor).tolist() if TOK.vocab[t].isalpha())
    worded, fresh_worded = planner.advance(cursor, word), fresh.advance(fresh_cursor, word)
    assert isinstance(worded, FreeCursor) and isinstance(fresh_worded, FreeCursor)
    for at, fresh_at in ((cursor, fresh_cursor), (worded, fresh_worded)):  # then after a word
        closers = _closers(planner, at)
        assert closers and closers == _closers(fresh, fresh_at)
        for t in closers:
            assert planner.advance_is_planned(at, t)
            after = planner.advance(at, t)
            assert np.array_equal(planner.allowed(after), fresh.allowed(fresh.advance(fresh_at, t)))
    assert (planner.stats.segments, planner.stats.critical_segments) == (segments, critical)


def test_a_free_string_whose_length_a_relation_reads_is_not_prefetched() -> None:
    planner = Planner(Writer(compile_spec(Named)), TOK)
    cursor = _free(planner)
    segments = planner.stats.segments
    planner.prefetch(cursor, 1)
    assert planner.stats.segments == segments
    closers = _closers(planner, cursor)
    assert closers and not any(planner.advance_is_planned(cursor, t) for t in closers)
