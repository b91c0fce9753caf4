"""The embedded engine's KV caches: one `transformers.DynamicCache` per sequence.

`KVCaches` makes, crops, joins and casts a model's caches, and pads one sequence's keys and
values for a batched forward (`factorspec_sdk.engines.embedded.runner`); a crop is exact or
not made (`crop_limit`: a sliding-window layer past its window starts over, and the next
forward runs the kept tokens again). `prompt_to_prefix_cache` copies a prompt's KV states into
the engine's `PrefixCache` once they have run, and `KVCaches.prefix_cache` decides whether a
model can keep one. The sequences themselves (their tokens, how many have run) are the
engine's `SequenceTable`; this module owns what is in the cache handles it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from factorspec_sdk.engines.prefix_cache import PrefixCache
from factorspec_sdk.errors import EngineError, ModelLoadError

if TYPE_CHECKING:
    import torch
    from transformers import DynamicCache, PretrainedConfig

    from factorspec_sdk.engines.sequences import SequenceState

__all__ = [
    "DEFAULT_PREFIX_CACHE_BYTES",
    "KVCaches",
    "crop_limit",
    "layer_tensors",
    "prompt_to_prefix_cache",
]

DEFAULT_PREFIX_CACHE_BYTES = 256 * 2**20
"""The prefix cache's default memory bound: 256 MiB of KV states, on any device.

SmolLM2-135M holds 46 KiB of KV states per token in float32 (30 layers, 3 KV heads of 64),
so this keeps about 5,700 prompt tokens (11,000 in bfloat16).
"""

KV = tuple["torch.Tensor", "torch.Tensor"]
"""One layer's ``(keys, values)``, each ``[batch, kv_heads, tokens, head_dim]``."""


class KVCaches:
    """The KV caches of one model's sequences, built from its config.

    Args:
        config: the model's config (``model.config``): the cache's layers and head shapes.
        device: where the model runs (a sequence with no cache yet is padded there).
    """

    def __init__(self, config: PretrainedConfig, device: torch.device) -> None:
        self.config = config
        self.device = device
        self.crop_limit = crop_limit(config)
        """Below how many tokens a cache crops exactly (`crop_limit`; ``None``: always)."""

    def empty(self) -> DynamicCache:
        """A cache holding no token."""
        from transformers import DynamicCache

        return DynamicCache(config=self.config)

    def of(self, data: Sequence[KV]) -> DynamicCache:
        """A cache holding ``data`` (one ``(keys, values)`` per layer)."""
        from transformers import DynamicCache

        return DynamicCache(data, config=self.config)

    def crop(self, cache: DynamicCache, run: int, length: int) -> tuple[DynamicCache, int]:
        """``cache`` (of ``run`` tokens) cut to its first ``length`` (`sequences.Crop`).

        Where the crop would not be exact (a sliding-window or recurrent layer past what it
        keeps, `crop_limit`), an empty cache instead: the next forward runs the kept tokens
        again, exact and slower.
        """
        if length > 0 and (self.crop_limit is None or run < self.crop_limit):
            cache.crop(length - run)
            return cache, length
        return self.empty(), 0

    def joined(self, blocks: Sequence[Sequence[KV]]) -> DynamicCache:
        """A new cache holding the prefix cache's ``blocks`` one after another (a copy)."""
        import torch

        data = []
        for layer in range(len(blocks[0])):
            keys = [block[layer][0] for block in blocks]
            values = [block[layer][1] for block in blocks]
            data.append((torch.cat(keys, dim=-2), torch.cat(values, dim=-2)))
        # DynamicCache appends the tensors to empty layers: the cache holds its own copy
        return self.of(data)

    def cast(self, cache: DynamicCache, dtype: torch.dtype) -> DynamicCache:
        """A copy of a cache that holds tokens, in ``dtype``."""
        pairs = [layer_tensors(layer) for layer in cache.layers]
        return self.of([(keys.to(dtype), values.to(dtype)) for keys, values in pairs])

    def padded(
        self, state: SequenceState[DynamicCache], layer: int, width: int, dtype: torch.dtype
    ) -> KV:
        """The sequence's cached keys/values of ``layer``, left-padded with zeros to ``width``."""
        import torch

        if state.run:
            keys, values = layer_tensors(state.cache.layers[layer])
        else:
            config = self.config
            heads = int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads)
            head_dim = int(
                getattr(config, "head_dim", None)
                or config.hidden_size // config.num_attention_heads
            )
            keys = values = torch.zeros((1, heads, 0, head_dim), dtype=dtype, device=self.device)
        pad = width - keys.shape[-2]
        if pad:
            zeros = keys.new_zeros((1, keys.shape[1], pad, keys.shape[-1]))
            keys = torch.cat([zeros, keys], dim=-2)
            values = torch.cat([zeros, values], dim=-2)
        return keys, values

    def prefix_cache(self, max_bytes: int | None, model: str) -> PrefixCache[torch.Tensor] | None:
        """The prefix cache of ``max_bytes`` (``None``: the default), or ``None`` when off.

        A model (named ``model`` in errors) with any cache layer other than a plain
        full-attention one (sliding-window, recurrent) gets none by default.

        Raises:
            ModelLoadError: ``max_bytes`` is negative, or positive for such a model.
        """
        from transformers.cache_utils import DynamicLayer

        if max_bytes is not None and max_bytes < 0:
            raise ModelLoadError(f"prefix_cache must be a byte count >= 0, got {max_bytes}")
        if max_bytes == 0:
            return None
        kinds = {type(layer) for layer in self.empty().layers}
        if kinds != {DynamicLayer}:
            if max_bytes is None:
                return None
            names = ", ".join(sorted(k.__name__ for k in kinds))
            raise ModelLoadError(
                f"{model} has cache layers of kinds {names}; the prefix cache needs plain "
                "full-attention layers (DynamicLayer): pass prefix_cache=0"
            )
        return PrefixCache(DEFAULT_PREFIX_CACHE_BYTES if max_bytes is None else max_bytes)


def crop_limit(config: PretrainedConfig) -> int | None:
    """Below how many cached tokens a cache of ``config`` crops exactly (``None``: always).

    Full-attention layers always crop; a sliding-window layer only before its window is full
    (past it, the keys a crop would uncover are gone); recurrent layers never (0).
    """
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    limit: int | None = None
    for layer in DynamicCache(config=config).layers:
        if type(layer) is DynamicLayer:
            continue
        window = layer.sliding_window if type(layer) is DynamicSlidingWindowLayer else 0
        limit = window if limit is None else min(limit, window)
    return limit


def prompt_to_prefix_cache(
    cache: PrefixCache[torch.Tensor] | None, state: SequenceState[DynamicCache]
) -> None:
    """Store the KV states of the sequence's prompt (its first ``store`` tokens) in ``cache``.

    Once: ``state.store`` is 0 afterwards. Nothing is stored while the prompt has not run
    in full, or when the cache does not hold one KV state per token run.
    """
    length, state.store = state.store, 0
    if cache is None or length > state.run:
        return
    layers = [layer_tensors(layer) for layer in state.cache.layers]
    if any(keys.shape[-2] != state.run for keys, _ in layers):
        return  # not one KV state per token run: nothing exact to store

    def kv_of(start: int, end: int) -> list[KV]:
        return [
            (keys[:, :, start:end].clone(), values[:, :, start:end].clone())
            for keys, values in layers
        ]

    cache.store(state.ids[:length], kv_of)


def layer_tensors(layer: object) -> KV:
    """The key and value tensors of an initialized dynamic cache layer.

    Raises:
        EngineError: the layer holds none.
    """
    import torch

    keys = getattr(layer, "keys", None)
    values = getattr(layer, "values", None)
    if not isinstance(keys, torch.Tensor) or not isinstance(values, torch.Tensor):
        raise EngineError(f"cache layer {type(layer).__name__} holds no key/value tensors")
    return keys, values
