"""What a component's constraints (and facts) determine: the backbone search, in one place.

A variable is *determined* when it exists and has one value in every completion. Given a
solver holding the constraints (and the facts), a model of it, and the candidates, the search
asks for a completion in which some candidate is missing or differs from the model's value;
what differs drops out, and the candidates left when no such completion exists are the
determined ones. Each round is one check; a bounded search that runs out of rounds settles
nothing (None). Used by the spec's own check (`factorspec_sdk.graph.assemble`, the backbone
of no facts, on the solver that checked the spec) and by the oracle (facts a record has
written so far). The terms are raw (`TermBuilder`): there is one per candidate, and z3py's
wrappers were most of the cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import z3

from factorspec_sdk.graph.z3raw import Node, TermBuilder

__all__ = ["BACKBONE_ROUNDS", "Candidate", "determined_nodes"]

BACKBONE_ROUNDS = 3
"""Most checks spent on one attempt to find what a component's facts determine."""

Candidate = tuple[str, z3.ExprRef, z3.BoolRef | None]
"""A variable's name, its term and the condition under which it exists (None: always), in
the solver's context."""


def determined_nodes(
    tb: TermBuilder,
    solver: z3.Solver,
    model: z3.ModelRef,
    candidates: Sequence[Candidate],
    check: Callable[[], z3.ModelRef | None],
    rounds: int | None = None,
    models: list[z3.ModelRef] | None = None,
) -> dict[str, Node] | None:
    """The candidates with ``model``'s value in every model of ``solver``: their value nodes.

    ``model`` must satisfy what ``solver`` holds; ``check`` runs one check of ``solver``
    (a model, or None where it is unsatisfiable), raising on an undecided one. The value
    nodes live as long as ``tb`` is open. None: ``rounds`` checks did not settle it. The
    solver is left as it was given.
    ``models``: each model the search finds (each differs from ``model``) is appended.
    """
    values: dict[str, Node] = {}
    differs: dict[str, Node] = {}  # the variable is missing or has another value
    for name, term, exists in candidates:
        ex = None if exists is None else tb.term(exists)
        if ex is not None and not tb.truth(tb.eval(model, ex)):
            continue
        t = tb.term(term)
        values[name] = tb.eval(model, t)
        other = tb.app("not", [tb.app("eq", [t, values[name]])])
        differs[name] = other if ex is None else tb.app("or", [tb.app("not", [ex]), other])
    live = list(differs)
    while live:
        if rounds is not None:
            if rounds == 0:
                return None
            rounds -= 1
        solver.push()
        try:
            solver.add(tb.wrap(tb.disj([differs[v] for v in live])))
            found = check()
            if found is None:
                break
            if models is not None:
                models.append(found)
        finally:
            solver.pop()
        live = [v for v in live if tb.truth(tb.eval(found, differs[v])) is False]
    return {v: values[v] for v in live}
