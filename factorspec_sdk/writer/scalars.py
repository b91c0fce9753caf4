"""Bool, enum and int leaves: whole values when few are feasible, else an int digit by digit.

A bool or a Literal/Enum leaf is one option per value (the oracle's feasible values where a
relation reads it); an int too when at most `FINITE_LIMIT` values are left, else it is
written digit by digit (`Writer.digit_options`: the oracle's `next_digits`, or the bounds').
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from factorspec_sdk.relations.layout import INT_LIMIT, LeafLayout, Path
from factorspec_sdk.writer.base import LeafWriter, utf8
from factorspec_sdk.writer.state import FINITE_LIMIT, WHOLE_SPAN, Option, value_text

if TYPE_CHECKING:
    from factorspec_sdk.graph import CompiledSpec, Value
    from factorspec_sdk.writer.automaton import Writer
    from factorspec_sdk.writer.state import WriterState

__all__ = ["BOOL_WRITER", "ENUM_WRITER", "INT_WRITER", "few_values"]


def few_values(lo: int, hi: int) -> list[Value] | None:
    """``lo..hi`` when at most `FINITE_LIMIT` values, else None."""
    return list(range(lo, hi + 1)) if hi - lo + 1 <= FINITE_LIMIT else None


class _ScalarWriter(LeafWriter):
    """A leaf written as one JSON value: its values whole, or (an int) its digits.

    Attributes:
        span: how far apart the feasible values may lie to be offered whole (an int's
            `WHOLE_SPAN`; None: a bool's and an enum's, any).
    """

    span: int | None = None

    def schema_values(self, node: LeafLayout) -> list[Value] | None:
        """The values the schema allows, when few (None: write the digits)."""
        raise NotImplementedError

    def options(
        self, w: Writer, s: WriterState, path: Path, node: LeafLayout, var: str | None
    ) -> list[Option]:
        if s.partial is not None:  # an int's digits under way
            return w.digit_options(s, var, node.ge, node.le)
        values: list[Value] | None
        if var is not None:
            values = w.oracle.feasible_values(s.assignment, var, limit=FINITE_LIMIT, span=self.span)
        else:
            values = self.schema_values(node)
        if values is None:  # a wide int: write it digit by digit
            options = w.digit_options(replace(s, partial=""), var, node.ge, node.le)
        else:
            options = [
                Option(value_text(v), w.after_leaf(s, None if var is None else (var, v)))
                for v in values
            ]
        return options + w.null_options(s, node, path)


class _BoolWriter(_ScalarWriter):
    def schema_values(self, node: LeafLayout) -> list[Value] | None:
        return [False, True]

    def shortest(self, node: LeafLayout) -> int:
        return len("true")

    def longest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, strings: tuple[str, ...]
    ) -> int:
        return len("false")


class _EnumWriter(_ScalarWriter):
    def schema_values(self, node: LeafLayout) -> list[Value] | None:
        return list(node.choices)

    def shortest(self, node: LeafLayout) -> int:
        return min((len(value_text(c)) for c in node.choices), default=2)

    def longest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, strings: tuple[str, ...]
    ) -> int:
        return max((utf8(value_text(c)) for c in node.choices), default=2)


def int_digits(node: LeafLayout) -> int:
    """Characters of the widest int within the leaf's bounds (`INT_LIMIT` without them)."""
    lo = -INT_LIMIT if node.ge is None else max(node.ge, -INT_LIMIT)
    hi = INT_LIMIT if node.le is None else min(node.le, INT_LIMIT)
    return max(len(str(lo)), len(str(hi)))


class _IntWriter(_ScalarWriter):
    span = WHOLE_SPAN

    def schema_values(self, node: LeafLayout) -> list[Value] | None:
        lo = -INT_LIMIT if node.ge is None else node.ge
        hi = INT_LIMIT if node.le is None else node.le
        return few_values(lo, hi)

    def longest(
        self, node: LeafLayout, path: Path, spec: CompiledSpec, strings: tuple[str, ...]
    ) -> int:
        return int_digits(node)


BOOL_WRITER = _BoolWriter()
ENUM_WRITER = _EnumWriter()
INT_WRITER = _IntWriter()
