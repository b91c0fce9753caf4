"""The UUID value kind: ``uuid.UUID`` fields compared with ``==`` and ``!=``.

A UUID field is its 128-bit int (``uuid.UUID.int``) as a Z3 ``Int`` in ``[0, 2**128 - 1]``
(`SUuid`); a constant ``uuid.UUID("...")`` (from the context, or called in the relation
with a constant text) is a plain Python value. Two UUIDs are equal exactly when their ints
are, so ``==``, ``!=``, ``in`` and ``distinct`` over UUIDs compile exactly (`eq_uuids`), as
does ``a if c else b`` (`ite_uuids`).

Everything else is refused with `RelationDefinitionError` and what to write instead
(`refuse_uuid`): ordering (Python orders UUIDs by their ints, which for ids means nothing a
relation should say), ``min``/``max``/``sum``/``abs``, arithmetic (Python raises; the
operator rules report it through `factorspec_sdk.relations.compiler.raises`), attributes
(``.hex``, ``.int``, ``.version``...) and comparing a UUID with a str or an int (Python says
never equal whatever the text, so such a relation is a slip, not a fact).
"""

from __future__ import annotations

import ast
import uuid
from typing import TYPE_CHECKING, NoReturn, cast

import z3

from factorspec_sdk.relations.compiler.terms import Cond, mk_eq, mk_ite
from factorspec_sdk.relations.compiler.values import UNDEF, SUuid, V
from factorspec_sdk.relations.layout import LeafLayout, Path

if TYPE_CHECKING:
    from factorspec_sdk.relations.compiler.core import RelationCompiler

__all__ = ["USE", "eq_uuids", "ite_uuids", "refuse_uuid", "uuid_leaf"]

USE = (
    "relations compare UUIDs with == and != (and in, distinct) only, to another UUID field "
    'or a constant uuid.UUID("12345678-1234-5678-1234-567812345678")'
)
"""What a relation may do with a UUID, for the errors that refuse something else."""


def uuid_leaf(cx: RelationCompiler, path: Path, node: LeafLayout) -> SUuid:
    """The variable of a UUID leaf: its 128-bit int."""
    return SUuid(cast(z3.ArithRef, cx.leaf_var(path, node).term))


def _int_of(v: V) -> z3.ArithRef | int | None:
    """A UUID's int (a field's term, a constant's ``.int``); None for another value."""
    if isinstance(v, SUuid):
        return v.e
    if isinstance(v, uuid.UUID):
        return v.int
    return None


def refuse_uuid(cx: RelationCompiler, v: V, construct: str, node: ast.AST) -> None:
    """Refuse ``construct`` when ``v`` is a UUID field's value (it takes == and != only)."""
    if isinstance(v, SUuid):
        cx.fail(construct, f"{ast.unparse(node)}: {construct} is not supported; {USE}", node)


def eq_uuids(cx: RelationCompiler, a: V, b: V, node: ast.AST) -> Cond | None:
    """``a == b`` where either is a UUID field's value (None: neither is).

    Equal UUIDs have equal ints. ``None`` and an undefined value are never equal to one;
    any other type is refused (Python says never equal, whatever its value).
    """
    if not isinstance(a, SUuid) and not isinstance(b, SUuid):
        return None
    x, y = _int_of(a), _int_of(b)
    if x is not None and y is not None:
        return mk_eq(x, y)
    other = b if x is not None else a
    if other is None or other is UNDEF:
        return False
    _refuse_other(cx, other, node)


def _refuse_other(cx: RelationCompiler, other: V, node: ast.AST) -> NoReturn:
    kind = type(other).__name__ if not isinstance(other, z3.ExprRef) else "non-UUID value"
    cx.fail(
        "comparison of a UUID with another type",
        f"{ast.unparse(node)} compares a UUID with a {kind}, which Python never finds equal "
        f"whatever its value; {USE}",
        node,
    )


def ite_uuids(c: Cond, a: V, b: V) -> V | None:
    """``a if c else b`` of two UUIDs, one of them a field's value (None: not such)."""
    if not isinstance(a, SUuid) and not isinstance(b, SUuid):
        return None
    x, y = _int_of(a), _int_of(b)
    if x is None or y is None:
        return None  # a UUID or another value: the caller's choice of alternatives
    return SUuid(cast(z3.ArithRef, mk_ite(c, x, y)))
