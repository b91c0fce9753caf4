"""Prefetches of one decoder step (`factorspec_sdk.drafter.overlap.Prefetch`) and their stop."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from factorspec_sdk.drafter.overlap import Prefetch
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import Cursor, Planner, TrieNode
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
