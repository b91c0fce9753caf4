"""Solver checks that do not get stuck: a budget for the incremental solver, then restarts.

Z3's incremental solver keeps what it learned across checks (lemmas, phases, the order it
branches in). Now and then that state sends one check into a search that runs for minutes
while the same assertions in a fresh solver take milliseconds. Measured on the invoice
example (``amount == quantity * unit_price`` per line item, nonlinear), 40 random queries on
each of 30 oracles in one process: enumerating a line's amount with ``feasible_values``
took 14.8 s, 22 s, 69 s, 109 s and 467 s in five of them; each of those checks, dumped to
SMT-LIB and solved in a fresh solver, took 2-4 ms. Which query gets stuck depends on the
process's history (a different earlier query, or one more parameter set, moves it), so a
test suite met it at random.

This is the heavy tail that restarts cure in SAT and SMT solving. `check` gives the
incremental solver `FIRST_BUDGET_MS`; a check undecided by then goes, with the same
assertions, to a fresh solver with twice the budget and another random seed, then again with
twice that, until the caller's time limit is spent (None: no limit; the budgets keep
doubling, so the time lost to restarts is at most the last attempt's). Every answer is the
solver's own, sat with its model or unsat; only a spent time limit (or a solver that cannot
decide the assertions at all, `GIVE_UP_AFTER` fresh attempts in a row that stop early)
leaves a check undecided, and the caller raises for it as before.

The restart logic is ours (Z3 has no option that restarts a stuck incremental check in a
fresh solver); everything else is Z3's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import z3

from factorspec_sdk.graph.z3raw import copy_assertions

__all__ = ["FIRST_BUDGET_MS", "GIVE_UP_AFTER", "Outcome", "check"]

FIRST_BUDGET_MS = 500
"""Time the incremental solver gets for one check before the check restarts fresh.

Far above a healthy check, with room for a loaded server's threads: the slowest of 324 checks
planning twelve 8-10-city trips took 37 ms here (``python -m factorspec_sdk.bench.planning
--n 12 --cities 8-10 --no-unique``, each check timed)."""

GIVE_UP_AFTER = 4
"""Fresh attempts in a row that stop undecided before their budget is spent (a solver that
cannot decide the assertions, not one that ran out of time) before the check gives up."""


_MOST_MS = 2**32 - 2
"""The largest budget Z3 takes (its ``timeout`` is an unsigned 32-bit count of ms, and the
largest value means none)."""


_BUDGET_ATTR = "_factorspec_budget_ms"
"""The attribute a solver keeps the budget last set on it in (set only when it changes)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The answer of one `check`.

    Attributes:
        result: ``sat``, ``unsat`` or ``unknown`` (the time limit was spent).
        model: a model of the assertions when ``result`` is ``sat`` (and one was asked for),
            else None.
        restarts: fresh solvers the check needed (0: the incremental solver answered).
        reason: the solver's reason when ``result`` is ``unknown``, else ``""``.
    """

    result: z3.CheckSatResult
    model: z3.ModelRef | None
    restarts: int
    reason: str = ""


def check(
    solver: z3.Solver,
    timeout_ms: int | None = None,
    assumptions: Sequence[z3.BoolRef] = (),
    *,
    model: bool = True,
    warm: bool = True,
    first_budget_ms: int = FIRST_BUDGET_MS,
) -> Outcome:
    """Check ``solver`` (under ``assumptions``), restarting fresh where it gets stuck.

    Args:
        solver: the incremental solver; its assertions and scopes are left as they were; its
            ``timeout`` parameter is set to its budget (once: the solver remembers it).
        timeout_ms: the time limit of the whole check (None: none).
        assumptions: literals assumed for this check only.
        model: get the model of a satisfiable check (False: the answer alone).
        warm: try ``solver`` itself first (False: a check of it got stuck already, and it
            has not been replaced since; go fresh at once, with ``first_budget_ms``).
        first_budget_ms: the incremental solver's share (tests make it small).
    """
    t0 = time.monotonic()
    budget = first_budget_ms if timeout_ms is None else min(first_budget_ms, timeout_ms)
    reason = ""
    if warm:
        if getattr(solver, _BUDGET_ATTR, None) != budget:  # a parameter set is not free
            solver.set("timeout", budget)
            setattr(solver, _BUDGET_ATTR, budget)
        r = solver.check(*assumptions)
        if r != z3.unknown:
            return Outcome(r, solver.model() if model and r == z3.sat else None, 0)
        reason = solver.reason_unknown()
        budget = min(2 * budget, _MOST_MS)
    restarts = 0
    early = 0
    while early < GIVE_UP_AFTER:
        spent = (time.monotonic() - t0) * 1000
        if timeout_ms is not None and spent >= timeout_ms:
            break
        if timeout_ms is not None:
            budget = min(budget, max(1, int(timeout_ms - spent)))
        restarts += 1
        fresh = z3.SimpleSolver(ctx=solver.ctx)
        fresh.set("random_seed", restarts)
        fresh.set("timeout", budget)
        copy_assertions(solver, fresh)
        started = time.monotonic()
        r = fresh.check(*assumptions)
        if r != z3.unknown:
            return Outcome(r, fresh.model() if model and r == z3.sat else None, restarts)
        reason = fresh.reason_unknown()
        early = early + 1 if (time.monotonic() - started) * 1000 < budget / 2 else 0
        budget = min(2 * budget, _MOST_MS)
    return Outcome(z3.unknown, None, restarts, reason)
