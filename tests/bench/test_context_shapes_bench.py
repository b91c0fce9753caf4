"""``python -m factorspec_sdk.bench.context_shapes``: a new context compiled, and bound."""

from __future__ import annotations

import pytest

from factorspec_sdk.bench.context_shapes import main, run_contexts, trip_contexts
from factorspec_sdk.domains.trip import Itinerary
from factorspec_sdk.graph.params import split_context


def test_trip_variants_share_their_problems_shape() -> None:
    groups = trip_contexts(2, 3, (3, 4), seed=5)
    assert [len(g) for g in groups] == [4, 4]
    for group in groups:
        shapes = {split_context(c)[0] for c in group}
        assert len(shapes) == 1
    assert split_context(groups[0][0])[0] != split_context(groups[1][0])[0]


def test_each_variant_is_timed_both_ways() -> None:
    r = run_contexts("trip", Itinerary, trip_contexts(1, 3, (3, 3), seed=1))
    assert len(r.compiled_ms) == 3 and len(r.first_bind_ms) == 1 and len(r.bound_ms) == 2
    assert all(t >= 0 for t in [*r.compiled_ms, *r.bound_ms, *r.first_bind_ms])


def test_the_command_prints_both_medians(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--problems", "1", "--variants", "3", "--cities", "3-4"])
    out = capsys.readouterr().out
    assert "| contexts | n | compiled ms | bound ms | ratio | first bind ms |" in out
    assert "| trip, 3-4 cities (stay lengths) | 2 |" in out
    assert "| dated trip, 3-4 cities (start date, stay lengths) | 2 |" in out
    assert "| invoice (tax rate, item limit) | 2 |" in out
    assert "| booking (season dates) | 2 |" in out
    assert "diverged 0" in out
