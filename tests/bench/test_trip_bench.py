"""The trip benchmark runner and the syntax-only baselines, on numpy scripted engines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from factorspec_sdk.bench import baselines
from factorspec_sdk.bench.baselines import (
    DecodeRun,
    Steps,
    XGrammarBackend,
    decode_free,
    decode_syntax,
    decode_syntax_ngram,
    decode_with_retries,
    ngram_propose,
)
from factorspec_sdk.bench.trip.options import METHODS, expand_methods, parse_cities, parse_shard
from factorspec_sdk.bench.trip.results import BenchReport, RecordResult, ratios, summarize
from factorspec_sdk.bench.trip.runner import generate_bench_problems, run_trip_bench
from factorspec_sdk.bench.trip.tasks import itinerary_schema, violation_sentences
from factorspec_sdk.cli.bench import bench_app
from factorspec_sdk.domains.trip import generate_problem, itinerary_record, prompt_for
from factorspec_sdk.engines.scripted import ScriptedEngine
from tests.helpers import tiny_tokenizer

pytest.importorskip("xgrammar")

PROBLEM = generate_problem(3, seed=5)
GOLDEN_TEXT = json.dumps(itinerary_record(PROBLEM.golden))


def _random_engine(seed: int) -> ScriptedEngine:
    return ScriptedEngine.random(tiny_tokenizer(), seed=seed, temperature_scale=3.0)


def _prompt(engine: ScriptedEngine) -> list[int]:
    return engine.apply_chat_template([{"role": "user", "content": prompt_for(PROBLEM)}])


def _check_schema(data: Any, problem: Any) -> None:
    """What itinerary_schema promises, checked by hand."""
    n = len(problem.cities)
    assert set(data) == {"stays", "flights"}
    assert len(data["stays"]) == n and len(data["flights"]) == n - 1
    for s in data["stays"]:
        assert list(s) == ["city", "first_day", "last_day"]
        assert s["city"] in problem.cities
        assert 1 <= s["first_day"] <= problem.total_days
        assert 1 <= s["last_day"] <= problem.total_days
    for f in data["flights"]:
        assert list(f) == ["day", "origin", "destination"]
        assert f["origin"] in problem.cities and f["destination"] in problem.cities
        assert 1 <= f["day"] <= problem.total_days


# ------------------------------------------------------------------ options


def test_expand_methods() -> None:
    assert expand_methods("all") == list(METHODS)
    assert expand_methods("factorspec,free") == ["free", "factorspec"]
    assert expand_methods("syntax+ngram") == [
        "syntax+ngram-k3",
        "syntax+ngram-k5",
        "syntax+ngram-k8",
    ]
    assert "factorspec" not in expand_methods("baselines")
    with pytest.raises(ValueError, match=r"unknown method 'beam'.*known"):
        expand_methods("free,beam")


def test_parse_cities() -> None:
    assert parse_cities("3-10") == (3, 10)
    assert parse_cities("5") == (5, 5)
    for bad in ("2-5", "8-4", "x", "3-4-5"):
        with pytest.raises(ValueError):
            parse_cities(bad)


def test_problems_match_the_generator() -> None:
    from factorspec_sdk.domains.trip import generate_problems

    assert generate_bench_problems(4, (3, 6), 1) == generate_problems(4, (3, 6), 1)
    loose = generate_bench_problems(4, (3, 6), 1, unique=False)
    assert [len(p.cities) for p in loose] == [
        len(p.cities) for p in generate_problems(4, (3, 6), 1)
    ]


def test_schema_is_the_strongest_fair_one() -> None:
    schema = itinerary_schema(PROBLEM)
    stays = schema["properties"]["stays"]
    assert stays["minItems"] == stays["maxItems"] == 3
    assert schema["properties"]["flights"]["maxItems"] == 2
    assert stays["items"]["properties"]["city"]["enum"] == PROBLEM.cities
    assert stays["items"]["properties"]["last_day"]["maximum"] == PROBLEM.total_days


# ------------------------------------------------------------------ baselines


@pytest.mark.parametrize("seed", range(4))
def test_xgrammar_output_parses_and_matches_the_schema(seed: int) -> None:
    engine = _random_engine(seed)
    backend = XGrammarBackend(engine.tokenizer)
    run = decode_syntax(engine, backend, _prompt(engine), itinerary_schema(PROBLEM), 1000)
    assert run.stopped == "grammar"
    assert run.forwards == len(run.tokens)
    _check_schema(json.loads(run.text), PROBLEM)


@pytest.mark.parametrize(("seed", "k"), [(0, 3), (1, 5), (2, 8)])
def test_ngram_drafts_change_nothing_but_the_forward_count(seed: int, k: int) -> None:
    engine = _random_engine(seed)
    backend = XGrammarBackend(engine.tokenizer)
    schema = itinerary_schema(PROBLEM)
    plain = decode_syntax(engine, backend, _prompt(engine), schema, 1000)
    fast = decode_syntax_ngram(engine, backend, _prompt(engine), schema, 1000, k)
    assert fast.tokens == plain.tokens  # greedy exactness under the same masks
    assert fast.forwards < plain.forwards
    assert fast.draft_accepted <= fast.drafted
    assert fast.forwards + fast.draft_accepted == len(fast.tokens)
    _check_schema(json.loads(fast.text), PROBLEM)


def test_budget_is_respected() -> None:
    engine = _random_engine(0)
    backend = XGrammarBackend(engine.tokenizer)
    schema = itinerary_schema(PROBLEM)
    for run in (
        decode_syntax(engine, backend, _prompt(engine), schema, 17),
        decode_syntax_ngram(engine, backend, _prompt(engine), schema, 17, 8),
    ):
        assert len(run.tokens) == 17 and run.stopped == "max_tokens"


def test_free_generation_follows_the_model() -> None:
    engine = ScriptedEngine.from_script(tiny_tokenizer(), GOLDEN_TEXT)
    run = decode_free(engine, engine.tokenizer.encode("plan: "), 1000)
    assert run.text == GOLDEN_TEXT and run.stopped == "eos"
    assert run.forwards == len(run.tokens) + 1  # the last forward chose the end token
    short = decode_free(engine, engine.tokenizer.encode("plan: "), 5)
    assert len(short.tokens) == 5 and short.stopped == "max_tokens"


def test_ngram_propose() -> None:
    assert ngram_propose([1, 2, 3, 9, 1, 2], 3) == [3, 9, 1]
    assert ngram_propose([1, 2, 3, 9, 1, 2], 1) == [3]
    assert ngram_propose([5, 6, 7], 4) == []
    # the most recent earlier occurrence of the longest matching tail wins
    assert ngram_propose([1, 2, 4, 0, 1, 2, 5, 0, 1, 2], 1) == [5]


def test_retries_name_the_violations_and_stop_when_valid() -> None:
    engine = ScriptedEngine.from_script(tiny_tokenizer(), "x")
    prompts: list[list[int]] = []

    def decode(ids: list[int]) -> Steps:
        prompts.append(ids)
        return DecodeRun(f"answer {len(prompts)}", [1, 2], forwards=2, wall_seconds=0.5)
        yield  # a step generator that needs no forward

    def check(text: str) -> list[str]:
        return [] if text == "answer 3" else ["stay_lengths (Each stay lasts as asked)."]

    run = decode_with_retries(engine, [{"role": "user", "content": "plan"}], decode, check, 3)
    assert run.attempts == 3 and run.text == "answer 3"
    assert run.texts == ["answer 1", "answer 2", "answer 3"]
    assert run.forwards == 6 and len(run.tokens) == 6
    third = engine.tokenizer.decode(prompts[2]).decode()
    assert third.startswith("plan" + "answer 1" + "Your answer violates: stay_lengths")
    assert third.endswith("Fix it.")

    never = decode_with_retries(engine, [{"role": "user", "content": "p"}], decode, lambda t: ["x"])
    assert never.attempts == 4  # 1 + max_retries, then the last answer is kept

    # a first attempt decoded already (the syntax record) is reused, not decoded again
    prompts.clear()
    given = DecodeRun("given", [7], forwards=1, wall_seconds=2.0)
    reused = decode_with_retries(
        engine, [{"role": "user", "content": "p"}], decode, check, 3, given
    )
    assert reused.texts == ["given", "answer 1", "answer 2", "answer 3"] and len(prompts) == 3
    assert reused.forwards == 7 and reused.wall_seconds >= 2.0


def test_violation_sentences() -> None:
    docs = {"stay_lengths": "Each stay lasts as many days as asked for its city."}
    assert violation_sentences(["stay_lengths", "parse: bad"], docs) == [
        "stay_lengths (Each stay lasts as many days as asked for its city).",
        "parse: bad.",
    ]


# ------------------------------------------------------------------ aggregation


def _rec(method: str, cities: int, valid: bool, tokens: int, forwards: int, wall: float) -> Any:
    return RecordResult(
        method,
        0,
        cities,
        valid=valid,
        exact_match=valid,
        parse_ok=True,
        tokens=tokens,
        forwards=forwards,
        wall_seconds=wall,
        critical_seconds=wall / 10,
    )


def test_summaries_from_known_counts() -> None:
    records = [
        _rec("syntax", 3, False, 100, 100, 4.0),
        _rec("syntax", 4, True, 200, 200, 6.0),
        _rec("factorspec", 3, True, 120, 4, 1.0),
        _rec("factorspec", 4, True, 180, 6, 1.0),
        RecordResult("factorspec", 1, 4, error="IncompleteGenerationError: x", wall_seconds=2.0),
    ]
    s = summarize(records)
    assert list(s) == ["syntax", "factorspec"]
    syn = s["syntax"][None]
    assert (syn.records, syn.valid, syn.tokens, syn.forwards) == (2, 1, 300, 300)
    assert syn.valid_pct == 50.0 and syn.tokens_per_step == 1.0
    assert syn.tokens_per_second == 30.0 and syn.wall_per_record == 5.0
    assert syn.valid_per_second == pytest.approx(0.1)
    fs = s["factorspec"]
    assert list(fs) == [None, 3, 4]
    assert fs[None].errors == 1 and fs[None].records == 3 and fs[None].valid == 2
    assert fs[None].tokens_per_step == 30.0
    assert fs[None].valid_per_second == pytest.approx(0.5)
    assert fs[None].critical_share == pytest.approx(0.2 / 4.0)
    assert fs[4].tokens_per_step == 30.0 and fs[4].valid == 1
    (row,) = ratios(s)
    assert row["baseline"] == "syntax"
    assert row["valid_per_second"] == pytest.approx(5.0)
    assert row["tokens_per_second"] == pytest.approx(75.0 / 30.0)
    assert row["wall_speedup"] == pytest.approx(5.0 / (4.0 / 3))


def test_ratio_against_a_baseline_with_no_valid_record() -> None:
    records = [
        _rec("free", 3, False, 50, 50, 1.0),
        _rec("syntax+ngram-k3", 3, False, 100, 50, 2.0),
        _rec("syntax+ngram-k5", 3, False, 100, 40, 1.0),
        _rec("factorspec", 3, True, 100, 5, 1.0),
    ]
    rows = {r["baseline"]: r for r in ratios(summarize(records))}
    assert set(rows) == {"free", "syntax+ngram-k5"}  # the best k stands for syntax+ngram
    assert rows["free"]["valid_per_second"] is None
    assert rows["syntax+ngram-k5"]["wall_speedup"] == pytest.approx(1.0)
    report = BenchReport({"n": 1}, records)
    assert "∞ (baseline 0 valid)" in report.markdown()
    assert BenchReport.from_json(json.loads(json.dumps(report.to_json()))).records == records


# ------------------------------------------------------------------ runner and CLI


def test_runner_every_method_on_a_scripted_engine(tmp_path: Path) -> None:
    problems = generate_bench_problems(2, (3, 3), 0)
    golden = json.dumps(itinerary_record(problems[0].golden))
    engine = ScriptedEngine.from_script(tiny_tokenizer(), golden)
    lines: list[str] = []
    report = run_trip_bench(
        2, (3, 3), "all", engine, tmp_path, 0, max_tokens=400, progress=False, log=lines.append
    )
    methods = list(METHODS)
    assert [r.method for r in report.records] == methods * 2
    assert len(lines) == 2 * len(methods)
    assert not [r.error for r in report.records if r.error]
    first = {r.method: r for r in report.records if r.problem == 0}
    for method in ("free", "syntax", "syntax+retry", "factorspec", "factorspec-certain"):
        assert first[method].valid and first[method].exact_match, method
    assert first["syntax+retry"].attempts == 1
    assert all(r.valid for r in report.records if r.method.startswith("factorspec"))
    fs, syn = first["factorspec"], first["syntax"]
    assert fs.tokens / fs.forwards > 5 * syn.tokens / syn.forwards
    names = {p.name for p in report.files}
    assert {"results.json", "results.md", "tokens_per_step.png"} <= names
    assert (tmp_path / "valid_records_per_second.png").stat().st_size > 1000
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["config"]["complete"] is True and len(data["records"]) == 2 * len(methods)
    assert data["summaries"]["factorspec"]["3"]["valid"] == 2
    assert "## Per city count" in (tmp_path / "results.md").read_text()


def test_prompts_are_identical_across_methods() -> None:
    from factorspec_sdk.client import Client
    from factorspec_sdk.domains.trip import Itinerary
    from factorspec_sdk.graph import compile_spec
    from factorspec_sdk.prompts import schema_hint
    from factorspec_sdk.relations.pydantic_layout import build_layout

    engine = _random_engine(0)
    prompt = prompt_for(PROBLEM)
    by_client = Client(engine).prompt_ids(prompt, layout=compile_spec(Itinerary, PROBLEM).layout)
    hint = schema_hint(build_layout(Itinerary))
    content = prompt + "\n\nAnswer with JSON of this form: " + hint
    assert engine.apply_chat_template([{"role": "user", "content": content}]) == by_client


def test_a_crashing_method_is_an_error_per_record(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> DecodeRun:
        raise RuntimeError("no luck")

    monkeypatch.setattr(baselines, "free_steps", boom)
    engine = _random_engine(0)
    report = run_trip_bench(1, (3, 3), "free", engine, None, progress=False)
    (record,) = report.records
    assert record.error == "RuntimeError: no luck" and not record.valid
    assert summarize(report.records)["free"][None].errors == 1


def test_cli(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(bench_app, ["trip", "--engine", "nope"])
    assert bad.exit_code == 3
    assert "embedded" in bad.output and "scripted" in bad.output
    assert runner.invoke(bench_app, ["trip", "--methods", "beam"]).exit_code == 2
    assert runner.invoke(bench_app, ["trip", "--cities", "1-20"]).exit_code == 2
    assert runner.invoke(bench_app, ["trip", "--itinerary", "weeks"]).exit_code == 2
    ok = runner.invoke(
        bench_app,
        [
            "trip",
            "--n",
            "1",
            "--cities",
            "3",
            "--methods",
            "free,factorspec",
            "--engine",
            "scripted",
            "--max-tokens",
            "300",
            "--out",
            str(tmp_path),
            "--no-unique",
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert "| factorspec |" in ok.output
    again = runner.invoke(bench_app, ["report", str(tmp_path / "results.json")])
    assert again.exit_code == 0 and "# Trip-planning benchmark" in again.output


def test_shards_merge_into_the_unsharded_run(tmp_path: Path) -> None:
    engine = _random_engine(0)
    kwargs: dict[str, Any] = {"max_tokens": 120, "progress": False}
    whole = run_trip_bench(3, (3, 3), "free,factorspec", engine, None, 0, **kwargs)
    runner = CliRunner()
    paths = []
    for k in range(2):
        shard = run_trip_bench(
            3, (3, 3), "free,factorspec", engine, tmp_path / f"s{k}", 0, shard=(k, 2), **kwargs
        )
        assert {r.problem for r in shard.records} == {i for i in range(3) if i % 2 == k}
        paths.append(str(tmp_path / f"s{k}" / "results.json"))
    merged = runner.invoke(bench_app, ["report", *paths, "--out", str(tmp_path / "all")])
    assert merged.exit_code == 0, merged.output
    assert "run as 2 shards" in merged.output
    data = json.loads((tmp_path / "all" / "results.json").read_text())
    assert data["config"]["complete"] is True and data["config"]["shards"] == ["0/2", "1/2"]
    keys = ["problem", "method", "valid", "exact_match", "tokens", "forwards", "text"]
    assert [{k: r[k] for k in keys} for r in data["records"]] == [
        {k: getattr(r, k) for k in keys} for r in whole.records
    ]
    # a shard twice, or shards of different runs, are refused
    assert runner.invoke(bench_app, ["report", paths[0], paths[0], "--out", "x"]).exit_code == 2
    assert runner.invoke(bench_app, ["report", *paths]).exit_code == 2
    other = run_trip_bench(3, (3, 3), "free", engine, tmp_path / "o", 1, shard=(1, 2), **kwargs)
    assert other.records
    bad = [paths[0], str(tmp_path / "o" / "results.json"), "--out", str(tmp_path / "x")]
    assert runner.invoke(bench_app, ["report", *bad]).exit_code == 2
    with pytest.raises(ValueError, match="K/M"):
        parse_shard("2")
    with pytest.raises(ValueError, match="0 <= K < M"):
        parse_shard("2/2")


def test_batched_runs_decode_what_one_at_a_time_decodes() -> None:
    engine = _random_engine(0)
    kwargs: dict[str, Any] = {"max_tokens": 150, "progress": False}
    methods = "free,syntax,syntax+retry,syntax+ngram-k3,factorspec"
    one = run_trip_bench(5, (3, 4), methods, engine, None, 0, **kwargs)
    together = run_trip_bench(5, (3, 4), methods, engine, None, 0, batch=3, **kwargs)
    assert together.config["batch"] == 3
    keys = ("text", "tokens", "forwards", "valid", "attempts", "error")

    def by_key(report: BenchReport) -> dict[tuple[int, str], tuple[object, ...]]:
        return {(r.problem, r.method): tuple(getattr(r, k) for k in keys) for r in report.records}

    assert by_key(one) == by_key(together)
    # batches hold one city count; a batch's records share its wall time
    for method in ("free", "factorspec"):
        walls: dict[int, set[float]] = {}
        for r in together.records:
            if r.method == method:
                walls.setdefault(r.cities, set()).add(r.wall_seconds)
        assert all(len(w) <= 2 for w in walls.values())  # at most a full and a partial batch
    # the retry's first attempt is the syntax record, reused rather than decoded again
    for r in together.records:
        if r.method == "syntax+retry":
            syntax = next(
                s for s in together.records if s.method == "syntax" and s.problem == r.problem
            )
            assert r.tokens >= syntax.tokens and r.wall_seconds >= syntax.wall_seconds


def test_a_stopped_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    engine = _random_engine(0)
    kwargs: dict[str, Any] = {"max_tokens": 120, "progress": False}
    whole = run_trip_bench(3, (3, 3), "free,factorspec", engine, None, 0, **kwargs)
    run_trip_bench(3, (3, 3), "free,factorspec", engine, tmp_path, 0, **kwargs)
    # a run stopped after problem 0 (and half-way through problem 1)
    path = tmp_path / "results.json"
    data = json.loads(path.read_text())
    data["records"] = [r for r in data["records"] if r["problem"] == 0] + [
        r for r in data["records"] if r["problem"] == 1 and r["method"] == "free"
    ]
    data["config"]["complete"] = False
    path.write_text(json.dumps(data))
    lines: list[str] = []
    resumed = run_trip_bench(
        3, (3, 3), "free,factorspec", engine, tmp_path, 0, resume=True, log=lines.append, **kwargs
    )
    assert len(lines) == 4  # problems 1 and 2, both methods: nothing of problem 0 again
    keys = ("problem", "method", "text", "tokens", "valid")
    assert sorted(tuple(getattr(r, k) for k in keys) for r in resumed.records) == sorted(
        tuple(getattr(r, k) for k in keys) for r in whole.records
    )
    assert resumed.config["complete"] is True and len(resumed.config["resumed"]) == 1
    assert "continued with `--resume` 1 time(s)" in resumed.markdown()
    with pytest.raises(ValueError, match="max_tokens"):
        run_trip_bench(3, (3, 3), "free,factorspec", engine, tmp_path, 0, resume=True)
    with pytest.raises(ValueError, match="nothing to resume"):
        run_trip_bench(3, (3, 3), "free", engine, tmp_path / "empty", 0, resume=True, **kwargs)


def test_the_dated_itinerary_runs_every_method() -> None:
    """``dated=True``: the same problems with calendar dates, scored as dated records."""
    from factorspec_sdk.domains.trip_dates import BENCH_START, dated_problem, dated_record

    problems = generate_bench_problems(1, (3, 3), 0)
    dated = dated_problem(problems[0], BENCH_START)
    schema = itinerary_schema(dated)
    stay = schema["properties"]["stays"]["items"]["properties"]
    assert stay["first_date"] == {"type": "string", "format": "date"}
    golden = json.dumps(dated_record(dated, list(problems[0].golden)))
    engine = ScriptedEngine.from_script(tiny_tokenizer(), golden)
    methods = "free,syntax,factorspec"
    report = run_trip_bench(
        1, (3, 3), methods, engine, None, 0, max_tokens=500, progress=False, dated=True
    )
    assert report.config["itinerary"] == "dates"
    by = {r.method: r for r in report.records}
    for method in methods.split(","):
        assert by[method].valid and by[method].exact_match and not by[method].error, method
    assert '"first_date": "2026-12-28"' in by["factorspec"].text
    fs, syn = by["factorspec"], by["syntax"]
    assert fs.tokens / fs.forwards > 5 * syn.tokens / syn.forwards
