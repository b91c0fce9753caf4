"""The writer's choice points in a record's structure: a list's next item or end, a union's branch.

`factorspec_sdk.writer.automaton.Writer` asks these at a `ListDecision` (another item, or
the closing bracket, as the list's bounds and the oracle allow its length) and at a
`UnionDecision` (``null`` if allowed, and each branch the oracle finds feasible).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from factorspec_sdk.relations.layout import branch_part
from factorspec_sdk.writer.state import (
    ListDecision,
    ListFrame,
    Option,
    Pending,
    UnionDecision,
    WriterState,
)

if TYPE_CHECKING:
    from factorspec_sdk.writer.automaton import Writer

__all__ = ["list_options", "union_options"]

_replace = dataclasses.replace


def list_options(writer: Writer, ev: ListDecision) -> list[Option]:
    """A list's options: its closing bracket, and another item, as its length may be."""
    frame, s = ev.frame, ev.state
    spec, oracle = writer.spec, writer.oracle
    i, node, path = frame.index, frame.node, frame.path
    var = spec.length_variable(path)
    can_close = i >= node.min_length
    can_continue = i < min(node.max_length, spec.max_length(path))
    if var is not None:
        from factorspec_sdk.graph.compiled import AtLeast  # z3 loads with the spec

        # two yes/no questions, not the set of feasible lengths: enumerating it took up to
        # ``max_length + 1`` checks at every item (9 of 55 ms each at an expense report's
        # first), where these take one check each at most, and none where a witness or
        # the cache answers them; the facts asked are those the options then carry
        can_close = can_close and oracle.feasible((*s.assignment, (var, i)))
        can_continue = can_continue and oracle.feasible((*s.assignment, (var, AtLeast(i + 1))))
    options = []
    popped = _replace(s, stack=s.stack[:-1])
    if can_close:
        fact = None if var is None else (var, i)
        closed = popped if fact is None else _replace(popped, assignment=(*s.assignment, fact))
        options.append(Option("" if frame.others else "}" if node.mapping else "]", closed))
    if can_continue:
        slot = frame.slot if i == 0 else None  # the first key of a key slot
        frame2 = ListFrame(path, i + 1, node, frame.others, frame.after, slot)
        assignment = s.assignment
        if var is not None:
            assignment = (*assignment, (var, AtLeast(i + 1)))
        cont = WriterState(
            assignment,
            (*s.stack[:-1], frame2),
            Pending((*path, i), node.item),
            None,
        )
        options.append(Option(", " if i or frame.after else "", cont))
    return options


def union_options(writer: Writer, ev: UnionDecision) -> list[Option]:
    """A union: ``null`` if allowed, and each branch the oracle finds feasible.

    A branch's option is empty text; the branch's object follows, its tag first, so the
    options become different text at the tag's value (`prefix_free` joins them to it).
    With a branch variable (a relation reads the union) the branch is a fact; a branch
    the relations fix is the only option, hence certain text.
    """
    s, node, path = ev.state, ev.node, ev.path
    options: list[Option] = []
    if node.nullable:
        nv = writer.spec.null_variable(path)
        if nv is None:
            options.append(Option("null", writer.after_leaf(s, None)))
        else:
            options, present = writer.decide_null(s, path, nv)
            if present is None:
                return options
            s = present
    assignment = s.assignment
    var = writer.spec.variable_for(path)
    if var is None:
        feasible = list(range(len(node.branches)))
    else:
        values = writer.oracle.feasible_values(assignment, var) or []
        feasible = sorted(int(k) for k in values)
    for k in feasible:
        b = node.branches[k]
        facts = assignment if var is None else (*assignment, (var, k))
        pending = Pending((*path, branch_part(b.model)), b)
        options.append(Option("", WriterState(facts, s.stack, pending, None)))
    return options
