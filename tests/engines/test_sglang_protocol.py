"""The requests FactorSpec sends SGLang parse under SGLang's own protocol models.

SGLang cannot run here (no CPU build), but its sources and sampling parameters can be read:
`make install` puts the sglang wheel (without its dependencies, plus the three small modules
its protocol imports) into ``.venv/sglang-protocol``, kept off the main environment's path.
The checks run in a subprocess with that folder on ``PYTHONPATH``. A server is sent its
native ``POST /generate`` (`factorspec_sdk.engines.openai_server`: sglang-router takes no
token-id prompt on ``/v1/completions``): every key of the body must be a field of SGLang's
``GenerateReqInput`` (the dataclass its HTTP server parses the body into; importing it needs
torch and more, so its fields are read from its source) and ``sampling_params`` must build
and verify an SGLang ``SamplingParams`` (a grammar segment's Lark grammar as its ``ebnf``,
which SGLang's ``llguidance`` grammar backend reads as Lark).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from factorspec_sdk.drafter.segments import _free_regex, continuations
from factorspec_sdk.engines.completion import Completion, regex_alternatives
from factorspec_sdk.engines.openai_server import DIALECTS
from factorspec_sdk.engines.sglang_engine import sampling_params
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.grammar import lark_grammar
from factorspec_sdk.tokens.plan import FreeCursor, Planner, TrieNode
from factorspec_sdk.writer.automaton import FreeString, Writer
from tests.helpers import TRIP_CONTEXT, Trip, tiny_tokenizer

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = Path(sys.prefix) / "sglang-protocol"

CHECK = """
import ast, importlib.util, json, sys
from pathlib import Path
from sglang.srt.sampling.sampling_params import SamplingParams
source = Path(importlib.util.find_spec("sglang.srt.managers.io_struct").origin).read_text()
tree = ast.parse(source)
(cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GenerateReqInput"]
fields = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}
cases = json.load(sys.stdin)
for case in cases:
    body = case["body"]
    assert set(body) <= fields, set(body) - fields
    assert body["input_ids"] and all(isinstance(t, int) for t in body["input_ids"])
    params = SamplingParams(**body["sampling_params"])
    params.verify(case["vocab"])
    assert params.regex == case["regex"] and params.ebnf == case["grammar"]
    assert params.skip_special_tokens is False
    assert params.max_new_tokens == case["max_tokens"]
    assert SamplingParams(**case["engine"]).regex == case["regex"]
    assert SamplingParams(**case["engine"]).ebnf == case["grammar"]
print("parsed", len(cases))
"""


def requests() -> list[Completion]:
    tok = tiny_tokenizer()
    planner = Planner(Writer(compile_spec(Trip, TRIP_CONTEXT)), tok)
    cursor = planner.start()
    while (token := planner.certain(cursor)) is not None:
        cursor = planner.advance(cursor, token)
    assert isinstance(cursor, TrieNode)
    choice = regex_alternatives([text for text, _ in continuations(cursor, tok.vocab)])
    free = FreeString(state=None, written="", min_length=1, max_length=40, close_suffix="")  # type: ignore[arg-type]
    grammar = lark_grammar(['{"rating": ', "}"], ['{"type": "number"}'])
    return [
        Completion([1, 2, 3], 12, regex=choice),
        Completion([4, 5], 41, regex=_free_regex(FreeCursor(free)), temperature=0.7, seed=9),
        Completion([6], 3, regex='(\\"|a\\.b)', top_p=0.5),
        Completion([7, 8], 30, grammar=grammar),  # a grammar segment, as ebnf
    ]


def test_requests_parse_under_sglang_models() -> None:
    if not PROTOCOL.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"{PROTOCOL} is missing; make install puts SGLang's protocol there")
        pytest.skip("SGLang's protocol models are not installed (make install does it)")
    dialect = DIALECTS["sglang"]
    assert dialect.route == "/generate"
    cases = []
    for r in requests():
        body = dialect.request(r, "m")
        cases.append(
            {
                "body": body,
                "engine": sampling_params(r),
                "vocab": 49152,
                "regex": r.regex,
                "grammar": r.grammar,
                "max_tokens": r.max_tokens,
            }
        )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PROTOCOL), str(ROOT)]))
    proc = subprocess.run(
        [sys.executable, "-c", CHECK],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"parsed {len(cases)}" in proc.stdout
