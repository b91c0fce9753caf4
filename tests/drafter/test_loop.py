"""Exactness of the decoding loop on a tiny random model with a hand-made vocabulary."""

from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt
import pytest
from pydantic import BaseModel, Field

from factorspec_sdk import relation
from factorspec_sdk.drafter.loop import DecodeJob, Decoder, DecoderConfig
from factorspec_sdk.drafter.verify import SamplingParams, masked_probs
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.errors import TokenBudgetError
from factorspec_sdk.graph import compile_spec
from factorspec_sdk.ir import ir_from_json_schema, spec_from_ir
from factorspec_sdk.tokens.plan import Finished, Planner
from factorspec_sdk.writer.automaton import Writer
from tests.helpers import TRIP_CONTEXT, Pick, Trip, tiny_tokenizer

TOK = tiny_tokenizer()
PROMPT = TOK.encode("plan a trip to Paris and Rome then Parma")


class Note(BaseModel):
    title: str = Field(max_length=8)
    n: int = Field(ge=0, le=500)


def decode(
    engine: ScriptedEngine,
    model: type[BaseModel],
    context: object,
    config: DecoderConfig,
    params: SamplingParams,
    n: int = 1,
) -> list[tuple[str, list[int]]]:
    spec = compile_spec(model, context)
    jobs = [DecodeJob(Planner(Writer(spec), TOK), PROMPT, params) for _ in range(n)]
    outs = Decoder(engine, config).run(jobs)
    for o in outs:
        if o.error is not None:
            raise o.error
        model.model_validate_json(o.text, context=context)
    return [(o.text, o.tokens) for o in outs]


class Options(BaseModel):
    """Optional keys: left out freely, left out as a default the relations read, or written."""

    kind: Literal["a", "b"] = "a"
    k: int = Field(ge=0, le=9)
    note: str | None = Field(default=None, max_length=6)
    tags: list[bool] = Field(default_factory=list, max_length=2)  # read: always written
    size: int | None = Field(default=None, ge=0, le=3)

    @relation
    def tie(self) -> bool:
        return (self.kind == "a") == (self.k < 5) and len(self.tags) <= self.k

    @relation
    def sized(self) -> bool:
        return self.size is None or self.size < self.k


CASES = [(Pick, None), (Trip, TRIP_CONTEXT), (Note, None), (Options, None)]


@pytest.mark.parametrize(("model", "context"), CASES)
@pytest.mark.parametrize("seed", range(6))
def test_greedy_speculative_equals_plain(
    model: type[BaseModel], context: object, seed: int
) -> None:
    engine = ScriptedEngine.random(TOK, seed=seed, temperature_scale=3.0)
    params = SamplingParams(max_tokens=300)
    plain = decode(engine, model, context, DecoderConfig(speculative=False), params)
    calls_plain = engine.forward_calls
    for guesses in (0, 2):
        spec = decode(
            engine, model, context, DecoderConfig(speculative=True, max_guesses=guesses), params
        )
        assert spec == plain
    assert engine.forward_calls - calls_plain < 2 * calls_plain


class Letter(BaseModel):
    body: str = Field(max_length=30)
    title: str = Field(max_length=6)


def escaping_model(seed: int) -> ScriptedEngine:
    """A random bigram model that likes backslashes: its free strings are full of escapes."""
    backslashes = [i for i, raw in enumerate(TOK.vocab) if b"\\" in raw]

    def logits(prefix: Sequence[int]) -> npt.NDArray[np.float32]:
        rng = np.random.default_rng([seed, *(t + 1 for t in prefix[-2:])])
        row = (rng.standard_normal(TOK.vocab_size) * 3.0).astype(np.float32)
        row[backslashes] += 2.5
        return row

    return ScriptedEngine(TOK, logits)


@pytest.mark.parametrize("seed", [0, 1, 3, 4, 5, 7])  # seeds whose records hold escapes
def test_greedy_speculative_equals_plain_through_escapes(seed: int) -> None:
    """Free strings written with escapes (``\\n``, ``\\u00e9``, ...): drafts change no token."""
    engine = escaping_model(seed)
    params = SamplingParams(max_tokens=300)
    plain = decode(engine, Letter, None, DecoderConfig(speculative=False), params)
    assert "\\" in plain[0][0]
    for guesses in (0, 2):
        config = DecoderConfig(speculative=True, max_guesses=guesses)
        assert decode(engine, Letter, None, config, params) == plain


class Motto(BaseModel):
    """A record its schema fully determines: ~100 tokens of the tiny vocabulary."""

    motto: Literal["all work and no play makes jack a dull boy; all work and no play, again"]
    year: int = Field(ge=1980, le=1980)


@pytest.mark.parametrize("max_width", [4, 64])
def test_a_determined_record_takes_one_forward_and_one_logits_row(max_width: int) -> None:
    engine = ScriptedEngine.random(TOK, seed=1)
    config = DecoderConfig(max_width=max_width)
    [(text, tokens)] = decode(engine, Motto, None, config, SamplingParams(max_tokens=300))
    assert len(tokens) > 64 and Motto.model_validate_json(text).year == 1980
    assert engine.forward_calls == 1
    assert engine.rows_computed == 1  # certain tokens need no logits; only "is it the end?"


@pytest.mark.parametrize("guesses", [0, 2])
def test_certain_drafts_skip_their_logits_rows(guesses: int) -> None:
    engine = ScriptedEngine.random(TOK, seed=2)
    params = SamplingParams(max_tokens=300)
    plain = decode(engine, Trip, TRIP_CONTEXT, DecoderConfig(speculative=False), params)
    engine.forward_calls = engine.rows_computed = 0
    spec = decode(engine, Trip, TRIP_CONTEXT, DecoderConfig(max_guesses=guesses), params)
    assert spec == plain
    tokens = len(plain[0][1])
    if guesses == 0:  # no guesses: one row per forward, the row after the last certain token
        assert engine.rows_computed == engine.forward_calls < tokens / 3
    else:  # rows from the first guess on; every token had one (and every step one more) before
        assert engine.rows_computed < tokens


def test_speculation_saves_forwards() -> None:
    engine = ScriptedEngine.random(TOK, seed=3)
    params = SamplingParams(max_tokens=300)
    decode(engine, Trip, TRIP_CONTEXT, DecoderConfig(speculative=False), params)
    plain_calls = engine.forward_calls
    engine.forward_calls = 0
    decode(engine, Trip, TRIP_CONTEXT, DecoderConfig(max_guesses=0), params)
    assert engine.forward_calls * 3 < plain_calls


def test_batch_decodes_all_requests_in_shared_forwards() -> None:
    engine = ScriptedEngine.random(TOK, seed=5)
    params = SamplingParams(max_tokens=300)
    single = decode(engine, Trip, TRIP_CONTEXT, DecoderConfig(), params)
    engine.batch_log.clear()
    batch = decode(engine, Trip, TRIP_CONTEXT, DecoderConfig(), params, n=3)
    assert batch == single * 3
    assert max(len(rows) for rows in engine.batch_log) == 3


def test_max_tokens_below_the_shortest_record_is_refused_before_any_token() -> None:
    engine = ScriptedEngine.random(TOK, seed=0)
    with pytest.raises(TokenBudgetError) as info:
        decode(engine, Trip, TRIP_CONTEXT, DecoderConfig(), SamplingParams(max_tokens=5))
    assert (info.value.max_tokens, info.value.min_tokens) == (5, 62)
    assert "max_tokens=5" in str(info.value) and "62 tokens" in str(info.value)
    assert engine.forward_calls == 0


def exact_distribution(engine: ScriptedEngine, params: SamplingParams) -> dict[str, float]:
    """Probability of every record under non-speculative masked sampling, by enumeration."""
    planner = Planner(Writer(compile_spec(Pick)), TOK)
    out: dict[str, float] = {}

    def dfs(cursor: object, prefix: list[int], text: str, prob: float) -> None:
        if isinstance(cursor, Finished):
            out[text] = out.get(text, 0.0) + prob
            return
        allowed = planner.allowed(cursor)  # type: ignore[arg-type]
        if len(allowed) == 1:
            p = np.ones(1)
        else:
            seq = engine.new_sequence(prefix[:-1])
            row = engine.extend([(seq, [prefix[-1]])])[0][-1]
            engine.release(seq)
            p = masked_probs(row, allowed, params)
        for t, pt in zip(allowed.tolist(), p.tolist(), strict=True):
            if pt > 0:
                nxt = planner.advance(cursor, t)  # type: ignore[arg-type]
                dfs(nxt, [*prefix, t], text + TOK.decode([t]).decode(), prob * pt)

    dfs(planner.start(), list(PROMPT), "", 1.0)
    return out


@pytest.mark.parametrize(("speculative", "guesses"), [(False, 0), (True, 0), (True, 2)])
def test_sampled_distribution_matches_exact(speculative: bool, guesses: int) -> None:
    """Speculative sampling draws records with the exact masked-sampling distribution."""
    engine = ScriptedEngine.random(TOK, seed=11, temperature_scale=1.5)
    params = SamplingParams(temperature=1.0, seed=7, max_tokens=100)
    exact = exact_distribution(engine, params)
    assert len(exact) == 12 and abs(sum(exact.values()) - 1) < 1e-9
    n = 1500
    spec = compile_spec(Pick)
    config = DecoderConfig(speculative=speculative, max_guesses=guesses)
    counts: Counter[str] = Counter()
    base = 1000 * guesses + 10_000 * speculative
    planner = Planner(Writer(spec), TOK)  # cursors are immutable: requests may share it
    for start in range(0, n, 50):  # batches of 50 requests share each forward
        jobs = [
            DecodeJob(
                planner,
                PROMPT,
                SamplingParams(temperature=1.0, seed=base + i, max_tokens=100),
            )
            for i in range(start, start + 50)
        ]
        counts.update(o.text for o in Decoder(engine, config).run(jobs))
    assert set(counts) <= set(exact)
    keys = sorted(exact)
    observed = np.array([counts.get(k, 0) for k in keys], dtype=np.float64)
    expected = np.array([exact[k] * n for k in keys])
    # pool cells with tiny expectations, then chi-square with df = cells - 1
    big = expected >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    chi2 = float((((obs[keep] - exp[keep]) ** 2) / exp[keep]).sum())
    df = int(keep.sum()) - 1
    # 0.999 quantiles of chi-square for df = 1..11
    limit = [10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59, 31.26][df - 1]
    assert chi2 < limit, (chi2, df)


def test_continuous_batching_submit_step_cancel() -> None:
    engine = ScriptedEngine.random(TOK, seed=4)
    params = SamplingParams(max_tokens=300)
    spec = compile_spec(Trip, TRIP_CONTEXT)
    alone = decode(engine, Trip, TRIP_CONTEXT, DecoderConfig(), params)[0]
    dec = Decoder(engine, DecoderConfig())
    first = dec.submit(DecodeJob(Planner(Writer(spec), TOK), PROMPT, params))
    ended = dict(dec.step())
    assert not ended and dec.tokens_so_far(first)
    late = dec.submit(DecodeJob(Planner(Writer(spec), TOK), PROMPT, params))
    doomed = dec.submit(DecodeJob(Planner(Writer(spec), TOK), PROMPT, params))
    assert dec.cancel(doomed) and not dec.cancel(doomed)
    while dec.busy:
        ended.update(dec.step())
    dec.close()
    assert set(ended) == {first, late}
    assert (ended[first].text, ended[first].tokens) == alone
    assert (ended[late].text, ended[late].tokens) == alone


@pytest.mark.parametrize("speculative", [False, True])
def test_a_root_number_ends_when_the_model_picks_the_end_token(speculative: bool) -> None:
    """A record that is one number (a JSON Schema ``{"type": "number"}``) may end after any
    complete number: the model that wants ``0.25`` and then its end token writes ``0.25``,
    ending with that token, long before ``max_tokens``."""
    spec = spec_from_ir(ir_from_json_schema({"type": "number", "minimum": 0, "maximum": 1}))
    engine = ScriptedEngine.from_script(TOK, "0.25")
    job = DecodeJob(Planner(Writer(spec), TOK), PROMPT, SamplingParams(max_tokens=100))
    (out,) = Decoder(engine, DecoderConfig(speculative=speculative)).run([job])
    assert out.error is None, out.error
    assert out.text == "0.25"
    assert out.tokens == [*TOK.encode("0.25"), TOK.eos_ids[0]]
    assert out.stats.tokens == len(out.tokens)
