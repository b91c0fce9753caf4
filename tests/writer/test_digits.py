import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factorspec_sdk.writer.digits import is_canonical_int, next_digits_in_range


def brute(prefix: str, lo: int, hi: int) -> frozenset[str]:
    out: set[str] = set()
    for v in range(lo, hi + 1):
        text = str(v)
        if text == prefix:
            out.add("")
        elif text.startswith(prefix):
            out.add(text[len(prefix)])
    return frozenset(out)


@settings(max_examples=300, deadline=None)
@given(
    lo=st.integers(-300, 300),
    span=st.integers(0, 400),
    prefix=st.sampled_from(
        ["", "-", "0", "1", "2", "-1", "-2", "10", "12", "-10", "29", "3", "99"]
    ),
)
def test_matches_enumeration(lo: int, span: int, prefix: str) -> None:
    hi = lo + span
    assert next_digits_in_range(prefix, lo, hi) == brute(prefix, lo, hi)


def test_unbounded_has_every_start() -> None:
    assert next_digits_in_range("", None, None) == frozenset("-0123456789")
    assert next_digits_in_range("0", None, None) == frozenset({""})
    assert "0" not in next_digits_in_range("-", None, None)


def test_eighteen_digit_cap() -> None:
    nine = "9" * 18
    assert next_digits_in_range(nine, None, None) == frozenset({""})


@pytest.mark.parametrize(
    ("text", "ok"),
    [("0", True), ("-0", False), ("01", False), ("-12", True), ("", False), ("1a", False)],
)
def test_canonical(text: str, ok: bool) -> None:
    assert is_canonical_int(text) is ok
