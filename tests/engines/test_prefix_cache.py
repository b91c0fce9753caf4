"""The prefix cache: the cache alone on numpy arrays, then inside the embedded engine.

The unit tests use numpy arrays as the key/value tensors (the cache only reads ``nbytes``).
The engine tests on a tiny random Llama need no files; the real-model ones use the session's
float32 SmolLM2 engine, each with a system prompt of its own (the engine's prefix cache is
shared by every test of the session).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import numpy.typing as npt
import openai  # noqa: TID253
import pytest

from factorspec_sdk import Client, ModelLoadError, from_transformers
from factorspec_sdk.engines.prefix_cache import PrefixCache
from factorspec_sdk.engines.protocol import PrefixCaching, cached_prompt_tokens
from factorspec_sdk.engines.scripted import ScriptedEngine
from factorspec_sdk.ir import to_ir
from factorspec_sdk.server import create_app
from factorspec_sdk.server.render import usage
from tests.helpers import Pick, tiny_tokenizer
from tests.server.helpers import MODEL, running

if TYPE_CHECKING:
    from factorspec_sdk.engines.embedded import EmbeddedEngine

Array = npt.NDArray[np.float32]
TIGHT = 1e-4  # fp32 logits run on a cached prefix vs. the whole prompt (seen: 0 apart)
BATCHED = 2e-2  # a padded batch reorders float sums (as tests/engines/test_embedded.py)


def fake_kv(layers: int = 2, width: int = 4) -> object:
    """``kv_of`` giving, for tokens ``start..end``, arrays filled with ``start`` (16 B each)."""

    def kv_of(start: int, end: int) -> list[tuple[Array, Array]]:
        block = np.full((width,), start, dtype=np.float32)
        return [(block.copy(), -block) for _ in range(layers)]

    return kv_of


def cache_of(max_bytes: int, block_size: int = 4) -> PrefixCache[Array]:
    return PrefixCache(max_bytes, block_size=block_size)


BLOCK_BYTES = 2 * 2 * 16  # 2 layers x (keys + values) x 4 float32


# ----------------------------------------------------------------------- the cache alone


def test_longest_prefix_in_whole_blocks() -> None:
    cache = cache_of(10**6)
    assert cache.store(list(range(10)), fake_kv()) == 8  # the partial block is not stored
    assert len(cache) == 2 and cache.nbytes == 2 * BLOCK_BYTES
    hit = cache.match([0, 1, 2, 3, 4, 5, 6, 7, 99, 99])
    assert hit.tokens == 8 and len(hit.blocks) == 2
    assert [float(block[0][0][0]) for block in hit.blocks] == [0.0, 4.0]  # in prompt order
    assert cache.match([0, 1, 2, 3, 4, 5, 99, 7, 8]).tokens == 4  # diverges in block 2
    assert cache.match([9, 1, 2, 3, 4, 5, 6, 7, 8]).tokens == 0
    assert cache.cached_length([0, 1, 2, 3, 4, 5, 6, 7]) == 8


def test_the_last_token_is_never_served() -> None:
    cache = cache_of(10**6)
    cache.store(list(range(8)), fake_kv())
    assert cache.match(list(range(8))).tokens == 4  # the whole prompt stored, not served
    assert cache.match(list(range(9))).tokens == 8
    assert cache.match([0]).tokens == 0
    assert cache.match([]).tokens == 0


def test_stored_blocks_are_not_sliced_again() -> None:
    cache = cache_of(10**6)
    calls: list[tuple[int, int]] = []
    kv = fake_kv()

    def kv_of(start: int, end: int) -> object:
        calls.append((start, end))
        return kv(start, end)  # type: ignore[operator]

    cache.store([1, 2, 3, 4, 5, 6, 7, 8], kv_of)  # type: ignore[arg-type]
    cache.store([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], kv_of)  # type: ignore[arg-type]
    cache.store([1, 2, 3, 4, 0, 0, 0, 0], kv_of)  # type: ignore[arg-type]
    assert calls == [(0, 4), (4, 8), (8, 12), (4, 8)]
    assert len(cache) == 4  # the shared first block is stored once
    stats = cache.stats
    assert (stats.tokens_stored, stats.blocks, stats.bytes) == (16, 4, 4 * BLOCK_BYTES)


def test_least_recently_used_blocks_go_first() -> None:
    cache = cache_of(3 * BLOCK_BYTES)
    a, b = [1, 1, 1, 1, 2, 2, 2, 2], [3, 3, 3, 3, 4, 4, 4, 4]
    cache.store(a, fake_kv())
    cache.store(b, fake_kv())  # 4 blocks > 3: a's last block goes (the oldest leaf)
    assert cache.stats.evictions == 1 and cache.nbytes == 3 * BLOCK_BYTES
    assert cache.cached_length(a) == 4 and cache.cached_length(b) == 8
    assert cache.match([*a, 0]).tokens == 4  # a's first block is now the most recent
    cache.store([5, 5, 5, 5, 6], fake_kv())  # evicts b's last block, then b's first
    assert cache.cached_length(b) == 4
    cache.store([7, 7, 7, 7, 8], fake_kv())
    assert cache.cached_length(b) == 0 and cache.cached_length(a) == 4
    assert cache.stats.evictions == 3 and len(cache) == 3


def test_eviction_never_strands_a_block() -> None:
    """Random prompts with shared prefixes under a tight bound: every block held is reachable."""
    rng = random.Random(0)
    cache = cache_of(7 * BLOCK_BYTES, block_size=2)
    prompts: list[list[int]] = []
    for _ in range(300):
        if prompts and rng.random() < 0.6:
            base = rng.choice(prompts)
            prompt = base[: rng.randrange(len(base) + 1)] + [rng.randrange(3) for _ in range(5)]
        else:
            prompt = [rng.randrange(3) for _ in range(rng.randrange(1, 12))]
        if rng.random() < 0.5:
            cache.match(prompt)
        else:
            cache.store(prompt, fake_kv())
            prompts.append(prompt)
        reachable = {
            tuple(p[:end]) for p in prompts for end in range(2, cache.cached_length(p) + 1, 2)
        }
        assert len(cache) == len(reachable)
        assert cache.nbytes == len(cache) * BLOCK_BYTES <= cache.max_bytes
    assert cache.stats.evictions > 0


def test_bounds_and_counters() -> None:
    off = cache_of(0)
    assert off.store(list(range(9)), fake_kv()) == 0 and len(off) == 0
    small = cache_of(BLOCK_BYTES - 1)  # one block does not fit
    assert small.store(list(range(9)), fake_kv()) == 0 and small.nbytes == 0
    cache = cache_of(10**6)
    cache.store(list(range(9)), fake_kv())
    cache.match(list(range(9)))
    cache.match([5, 5, 5, 5, 5])
    stats = cache.stats
    assert (stats.lookups, stats.hits, stats.tokens_served) == (2, 1, 8)
    cache.clear()
    assert cache.stats == cache_of(10**6).stats
    with pytest.raises(ValueError, match="max_bytes"):
        cache_of(-1)
    with pytest.raises(ValueError, match="block_size"):
        cache_of(10, block_size=0)


# ------------------------------------------------------------ the engine's side (no model)


def test_engines_without_a_prefix_cache_report_zero() -> None:
    engine = ScriptedEngine.random(tiny_tokenizer(), seed=0)
    assert not isinstance(engine, PrefixCaching)
    seq = engine.new_sequence([1, 2, 3])
    assert cached_prompt_tokens(engine, seq) == 0


def test_from_transformers_takes_the_bound() -> None:
    pytest.importorskip("transformers")
    from tests.engines.test_from_transformers import tiny_llama
    from tests.engines.test_from_transformers import tiny_tokenizer as word_tokenizer

    engine = from_transformers(tiny_llama(), word_tokenizer(), prefix_cache=4096)
    assert engine.prefix_cache is not None and engine.prefix_cache.max_bytes == 4096
    assert len(engine.prefix_cache) == 0  # the warm-up stored nothing
    assert from_transformers(tiny_llama(), word_tokenizer(), prefix_cache=0).prefix_cache is None
    with pytest.raises(ModelLoadError, match="prefix_cache"):
        from_transformers(tiny_llama(), word_tokenizer(), prefix_cache=-1)


def tiny_sliding_window_model() -> Any:
    """A one-layer Qwen2 whose attention sees a window of 4 tokens."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    config = transformers.Qwen2Config(
        vocab_size=16,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        use_sliding_window=True,
        sliding_window=4,
        max_window_layers=0,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    return transformers.Qwen2ForCausalLM(config).eval()


def test_sliding_window_models_get_no_prefix_cache() -> None:
    from tests.engines.test_from_transformers import tiny_tokenizer as word_tokenizer

    model = tiny_sliding_window_model()
    assert from_transformers(model, word_tokenizer()).prefix_cache is None
    with pytest.raises(ModelLoadError, match="DynamicSlidingWindowLayer"):
        from_transformers(model, word_tokenizer(), prefix_cache=2**20)


def test_a_sliding_window_model_rolls_back_past_its_window() -> None:
    """Truncating a sequence longer than the window (a rejected draft) stays exact."""
    from tests.engines.test_from_transformers import tiny_tokenizer as word_tokenizer

    engine = from_transformers(tiny_sliding_window_model(), word_tokenizer())
    ids = [3, 5, 7, 9, 11, 13, 2, 4]
    rolled = engine.new_sequence(ids[:2])
    engine.extend([(rolled, ids[2:7])])  # past the window of 4
    engine.truncate(rolled, 5)  # drop two "rejected" tokens
    (after,) = engine.extend([(rolled, ids[5:8])])
    fresh = engine.new_sequence(ids[:5])
    (straight,) = engine.extend([(fresh, ids[5:8])])
    assert engine.length(rolled) == engine.length(fresh) == 8
    np.testing.assert_allclose(np.asarray(after), np.asarray(straight), atol=1e-5)


def test_tiny_model_logits_with_and_without_the_cache() -> None:
    pytest.importorskip("transformers")
    from tests.engines.test_from_transformers import tiny_llama
    from tests.engines.test_from_transformers import tiny_tokenizer as word_tokenizer

    model, tok = tiny_llama(), word_tokenizer()
    cached, plain = from_transformers(model, tok), from_transformers(model, tok, prefix_cache=0)
    prompt = [2, 3, 4, 5, 6, 7, 8, 9, 10] * 5
    first = cached.new_sequence(prompt)
    cached.extend([(first, [2])])
    other = [*prompt[:-3], 9, 9, 9]
    seq, ref = cached.new_sequence(other), plain.new_sequence(other)
    assert cached.cached_tokens(seq) == 32 and plain.cached_tokens(ref) == 0
    new = [3, 4, 5]
    got, want = cached.extend([(seq, new)])[0], plain.extend([(ref, new)])[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=TIGHT)
    cached.truncate(seq, 20)  # back into the copied prefix
    plain.truncate(ref, 20)
    got, want = cached.extend([(seq, new)])[0], plain.extend([(ref, new)])[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=TIGHT)


# ------------------------------------------------------------------- the real SmolLM2 model


def _chat(engine: EmbeddedEngine, system: str, user: str) -> list[int]:
    return engine.apply_chat_template(
        [{"role": "system", "content": system}, {"role": "user", "content": user}]
    )


@pytest.mark.model
def test_logits_equal_with_and_without_a_cached_prefix(
    embedded_engine_fp32: EmbeddedEngine,
) -> None:
    engine = embedded_engine_fp32
    cache = engine.prefix_cache
    assert cache is not None
    system = "Prefix cache logits test. You plan trips across Europe. " * 6
    first = _chat(engine, system, "Visit Paris and Rome in 5 days.")
    second = _chat(engine, system, "Visit Oslo, Bergen and Riga in 9 days.")
    new = [second[-1], *range(100, 110)]  # the batch below: runs of similar width

    def run(prompts: Sequence[list[int]], news: Sequence[list[int]]) -> list[Array]:
        seqs = [engine.new_sequence(p) for p in prompts]
        try:
            return engine.extend(list(zip(seqs, news, strict=True)))
        finally:
            for s in seqs:
                engine.release(s)

    engine.prefix_cache = None  # the reference: the engine without its cache
    try:
        want = run([second[:-1]], [new])[0]
        want_first = run([first[:-1]], [first[-1:]])[0]
    finally:
        engine.prefix_cache = cache
    run([first[:-1]], [first[-1:]])  # stores the shared system prompt's blocks
    seq = engine.new_sequence(second[:-1])
    try:
        served = engine.cached_tokens(seq)
        shared = next(i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b)
        assert served > 0 and served % cache.block_size == 0
        assert shared - cache.block_size < served <= shared
        np.testing.assert_allclose(engine.extend([(seq, new)])[0], want, rtol=0, atol=TIGHT)
    finally:
        engine.release(seq)
    # the same prompt again: all of it but its last token comes from the cache
    again = engine.new_sequence(second[:-1])
    assert engine.cached_tokens(again) >= len(second) - 1 - cache.block_size
    engine.release(again)
    # batched with a sequence of another cached length (no split: the cost curve is not timed)
    got = run([second[:-1], first[:-1]], [new, first[-1:]])
    np.testing.assert_allclose(got[0], want, rtol=0, atol=BATCHED)
    np.testing.assert_allclose(got[1], want_first, rtol=0, atol=BATCHED)


@pytest.mark.model
def test_the_decoder_reports_cached_prompt_tokens(embedded_engine_fp32: EmbeddedEngine) -> None:
    client = Client(embedded_engine_fp32)
    system = "Prefix cache decoder test. Answer with a letter, a small number and a flag. " * 4
    results = [
        client.generate(Pick, f"Pick number {n}.", system=system, return_result=True)
        for n in (1, 2)
    ]
    first, second = (r.stats for r in results)
    assert first.cached_prompt_tokens < 16  # at most the chat template's opening
    assert 0 < second.cached_prompt_tokens < second.prompt_tokens
    assert second.cached_prompt_tokens >= len(embedded_engine_fp32.tokenizer.encode(system)) - 32


@pytest.mark.model
def test_server_usage_reports_cached_tokens(embedded_engine_fp32: EmbeddedEngine) -> None:
    system = "Prefix cache server test. Answer with a letter, a small number and a flag. " * 4
    with running(create_app(embedded_engine_fp32, model_name=MODEL)) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        answers = [
            client.chat.completions.create(
                model=MODEL,
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": f"Pick number {n}."},
                ],
                extra_body={"factorspec": {"ir": to_ir(Pick)}},
            )
            for n in (1, 2)
        ]
        metrics = httpx.get(url + "/metrics").text
    first, second = (a.usage for a in answers)
    assert first is not None and second is not None
    assert first.prompt_tokens_details is not None and second.prompt_tokens_details is not None
    assert first.prompt_tokens_details.cached_tokens < 16
    assert 0 < (second.prompt_tokens_details.cached_tokens or 0) < second.prompt_tokens
    line = next(x for x in metrics.splitlines() if x.startswith("factorspec_cached_prompt_tokens"))
    assert float(line.split()[-1]) >= (second.prompt_tokens_details.cached_tokens or 0)


# -------------------------------------------------------------------- usage (no model)


class _CachingScripted(ScriptedEngine):
    """A scripted engine that says the first 3 tokens of every prompt came from a cache."""

    def cached_tokens(self, seq: int) -> int:
        return min(3, self.length(seq))


def test_usage_and_metrics_carry_the_engines_count() -> None:
    engine = _CachingScripted(tiny_tokenizer())
    assert isinstance(engine, PrefixCaching)
    result = Client(engine).generate(Pick, "pick one", return_result=True)
    assert result.stats.cached_prompt_tokens == 3
    with running(create_app(engine, model_name=MODEL)) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        answer = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "pick one"}],
            extra_body={"factorspec": {"ir": to_ir(Pick)}},
        )
        remote = Client(base_url=url).generate(Pick, "pick one", return_result=True)
        metrics = httpx.get(url + "/metrics").text
    assert remote.stats.cached_prompt_tokens == 3  # the client reads the server's usage
    assert answer.usage is not None and answer.usage.prompt_tokens_details is not None
    assert answer.usage.prompt_tokens_details.cached_tokens == 3
    assert "factorspec_cached_prompt_tokens_total 6\n" in metrics
    assert usage([])["prompt_tokens_details"] == {"cached_tokens": 0}
