"""Canonical JSON integers written digit by digit, for intervals known without the oracle.

A canonical integer is ``0`` or ``-?[1-9][0-9]*`` (never ``-0``, never a leading zero) with at
most `DEFAULT_MAX_INT_DIGITS` digits. `next_digits_in_range` answers, for a prefix already
written, which characters may follow so that some integer in ``[lo, hi]`` can still be
completed, and whether the prefix itself is such an integer (the empty string in the result).
"""

from __future__ import annotations

from factorspec_sdk.relations.layout import DEFAULT_MAX_INT_DIGITS, INT_LIMIT

__all__ = ["is_canonical_int", "next_digits_in_range"]

_DIGITS = "0123456789"


def is_canonical_int(text: str) -> bool:
    """Whether ``text`` is a canonical JSON integer."""
    body = text[1:] if text.startswith("-") else text
    if not body or not body.isdigit() or len(body) > DEFAULT_MAX_INT_DIGITS:
        return False
    if body == "0":
        return not text.startswith("-")
    return body[0] != "0"


def _magnitude_completes(digits: str, a: int, b: int) -> bool:
    """Some m in [a, b] (m >= 1) whose decimal form starts with ``digits`` (non-empty)."""
    if a > b:
        return False
    base = int(digits)
    for k in range(DEFAULT_MAX_INT_DIGITS - len(digits) + 1):
        lo = base * 10**k
        hi = (base + 1) * 10**k - 1
        if lo > b:
            break
        if hi >= a:
            return True
    return False


def next_digits_in_range(prefix: str, lo: int | None, hi: int | None) -> frozenset[str]:
    """Characters that may follow ``prefix`` for an integer in ``[lo, hi]``.

    Returns a subset of ``"-0123456789"`` plus ``""`` when ``prefix`` is itself a canonical
    integer in range (the number may end here).
    """
    lo = -INT_LIMIT if lo is None else max(lo, -INT_LIMIT)
    hi = INT_LIMIT if hi is None else min(hi, INT_LIMIT)
    out: set[str] = set()
    if prefix and is_canonical_int(prefix) and lo <= int(prefix) <= hi:
        out.add("")
    negative = prefix.startswith("-")
    body = prefix[1:] if negative else prefix
    if body == "0":
        return frozenset(out)
    # magnitudes allowed for this sign
    a, b = (max(1, -hi), -lo) if negative else (max(1, lo), hi)
    if prefix == "":
        if lo <= 0 <= hi:
            out.add("0")
        if lo <= -1:
            out.add("-")
    for c in _DIGITS:
        if body == "" and c == "0":
            continue
        if len(body) + 1 > DEFAULT_MAX_INT_DIGITS:
            break
        if _magnitude_completes(body + c, a, b):
            out.add(c)
    return frozenset(out)
