"""``factorspec bench schemas --engine ...``: JSON Schemas end to end, FactorSpec against the
engine's own structured outputs.

The runner on the tiny scripted engine over two corpus schemas and a hand-made one that no
record satisfies (screened out: FactorSpec refuses it), its CLI and usage errors, the
report's ratios from hand-made records, and one short run on the real SmolLM2 through
``Client()``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factorspec_sdk.bench.schemas import shared_schemas
from factorspec_sdk.bench.schemas_engine import (
    METHODS,
    SchemaRecord,
    draw_sample,
    forget_prompts,
    parse_methods,
    rotated,
    run_schema_records,
    schema_prompt,
)
from factorspec_sdk.bench.schemas_engine_report import (
    WALLS,
    SchemaRecordsReport,
    ratios,
    repeat_ratios,
    summarize,
    write_outputs,
)
from factorspec_sdk.bench.trip.engines import tiny_scripted_engine
from factorspec_sdk.cli.bench import bench_app
from factorspec_sdk.ir import check_json_schema_record, json_schema_validator

pytest.importorskip("xgrammar")
pytest.importorskip("llguidance")

CORPUS = shared_schemas("jsonschemabench-dev")
PICKED = (
    "Glaiveai2K/calculate_area_771478b4.json",  # an object of numbers and an enum
    "Github_trivial/o90605.json",  # oneOf of one closed object with a list of strings
    "Handmade/empty_range.json",  # unsatisfiable: FactorSpec refuses it
)
EMPTY_RANGE = {
    "type": "object",
    "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 1}},
    "required": ["a"],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"the schema corpus is missing: {CORPUS}")
    root = tmp_path_factory.mktemp("corpus")
    for name in PICKED[:2]:
        (root / name).parent.mkdir(exist_ok=True)
        shutil.copy(CORPUS / name, root / name)
    (root / PICKED[2]).parent.mkdir()
    (root / PICKED[2]).write_text(json.dumps(EMPTY_RANGE))
    return root


def _files(root: Path) -> list[Path]:
    return [root / name for name in PICKED]


# ------------------------------------------------------------------ options and prompt


def test_parse_methods() -> None:
    assert parse_methods("all") == list(METHODS)
    assert parse_methods("syntax") == ["factorspec", "syntax"]
    assert parse_methods("syntax+ngram,llguidance") == [
        "factorspec",
        "llguidance",
        "syntax+ngram-k3",
        "syntax+ngram-k5",
        "syntax+ngram-k8",
    ]
    with pytest.raises(ValueError, match="unknown method 'beam'"):
        parse_methods("factorspec,beam")


def test_every_record_starts_from_a_cold_prompt(corpus: Path) -> None:
    """The prefix cache is emptied before each record (vLLM's ``LLM.reset_prefix_cache``,
    the embedded engine's ``prefix_cache.clear``): the methods of a schema share its prompt,
    and the ones after the first would find its prefill cached."""

    class Counter:
        calls = 0

        def reset_prefix_cache(self) -> bool:
            self.calls += 1
            return True

        def clear(self) -> None:
            self.calls += 1

    engine = tiny_scripted_engine()
    vllm_like, cache = Counter(), Counter()
    engine.llm = vllm_like  # type: ignore[attr-defined]
    engine.prefix_cache = cache  # type: ignore[attr-defined]
    forget_prompts(engine)
    assert (vllm_like.calls, cache.calls) == (1, 1)
    forget_prompts(tiny_scripted_engine())  # an engine without a cache: nothing to do
    run_schema_records(engine, _files(corpus), ["factorspec", "llguidance"], sample=2)
    assert vllm_like.calls == cache.calls == 1 + 3 * 2  # the warm-up and two timed schemas


def test_schema_prompt_names_the_schema() -> None:
    schema = {"title": "Area", "description": "The  area\nof a shape.", "type": "object"}
    assert schema_prompt(schema) == 'Write one JSON record for "Area": The area of a shape.'
    assert schema_prompt({"type": "object"}) == "Write one JSON record."
    long = schema_prompt({"description": "x" * 1000})
    assert long.endswith("….") and len(long) < 450


# ------------------------------------------------------------------ the runner


def test_runner_every_method_on_a_scripted_engine(corpus: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    methods = parse_methods("all")
    report = run_schema_records(
        tiny_scripted_engine(),
        _files(corpus),
        methods,
        sample=3,
        max_tokens=120,
        log=lines.append,
    )
    config = report.config
    assert config["sampled"] == 2 and config["screened_out"] == {"factorspec refuses": 1}
    assert [line for line in lines if line.startswith("skip ")] == [
        "skip Handmade/empty_range.json: factorspec refuses"
    ]
    assert len(report.records) == 2 * len(methods)
    assert len([line for line in lines if line.startswith("[")]) == 2 * len(methods)
    assert {r.schema for r in report.records} == set(PICKED[:2])
    schemas = {name: json.loads((corpus / name).read_text()) for name in PICKED[:2]}
    for r in report.records:
        assert r.stopped != "error", r.detail
        assert r.wall_seconds > 0 and r.requests == 0
        validator = json_schema_validator(schemas[r.schema], check_schema=False)
        if r.valid:  # the benchmark's verdict is jsonschema's
            check_json_schema_record(validator, r.text)
        else:
            assert r.detail
        if r.method == "factorspec":
            assert r.valid and r.stopped == "done" and 0 < r.forwards <= r.tokens
        elif not r.method.startswith("syntax+ngram"):
            assert r.forwards == r.tokens + (r.stopped == "eos")
    summaries = report.summaries
    assert summaries["factorspec"]["valid"] == 2
    assert set(ratios(summaries)) == set(methods) - {"factorspec"}
    files = write_outputs(report, tmp_path)
    assert [p.name for p in files] == ["results.json", "results.md"]
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["records"]) == 2 * len(methods) and data["config"]["seed"] == 0
    text = (tmp_path / "results.md").read_text()
    assert "| factorspec | 2/2 | 0 | 0 |" in text
    assert f"Warm-up (every method, dropped): `{config['warm_up']}`" in text
    assert config["warm_up"] in PICKED[:2]


def test_the_sample_is_seeded(corpus: Path) -> None:
    tok = tiny_scripted_engine().tokenizer

    def drawn(seed: int) -> tuple[str, ...]:
        chosen, skipped = draw_sample(_files(corpus), 2, seed, ["factorspec"], tok, 10.0)
        assert sum(skipped.values()) <= 1
        return tuple(key for key, _ in chosen)

    orders = [drawn(seed) for seed in range(3)]
    assert drawn(2) == orders[2]
    assert set(orders) == {PICKED[:2], PICKED[1::-1]}


# ------------------------------------------------------------------ the report


def _record(
    method: str,
    wall: float,
    tokens: int,
    valid: bool = True,
    stopped: str = "eos",
    *,
    schema: str = "d/s.json",
    repeat: int = 0,
) -> SchemaRecord:
    return SchemaRecord(method, schema, valid, tokens, tokens, 0, wall, stopped, repeat=repeat)


def test_summaries_and_ratios_from_known_records() -> None:
    records = [
        _record("factorspec", 1.0, 10, schema="d/a.json"),
        _record("factorspec", 3.0, 30, schema="d/b.json"),
        _record("factorspec", 2.0, 40, schema="d/c.json"),
        _record("syntax", 2.0, 10, schema="d/a.json"),
        _record("syntax", 6.0, 20, valid=False, stopped="max_tokens", schema="d/b.json"),
        _record("syntax", 7.0, 28, schema="d/c.json"),
    ]
    summaries = summarize(records)
    fs, syn = summaries["factorspec"], summaries["syntax"]
    assert (fs["valid"], fs["records"], syn["valid"]) == (3, 3, 2)
    assert fs["record_median_s"] == 2.0 and fs["record_mean_s"] == 2.0
    assert fs["token_median_ms"] == 100.0 and fs["token_mean_ms"] == pytest.approx(250 / 3)
    assert syn["record_median_s"] == 6.0 and syn["record_mean_s"] == 5.0
    assert syn["token_median_ms"] == 250.0 and syn["token_mean_ms"] == 250.0
    got = ratios(summaries)["syntax"]
    assert got == {
        "record_median_s": 3.0,
        "record_mean_s": 2.5,
        "token_median_ms": 2.5,
        "token_mean_ms": pytest.approx(3.0),
    }
    assert list(got) == list(WALLS)
    report = SchemaRecordsReport({"engine": "embedded", "screened_out": {"x refuses": 2}}, records)
    text = report.markdown()
    assert "| syntax | 3.00x | 2.50x | 2.50x | 3.00x |" in text
    assert "| syntax | 2/3 | 1 | 0 | 19.3 | 19.3 |" in text and "forwards / record" in text
    assert "Screened out before the sample was full (2): x refuses: 2." in text
    vllm = SchemaRecordsReport({"engine": "vllm"}, records).markdown()
    assert "requests / record" in vllm


def test_repeats_count_each_schema_once_at_its_median() -> None:
    """Three repeats of two schemas: each schema's walls are the median of its three, the
    records and validity count every record, and each repeat has its own ratios."""
    walls = {  # (method, schema): wall per repeat
        ("factorspec", "d/a.json"): (1.0, 9.0, 2.0),
        ("factorspec", "d/b.json"): (4.0, 4.0, 5.0),
        ("syntax", "d/a.json"): (2.0, 2.0, 100.0),
        ("syntax", "d/b.json"): (8.0, 6.0, 10.0),
    }
    records = [
        _record(method, wall, 10, schema=schema, repeat=repeat, valid=repeat != 2)
        for (method, schema), by_repeat in walls.items()
        for repeat, wall in enumerate(by_repeat)
    ]
    summaries = summarize(records)
    fs, syn = summaries["factorspec"], summaries["syntax"]
    assert (fs["records"], fs["valid"]) == (6, 4)
    assert fs["record_median_s"] == 3.0 and fs["record_mean_s"] == 3.0  # medians 2 and 4
    assert syn["record_median_s"] == 5.0 and syn["record_mean_s"] == 5.0  # medians 2 and 8
    assert fs["token_median_ms"] == 300.0 and syn["token_median_ms"] == 500.0
    assert ratios(summaries)["syntax"]["record_mean_s"] == pytest.approx(5 / 3)
    per_repeat = repeat_ratios(records)["syntax"]
    assert [row["record_mean_s"] for row in per_repeat] == pytest.approx([10 / 5, 8 / 13, 110 / 7])
    report = SchemaRecordsReport({"engine": "vllm", "repeats": 3}, records)
    text = report.markdown()
    assert "3 greedy records per method and schema" in text
    assert "| syntax | 2.00x, 0.62x, 15.71x |" in text
    assert len(report.to_json()["repeat_ratios"]["syntax"]) == 3
    assert "each repeat" not in SchemaRecordsReport({"engine": "vllm"}, records[:1]).markdown()


def test_the_methods_turn_each_repeat(corpus: Path) -> None:
    assert [rotated(["a", "b", "c"], k) for k in range(4)] == [
        ["a", "b", "c"],
        ["b", "c", "a"],
        ["c", "a", "b"],
        ["a", "b", "c"],
    ]
    lines: list[str] = []
    report = run_schema_records(
        tiny_scripted_engine(),
        _files(corpus),
        ["factorspec", "llguidance"],
        sample=1,
        max_tokens=60,
        log=lines.append,
        warm_up=False,
        repeats=2,
    )
    assert [(r.repeat, r.method) for r in report.records] == [
        (0, "factorspec"),
        (0, "llguidance"),
        (1, "llguidance"),
        (1, "factorspec"),
    ]
    assert report.config["repeats"] == 2 and "[1/1 repeat 2/2]" in lines[-1]
    assert report.summaries["factorspec"]["records"] == 2
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        run_schema_records(tiny_scripted_engine(), _files(corpus), ["factorspec"], repeats=0)


def test_ratios_without_factorspec_or_tokens() -> None:
    assert ratios(summarize([_record("syntax", 1.0, 5)])) == {}
    got = ratios(summarize([_record("factorspec", 1.0, 0), _record("syntax", 2.0, 4)]))
    assert got["syntax"]["record_median_s"] == 2.0 and got["syntax"]["token_median_ms"] is None


# ------------------------------------------------------------------ the command


def test_cli_usage_errors(corpus: Path) -> None:
    runner = CliRunner()
    bad_engine = runner.invoke(bench_app, ["schemas", str(corpus), "--engine", "nope"])
    assert bad_engine.exit_code == 3 and "known engines" in bad_engine.output
    bad_method = runner.invoke(
        bench_app, ["schemas", str(corpus), "--engine", "scripted", "--methods", "beam"]
    )
    assert bad_method.exit_code == 2 and "unknown method 'beam'" in bad_method.output
    alone = runner.invoke(bench_app, ["schemas", str(corpus), "--sample", "3"])
    assert alone.exit_code == 2 and "--sample: only with --engine" in alone.output
    repeat = runner.invoke(bench_app, ["schemas", str(corpus), "--repeat", "3"])
    assert repeat.exit_code == 2 and "--repeat: only with --engine" in repeat.output


def test_cli_end_to_end_mode(corpus: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        bench_app,
        [
            "schemas",
            str(corpus),
            "--engine",
            "scripted",
            "--methods",
            "llguidance",
            "--sample",
            "1",
            "--max-tokens",
            "100",
            "--repeat",
            "2",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "| factorspec | 2/2 |" in result.output and "each repeat alone" in result.output
    assert "| llguidance |" in result.output
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["config"]["methods"] == ["factorspec", "llguidance"]
    assert (
        "--engine scripted --methods factorspec,llguidance --sample 1" in data["config"]["command"]
    )
    assert " --repeat 2" in data["config"]["command"] and data["config"]["repeats"] == 2


# ------------------------------------------------------------------ the real model


def test_smollm2_one_schema_two_methods(corpus: Path, embedded_engine: object) -> None:
    from factorspec_sdk.engines.protocol import Engine

    assert isinstance(embedded_engine, Engine)
    report = run_schema_records(
        embedded_engine,
        _files(corpus)[:1],
        ["factorspec", "llguidance"],
        max_tokens=60,
        warm_up=False,
    )
    fs, llg = report.records
    assert (fs.method, llg.method) == ("factorspec", "llguidance")
    assert fs.valid, fs.detail
    assert fs.forwards < fs.tokens  # certain drafts: the keys and punctuation are free
    assert llg.forwards >= llg.tokens and report.config["warm_up"] is None
