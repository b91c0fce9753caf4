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
import builtins
import inspect
from typing import TYPE_CHECKING, NoReturn

from factorspec_sdk.errors import RelationDefinitionError

if TYPE_CHECKING:
    from factorspec_sdk.relations.decorator import RelationInfo

__all__ = [
    "CALLABLE",
    "HINTS",
    "METHODS",
    "DATE_CONSTRUCTORS",
    "NUMBER_FUNCTIONS",
    "DATE_METHODS",
    "STR_METHODS",
    "SUPPORTED_CALLS",
    "SUPPORTED_METHODS",
    "call_refusal",
    "check_syntax",
    "method_refusal",
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
        "str",
        "isinstance",
    }
)
"""Functions a relation may call (by name)."""

SUPPORTED_METHODS = frozenset({"get", "keys", "values", "items", "count", "index"})
"""Methods a relation may call on constants (context values)."""

DATE_CONSTRUCTORS = frozenset(
    {"date", "datetime", "time", "timedelta", "timezone", "Decimal", "UUID"}
)
"""``datetime.date``/``datetime``/``time``/``timedelta``, ``decimal.Decimal`` and
``uuid.UUID``, called by name or as ``dt.date(...)``/``decimal.Decimal(...)`` (all but
``timedelta`` of constants only); ``.date()`` and ``.time()`` of a datetime pass as these
names too."""

NUMBER_FUNCTIONS = frozenset({"isclose"})
"""``math.isclose``, called by name or as ``math.isclose(...)``."""

DATE_METHODS = frozenset({"weekday", "isoweekday", "toordinal", "total_seconds"})

STR_METHODS = frozenset({"startswith", "endswith"})
"""``str`` methods a relation may call on a field (with constant arguments) or a constant."""

_DOCS = "the docs list them with examples: Writing relations, Supported expressions"

CALLABLE = (
    "relations call all, any, sum, len, min, max, zip, enumerate, range, abs, bool, list, "
    "tuple, round, int, float, str (of constants), isinstance, distinct, math.isclose and "
    f"date/datetime/time/timedelta/Decimal/UUID(...) ({_DOCS})"
)
"""The functions a relation may call, for the errors that refuse a call."""

METHODS = (
    "relations call .get/.keys/.values/.items/.count/.index of context values and dict "
    "fields, .startswith/.endswith of strings, .date/.time/.weekday/.isoweekday/.toordinal "
    f"of dates and datetimes and .total_seconds of timedeltas ({_DOCS})"
)
"""The methods a relation may call, for the errors that refuse a method."""

_CALL_HINTS: dict[str, str] = {
    "sorted": "for 'in order', compare neighbours: all(a <= b for a, b in zip(xs, xs[1:]))",
    "set": "distinct(...) says no two are equal; `x in (a, b)` tests membership",
    "frozenset": "distinct(...) says no two are equal; `x in (a, b)` tests membership",
    "map": "use a generator expression: sum(f(x) for x in xs)",
    "filter": "use a generator expression with if: all(... for x in xs if x.ok)",
    "reversed": "index from the end (xs[-1]) or compare neighbours with zip(xs, xs[1:])",
    "pow": "use ** with a constant exponent",
    "divmod": "use // and %",
    "getattr": "write the attribute itself (self.a)",
    "hasattr": "every field is there; test an Optional with `is None`",
    "next": "index the list (xs[0]) or use any(...)",
    "print": "a relation only returns a bool",
    "dict": "read the context's dicts, or a dict field, as they are",
}

_METHOD_HINTS: dict[str, str] = {
    "combine": "to tie a datetime to a date and a time, compare its parts: "
    "x.date() == d and x.time() == t",
    "replace": "compare a date's or datetime's parts (x.year == 2026, x.time() == t), or "
    "whole strings",
    "isoformat": "compare dates and times as values, and their parts (.year, .hour)",
    "strftime": "compare dates and times as values, and their parts (.year, .hour)",
    "timestamp": "compare the datetimes, or their difference (b - a <= timedelta(hours=2))",
    "fromisoformat": "a relation is compiled for each context: write a constant "
    "(dt.date(2026, 1, 1)) or take the value from the context",
    "today": "a relation is compiled for each context: pass today's date in the context",
    "now": "a relation is compiled for each context: pass the time in the context",
    "lower": "compare whole strings: with each spelling (self.x in ('eu', 'EU')), or make "
    "the field a Literal of its spellings",
    "upper": "compare whole strings: with each spelling (self.x in ('eu', 'EU')), or make "
    "the field a Literal of its spellings",
    "strip": "compare whole strings, or give the field a Literal of its values",
    "split": "compare whole strings, their len() and startswith()/endswith() of constants, "
    "or make each part a field of its own",
    "find": "startswith()/endswith() of constants, or compare whole strings",
    "join": "relations compare strings; they do not build them",
    "format": "relations compare strings; they do not build them",
    "floor": "int(x) (toward zero) or round(x) for a whole number",
    "ceil": "int(x) (toward zero) or round(x) for a whole number",
    "trunc": "int(x) (toward zero)",
    "sqrt": "compare squares instead: x * x <= y for sqrt(y) >= x",
    "fabs": "abs(x)",
    "fsum": "sum(...)",
    "append": "a relation reads the record and never changes it; build lists with a comprehension",
    "sort": "for 'in order', compare neighbours: all(a <= b for a, b in zip(xs, xs[1:]))",
    "model_dump": "read the fields themselves",
}


def _resolve(info: RelationInfo, name: str) -> object:
    """What ``name`` is in the relation's module (a closure variable, a global, a builtin)."""
    func = info.func
    code = getattr(func, "__code__", None)
    closure = getattr(func, "__closure__", None)
    if code is not None and closure and name in code.co_freevars:
        try:
            return closure[code.co_freevars.index(name)].cell_contents
        except ValueError:
            return None
    globs = getattr(func, "__globals__", {})
    return globs[name] if name in globs else getattr(builtins, name, None)


def call_refusal(name: str, value: object) -> str:
    """Why a relation cannot call ``name`` (bound to ``value``) and what to write instead."""
    if inspect.isfunction(value):
        return (
            f"{name}() is a function of your own; a relation is compiled from its own source "
            "and calls into other functions are not followed: inline it (write its return "
            "expression in place of the call, with the arguments put in); " + CALLABLE
        )
    if isinstance(value, type):
        return (
            f"{name}(...) builds an object; relations compare values: compare the fields "
            "or constants you would build it from; " + CALLABLE
        )
    hint = _CALL_HINTS.get(name)
    return (f"{hint}; " if hint else "") + CALLABLE


def method_refusal(method: str, call: ast.Call | None = None, compared: str = "") -> str:
    """Why a relation cannot call the method ``method`` and what to write instead.

    ``call``: the call (its arguments make the hint concrete); ``compared``: the expression
    it is compared with by ``==``, if any.
    """
    hint = _METHOD_HINTS.get(method)
    if method == "combine" and call is not None and len(call.args) == 2:
        day, clock = (ast.unparse(a) for a in call.args)
        x = compared or "x"
        hint = (
            f"{ast.unparse(call.func)}({day}, {clock}) is the datetime at {clock} on {day}: "
            f"compare a datetime with it by its parts, {x}.date() == {day} and "
            f"{x}.time() == {clock}"
        )
    return (
        f".{method}() is not a method relations call"
        + (f"; {hint}" if hint else "")
        + ("; " + METHODS)
    )


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

HINTS: dict[str, str] = {
    "while loop": "use all()/any()/sum() over a generator expression",
    "for loop": "use all()/any()/sum() over a generator expression",
    "lambda": "write the expression inline",
    "nested function": "write the expression inline",
    "f-string": "relations compare values; they do not build strings",
    "try statement": "an exception inside a relation already means it does not hold",
    "raise statement": "return False where the record is invalid",
    "assert statement": "return the condition (return cond) instead of asserting it",
    "with statement": "a relation only reads values; drop the with block",
    "import": "import at module level",
    "class definition": "define classes at module level",
    "global statement": "read module constants directly; a relation assigns only local names",
    "nonlocal statement": "a relation assigns only its own local names",
    "del statement": "drop it: local names need no deleting",
    "match statement": "use if/return chains, or `x in (...)` for a set of values",
    "assignment": "bind each local name once with `name = expr`",
    "assignment expression": "bind the name on a line of its own (`name = expr`)",
    "await": "a relation is a plain function that returns a bool",
    "yield": "a relation is a plain function that returns a bool",
    "set comprehension": "use a list comprehension, and distinct(...) for 'no repeats'",
    "dict comprehension": "read the context's dicts or a dict field as they are",
    "starred expression": "pass the items one by one",
    "bitwise operator": "use and/or/not on bools and arithmetic on ints",
    "@ operator": "write the sum of products: sum(a * b for a, b in zip(xs, ys))",
    "async comprehension": "use a plain comprehension",
    "slice with a step": "filter by index instead: all(... for i, x in enumerate(xs) "
    "if i % 2 == 0)",
    "attribute access on a function": "call the function by its name",
    "expression statement": "bind it (name = expr) or return it",
    "unreachable code": "remove the statements after return",
    "extra decorators": "stack no other decorator on a relation",
    "empty relation": "end it with `return <condition>`",
    "return without a value": "return the condition: `return <condition>`",
    "missing return": "end it with `return <condition>`",
    # refused when the spec is compiled (`RelationCompiler.fail`)
    "keyword unpacking": "pass the keywords one by one",
    "sum of optional values": "give the field a default instead of None (n: int = 0)",
    "sum of optional floats": "give the field a default instead of None (x: float = 0.0)",
    "sum/min/max of optional floats": "give the field a default instead of None (x: float = 0.0)",
    "min() of optional values": "give the field a default instead of None (n: int = 0)",
    "max() of optional values": "give the field a default instead of None (n: int = 0)",
    "sum of strings": "sum numbers; compare strings with == or `in`",
    "min() of strings": "compare strings with == or `in`; order numbers",
    "max() of strings": "compare strings with == or `in`; order numbers",
    "zip() with keywords": "drop strict= and compare the lengths: len(xs) == len(ys) and ...",
    "enumerate() start": "enumerate(xs, 1), or add the offset to the index: i + self.k",
    "range() over an unbounded value": "iterate the list itself: enumerate(xs), range(len(xs))",
    "min() of floats with default=": "guard the empty case: (min(xs) if len(xs) > 0 else 0.0)",
    "max() of floats with default=": "guard the empty case: (max(xs) if len(xs) > 0 else 0.0)",
    "min() default": "give an int default, or guard the empty case: (min(xs) if xs else 0)",
    "max() default": "give an int default, or guard the empty case: (max(xs) if xs else 0)",
    "min() with key=": "take the min of the key itself: min(s.day for s in self.stays)",
    "max() with key=": "take the max of the key itself: max(s.day for s in self.stays)",
    "zip over a filtered sequence": "zip the lists and filter inside: all(... for a, b in "
    "zip(xs, ys) if a.ok)",
    "Decimal() of record values": "a Decimal field is a Decimal already; Decimal() takes "
    'constants: Decimal("0.01"), Decimal(str(ctx.rate))',
    "len() of a string value": "take len() of the str field itself",
    "isinstance() of a field value": "the field's type is known; test an Optional with `is None`",
    "mixed Literal": "split it into fields of one value type each",
    "min/max of Decimals and floats": "give the values one type: Decimal(str(x)) of a float "
    "constant, or Decimal fields",
    "truth of a computed float": "compare it with a tolerance instead: abs(x) > 0.005",
    "set of record values": "use a tuple: self.a in (self.b, self.c)",
    "dict unpacking": "write the entries one by one",
    "dict of record values": "compare the values directly (a dict display holds constants)",
    "sequence arithmetic": "iterate each list: all(... for x in self.a) and all(... for x in "
    "self.b)",
    "ordering comparison of strings": "compare strings with == or `in` (self.x in ('a', 'b'))",
    "ordering comparison of sequences": "compare item by item: self.a[0] < self.b[0]",
    "membership in a field value": "test membership in a tuple or a list: x in (a, b)",
    "substring test on a field": 'startswith()/endswith() of constants: self.name.startswith("x")',
    "string arithmetic": "compare whole strings (==, in, startswith, len)",
    "indexing": "index lists (xs[0]), tuples and dicts (ctx.d[self.k])",
    "indexing a string": "compare the whole string, or startswith() of a constant",
    "indexing a generator": "index a list comprehension: [x for x in xs if x.ok][0]",
    "slicing": "slice lists: self.xs[1:]",
    "slicing a generator": "slice the list, then iterate it: (x.a for x in self.xs[1:])",
    "slicing a filtered list": "slice the list before filtering it",
    "slice with a bound read from the record": "filter by index instead: all(... for i, x in "
    "enumerate(xs) if i < self.k)",
    "iteration over a field value": "iterate a list field, or a dict field's .items()",
    "iteration": "iterate a list, a tuple, a dict or range()",
    "unpacking": "unpack a tuple of that many values, or index it (p[0], p[1])",
    "power with a non-constant exponent": "use a constant exponent (x ** 2), or multiply",
}
"""What to write instead, per construct (appended to the message in parentheses), for the
refusals of the syntax check and of the compiler (`RelationCompiler.fail`)."""


def _fail(info: RelationInfo, node: ast.AST, construct: str, message: str = "") -> NoReturn:
    hint = HINTS.get(construct, "")
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
                    _fail(info, sub, f"call to {f.id}()", call_refusal(f.id, _resolve(info, f.id)))
            elif isinstance(f, ast.Attribute):
                allowed = (
                    SUPPORTED_METHODS
                    | DATE_METHODS
                    | DATE_CONSTRUCTORS
                    | NUMBER_FUNCTIONS
                    | STR_METHODS
                )
                if f.attr not in allowed:
                    message = method_refusal(f.attr, sub, _compared_with(node, sub))
                    _fail(info, sub, f"call to {ast.unparse(f)}()", message)
            else:
                _fail(
                    info,
                    sub,
                    "call of a computed function",
                    "a relation calls functions by their name; " + CALLABLE,
                )
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


def _compared_with(tree: ast.expr, call: ast.Call) -> str:
    """The source of what ``call`` is compared with by ``==`` in ``tree`` ("" if nothing)."""
    for sub in ast.walk(tree):
        if isinstance(sub, ast.Compare) and len(sub.ops) == 1 and isinstance(sub.ops[0], ast.Eq):
            left, right = sub.left, sub.comparators[0]
            if right is call or left is call:
                return ast.unparse(left if right is call else right)
    return ""


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
