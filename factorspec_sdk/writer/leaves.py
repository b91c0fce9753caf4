"""How the writer writes each leaf kind: one `LeafWriter` per kind, found in `LEAF_WRITERS`.

The writer's core (`factorspec_sdk.writer.automaton.Writer`) walks the layout and decides
null-ness; a leaf's own text is its kind's: the layout text that opens it (a quote), the
options at each of its choice points (whole values, digits, characters, a free string), and
the lengths of its shortest and longest texts (which the token budget bounds a record with).
Each kind's writer lives in the module of its value kind: `scalars` (bool, enum, int),
`strings` (free text), `dates` (dates, datetimes, times, durations), `floats` (floats and
Decimals), `uuids` (UUIDs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from factorspec_sdk.relations.kinds import LeafKind
from factorspec_sdk.writer.base import LeafWriter
from factorspec_sdk.writer.dates import DURATION_WRITER, TEMPORAL_WRITER
from factorspec_sdk.writer.floats import FLOAT_WRITER
from factorspec_sdk.writer.scalars import BOOL_WRITER, ENUM_WRITER, INT_WRITER
from factorspec_sdk.writer.strings import STR_WRITER
from factorspec_sdk.writer.uuids import UUID_WRITER

if TYPE_CHECKING:
    from factorspec_sdk.relations.layout import LeafLayout

__all__ = ["LEAF_WRITERS", "LeafWriter", "leaf_writer"]

LEAF_WRITERS: dict[LeafKind, LeafWriter] = {
    LeafKind.BOOL: BOOL_WRITER,
    LeafKind.INT: INT_WRITER,
    LeafKind.STR: STR_WRITER,
    LeafKind.ENUM: ENUM_WRITER,
    LeafKind.DATE: TEMPORAL_WRITER,
    LeafKind.DATETIME: TEMPORAL_WRITER,
    LeafKind.AWARE: TEMPORAL_WRITER,
    LeafKind.TIME: TEMPORAL_WRITER,
    LeafKind.DURATION: DURATION_WRITER,
    LeafKind.FLOAT: FLOAT_WRITER,
    LeafKind.DECIMAL: FLOAT_WRITER,
    LeafKind.UUID: UUID_WRITER,
}
"""The writer of each leaf kind."""


def leaf_writer(node: LeafLayout) -> LeafWriter:
    """The writer of a leaf's kind."""
    return LEAF_WRITERS[node.kind]
