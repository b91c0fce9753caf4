"""Symbolic evaluation of relations into Z3 formulas.

A relation's AST is evaluated against the model's layout. Expressions rooted at the context
parameter (and literals, and module constants) evaluate *concretely* to Python values at
compile time; expressions rooted at ``self`` evaluate *symbolically* to Z3 terms over leaf
variables and list-length variables.

Every evaluation yields a value and a *definedness* condition ``ok``: the condition under
which evaluating the expression raises no exception (an index out of range, a dict lookup
miss, a division by zero, ``min()`` of an empty sequence). Python's short-circuiting is
respected: ``len(xs) > 0 and xs[0].a == 1`` is defined on an empty list. A relation holds
exactly when its body evaluates without exception to a truthy value, as in
`factorspec_sdk.relations.decorator.evaluate`.

Representation:

- ``int`` leaves are Z3 ``Int``; ``bool`` leaves Z3 ``Bool``.
- ``str`` leaves and ``Literal``/``Enum`` leaves with str values are Z3 ``Int`` *codes* into
  a per-spec intern table (`InternTable`) of every constant string seen; code 0 means
  "any other string".
- Lists are unrolled to their bound; element ``i`` exists iff ``i < len(path)``.
- ``Optional`` nodes get a Bool ``null(path)`` variable.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import enum
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, TypeAlias, cast

import z3
from z3 import z3core as _C

from factorspec_sdk.errors import ContextError, RelationDefinitionError
from factorspec_sdk.relations.decorator import RelationInfo, distinct
from factorspec_sdk.relations.layout import (
    INT_LIMIT,
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectLayout,
    Path,
    length_name,
    path_name,
)

__all__ = [
    "INT_LIMIT",
    "OTHER_CODE",
    "CompiledRelation",
    "InternTable",
    "RelationCompiler",
    "VarRecord",
]

OTHER_CODE = 0
"""Code of "any string not in the intern table"."""

Cond: TypeAlias = "z3.BoolRef | bool"
VarKind = Literal["int", "bool", "str", "len"]


# --------------------------------------------------------------------------- conditions


_CTX = z3.main_ctx()
_NUMS: dict[int, z3.IntNumRef] = {}
_TRUE = z3.BoolVal(True)
_FALSE = z3.BoolVal(False)


def num(v: int) -> z3.IntNumRef:
    """A cached Z3 integer numeral."""
    n = _NUMS.get(v)
    if n is None:
        n = z3.IntVal(v)
        if len(_NUMS) < 100_000:
            _NUMS[v] = n
    return n


def _arr(xs: Sequence[z3.ExprRef]) -> ctypes.Array[z3.Ast]:
    arr: ctypes.Array[z3.Ast] = (z3.Ast * len(xs))()
    for i, x in enumerate(xs):
        arr[i] = x.as_ast()
    return arr


def _bool(a: z3.Ast) -> z3.BoolRef:
    return z3.BoolRef(a, _CTX)


def _term(x: z3.ExprRef | int) -> z3.ExprRef:
    return num(x) if isinstance(x, int) else x


def mk_eq(a: z3.ExprRef | int, b: z3.ExprRef | int) -> z3.BoolRef:
    """``a == b`` built directly through the C API (fast)."""
    return _bool(_C.Z3_mk_eq(_CTX.ref(), _term(a).as_ast(), _term(b).as_ast()))


def mk_cmp(op: str, a: z3.ExprRef | int, b: z3.ExprRef | int) -> z3.BoolRef:
    """``a op b`` for op in <, <=, >, >= (fast)."""
    fn = {"<": _C.Z3_mk_lt, "<=": _C.Z3_mk_le, ">": _C.Z3_mk_gt, ">=": _C.Z3_mk_ge}[op]
    return _bool(fn(_CTX.ref(), _term(a).as_ast(), _term(b).as_ast()))


def AND(*cs: Cond) -> Cond:
    """Conjunction that folds Python booleans."""
    out: list[z3.BoolRef] = []
    for c in cs:
        if c is True:
            continue
        if c is False:
            return False
        out.append(cast(z3.BoolRef, c))
    if not out:
        return True
    if len(out) == 1:
        return out[0]
    return _bool(_C.Z3_mk_and(_CTX.ref(), len(out), _arr(out)))


def OR(*cs: Cond) -> Cond:
    """Disjunction that folds Python booleans."""
    out: list[z3.BoolRef] = []
    for c in cs:
        if c is False:
            continue
        if c is True:
            return True
        out.append(cast(z3.BoolRef, c))
    if not out:
        return False
    if len(out) == 1:
        return out[0]
    return _bool(_C.Z3_mk_or(_CTX.ref(), len(out), _arr(out)))


def NOT(c: Cond) -> Cond:
    """Negation that folds Python booleans."""
    if c is True:
        return False
    if c is False:
        return True
    return _bool(_C.Z3_mk_not(_CTX.ref(), c.as_ast()))


def IMPLIES(a: Cond, b: Cond) -> Cond:
    """Implication that folds Python booleans."""
    if a is False or b is True:
        return True
    if a is True:
        return b
    if b is False:
        return NOT(a)
    return _bool(_C.Z3_mk_implies(_CTX.ref(), a.as_ast(), b.as_ast()))


def to_bool(c: Cond) -> z3.BoolRef:
    """A Z3 Bool term for a condition."""
    if isinstance(c, bool):
        return _TRUE if c else _FALSE
    return c


def mk_ite(c: Cond, a: z3.ExprRef | int, b: z3.ExprRef | int) -> z3.ExprRef:
    """``If(c, a, b)`` (fast)."""
    r = _C.Z3_mk_ite(_CTX.ref(), to_bool(c).as_ast(), _term(a).as_ast(), _term(b).as_ast())
    return z3.z3._to_expr_ref(r, _CTX)


def _cmp_eq(a: z3.ExprRef | int, b: z3.ExprRef | int) -> Cond:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return mk_eq(a, b)


def _cmp_lt(a: z3.ExprRef | int, b: z3.ExprRef | int) -> Cond:
    if isinstance(a, int) and isinstance(b, int):
        return a < b
    return mk_cmp("<", a, b)


def _cmp_ge0(a: z3.ExprRef | int) -> Cond:
    if isinstance(a, int):
        return a >= 0
    return mk_cmp(">=", a, 0)


def ITE_COND(c: Cond, a: Cond, b: Cond) -> Cond:
    """If-then-else on conditions."""
    if c is True:
        return a
    if c is False:
        return b
    if a is b:
        return a
    if a is True:
        return OR(c, b)
    if a is False:
        return AND(NOT(c), b)
    if b is True:
        return OR(NOT(c), a)
    if b is False:
        return AND(c, a)
    return cast(z3.BoolRef, mk_ite(c, a, b))


# --------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True, eq=False)
class SCode:
    """A symbolic str or Enum value: ``e`` is an intern code (str values) or the int value."""

    e: z3.ArithRef
    enum_type: type[enum.Enum] | None
    strs: bool


@dataclass(frozen=True, slots=True, eq=False)
class SObj:
    """A (possibly absent) nested model at a concrete path."""

    path: Path
    layout: ObjectLayout


@dataclass(slots=True, eq=False)
class Item:
    """One element of a symbolic sequence.

    Attributes:
        present: the element exists (and passed the filters).
        value: the element.
        err: producing the element raises (only for lazy sequences).
    """

    present: Cond
    value: V
    err: Cond = False


@dataclass(slots=True, eq=False)
class SSeq:
    """A symbolic sequence of bounded size.

    Attributes:
        items: candidate elements, in order.
        length: number of present elements.
        contiguous: ``items[i].present`` iff ``i < length`` (a prefix).
        lazy: a generator (errors happen only when the consumer reaches an item).
    """

    items: list[Item]
    length: z3.ArithRef | int
    contiguous: bool
    lazy: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class SMaybe:
    """A nullable node: ``null`` is its None-ness; ``inner()`` its value when not None."""

    null: Cond
    inner: Callable[[], V]


@dataclass(frozen=True, slots=True, eq=False)
class SChoice:
    """``alts[0].value if alts[0].cond else alts[1].value if ... else alts[-1].value``."""

    alts: tuple[tuple[Cond, V], ...]


@dataclass(frozen=True, slots=True, eq=False)
class SFunc:
    """A supported builtin (``len``, ``all``, ``distinct``...) or a method of a constant."""

    name: str
    bound: object = None


V: TypeAlias = object
"""A value: a concrete Python object, a Z3 Bool/Int term, or one of the S* classes."""


def is_sym(v: V) -> bool:
    """Whether a value is symbolic (depends on the record)."""
    if isinstance(v, (z3.ExprRef, SCode, SObj, SSeq, SMaybe, SChoice)):
        return True
    if isinstance(v, tuple):
        return any(is_sym(x) for x in v)
    return False


@dataclass(frozen=True, slots=True)
class R:
    """An evaluation result: ``value`` and the condition ``ok`` that no exception occurs."""

    value: V
    ok: Cond = True


class _Undefined:
    def __repr__(self) -> str:
        return "<undefined>"


UNDEF: V = _Undefined()


# --------------------------------------------------------------------------- records


class InternTable:
    """Codes of constant strings (code 0 is reserved for "any other string")."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.strings: list[str] = ["<other>"]

    def code(self, s: str) -> int:
        """The code of ``s`` (interning it)."""
        c = self.codes.get(s)
        if c is None:
            c = len(self.strings)
            self.codes[s] = c
            self.strings.append(s)
        return c

    def __len__(self) -> int:
        return len(self.strings)


@dataclass(slots=True)
class VarRecord:
    """A Z3 variable of the spec.

    Attributes:
        name: variable name (``stays[2].city``, ``len(stays)``, ``null(note)``).
        path: the layout path of the leaf or list.
        kind: ``int`` / ``bool`` / ``str`` / ``len``.
        term: the Z3 term.
        ge: inclusive lower bound (ints and lengths).
        le: inclusive upper bound.
        choices: the finite domain of an enum leaf (Python values), if any.
        free_str: a free ``str`` leaf (its domain is the intern table).
        exists: condition under which the node exists in the record (enclosing list
            lengths and non-null parents).
        enum_type: the Enum class of an Enum leaf.
    """

    name: str
    path: Path
    kind: VarKind
    term: z3.ExprRef
    ge: int | None = None
    le: int | None = None
    choices: tuple[object, ...] | None = None
    free_str: bool = False
    exists: Cond = True
    enum_type: type[enum.Enum] | None = None


@dataclass(frozen=True, slots=True)
class CompiledRelation:
    """A relation lowered to Z3: ``formula`` holds iff the relation holds."""

    info: RelationInfo
    formula: z3.BoolRef
    variables: frozenset[str]


# --------------------------------------------------------------------------- compiler


_BUILTIN_FUNCS: dict[int, str] = {
    id(builtins.all): "all",
    id(builtins.any): "any",
    id(builtins.sum): "sum",
    id(builtins.len): "len",
    id(builtins.min): "min",
    id(builtins.max): "max",
    id(builtins.zip): "zip",
    id(builtins.enumerate): "enumerate",
    id(builtins.range): "range",
    id(builtins.abs): "abs",
    id(builtins.bool): "bool",
    id(builtins.list): "list",
    id(builtins.tuple): "tuple",
    id(distinct): "distinct",
}

_CONST_METHODS = frozenset({"get", "keys", "values", "items", "count", "index"})

_CMP: dict[type[ast.cmpop], Callable[[Any, Any], object]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}

_CMP_SYM: dict[type[ast.cmpop], str] = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}

_ARITH: dict[type[ast.operator], Callable[[object, object], object]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


class _Scope:
    """Local names of one evaluation (let-bindings and comprehension targets)."""

    def __init__(self, names: dict[str, V], parent: _Scope | None = None) -> None:
        self.names = names
        self.parent = parent

    def lookup(self, name: str) -> tuple[bool, V]:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.names:
                return True, scope.names[name]
            scope = scope.parent
        return False, None

    def child(self, names: dict[str, V]) -> _Scope:
        return _Scope(names, self)


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
        self._seqs: dict[Path, SSeq] = {}
        self._gt_cache: dict[tuple[int, int], z3.BoolRef] = {}
        self._used: set[str] = set()
        self._info: RelationInfo | None = None
        self._node: ast.AST | None = None

    # ------------------------------------------------------------------ entry point

    def compile(self, info: RelationInfo, root: Path = ()) -> CompiledRelation:
        """Lower one relation of the model at ``root`` (``()``: the top model).

        A relation of a nested model holds vacuously when that object is absent (a list item
        beyond the length, or a null Optional). Raises `RelationDefinitionError` /
        `ContextError`.
        """
        self._info = info
        self._used = set()
        self._seqs = {}
        if info.takes_context and self.context is None:
            raise ContextError(
                f"relation {info.qualname!r} reads a context ({info.context_param}): "
                "pass context=... to compile the spec"
            )
        names: dict[str, V] = {}
        args = info.tree.args
        params = [a.arg for a in args.posonlyargs + args.args]
        node = self._node_at(root)
        assert isinstance(node, ObjectLayout)
        names[params[0]] = SObj(root, node)
        if info.takes_context and len(params) > 1:
            names[params[1]] = self.context
        body = list(info.tree.body)
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:]
        res = self._block(body, _Scope(names))
        formula = AND(res.ok, self.truthy(res.value))
        if root:
            guards: list[Cond] = [self._exists(root)]
            for k in range(1, len(root) + 1):
                sub = root[:k]
                if not isinstance(sub[-1], int) and self._node_at(sub).nullable:
                    null = self._var(sub, "bool", name=f"null({path_name(sub)})")
                    guards.append(NOT(cast(z3.BoolRef, null.term)))
            formula = IMPLIES(AND(*guards), formula)
        return CompiledRelation(info, to_bool(formula), frozenset(self._used))

    # ------------------------------------------------------------------ errors

    def _fail(self, construct: str, message: str, node: ast.AST | None = None) -> NoReturn:
        info = self._info
        where = node or self._node
        lineno = getattr(where, "lineno", info.lineno if info else 0)
        raise RelationDefinitionError(
            message,
            relation=info.qualname if info else "?",
            filename=info.filename if info else "?",
            lineno=lineno,
            construct=construct,
        )

    # ------------------------------------------------------------------ variables

    def _var(
        self,
        path: Path,
        kind: VarKind,
        *,
        name: str | None = None,
        ge: int | None = None,
        le: int | None = None,
        choices: tuple[object, ...] | None = None,
        free_str: bool = False,
        enum_type: type[enum.Enum] | None = None,
    ) -> VarRecord:
        vname = name or path_name(path)
        rec = self.vars.get(vname)
        if rec is None:
            term: z3.ExprRef = z3.Bool(vname) if kind == "bool" else z3.Int(vname)
            exists = self._exists(path)
            rec = VarRecord(vname, path, kind, term, ge, le, choices, free_str, exists, enum_type)
            self.vars[vname] = rec
        self._used.add(vname)
        return rec

    def _exists(self, path: Path) -> Cond:
        """Condition that the node at ``path`` exists (enclosing lists long enough)."""
        conds: list[Cond] = []
        for k, part in enumerate(path):
            if isinstance(part, int):
                conds.append(self._gt(self._len_var(path[:k]), part))
        return AND(*conds)

    def _gt(self, length: z3.ArithRef | int, i: int) -> Cond:
        if isinstance(length, int):
            return length > i
        key = (length.get_id(), i)
        c = self._gt_cache.get(key)
        if c is None:
            c = mk_cmp(">", length, i)
            self._gt_cache[key] = c
        return c

    def _len_var(self, path: Path) -> z3.ArithRef:
        node = self._node_at(path)
        assert isinstance(node, ListLayout)
        bound = self.list_bounds.get(path, node.max_length)
        rec = self._var(
            path,
            "len",
            name=length_name(path),
            ge=node.min_length,
            le=min(bound, node.max_length),
        )
        return cast(z3.ArithRef, rec.term)

    def _node_at(self, path: Path) -> LayoutNode:
        node: LayoutNode = self.layout
        for part in path:
            if isinstance(part, int):
                assert isinstance(node, ListLayout)
                node = node.item
            else:
                assert isinstance(node, ObjectLayout)
                node = node.field(part).node
        return node

    def _node_value(self, path: Path, node: LayoutNode, check_null: bool = True) -> V:
        if check_null and node.nullable:
            null = self._var(path, "bool", name=f"null({path_name(path)})")
            return SMaybe(cast(z3.BoolRef, null.term), lambda: self._node_value(path, node, False))
        if isinstance(node, ObjectLayout):
            return SObj(path, node)
        if isinstance(node, ListLayout):
            return self._base_seq(path, node)
        return self._leaf(path, node)

    def _leaf(self, path: Path, node: LeafLayout) -> V:
        if node.kind == "bool":
            return self._var(path, "bool").term
        if node.kind == "int":
            ge = node.ge if node.ge is not None else -INT_LIMIT
            le = node.le if node.le is not None else INT_LIMIT
            return self._var(path, "int", ge=ge, le=le).term
        if node.kind == "str":
            rec = self._var(path, "str", free_str=True)
            return SCode(cast(z3.ArithRef, rec.term), None, True)
        choices = node.choices
        if all(isinstance(c, bool) for c in choices):
            return self._var(path, "bool", choices=choices).term
        if all(isinstance(c, str) for c in choices):
            for c in choices:
                self.strings.code(cast(str, c))
            rec = self._var(path, "str", choices=choices, enum_type=node.enum_type)
            return SCode(cast(z3.ArithRef, rec.term), node.enum_type, True)
        if all(isinstance(c, int) and not isinstance(c, bool) for c in choices):
            ints = [cast(int, c) for c in choices]
            rec = self._var(
                path,
                "int",
                choices=choices,
                ge=min(ints),
                le=max(ints),
                enum_type=node.enum_type,
            )
            if node.enum_type is not None:
                return SCode(cast(z3.ArithRef, rec.term), node.enum_type, False)
            return rec.term
        self._fail(
            "mixed Literal",
            f"field {path_name(path)} mixes value types in its Literal; relations "
            "support Literal/Enum fields whose values are all str, all int or all bool",
        )

    def _base_seq(self, path: Path, node: ListLayout) -> SSeq:
        length = self._len_var(path)
        seq = self._seqs.get(path)
        if seq is not None:
            return seq
        bound = min(self.list_bounds.get(path, node.max_length), node.max_length)
        items = [
            Item(self._gt(length, i), self._node_value((*path, i), node.item)) for i in range(bound)
        ]
        seq = SSeq(items, length, True)
        self._seqs[path] = seq
        return seq

    # ------------------------------------------------------------------ statements

    def _block(self, stmts: Sequence[ast.stmt], scope: _Scope) -> R:
        if not stmts:
            return R(None)
        st = stmts[0]
        self._node = st
        if isinstance(st, ast.Return):
            if st.value is None:
                return R(None)
            return self.eval(st.value, scope)
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            value_node = st.value
            if value_node is None:
                return self._block(stmts[1:], scope)
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            r = self.eval(value_node, scope)
            names: dict[str, V] = {}
            for t in targets:
                self._bind(t, r.value, names)
            rest = self._block(stmts[1:], scope.child(names))
            return R(rest.value, AND(r.ok, rest.ok))
        if isinstance(st, ast.If):
            c = self.eval(st.test, scope)
            tc = self.truthy(c.value)
            then = self._block([*st.body, *stmts[1:]], scope) if tc is not False else None
            other = self._block([*st.orelse, *stmts[1:]], scope) if tc is not True else None
            if then is None:
                assert other is not None
                return R(other.value, AND(c.ok, other.ok))
            if other is None:
                return R(then.value, AND(c.ok, then.ok))
            return R(
                self.ite(tc, then.value, other.value), AND(c.ok, ITE_COND(tc, then.ok, other.ok))
            )
        if isinstance(st, ast.Pass):
            return self._block(stmts[1:], scope)
        self._fail(type(st).__name__, "statement outside the supported subset", st)

    def _bind(self, target: ast.expr, value: V, names: dict[str, V]) -> None:
        if isinstance(target, ast.Name):
            names[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            parts = self._unpack(value, len(target.elts), target)
            for t, v in zip(target.elts, parts, strict=True):
                self._bind(t, v, names)
            return
        self._fail("assignment", "only names (and tuples of names) can be bound", target)

    def _unpack(self, value: V, n: int, node: ast.AST) -> list[V]:
        if isinstance(value, tuple):
            if len(value) != n:
                self._fail("unpacking", f"cannot unpack {len(value)} values into {n}", node)
            return list(value)
        if not is_sym(value):
            try:
                parts = list(cast(Iterable[object], value))
            except TypeError:
                self._fail("unpacking", f"cannot unpack {type(value).__name__}", node)
            if len(parts) != n:
                self._fail("unpacking", f"cannot unpack {len(parts)} values into {n}", node)
            return parts
        if isinstance(value, SChoice):
            alts = [(c, self._unpack(v, n, node)) for c, v in value.alts]
            return [self._choice([(c, parts[k]) for c, parts in alts]) for k in range(n)]
        self._fail("unpacking", "cannot unpack a value read from the record", node)

    # ------------------------------------------------------------------ expressions

    def eval(self, node: ast.expr, scope: _Scope) -> R:
        """Evaluate an expression to a value and its definedness condition."""
        self._node = node
        method = getattr(self, "_e_" + type(node).__name__, None)
        if method is None:
            self._fail(type(node).__name__, "expression outside the supported subset", node)
        res: R = method(node, scope)
        return res

    def _e_Constant(self, node: ast.Constant, scope: _Scope) -> R:
        return R(node.value)

    def _e_Name(self, node: ast.Name, scope: _Scope) -> R:
        found, value = scope.lookup(node.id)
        if found:
            return R(value)
        info = self._info
        assert info is not None
        func = info.func
        code = getattr(func, "__code__", None)
        closure = getattr(func, "__closure__", None)
        if code is not None and closure and node.id in code.co_freevars:
            cell = closure[code.co_freevars.index(node.id)]
            try:
                return R(self._wrap_const(cell.cell_contents))
            except ValueError:
                pass
        globs = getattr(func, "__globals__", {})
        if node.id in globs:
            return R(self._wrap_const(globs[node.id]))
        if hasattr(builtins, node.id):
            return R(self._wrap_const(getattr(builtins, node.id)))
        self._fail("unknown name", f"name {node.id!r} is not defined", node)

    def _wrap_const(self, value: object) -> V:
        name = _BUILTIN_FUNCS.get(id(value))
        if name is not None:
            return SFunc(name)
        if callable(value) and not isinstance(value, type):
            self._fail(
                f"call to {getattr(value, '__name__', '?')}()",
                "relations may call only the supported builtins and distinct()",
            )
        return value

    def _e_Tuple(self, node: ast.Tuple, scope: _Scope) -> R:
        vals: list[V] = []
        oks: list[Cond] = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                self._fail("starred expression", "*args are not supported", e)
            r = self.eval(e, scope)
            vals.append(r.value)
            oks.append(r.ok)
        return R(tuple(vals), AND(*oks))

    def _e_List(self, node: ast.List, scope: _Scope) -> R:
        r = self._e_Tuple(ast.Tuple(elts=node.elts, ctx=ast.Load()), scope)
        vals = cast(tuple[V, ...], r.value)
        if not is_sym(vals):
            return R(list(vals), r.ok)
        return R(SSeq([Item(True, v) for v in vals], len(vals), True), r.ok)

    def _e_Set(self, node: ast.Set, scope: _Scope) -> R:
        r = self._e_Tuple(ast.Tuple(elts=node.elts, ctx=ast.Load()), scope)
        vals = cast(tuple[V, ...], r.value)
        if not is_sym(vals):
            try:
                return R(set(vals), r.ok)
            except TypeError:
                return R(UNDEF, False)
        self._fail("set of record values", "set displays must hold constants", node)

    def _e_Dict(self, node: ast.Dict, scope: _Scope) -> R:
        out: dict[object, object] = {}
        oks: list[Cond] = []
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                self._fail("dict unpacking", "** in dict displays is not supported", node)
            rk, rv = self.eval(k, scope), self.eval(v, scope)
            if is_sym(rk.value) or is_sym(rv.value):
                self._fail("dict of record values", "dict displays must hold constants", node)
            oks += [rk.ok, rv.ok]
            try:
                out[rk.value] = rv.value
            except TypeError:
                return R(UNDEF, False)
        return R(out, AND(*oks))

    # -- attribute access

    def _e_Attribute(self, node: ast.Attribute, scope: _Scope) -> R:
        base = self.eval(node.value, scope)
        r = self.attr(base.value, node.attr, node)
        return R(r.value, AND(base.ok, r.ok))

    def attr(self, v: V, name: str, node: ast.AST) -> R:
        """``v.name``."""
        if isinstance(v, SObj):
            try:
                f = v.layout.field(name)
            except KeyError:
                self._fail(
                    "attribute that is not a field",
                    f"{v.layout.model.__name__}.{name} is not a field (methods and "
                    "properties of the model cannot be compiled)",
                    node,
                )
            return R(self._node_value((*v.path, name), f.node))
        if isinstance(v, SMaybe):
            inner = self.attr(v.inner(), name, node)
            return R(inner.value, AND(NOT(v.null), inner.ok))
        if isinstance(v, SChoice):
            return self._map_choice(v, lambda x: self.attr(x, name, node))
        if isinstance(v, SCode):
            if name == "value" and v.enum_type is not None:
                return R(SCode(v.e, None, v.strs))
            self._fail("attribute of a value", f"attribute .{name} of a field value", node)
        if isinstance(v, SFunc):
            self._fail("attribute access on a function", f"{v.name}.{name}", node)
        if is_sym(v):
            self._fail("attribute of a value", f"attribute .{name} of a field value", node)
        if v is UNDEF:
            return R(UNDEF, False)
        try:
            out = getattr(v, name)
        except AttributeError as exc:
            raise ContextError(
                f"{self._where(node)}: {type(v).__name__} has no attribute {name!r} "
                "(does the context have the fields the relation reads?)"
            ) from exc
        if callable(out) and not isinstance(out, type) and not isinstance(v, type):
            if name not in _CONST_METHODS:
                self._fail(
                    f"call to {name}()", "method calls other than get/keys/values/items", node
                )
            return R(SFunc(name, v))
        return R(out)

    def _where(self, node: ast.AST) -> str:
        info = self._info
        assert info is not None
        return f"{info.filename}:{getattr(node, 'lineno', info.lineno)}: relation {info.qualname!r}"

    # -- choices (If-chains over alternatives)

    def _choice(self, alts: Sequence[tuple[Cond, V]]) -> V:
        live = [(c, v) for c, v in alts if c is not False]
        if not live:
            return UNDEF
        for k, (c, _) in enumerate(live):
            if c is True:
                live = live[: k + 1]
                break
        if len(live) > 2 and any(isinstance(v, (SObj, SChoice)) for _, v in live):
            flat: list[tuple[Cond, V]] = []
            for c, v in live[:-1]:
                flat.append((c, v))
            flat.append((True, live[-1][1]))
            return SChoice(tuple(flat))
        out: V = live[-1][1]
        for c, v in reversed(live[:-1]):
            if c is True:
                out = v
            else:
                out = self.ite(c, v, out)
        return out

    def _map_choice(self, v: SChoice, f: Callable[[V], R]) -> R:
        results = [(c, f(x)) for c, x in v.alts]
        value = self._choice([(c, r.value) for c, r in results])
        ok: Cond = results[-1][1].ok
        for c, r in reversed(results[:-1]):
            ok = ITE_COND(c, r.ok, ok)
        return R(value, ok)

    def ite(self, c: Cond, a: V, b: V) -> V:
        """``a if c else b`` on values (merging symbolic structure)."""
        if c is True:
            return a
        if c is False:
            return b
        if a is b:
            return a
        if a is UNDEF:
            return b
        if b is UNDEF:
            return a
        if not is_sym(a) and not is_sym(b):
            if type(a) is type(b) and a == b:
                return a
        if isinstance(a, SChoice) or isinstance(b, SChoice):
            return SChoice(((c, a), (True, b)))
        if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
            return tuple(self.ite(c, x, y) for x, y in zip(a, b, strict=True))
        if isinstance(a, SMaybe) or isinstance(b, SMaybe) or a is None or b is None:
            na, ia = self._maybe_parts(a)
            nb, ib = self._maybe_parts(b)
            return SMaybe(ITE_COND(c, na, nb), lambda: self.ite(c, ia(), ib()))
        if isinstance(a, SSeq) and isinstance(b, SSeq):
            return self._ite_seq(c, a, b)
        if isinstance(a, (SObj, SSeq)) or isinstance(b, (SObj, SSeq)):
            return SChoice(((c, a), (True, b)))
        if isinstance(a, SCode) or isinstance(b, SCode):
            ea, eb = self._code_of(a), self._code_of(b)
            if ea is not None and eb is not None:
                ta = a.enum_type if isinstance(a, SCode) else None
                tb = b.enum_type if isinstance(b, SCode) else None
                strs = a.strs if isinstance(a, SCode) else cast(SCode, b).strs
                return SCode(cast(z3.ArithRef, mk_ite(c, ea, eb)), ta if ta is tb else None, strs)
            return SChoice(((c, a), (True, b)))
        ba, bb = self._as_bool_term(a), self._as_bool_term(b)
        if ba is not None and bb is not None:
            return mk_ite(c, ba, bb)
        ia2, ib2 = self._as_int_term(a), self._as_int_term(b)
        if ia2 is not None and ib2 is not None:
            return mk_ite(c, ia2, ib2)
        return SChoice(((c, a), (True, b)))

    def _maybe_parts(self, v: V) -> tuple[Cond, Callable[[], V]]:
        if isinstance(v, SMaybe):
            return v.null, v.inner
        if v is None:
            return True, lambda: UNDEF
        return False, lambda: v

    def _ite_seq(self, c: Cond, a: SSeq, b: SSeq) -> SSeq:
        n = max(len(a.items), len(b.items))
        items: list[Item] = []
        for i in range(n):
            ia = a.items[i] if i < len(a.items) else Item(False, UNDEF)
            ib = b.items[i] if i < len(b.items) else Item(False, UNDEF)
            items.append(
                Item(
                    ITE_COND(c, ia.present, ib.present),
                    self.ite(c, ia.value, ib.value),
                    ITE_COND(c, ia.err, ib.err),
                )
            )
        length = self.ite(c, a.length, b.length)
        return SSeq(
            items, cast(z3.ArithRef, length), a.contiguous and b.contiguous, a.lazy or b.lazy
        )

    def _code_of(self, v: V) -> z3.ArithRef | int | None:
        if isinstance(v, SCode):
            return v.e
        if isinstance(v, str):
            return self.strings.code(v)
        if isinstance(v, enum.Enum) and isinstance(v.value, str):
            return self.strings.code(v.value)
        return None

    @staticmethod
    def _as_bool_term(v: V) -> z3.BoolRef | None:
        if isinstance(v, bool):
            return z3.BoolVal(v)
        if isinstance(v, z3.BoolRef):
            return v
        return None

    @staticmethod
    def _as_int_term(v: V) -> z3.ArithRef | int | None:
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, int):
            return v
        if isinstance(v, z3.BoolRef):
            return cast(z3.ArithRef, z3.If(v, 1, 0))
        if isinstance(v, z3.ArithRef):
            return v
        return None

    # -- truthiness

    def truthy(self, v: V) -> Cond:
        """``bool(v)`` as a condition (a value that raises has been excluded by ``ok``)."""
        if isinstance(v, z3.BoolRef):
            return v
        if isinstance(v, z3.ArithRef):
            return v != 0
        if isinstance(v, SCode):
            if v.enum_type is not None:
                return True
            return v.e != self.strings.code("")
        if isinstance(v, SSeq):
            if v.lazy:
                return True
            return self._gt(v.length, 0)
        if isinstance(v, SObj):
            return True
        if isinstance(v, SMaybe):
            return AND(NOT(v.null), self.truthy(v.inner()))
        if isinstance(v, SChoice):
            return self._choice_cond([(c, self.truthy(x)) for c, x in v.alts])
        if isinstance(v, SFunc):
            return True
        if v is UNDEF:
            return False
        if isinstance(v, tuple):
            return len(v) > 0
        try:
            return bool(v)
        except Exception:
            return False

    def _choice_cond(self, alts: Sequence[tuple[Cond, Cond]]) -> Cond:
        out: Cond = alts[-1][1]
        for c, x in reversed(alts[:-1]):
            out = ITE_COND(c, x, out)
        return out

    # -- boolean operators

    def _e_BoolOp(self, node: ast.BoolOp, scope: _Scope) -> R:
        is_and = isinstance(node.op, ast.And)
        results: list[R] = []
        for operand in node.values:
            r = self.eval(operand, scope)
            results.append(r)
            t = self.truthy(r.value)
            if (is_and and t is False) or (not is_and and t is True):
                break  # concretely short-circuited: the rest is never evaluated
        # ok: each operand's ok, required only when the previous ones did not short-circuit.
        ok: Cond = results[-1].ok
        for r in reversed(results[:-1]):
            t = self.truthy(r.value)
            go_on = t if is_and else NOT(t)
            ok = AND(r.ok, IMPLIES(go_on, ok))
        if all(isinstance(r.value, (bool, z3.BoolRef)) for r in results):
            conds = [cast(Cond, r.value) for r in results]
            return R(AND(*conds) if is_and else OR(*conds), ok)
        value: V = results[-1].value
        for r in reversed(results[:-1]):
            t = self.truthy(r.value)
            value = self.ite(t, value, r.value) if is_and else self.ite(t, r.value, value)
        return R(value, ok)

    def _e_UnaryOp(self, node: ast.UnaryOp, scope: _Scope) -> R:
        r = self.eval(node.operand, scope)
        v = r.value
        if isinstance(node.op, ast.Not):
            return R(NOT(self.truthy(v)), r.ok)
        if isinstance(node.op, ast.Invert):
            self._fail("bitwise operator", "~ is not supported", node)
        v, ok2 = self._unwrap(v)
        if not is_sym(v):
            try:
                out = -cast(int, v) if isinstance(node.op, ast.USub) else +cast(int, v)
            except Exception:
                return R(UNDEF, False)
            return R(out, AND(r.ok, ok2))
        t = self._as_int_term(v)
        if t is None:
            return R(UNDEF, False)
        return R(-t if isinstance(node.op, ast.USub) else t, AND(r.ok, ok2))

    def _unwrap(self, v: V) -> tuple[V, Cond]:
        """Strip an SMaybe (using None raises a TypeError: ok requires not-null)."""
        if isinstance(v, SMaybe):
            return v.inner(), NOT(v.null)
        return v, True

    # -- arithmetic

    def _e_BinOp(self, node: ast.BinOp, scope: _Scope) -> R:
        op = type(node.op)
        if op not in _ARITH:
            names = {
                ast.Div: ("true division (/)", "use // on ints (floats are not supported)"),
                ast.MatMult: ("@ operator", "matrix product is not supported"),
            }
            construct, msg = names.get(op, ("bitwise operator", "bitwise operators"))
            self._fail(construct, msg + " is not supported", node)
        a, b = self.eval(node.left, scope), self.eval(node.right, scope)
        r = self.arith(op, a.value, b.value, node)
        return R(r.value, AND(a.ok, b.ok, r.ok))

    def arith(self, op: type[ast.operator], a: V, b: V, node: ast.AST) -> R:
        """An arithmetic operation with Python semantics."""
        if isinstance(a, SChoice):
            return self._map_choice(a, lambda x: self.arith(op, x, b, node))
        if isinstance(b, SChoice):
            return self._map_choice(b, lambda y: self.arith(op, a, y, node))
        a, oka = self._unwrap(a)
        b, okb = self._unwrap(b)
        if not is_sym(a) and not is_sym(b):
            try:
                return R(_ARITH[op](a, b), AND(oka, okb))
            except Exception:
                return R(UNDEF, False)
        if isinstance(a, (tuple, SSeq)) or isinstance(b, (tuple, SSeq)):
            self._fail("sequence arithmetic", "+/* on lists or tuples is not supported", node)
        x, y = self._as_int_term(a), self._as_int_term(b)
        if x is None or y is None:
            if isinstance(a, SCode) or isinstance(b, SCode):
                self._fail("string arithmetic", "arithmetic on str/Enum values", node)
            return R(UNDEF, False)
        ok = AND(oka, okb)
        if op is ast.Add:
            return R(x + y, ok)
        if op is ast.Sub:
            return R(x - y, ok)
        if op is ast.Mult:
            return R(x * y, ok)
        if op is ast.Pow:
            if not isinstance(y, int) or y < 0 or y > 8:
                self._fail(
                    "power with a non-constant exponent",
                    "** needs a constant exponent between 0 and 8",
                    node,
                )
            out: z3.ArithRef | int = 1
            for _ in range(y):
                out = out * x
            return R(out, ok)
        # floor division and modulo with Python's (floor) semantics
        if isinstance(y, int):
            if y == 0:
                return R(UNDEF, False)
            xx = cast(z3.ArithRef, x)
            if y > 0:
                q = xx / y
            else:
                q = (-xx) / (-y)
            if op is ast.FloorDiv:
                return R(q, ok)
            return R(xx - y * q, ok)
        yy = cast(z3.ArithRef, y)
        q2 = z3.If(yy > 0, x / yy, (-x) / (-yy))
        if op is ast.FloorDiv:
            return R(q2, AND(ok, yy != 0))
        return R(x - yy * q2, AND(ok, yy != 0))

    # -- comparisons

    def _e_Compare(self, node: ast.Compare, scope: _Scope) -> R:
        left = self.eval(node.left, scope)
        conds: list[Cond] = []
        oks: list[Cond] = [left.ok]
        cur = left.value
        ok_chain: list[tuple[Cond, Cond]] = []  # (cond so far, ok of next operand)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = self.eval(comp, scope)
            c, cok = self.compare(op, cur, right.value, node)
            ok_chain.append((AND(*conds), AND(right.ok, cok)))
            conds.append(c)
            cur = right.value
            if c is False:
                break
        del oks
        ok: Cond = left.ok
        for before, step_ok in ok_chain:
            ok = AND(ok, IMPLIES(before, step_ok))
        return R(AND(*conds), ok)

    def compare(self, op: ast.cmpop, a: V, b: V, node: ast.AST) -> tuple[Cond, Cond]:
        """One comparison: (result, ok)."""
        if isinstance(op, (ast.Is, ast.IsNot)):
            if b is None:
                c = self._is_none(a)
            elif a is None:
                c = self._is_none(b)
            elif not is_sym(a) and not is_sym(b):
                c = a is b
            else:
                self._fail(
                    "`is` comparison with a non-None value", "use == (is only with None)", node
                )
            return (c if isinstance(op, ast.Is) else NOT(c)), True
        if isinstance(op, (ast.In, ast.NotIn)):
            c2, ok = self.contains(b, a, node)
            return (c2 if isinstance(op, ast.In) else NOT(c2)), ok
        if isinstance(op, (ast.Eq, ast.NotEq)):
            e = self.eq(a, b, node)
            return (e if isinstance(op, ast.Eq) else NOT(e)), True
        return self.order(op, a, b, node)

    def _is_none(self, v: V) -> Cond:
        if isinstance(v, SMaybe):
            return v.null
        if isinstance(v, SChoice):
            return self._choice_cond([(c, self._is_none(x)) for c, x in v.alts])
        return v is None

    def eq(self, a: V, b: V, node: ast.AST) -> Cond:
        """``a == b`` with Python semantics (never raises)."""
        if isinstance(a, SChoice):
            return self._choice_cond([(c, self.eq(x, b, node)) for c, x in a.alts])
        if isinstance(b, SChoice):
            return self._choice_cond([(c, self.eq(a, y, node)) for c, y in b.alts])
        if isinstance(a, SMaybe) or isinstance(b, SMaybe):
            na, ia = self._maybe_parts(a)
            nb, ib = self._maybe_parts(b)
            both_null = AND(na, nb)
            if na is True or nb is True:
                return both_null
            return OR(both_null, AND(NOT(na), NOT(nb), self.eq(ia(), ib(), node)))
        if not is_sym(a) and not is_sym(b):
            try:
                return bool(a == b)
            except Exception:
                return False
        if isinstance(a, tuple) or isinstance(b, tuple):
            if not (isinstance(a, tuple) and isinstance(b, tuple)):
                if isinstance(a, SSeq) or isinstance(b, SSeq):
                    return False
                if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
                    return False
                return False
            if len(a) != len(b):
                return False
            return AND(*(self.eq(x, y, node) for x, y in zip(a, b, strict=True)))
        if isinstance(a, (SObj, SSeq)) or isinstance(b, (SObj, SSeq)):
            self._fail(
                "comparison of models or lists",
                "== on nested models or lists is not supported; compare their fields",
                node,
            )
        if isinstance(b, SCode) and not isinstance(a, SCode):
            a, b = b, a
        if isinstance(a, SCode):
            return self._eq_code(a, b)
        if a is None or b is None or a is UNDEF or b is UNDEF:
            return False
        if isinstance(a, (z3.BoolRef, bool)) and isinstance(b, (z3.BoolRef, bool)):
            return (
                mk_eq(a, to_bool(b))
                if not isinstance(a, bool)
                else (mk_eq(to_bool(a), b) if not isinstance(b, bool) else a == b)
            )
        x, y = self._as_int_term(a), self._as_int_term(b)
        if x is not None and y is not None:
            if isinstance(x, int) and isinstance(y, int):
                return x == y
            return mk_eq(x, y)
        return False  # e.g. an int field compared with a str

    def _eq_code(self, a: SCode, b: V) -> Cond:
        if isinstance(b, SCode):
            if a.strs != b.strs:
                return False
            ta, tb = a.enum_type, b.enum_type
            if ta is not None and tb is not None and ta is not tb and not _value_like(ta):
                return False
            if (ta is None) != (tb is None):
                typed = ta or tb
                assert typed is not None
                if not _value_like(typed):
                    return False
            return mk_eq(a.e, b.e)
        if isinstance(b, enum.Enum):
            if a.enum_type is not None and not isinstance(b, a.enum_type):
                if not (_value_like(a.enum_type) and _value_like(type(b))):
                    return False
            elif a.enum_type is None and not _value_like(type(b)):
                return False
            val = b.value
        else:
            if a.enum_type is not None and not _value_like(a.enum_type):
                return False
            val = b
        if a.strs:
            if not isinstance(val, str):
                return False
            return mk_eq(a.e, self.strings.code(val))
        if isinstance(val, bool) or not isinstance(val, int):
            return False
        return mk_eq(a.e, val)

    def order(self, op: ast.cmpop, a: V, b: V, node: ast.AST) -> tuple[Cond, Cond]:
        """``<``, ``<=``, ``>``, ``>=``: (result, ok)."""
        if isinstance(a, SChoice) or isinstance(b, SChoice):
            if isinstance(a, SChoice):
                pairs = [(c, self.order(op, x, b, node)) for c, x in a.alts]
            else:
                pairs = [(c, self.order(op, a, y, node)) for c, y in cast(SChoice, b).alts]
            return (
                self._choice_cond([(c, p[0]) for c, p in pairs]),
                self._choice_cond([(c, p[1]) for c, p in pairs]),
            )
        a, oka = self._unwrap(a)
        b, okb = self._unwrap(b)
        fn = _CMP[type(op)]
        if not is_sym(a) and not is_sym(b):
            try:
                return bool(fn(a, b)), AND(oka, okb)
            except Exception:
                return False, False
        if isinstance(a, SCode) or isinstance(b, SCode):
            self._fail(
                "ordering comparison of strings",
                "<, <=, >, >= on str/Enum fields are not supported",
                node,
            )
        if isinstance(a, (tuple, SSeq, SObj)) or isinstance(b, (tuple, SSeq, SObj)):
            self._fail("ordering comparison of sequences", "<, <= on tuples/lists", node)
        x, y = self._as_int_term(a), self._as_int_term(b)
        if x is None or y is None:
            return False, False
        if isinstance(x, int) and isinstance(y, int):
            return bool(fn(x, y)), AND(oka, okb)
        return mk_cmp(_CMP_SYM[type(op)], x, y), AND(oka, okb)

    def contains(self, container: V, x: V, node: ast.AST) -> tuple[Cond, Cond]:
        """``x in container``: (result, ok)."""
        if isinstance(container, SChoice):
            pairs = [(c, self.contains(v, x, node)) for c, v in container.alts]
            return (
                self._choice_cond([(c, p[0]) for c, p in pairs]),
                self._choice_cond([(c, p[1]) for c, p in pairs]),
            )
        if isinstance(container, SMaybe):
            c, okc = self.contains(container.inner(), x, node)
            return c, AND(NOT(container.null), okc)
        if isinstance(container, SSeq):
            if container.lazy:
                # Stops at the first match; an error after it is never reached.
                found: Cond = False
                ok: Cond = True
                for it in container.items:
                    ok = AND(ok, IMPLIES(AND(NOT(found), it.err), False))
                    found = OR(found, AND(it.present, self.eq(it.value, x, node)))
                return found, ok
            return OR(
                *(AND(it.present, self.eq(it.value, x, node)) for it in container.items)
            ), True
        if isinstance(container, (SCode, z3.ExprRef, SObj)):
            self._fail("membership in a field value", "`in` needs a collection", node)
        if isinstance(container, tuple) and is_sym(container):
            return OR(*(self.eq(v, x, node) for v in container)), True
        if not is_sym(x):
            try:
                return bool(x in cast(Iterable[object], container)), True
            except Exception:
                return False, False
        if isinstance(container, str):
            self._fail("substring test on a field", '`field in "text"` is not supported', node)
        if isinstance(container, Mapping):
            elems: Iterable[object] = container.keys()
        elif isinstance(container, Iterable):
            elems = container
        else:
            return False, False
        return self._member_const(x, list(elems), node), True

    def _member_const(self, x: V, elems: list[object], node: ast.AST) -> Cond:
        x0, okx = self._unwrap(x) if isinstance(x, SMaybe) else (x, True)
        if isinstance(x, SMaybe):
            none_in = any(e is None for e in elems)
            inner = self._member_const(x0, [e for e in elems if e is not None], node)
            return OR(AND(x.null, none_in), AND(okx, inner))
        if isinstance(x0, tuple) and len(x0) > 0:
            # Group tuples by their first component: Or_k (x0 == k and rest in group_k).
            groups: dict[object, list[tuple[object, ...]]] = {}
            for e in elems:
                if isinstance(e, tuple) and len(e) == len(x0):
                    try:
                        groups.setdefault(e[0], []).append(e[1:])
                    except TypeError:
                        return OR(*(self.eq(x0, e2, node) for e2 in elems))
            rest = x0[1:]
            return OR(
                *(
                    AND(
                        self.eq(x0[0], k, node),
                        self._member_const(rest, list(tails), node) if rest else True,
                    )
                    for k, tails in groups.items()
                )
            )
        if isinstance(x0, SCode) and x0.strs and x0.enum_type is None:
            codes = sorted({self.strings.code(e) for e in elems if isinstance(e, str)})
            codes += sorted(
                {
                    self.strings.code(e.value)
                    for e in elems
                    if isinstance(e, enum.Enum)
                    and isinstance(e.value, str)
                    and _value_like(type(e))
                }
            )
            return self._in_codes(x0.e, sorted(set(codes)))
        if isinstance(x0, z3.ArithRef) and not isinstance(x0, z3.BoolRef):
            ints = sorted({int(e) for e in elems if isinstance(e, int)})
            return self._in_codes(x0, ints)
        return OR(*(self.eq(x0, e, node) for e in elems))

    @staticmethod
    def _in_codes(e: z3.ArithRef, codes: list[int]) -> Cond:
        if not codes:
            return False
        if len(codes) == 1:
            return mk_eq(e, codes[0])
        if codes[-1] - codes[0] + 1 == len(codes):
            return AND(mk_cmp(">=", e, codes[0]), mk_cmp("<=", e, codes[-1]))
        return OR(*(mk_eq(e, c) for c in codes))

    # -- conditional expression

    def _e_IfExp(self, node: ast.IfExp, scope: _Scope) -> R:
        c = self.eval(node.test, scope)
        t = self.truthy(c.value)
        if t is True:
            a = self.eval(node.body, scope)
            return R(a.value, AND(c.ok, a.ok))
        if t is False:
            b = self.eval(node.orelse, scope)
            return R(b.value, AND(c.ok, b.ok))
        a, b = self.eval(node.body, scope), self.eval(node.orelse, scope)
        return R(self.ite(t, a.value, b.value), AND(c.ok, ITE_COND(t, a.ok, b.ok)))

    # -- subscripts

    def _e_Subscript(self, node: ast.Subscript, scope: _Scope) -> R:
        base = self.eval(node.value, scope)
        if isinstance(node.slice, ast.Slice):
            sl = node.slice
            parts: list[V] = []
            oks: list[Cond] = [base.ok]
            for p in (sl.lower, sl.upper, sl.step):
                if p is None:
                    parts.append(None)
                else:
                    r = self.eval(p, scope)
                    parts.append(r.value)
                    oks.append(r.ok)
            out = self.slice(base.value, parts[0], parts[1], parts[2], node)
            return R(out.value, AND(*oks, out.ok))
        idx = self.eval(node.slice, scope)
        r = self.index(base.value, idx.value, node)
        return R(r.value, AND(base.ok, idx.ok, r.ok))

    def index(self, seq: V, idx: V, node: ast.AST) -> R:
        """``seq[idx]``."""
        if isinstance(seq, SChoice):
            return self._map_choice(seq, lambda s: self.index(s, idx, node))
        if isinstance(idx, SChoice):
            return self._map_choice(idx, lambda i: self.index(seq, i, node))
        seq, ok1 = self._unwrap(seq)
        idx, ok2 = self._unwrap(idx)
        r = self._index(seq, idx, node)
        return R(r.value, AND(ok1, ok2, r.ok))

    def _index(self, seq: V, idx: V, node: ast.AST) -> R:
        if seq is UNDEF or idx is UNDEF:
            return R(UNDEF, False)
        if not is_sym(seq) and not is_sym(idx):
            try:
                return R(cast(Sequence[object], seq)[cast(int, idx)])
            except (LookupError, TypeError, ValueError):
                if isinstance(seq, Mapping) and not isinstance(idx, (list, dict, set)):
                    raise ContextError(
                        f"{self._where(node)}: the context has no key {idx!r}"
                    ) from None
                return R(UNDEF, False)
        if isinstance(seq, SSeq):
            if seq.lazy:
                self._fail("indexing a generator", "generators cannot be indexed", node)
            return self._index_seq(seq, idx, node)
        if isinstance(seq, Mapping):
            alts: list[tuple[Cond, V]] = []
            for k, v in seq.items():
                c = self.eq(idx, k, node)
                if c is not False:
                    alts.append((c, v))
            return R(self._choice(alts), OR(*(c for c, _ in alts)))
        if isinstance(seq, (list, tuple)):
            items = [Item(True, v) for v in seq]
            return self._index_seq(SSeq(items, len(items), True), idx, node)
        if isinstance(seq, SCode) or isinstance(seq, str):
            self._fail("indexing a string", "str indexing is not supported", node)
        self._fail("indexing", f"cannot index {type(seq).__name__}", node)

    def _index_seq(self, seq: SSeq, idx: V, node: ast.AST) -> R:
        if isinstance(idx, bool):
            idx = int(idx)
        if isinstance(idx, z3.BoolRef):
            idx = z3.If(idx, 1, 0)
        if isinstance(idx, SCode) or not isinstance(idx, (int, z3.ArithRef)):
            return R(UNDEF, False)
        items = seq.items
        n = len(items)
        length = seq.length
        if seq.contiguous:
            if isinstance(idx, int):
                if idx >= 0:
                    if idx >= n:
                        return R(UNDEF, False)
                    return R(items[idx].value, items[idx].present)
                k = -idx
                if k > n:
                    return R(UNDEF, False)
                if isinstance(length, int):
                    return R(items[length - k].value, length >= k)
                alts = [
                    (cast(Cond, mk_eq(length, i + k)), items[i].value) for i in range(n - k + 1)
                ]
                return R(self._choice(alts), mk_cmp(">=", length, k))
            pos = z3.If(idx < 0, idx + length, idx)
            alts2 = [(mk_eq(pos, i), items[i].value) for i in range(n)]
            return R(self._choice(alts2), z3.And(pos >= 0, pos < length))
        # filtered sequence: the k-th present item
        if isinstance(idx, int) and idx >= 0:
            pos2: z3.ArithRef | int = idx
        else:
            pos2 = z3.If(idx < 0, idx + length, idx) if not isinstance(idx, int) else idx + length
        alts3: list[tuple[Cond, V]] = []
        count: z3.ArithRef | int = 0
        for it in items:
            alts3.append((AND(it.present, _cmp_eq(count, pos2)), it.value))
            if it.present is True:
                count = count + 1
            else:
                count = count + mk_ite(it.present, 1, 0)
        ok = AND(_cmp_ge0(pos2), _cmp_lt(pos2, length))
        return R(self._choice(alts3), ok)

    def slice(self, seq: V, lo: V, hi: V, step: V, node: ast.AST) -> R:
        """``seq[lo:hi:step]`` with constant bounds."""
        if isinstance(seq, SMaybe):
            r = self.slice(seq.inner(), lo, hi, step, node)
            return R(r.value, AND(NOT(seq.null), r.ok))
        if isinstance(seq, SChoice):
            return self._map_choice(seq, lambda s: self.slice(s, lo, hi, step, node))
        if is_sym(lo) or is_sym(hi) or is_sym(step):
            self._fail(
                "slice with a bound read from the record",
                "slice bounds must be constants (from literals or the context)",
                node,
            )
        if not is_sym(seq):
            try:
                return R(
                    cast(Sequence[object], seq)[
                        slice(cast(Any, lo), cast(Any, hi), cast(Any, step))
                    ]
                )
            except Exception:
                return R(UNDEF, False)
        if step not in (None, 1):
            self._fail("slice with a step", "slices with a step are not supported", node)
        if not isinstance(seq, SSeq):
            self._fail("slicing", "only lists can be sliced", node)
        if seq.lazy:
            self._fail("slicing a generator", "generators cannot be sliced", node)
        if not seq.contiguous:
            self._fail("slicing a filtered list", "slice the list before filtering it", node)
        for b in (lo, hi):
            if b is not None and (isinstance(b, bool) or not isinstance(b, int)):
                return R(UNDEF, False)
        items, length = seq.items, seq.length
        n = len(items)
        a = cast(int | None, lo) or 0
        if a >= 0:
            if hi is None:
                new = items[a:]
                return R(SSeq(new, self._sub_len(length, a), True))
            b = cast(int, hi)
            if b >= 0:
                new = items[a:b]
                cap = self._min_len(length, b)
                return R(SSeq(new, self._sub_len(cap, a), True))
            # stop = len + b: item j present iff j - b < len
            new_items = [
                Item(items[j - b].present if j - b < n else False, items[j].value)
                for j in range(a, n)
            ]
            return R(SSeq(new_items, self._sub_len(self._sub_len(length, -b), a), True))
        # negative start: symbolic offset
        start = self._sub_len(length, -a)  # max(len + a, 0)
        stop: z3.ArithRef | int = (
            length
            if hi is None
            else (
                self._min_len(length, cast(int, hi))
                if cast(int, hi) >= 0
                else self._sub_len(length, -cast(int, hi))
            )
        )
        count = min(-a, n)
        out: list[Item] = []
        for j in range(count):
            pos = start + j
            alts = [(mk_eq(pos, i), items[i].value) for i in range(n)]
            out.append(Item(mk_cmp("<", pos, stop), self._choice(alts)))
        return R(SSeq(out, self._max0(stop - start), True))

    @staticmethod
    def _sub_len(length: z3.ArithRef | int, k: int) -> z3.ArithRef | int:
        """max(length - k, 0)."""
        if k == 0:
            return length
        if isinstance(length, int):
            return max(length - k, 0)
        return cast(z3.ArithRef, mk_ite(mk_cmp(">", length, k), length - k, 0))

    @staticmethod
    def _min_len(length: z3.ArithRef | int, k: int) -> z3.ArithRef | int:
        if isinstance(length, int):
            return min(length, k)
        return cast(z3.ArithRef, mk_ite(mk_cmp("<", length, k), length, k))

    @staticmethod
    def _max0(e: z3.ArithRef | int) -> z3.ArithRef | int:
        if isinstance(e, int):
            return max(e, 0)
        return cast(z3.ArithRef, z3.If(e > 0, e, 0))

    # -- comprehensions

    def _e_GeneratorExp(self, node: ast.GeneratorExp, scope: _Scope) -> R:
        return self._comprehension(node.elt, node.generators, scope, lazy=True)

    def _e_ListComp(self, node: ast.ListComp, scope: _Scope) -> R:
        return self._comprehension(node.elt, node.generators, scope, lazy=False)

    def _comprehension(
        self, elt: ast.expr, gens: list[ast.comprehension], scope: _Scope, *, lazy: bool
    ) -> R:
        first = self.eval(gens[0].iter, scope)
        it = self.iterate(first.value, gens[0].iter)
        items: list[Item] = []
        self._gen_items(elt, gens, 0, it, scope, True, items)
        if all(x.present is True or x.present is False for x in items) and all(
            x.err is False for x in items
        ):
            kept = [x for x in items if x.present is True]
            if not lazy and not is_sym(tuple(x.value for x in kept)):
                return R([x.value for x in kept], AND(first.ok, it.ok))
        contiguous = len(gens) == 1 and not gens[0].ifs and it.seq.contiguous
        if contiguous:
            length: z3.ArithRef | int = it.seq.length
        else:
            length = self._count(items)
        seq = SSeq(items, length, contiguous, lazy)
        ok = AND(first.ok, it.ok)
        if not lazy:
            ok = AND(ok, *(NOT(x.err) for x in items))
            for x in items:
                x.err = False
        return R(seq, ok)

    def _count(self, items: Sequence[Item]) -> z3.ArithRef | int:
        total: z3.ArithRef | int = 0
        terms: list[z3.ArithRef] = []
        for x in items:
            if x.present is True:
                total += 1
            elif x.present is not False:
                terms.append(cast(z3.ArithRef, z3.If(x.present, 1, 0)))
        if not terms:
            return total
        s = z3.Sum(*terms) if len(terms) > 1 else terms[0]
        return s + total if total else s

    def _gen_items(
        self,
        elt: ast.expr,
        gens: list[ast.comprehension],
        k: int,
        it: _Iter,
        scope: _Scope,
        guard: Cond,
        out: list[Item],
    ) -> None:
        g = gens[k]
        if g.is_async:
            self._fail("async comprehension", "async for is not supported", g)
        for item in it.seq.items:
            present = AND(guard, item.present)
            if present is False:
                continue
            names: dict[str, V] = {}
            self._bind(g.target, item.value, names)
            inner = scope.child(names)
            err: Cond = AND(present, item.err)
            cond: Cond = present
            for test in g.ifs:
                r = self.eval(test, inner)
                err = OR(err, AND(cond, NOT(r.ok)))
                cond = AND(cond, self.truthy(r.value))
                if cond is False:
                    break
            if cond is False:
                if err is not False:
                    out.append(Item(False, UNDEF, err))
                continue
            if k + 1 < len(gens):
                nxt = self.eval(gens[k + 1].iter, inner)
                sub = self.iterate(nxt.value, gens[k + 1].iter)
                err = OR(err, AND(cond, NOT(AND(nxt.ok, sub.ok))))
                start = len(out)
                self._gen_items(elt, gens, k + 1, sub, inner, cond, out)
                if err is not False:
                    if len(out) > start:
                        out[start].err = OR(out[start].err, err)
                    else:
                        out.append(Item(False, UNDEF, err))
                continue
            r = self.eval(elt, inner)
            err = OR(err, AND(cond, NOT(r.ok)))
            out.append(Item(cond, r.value, err))

    def iterate(self, v: V, node: ast.AST) -> _Iter:
        """View a value as a sequence to iterate over."""
        if isinstance(v, SSeq):
            return _Iter(v, True)
        if isinstance(v, SMaybe):
            inner = self.iterate(v.inner(), node)
            return _Iter(inner.seq, AND(NOT(v.null), inner.ok))
        if isinstance(v, SChoice):
            seqs = [(c, self.iterate(x, node)) for c, x in v.alts]
            merged: V = seqs[-1][1].seq
            for c, s in reversed(seqs[:-1]):
                merged = self.ite(c, s.seq, merged)
            ok = self._choice_cond([(c, s.ok) for c, s in seqs])
            if not isinstance(merged, SSeq):
                self._fail("iteration", "cannot iterate over this value", node)
            return _Iter(merged, ok)
        if isinstance(v, tuple) and is_sym(v):
            return _Iter(SSeq([Item(True, x) for x in v], len(v), True), True)
        if isinstance(v, (SCode, SObj, z3.ExprRef)):
            self._fail("iteration over a field value", "only lists can be iterated", node)
        if v is UNDEF:
            return _Iter(SSeq([], 0, True), False)
        try:
            elems = list(cast(Iterable[object], v))
        except TypeError:
            return _Iter(SSeq([], 0, True), False)
        return _Iter(SSeq([Item(True, x) for x in elems], len(elems), True), True)

    # -- calls

    def _e_Call(self, node: ast.Call, scope: _Scope) -> R:
        fn = self.eval(node.func, scope)
        f = fn.value
        if not isinstance(f, SFunc):
            name = ast.unparse(node.func)
            self._fail(f"call to {name}()", "this function cannot be compiled", node)
        args: list[V] = []
        oks: list[Cond] = [fn.ok]
        for a in node.args:
            if isinstance(a, ast.Starred):
                self._fail("starred expression", "*args are not supported", a)
            r = self.eval(a, scope)
            args.append(r.value)
            oks.append(r.ok)
        kwargs: dict[str, V] = {}
        for kw in node.keywords:
            if kw.arg is None:
                self._fail("keyword unpacking", "**kwargs are not supported", kw)
            r = self.eval(kw.value, scope)
            kwargs[kw.arg] = r.value
            oks.append(r.ok)
        self._node = node
        out = self.call(f, args, kwargs, node)
        return R(out.value, AND(*oks, out.ok))

    def call(self, f: SFunc, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        """Apply a supported builtin."""
        if f.bound is not None:
            return self._method(f, args, kwargs, node)
        if not any(is_sym(a) for a in args) and not any(is_sym(v) for v in kwargs.values()):
            if f.name == "distinct":
                try:
                    return R(distinct(cast(Iterable[object], args[0])))
                except Exception:
                    return R(UNDEF, False)
            if UNDEF in args:
                return R(UNDEF, False)
            pyf = cast(Callable[..., object], getattr(builtins, f.name))
            try:
                return R(pyf(*args, **kwargs))
            except Exception:
                return R(UNDEF, False)
        handler = getattr(self, "_call_" + f.name)
        res: R = handler(args, kwargs, node)
        return res

    def _method(self, f: SFunc, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        obj = f.bound
        if not any(is_sym(a) for a in args):
            try:
                return R(getattr(obj, f.name)(*args, **kwargs))
            except Exception:
                return R(UNDEF, False)
        if f.name == "get" and isinstance(obj, Mapping) and 1 <= len(args) <= 2:
            default = args[1] if len(args) > 1 else None
            alts: list[tuple[Cond, V]] = []
            for k, v in obj.items():
                c = self.eq(args[0], k, node)
                if c is not False:
                    alts.append((c, v))
            alts.append((True, default))
            return R(self._choice(alts))
        if f.name == "count" and isinstance(obj, (list, tuple)) and len(args) == 1:
            terms = [self.eq(args[0], e, node) for e in obj]
            return self._call_sum([[t for t in terms]], {}, node)
        self._fail(f"call to {f.name}()", f"{f.name}() with a value read from the record", node)

    def _one_iter(self, args: list[V], node: ast.AST, name: str) -> _Iter:
        if len(args) != 1:
            self._fail(f"call to {name}()", f"{name}() takes one iterable here", node)
        return self.iterate(args[0], node)

    def _call_all(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        it = self._one_iter(args, node, "all")
        value: list[Cond] = []
        ok: list[Cond] = [it.ok]
        reached: Cond = True
        for x in it.seq.items:
            t = self.truthy(x.value)
            if x.err is not False:
                ok.append(NOT(AND(reached, x.err)))
            if x.present is False:
                continue
            step = IMPLIES(x.present, t)
            value.append(step)
            if x.err is not False or any(y.err is not False for y in it.seq.items):
                reached = AND(reached, step)
        return R(AND(*value), AND(*ok))

    def _call_any(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        it = self._one_iter(args, node, "any")
        value: list[Cond] = []
        ok: list[Cond] = [it.ok]
        reached: Cond = True
        has_err = any(y.err is not False for y in it.seq.items)
        for x in it.seq.items:
            if x.err is not False:
                ok.append(NOT(AND(reached, x.err)))
            if x.present is False:
                continue
            step = AND(x.present, self.truthy(x.value))
            value.append(step)
            if has_err:
                reached = AND(reached, NOT(step))
        return R(OR(*value), AND(*ok))

    def _consume_ok(self, it: _Iter) -> Cond:
        return AND(it.ok, *(NOT(x.err) for x in it.seq.items if x.err is not False))

    def _call_sum(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        if not args:
            self._fail("call to sum()", "sum() needs an iterable", node)
        start = kwargs.get("start", args[1] if len(args) > 1 else 0)
        it = self.iterate(args[0], node)
        total: z3.ArithRef | int = 0
        terms: list[z3.ArithRef] = []
        for x in it.seq.items:
            if x.present is False:
                continue
            v, okv = self._unwrap(x.value)
            t = self._as_int_term(v)
            if t is None:
                if isinstance(v, SCode):
                    self._fail("sum of strings", "sum() of str values", node)
                return R(UNDEF, False)
            if okv is not True:
                self._fail("sum of optional values", "sum() over Optional values", node)
            if x.present is True:
                if isinstance(t, int):
                    total += t
                else:
                    terms.append(t)
            else:
                terms.append(cast(z3.ArithRef, z3.If(x.present, t, 0)))
        st = self._as_int_term(start)
        if st is None:
            return R(UNDEF, False)
        out: z3.ArithRef | int = total + st
        if terms:
            s = z3.Sum(*terms) if len(terms) > 1 else terms[0]
            out = s + out if not (isinstance(out, int) and out == 0) else s
        return R(out, self._consume_ok(it))

    def _call_len(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        v = (
            args[0]
            if len(args) == 1
            else self._fail("call to len()", "len() takes one argument", node)
        )
        if isinstance(v, SMaybe):
            r = self._call_len([v.inner()], kwargs, node)
            return R(r.value, AND(NOT(v.null), r.ok))
        if isinstance(v, SChoice):
            return self._map_choice(v, lambda x: self._call_len([x], kwargs, node))
        if isinstance(v, SSeq):
            if v.lazy:
                self._fail(
                    "len() of a generator", "use a list comprehension or sum(1 for ...)", node
                )
            return R(v.length)
        if isinstance(v, tuple):
            return R(len(v))
        if isinstance(v, SCode):
            self._fail("len() of a string field", "len() of str fields is not supported", node)
        return R(UNDEF, False)

    def _call_abs(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        v, ok = self._unwrap(args[0])
        t = self._as_int_term(v)
        if t is None or isinstance(t, int):
            return R(UNDEF, False) if t is None else R(abs(t), ok)
        return R(z3.If(t >= 0, t, -t), ok)

    def _call_bool(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        return R(self.truthy(args[0]) if args else False)

    def _call_minmax(self, args: list[V], kwargs: dict[str, V], node: ast.AST, is_min: bool) -> R:
        name = "min" if is_min else "max"
        if "key" in kwargs:
            self._fail(f"{name}() with key=", "key= is not supported", node)
        has_default = "default" in kwargs
        if len(args) == 1:
            it = self.iterate(args[0], node)
            items = it.seq.items
            ok0 = self._consume_ok(it)
        else:
            items = [Item(True, a) for a in args]
            ok0 = True
        best: z3.ArithRef | int | None = None
        seen: Cond = False
        for x in items:
            if x.present is False:
                continue
            v, okv = self._unwrap(x.value)
            t = self._as_int_term(v)
            if t is None:
                if isinstance(v, SCode):
                    self._fail(f"{name}() of strings", f"{name}() of str values", node)
                return R(UNDEF, False)
            if okv is not True:
                self._fail(f"{name}() of optional values", "Optional values", node)
            if best is None:
                best = t
                seen = x.present
                continue
            better = t < best if is_min else t > best
            if isinstance(better, bool) and x.present is True:
                if better:
                    best = t
            else:
                take = AND(x.present, OR(NOT(seen), better))
                best = cast(z3.ArithRef, z3.If(to_bool(take), t, best))
            seen = OR(seen, x.present)
        if best is None:
            if has_default:
                return R(kwargs["default"], ok0)
            return R(UNDEF, False)
        if has_default:
            d = self._as_int_term(kwargs["default"])
            if d is None:
                self._fail(f"{name}() default", "default must be an int", node)
            return R(self.ite(seen, best, d), ok0)
        return R(best, AND(ok0, seen))

    def _call_min(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        return self._call_minmax(args, kwargs, node, True)

    def _call_max(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        return self._call_minmax(args, kwargs, node, False)

    def _call_distinct(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        it = self._one_iter(args, node, "distinct")
        items = [x for x in it.seq.items if x.present is not False]
        conds: list[Cond] = []
        contiguous = it.seq.contiguous
        for j, b in enumerate(items):
            for a in items[:j]:
                guard = b.present if contiguous else AND(a.present, b.present)
                conds.append(IMPLIES(guard, NOT(self.eq(a.value, b.value, node))))
        return R(AND(*conds), self._consume_ok(it))

    def _call_zip(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        if kwargs:
            self._fail("zip() with keywords", "zip(strict=...) is not supported", node)
        its = [self.iterate(a, node) for a in args]
        for it in its:
            if not it.seq.contiguous:
                self._fail("zip over a filtered sequence", "zip lists, not filtered ones", node)
        n = min((len(it.seq.items) for it in its), default=0)
        items: list[Item] = []
        for j in range(n):
            parts = [it.seq.items[j] for it in its]
            present = AND(*(p.present for p in parts))
            err: Cond = False
            before: Cond = True
            for p in parts:
                err = OR(err, AND(before, p.err))
                before = AND(before, p.present)
            items.append(Item(present, tuple(p.value for p in parts), err))
        lengths = [it.seq.length for it in its]
        length: z3.ArithRef | int = lengths[0] if lengths else 0
        for ln in lengths[1:]:
            length = self._min2(length, ln)
        lazy = any(it.seq.lazy for it in its) or True
        return R(SSeq(items, length, True, lazy), AND(*(it.ok for it in its)))

    @staticmethod
    def _min2(a: z3.ArithRef | int, b: z3.ArithRef | int) -> z3.ArithRef | int:
        if isinstance(a, int) and isinstance(b, int):
            return min(a, b)
        if a is b:
            return a
        return cast(z3.ArithRef, z3.If(a <= b, a, b))

    def _call_enumerate(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        start = kwargs.get("start", args[1] if len(args) > 1 else 0)
        if is_sym(start) or not isinstance(start, int):
            self._fail("enumerate() start", "start must be a constant int", node)
        it = self.iterate(args[0], node)
        items: list[Item] = []
        count: z3.ArithRef | int = start
        for j, x in enumerate(it.seq.items):
            idx: z3.ArithRef | int = j + start if it.seq.contiguous else count
            items.append(Item(x.present, (idx, x.value), x.err))
            if not it.seq.contiguous:
                count = count + (1 if x.present is True else z3.If(to_bool(x.present), 1, 0))
        return R(SSeq(items, it.seq.length, it.seq.contiguous, True), it.ok)

    def _call_range(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        if not 1 <= len(args) <= 3:
            self._fail("call to range()", "range() takes 1 to 3 arguments", node)
        lo: V = 0 if len(args) == 1 else args[0]
        hi: V = args[0] if len(args) == 1 else args[1]
        step = args[2] if len(args) == 3 else 1
        if is_sym(step) or not isinstance(step, int) or step <= 0:
            self._fail("range() step", "range() needs a constant positive step", node)
        lo_t, hi_t = self._as_int_term(lo), self._as_int_term(hi)
        if lo_t is None or hi_t is None:
            return R(UNDEF, False)
        lo_b, _ = self._interval(lo_t)
        _, hi_b = self._interval(hi_t)
        if lo_b is None or hi_b is None:
            self._fail(
                "range() over an unbounded value",
                "range() bounds read from the record must be list lengths",
                node,
            )
        items: list[Item] = []
        j = 0
        while True:
            v = lo_t + j * step
            vb = lo_b + j * step
            if vb >= hi_b:
                break
            items.append(Item(v < hi_t, v))
            j += 1
        if step == 1:
            length = self._max0(hi_t - lo_t)
        else:
            length = self._count(items)
        return R(SSeq(items, length, True))

    def _interval(self, e: z3.ArithRef | int) -> tuple[int | None, int | None]:
        """A cheap interval for length-like terms (lengths, constants, +, -, If)."""
        if isinstance(e, int):
            return e, e
        if z3.is_int_value(e):
            v = cast(z3.IntNumRef, e).as_long()
            return v, v
        if z3.is_const(e):
            rec = self.vars.get(str(e))
            if rec is not None:
                return rec.ge, rec.le
            return None, None
        kids = e.children()
        if z3.is_add(e):
            ivs = [self._interval(k) for k in kids]
            lo = sum(i[0] for i in ivs) if all(i[0] is not None for i in ivs) else None  # type: ignore[misc]
            hi = sum(i[1] for i in ivs) if all(i[1] is not None for i in ivs) else None  # type: ignore[misc]
            return lo, hi
        if z3.is_sub(e) and len(kids) == 2:
            (a0, a1), (b0, b1) = self._interval(kids[0]), self._interval(kids[1])
            return (
                a0 - b1 if a0 is not None and b1 is not None else None,
                a1 - b0 if a1 is not None and b0 is not None else None,
            )
        if z3.is_app_of(e, z3.Z3_OP_ITE):
            (a0, a1), (b0, b1) = self._interval(kids[1]), self._interval(kids[2])
            return (
                min(a0, b0) if a0 is not None and b0 is not None else None,
                max(a1, b1) if a1 is not None and b1 is not None else None,
            )
        return None, None

    def _call_list(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        it = self._one_iter(args, node, "list")
        seq = it.seq
        return R(
            SSeq(
                [Item(x.present, x.value) for x in seq.items],
                seq.length if seq.contiguous else self._count(seq.items),
                seq.contiguous,
            ),
            self._consume_ok(it),
        )

    def _call_tuple(self, args: list[V], kwargs: dict[str, V], node: ast.AST) -> R:
        return self._call_list(args, kwargs, node)

    # -- unsupported expressions with a clear name

    def _e_Lambda(self, node: ast.Lambda, scope: _Scope) -> R:
        self._fail("lambda", "lambdas are not supported", node)

    def _e_JoinedStr(self, node: ast.JoinedStr, scope: _Scope) -> R:
        self._fail("f-string", "f-strings are not supported", node)

    def _e_NamedExpr(self, node: ast.NamedExpr, scope: _Scope) -> R:
        self._fail("assignment expression", ":= is not supported", node)


@dataclass(slots=True)
class _Iter:
    seq: SSeq
    ok: Cond


def _value_like(t: type[enum.Enum]) -> bool:
    """An Enum whose members compare equal to their raw values (str/int mixins)."""
    return issubclass(t, (str, int))
