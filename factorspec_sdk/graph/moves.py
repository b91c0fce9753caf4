"""A model of a component moved to another value of one variable, proved by evaluation.

An enumeration of a variable's feasible values (`Oracle._walk`) asks whether a model it
has would still satisfy the component with the variable at a neighbouring value. Moving
only that variable breaks whatever ties others to it, so the variables it determines move
with it:

- a temporal leaf's part variables (a datetime's ``date``, ``clock``, ``hour``...), to the
  values `date_links`' ties give them (`tied_parts`);
- a variable an equality of the constraints defines by a term that reads a moved one (the
  next meeting's arrival, ``b.arrive == a.end + travel``), to that term's value in the
  moved model: where the equality held in the model, and not where it defines the variable
  moved itself; each variable once, in the order the equalities are reached.

Where the model so moved does not hold, the move is tried again with one of the variable's
companions moved by as much (`Moves.companions`: the same kind of leaf in the same object,
a shift's end for its start), which keeps a length a relation bounds: a model at its
shortest shift moves nowhere alone (measured on the roster of the user-models suite, an
enumeration of a second shift's 41 start times took 42 checks and 190 ms with the start
alone, 8 checks and 75 ms with its end moving too).

The moved model is then evaluated on the constraints that read a variable that moved (it
satisfies the others already): all true prove the move feasible, exactly as a check's model
would. Anything the rules above get wrong (an equality under a condition the move made
false, a definition that clashes with another) only makes that evaluation false: the move
is not proved, and a check decides. `walk` moves a model a step at a time each way, and
`finer_step` finds the step a model moves by where two values found are a multiple of it
apart. Written here, not taken from Z3: Z3 has no call that moves a model, and a check
(what it offers) is what this saves.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import z3

from factorspec_sdk.graph.z3raw import reads_and_equalities, true_with, value_in, value_with
from factorspec_sdk.relations.compiler import tied_parts
from factorspec_sdk.relations.kinds import VarKind
from factorspec_sdk.relations.variables import date_part_of

if TYPE_CHECKING:
    from factorspec_sdk.graph.compiled import CompiledSpec
    from factorspec_sdk.relations.layout import Path

__all__ = [
    "COMPANIONS",
    "SMALL_PRIMES",
    "Definition",
    "Misses",
    "MoveIndex",
    "Moves",
    "finer_step",
    "move_index",
    "walk",
]

SMALL_PRIMES = (2, 3, 5, 7, 11, 13)
"""The prime factors `finer_step` divides a walk's step by (a clock's, a calendar's)."""

Definition = tuple[str, z3.ExprRef, z3.BoolRef]
"""An equality that defines a variable: its name, the term it equals, the equality."""


@dataclass(frozen=True, slots=True)
class MoveIndex:
    """What a move of a component's models reads of its constraints (`move_index`).

    Attributes:
        definitions: by each variable, the equalities that define another variable by a
            term reading it.
        readers: by each variable, the indices of the constraints that read it.
    """

    definitions: dict[str, tuple[Definition, ...]]
    readers: dict[str, tuple[int, ...]]


class Misses:
    """Tries of some moves of each variable that came to nothing, and when to stop them.

    After ``limit`` tries of a variable that all missed, `spent` says to try it no more;
    once one hit, it is never spent. Used for an oracle's walks and class moves
    (`factorspec_sdk.graph.oracle.WALK_TRIES`) and for a component's companions
    (`factorspec_sdk.graph.component_solver.COMPANION_MISSES`).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._count: dict[str, int] = {}
        """Misses of each variable in a row from the first (-1: one try hit)."""

    def spent(self, var: str) -> bool:
        """Whether ``var``'s tries missed ``limit`` times and none hit."""
        return self._count.get(var, 0) >= self.limit

    def record(self, var: str, hit: bool) -> None:
        """Count one try of ``var``: a hit for good, or one miss more."""
        count = self._count.get(var, 0)
        if hit:
            self._count[var] = -1
        elif count >= 0:
            self._count[var] = count + 1


class Moves:
    """Moves of the models of one component, in an oracle's context.

    A move is evaluated on the constraints that read a variable it changes: the model
    satisfies the others already (a check's model, or a witness: what the witnesses rely
    on too), and they read nothing that moved. The component's `MoveIndex` is found at the
    first move and kept with the spec's component (`Component.moves`) for the oracles of
    later requests; its constraints and equalities are copied into this context as moves
    need them.

    Args:
        spec: the spec.
        index: the component's index.
        ctx: the oracle's context.
        term: a variable's term in ``ctx``.
    """

    def __init__(
        self, spec: CompiledSpec, index: int, ctx: z3.Context, term: Callable[[str], z3.ExprRef]
    ) -> None:
        self.spec = spec
        self.index = index
        self.ctx = ctx
        self.term = term
        comp = spec.component(index)
        self.ties = _ties(spec, comp.variables)
        """Each temporal leaf with part variables: part -> its variable."""
        self.parts = {name for parts in self.ties.values() for name in parts.values()}
        with spec.context_lock:  # the spec's terms, and its component's cache
            if comp.moves is None:
                comp.moves = move_index(comp.constraints, comp.variables)
        self.found = comp.moves
        self._copies: dict[int, z3.ExprRef] = {}
        self._formulas: dict[frozenset[str], z3.BoolRef] = {}
        self._companions: dict[str, tuple[str, ...]] = {}
        self._order: dict[str, int] | None = None
        """Each variable's place in the layout (`companions`), found at first use."""

    def changes(
        self,
        model: z3.ModelRef,
        var: str,
        value: int,
        also: Sequence[tuple[str, int]] = (),
    ) -> dict[str, int] | None:
        """The values the variables take when ``model`` moves ``var`` to ``value``.

        ``var``, its parts, and what the equalities that held in ``model`` define from them
        (the module's rules); ``also``: other variables moved with it, each to its value
        (`companions`). None: a part or a defined value has none (an ordinal outside the
        calendar, a term that evaluates to no integer), or two moves clash.
        """
        changes: dict[str, int] = {}
        if not self._set(changes, var, value):
            return None
        for other, moved_to in also:
            if not self._set(changes, other, moved_to):
                return None
        frontier = [var, *(other for other, _ in also)]
        while frontier:
            moved = frontier.pop()
            for defined, term, equality in self.found.definitions.get(moved, ()):
                if defined in changes or defined in self.parts:
                    continue
                if value_in(model, self._copy(equality), boolean=True) is not True:
                    continue  # an equality of a branch the model did not take
                values = [(self.term(n), v) for n, v in changes.items()]
                x = value_with(model, self._copy(term), values, boolean=False)
                if not isinstance(x, int) or not self._set(changes, defined, x):
                    return None
                frontier.append(defined)
        return changes

    def companions(self, var: str) -> tuple[str, ...]:
        """The variables an interval's other end is: ``var``'s kind, in ``var``'s object.

        A shift's ``end`` for its ``start``, a stay's ``check_out`` for its ``check_in``:
        where a relation bounds their difference (a length), a model moved by ``var``
        alone breaks it, and one whose other end moves by as much keeps it
        (`ComponentSolver.moved`). Integer-valued leaves only (no parts, lengths, texts or
        booleans); the `COMPANIONS` nearest ``var`` in the layout's order, each tried
        alone.
        """
        found = self._companions.get(var)
        if found is None:
            rec = self.spec.record(var)
            found = ()
            if rec.kind in _MOVED_TOGETHER:
                parent = rec.path[:-1]
                names = [
                    name
                    for name in self.spec.component(self.index).variables
                    if name != var
                    and name not in self.parts
                    and (other := self.spec.record(name)).kind == rec.kind
                    and other.path[:-1] == parent
                ]
                if self._order is None:
                    self._order = {name: i for i, name in enumerate(self.spec.variables)}
                order = self._order
                here = order.get(var, 0)
                names.sort(key=lambda n: (abs(order.get(n, len(order)) - here), n))
                found = tuple(names[:COMPANIONS])
            self._companions[var] = found
        return found

    def holds(self, model: z3.ModelRef, changes: dict[str, int]) -> bool:
        """Whether the constraints are true in ``model`` moved by ``changes``."""
        names = frozenset(changes)
        formula = self._formulas.get(names)
        if formula is None:
            readers = self.found.readers
            indices = sorted({i for n in names for i in readers.get(n, ())})
            with self.spec.context_lock:
                constraints = self.spec.component(self.index).constraints
                copies = [self._copy(constraints[i]) for i in indices]
            formula = self._formulas[names] = z3.And(copies, self.ctx)
        return true_with(model, formula, [(self.term(n), x) for n, x in changes.items()])

    def _set(self, changes: dict[str, int], var: str, value: int) -> bool:
        """Give ``var`` and its parts their values; False where one has another already.

        A move never changes a value it set: a time's minute moved to 60 defines the time
        (``t == 3600 * hour + 60 * minute + second``), whose parts then say minute 0, and
        that move is refused, not taken as minute 60.
        """
        if changes.get(var, value) != value:
            return False
        changes[var] = value
        parts = self.ties.get(var)
        if parts:
            tied = tied_parts(parts.keys(), value)
            if tied is None:
                return False
            for part, x in tied.items():
                if changes.get(parts[part], x) != x:
                    return False
                changes[parts[part]] = x
        return True

    def _copy(self, t: z3.ExprRef) -> z3.ExprRef:
        """A term of the spec's context, copied into this one (once)."""
        key = t.get_id()
        copy = self._copies.get(key)
        if copy is None:
            with self.spec.context_lock:
                copy = self._copies[key] = t.translate(self.ctx)
        return copy


COMPANIONS = 3
"""The most companions of a variable a move tries (`Moves.companions`)."""

_MOVED_TOGETHER = frozenset({VarKind.INT, VarKind.DATE, VarKind.FLOAT})
"""The kinds whose variables `Moves.companions` pairs: integer-valued leaves."""


def _ties(spec: CompiledSpec, variables: Collection[str]) -> dict[str, dict[str, str]]:
    leaves: dict[Path, str] = {}
    parts: dict[Path, dict[str, str]] = {}
    for name in variables:
        rec = spec.record(name)
        part = date_part_of(name) if rec.kind == VarKind.DATEPART else None
        if part is not None:
            parts.setdefault(rec.path, {})[part] = name
        elif rec.kind == VarKind.DATE:
            leaves[rec.path] = name
    return {leaves[path]: ps for path, ps in parts.items() if path in leaves}


def move_index(constraints: Sequence[z3.BoolRef], names: frozenset[str]) -> MoveIndex:
    """The definitions and the readers of the constraints (`MoveIndex`).

    A definition is an equality ``x == term`` reached from a constraint through ``and``,
    the consequent of ``implies`` and both branches of a Boolean ``if``, ``x`` an integer
    variable of ``names`` that ``term`` does not read (`z3raw.reads_and_equalities`: one
    walk of the terms' graph, once per spec).
    """
    per_constraint, equalities = reads_and_equalities(constraints, names)
    readers: dict[str, list[int]] = {}
    for i, read in enumerate(per_constraint):
        for var in read:
            readers.setdefault(var, []).append(i)
    definitions: dict[str, list[Definition]] = {}
    for name, term, equality, read in equalities:
        for var in read:
            definitions.setdefault(var, []).append((name, term, equality))
    return MoveIndex(
        {var: tuple(found) for var, found in definitions.items()},
        {var: tuple(found) for var, found in readers.items()},
    )


def walk(
    moves: Callable[[int], bool], found: list[int], limit: int, step: int
) -> tuple[list[int], int, int]:
    """Walk a model from ``found``'s last value a step at a time each way (`Oracle._walk`).

    ``moves(w)``: whether the model moves to ``w`` (`ComponentSolver.moved`). A value found
    already is passed; the first value it does not move to ends that way; the walk stops
    once more than ``limit`` are found. Each value it moves to goes into ``found``.
    Returns those values and the ends of the run walked (every step from one to the other
    is in ``found``).
    """
    value = found[-1]
    seen = set(found)
    moved: list[int] = []
    lo = hi = value
    for d in (step, -step):
        w = value
        while len(found) <= limit:
            w += d
            if w not in seen:
                if not moves(w):
                    break
                found.append(w)
                moved.append(w)
            lo, hi = min(lo, w), max(hi, w)
    return moved, lo, hi


def finer_step(moves: Callable[[int], bool], value: int, step: int) -> int:
    """``step`` divided by its small prime factors while the model moves by one either way.

    Two values found an hour apart on a five-minute grid give 3600: 1800 moves, 900, 300
    do, 150, 100 and 60 do not, and the walk goes on at 300. A few evaluations, where each
    value the coarse step leaves out would cost a check.
    """
    while True:
        for p in SMALL_PRIMES:
            if step % p:
                continue
            q = step // p
            if moves(value + q) or moves(value - q):
                step = q
                break
        else:
            return step
