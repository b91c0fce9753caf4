"""The lengths a free string may close at when a relation reads its ``len()``.

A free ``str`` leaf whose ``len()`` a relation reads has a length variable (``len(title)``)
and no finite domain: the writer writes it character by character like any free string and
asks the oracle, exactly, at which lengths it may close. `StringLengths` answers the three
questions the token layers ask, each with oracle queries cached for the string:

- `closes` (may the string end after ``n`` characters): ``len == n`` is feasible;
- `longest` (how far it may grow): the largest feasible length, by binary search on
  ``len >= k`` (feasibility is monotone in ``k``);
- `next_length` (the shortest way to close from ``n`` characters): the least feasible
  length ``>= n``, by binary search on ``n <= len <= k``.

Everything is asked under the assignment of the record so far, which does not change while
the string is written. Hand-written (no grammar library knows the relations); the characters
themselves are the free-string tokens of `factorspec_sdk.tokens.plan`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from factorspec_sdk.graph.compiled import Assignment, AtLeast, AtMost
    from factorspec_sdk.graph.oracle import Oracle

__all__ = ["StringLengths"]


class StringLengths:
    """The feasible lengths of one free string, under one assignment.

    Args:
        oracle: the request's oracle.
        assignment: the facts of the record before the string.
        var: the string's length variable.
        lo: the schema's least length (``min_length``).
        hi: its bound (``max_length``, or the default bound of the length variable).
    """

    __slots__ = ("_closes", "_longest", "_next", "assignment", "hi", "lo", "oracle", "var")

    def __init__(self, oracle: Oracle, assignment: Assignment, var: str, lo: int, hi: int):
        self.oracle = oracle
        self.assignment = assignment
        self.var = var
        self.lo = lo
        self.hi = hi
        self._closes: dict[int, bool] = {}
        self._next: dict[int, int | None] = {}
        self._longest: int | None = None

    def _feasible(self, *facts: tuple[str, int | AtLeast | AtMost]) -> bool:
        return self.oracle.feasible((*self.assignment, *facts))

    def closes(self, n: int) -> bool:
        """Whether the string may end after ``n`` characters."""
        hit = self._closes.get(n)
        if hit is None:
            hit = self.lo <= n <= self.hi and self._feasible((self.var, n))
            self._closes[n] = hit
        return hit

    @property
    def longest(self) -> int:
        """The largest feasible length (-1 if none is: the assignment is infeasible)."""
        if self._longest is None:
            from factorspec_sdk.graph.compiled import AtLeast  # z3 loads with the spec

            lo, hi = self.lo, self.hi
            if not self._feasible((self.var, AtLeast(lo))):
                self._longest = -1
            else:
                while lo < hi:  # invariant: len >= lo is feasible
                    mid = (lo + hi + 1) // 2
                    if self._feasible((self.var, AtLeast(mid))):
                        lo = mid
                    else:
                        hi = mid - 1
                self._longest = lo
        return self._longest

    def next_length(self, n: int) -> int | None:
        """The least feasible length ``>= n``, or None if there is none."""
        if n in self._next:
            return self._next[n]
        from factorspec_sdk.graph.compiled import AtLeast, AtMost

        start = max(n, self.lo)
        top = self.longest
        found: int | None = None
        if start <= top:
            if self.closes(start):
                found = start
            else:
                lo, hi = start + 1, top  # the least k with a feasible length in [start, k]
                while lo < hi:
                    mid = (lo + hi) // 2
                    if self._feasible((self.var, AtLeast(start)), (self.var, AtMost(mid))):
                        hi = mid
                    else:
                        lo = mid + 1
                found = lo
                self._closes[lo] = True
        self._next[n] = found
        return found

    def lengths_from(self, n: int) -> list[int]:
        """Every feasible length ``>= n``, ascending (one query per candidate length)."""
        return [k for k in range(max(n, self.lo), self.longest + 1) if self.closes(k)]
