"""`from_transformers`: an `EmbeddedEngine` on a model and tokenizer the caller has loaded.

The error cases and the facts run on a 1-layer random Llama and a word-level tokenizer built
in memory (milliseconds, no files); the real-model tests load SmolLM2 in float32 once.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from examples import meeting
from factorspec_sdk import Client, EngineError, ModelLoadError, from_transformers
from factorspec_sdk.domains.trip import Itinerary, evaluate, generate_problem, prompt_for
from factorspec_sdk.engines import Engine
from factorspec_sdk.engines.embedded import PROFILE_KS

if TYPE_CHECKING:
    from factorspec_sdk.engines.embedded import EmbeddedEngine

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

WORDS = ["[UNK]", "</s>", "The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog."]


def tiny_tokenizer() -> Any:
    """A word-level fast tokenizer of `WORDS` (no chat template)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    raw = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, unk_token="[UNK]", eos_token="</s>"
    )


def tiny_llama(vocab_size: int = 16, dtype: Any = None) -> Any:
    """A random 1-layer Llama causal LM in eval mode."""
    config = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,  # the cost profile runs after a 200-token context
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    if dtype is not None:
        model = model.to(dtype)
    return model.eval()


# --------------------------------------------------------------------- no real model


def test_a_loaded_model_keeps_its_dtype_and_device() -> None:
    model = tiny_llama(dtype=torch.bfloat16)
    weights = model.model.embed_tokens.weight
    engine = from_transformers(model, tiny_tokenizer())
    assert isinstance(engine, Engine)
    assert (engine.name, engine.device, engine.dtype) == ("embedded", "cpu", "bfloat16")
    choice = engine.dtype_choice
    assert (choice.dtype, choice.how, dict(choice.costs)) == ("bfloat16", "explicit", {})
    assert model.model.embed_tokens.weight is weights  # not cast, not copied
    assert weights.dtype == torch.bfloat16
    assert engine.forward_calls == 0  # the warm-up counts no forwards
    assert engine.tokenizer.vocab_size == 16  # logits rows past the tokenizer: padding
    seq = engine.new_sequence([2, 3, 4])
    assert engine.extend([(seq, [5, 6])])[0].shape == (2, 16)
    assert sorted(engine.cost_profile()) == list(PROFILE_KS)  # timed in the model's dtype
    assert engine.dtype == "bfloat16"
    assert weights.dtype == torch.bfloat16


def test_a_model_that_ignores_logits_to_keep_gets_the_same_rows() -> None:
    """A batch's rows are read from the logits the model returned, however many it kept."""

    class AllLogits(transformers.LlamaForCausalLM):  # type: ignore[misc]
        def forward(
            self,
            input_ids: Any = None,
            attention_mask: Any = None,
            position_ids: Any = None,
            past_key_values: Any = None,
            use_cache: Any = None,
            logits_to_keep: int = 0,
            **kwargs: Any,
        ) -> Any:
            return super().forward(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=past_key_values,
                use_cache=use_cache,
                logits_to_keep=0,
                **kwargs,
            )

    model = tiny_llama()
    other = AllLogits(model.config)
    other.load_state_dict(model.state_dict())
    rows = []
    for m in (model, other.eval()):
        engine = from_transformers(m, tiny_tokenizer())
        a, b = engine.new_sequence([2, 3, 4]), engine.new_sequence([2])
        rows.append(engine.extend([(a, [5, 6, 7]), (b, [3, 4])], keep=[2, 1]))
    for kept, full in zip(*rows, strict=True):
        assert kept.shape == full.shape
        np.testing.assert_allclose(kept, full, atol=1e-5)


def test_the_tokenizer_is_not_the_model() -> None:
    tok = tiny_tokenizer()
    with pytest.raises(ModelLoadError, match="got a tokenizer"):
        from_transformers(tok, tok)


@pytest.mark.parametrize(
    "thing",
    [object(), SimpleNamespace(config=SimpleNamespace(vocab_size=16)), torch.nn.Linear(2, 2)],
    ids=["object", "no-forward", "no-config"],
)
def test_an_object_that_is_no_causal_lm_is_refused(thing: object) -> None:
    with pytest.raises(ModelLoadError, match="needs a transformers causal LM"):
        from_transformers(thing, tiny_tokenizer())  # type: ignore[arg-type]


def test_a_base_model_without_lm_head_is_refused() -> None:
    base = tiny_llama().model  # LlamaModel: hidden states, no logits
    with pytest.raises(ModelLoadError, match=r"no LM head.*AutoModelForCausalLM"):
        from_transformers(base, tiny_tokenizer())


def test_a_model_in_training_mode_is_refused() -> None:
    with pytest.raises(ModelLoadError, match=r"training mode.*model\.eval\(\)"):
        from_transformers(tiny_llama().train(), tiny_tokenizer())


def test_the_tokenizer_must_be_a_transformers_tokenizer() -> None:
    with pytest.raises(ModelLoadError, match=r"transformers tokenizer.*got dict"):
        from_transformers(tiny_llama(), {"vocab": WORDS})  # type: ignore[arg-type]


def test_a_tokenizer_larger_than_the_embeddings_is_refused() -> None:
    with pytest.raises(ModelLoadError, match="has 11 tokens but LlamaForCausalLM has 8"):
        from_transformers(tiny_llama(vocab_size=8), tiny_tokenizer())


def test_a_chat_prompt_needs_a_chat_template() -> None:
    engine = from_transformers(tiny_llama(), tiny_tokenizer())
    with pytest.raises(EngineError, match="no chat template"):
        engine.apply_chat_template([{"role": "user", "content": "the fox"}])
    with pytest.raises(EngineError, match="no chat template"):
        Client(engine).generate(Itinerary, "the fox", context=generate_problem(3, seed=1))


def test_the_callers_weights_are_never_cast() -> None:
    engine = from_transformers(tiny_llama(), tiny_tokenizer())
    with pytest.raises(EngineError, match="does not cast"):
        engine._set_dtype("bfloat16")
    assert engine.dtype == "float32"


# ----------------------------------------------------------------------- real model


@pytest.fixture(scope="module")
def hf_engine(embedded_engine_fp32: EmbeddedEngine) -> Iterator[EmbeddedEngine]:
    """SmolLM2 loaded by hand in float32, as a user would, behind `from_transformers`.

    It borrows the folder engine's cost curve: the drafter sizes its drafts by the curve, and
    forwards over other widths may round differently, so one curve makes both engines run
    the same forwards (both read one cached curve, but on a busy machine, where curves are
    not cached, each would time its own at load).
    """
    from factorspec_sdk.engines.model_store import default_model_path

    folder = default_model_path()
    tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, local_files_only=True
    )
    engine = from_transformers(model, tok)
    engine.verify_cost = embedded_engine_fp32.verify_cost  # type: ignore[method-assign]
    yield engine


@pytest.mark.model
def test_a_trip_on_a_loaded_model_is_valid(hf_engine: EmbeddedEngine) -> None:
    assert (hf_engine.name, hf_engine.dtype, hf_engine.dtype_choice.how) == (
        "embedded",
        "float32",
        "explicit",
    )
    assert hf_engine.model_path.endswith("SmolLM2-135M-Instruct")
    problem = generate_problem(4, seed=7, unique=False)
    result = Client(hf_engine).generate(
        Itinerary, prompt_for(problem), context=problem, return_result=True
    )
    assert isinstance(result.value, Itinerary)
    assert evaluate(problem, result.text, Itinerary).valid


@pytest.mark.model
def test_greedy_tokens_equal_the_folder_engine(
    hf_engine: EmbeddedEngine, embedded_engine_fp32: EmbeddedEngine
) -> None:
    """Same weights, dtype, kernels and forward shapes (one cost curve): the same tokens."""
    problem = generate_problem(4, seed=11, unique=False)
    cases: list[tuple[Any, str, object, dict[str, Any]]] = [
        (Itinerary, prompt_for(problem), problem, {}),
        (meeting.Meeting, meeting.SAMPLE_PROMPT, meeting.SAMPLE_CONTEXT, {}),
    ]
    for model, prompt, context, options in cases:
        a, b = (
            Client(engine).generate(model, prompt, context=context, return_result=True, **options)
            for engine in (embedded_engine_fp32, hf_engine)
        )
        assert b.tokens == a.tokens, model.__name__
        assert b.stats.verify_steps == a.stats.verify_steps
