"""The writer writes UUIDs as their canonical text, every one allowed, relations kept.

A UUID is a native leaf (Issue #40): its text is the lowercase 8-4-4-4-12 hex form Pydantic
writes, its value the 128-bit int; relations compare UUIDs with == and !=.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
from pydantic import BaseModel, Field, TypeAdapter

from factorspec_sdk import distinct, relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import RecordInvalidError, check_record, record_facts, spec_from_ir, to_ir
from factorspec_sdk.prompts import schema_hint
from factorspec_sdk.relations.kinds import LeafKind
from factorspec_sdk.relations.pydantic_layout import build_layout
from factorspec_sdk.relations.uuids import UUID_MAX, prefix_range, uuid_text, uuid_value
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import next_char, random_record, sampled_record, tiny_tokenizer

TOK = tiny_tokenizer()
OWNER = uuid.UUID("0a1b2c3d-4e5f-4789-abcd-ef0123456789")


class Transfer(BaseModel):
    source: uuid.UUID
    target: uuid.UUID
    owner: uuid.UUID | None = None
    approvers: list[uuid.UUID] = Field(max_length=3)

    @relation
    def not_to_itself(self) -> bool:
        return self.source != self.target

    @relation
    def owned_by_the_known_owner(self) -> bool:
        return self.owner is None or self.owner == OWNER

    @relation
    def approvers_are_others(self) -> bool:
        return distinct(self.approvers) and all(
            a not in (self.source, self.target) for a in self.approvers
        )


def test_uuid_texts_are_the_canonical_text_pydantic_reads_and_writes() -> None:
    for n in (0, 1, 2**64, 2**127 + 12345, UUID_MAX, OWNER.int, 0xDEADBEEF << 64):
        text = uuid_text(n)
        assert uuid_value(text) == n
        assert TypeAdapter(uuid.UUID).validate_json(f'"{text}"').int == n
        assert TypeAdapter(uuid.UUID).dump_json(uuid.UUID(int=n)) == f'"{text}"'.encode()
        for k in range(len(text) + 1):
            lo, hi = prefix_range(text[:k]) or (-1, -1)
            assert lo <= n <= hi
    upper = str(OWNER).upper()
    for bad in (upper, OWNER.hex, "{" + str(OWNER) + "}", str(OWNER)[:-1], str(OWNER) + "0"):
        assert uuid_value(bad) is None, bad
    assert prefix_range("1234567-") is None and prefix_range("g") is None


def test_a_uuid_field_is_a_native_leaf_in_lists_and_optionals() -> None:
    layout = build_layout(Transfer)
    kinds = {f.name: f.node for f in layout.fields}
    assert kinds["source"].kind is LeafKind.UUID  # type: ignore[union-attr]
    assert kinds["owner"].kind is LeafKind.UUID and kinds["owner"].nullable  # type: ignore[union-attr]
    assert kinds["approvers"].item.kind is LeafKind.UUID  # type: ignore[union-attr]
    assert '"source": <uuid>' in schema_hint(layout)


def test_characters_are_hex_digits_and_hyphens_where_the_text_has_them() -> None:
    writer = Writer(compile_spec(Transfer))
    digits = set("0123456789abcdef")
    assert next_char(writer, '{"source": "') == digits
    assert next_char(writer, '{"source": "0123abcd') == {"-"}
    assert next_char(writer, '{"source": "0123abcd-') == digits
    whole = str(OWNER)
    assert next_char(writer, '{"source": "' + whole[:-1]) == digits  # any source
    # the target may be anything but the source: its last digit is every other one
    at = '{"source": "' + whole + '", "target": "' + whole[:-1]
    assert next_char(writer, at) == digits - {whole[-1]}
    # the owner is null or the one constant: its text is offered whole
    at = '{"source": "' + whole + '", "target": "' + uuid_text(0) + '", "owner": '
    assert next_char(writer, at) == {"n", '"'}
    assert next_char(writer, at + '"') == {whole[0]}


def test_random_walks_write_valid_uuids_and_the_server_checks_them() -> None:
    planner = Planner(Writer(compile_spec(Transfer)), TOK)
    served = spec_from_ir(to_ir(Transfer))
    rng = np.random.default_rng(7)
    seen_owner = seen_approvers = False
    for _ in range(8):
        text = random_record(planner, TOK, rng)
        t = Transfer.model_validate_json(text)
        assert t.source != t.target
        assert t.owner in (None, OWNER)
        assert len(set(t.approvers)) == len(t.approvers)
        assert not {t.source, t.target} & set(t.approvers)
        # the canonical text (an optional key left out is unset)
        assert json.loads(t.model_dump_json(exclude_unset=True)) == json.loads(text)
        seen_owner |= t.owner is not None
        seen_approvers |= bool(t.approvers)
        check_record(served, text)
        facts = dict(record_facts(served, json.loads(text)))
        assert facts["source"] == t.source.int
    assert seen_owner and seen_approvers
    same = f'{{"source": "{OWNER}", "target": "{OWNER}", "owner": null, "approvers": []}}'
    with pytest.raises(RecordInvalidError):
        check_record(served, same)  # the relation: not to itself
    upper = same.replace(f'"target": "{OWNER}"', f'"target": "{uuid_text(0xABC).upper()}"')
    with pytest.raises(RecordInvalidError):
        check_record(served, upper)  # only the canonical text is a UUID leaf's
    check_record(served, upper.replace(uuid_text(0xABC).upper(), uuid_text(0xABC)))


def test_the_scripted_engine_decodes_valid_records() -> None:
    t = Transfer.model_validate_json(sampled_record(compile_spec(Transfer), 1))
    assert t.source != t.target and t.owner in (None, OWNER)


def test_the_ir_round_trip_keeps_the_uuid_leaves() -> None:
    ir = to_ir(Transfer)
    fields = {f["name"]: f["node"] for f in ir["layout"]["fields"]}  # type: ignore[index]
    assert fields["source"] == {"type": "leaf", "kind": "uuid", "nullable": False}
    assert fields["owner"]["nullable"] is True
    served = spec_from_ir(ir)
    text = sampled_record(served, 3)  # a server's own spec decodes as the client's does
    t = Transfer.model_validate_json(text)
    assert t.source != t.target and t.owner in (None, OWNER)
