"""Loading a model for the embedded engine: the libraries, a folder's tokenizer and weights.

`load_tokenizer` and `load_weights` read a model folder (its weights in a given dtype, never
cast from another: see `EmbeddedEngine._set_dtype`); `check_causal_lm` checks what a caller
hands `from_transformers`; `check_vocabulary` and `tokenizer_info` fit a tokenizer to the
model's logits rows. What the engine settles at load by timing its forwards (the dtype, the
cost curve) is `factorspec_sdk.engines.embedded.settle`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from factorspec_sdk.errors import ModelLoadError
from factorspec_sdk.tokens.vocab import TokenizerInfo

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "check_causal_lm",
    "check_vocabulary",
    "load_tokenizer",
    "load_weights",
    "require_libraries",
    "tokenizer_info",
    "weights_dtype",
]


def require_libraries(who: str) -> None:
    """Import torch and transformers once, so that a missing one is a clear error.

    Raises:
        ModelLoadError: either is missing.
    """
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise ModelLoadError(
            f"{who} needs torch and transformers ({exc}); install `factorspec-sdk[embedded]`"
        ) from exc


def load_tokenizer(path: str) -> PreTrainedTokenizerBase:
    """A model folder's tokenizer.

    Raises:
        ModelLoadError: it cannot be loaded.
    """
    import transformers

    try:
        tok: PreTrainedTokenizerBase = transformers.AutoTokenizer.from_pretrained(
            path, local_files_only=True
        )
    except Exception as exc:
        raise ModelLoadError(f"cannot load model {path!r}: {exc}") from exc
    return tok


def load_weights(path: str, dtype: torch.dtype, device: torch.device) -> PreTrainedModel:
    """A model folder's weights in ``dtype`` on ``device``, in eval mode.

    Raises:
        ModelLoadError: they cannot be loaded.
    """
    import torch
    import transformers

    bars = transformers.utils.logging.is_progress_bar_enabled()
    # A 1 s load needs no progress bar.
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=dtype, local_files_only=True
        )
        torch.nn.Module.to(model, device)
    except Exception as exc:
        raise ModelLoadError(f"cannot load model {path!r}: {exc}") from exc
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()  # type: ignore[no-untyped-call]
    torch.nn.Module.train(model, False)
    return model


def weights_dtype(model: PreTrainedModel) -> torch.dtype:
    """The dtype the model computes in: ``model.dtype``, else its first parameter's.

    Raises:
        ModelLoadError: the model has no parameters.
    """
    import torch

    dtype = getattr(model, "dtype", None)
    if isinstance(dtype, torch.dtype):
        return dtype
    for parameter in torch.nn.Module.parameters(model):
        return parameter.dtype
    raise ModelLoadError(f"{type(model).__name__} has no parameters")


def check_causal_lm(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> torch.device:
    """Check what a caller hands `from_transformers`; returns the device the model is on.

    Raises:
        ModelLoadError: ``model`` is not a causal LM (a tokenizer, an object without
            ``forward`` and ``config``, a base model without an LM head) or is in training
            mode; ``tokenizer`` is not a transformers tokenizer.
    """
    import torch
    import transformers

    kind = type(model).__name__
    given: object = model  # checked as what it is, not as what it is annotated
    if isinstance(given, transformers.PreTrainedTokenizerBase):
        raise ModelLoadError(
            f"from_transformers got a tokenizer ({kind}) as the model: pass the causal LM "
            "first, from_transformers(model, tokenizer)"
        )
    if (
        not isinstance(given, torch.nn.Module)
        or not callable(getattr(given, "forward", None))
        or getattr(given, "config", None) is None
    ):
        raise ModelLoadError(
            f"from_transformers needs a transformers causal LM, a torch module with `forward` "
            f"and `config` such as AutoModelForCausalLM.from_pretrained(...) returns; got {kind}"
        )
    head = getattr(given, "get_output_embeddings", None)
    if not callable(head) or head() is None:
        raise ModelLoadError(
            f"{kind} has no LM head (get_output_embeddings() is None): load the model with "
            "AutoModelForCausalLM, not AutoModel"
        )
    if given.training:
        raise ModelLoadError(
            f"{kind} is in training mode (dropout is on): call model.eval() before "
            "from_transformers (from_pretrained returns the model in eval mode)"
        )
    if not isinstance(tokenizer, transformers.PreTrainedTokenizerBase):
        raise ModelLoadError(
            "from_transformers needs the model's transformers tokenizer "
            f"(AutoTokenizer.from_pretrained(...)); got {type(tokenizer).__name__}"
        )
    device = getattr(model, "device", None)
    if not isinstance(device, torch.device):
        device = next(torch.nn.Module.parameters(model)).device
    return device


def check_vocabulary(tok: PreTrainedTokenizerBase, model: PreTrainedModel) -> int:
    """The model's logits rows (``config.vocab_size``), once the tokenizer fits in them.

    Raises:
        ModelLoadError: the tokenizer has more tokens than the model has embedding rows.
    """
    vocab_rows = int(model.config.vocab_size)
    rows = vocab_rows
    with contextlib.suppress(NotImplementedError):  # a model may have no such accessor
        embeddings = model.get_input_embeddings()
        rows = min(rows, int(getattr(embeddings, "num_embeddings", rows)))
    if len(tok) > rows:
        raise ModelLoadError(
            f"the tokenizer ({type(tok).__name__}) has {len(tok)} tokens but "
            f"{type(model).__name__} has {rows} embedding rows: it is not this model's "
            "tokenizer (or tokens were added without `model.resize_token_embeddings`)"
        )
    return vocab_rows


def tokenizer_info(
    tok: PreTrainedTokenizerBase,
    model: PreTrainedModel,
    config: PretrainedConfig,
    vocab_rows: int,
) -> TokenizerInfo:
    """Token byte strings, special tokens and the encoder of ``tok`` over ``vocab_rows`` rows.

    The model's generation config and ``config`` name eos tokens too; logits rows past the
    tokenizer's tokens (padding) are special tokens with no bytes.
    """
    extra: list[int] = []
    gen = getattr(model, "generation_config", None)
    for source in (gen, config):
        eos = getattr(source, "eos_token_id", None)
        if isinstance(eos, int):
            extra.append(eos)
        elif isinstance(eos, list | tuple):
            extra.extend(int(e) for e in eos)
    info = TokenizerInfo.from_hf(tok, extra_eos_ids=extra)
    if info.vocab_size < vocab_rows:  # logits rows past the tokenizer: padding
        pad = range(info.vocab_size, vocab_rows)
        info = TokenizerInfo(
            vocab=(*info.vocab, *(b"" for _ in pad)),
            eos_ids=info.eos_ids,
            special_ids=info.special_ids | frozenset(pad),
            encode=info.encode,
        )
    return info
