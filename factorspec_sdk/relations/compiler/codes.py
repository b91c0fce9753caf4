"""The str / Literal / Enum value kind: `SCode`, an Int *code* per value.

The rules of one value kind: its leaf variables (`str_leaf`, `str_choice_leaf`), how a
constant becomes a code (`code_of`, through the spec's `InternTable`), and its equality
(`eq_code`), membership in a constant collection (`member_codes`), truthiness
(`truthy_code`) and merging under a condition (`ite_code`). A str value is the code of the
string in the intern table (0: any other string); an int Enum is the member's int value.
An Enum whose members are also str/int (`value_like`) compares equal to raw values. The
``len()`` of a free str leaf is a length variable of its own (`str_length`), tied to the code
where relations read both (`length_links`).
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn, cast

import z3

from factorspec_sdk.relations.affixes import Affix, open_profile, profile
from factorspec_sdk.relations.compiler.records import OTHER_CODE, InternTable, VarRecord
from factorspec_sdk.relations.compiler.terms import (
    AND,
    OR,
    Cond,
    in_codes,
    mk_cmp,
    mk_eq,
    mk_ite,
    to_bool,
)
from factorspec_sdk.relations.compiler.values import SCode, V
from factorspec_sdk.relations.kinds import VarKind
from factorspec_sdk.relations.layout import (
    LeafLayout,
    Path,
    affix_name,
    length_name,
    path_name,
    same_name,
)
from factorspec_sdk.relations.variables import AFFIX, SAME, text_length_variable

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import RelationCompiler

__all__ = [
    "affix",
    "affix_links",
    "code_of",
    "decided_by_codes",
    "eq_code",
    "ite_code",
    "length_links",
    "text_links",
    "member_codes",
    "same_text",
    "str_choice_leaf",
    "str_leaf",
    "str_length",
    "truthy_code",
    "value_like",
]


def value_like(t: type[enum.Enum]) -> bool:
    """An Enum whose members compare equal to their raw values (str/int mixins)."""
    return issubclass(t, (str, int))


def str_leaf(cx: RelationCompiler, path: Path, node: LeafLayout) -> V:
    """The code of a free str leaf (its domain is the intern table).

    The code variable counts as read only once the code is used (`_read`): a relation that
    reads the leaf only through ``len()`` reads its length variable alone, and such a string
    needs no finite domain.
    """
    rec = cx.leaf_var(path, node, read=False)
    e = cast(z3.ArithRef, rec.term)
    return SCode(e, None, True, lambda: _leaf_length(cx, path), (rec.name,))


def _read(cx: RelationCompiler, v: V) -> None:
    """Count the free str codes in ``v`` as read (the code itself enters the formula)."""
    if isinstance(v, SCode):
        for name in v.unread:
            cx.mark_read(name)


def _leaf_length(cx: RelationCompiler, path: Path) -> z3.ArithRef:
    """The length variable of a free str leaf, in characters.

    Its bounds are the leaf's ``min_length`` and its ``max_length`` (else
    `DEFAULT_MAX_STRING_LENGTH`).
    """
    leaf = cx.node_at(path)
    assert isinstance(leaf, LeafLayout)
    rec = cx.var(path, text_length_variable(leaf), name=length_name(path))
    return cast(z3.ArithRef, rec.term)


def str_length(cx: RelationCompiler, v: SCode, node: ast.AST) -> z3.ArithRef | int:
    """``len(v)`` of a str value, in characters.

    A free str leaf's length variable, a Literal's lengths by value, or an If-chain of those
    for a value chosen by conditions.

    ``len()`` of an Enum member is refused (Python's ``len`` of a plain Enum raises).
    """
    if v.length is None:
        cx.fail(
            "len() of a string value",
            "len() applies to str fields, Literal fields of strs and choices among them "
            "(not to Enum members)",
            node,
        )
    return v.length()


def length_links(
    strings: InternTable, records: Mapping[str, VarRecord]
) -> list[tuple[str, frozenset[str], z3.BoolRef]]:
    """Factors that tie a free str's code to its length where relations read both.

    ``code == c`` implies ``len == len(strings[c])`` for every interned string ``c``; the
    code of any other string (`OTHER_CODE`) leaves the length free, except that it cannot be
    0 when ``""`` is interned (the only text of length 0 is then a named one). Returns
    (factor name, variables, formula) per str.
    """
    codes = {r.path: r for r in records.values() if r.kind == VarKind.STR and r.free_str}
    out: list[tuple[str, frozenset[str], z3.BoolRef]] = []
    for rec in records.values():
        code = codes.get(rec.path) if rec.kind == VarKind.STRLEN else None
        if code is None:
            continue
        e, n = cast(z3.ArithRef, code.term), cast(z3.ArithRef, rec.term)
        parts = [
            z3.Implies(e == c, n == len(s))
            for c, s in enumerate(strings.strings)
            if c != OTHER_CODE
        ]
        if "" in strings.codes:
            parts.append(z3.Implies(e == OTHER_CODE, n > 0))
        formula = z3.And(*parts) if parts else z3.BoolVal(True)
        out.append((f"length of {path_name(rec.path)}", frozenset({code.name, rec.name}), formula))
    return out


def str_choice_leaf(cx: RelationCompiler, path: Path, node: LeafLayout) -> V:
    """The code of a Literal/Enum leaf of strs (its values are interned)."""
    for c in node.choices:
        cx.strings.code(cast(str, c))
    rec = cx.leaf_var(path, node)
    e = cast(z3.ArithRef, rec.term)
    if node.enum_type is not None:
        return SCode(e, node.enum_type, True)
    choices = [cast(str, c) for c in node.choices]

    def length() -> z3.ArithRef | int:
        out: z3.ArithRef | int = len(choices[-1])
        for c in reversed(choices[:-1]):
            out = cast(z3.ArithRef, mk_ite(mk_eq(e, cx.strings.code(c)), len(c), out))
        return out

    return SCode(e, None, True, length)


def code_of(cx: RelationCompiler, v: V) -> z3.ArithRef | int | None:
    """The code of a code value or a str/str-Enum constant, or None."""
    if isinstance(v, SCode):
        return v.e
    if isinstance(v, str):
        return cx.strings.code(v)
    if isinstance(v, enum.Enum) and isinstance(v.value, str):
        return cx.strings.code(v.value)
    return None


def truthy_code(cx: RelationCompiler, v: SCode) -> Cond:
    """``bool(v)``: an Enum member is truthy; a str unless it is empty.

    For a value that holds free str leaves, that is ``len(v) > 0``: it reads their lengths,
    not their codes, so ``if self.subtitle:`` needs no finite domain either.
    """
    if v.enum_type is not None:
        return True
    if v.unread and v.length is not None:
        return mk_cmp(">", v.length(), 0)
    _read(cx, v)
    return v.e != cx.strings.code("")


def ite_code(cx: RelationCompiler, c: Cond, a: V, b: V) -> V | None:
    """``a if c else b`` as one code, or None when one side is not of this kind."""
    ea, eb = code_of(cx, a), code_of(cx, b)
    if ea is None or eb is None:
        return None
    ta = a.enum_type if isinstance(a, SCode) else None
    tb = b.enum_type if isinstance(b, SCode) else None
    strs = a.strs if isinstance(a, SCode) else cast(SCode, b).strs
    la, lb = _length_of(a), _length_of(b)
    length = None
    if la is not None and lb is not None:

        def length() -> z3.ArithRef | int:
            return mk_ite(c, la(), lb())

    e = cast(z3.ArithRef, mk_ite(c, ea, eb))
    unread = tuple(dict.fromkeys(_unread(a) + _unread(b)))
    return SCode(e, ta if ta is tb else None, strs, length, unread)


def _unread(v: V) -> tuple[str, ...]:
    return v.unread if isinstance(v, SCode) else ()


def _length_of(v: V) -> Callable[[], z3.ArithRef | int] | None:
    """How to make ``len(v)`` of a str value, or None (an Enum, or an int code)."""
    if isinstance(v, SCode):
        return v.length
    if isinstance(v, str):
        n = len(v)
        return lambda: n
    return None


def eq_code(cx: RelationCompiler, a: SCode, b: V, node: ast.AST | None = None) -> Cond:
    """``a == b`` for a code ``a`` (Enum types must match unless they are value-like).

    ``node``: the comparison (or ``distinct()`` call) it comes from, for errors.
    """
    _read(cx, a)
    _read(cx, b)
    if isinstance(b, SCode):
        if a.strs != b.strs:
            return False
        if a.strs and a.unread and b.unread:  # both may be texts no relation names
            return same_text(cx, a, b, node)
        ta, tb = a.enum_type, b.enum_type
        if ta is not None and tb is not None and ta is not tb and not value_like(ta):
            return False
        if (ta is None) != (tb is None):
            typed = ta or tb
            assert typed is not None
            if not value_like(typed):
                return False
        return mk_eq(a.e, b.e)
    if isinstance(b, enum.Enum):
        if a.enum_type is not None and not isinstance(b, a.enum_type):
            if not (value_like(a.enum_type) and value_like(type(b))):
                return False
        elif a.enum_type is None and not value_like(type(b)):
            return False
        val = b.value
    else:
        if a.enum_type is not None and not value_like(a.enum_type):
            return False
        val = b
    if a.strs:
        if not isinstance(val, str):
            return False
        return mk_eq(a.e, cx.strings.code(val))
    if isinstance(val, z3.ArithRef) and val.is_int():  # an int value: an IntEnum equals it
        return mk_eq(a.e, val)
    if isinstance(val, bool) or not isinstance(val, int):
        return False
    return mk_eq(a.e, val)


def member_codes(cx: RelationCompiler, x: SCode, elems: list[object]) -> Cond:
    """``x in elems`` for a plain str code: its code is one of the strs' codes."""
    _read(cx, x)
    codes = sorted({cx.strings.code(e) for e in elems if isinstance(e, str)})
    codes += sorted(
        {
            cx.strings.code(e.value)
            for e in elems
            if isinstance(e, enum.Enum) and isinstance(e.value, str) and value_like(type(e))
        }
    )
    return in_codes(x.e, sorted(set(codes)))


def same_text(cx: RelationCompiler, a: SCode, b: SCode, node: ast.AST | None = None) -> Cond:
    """``a == b`` for two free str leaves: the Bool ``same(a, b)``.

    Two texts no relation names share the code `OTHER_CODE` whether they are equal or not,
    so their codes cannot tell; ``same(a, b)`` says whether the texts are equal, and
    `text_links` ties it to the codes and lengths. The writer sets it from the texts once
    both are written. A value that may be either of two leaves (``a if c else b``) compared
    with another free leaf is refused.
    """
    leaves = [_free_leaf(cx, v) for v in (a, b)]
    if leaves[0] is None or leaves[1] is None:
        cx.fail(
            "== between computed strings",
            "== and != compare a free str field with another str field or a constant, not "
            "a value chosen among free str fields (compare each field)",
        )
    for leaf, other in ((leaves[0], leaves[1]), (leaves[1], leaves[0])):
        assert leaf is not None and other is not None
        if _affixes_of(cx, leaf.path):
            _affix_and_same(cx, leaf.path, other.path, _equality(node), node)
    ra, rb = sorted((leaves[0], leaves[1]), key=lambda r: _order_key(r.path))
    if ra.name == rb.name:
        return True
    rec = cx.var(ra.path, SAME, name=same_name(ra.path, rb.path), other=rb.path)
    return cast(z3.BoolRef, rec.term)


def _order_key(path: Path) -> tuple[tuple[int, object], ...]:
    return tuple((0, p) if isinstance(p, int) else (1, p) for p in path)


def _free_leaf(cx: RelationCompiler, v: SCode) -> VarRecord | None:
    """The free str leaf whose code ``v`` is, or None (a value chosen among several)."""
    if len(v.unread) != 1:
        return None
    rec = cx.vars[v.unread[0]]
    return rec if rec.term.eq(v.e) else None


SETTLE_CHECK_MS = 2000
"""Time limit of each check of `decided_by_codes` (a check that runs out keeps the variable)."""


def decided_by_codes(
    cx: RelationCompiler, formulas: Sequence[tuple[frozenset[str], z3.BoolRef]]
) -> dict[str, z3.BoolRef]:
    """The ``same(a, b)`` variables that code equality decides, with that equality.

    Where one of the two leaves can never hold a text no relation names (the relations it
    takes part in rule `OTHER_CODE` out, as ``city in context.cities`` does), the texts are
    equal exactly when the codes are, and ``same(a, b)`` is just ``code(a) == code(b)``. The
    relation formulas (given as their variables and formula) that read the leaves are asked
    for a record where some leaf still open holds such a text, until none is (one check
    where the relations name every text). The variables returned no longer count as read:
    substitute them.
    """
    pairs = cx.read_of(VarKind.SAME)
    if not pairs:
        return {}
    leaves = {path_name(p): p for v in pairs for p in (v.path, v.other) if p is not None}
    s = z3.SimpleSolver()
    s.set("timeout", SETTLE_CHECK_MS)
    s.add(*(f for names, f in formulas if names & leaves.keys()))
    other = {n: z3.And(to_bool(cx.vars[n].exists), cx.vars[n].term == OTHER_CODE) for n in leaves}
    open_ = dict(other)
    found = z3.sat
    while open_:  # each model that has a leaf's text unnamed rules that leaf out
        s.push()
        s.add(z3.Or(*open_.values()))
        found = s.check()
        m = s.model() if found == z3.sat else None
        s.pop()
        if m is None:  # unsat: the rest are always named (unknown: keep them all)
            break
        for n in [n for n, c in open_.items() if z3.is_true(m.eval(c, model_completion=True))]:
            del open_[n]
    named = set() if found == z3.unknown else {leaves[n] for n in open_}
    out: dict[str, z3.BoolRef] = {}
    for v in pairs:
        assert v.other is not None
        if v.path in named or v.other in named:
            a, b = cx.vars[path_name(v.path)].term, cx.vars[path_name(v.other)].term
            out[v.name] = cast(z3.BoolRef, a == b)
    cx.forget(out)
    return out


def text_links(cx: RelationCompiler) -> list[tuple[str, frozenset[str], z3.BoolRef]]:
    """Factors that tie each ``same(a, b)`` to the texts' codes and lengths.

    Call once every relation is compiled. Leaves compared with each other form groups;
    every pair of a group gets its ``same`` variable (so that equality is transitive over
    the group, by one implication per triple), and each leaf its length variable (a text
    equal to another has its length, within both leaves' bounds). Per pair:
    ``same`` implies equal codes and lengths; equal codes of named texts imply ``same``;
    two empty texts are the same. Returns (factor name, variables, formula) per group.
    """
    pairs = cx.read_of(VarKind.SAME)
    parent: dict[Path, Path] = {}

    def find(p: Path) -> Path:
        while parent.setdefault(p, p) != p:
            p = parent[p]
        return p

    for v in pairs:
        assert v.other is not None
        parent[find(v.path)] = find(v.other)
    groups: dict[Path, list[Path]] = {}
    for p in list(parent):
        groups.setdefault(find(p), []).append(p)
    out: list[tuple[str, frozenset[str], z3.BoolRef]] = []
    for members in groups.values():
        members.sort(key=_order_key)
        codes = {p: cx.vars[path_name(p)] for p in members}
        lengths = {p: _leaf_length(cx, p) for p in members}
        same: dict[tuple[Path, Path], z3.BoolRef] = {}
        names = {codes[p].name for p in members} | {length_name(p) for p in members}
        for i, p in enumerate(members):
            for q in members[i + 1 :]:
                rec = cx.var(p, SAME, name=same_name(p, q), other=q)
                same[p, q] = cast(z3.BoolRef, rec.term)
                names.add(rec.name)
        cx.keep_read()
        parts: list[z3.BoolRef] = []
        for (p, q), st in same.items():
            cp, cq = cast(z3.ArithRef, codes[p].term), cast(z3.ArithRef, codes[q].term)
            lp, lq = lengths[p], lengths[q]
            parts.append(z3.Implies(st, z3.And(cp == cq, lp == lq)))
            parts.append(z3.Implies(z3.And(cp == cq, cp != OTHER_CODE), st))
            parts.append(z3.Implies(z3.And(lp == 0, lq == 0), st))
        for i, p in enumerate(members):
            for j in range(i + 1, len(members)):
                for k in range(j + 1, len(members)):
                    q, r = members[j], members[k]
                    pq, qr, pr = same[p, q], same[q, r], same[p, r]
                    parts += [
                        z3.Implies(z3.And(pq, qr), pr),
                        z3.Implies(z3.And(pq, pr), qr),
                        z3.Implies(z3.And(pr, qr), pq),
                    ]
        title = ", ".join(path_name(p) for p in members)
        out.append((f"texts of {title}", frozenset(names), z3.And(*parts)))
    return out


def affix(cx: RelationCompiler, v: SCode, method: str, args: list[V], node: ast.AST) -> Cond:
    """``v.startswith(c)`` / ``v.endswith(c)`` for a constant ``c`` (or a tuple of them).

    Of a Literal or str-Enum value (or a choice among them): the codes whose text has the
    affix. Of a free str leaf: a Bool ``startswith(leaf, "c")`` of its own, which
    `affix_links` ties to the leaf's code and length (a named text has its affixes; any
    other text those of some text of its length), so the leaf needs no finite domain.
    """
    arg = args[0] if len(args) == 1 else None
    consts = (arg,) if isinstance(arg, str) else arg
    if not isinstance(consts, tuple) or not consts or not all(isinstance(c, str) for c in consts):
        cx.fail(
            f"call to {method}()",
            f"{method}() of a str field takes one constant: a str or a tuple of strs",
            node,
        )
    texts = cast(tuple[str, ...], consts)
    if not v.strs or (v.enum_type is not None and not value_like(v.enum_type)):
        cx.fail(f"{method}() of an Enum member", f"{method}() of a str or str-Enum value", node)
    _read(cx, v)
    if not v.unread:  # a Literal / str-Enum value: its codes are all interned already
        return OR(
            *(
                mk_eq(v.e, code)
                for k, code in cx.strings.codes.items()
                if any(getattr(k, method)(c) for c in texts)
            )
        )
    leaf = _free_leaf(cx, v)
    if leaf is None:
        cx.fail(
            f"{method}() of a computed string",
            f"{method}() of a value chosen among free str fields (call it on each field)",
            node,
        )
    compared = _compared_with(cx, leaf.path)
    if compared is not None:
        _affix_and_same(cx, leaf.path, compared, None, node)
    out: list[Cond] = []
    for c in texts:
        name = affix_name(method, leaf.path, c)
        rec = cx.var(leaf.path, AFFIX, name=name, affix=(method, c))
        out.append(cast(z3.BoolRef, rec.term))
    return OR(*out)


def _affix_and_same(
    cx: RelationCompiler, path: Path, other: Path, equal: bool | None, node: ast.AST | None
) -> NoReturn:
    """Refuse a free str read both by an affix and by comparison with another free str.

    ``equal``: the comparison says the texts are equal (``==``, ``in``), differ (``!=``,
    ``distinct``), or None (not known here); the advice on which to drop follows it.
    """
    a, b = path_name(path), path_name(other)
    drop_comparison = (
        f"drop the comparison and keep the startswith()/endswith() of {a}: a text the "
        f"model writes freely rarely equals another, and an ordinary Pydantic "
        f"@model_validator can check {a} != {b} on the finished record"
    )
    drop_affix = (
        f"drop the startswith()/endswith() and keep {a} == {b}: {a} is then a copy of {b}, "
        "written as certain text, and an ordinary Pydantic @model_validator can check the "
        "affix on the finished record"
    )
    if equal is None:
        advice = f"Where they must differ (!=), {drop_comparison}; where equal (==), {drop_affix}"
    else:
        chosen = drop_affix if equal else drop_comparison
        advice = chosen[0].upper() + chosen[1:]
    cx.fail(
        "startswith/endswith of a string compared with another",
        f"{a} is read with startswith()/endswith() and compared with {b}; FactorSpec decides "
        "an affix of a free string while the model writes it and whether two free strings "
        "are equal once both are written, and cannot yet tie the two on one string (an "
        f"equal text must carry the same affix). {advice}",
        node,
    )


def _equality(node: ast.AST | None) -> bool | None:
    """Whether ``node`` says two texts are equal (True), differ (False), or None (unknown)."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        op = node.ops[0]
        if isinstance(op, (ast.Eq, ast.In)):
            return True
        if isinstance(op, (ast.NotEq, ast.NotIn)):
            return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return False if node.func.id == "distinct" else None
    return None


def _compared_with(cx: RelationCompiler, path: Path) -> Path | None:
    """The free str leaf that the one at ``path`` is compared with (a ``same`` variable)."""
    for r in cx.vars.values():
        if r.kind == VarKind.SAME and path in (r.path, r.other):
            return r.other if r.path == path else r.path
    return None


def _affixes_of(cx: RelationCompiler, path: Path) -> list[VarRecord]:
    return [r for r in cx.vars.values() if r.kind == VarKind.AFFIX and r.path == path]


def affix_links(cx: RelationCompiler) -> list[tuple[str, frozenset[str], z3.BoolRef]]:
    """Factors that tie each free str leaf's affix variables to its code and length.

    Call once every relation is compiled (the intern table is then complete). A named text
    has its own affixes. Any other text (`OTHER_CODE`) has those of some text no relation
    names of its length: with ``m`` its longest constant prefix and ``e`` its longest
    constant suffix, a text longer than ``m + e`` has a character between them that no
    constant has (the writer's alphabet is large), so it starts with exactly the prefixes of
    ``m`` and ends with exactly the suffixes of ``e``; a text no longer than ``m + e`` is
    ``m`` and ``e`` overlapped, one text whose affixes are its own (and it must be no named
    one). Returns (factor name, variables, formula) per leaf.
    """
    leaves: dict[Path, list[VarRecord]] = {}
    for r in cx.read_of(VarKind.AFFIX):
        leaves.setdefault(r.path, []).append(r)
    out: list[tuple[str, frozenset[str], z3.BoolRef]] = []
    for path, recs in leaves.items():

        def build(path: Path = path, recs: list[VarRecord] = recs) -> Cond:
            for name in (path_name(path), *(r.name for r in recs)):
                cx.mark_read(name)
            code = cast(z3.ArithRef, cx.vars[path_name(path)].term)
            length = _leaf_length(cx, path)
            affixes = [cast(Affix, r.affix) for r in recs]
            terms = [cast(z3.BoolRef, r.term) for r in recs]

            def holds(bits: tuple[bool, ...]) -> z3.BoolRef:
                return z3.And(*(t == z3.BoolVal(b) for t, b in zip(terms, bits, strict=True)))

            parts: list[Cond] = []
            for k, code_k in cx.strings.codes.items():
                parts.append(z3.Implies(code == code_k, holds(profile(k, affixes))))
            prefixes = ["", *sorted({c for m, c in affixes if m == "startswith"})]
            suffixes = ["", *sorted({c for m, c in affixes if m == "endswith"})]
            cases: list[z3.BoolRef] = []
            for pre in prefixes:
                for suf in suffixes:
                    bits = open_profile(pre, suf, affixes)
                    cases.append(z3.And(holds(bits), length > len(pre) + len(suf)))
                    for n in range(max(len(pre), len(suf)), len(pre) + len(suf) + 1):
                        shared = len(pre) + len(suf) - n
                        if pre[len(pre) - shared :] != suf[:shared]:
                            continue
                        text = pre + suf[shared:]
                        if text not in cx.strings.codes:
                            cases.append(z3.And(holds(profile(text, affixes)), length == n))
            parts.append(z3.Implies(code == OTHER_CODE, z3.Or(*cases)))
            return AND(*parts)

        formula, variables = cx.derive(build)
        out.append((f"affixes of {path_name(path)}", variables, formula))
    return out
