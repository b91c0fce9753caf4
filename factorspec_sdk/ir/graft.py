"""Relation IRs put together into one: each IR's relations moved under a place of a larger record.

A server builds some records itself from parts a client sent: a request with ``tools`` is
decoded as one record of calls (``{"calls": [{"name": ..., "arguments": {...}}, ...]}``), and
each function's arguments come with their own relation IR (or the relation-free IR of their
JSON schema). `IRComposer` places each part's variables, defs and factors under the path
where its layout sits in the larger record, once per place it sits at (a list's items are
unrolled to its bound), and guards each factor by the condition that the place exists (the
list is long enough, the union takes that branch), as the relation compiler guards the
relations of a nested model. Strings are codes into one table per IR: the parts' tables are
merged and the codes in their formulas renumbered.

This module owns the composition; `factorspec_sdk.ir.build.spec_from_ir` checks the document
it produces like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from factorspec_sdk.ir.limits import IRError
from factorspec_sdk.ir.model import (
    IR_VERSION,
    Apply,
    BoolConst,
    DefRef,
    Expr,
    IntConst,
    IRFactor,
    IRVariable,
    RelationIR,
    VarRef,
)
from factorspec_sdk.relations.layout import Path, affix_name, path_name, same_name

__all__ = ["IRComposer", "int_const"]

_Sort = Literal["bool", "int", "str", "const"]
"""An expression's sort for renumbering string codes: ``const`` is an integer constant (or a
choice between constants) that is a string code where it meets a string and a number
elsewhere."""

_WIRE_SORTS: dict[str, _Sort] = {"int": "int", "bool": "bool", "str": "str", "len": "int"}
"""The sort of a variable of each IR kind (``IRVariable.kind``)."""

_BOOL_RESULT = frozenset({"and", "or", "not", "implies", "eq", "distinct", "le", "lt", "ge", "gt"})


@dataclass(slots=True)
class IRComposer:
    """Builds one relation IR from a layout and the relations of its parts.

    Attributes:
        strings: the merged string table.
        variables: the variables, by name.
        defs: the shared subterms.
        factors: the relations.
    """

    strings: list[str] = field(default_factory=list)
    variables: dict[str, IRVariable] = field(default_factory=dict)
    defs: list[Expr] = field(default_factory=list)
    factors: list[IRFactor] = field(default_factory=list)

    def declare(self, name: str, path: Path, kind: Literal["int", "bool", "str", "len"]) -> VarRef:
        """Declare the variable ``name`` at ``path`` (a list length, a branch) once; its term."""
        if name not in self.variables:
            self.variables[name] = IRVariable(name=name, path=list(path), kind=kind)
        return VarRef(var=name)

    def place(self, ir: RelationIR, prefix: Path, guard: Sequence[Expr], label: str) -> None:
        """Add ``ir``'s relations for its layout placed at ``prefix``, under ``guard``.

        Args:
            ir: the part's IR (its layout is placed by the caller).
            prefix: the path of the part's root in the larger record.
            guard: Boolean conditions under which the place exists (their variables declared
                with `declare`); each factor becomes ``guard -> formula``.
            label: what the factor names say of the place (``"book_room, call 0"``).

        Raises:
            IRError: a variable not named after its path, or a shared subterm used as a
                number and as a string at once (its codes cannot be renumbered).
        """
        rename = {v.name: _moved_name(v, prefix) for v in ir.variables}
        for v in ir.variables:
            new = rename[v.name]
            if new in self.variables:
                raise IRError(f"{label}: variable {new!r} is placed twice")
            self.variables[new] = IRVariable(
                name=new,
                path=[*prefix, *v.path],
                kind=v.kind,
                other=None if v.other is None else [*prefix, *v.other],
                text=v.text,
            )
        codes = self._codes(ir.strings)
        moved = _Mover(rename, codes, {v.name: v.kind for v in ir.variables}, len(self.defs))
        for d in ir.defs:
            self.defs.append(moved.def_(d))
        guard_vars = sorted({name for g in guard for name in _var_names(g)})
        for f in ir.factors:
            body = moved.expr(f.formula, as_str=False)
            formula = body if not guard else Apply(op="implies", args=[_conj(guard), body])
            variables = [rename.get(n, n) for n in f.variables]
            self.factors.append(
                IRFactor(
                    name=f"{f.name} ({label})",
                    variables=[*variables, *(g for g in guard_vars if g not in variables)],
                    formula=formula,
                )
            )

    def document(self, name: str, layout: dict[str, object]) -> dict[str, object]:
        """The IR document of the whole record (a JSON value for `spec_from_ir`)."""

        def dump(items: Sequence[IRVariable | IRFactor | Expr]) -> list[object]:
            return [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in items]

        return {
            "factorspec_ir": IR_VERSION,
            "name": name,
            "layout": layout,
            "strings": list(self.strings),
            "variables": dump(list(self.variables.values())),
            "defs": dump(self.defs),
            "factors": dump(self.factors),
        }

    def _codes(self, strings: Sequence[str]) -> dict[int, int]:
        """The merged table's code of each code of ``strings`` (code ``i + 1`` is entry i)."""
        out: dict[int, int] = {}
        for i, text in enumerate(strings):
            if text not in self.strings:
                self.strings.append(text)
            out[i + 1] = self.strings.index(text) + 1
        return out


@dataclass(slots=True)
class _Mover:
    """Rewrites one part's expressions: variables renamed, defs shifted, string codes renumbered."""

    rename: dict[str, str]
    codes: dict[int, int]
    kinds: dict[str, str]
    offset: int
    sorts: list[_Sort] = field(default_factory=list)
    originals: list[Expr] = field(default_factory=list)

    def def_(self, d: Expr) -> Expr:
        """The moved copy of the part's next def (defs are moved in order)."""
        sort = self.sort(d)
        self.sorts.append(sort)
        self.originals.append(d)
        return self.expr(d, as_str=sort == "str")

    def sort(self, e: Expr) -> _Sort:
        """The sort of ``e`` (the part's defs before it already sorted)."""
        if isinstance(e, VarRef):
            return _WIRE_SORTS.get(self.kinds.get(e.var, "int"), "int")
        if isinstance(e, IntConst):
            return "const"
        if isinstance(e, BoolConst):
            return "bool"
        if isinstance(e, DefRef):
            return self.sorts[e.index] if 0 <= e.index < len(self.sorts) else "int"
        if e.op in _BOOL_RESULT:
            return "bool"
        if e.op == "ite" and len(e.args) == 3:
            a, b = self.sort(e.args[1]), self.sort(e.args[2])
            if "str" in (a, b):
                return "str"
            return "const" if a == b == "const" else "bool" if "bool" in (a, b) else "int"
        return "int"

    def expr(self, e: Expr, *, as_str: bool) -> Expr:
        """``e`` moved; ``as_str``: its integer constants are string codes."""
        if isinstance(e, VarRef):
            return VarRef(var=self.rename.get(e.var, e.var))
        if isinstance(e, IntConst):
            return int_const(self.codes.get(e.value, e.value)) if as_str else e
        if isinstance(e, BoolConst):
            return e
        if isinstance(e, DefRef):
            return self._def_ref(e, as_str)
        if e.op == "ite" and len(e.args) == 3:
            branches = as_str or self.sort(e) == "str"
            cond, a, b = e.args
            args = [
                self.expr(cond, as_str=False),
                self.expr(a, as_str=branches),
                self.expr(b, as_str=branches),
            ]
        elif e.op in ("eq", "distinct"):
            strs = any(self.sort(a) == "str" for a in e.args)
            args = [self.expr(a, as_str=strs) for a in e.args]
        else:
            args = [self.expr(a, as_str=False) for a in e.args]
        return Apply(op=e.op, args=args)

    def _def_ref(self, e: DefRef, as_str: bool) -> Expr:
        if not 0 <= e.index < len(self.sorts):
            raise IRError(f"def {e.index} is not defined before its use")
        if as_str and self.sorts[e.index] == "const":
            # constants that are string codes here and numbers where the def was moved (a
            # def's own sort decides how it is moved): inline them, renumbered
            return self.expr(self.originals[e.index], as_str=True)
        return DefRef.model_validate({"def": self.offset + e.index})


def int_const(value: int) -> IntConst:
    """The IR's integer constant ``{"int": value}``."""
    return IntConst.model_validate({"int": value})


def _moved_name(v: IRVariable, prefix: Path) -> str:
    """The name of ``v`` once its path is under ``prefix`` (names follow their paths)."""
    old, new = tuple(v.path), (*prefix, *v.path)
    if v.text is not None:
        return affix_name(v.name.split("(", 1)[0], new, v.text)
    if v.other is not None:
        return same_name(new, (*prefix, *v.other))
    spelled = path_name(old)
    if v.name == spelled:
        return path_name(new)
    head = v.name[: len(v.name) - len(spelled) - 2]
    if head.isidentifier() and v.name == f"{head}({spelled})":  # len(...), null(...), year(...)
        return f"{head}({path_name(new)})"
    raise IRError(f"variable {v.name!r} is not named after its path {spelled!r}")


def _conj(terms: Sequence[Expr]) -> Expr:
    return terms[0] if len(terms) == 1 else Apply(op="and", args=list(terms))


def _var_names(e: Expr) -> list[str]:
    if isinstance(e, VarRef):
        return [e.var]
    if isinstance(e, Apply):
        return [n for a in e.args for n in _var_names(a)]
    return []
