"""The sequence table alone (torch-free): what the `Engine` verbs mean for a sequence's tokens.

The embedded and the scripted engine keep their sequences in one `SequenceTable`; here its
cache handles are plain lists of the token positions they hold, and ``crop`` is a recording
function, so every rule is checked without a model.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.engines.sequences import SequenceState, SequenceTable, Step
from factorspec_sdk.errors import EngineError
from factorspec_sdk.tokens.vocab import TokenizerInfo

Cache = list[int]  # the positions whose KV states the handle holds


class Crops:
    """A `Crop` that records its calls and returns a new handle of the kept positions."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, cache: Cache, run: int, length: int) -> tuple[Cache, int]:
        assert cache == list(range(run))
        self.calls.append((run, length))
        return cache[:length], length


def table(vocab: int = 10, max_positions: int = 0) -> tuple[SequenceTable[Cache], Crops]:
    crops = Crops()
    return SequenceTable(vocab, max_positions=max_positions, crop=crops), crops


def run_forward(steps: list[Step[Any]], caches: bool = True) -> None:
    """What an engine's forward does to its steps: the cache grows by the inputs, then commit."""
    for step in steps:
        if caches:
            step.state.cache.extend(range(step.state.run, step.state.run + len(step.inputs)))
        step.commit()


def test_ids_are_new_and_checked() -> None:
    seqs, _ = table()
    a, b = seqs.open([1, 2, 3], []), seqs.open((4,), [])
    assert a != b and len(seqs) == 2 and sorted(seqs) == sorted([a, b])
    assert seqs.tokens(a) == [1, 2, 3] and seqs.length(b) == 1
    seqs.release(a)
    assert seqs.open([5], []) not in {a, b}  # a released id is never handed out again
    with pytest.raises(EngineError, match=r"token ids \[10, -1\] are outside the vocabulary"):
        seqs.open([1, 10, -1], [])
    assert len(seqs) == 2  # the refused prompt opened nothing


def test_unknown_and_released_sequences() -> None:
    seqs, _ = table()
    seq = seqs.open([1], [])
    seqs.release(seq)
    seqs.release(seq)  # releasing twice is fine
    for call in (
        lambda: seqs.get(seq),
        lambda: seqs.length(seq),
        lambda: seqs.truncate(seq, 0),
        lambda: seqs.plan([(seq, [1])]),
    ):
        with pytest.raises(EngineError, match=f"unknown sequence id {seq}"):
            call()
    assert not seqs


def test_plan_runs_pending_tokens_first_and_changes_nothing() -> None:
    seqs, _ = table()
    seq = seqs.open([1, 2, 3], [])
    (step,) = seqs.plan([(seq, [4, 5])])
    assert (step.seq, step.new, step.keep, step.inputs) == (seq, [4, 5], 2, [1, 2, 3, 4, 5])
    assert seqs.length(seq) == 3 and seqs.get(seq).run == 0  # nothing before the commit
    run_forward([step])
    state = seqs.get(seq)
    assert (state.ids, state.run, state.cache) == ([1, 2, 3, 4, 5], 5, [0, 1, 2, 3, 4])
    (step,) = seqs.plan([(seq, [6, 7, 8])], keep=[1])
    assert (step.inputs, step.keep) == ([6, 7, 8], 1)  # the prompt ran: only the new tokens


def test_plan_checks_every_request_before_any_runs() -> None:
    seqs, _ = table(max_positions=6)
    a, b = seqs.open([1, 2], []), seqs.open([3], [])
    with pytest.raises(EngineError, match="appears twice"):
        seqs.plan([(a, [1]), (a, [2])])
    with pytest.raises(EngineError, match="has no new tokens"):
        seqs.plan([(a, [1]), (b, [])])
    with pytest.raises(EngineError, match="keep=3"):
        seqs.plan([(a, [1, 2])], keep=[3])
    with pytest.raises(EngineError, match="outside the vocabulary"):
        seqs.plan([(a, [1]), (b, [99])])
    with pytest.raises(EngineError, match=f"sequence {b} would hold 7 tokens, past the model's"):
        seqs.plan([(a, [1]), (b, [1, 2, 3, 4, 5, 6])])
    assert seqs.plan([(b, [1, 2, 3, 4, 5])])[0].inputs == [3, 1, 2, 3, 4, 5]  # 6: allowed
    assert (seqs.tokens(a), seqs.tokens(b)) == ([1, 2], [3])


def test_truncate_crops_only_what_has_run() -> None:
    seqs, crops = table()
    seq = seqs.open([1, 2, 3, 4], [])
    run_forward(seqs.plan([(seq, [5, 6])]))
    seqs.get(seq).ids.append(7)  # as a token given but not run yet
    seqs.truncate(seq, 7)
    seqs.truncate(seq, 6)  # cuts the un-run token only: the cache stays
    assert crops.calls == []
    seqs.truncate(seq, 4)
    state = seqs.get(seq)
    assert crops.calls == [(6, 4)]
    assert (state.ids, state.run, state.cache) == ([1, 2, 3, 4], 4, [0, 1, 2, 3])
    (step,) = seqs.plan([(seq, [9])])
    assert step.inputs == [9]
    for bad in (-1, 5):
        with pytest.raises(EngineError, match=f"cannot truncate sequence {seq} of length 4"):
            seqs.truncate(seq, bad)
    seqs.truncate(seq, 0)
    assert crops.calls == [(6, 4), (4, 0)]
    assert (state.ids, state.run, state.cache) == ([], 0, [])


def test_a_crop_that_starts_over_runs_the_kept_tokens_again() -> None:
    """A cache that cannot be cut exactly (a sliding window past its size) starts over."""

    def start_over(cache: Cache, run: int, length: int) -> tuple[Cache, int]:
        return [], 0

    seqs: SequenceTable[Cache] = SequenceTable(10, crop=start_over)
    seq = seqs.open([1, 2, 3, 4], [])
    run_forward(seqs.plan([(seq, [5, 6])]))
    seqs.truncate(seq, 5)
    state = seqs.get(seq)
    assert (state.ids, state.run, state.cache) == ([1, 2, 3, 4, 5], 0, [])
    (step,) = seqs.plan([(seq, [7])])
    assert step.inputs == [1, 2, 3, 4, 5, 7]


def test_truncate_shortens_what_the_prefix_cache_is_to_store() -> None:
    seqs, _ = table()
    state: SequenceState[Cache] = SequenceState([1, 2, 3, 4, 5], [], store=5)
    seq = seqs.add(state)
    seqs.truncate(seq, 3)  # into the prompt before it ran
    assert (state.store, state.run) == (3, 0)
    (step,) = seqs.plan([(seq, [8])])
    assert step.inputs == [1, 2, 3, 8]


def test_a_table_without_caches_keeps_them_as_they_are() -> None:
    seqs: SequenceTable[None] = SequenceTable(10)
    seq = seqs.open([1, 2, 3], None)
    run_forward(seqs.plan([(seq, [4])]), caches=False)
    seqs.truncate(seq, 1)
    state = seqs.get(seq)
    assert (state.ids, state.run, state.cache) == ([1], 1, None)


def test_the_scripted_engine_keeps_its_sequences_in_the_table() -> None:
    tok = TokenizerInfo.tiny(["a", "b", "c"])
    engine = ScriptedEngine.random(tok, seed=1)
    seq = engine.new_sequence([0, 1])
    engine.extend([(seq, [2])])
    engine.truncate(seq, 1)
    engine.extend([(seq, [2, 0])])
    assert engine.batch_log == [(3,), (2,)]  # the truncated token runs again
    with pytest.raises(EngineError, match="outside the vocabulary"):
        engine.new_sequence([tok.vocab_size])


def test_the_table_imports_no_torch() -> None:
    code = (
        "import sys, factorspec_sdk.engines.sequences, factorspec_sdk.engines.embedded.batching; "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
