"""Relations over UUIDs: == and != compile exactly; anything else is refused with the fix.

Issue #40: a UUID field is a native leaf whose value is its 128-bit int.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pydantic import UUID4, BaseModel

from factorspec_sdk import RelationDefinitionError, RelationRaisesError, relation
from factorspec_sdk.errors import UnsupportedFieldTypeError
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.relations.pydantic_layout import build_layout

KNOWN = uuid.UUID("0a1b2c3d-4e5f-4789-abcd-ef0123456789")


class Pair(BaseModel):
    a: uuid.UUID
    b: uuid.UUID


def _bad(body: str, path: Path) -> type[BaseModel]:
    """A subclass of `Pair` with the relation ``return {body}``, its source at ``path``."""
    src = f"class Bad(Pair):\n    @relation\n    def bad(self) -> bool:\n        return {body}\n"
    path.write_text(src)
    namespace: dict[str, object] = {"Pair": Pair, "relation": relation, "uuid": uuid}
    exec(compile(src, str(path), "exec"), namespace)
    return namespace["Bad"]  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("body", "construct"),
    [
        ("self.a < self.b", "ordering comparison of UUIDs"),
        ("max(self.a, self.b) == self.a", "sum/min/max of UUIDs"),
        ("self.a.version == 4", "attribute .version of a UUID"),
        ('self.a == "0a1b2c3d-4e5f-4789-abcd-ef0123456789"', "comparison of a UUID with"),
        ("self.a != 0", "comparison of a UUID with"),
    ],
)
def test_anything_but_equality_is_refused_with_what_to_write(
    body: str, construct: str, tmp_path: Path
) -> None:
    with pytest.raises(RelationDefinitionError) as info:
        compile_spec(_bad(body, tmp_path / "bad.py"))
    assert construct in info.value.construct
    assert "== and !=" in str(info.value) and 'uuid.UUID("' in str(info.value)


def test_arithmetic_on_a_uuid_is_python_s_type_error_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(RelationRaisesError) as info:
        compile_spec(_bad("self.a + 1 == self.b", tmp_path / "bad.py"))
    assert "TypeError" in str(info.value) and "== and !=" in str(info.value)


def test_equality_with_fields_and_constants_compiles(tmp_path: Path) -> None:
    body = f'self.a != self.b and self.a in (uuid.UUID("{KNOWN}"), self.b, None)'
    spec = compile_spec(_bad(body, tmp_path / "ok.py"))
    assert (spec.record("a").ge, spec.record("a").le) == (0, 2**128 - 1)


def test_a_uuid_with_a_version_is_refused_not_written_as_any_uuid() -> None:
    class Keyed(BaseModel):
        key: UUID4

    with pytest.raises(UnsupportedFieldTypeError, match=r"declare the field uuid\.UUID"):
        build_layout(Keyed)
