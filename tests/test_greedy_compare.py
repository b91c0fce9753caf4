"""The cross-kernel comparison rule of tests/greedy.py: a split is accepted only at a tie."""

from __future__ import annotations

from tests.greedy import compare_greedy


def test_equal_records_count_their_clear_choices() -> None:
    how = compare_greedy([1, 2, 3, 4], [1, 2, 3, 4], [None, 0.5, 3.0, 0.001], tolerance=0.05)
    assert how.same and how.compared_choices == 2 and how.split_at is None


def test_a_split_reports_the_reference_margin_there() -> None:
    tie = compare_greedy([1, 2, 3], [1, 2, 9], [None, 2.0, 0.01], tolerance=0.05)
    assert not tie.same and tie.split_at == 2 and tie.split_margin == 0.01
    assert tie.compared_choices == 1
    clear = compare_greedy([1, 2, 3], [1, 7, 3], [None, 2.0, 0.01], tolerance=0.05)
    assert clear.split_at == 1 and clear.split_margin == 2.0  # assert_same_greedy fails here
    certain = compare_greedy([1, 2], [5, 2], [None, 1.0], tolerance=0.05)
    assert certain.split_at == 0 and certain.split_margin is None  # a certain token differs


def test_a_shorter_record_is_a_split() -> None:
    how = compare_greedy([1, 2, 3], [1, 2], [None, None, 4.0], tolerance=0.05)
    assert not how.same and how.split_at == 2 and how.split_margin == 4.0
