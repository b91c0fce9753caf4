"""Z3 terms made straight through libz3, for the builders that make many of them at once.

z3py wraps every term it makes in a Python object: a reference count taken and given back,
a sort query to pick the wrapper's class and an error check after each foreign call, about
ten foreign calls for one node. A spec rebuilt from the relation IR makes thousands of
nodes per request (~17k for a 5-city trip), and that wrapping was most of its cost.
`TermBuilder` makes each node with one libz3 call plus one reference, keeps every node it
made alive until it is closed, and wraps only the roots a caller keeps (`TermBuilder.wrap`).

It does no sort checking: callers know their sorts statically (the relation IR's builder
infers them before building, `factorspec_sdk.ir.build`) and pass only well-sorted
arguments. A node libz3 refuses anyway comes back null, which raises `z3.Z3Exception` at
once (a null node is never passed on). The libz3 functions are z3py's own, with their
argument types already declared: each wrapper of ``z3.z3core`` keeps its foreign function
as the default of its last parameter (`_raw`); a z3py that stops doing so gets its checked
wrappers here instead, slower and the same.
"""

from __future__ import annotations

import builtins
import ctypes
import sys
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeAlias, cast

import z3
from z3 import z3core

__all__ = [
    "BINARY_OPS",
    "NARY_OPS",
    "Node",
    "TermBuilder",
    "assert_all",
    "copy_assertions",
    "largest_divisor",
    "reads_and_equalities",
    "rebind",
    "substitute_all",
    "true_under",
    "true_with",
    "value_in",
    "value_with",
]


def _raw(wrapper: Callable[..., object]) -> Callable[..., Any]:
    """The foreign function behind one of ``z3.z3core``'s checked wrappers."""
    defaults = getattr(wrapper, "__defaults__", None) or ()
    return cast(Callable[..., Any], getattr(defaults[-1], "f", wrapper) if defaults else wrapper)


class _Lib:
    """The libz3 functions used here, unchecked (each looked up once, then kept)."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = _raw(getattr(z3core, name))
        setattr(self, name, fn)
        return fn


_LIB = _Lib()

Node: TypeAlias = z3.Ast
"""A raw term of libz3 (a ctypes pointer), valid while its `TermBuilder` is open."""

NARY_OPS: dict[str, Callable[..., Any]] = {}
"""Operations over any number of arguments, by the relation IR's names."""

BINARY_OPS: dict[str, Callable[..., Any]] = {}
"""Operations over two arguments, by the relation IR's names."""


def rebind() -> None:
    """Take the libz3 functions from z3py's wrappers again.

    `factorspec_sdk.graph.z3_gil.keep_gil_in_short_calls` calls it after it switched them
    to ones that keep the GIL, so that the terms made here follow the same policy.
    """
    vars(_LIB).clear()
    NARY_OPS.update(
        {
            "and": _LIB.Z3_mk_and,
            "or": _LIB.Z3_mk_or,
            "distinct": _LIB.Z3_mk_distinct,
            "add": _LIB.Z3_mk_add,
            "sub": _LIB.Z3_mk_sub,
            "mul": _LIB.Z3_mk_mul,
        }
    )
    BINARY_OPS.update(
        {
            "implies": _LIB.Z3_mk_implies,
            "eq": _LIB.Z3_mk_eq,
            "le": _LIB.Z3_mk_le,
            "lt": _LIB.Z3_mk_lt,
            "ge": _LIB.Z3_mk_ge,
            "gt": _LIB.Z3_mk_gt,
            "div": _LIB.Z3_mk_div,
            "mod": _LIB.Z3_mk_mod,
        }
    )


rebind()

_INT64 = 2**63


def _eval(ref: Any, model: Any, node: Node) -> Node:
    """The value of ``node`` in ``model`` (a raw model), completed (no reference taken yet)."""
    out = (Node * 1)()
    if not _LIB.Z3_model_eval(ref, model, node, True, out):
        raise z3.Z3Exception("failed to evaluate a term in a model")
    return out[0]


def _truth(ref: Any, node: Node) -> bool | None:
    """The truth value of a Boolean node (None: not ``true`` or ``false`` itself)."""
    value = _LIB.Z3_get_bool_value(ref, node)
    return True if value == 1 else False if value == -1 else None


def value_in(model: z3.ModelRef, term: z3.ExprRef, *, boolean: bool) -> int | bool | None:
    """The value of ``term`` in ``model``, completed: a bool for a Boolean term, else an int.

    None: the value is not ``true``/``false`` or an integer numeral. Three or four libz3
    calls and a reference, where z3py makes about ten to evaluate and read a value, and
    about ten more to build a literal (``t == v``) to evaluate instead.
    """
    ref = term.ctx_ref()
    node = _eval(ref, model.model, term.as_ast())
    _LIB.Z3_inc_ref(ref, node)
    try:
        return _value(ref, node, boolean)
    finally:
        _LIB.Z3_dec_ref(ref, node)


def _value(ref: Any, node: Node, boolean: bool) -> int | bool | None:
    """A value node as a bool (``boolean``) or an int; None: not one of those values."""
    if boolean:
        return _truth(ref, node)
    if not _LIB.Z3_is_numeral_ast(ref, node):
        return None
    text = _LIB.Z3_get_numeral_string(ref, node).decode()
    return int(text) if text.lstrip("-").isdigit() else None  # not a rational's "p/q"


def assert_all(solver: z3.Solver, formulas: Sequence[z3.BoolRef]) -> None:
    """Assert every formula into ``solver``, copied into its context when they live in another.

    ``solver.add(*formulas)`` (with ``f.translate(solver.ctx)`` for another context's) in
    one or two libz3 calls and a reference per formula, where z3py makes about fifteen (it
    wraps each copy, asks its sort and casts it). Call it where the formulas' context may be
    used (its lock).

    Raises:
        z3.Z3Exception: libz3 refused to copy a formula.
    """
    if not formulas:
        return
    src = formulas[0].ctx_ref()
    dst = solver.ctx.ref()
    raw_solver = solver.solver
    if src.value == dst.value:  # the same context: no copy
        for f in formulas:
            _LIB.Z3_solver_assert(dst, raw_solver, f.as_ast())
        return
    for f in formulas:
        node = _LIB.Z3_translate(src, f.as_ast(), dst)
        if not node:
            raise z3.Z3Exception("failed to copy a formula into the solver's context")
        _LIB.Z3_inc_ref(dst, node)
        try:
            _LIB.Z3_solver_assert(dst, raw_solver, node)
        finally:
            _LIB.Z3_dec_ref(dst, node)


def copy_assertions(source: z3.Solver, target: z3.Solver) -> None:
    """Assert everything ``source`` holds (every scope's) into ``target``, of the same context.

    A few libz3 calls an assertion, where ``target.add(*source.assertions())`` wraps each
    one in z3py objects first (most of a copy's cost on a component of a few hundred).
    """
    ref = source.ctx.ref()
    if target.ctx.ref().value != ref.value:
        raise z3.Z3Exception("copy_assertions copies within one context")
    vector = _LIB.Z3_solver_get_assertions(ref, source.solver)
    _LIB.Z3_ast_vector_inc_ref(ref, vector)
    try:
        raw_target = target.solver
        for i in range(_LIB.Z3_ast_vector_size(ref, vector)):
            _LIB.Z3_solver_assert(ref, raw_target, _LIB.Z3_ast_vector_get(ref, vector, i))
    finally:
        _LIB.Z3_ast_vector_dec_ref(ref, vector)


def _next_app(ref: Any, stack: list[Node], seen: set[int]) -> Node | None:
    """The next application node on ``stack`` not in ``seen`` (now in it); None: none left.

    The step of a walk of a terms' shared graph: each node once, numerals skipped.
    """
    while stack:
        node = stack.pop()
        key = _LIB.Z3_get_ast_id(ref, node)
        if key not in seen and _LIB.Z3_get_ast_kind(ref, node) == z3.Z3_APP_AST:
            seen.add(key)
            return node
    return None


def largest_divisor(formulas: Sequence[z3.BoolRef]) -> int:
    """The largest constant an integer ``div`` or ``mod`` of ``formulas`` divides by (0: none).

    A divisor that is not a numeral counts as unbounded (``sys.maxsize``). One walk of the
    terms' shared graph through libz3, a few calls a node: 4-9 ms on the user-models suite's
    larger components, where z3py's wrappers took 3-24 ms more (`Traits.tunable` keeps
    the answer, so a spec walks each component once).
    """
    if not formulas:
        return 0
    ref = formulas[0].ctx_ref()
    ops = (z3.Z3_OP_IDIV, z3.Z3_OP_MOD)
    largest = 0
    seen: set[int] = set()
    stack = [f.as_ast() for f in formulas]
    while (node := _next_app(ref, stack, seen)) is not None:
        n = _LIB.Z3_get_app_num_args(ref, node)
        if n == 2 and _LIB.Z3_get_decl_kind(ref, _LIB.Z3_get_app_decl(ref, node)) in ops:
            divisor = _value(ref, _LIB.Z3_get_app_arg(ref, node, 1), False)
            largest = max(largest, sys.maxsize if divisor is None else abs(int(divisor)))
        stack.extend(_LIB.Z3_get_app_arg(ref, node, i) for i in range(n))
    return largest


def reads_and_equalities(
    formulas: Sequence[z3.BoolRef], names: frozenset[str]
) -> tuple[list[frozenset[str]], list[tuple[str, z3.ArithRef, z3.BoolRef, frozenset[str]]]]:
    """The variables of ``names`` each formula reads, and the equalities that define one.

    The second list: each equality ``x == term`` (either way round) reached from a formula
    through ``and``, the consequent of ``implies`` and both branches of a Boolean ``if``,
    where ``x`` is an integer variable of ``names`` that ``term`` does not read, as (``x``'s
    name, ``term``, the equality, the variables ``term`` reads). One walk of the terms'
    shared graph through libz3 (a lookup unrolled into ``If`` chains nests hundreds deep:
    no recursion), where z3py's wrappers took 80-140 ms on the user-models suite's larger
    components. Call it where the formulas' context may be used (its lock).
    """
    if not formulas:
        return [], []
    ctx = formulas[0].ctx
    ref = ctx.ref()
    app_ast, uninterpreted = z3.Z3_APP_AST, z3.Z3_OP_UNINTERPRETED
    reads: dict[int, frozenset[str]] = {}
    none: frozenset[str] = frozenset()

    def read(root: Node) -> frozenset[str]:
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            key = _LIB.Z3_get_ast_id(ref, node)
            if key in reads:
                continue
            if _LIB.Z3_get_ast_kind(ref, node) != app_ast:
                reads[key] = none
                continue
            n = _LIB.Z3_get_app_num_args(ref, node)
            if n == 0:
                decl = _LIB.Z3_get_app_decl(ref, node)
                name = None
                if _LIB.Z3_get_decl_kind(ref, decl) == uninterpreted:
                    symbol = _LIB.Z3_get_decl_name(ref, decl)
                    name = _LIB.Z3_get_symbol_string(ref, symbol).decode()
                reads[key] = frozenset({name}) if name in names else none
            elif expanded:
                args = (_LIB.Z3_get_app_arg(ref, node, i) for i in range(n))
                reads[key] = none.union(*(reads[_LIB.Z3_get_ast_id(ref, a)] for a in args))
            else:
                stack.append((node, True))
                stack.extend((_LIB.Z3_get_app_arg(ref, node, i), False) for i in range(n))
        return reads[_LIB.Z3_get_ast_id(ref, root)]

    per_formula = [read(f.as_ast()) for f in formulas]
    equalities: list[tuple[str, z3.ArithRef, z3.BoolRef, frozenset[str]]] = []
    seen: set[int] = set()
    stack = [f.as_ast() for f in formulas]
    int_sort = z3.Z3_INT_SORT
    while (node := _next_app(ref, stack, seen)) is not None:
        kind = _LIB.Z3_get_decl_kind(ref, _LIB.Z3_get_app_decl(ref, node))
        n = _LIB.Z3_get_app_num_args(ref, node)
        args = [_LIB.Z3_get_app_arg(ref, node, i) for i in range(n)]
        if kind == z3.Z3_OP_AND:
            stack.extend(args)
        elif kind == z3.Z3_OP_IMPLIES:
            stack.append(args[1])
        elif kind == z3.Z3_OP_ITE:
            stack.extend(args[1:])
        elif kind == z3.Z3_OP_EQ and n == 2:
            if _LIB.Z3_get_sort_kind(ref, _LIB.Z3_get_sort(ref, args[0])) != int_sort:
                continue
            for x, term in ((args[0], args[1]), (args[1], args[0])):
                defined = read(x)  # a variable's own name, or more, or none
                if len(defined) != 1 or _LIB.Z3_get_app_num_args(ref, x) != 0:
                    continue
                (name,) = defined
                used = read(term)
                if name not in used:
                    equality = z3.BoolRef(node, ctx)
                    equalities.append((name, z3.ArithRef(term, ctx), equality, used))
    return per_formula, equalities


def substitute_all(
    formulas: Sequence[z3.BoolRef], pairs: Sequence[tuple[z3.ExprRef, z3.ExprRef]]
) -> list[z3.BoolRef]:
    """Each formula with every pair's first term replaced by its second (`z3.substitute`).

    One libz3 call a formula, where ``z3.substitute(f, *pairs)`` checks every pair's sorts
    again on each call (a few hundred z3py calls a formula for a trip spec's pairs); the
    pairs are checked once here. All terms live in one context.

    Raises:
        z3.Z3Exception: a pair's two terms differ in sort, or libz3 refused a substitution.
    """
    if not formulas or not pairs:
        return list(formulas)
    for a, b in pairs:
        if not a.sort().eq(b.sort()):
            raise z3.Z3Exception(f"cannot substitute {a} by {b}: their sorts differ")
    ctx = formulas[0].ctx
    ref = ctx.ref()
    n = len(pairs)
    src = (Node * n)(*(a.as_ast() for a, _ in pairs))
    dst = (Node * n)(*(b.as_ast() for _, b in pairs))
    out: list[z3.BoolRef] = []
    for f in formulas:
        node = _LIB.Z3_substitute(ref, f.as_ast(), n, src, dst)
        if not node:
            raise z3.Z3Exception("libz3 refused a substitution")
        out.append(z3.BoolRef(node, ctx))
    return out


def true_under(
    constraints: Sequence[z3.BoolRef], values: Sequence[tuple[z3.ExprRef, int | bool]]
) -> bool:
    """Whether every constraint is true when each term (a solver variable) has its value.

    Evaluation, no search: the model that gives the terms their values, and every other
    variable the default value of its sort, evaluates each constraint. True proves that an
    assignment extending ``values`` satisfies them all. False says only that this one does
    not (a variable left out may need another value, or a term is no variable): the caller
    then asks the solver. Call it where the constraints' context may be used (its lock).
    """
    if not constraints:
        return True
    ctx = constraints[0].ctx
    ref = ctx.ref()
    model = _LIB.Z3_mk_model(ref)
    _LIB.Z3_model_inc_ref(ref, model)
    try:
        with TermBuilder(ctx) as tb:
            for term, value in values:
                node = term.as_ast()
                if not _LIB.Z3_is_app(ref, node):
                    return False
                decl = _LIB.Z3_get_app_decl(ref, _LIB.Z3_to_app(ref, node))
                if (
                    _LIB.Z3_get_arity(ref, decl) != 0
                    or _LIB.Z3_get_decl_kind(ref, decl) != z3.Z3_OP_UNINTERPRETED
                    or _LIB.Z3_model_has_interp(ref, model, decl)
                ):
                    return False
                given = tb.bool(value) if isinstance(value, builtins.bool) else tb.int(value)
                _LIB.Z3_add_const_interp(ref, model, decl, given)
            for c in constraints:
                if _truth(ref, tb._keep(_eval(ref, model, c.as_ast()))) is not True:
                    return False
        return True
    except z3.Z3Exception:  # an evaluation libz3 refused: leave it to the solver
        return False
    finally:
        _LIB.Z3_model_dec_ref(ref, model)


def true_with(
    model: z3.ModelRef, formula: z3.BoolRef, values: Sequence[tuple[z3.ExprRef, int]]
) -> bool:
    """Whether ``formula`` is true in ``model`` with each term (an int variable) given a value.

    Evaluation, no search (`value_with`): True proves that the model so changed satisfies
    ``formula``. False: not true under this change (or a term is no variable, or libz3
    refused an evaluation).
    """
    return value_with(model, formula, values, boolean=True) is True


def value_with(
    model: z3.ModelRef,
    term: z3.ExprRef,
    values: Sequence[tuple[z3.ExprRef, int]],
    *,
    boolean: bool,
) -> int | bool | None:
    """The value of ``term`` in ``model`` with each term (an int variable) given a value.

    A bool for a Boolean ``term`` (``boolean``), else an int; None where it is neither (or a
    term of ``values`` is no variable, or libz3 refused an evaluation). The model is changed
    for the evaluation only: each variable's value is read first (completed, as every
    evaluation here completes) and put back after, so the model answers as before. A few
    libz3 calls a value plus one evaluation, where z3py's ``update_value`` and ``eval`` wrap
    each node. Call it where the model's context may be used (its lock, or the oracle's
    private context).
    """
    ref = term.ctx_ref()
    raw = model.model
    decls: list[Any] = []
    for var, _ in values:
        node = var.as_ast()
        if not _LIB.Z3_is_app(ref, node):
            return None
        decl = _LIB.Z3_get_app_decl(ref, _LIB.Z3_to_app(ref, node))
        if _LIB.Z3_get_arity(ref, decl) != 0 or (
            _LIB.Z3_get_decl_kind(ref, decl) != z3.Z3_OP_UNINTERPRETED
        ):
            return None
        decls.append(decl)
    with TermBuilder(term.ctx) as tb:
        try:
            old = [tb.eval(model, var.as_ast()) for var, _ in values]
        except z3.Z3Exception:
            return None
        try:
            for decl, (_, value) in zip(decls, values, strict=True):
                _LIB.Z3_add_const_interp(ref, raw, decl, tb.int(value))
            return _value(ref, tb._keep(_eval(ref, raw, term.as_ast())), boolean)
        except z3.Z3Exception:
            return None
        finally:
            for decl, node in zip(decls, old, strict=True):
                _LIB.Z3_add_const_interp(ref, raw, decl, node)


class TermBuilder:
    """Makes raw terms in one Z3 context; use it from one thread, and close it when done.

    Closing gives back the builder's references: the nodes are then alive only through the
    roots wrapped by `wrap` (z3py terms that hold references of their own).
    """

    def __init__(self, ctx: z3.Context) -> None:
        self.ctx = ctx
        self._ref = ctx.ref()
        self._held: list[Node] = []
        self._ints: dict[int, Node] = {}
        self._int_sort = self._keep(_LIB.Z3_mk_int_sort(self._ref))
        self._bool_sort: Node | None = None
        self._true = self._keep(_LIB.Z3_mk_true(self._ref))
        self._false = self._keep(_LIB.Z3_mk_false(self._ref))

    def _keep(self, node: Node) -> Node:
        if not node:
            raise z3.Z3Exception(self._error())
        _LIB.Z3_inc_ref(self._ref, node)
        self._held.append(node)
        return node

    def _error(self) -> str:
        code = z3core.Z3_get_error_code(self._ref)
        return str(z3core.Z3_get_error_msg(self._ref, code))

    # ------------------------------------------------------------------ leaves

    @staticmethod
    def term(t: z3.ExprRef) -> Node:
        """The node of a z3py term of this context (alive as long as ``t`` is)."""
        return t.as_ast()

    def const(self, name: str, *, boolean: builtins.bool) -> Node:
        """The solver variable ``name``, Boolean or integer (``z3.Bool``/``z3.Int``'s node)."""
        ref = self._ref
        if boolean:
            if self._bool_sort is None:
                self._bool_sort = self._keep(_LIB.Z3_mk_bool_sort(ref))
            sort = self._bool_sort
        else:
            sort = self._int_sort
        symbol = _LIB.Z3_mk_string_symbol(ref, name.encode())
        return self._keep(_LIB.Z3_mk_const(ref, symbol, sort))

    def int(self, value: int) -> Node:
        """An integer numeral."""
        node = self._ints.get(value)
        if node is None:
            if -_INT64 < value < _INT64:
                made = _LIB.Z3_mk_int64(self._ref, value, self._int_sort)
            else:
                made = _LIB.Z3_mk_numeral(self._ref, str(value).encode(), self._int_sort)
            node = self._ints[value] = self._keep(made)
        return node

    def bool(self, value: bool) -> Node:
        """``true`` or ``false``."""
        return self._true if value else self._false

    # ------------------------------------------------------------------ applications

    def app(self, op: str, args: Sequence[Node]) -> Node:
        """``op`` (a name of `NARY_OPS`, `BINARY_OPS`, ``not``, ``neg`` or ``ite``) applied."""
        ref = self._ref
        if op in NARY_OPS:
            arr = (Node * len(args))(*args)
            return self._keep(NARY_OPS[op](ref, len(args), arr))
        if op in BINARY_OPS:
            return self._keep(BINARY_OPS[op](ref, args[0], args[1]))
        if op == "not":
            return self._keep(_LIB.Z3_mk_not(ref, args[0]))
        if op == "neg":
            return self._keep(_LIB.Z3_mk_unary_minus(ref, args[0]))
        if op == "ite":
            return self._keep(_LIB.Z3_mk_ite(ref, args[0], args[1], args[2]))
        raise ValueError(f"unknown operation {op!r}")

    def conj(self, args: Sequence[Node]) -> Node:
        """The conjunction of ``args`` (the one argument itself; ``true`` for none)."""
        if not args:
            return self._true
        return args[0] if len(args) == 1 else self.app("and", args)

    def disj(self, args: Sequence[Node]) -> Node:
        """The disjunction of ``args`` (the one argument itself; ``false`` for none)."""
        if not args:
            return self._false
        return args[0] if len(args) == 1 else self.app("or", args)

    # ------------------------------------------------------------------ models

    def eval(self, model: z3.ModelRef, node: Node) -> Node:
        """The value of ``node`` in ``model``, completed (a variable it leaves free gets one)."""
        return self._keep(_eval(self._ref, model.model, node))

    def truth(self, node: Node) -> builtins.bool | None:
        """The truth value of a Boolean node (None: not ``true`` or ``false`` itself)."""
        return _truth(self._ref, node)

    def value(self, node: Node, *, boolean: builtins.bool) -> builtins.int | builtins.bool:
        """A value node (`eval`'s) as a bool (``boolean``) or an int.

        Raises:
            z3.Z3Exception: the node is not ``true``/``false`` or an integer numeral.
        """
        v = _value(self._ref, node, boolean)
        if v is None:
            raise z3.Z3Exception("the term is not a Boolean or integer value")
        return v

    # ------------------------------------------------------------------ roots

    def wrap(self, node: Node) -> z3.BoolRef:
        """A Boolean node as a z3py term that outlives the builder."""
        return z3.BoolRef(node, self.ctx)

    def wrap_int(self, node: Node) -> z3.ArithRef:
        """An integer node as a z3py term that outlives the builder."""
        return z3.ArithRef(node, self.ctx)

    def close(self) -> None:
        """Give back the builder's references (its nodes die unless a wrapped root holds them)."""
        ref, held = self._ref, self._held
        for node in held:
            _LIB.Z3_dec_ref(ref, node)
        held.clear()
        self._ints.clear()

    def __enter__(self) -> TermBuilder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


assert issubclass(Node, ctypes.c_void_p)  # truthiness tests a null node
