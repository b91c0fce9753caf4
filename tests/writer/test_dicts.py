"""Dict fields that relations read: laid out as entries, written as JSON objects, exactly.

A dict a relation reads is unrolled like a list of entries (``key``, ``value``) with a
length variable; the writer writes ``{"k": v, ...}`` and never repeats a key (a factor keeps
the keys distinct: codes for ``Literal`` keys, ``same`` variables for free ones). These
tests check the records against Python and, on a small domain, that the writer reaches
exactly the valid records.
"""

from __future__ import annotations

import itertools
import json
from typing import Annotated, Literal

import numpy as np
import pytest
from pydantic import BaseModel, Field, ValidationError

from factorspec_sdk import RelationDefinitionError, relation
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import check_record, spec_from_ir, to_ir
from factorspec_sdk.relations.layout import GrammarLayout, ListLayout
from factorspec_sdk.relations.pydantic_layout import build_layout
from factorspec_sdk.tokens.plan import Planner
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import enumerate_texts, random_record, tiny_tokenizer

TOK = tiny_tokenizer()


class Budget(BaseModel):
    """Free keys, values that sum to 100."""

    percent: dict[str, int] = Field(min_length=2, max_length=3)

    @relation
    def whole(self) -> bool:
        return sum(self.percent.values()) == 100 and all(v > 0 for v in self.percent.values())


class Hours(BaseModel):
    """Literal keys: lookups, membership, a default."""

    hours: dict[Literal["a", "b"], Annotated[int, Field(ge=0, le=4)]]
    total: int = Field(ge=0, le=4)

    @relation
    def rules(self) -> bool:
        return (
            self.total == sum(self.hours.values())
            and self.hours.get("a", 0) <= 1
            and ("b" not in self.hours or self.hours["b"] >= 1)
        )


class Task(BaseModel):
    done: bool
    points: int = Field(ge=0, le=5)

    @relation
    def done_scores(self) -> bool:
        return self.points > 0 or not self.done


class Board(BaseModel):
    """Model values (with a relation of their own) and an optional dict."""

    tasks: dict[str, Task] = Field(max_length=2)
    owners: dict[str, str] | None = Field(default=None, max_length=2)

    @relation
    def owned(self) -> bool:
        return self.owners is None or all(k in self.tasks for k in self.owners)


# ------------------------------------------------------------------ layout


def test_a_dict_a_relation_reads_is_laid_out_as_entries() -> None:
    layout = build_layout(Hours)
    node = layout.field("hours").node
    assert isinstance(node, ListLayout) and node.mapping
    assert node.max_length == 2  # one entry per Literal key

    class Unread(BaseModel):
        tags: dict[str, int]

    assert isinstance(build_layout(Unread).field("tags").node, GrammarLayout)


def test_a_dict_with_keys_the_writer_cannot_write_is_refused_by_name() -> None:
    class IntKeys(BaseModel):
        counts: dict[int, int]

        @relation
        def small(self) -> bool:
            return len(self.counts) < 3

    with pytest.raises(RelationDefinitionError) as err:
        compile_spec(IntKeys)
    assert "counts" in str(err.value) and "dict" in str(err.value)


# ------------------------------------------------------------------ the writer


@pytest.mark.parametrize("model", [Budget, Hours, Board])
def test_random_walks_write_only_valid_records(model: type[BaseModel]) -> None:
    planner = Planner(Writer(compile_spec(model)), TOK)
    rng = np.random.default_rng(5)
    for _ in range(15):
        text = random_record(planner, TOK, rng, close=0.5)
        model.model_validate_json(text)
        raw = json.loads(text, object_pairs_hook=lambda pairs: pairs)
        for _key, value in raw:  # no key repeats, at any level
            if isinstance(value, list):
                keys = [k for k, _ in value]
                assert len(keys) == len(set(keys)), text


def test_the_writer_reaches_exactly_the_valid_records() -> None:
    """Brute force over every dict of keys a, b (in either order) and values 0..4."""
    expect = set()
    for n in range(3):
        for keys in itertools.permutations(["a", "b"], n):
            for values in itertools.product(range(5), repeat=n):
                for total in range(5):
                    data = {"hours": dict(zip(keys, values, strict=True)), "total": total}
                    try:
                        Hours.model_validate(data)
                    except ValidationError:
                        continue
                    expect.add(json.dumps(data))
    assert set(enumerate_texts(Writer(compile_spec(Hours)))) == expect


# ------------------------------------------------------------------ the IR


@pytest.mark.parametrize("model", [Budget, Board])
def test_the_relation_ir_carries_dicts(model: type[BaseModel]) -> None:
    back = spec_from_ir(to_ir(model))
    planner = Planner(Writer(back), TOK)
    rng = np.random.default_rng(2)
    for _ in range(5):
        text = random_record(planner, TOK, rng, close=0.5)
        model.model_validate_json(text)
        check_record(back, text)


def test_a_repeated_key_is_a_shorter_dict() -> None:
    """JSON's last value wins: the record is judged as Python parses it."""
    back = spec_from_ir(to_ir(Budget))
    check_record(back, '{"percent": {"a": 40, "b": 60}}')
    with pytest.raises(Exception, match="relations"):
        check_record(back, '{"percent": {"a": 40, "a": 60, "b": 60}}')
