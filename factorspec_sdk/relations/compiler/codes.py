"""The str / Literal / Enum value kind: `SCode`, an Int *code* per value.

The rules of one value kind: its leaf variables (`str_leaf`, `str_choice_leaf`), how a
constant becomes a code (`code_of`, through the spec's `InternTable`), and its equality
(`eq_code`), membership in a constant collection (`member_codes`), truthiness
(`truthy_code`) and merging under a condition (`ite_code`). A str value is the code of the
string in the intern table (0: any other string); an int Enum is the member's int value.
An Enum whose members are also str/int (`value_like`) compares equal to raw values.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, cast

import z3

from factorspec_sdk.relations.compiler.terms import Cond, in_codes, mk_eq, mk_ite
from factorspec_sdk.relations.compiler.values import SCode, V
from factorspec_sdk.relations.layout import LeafLayout, Path

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import RelationCompiler

__all__ = [
    "code_of",
    "eq_code",
    "ite_code",
    "member_codes",
    "str_choice_leaf",
    "str_leaf",
    "truthy_code",
    "value_like",
]


def value_like(t: type[enum.Enum]) -> bool:
    """An Enum whose members compare equal to their raw values (str/int mixins)."""
    return issubclass(t, (str, int))


def str_leaf(cx: RelationCompiler, path: Path) -> V:
    """The code of a free str leaf (its domain is the intern table)."""
    rec = cx.var(path, "str", free_str=True)
    return SCode(cast(z3.ArithRef, rec.term), None, True)


def str_choice_leaf(cx: RelationCompiler, path: Path, node: LeafLayout) -> V:
    """The code of a Literal/Enum leaf of strs (its values are interned)."""
    for c in node.choices:
        cx.strings.code(cast(str, c))
    rec = cx.var(path, "str", choices=node.choices, enum_type=node.enum_type)
    return SCode(cast(z3.ArithRef, rec.term), node.enum_type, True)


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
    """``bool(v)``: an Enum member is truthy; a str unless it is empty."""
    if v.enum_type is not None:
        return True
    return v.e != cx.strings.code("")


def ite_code(cx: RelationCompiler, c: Cond, a: V, b: V) -> V | None:
    """``a if c else b`` as one code, or None when one side is not of this kind."""
    ea, eb = code_of(cx, a), code_of(cx, b)
    if ea is None or eb is None:
        return None
    ta = a.enum_type if isinstance(a, SCode) else None
    tb = b.enum_type if isinstance(b, SCode) else None
    strs = a.strs if isinstance(a, SCode) else cast(SCode, b).strs
    return SCode(cast(z3.ArithRef, mk_ite(c, ea, eb)), ta if ta is tb else None, strs)


def eq_code(cx: RelationCompiler, a: SCode, b: V) -> Cond:
    """``a == b`` for a code ``a`` (Enum types must match unless they are value-like)."""
    if isinstance(b, SCode):
        if a.strs != b.strs:
            return False
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
    if isinstance(val, bool) or not isinstance(val, int):
        return False
    return mk_eq(a.e, val)


def member_codes(cx: RelationCompiler, x: SCode, elems: list[object]) -> Cond:
    """``x in elems`` for a plain str code: its code is one of the strs' codes."""
    codes = sorted({cx.strings.code(e) for e in elems if isinstance(e, str)})
    codes += sorted(
        {
            cx.strings.code(e.value)
            for e in elems
            if isinstance(e, enum.Enum) and isinstance(e.value, str) and value_like(type(e))
        }
    )
    return in_codes(x.e, sorted(set(codes)))
