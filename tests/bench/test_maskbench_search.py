"""MaskBench's pieces without an engine: the search, the candidate texts, the places, the data.

The search runs over `TokenizerInfo.tiny_bytes` (every byte a token, plus a few merges) with
a scripted walker that allows exactly the token sequences a test gives it, so that which
tokenization is writable is known; no model, no tokenizer download.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from pathlib import Path

import numpy as np
import pytest

from factorspec_sdk.bench.maskbench import candidate_texts, category_of, mask_files, search
from factorspec_sdk.bench.maskbench.engines import InstanceResult
from factorspec_sdk.bench.maskbench.reasons import place_of
from factorspec_sdk.bench.maskbench.report import MaskBenchReport
from factorspec_sdk.bench.maskbench.runner import EngineRun, FileResult
from factorspec_sdk.bench.maskbench.search import TokenIds, TokenIndex
from factorspec_sdk.bench.maskbench.texts import number_spellings
from factorspec_sdk.bench.schemas import CompileResult
from factorspec_sdk.tokens.vocab import TokenizerInfo

TOK = TokenizerInfo.tiny_bytes(['{"', '{"a', '": ', ", ", '"}', "12"])
INDEX = TokenIndex(TOK)


def ids(*texts: str) -> tuple[int, ...]:
    """The token of each text (a single byte, or one of TOK's pieces)."""
    by_bytes = {raw: i for i, raw in enumerate(TOK.vocab) if raw}
    return tuple(by_bytes[t.encode()] for t in texts)


class PathsWalker:
    """Masks that allow exactly the given token sequences, then the end."""

    def __init__(self, paths: Sequence[tuple[int, ...]]) -> None:
        self.paths = list(paths)
        self.masks = 0

    def root(self) -> tuple[int, ...]:
        return ()

    def allowed(self, state: tuple[int, ...]) -> TokenIds:
        self.masks += 1
        n = len(state)
        nxt = {p[n] for p in self.paths if len(p) > n and p[:n] == state}
        if state in self.paths:
            nxt |= set(TOK.eos_ids)
        return np.asarray(sorted(nxt), dtype=np.int64)

    def advance(self, state: tuple[int, ...], token: int) -> tuple[int, ...]:
        return (*state, token)

    def back(self) -> None:
        pass

    def ended(self, state: tuple[int, ...], allowed: TokenIds) -> bool:
        return bool(np.isin(np.asarray(TOK.eos_ids), allowed).any())

    def key(self, state: tuple[int, ...]) -> Hashable:
        return state


def test_the_search_finds_a_tokenization_other_than_the_longest_first() -> None:
    # longest first would start with '{"a', which the masks do not allow
    wanted = ids('{"', "a", '": ', "12", "}")
    found = search(PathsWalker([wanted]), INDEX, '{"a": 12}')
    assert found.verdict == "writable"
    assert tuple(found.tokens) == wanted


def test_the_search_backtracks_past_a_dead_end_deep_in_the_text() -> None:
    # the longest-first path runs to the last byte before it dies
    dead_end = ids('{"a', '": ', "12")
    wanted = ids("{", '"', "a", '": ', "1", "2", "}")
    found = search(PathsWalker([dead_end, wanted]), INDEX, '{"a": 12}')
    assert (found.verdict, tuple(found.tokens)) == ("writable", wanted)


def test_a_text_the_masks_do_not_end_is_not_written() -> None:
    found = search(PathsWalker([ids('{"a', '": ', "12")]), INDEX, '{"a": 12}')
    assert found.verdict == "unwritable"
    assert found.dead is not None and found.dead.position == len('{"a": 12')


def test_dead_ends_are_remembered_by_position_and_state() -> None:
    """A walker that allows every byte of a text but not its end: each (position, state)
    is expanded once, not once per tokenization (2**n of them)."""

    class Bytes(PathsWalker):
        def allowed(self, state: tuple[int, ...]) -> TokenIds:
            self.masks += 1
            return np.arange(256, dtype=np.int64)

        def key(self, state: tuple[int, ...]) -> Hashable:
            return None  # the state is the bytes written, which the position names

    text = '{"a": 1212121212121212, "b": 1212121212}'
    walker = Bytes([])
    found = search(walker, INDEX, text)
    assert found.verdict == "unwritable"
    assert walker.masks == len(text) + 1


def test_the_node_budget_gives_undecided_not_a_verdict() -> None:
    wanted = ids("{", '"', "a", '": ', "1", "2", "}")
    assert search(PathsWalker([wanted]), INDEX, '{"a": 12}', budget=3).verdict == "undecided"
    assert search(PathsWalker([wanted]), INDEX, '{"a": 12}', budget=100).verdict == "writable"


def test_an_undecided_instance_fails_the_criterion() -> None:
    """Undecided is counted apart, never as written: the schema does not pass."""
    runs = {
        "factorspec": EngineRun(
            CompileResult("accepted", 0.01),
            [InstanceResult("writable", 0, 5, 6, [1e-4] * 6), InstanceResult("undecided")],
        )
    }
    row = FileResult("JME_1.json", "JME", [True, True], [1, 1], runs)
    s = MaskBenchReport({}, ["factorspec"], [row]).summaries["overall"]["engines"]["factorspec"]
    assert (s["compiled"], s["pass"], s["valid_writable"], s["undecided"]) == (1, 0, 1, 1)
    assert s["under_95"] == 1


def test_candidates_try_the_schema_order_then_the_instances_and_every_small_order() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}, "c": {}}}
    texts = candidate_texts({"c": 1, "a": 2, "b": 3}, schema)
    assert texts[0] == '{"a": 2, "b": 3, "c": 1}'
    assert texts[1] == '{"c": 1, "a": 2, "b": 3}'
    assert len(texts) == 6  # every order of three keys
    assert {json.loads(t) == {"a": 2, "b": 3, "c": 1} for t in texts} == {True}


def test_candidates_permute_nested_objects_each_by_its_place() -> None:
    value = {"p": {"x": 1, "y": 2}, "q": {"u": 1, "v": 2}}
    texts = candidate_texts(value, {})
    assert len(texts) == 8  # 2 orders of each of the three objects
    assert all(json.loads(t) == value for t in texts)
    assert '{"q": {"v": 2, "u": 1}, "p": {"x": 1, "y": 2}}' in texts


def test_candidates_follow_refs_and_branches_for_nested_orders() -> None:
    schema = {
        "$defs": {"inner": {"properties": {"y": {}, "x": {}}}},
        "properties": {"o": {"$ref": "#/$defs/inner"}},
        "anyOf": [{"properties": {"z": {}}}],
    }
    value = {"z": 0, "o": {"x": 1, "y": 2}}
    texts = candidate_texts(value, schema)
    assert texts[0] == '{"o": {"y": 2, "x": 1}, "z": 0}'
    assert '{"z": 0, "o": {"y": 2, "x": 1}}' in texts  # the branch's properties first


def test_candidates_order_an_object_by_the_branches_it_is_valid_under() -> None:
    """machine.schema: a ``oneOf`` of state kinds, each with its keys after the common ones;
    over every branch, an atomic state's ``on`` came before a compound one's ``initial``,
    which the compound branch lists (and the writer writes) first."""
    common = {"id": {"type": "string"}}
    schema = {
        "$defs": {
            "atomic": {
                "properties": {**common, "kind": {"const": "atomic"}, "on": {}},
                "required": ["kind"],
            },
            "compound": {
                "properties": {**common, "kind": {"const": "compound"}, "initial": {}, "on": {}},
                "required": ["kind"],
            },
            "parallel": {
                "properties": {**common, "kind": {"const": "parallel"}, "on": {}, "regions": {}},
                "required": ["kind"],
            },
        },
        "oneOf": [{"$ref": f"#/$defs/{kind}"} for kind in ("atomic", "compound", "parallel")],
    }
    value = {"on": 1, "kind": "compound", "initial": "a", "id": "s", "extra": 0, "more": 1}
    texts = candidate_texts(value, schema)
    assert (
        texts[0]
        == '{"id": "s", "kind": "compound", "on": 1, "initial": "a", "extra": 0, "more": 1}'
    )
    matched = '{"id": "s", "kind": "compound", "initial": "a", "on": 1, "extra": 0, "more": 1}'
    assert matched in texts and all(json.loads(t) == value for t in texts)


def test_number_spellings() -> None:
    assert number_spellings(3) == ["3"]
    assert number_spellings(3.0) == ["3.0", "3"]
    assert number_spellings(1e-05) == ["1e-05", "0.00001", "1e-5"]
    assert number_spellings(1e16) == ["1e+16", "10000000000000000", "10000000000000000.0", "1e16"]
    assert number_spellings(1643723400.0) == ["1643723400.0", "1643723400"]
    assert number_spellings(1.5e-7) == ["1.5e-07", "0.00000015", "1.5e-7"]
    for x in (3.0, 1e-05, 1e16, 0.1, -2.5, 1643723400.0, 1.23456e-18, 1.23456789e20):
        assert {float(s) for s in number_spellings(x)} == {x}


def test_candidates_spell_non_ascii_strings_both_ways() -> None:
    texts = candidate_texts({"s": "é"}, {})
    assert texts == ['{"s": "é"}', '{"s": "\\u00e9"}']


@pytest.mark.parametrize(
    ("marker", "label", "path"),
    [
        ('"b"', "object key (the writer offers another key here)", "/b"),
        ("}", "object ends (the writer wants another key: an optional key omitted?)", ""),
        ("\\n", "escape in a string", "/a/1"),
        ("[", "array value", "/a"),
        ('"x', "string value", "/a/0"),
    ],
)
def test_places_in_an_instance_text(marker: str, label: str, path: str) -> None:
    text = '{"a": ["x", "l\\n"], "b": 1}'
    at = text.index(marker) if marker != "}" else len(text) - 1
    place = place_of(text, at)
    assert (place.label, place.path) == (label, path)


def test_a_refused_key_says_whether_the_schema_names_it() -> None:
    schema = {"properties": {"a": {"items": {"properties": {"k": {}}}}, "b": {}}}
    text = '{"a": [{"k": 1, "z": 2}], "b": 1}'
    named = place_of(text, text.index('"b"'), schema)
    assert (named.label, named.path) == (
        "a key the schema names (the writer wants another first: an optional key omitted?)",
        "/b",
    )
    unnamed = place_of(text, text.index('"z"'), schema)
    assert unnamed.label.startswith("a key the schema does not name")
    assert unnamed.path == "/a/0/z"


def test_categories_of_file_names() -> None:
    assert category_of("BFCL_parallel_multiple_12.json") == "BFCL_parallel_multiple"
    assert category_of("Github_easy---o10013.json") == "Github_easy"
    assert category_of("Handwritten---oneof10_2.json") == "Handwritten"
    assert category_of("JME_10.json") == "JME"


def test_the_sample_per_category_is_seeded(tmp_path: Path) -> None:
    for name in [f"JME_{i}.json" for i in range(6)] + ["Kubernetes---kb_1.json"]:
        (tmp_path / name).write_text(json.dumps({"schema": {}, "tests": []}))
    one = mask_files(tmp_path, per_category=2, seed=1)
    assert one == mask_files(tmp_path, per_category=2, seed=1)
    assert [p.name for p in one].count("Kubernetes---kb_1.json") == 1
    assert len(one) == 3
    assert len(mask_files(tmp_path)) == 7
    with pytest.raises(ValueError, match="not a folder"):
        mask_files(tmp_path / "missing")


@pytest.mark.parametrize(
    ("draft", "one_instance"),
    [
        ("http://json-schema.org/draft-04/schema#", False),
        ("http://json-schema.org/draft-06/schema#", True),
        ("https://json-schema.org/draft/2020-12/schema", True),
    ],
)
def test_candidates_parse_back_to_the_instance_under_the_schemas_draft(
    draft: str, one_instance: bool
) -> None:
    """MaskBench's Github_easy---o24544: under draft 4 ``12345.0`` is not an ``integer``
    (an invalid instance) and ``12345`` is, so a text spelling the float as an int is
    another, valid, instance: a writer of it has not written the invalid one."""
    schema = {"$schema": draft, "properties": {"id": {"type": "integer"}, "x": {}}}
    value = {"id": 12345.0, "x": [1e16, 2.0, 3, 1e-05, True]}
    texts = candidate_texts(value, schema)
    assert all(json.loads(t) == value for t in texts)
    assert '{"id": 12345.0, "x": [1e+16, 2.0, 3, 1e-05, true]}' in texts
    int_spelled = '{"id": 12345, "x": [10000000000000000, 2, 3, 1e-05, true]}'
    assert (int_spelled in texts) is one_instance
    if one_instance:  # the shortest spellings
        assert '{"id": 12345, "x": [1e16, 2, 3, 1e-5, true]}' in texts
    else:  # every text keeps the floats floats; the shortest such is one of them
        floats = [t for t in texts if isinstance(json.loads(t)["id"], float)]
        assert floats == texts
        assert '{"id": 12345.0, "x": [1e16, 2.0, 3, 1e-5, true]}' in texts


def test_draft4_int_spellings_stay_where_the_schema_judges_them_alike() -> None:
    """MaskBench's Github_ultra---o46322 (draft 4): ``6000.0`` under ``type: number,
    multipleOf: 1`` is valid and so is ``6000``, which llguidance writes: a text of it."""
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "properties": {"n": {"type": "number", "multipleOf": 1}},
    }
    assert candidate_texts({"n": 6000.0}, schema) == ['{"n": 6000.0}', '{"n": 6000}', '{"n": 6e3}']
