"""`RelationCompiler`: the compiler's state, its variables, and the dispatch of expressions.

The compiler holds what outlives one expression: the layout and context, the spec's variables
(`var`, `exists`, `len_var`), the intern table, and the relation being compiled (for error
messages). `eval` dispatches an expression to the rule of its AST node type, collected from
the rule modules (`names`, `fields`, `operators`, `sequences`, `builtin_calls`), which take
the compiler as their first argument.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn, cast

import z3

from factorspec_sdk.errors import ContextError, RelationDefinitionError, RelationRaisesError
from factorspec_sdk.relations.checks import HINTS, relation_body
from factorspec_sdk.relations.compiler import builtin_calls, fields, names, operators, sequences
from factorspec_sdk.relations.compiler.choices import truthy
from factorspec_sdk.relations.compiler.records import (
    BOOL_KINDS,
    CompiledRelation,
    InternTable,
    VarKind,
    VarRecord,
)
from factorspec_sdk.relations.compiler.statements import block
from factorspec_sdk.relations.compiler.terms import AND, IMPLIES, NOT, Cond, mk_cmp, to_bool
from factorspec_sdk.relations.compiler.values import R, Scope, SObj, SSeq, V
from factorspec_sdk.relations.decorator import RelationInfo
from factorspec_sdk.relations.layout import (
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectLayout,
    Path,
    UnionLayout,
    branch_name,
    is_branch_part,
    length_name,
    path_name,
)
from factorspec_sdk.relations.leaves import LeafError
from factorspec_sdk.relations.sample import raises_everywhere
from factorspec_sdk.relations.variables import (
    NULL,
    VarShape,
    branch_variable,
    leaf_variable,
    length_variable,
)

__all__ = ["RelationCompiler"]

ExprRule = Callable[["RelationCompiler", Any, Scope], R]
"""The rule of one AST node type: (compiler, node, scope) -> result."""

CallRule = Callable[["RelationCompiler", list[V], dict[str, V], ast.AST], R]
"""The rule of one builtin on record values: (compiler, args, kwargs, node) -> result."""

_RULES: dict[type[ast.AST], ExprRule] = {
    **names.RULES,
    **fields.RULES,
    **operators.RULES,
    **sequences.RULES,
    **builtin_calls.RULES,
}

_UNSUPPORTED: dict[type[ast.AST], tuple[str, str]] = {
    ast.Lambda: ("lambda", "lambdas are not supported"),
    ast.JoinedStr: ("f-string", "f-strings are not supported"),
    ast.NamedExpr: ("assignment expression", ":= is not supported"),
}
"""Expressions outside the subset that get a construct name of their own in the error."""


class RelationCompiler:
    """Lowers the relations of one model (for one context) to Z3.

    Args:
        layout: the model's layout.
        context: the per-request context (a constant at compile time).
        list_bounds: unrolling bound per list path (default: the layout's max_length).
    """

    def __init__(
        self,
        layout: ObjectLayout,
        context: object,
        list_bounds: Mapping[Path, int] | None = None,
    ) -> None:
        self.layout = layout
        self.context = context
        self.list_bounds = dict(list_bounds or {})
        self.strings = InternTable()
        self.vars: dict[str, VarRecord] = {}
        self.seqs: dict[Path, SSeq] = {}
        """The unrolled lists of the relation being compiled, by path."""
        self._gt_cache: dict[tuple[int, int], z3.BoolRef] = {}
        self._used: set[str] = set()
        self._read: set[str] = set()
        """Variables some compiled relation reads (`records` keeps only these)."""
        self._info: RelationInfo | None = None
        self.node: ast.AST | None = None
        """The node being evaluated (the default place of an error)."""

    # ------------------------------------------------------------------ entry point

    def compile(self, info: RelationInfo, root: Path = ()) -> CompiledRelation:
        """Lower one relation of the model at ``root`` (``()``: the top model).

        A relation of a nested model holds vacuously when that object is absent (a list item
        beyond the length, or a null Optional). Raises `RelationDefinitionError` /
        `ContextError`.
        """
        self._info = info
        self._used = set()
        self.seqs = {}
        if info.takes_context and self.context is None:
            raise ContextError(
                f"relation {info.qualname!r} reads a context ({info.context_param}): "
                "pass context=... to compile the spec"
            )
        bound: dict[str, V] = {}
        args = info.tree.args
        params = [a.arg for a in args.posonlyargs + args.args]
        node = self.node_at(root)
        assert isinstance(node, ObjectLayout)
        bound[params[0]] = SObj(root, node)
        if info.takes_context and len(params) > 1:
            bound[params[1]] = self.context
        res = block(self, relation_body(info.tree), Scope(bound))
        if res.ok is False:  # raises on every record: said now, not as an unsat core later
            raise raises_everywhere(info, node, self.context)
        formula = AND(res.ok, truthy(self, res.value))
        applies: Cond = True
        if root:
            guards: list[Cond] = [self.exists(root)]
            for k in range(1, len(root) + 1):
                sub = root[:k]
                if not isinstance(sub[-1], int) and self.node_at(sub).nullable:
                    null = self.var(sub, NULL, name=f"null({path_name(sub)})")
                    guards.append(NOT(cast(z3.BoolRef, null.term)))
            applies = AND(*guards)
            formula = IMPLIES(applies, formula)
        self._read |= self._used
        return CompiledRelation(
            info, to_bool(formula), frozenset(self._used), to_bool(applies), to_bool(res.ok)
        )

    def records(self) -> dict[str, VarRecord]:
        """The spec's variables: those the compiled relations read, in creation order.

        A free str leaf that relations read only through ``len()`` has its length variable
        here and no code variable (so it needs no finite domain).
        """
        return {n: r for n, r in self.vars.items() if n in self._read}

    def eval(self, node: ast.expr, scope: Scope) -> R:
        """Evaluate an expression to a value and its definedness condition."""
        self.node = node
        rule = _RULES.get(type(node))
        if rule is None:
            construct, message = _UNSUPPORTED.get(
                type(node), (type(node).__name__, "expression outside the supported subset")
            )
            self.fail(construct, message, node)
        return rule(self, node, scope)

    # ------------------------------------------------------------------ errors

    @property
    def info(self) -> RelationInfo:
        """The relation being compiled."""
        assert self._info is not None
        return self._info

    def fail(self, construct: str, message: str, node: ast.AST | None = None) -> NoReturn:
        """Raise `RelationDefinitionError` for ``construct`` at ``node`` (or the current one).

        The message gets the construct's advice from `checks.HINTS`, if it has one.
        """
        info = self._info
        hint = HINTS.get(construct)
        raise RelationDefinitionError(
            f"{message} ({hint})" if hint else message,
            relation=info.qualname if info else "?",
            filename=info.filename if info else "?",
            lineno=self._line(node),
            construct=construct,
        )

    def raises(
        self, construct: str, exception: str, message: str, node: ast.AST | None = None
    ) -> NoReturn:
        """Raise `RelationRaisesError`: Python raises ``exception`` at ``node``."""
        info = self._info
        raise RelationRaisesError(
            message,
            relation=info.qualname if info else "?",
            filename=info.filename if info else "?",
            lineno=self._line(node),
            construct=construct,
            exception=exception,
        )

    def _line(self, node: ast.AST | None) -> int:
        info = self._info
        return int(getattr(node or self.node, "lineno", info.lineno if info else 0))

    def where(self, node: ast.AST) -> str:
        """``file:line: relation 'Model.name'`` for a `ContextError` message."""
        info = self.info
        return f"{info.filename}:{getattr(node, 'lineno', info.lineno)}: relation {info.qualname!r}"

    # ------------------------------------------------------------------ variables

    def var(
        self,
        path: Path,
        shape: VarShape,
        *,
        name: str | None = None,
        read: bool = True,
        other: Path | None = None,
        affix: tuple[str, str] | None = None,
    ) -> VarRecord:
        """The variable of the node at ``path`` (created on first use), marked as used.

        ``shape``: its kind, bounds and domain (`factorspec_sdk.relations.variables`).
        With ``read=False`` it counts as used only once `mark_read` is called (a free str's
        code, which a relation may read only through ``len()``). ``other``: the second leaf
        of a ``same`` variable (it exists where both leaves do).
        """
        vname = name or path_name(path)
        rec = self.vars.get(vname)
        if rec is None:
            kind = shape.kind
            term: z3.ExprRef = z3.Bool(vname) if kind in BOOL_KINDS else z3.Int(vname)
            exists = self.exists(path)
            if other is not None:
                exists = AND(exists, self.exists(other))
            rec = VarRecord(
                vname,
                path,
                kind,
                term,
                shape.ge,
                shape.le,
                shape.choices,
                shape.free_str,
                exists,
                shape.enum_type,
                other,
                affix,
            )
            self.vars[vname] = rec
        if read:
            self._used.add(vname)
        return rec

    def leaf_var(self, path: Path, node: LeafLayout, *, read: bool = True) -> VarRecord:
        """The variable of the leaf at ``path``: its value (`leaf_variable`)."""
        try:
            shape = leaf_variable(node)
        except LeafError:
            self.fail(
                "mixed Literal",
                f"field {path_name(path)} mixes value types in its Literal; relations "
                "support Literal/Enum fields whose values are all str, all int or all bool",
            )
        return self.var(path, shape, read=read)

    def derive(self, build: Callable[[], Cond]) -> tuple[z3.BoolRef, frozenset[str]]:
        """A formula of the spec's own (not a relation), made after the relations.

        Returns it with the variables it reads, which count as read.
        """
        self._info = None
        self._used = set()
        formula = to_bool(build())
        self._read |= self._used
        return formula, frozenset(self._used)

    def read_of(self, kind: VarKind) -> list[VarRecord]:
        """The variables of ``kind`` some compiled relation reads so far, in creation order."""
        return [r for r in self.vars.values() if r.kind == kind and r.name in self._read]

    def keep_read(self) -> None:
        """Count the variables used since the last relation as read.

        Links made after all relations (`codes.text_links`) make variables of their own.
        """
        self._read |= self._used

    def forget(self, names: Iterable[str]) -> None:
        """Count variables as read by no relation (`codes.decided_by_codes` replaced them)."""
        self._read -= set(names)

    def mark_read(self, name: str) -> None:
        """Count a variable made with ``read=False`` as read by the relation being compiled."""
        self._used.add(name)

    def exists(self, path: Path) -> Cond:
        """Condition that the node at ``path`` exists (lists long enough, unions on branch)."""
        conds: list[Cond] = []
        for k, part in enumerate(path):
            if isinstance(part, int):
                conds.append(self.gt(self.len_var(path[:k]), part))
            elif is_branch_part(part):
                union = self.node_at(path[:k])
                assert isinstance(union, UnionLayout)
                index = union.branch(part)[0]
                conds.append(cast(z3.BoolRef, self.branch_var(path[:k], union) == index))
        return AND(*conds)

    def branch_var(self, path: Path, node: UnionLayout) -> z3.ArithRef:
        """The branch variable of the union at ``path``: the index of its branch."""
        rec = self.var(path, branch_variable(node), name=branch_name(path))
        return cast(z3.ArithRef, rec.term)

    def union_fields(self, path: Path) -> frozenset[str]:
        """The field names of any branch of the union at ``path``."""
        node = self.node_at(path)
        assert isinstance(node, UnionLayout)
        return frozenset(f.name for b in node.branches for f in b.fields)

    def gt(self, length: z3.ArithRef | int, i: int) -> Cond:
        """``length > i`` (cached per length term)."""
        if isinstance(length, int):
            return length > i
        key = (length.get_id(), i)
        c = self._gt_cache.get(key)
        if c is None:
            c = mk_cmp(">", length, i)
            self._gt_cache[key] = c
        return c

    def len_var(self, path: Path) -> z3.ArithRef:
        """The length variable of the list at ``path``."""
        node = self.node_at(path)
        assert isinstance(node, ListLayout)
        shape = length_variable(node.min_length, self.list_bound(path, node))
        rec = self.var(path, shape, name=length_name(path))
        return cast(z3.ArithRef, rec.term)

    def list_bound(self, path: Path, node: ListLayout) -> int:
        """The unrolling bound of the list at ``path`` (at most its ``max_length``)."""
        return min(self.list_bounds.get(path, node.max_length), node.max_length)

    def node_at(self, path: Path) -> LayoutNode:
        """The layout node at ``path``."""
        node: LayoutNode = self.layout
        for part in path:
            if isinstance(part, int):
                assert isinstance(node, ListLayout)
                node = node.item
            elif isinstance(node, UnionLayout):
                node = node.branch(part)[1]
            else:
                assert isinstance(node, ObjectLayout)
                node = node.field(part).node
        return node
