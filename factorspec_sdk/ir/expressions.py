"""The relation IR's formulas rebuilt as Z3 terms, node by node, against an allowlist.

Nothing in the IR is executed: `ExprBuilder` reads each expression node, checks its operator
(`factorspec_sdk.ir.model.OPS`), its arity and its arguments' sorts, and builds the raw libz3
term (`factorspec_sdk.graph.z3raw.TermBuilder`). Every error is an `IRError` naming the place.
"""

from __future__ import annotations

import z3

from factorspec_sdk.graph.z3raw import Node, TermBuilder
from factorspec_sdk.ir.limits import IRError, IRLimits
from factorspec_sdk.ir.model import OPS, Apply, BoolConst, DefRef, Expr, IntConst, VarRef

__all__ = ["ExprBuilder"]


_BOOL_ARGS = frozenset({"and", "or", "not", "implies"})
_INT_ARGS = frozenset({"le", "lt", "ge", "gt", "add", "sub", "mul", "div", "mod", "neg"})
_BOOL_RESULT = frozenset({"and", "or", "not", "implies", "eq", "distinct", "le", "lt", "ge", "gt"})


class ExprBuilder:
    """Builds the IR's formulas as raw libz3 terms (`TermBuilder`), checking sorts itself.

    A node's sort is Boolean or integer (the only two a variable has), known before the node
    is made: so every sort error is an `IRError` naming the place, and libz3 only ever sees
    well-sorted arguments. Close it (``with``) once the formulas are wrapped.
    """

    def __init__(
        self,
        tb: TermBuilder,
        variables: dict[str, Node],
        is_bool: dict[str, bool],
        limits: IRLimits,
    ) -> None:
        self.tb = tb
        self.variables = variables
        self.is_bool = is_bool
        self.limits = limits
        self.defs: list[tuple[Node, bool]] = []
        self.def_vars: list[frozenset[str]] = []
        self.nodes = 0
        self.used: set[str] = set()

    def formula(self, e: Expr, where: str) -> z3.BoolRef:
        """A factor's formula as a z3py term (it must be Boolean)."""
        node, is_bool = self.build(e, where)
        if not is_bool:
            raise IRError(f"{where}: the formula is not Boolean")
        return self.tb.wrap(node)

    def build(self, e: Expr, where: str, depth: int = 1) -> tuple[Node, bool]:
        """The node of ``e`` and whether it is Boolean."""
        lim = self.limits
        self.nodes += 1
        if self.nodes > lim.max_expr_nodes:
            raise IRError(f"the formulas have more than {lim.max_expr_nodes} nodes")
        if depth > lim.max_expr_depth:
            raise IRError(
                f"{where}: an expression nests deeper than {lim.max_expr_depth}; move shared or "
                "deep subterms into defs"
            )
        if isinstance(e, VarRef):
            t = self.variables.get(e.var)
            if t is None:
                raise IRError(f"{where}: unknown variable {e.var!r}")
            self.used.add(e.var)
            return t, self.is_bool[e.var]
        if isinstance(e, IntConst):
            if abs(e.value) > lim.max_int:
                raise IRError(f"{where}: integer constant beyond +-{lim.max_int}")
            return self.tb.int(e.value), False
        if isinstance(e, BoolConst):
            return self.tb.bool(e.value), True
        if isinstance(e, DefRef):
            if not 0 <= e.index < len(self.defs):
                raise IRError(f"{where}: def {e.index} is not defined before this point")
            self.used |= self.def_vars[e.index]  # a factor reads the variables of its defs
            return self.defs[e.index]
        return self._apply(e, where, depth)

    def _apply(self, e: Apply, where: str, depth: int) -> tuple[Node, bool]:
        op = e.op
        lo, hi = OPS[op]
        n = len(e.args)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if lo == hi else f"{lo}..{hi if hi is not None else ''}"
            raise IRError(f"{where}: {op} takes {want} arguments, got {n}")
        built = [self.build(a, where, depth + 1) for a in e.args]
        bools = [b for _, b in built]
        if op in _BOOL_ARGS and not all(bools):
            raise IRError(f"{where}: {op} needs Boolean arguments")
        if op in _INT_ARGS and any(bools):
            raise IRError(f"{where}: {op} needs integer arguments")
        if op == "ite":
            if not bools[0]:
                raise IRError(f"{where}: {op} needs Boolean arguments")
            if bools[1] != bools[2]:
                raise IRError(f"{where}: {op} needs arguments of one sort")
        elif op in ("eq", "distinct") and len(set(bools)) > 1:
            raise IRError(f"{where}: {op} needs arguments of one sort")
        node = self.tb.app(op, [a for a, _ in built])
        return node, (op in _BOOL_RESULT or (op == "ite" and bools[1]))
