"""Runs (`factorspec_sdk.drafter.runs`): a free string and the choices after it, one request.

On the tiny vocabulary with `tests.helpers.GuidedEngine` (llguidance's real matcher, as vLLM's
``guidance`` backend constrains a regex): a list of strings is one request, and the record is
the logits decoder's token for token. On SmolLM2's vocabulary: at every position of a run,
every token FactorSpec's masks allow is one the run's regex allows, which is what makes a
greedy reply the embedded engine's.
"""

from __future__ import annotations

import json
from typing import Literal

import numpy as np
import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import Client
from factorspec_sdk.bench.schemas import load_hf_tokenizer
from factorspec_sdk.drafter.runs import FORCED_SPLIT, MAX_OPTIONS, free_run
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.tokens.grammar import grammar_tables
from factorspec_sdk.tokens.plan import Finished, FreeCursor, planner_for
from factorspec_sdk.tokens.vocab import TokenizerInfo
from tests.helpers import CHARS, MULTI, GuidedEngine, Post

TOK = TokenizerInfo.tiny(
    CHARS + [m for m in MULTI if m != ', "'] + ['"]', '"],', '"]}', ' "', "],"]
)
"""SmolLM2's split: ``,`` and `` "`` are tokens of their own, and ``",`` and ``"],`` too."""


class Recipe(BaseModel):
    """Lists of free strings between long keys, and a small number."""

    name: str = Field(max_length=20)
    ingredients: list[str] = Field(min_length=2, max_length=5)
    tags: list[str] = Field(max_length=3)
    minutes: int = Field(ge=1, le=9)


class Ticket(BaseModel):
    """Optional keys and a small enum after free strings."""

    title: str
    priority: Literal["low", "high"]
    note: str | None = None
    labels: list[str] = Field(default_factory=list, max_length=4)


RECIPE = {
    "name": "pancakes",
    "ingredients": ["milk", "eggs", "flour", "sugar"],
    "tags": ["easy"],
    "minutes": 5,
}


def test_a_list_of_strings_is_one_request() -> None:
    """The name and the ingredients are a request each; the tags a choice and a request.

    After the name (and after the ingredients' ``]``) the forced text of the next key is
    longer than `FORCED_SPLIT` tokens: it is appended, and a new request starts after it.
    The tags list starts with a choice (``"`` or ``]``): one token within the exact mask
    (a run never starts at a choice), then a run from its string. The number's first digit
    is a choice of more than `MAX_OPTIONS`, which ends the tags' run.
    """
    assert len(TOK.encode('"], "tags": [')) >= FORCED_SPLIT
    script = json.dumps(RECIPE)
    engine = GuidedEngine(ScriptedEngine.from_script(TOK, script))
    result = Client(engine).generate(Recipe, "go", return_result=True, max_tokens=300)
    assert result.value.model_dump(exclude={"minutes"}) == {
        k: v for k, v in RECIPE.items() if k != "minutes"
    }  # the scripted model's digit is its own
    texts = [r.text for r in engine.replies]
    assert texts[1].startswith('milk", "eggs", "flour", "sugar"]'), texts
    assert engine.requests[2].allowed_ids is not None and texts[3].startswith('easy"]'), texts
    assert len(engine.requests) == 5, texts  # name, ingredients, tags' choice, tags, minutes
    assert engine.requests[4].allowed_ids is not None
    assert len(engine.requests[4].allowed_ids) == 9 > MAX_OPTIONS
    by_logits = Client(ScriptedEngine.from_script(TOK, script)).generate(
        Recipe, "go", return_result=True, max_tokens=300
    )
    assert result.tokens == by_logits.tokens


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampled_runs_stay_valid_and_within_the_masks(seed: int) -> None:
    """Replies sampled uniformly under the runs' regexes: every record validates.

    A token the regex allows and the masks do not is asked again as one token; a record is
    never invalid and the protocol never stalls.
    """
    engine = GuidedEngine(ScriptedEngine.random(TOK, seed=seed), rng=np.random.default_rng(seed))
    for model in (Recipe, Ticket):
        result = Client(engine).generate(model, "go", return_result=True, max_tokens=400)
        model.model_validate_json(result.text)


@pytest.mark.parametrize("model", [Recipe, Ticket, Post])
def test_a_runs_regex_allows_every_token_the_masks_allow(model: type[BaseModel]) -> None:
    """On SmolLM2's vocabulary, as vLLM's guidance backend masks a regex: at each position of
    a run (random walks through the masks, closers past the quote favoured), every token
    FactorSpec's masks allow where they allow more than one is one the run's regex allows,
    until the regex ends."""
    import llguidance.hf

    hf = load_hf_tokenizer()
    tok = TokenizerInfo.from_hf(hf)
    _check_runs(model, tok, llguidance.hf.from_tokenizer(hf, len(tok.vocab)))


def test_where_a_run_stops_past_a_closer_its_rest_is_allowed() -> None:
    """A vocabulary with ``"],`` but no ``],``: after a list's last item the run stops at
    ``]`` (the next key is a long forced text), and the regex still allows the ``,`` that
    the closer ``"],`` writes past it."""
    tok = TokenizerInfo.tiny(
        CHARS + [m for m in MULTI if m not in (', "', "],")] + ['"]', '"],', ' "']
    )
    assert '"],' in {v.decode() for v in tok.vocab} and "]," not in {v.decode() for v in tok.vocab}
    _check_runs(Recipe, tok, grammar_tables(tok).tokenizer, walks=12)


def _check_runs(
    model: type[BaseModel], tok: TokenizerInfo, as_vllm: object, walks: int = 4
) -> None:
    import llguidance

    planner = planner_for(compile_spec(model, None), tok)
    rng = np.random.default_rng(0)
    checked = runs = 0
    for _ in range(walks):
        cursor = planner.start()
        while not isinstance(cursor, Finished):
            regex = None
            if isinstance(cursor, FreeCursor) and not cursor.free.escape:
                regex = free_run(planner, cursor)
            matcher = None
            if regex is not None:
                matcher = llguidance.LLMatcher(as_vllm, llguidance.grammar_from("regex", regex))
                assert not matcher.is_error(), matcher.get_error()
                runs += 1
            steps = 0
            while not isinstance(cursor, Finished):
                allowed = planner.allowed(cursor)
                if matcher is not None:
                    bits = np.unpackbits(
                        np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8),
                        bitorder="little",
                    )
                    others = bits[: len(tok.vocab)].copy()
                    others[list(tok.eos_ids)] = 0
                    if not others.any():
                        assert matcher.is_accepting()
                        break  # the run ends here
                    # a certain token is no choice: a reply that writes its text in other
                    # tokens ends there, and the certain token is appended
                    missing = [tok.vocab[t] for t in allowed if not bits[t] and len(allowed) > 1]
                    assert not missing, (steps, missing[:5], regex[:300])
                    checked += 1
                closing = [
                    t
                    for t in allowed.tolist()
                    if isinstance(cursor, FreeCursor) and b'"' in tok.vocab[t]
                ]
                pick = int(rng.choice(closing if closing and rng.random() < 0.3 else allowed))
                cursor = planner.advance(cursor, pick)
                steps += 1
                if matcher is None or not bits[pick]:
                    break  # the run's reply would end before a certain token
                assert matcher.consume_token(pick), matcher.get_error()
    assert runs and checked > 20
