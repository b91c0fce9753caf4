"""The exhaustive solver of a trip problem: every ordered plan that satisfies it.

A plan visits every city once, in an order the direct flights allow, each stay as long as the
problem asks, and covers every event window with the stay in its city. The search places the
cities one by one over a bitmask of the cities used (`count_solutions`, `solve`); the
generator uses it to make problems with one valid plan (`generate_problem(unique=True)`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from factorspec_sdk.domains.trip import TripProblem

__all__ = ["count_solutions", "solutions", "solve"]


def _placements(problem: TripProblem) -> tuple[list[str], list[int], list[list[bool]]]:
    """Cities, their stay lengths and ``ok[mask][i]``: city i may start after the set mask."""
    cities = list(problem.cities)
    lengths = [problem.days[c] for c in cities]
    n = len(cities)
    ok = []
    for mask in range(1 << n):
        first = 1 + sum(lengths[j] - 1 for j in range(n) if mask >> j & 1)
        row = []
        for i, city in enumerate(cities):
            last = first + lengths[i] - 1
            row.append(
                all(
                    first <= e.first_day and e.last_day <= last
                    for e in problem.events
                    if e.city == city
                )
            )
        ok.append(row)
    return cities, lengths, ok


def _table(problem: TripProblem) -> tuple[list[str], list[int], list[list[int]]]:
    """``ways[mask][i]``: number of valid plans that visit exactly ``mask`` ending in city i."""
    cities, lengths, ok = _placements(problem)
    n = len(cities)
    index = {c: i for i, c in enumerate(cities)}
    succ: list[list[int]] = [[] for _ in cities]
    for a, b in set(problem.direct_flights):
        if a in index and b in index and a != b:
            succ[index[a]].append(index[b])
    ways = [[0] * n for _ in range(1 << n)]
    for i in range(n):
        if ok[0][i]:
            ways[1 << i][i] = 1
    for mask in range(1, 1 << n):
        for i in range(n):
            w = ways[mask][i]
            if not w:
                continue
            for j in succ[i]:
                if not mask >> j & 1 and ok[mask][j]:
                    ways[mask | 1 << j][j] += w
    return cities, lengths, ways


def count_solutions(problem: TripProblem) -> int:
    """Number of city orders that satisfy every constraint (dynamic programming over subsets)."""
    _, _, ways = _table(problem)
    return sum(ways[-1])


def solve(problem: TripProblem) -> list[tuple[str, int]] | None:
    """A valid ordered (city, stay length) plan, or ``None`` if there is none.

    A reference solver independent of Z3: dynamic programming over (visited set, last city),
    since the day a stay starts depends only on the set of cities already visited. When several
    orders are valid it returns one of them (not necessarily the golden plan).
    """
    found = solutions(problem, 1)
    return found[0] if found else None


def solutions(problem: TripProblem, limit: int) -> list[list[tuple[str, int]]]:
    """Up to ``limit`` valid plans, read back from the table from the last stay to the first."""
    cities, lengths, ways = _table(problem)
    n = len(cities)
    pairs = set(problem.direct_flights)
    out: list[list[tuple[str, int]]] = []

    def back(mask: int, suffix: list[int]) -> None:
        # ``suffix`` ends the plan (reversed); its head ``suffix[-1]`` ends the set ``mask``.
        if len(out) >= limit:
            return
        cur = suffix[-1]
        rest = mask & ~(1 << cur)
        if not rest:
            out.append([(cities[i], lengths[i]) for i in reversed(suffix)])
            return
        for i in range(n):
            if ways[rest][i] and (cities[i], cities[cur]) in pairs:
                back(rest, [*suffix, i])

    full = (1 << n) - 1
    for end in range(n):
        if ways[full][end]:
            back(full, [end])
    return out
