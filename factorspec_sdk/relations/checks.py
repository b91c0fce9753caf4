"""Syntax checks run when ``@relation`` decorates a method.

The body of a relation must be: an optional docstring, then let-bindings of local names
(``x = expr``), ``if cond: return a`` chains, and a final ``return expr``. Expressions may use
the supported subset (see *Writing relations*). Everything else raises
`RelationDefinitionError` with the relation, the file, the line and the construct, at
class-definition time. Checks that need the layout or the context (a field that does not
exist, a slice bound read from the record) happen when the spec is compiled.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, NoReturn

from factorspec_sdk.errors import RelationDefinitionError

if TYPE_CHECKING:
    from factorspec_sdk.relations.decorator import RelationInfo

__all__ = [
    "DATE_CONSTRUCTORS",
    "NUMBER_FUNCTIONS",
    "DATE_METHODS",
    "STR_METHODS",
    "SUPPORTED_CALLS",
    "SUPPORTED_METHODS",
    "check_syntax",
    "relation_body",
]

SUPPORTED_CALLS = frozenset(
    {
        "all",
        "any",
        "sum",
        "len",
        "min",
        "max",
        "zip",
        "enumerate",
        "range",
        "abs",
        "bool",
        "list",
        "tuple",
        "distinct",
        "round",
        "int",
        "float",
        "isinstance",
    }
)
"""Functions a relation may call (by name)."""

SUPPORTED_METHODS = frozenset({"get", "keys", "values", "items", "count", "index"})
"""Methods a relation may call on constants (context values)."""

DATE_CONSTRUCTORS = frozenset({"date", "datetime", "time", "timedelta", "timezone", "Decimal"})
"""``datetime.date``/``datetime``/``time``/``timedelta`` and ``decimal.Decimal``, called by
name or as ``dt.date(...)``/``decimal.Decimal(...)`` (all but ``timedelta`` of constants
only); ``.date()`` and ``.time()`` of a datetime pass as these names too."""

NUMBER_FUNCTIONS = frozenset({"isclose"})
"""``math.isclose``, called by name or as ``math.isclose(...)``."""

DATE_METHODS = frozenset({"weekday", "isoweekday", "toordinal", "total_seconds"})

STR_METHODS = frozenset({"startswith", "endswith"})
"""``str`` methods a relation may call on a field (with constant arguments) or a constant."""
"""Methods of dates and timedeltas a relation may call (on record values or constants)."""

_STATEMENTS: dict[type[ast.AST], str] = {
    ast.While: "while loop",
    ast.For: "for loop",
    ast.AsyncFor: "for loop",
    ast.With: "with statement",
    ast.AsyncWith: "with statement",
    ast.Try: "try statement",
    ast.Raise: "raise statement",
    ast.Assert: "assert statement",
    ast.Import: "import",
    ast.ImportFrom: "import",
    ast.FunctionDef: "nested function",
    ast.AsyncFunctionDef: "nested function",
    ast.ClassDef: "class definition",
    ast.Global: "global statement",
    ast.Nonlocal: "nonlocal statement",
    ast.Delete: "del statement",
    ast.AugAssign: "assignment",
    ast.Match: "match statement",
}
if hasattr(ast, "TryStar"):
    _STATEMENTS[ast.TryStar] = "try statement"

_EXPRESSIONS: dict[type[ast.AST], str] = {
    ast.Lambda: "lambda",
    ast.JoinedStr: "f-string",
    ast.NamedExpr: "assignment expression",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension",
    ast.Starred: "starred expression",
}

_BAD_BINOPS: dict[type[ast.operator], str] = {
    ast.MatMult: "@ operator",
    ast.BitAnd: "bitwise operator",
    ast.BitOr: "bitwise operator",
    ast.BitXor: "bitwise operator",
    ast.LShift: "bitwise operator",
    ast.RShift: "bitwise operator",
}

_HINTS: dict[str, str] = {
    "while loop": "use all()/any()/sum() over a generator expression",
    "for loop": "use all()/any()/sum() over a generator expression",
    "lambda": "write the expression inline",
    "f-string": "relations compare values; they do not build strings",
    "try statement": "an exception inside a relation already means it does not hold",
    "import": "import at module level",
    "assignment": "bind each local name once with `name = expr`",
}


def _fail(info: RelationInfo, node: ast.AST, construct: str, message: str = "") -> NoReturn:
    hint = _HINTS.get(construct, "")
    text = message or "not in the supported subset of relations"
    if hint:
        text += f" ({hint})"
    raise RelationDefinitionError(
        text,
        relation=info.qualname,
        filename=info.filename,
        lineno=getattr(node, "lineno", info.lineno),
        construct=construct,
    )


def check_syntax(info: RelationInfo) -> None:
    """Raise `RelationDefinitionError` for constructs outside the supported subset."""
    tree = info.tree
    if tree.decorator_list and len(tree.decorator_list) > 1:
        _fail(info, tree.decorator_list[0], "extra decorators", "@relation must be alone")
    body = relation_body(tree)
    if not body:
        _fail(info, tree, "empty relation", "a relation must return a value")
    _check_block(info, body, top=True)


def relation_body(tree: ast.FunctionDef) -> list[ast.stmt]:
    """The statements of a relation's body, without its docstring."""
    body = list(tree.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return body


def _check_block(info: RelationInfo, stmts: list[ast.stmt], *, top: bool) -> None:
    for k, st in enumerate(stmts):
        last = k == len(stmts) - 1
        construct = _STATEMENTS.get(type(st))
        if construct is not None:
            _fail(info, st, construct)
        if isinstance(st, ast.Return):
            if st.value is None:
                _fail(info, st, "return without a value", "a relation must return a bool")
            _check_expr(info, st.value)
            if not last:
                _fail(info, stmts[k + 1], "unreachable code", "code after return")
            continue
        if isinstance(st, ast.Assign):
            for t in st.targets:
                _check_target(info, t)
            _check_expr(info, st.value)
        elif isinstance(st, ast.AnnAssign):
            if st.value is None:
                _fail(info, st, "assignment", "an annotated name needs a value")
            _check_target(info, st.target)
            _check_expr(info, st.value)
        elif isinstance(st, ast.If):
            _check_expr(info, st.test)
            if not st.body or not isinstance(st.body[-1], ast.Return):
                _fail(info, st, "if statement without return", "each branch must end in return")
            _check_block(info, st.body, top=False)
            if st.orelse:
                _check_block(info, st.orelse, top=False)
        elif isinstance(st, ast.Pass):
            pass
        elif isinstance(st, ast.Expr):
            _fail(info, st, "expression statement", "an expression whose value is discarded")
        else:
            _fail(info, st, type(st).__name__.lower() + " statement")
        if last and top and not isinstance(st, (ast.Return, ast.If)):
            _fail(info, st, "missing return", "a relation must end with return")


def _check_target(info: RelationInfo, t: ast.expr) -> None:
    if isinstance(t, ast.Name):
        return
    if isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            _check_target(info, e)
        return
    _fail(info, t, "assignment", "only local names can be assigned (records are read-only)")


def _check_expr(info: RelationInfo, node: ast.expr) -> None:
    for sub in ast.walk(node):
        construct = _EXPRESSIONS.get(type(sub))
        if construct is not None:
            _fail(info, sub, construct)
    for sub in ast.walk(node):
        if isinstance(sub, ast.BinOp) and type(sub.op) in _BAD_BINOPS:
            _fail(info, sub, _BAD_BINOPS[type(sub.op)])
        if isinstance(sub, ast.UnaryOp) and isinstance(sub.op, ast.Invert):
            _fail(info, sub, "bitwise operator")
        if isinstance(sub, ast.Compare):
            for op, left, right in zip(
                sub.ops, [sub.left, *sub.comparators[:-1]], sub.comparators, strict=True
            ):
                if isinstance(op, (ast.Is, ast.IsNot)) and not (_is_none(right) or _is_none(left)):
                    _fail(info, sub, "`is` comparison with a non-None value", "use ==")
        if isinstance(sub, ast.Call):
            f = sub.func
            if isinstance(f, ast.Name):
                if f.id not in SUPPORTED_CALLS | DATE_CONSTRUCTORS | NUMBER_FUNCTIONS:
                    _fail(info, sub, f"call to {f.id}()", "only the supported builtins")
            elif isinstance(f, ast.Attribute):
                allowed = (
                    SUPPORTED_METHODS
                    | DATE_METHODS
                    | DATE_CONSTRUCTORS
                    | NUMBER_FUNCTIONS
                    | STR_METHODS
                )
                if f.attr not in allowed:
                    _fail(
                        info,
                        sub,
                        f"call to {ast.unparse(f)}()",
                        "methods other than get/keys/values/items/count/index, "
                        "startswith/endswith and the date methods "
                        "weekday/isoweekday/toordinal/total_seconds",
                    )
            else:
                _fail(info, sub, "call of a computed function")
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Name)
            and sub.value.id in SUPPORTED_CALLS
        ):
            _fail(info, sub, "attribute access on a function", f"{sub.value.id}.{sub.attr}")
        if isinstance(sub, (ast.GeneratorExp, ast.ListComp)):
            for g in sub.generators:
                if g.is_async:
                    _fail(info, g, "async comprehension")
                _check_target(info, g.target)
        if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Slice):
            if sub.slice.step is not None:
                _fail(info, sub, "slice with a step", "slices with a step are not supported")


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
