"""The BFCL tool-calling benchmark: data, doc conversion, BFCL's checker, the runner.

Everything runs on BFCL's real data and checker (the ``bfcl-eval`` package) and on scripted
numpy engines: no model is loaded.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from factorspec_sdk.bench.tools import (
    CATEGORIES,
    METHODS,
    ToolBenchReport,
    UnsupportedFunctionDoc,
    bfcl_calls,
    check_calls,
    load_cases,
    parse_categories,
    parse_methods,
    run_tools_bench,
    tool_of,
)
from factorspec_sdk.bench.tools.methods import closed_schema, first_json_object, make_task
from factorspec_sdk.cli.bench import bench_app
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.tokens.vocab import TokenizerInfo

pytest.importorskip("bfcl_eval")
pytest.importorskip("xgrammar")
pytest.importorskip("llguidance")

_PIECES = ['{"', '": ', ', "', '"}', "}, {", '"calls": [', '"name": "', '"arguments": {']


def _tokenizer() -> TokenizerInfo:
    """Byte-level (BFCL's live questions are not all ASCII) with a few JSON pieces."""
    return TokenizerInfo.tiny_bytes(_PIECES)


def test_every_function_doc_of_the_six_categories_converts_or_is_skipped_with_a_reason() -> None:
    converted = 0
    skipped: list[str] = []
    total = 0
    for category in CATEGORIES:
        cases = load_cases(category)
        assert cases, category
        for case in cases:
            for doc in case.functions:
                total += 1
                try:
                    tool = tool_of(doc)
                except UnsupportedFunctionDoc as exc:
                    assert str(exc)
                    skipped.append(f"{case.id}: {exc}")
                    continue
                assert tool.name == doc["name"]
                schema = tool.arguments.model_json_schema()
                assert set(schema["properties"]) == set(doc["parameters"]["properties"])
                assert set(schema.get("required", [])) == set(doc["parameters"]["required"])
                converted += 1
    assert converted + len(skipped) == total
    assert total > 5000  # BFCL v4's six categories hold thousands of function docs
    assert converted / total >= 0.99, skipped[:10]


def test_types_optional_parameters_enums_and_names() -> None:
    doc = {
        "name": "shop.order",
        "description": "Order things.",
        "parameters": {
            "type": "dict",
            "properties": {
                "item": {"type": "string", "enum": ["tea", "cake"]},
                "count": {"type": "integer", "enum": ["1", "2"]},
                "price": {"type": "float"},
                "gift": {"type": "boolean", "enum": ["True", "False", "dontcare"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "size": {"type": "tuple", "items": {"type": "integer"}},
                "anything": {"type": "any"},
                "address": {
                    "type": "dict",
                    "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}},
                    "required": ["city"],
                },
                "extra": {"type": "dict"},
                "model_name": {"type": "string"},
                "from": {"type": "string"},
                "max-items": {"type": "integer"},
            },
            "required": ["item", "count", "price"],
        },
    }
    tool = tool_of(doc)
    assert (tool.name, tool.description) == ("shop.order", "Order things.")
    model = tool.arguments
    fields = {f.alias or name: f for name, f in model.model_fields.items()}
    assert typing.get_args(fields["item"].annotation) == ("tea", "cake")
    assert typing.get_args(fields["count"].annotation) == (1, 2)  # "1" read as the integer 1
    assert fields["price"].annotation is float
    # BFCL's "boolean" enum of "True"/"dontcare" is not of its type: the type stays bool
    assert fields["gift"].annotation == bool | None
    assert fields["tags"].annotation == list[str] | None
    assert fields["size"].annotation == list[int] | None
    assert fields["anything"].annotation == str | None
    assert {"from", "model_name", "max-items"} <= set(fields)
    optional = {k for k, f in fields.items() if not f.is_required()}
    assert optional == set(fields) - {"item", "count", "price"}
    assert all(fields[k].default is None for k in optional)
    value = model.model_validate(
        {"item": "tea", "count": 2, "price": 3, "address": {"city": "Oslo"}, "from": "x"}
    )
    assert value.model_dump(by_alias=True, exclude_none=True) == {
        "item": "tea",
        "count": 2,
        "price": 3.0,
        "address": {"city": "Oslo"},
        "from": "x",
    }
    with pytest.raises(ValidationError):
        model.model_validate({"item": "coffee", "count": 1, "price": 1.0})
    with pytest.raises(ValidationError):
        model.model_validate({"item": "tea", "price": 1.0})  # a required one is missing


@pytest.mark.parametrize(
    "doc",
    [
        {"parameters": {"type": "dict", "properties": {}}},
        {"name": "f", "parameters": {"type": "object", "properties": {}}},
        {"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "number"}}}},
        {"name": "f", "parameters": {"type": "dict", "properties": {}, "required": ["y"]}},
    ],
)
def test_docs_that_cannot_convert_say_why(doc: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedFunctionDoc):
        tool_of(doc)


def test_bfcl_checker_accepts_a_correct_answer_and_rejects_wrong_ones() -> None:
    case = next(c for c in load_cases("simple", 5) if c.id == "simple_python_1")
    assert case.answer == [{"math.factorial": {"number": [5]}}]
    assert check_calls(case, [{"math.factorial": {"number": 5}}]).valid
    wrong = check_calls(case, [{"math.factorial": {"number": 6}}])
    assert not wrong.valid and wrong.error_type == "value_error:others"
    assert not check_calls(case, [{"math.gamma": {"number": 5}}]).valid
    two = [{"math.factorial": {"number": 5}}] * 2
    assert check_calls(case, two).error_type == "simple_function_checker:wrong_count"


def test_bfcl_checker_on_parallel_calls_in_any_order() -> None:
    case = load_cases("parallel", 1)[0]
    right = [{name: {k: v[0] for k, v in args.items()}} for (name, args) in _items(case.answer)]
    assert check_calls(case, right).valid
    assert check_calls(case, right[::-1]).valid
    assert not check_calls(case, right[:1]).valid


def _items(answer: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [next(iter(a.items())) for a in answer]


def test_calls_back_in_bfcl_format_and_the_first_json_object() -> None:
    record = {"calls": [{"name": "f.g", "arguments": {"a": 1, "b": None, "c": {"d": None}}}]}
    assert bfcl_calls(record) == [{"f.g": {"a": 1, "c": {}}}]
    assert bfcl_calls({"calls": [{"name": "f"}]}) == [{"f": {}}]
    for bad in (
        {},
        {"calls": {}},
        {"calls": [{"arguments": {}}]},
        {"calls": [{"name": "f", "arguments": 1}]},
    ):
        with pytest.raises(ValueError):
            bfcl_calls(bad)
    text = 'Sure! {not json} here: {"calls": []} and {"x": 1}'
    assert first_json_object(text) == {"calls": []}
    assert first_json_object("no object [1, 2]") is None


def test_options() -> None:
    assert parse_categories("all") == list(CATEGORIES)
    assert parse_categories("live_parallel,simple") == ["simple", "live_parallel"]
    assert parse_methods("factorspec,free") == ["free", "factorspec"]
    assert parse_methods("all") == list(METHODS)
    for bad in ("simpel", ""):
        with pytest.raises(ValueError):
            parse_categories(bad)
    with pytest.raises(ValueError, match="known"):
        parse_methods("outlines")


def test_every_method_sees_the_same_prompt() -> None:
    from factorspec_sdk.client import Client

    engine = ScriptedEngine.random(_tokenizer(), seed=0)
    case = next(c for c in load_cases("live_simple") if c.messages[0]["role"] == "system")
    task = make_task(case, engine)
    assert task.messages[0]["role"] == "system"
    assert task.messages[0]["content"].startswith("You can call these functions:")
    assert task.messages[0]["content"].endswith(case.messages[0]["content"])
    assert "Answer with JSON of this form" in task.messages[-1]["content"]
    # FactorSpec's client tokenizes the same messages to the same ids as the baselines
    assert Client(engine).prompt_ids(task.messages) == task.prompt_ids
    assert task.schema == closed_schema(task.model.model_json_schema())
    assert task.schema["additionalProperties"] is False


def test_closed_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}}},
        "$defs": {"D": {"type": "object", "additionalProperties": True}},
    }
    closed = closed_schema(schema)
    assert closed["additionalProperties"] is False
    assert closed["properties"]["a"]["additionalProperties"] is False
    assert closed["$defs"]["D"] == {"type": "object", "additionalProperties": True}
    assert "additionalProperties" not in schema  # the original is left alone


def test_runner_end_to_end_on_a_scripted_engine(tmp_path: Path) -> None:
    engine = ScriptedEngine.random(_tokenizer(), seed=1, temperature_scale=2.0)
    report = run_tools_bench(
        2, "all", "all", engine, tmp_path, max_tokens=300, progress=False, plots=True
    )
    assert {p.name for p in report.files} == {"results.json", "results.md", "tools_bench.png"}
    assert len(report.records) == 2 * len(CATEGORIES) * len(METHODS)
    summaries = report.summaries
    for category in CATEGORIES:
        fs = summaries["factorspec"][category]
        assert fs.records == 2
        assert fs.schema_valid == fs.records, category  # every FactorSpec answer is a record
        assert fs.errors == 0
    for r in report.records:
        if r.method == "factorspec":
            assert r.forwards <= r.tokens
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["config"]["complete"] and data["config"]["skipped"] == []
    again = ToolBenchReport.from_json(data)
    assert again.markdown() == report.markdown()
    text = (tmp_path / "results.md").read_text()
    assert "## live_parallel" in text and "BFCL AST accuracy" in text


def test_an_engine_that_writes_the_right_call_passes_bfcl_for_every_method(
    tmp_path: Path,
) -> None:
    answer = '{"calls": [{"name": "math.factorial", "arguments": {"number": 5}}]}'
    engine = ScriptedEngine.from_script(_tokenizer(), answer)
    report = run_tools_bench(2, "simple", "all", engine, None, max_tokens=200, progress=False)
    records = [r for r in report.records if r.case == "simple_python_1"]  # math.factorial(5)
    assert [(r.method, r.text, r.schema_valid, r.ast_valid) for r in records] == [
        (m, answer, True, True) for m in METHODS
    ]
    fs = next(r for r in records if r.method == "factorspec")
    assert fs.forwards < fs.tokens  # the keys and the only function's name are drafted


def test_cli_usage_errors() -> None:
    runner = CliRunner()
    result = runner.invoke(bench_app, ["tools", "--categories", "nope", "--engine", "scripted"])
    assert result.exit_code == 2
    result = runner.invoke(bench_app, ["tools", "--engine", "nope"])
    assert result.exit_code == 3
