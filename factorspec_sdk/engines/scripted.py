"""A numpy-only engine for tests: logits come from a Python function of the token prefix.

`ScriptedEngine` implements the `Engine` protocol without torch, so the decoding loop, masks
and verification math can be unit-tested in milliseconds. Two ready-made "models":

* `ScriptedEngine.random` — logits are a deterministic pseudo-random function of the last
  two tokens (a tiny random bigram/trigram model), for sampling-exactness tests;
* `ScriptedEngine.from_script` — strongly prefers the tokens of a fixed text.

``ScriptedEngine()`` with no arguments is the random model over `TokenizerInfo.tiny_bytes`
(every text encodes): the engine of ``factorspec serve --engine scripted``, for contract
tests and soaks of a server without a model.

It counts forward passes (``forward_calls``), tokens run (``tokens_processed``) and logits
rows computed (``rows_computed``).

Its sequences live in a `SequenceTable`, as the embedded engine's do
(`factorspec_sdk.engines.sequences`): the two engines check and roll back tokens alike.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from factorspec_sdk.engines.dtype_choice import CURVE_WIDTHS
from factorspec_sdk.engines.protocol import ChatMessage, Logits, SequenceId
from factorspec_sdk.engines.sequences import SequenceTable
from factorspec_sdk.errors import EngineError
from factorspec_sdk.tokens.vocab import TokenizerInfo

__all__ = ["LogitsFn", "ScriptedEngine", "default_cost_curve"]

LogitsFn = Callable[[Sequence[int]], npt.NDArray[np.floating]]
"""Maps a whole token prefix to the ``[vocab_size]`` logits of the next token."""

_LOGITS_CACHE_SIZE = 8192  # rows of the random model kept (a row is vocab_size floats)
_JSON_PIECES = ('{"', '": ', ', "', '"}', "true", "false", "null")


def default_cost_curve(k: int) -> float:
    """``1 + 0.03 (k - 1)``: a CPU-like curve where wide verification is cheap."""
    return 1.0 + 0.03 * (k - 1)


class _RandomLogits:
    """Deterministic pseudo-random logits keyed by the last two tokens (LRU-cached)."""

    __slots__ = ("cache", "scale", "seed", "size")

    def __init__(self, size: int, seed: int, scale: float) -> None:
        self.size = size
        self.seed = seed
        self.scale = scale
        self.cache: OrderedDict[tuple[int, int], npt.NDArray[np.float32]] = OrderedDict()

    def __call__(self, prefix: Sequence[int]) -> npt.NDArray[np.float32]:
        key = (
            int(prefix[-2]) + 1 if len(prefix) >= 2 else 0,
            int(prefix[-1]) + 1 if prefix else 0,
        )
        row = self.cache.get(key)
        if row is None:
            rng = np.random.default_rng([self.seed, *key])
            row = (rng.standard_normal(self.size) * self.scale).astype(np.float32)
            row.setflags(write=False)
            self.cache[key] = row
            if len(self.cache) > _LOGITS_CACHE_SIZE:
                self.cache.popitem(last=False)
        else:
            self.cache.move_to_end(key)
        return row


class _ScriptLogits:
    """Logit ``strength`` for the scripted token that continues the longest matched part."""

    __slots__ = ("eos", "script", "size", "strength")

    def __init__(self, size: int, script: list[int], eos: int | None, strength: float) -> None:
        self.size = size
        self.script = script
        self.eos = eos
        self.strength = strength

    def next_token(self, prefix: Sequence[int]) -> int | None:
        script = self.script
        tail = list(prefix[-len(script) :]) if script else []
        for matched in range(min(len(script), len(tail)), 0, -1):
            if tail[len(tail) - matched :] == script[:matched]:
                return script[matched] if matched < len(script) else self.eos
        return script[0] if script else self.eos

    def __call__(self, prefix: Sequence[int]) -> npt.NDArray[np.float32]:
        row = np.zeros(self.size, dtype=np.float32)
        token = self.next_token(prefix)
        if token is not None:
            row[token] = self.strength
        return row


class ScriptedEngine:
    """An `Engine` whose logits come from ``logits_fn(prefix)``; numpy only.

    Args:
        tokenizer: the vocabulary (e.g. `TokenizerInfo.tiny`; default: `TokenizerInfo.tiny_bytes`
            with a few JSON pieces).
        logits_fn: maps the full token prefix (prompt included) to next-token logits of
            length ``tokenizer.vocab_size``. Called once per position run. Default: the
            random model of `random` (seed 0, ``temperature_scale`` 2).
        cost_curve: relative cost of a forward over ``k`` tokens; default
            `default_cost_curve`.
        name: the engine name reported by `name`.

    Attributes:
        forward_calls: number of ``extend`` calls that ran (each is one batched "forward").
        tokens_processed: total positions run (pending prompt tokens included).
        batch_log: per forward, the number of positions run for each request.
        rows_computed: logits rows returned so far (``keep`` leaves some positions without).
    """

    def __init__(
        self,
        tokenizer: TokenizerInfo | None = None,
        logits_fn: LogitsFn | None = None,
        *,
        cost_curve: Callable[[int], float] | None = None,
        name: str = "scripted",
    ) -> None:
        if tokenizer is None:
            tokenizer = TokenizerInfo.tiny_bytes(_JSON_PIECES)
        if logits_fn is None:
            logits_fn = _RandomLogits(tokenizer.vocab_size, 0, 2.0)
        self._tokenizer = tokenizer
        self._logits_fn = logits_fn
        self._cost_curve = cost_curve or default_cost_curve
        self._name = name
        self._seqs: SequenceTable[None] = SequenceTable(tokenizer.vocab_size)
        self.forward_calls = 0
        self.tokens_processed = 0
        self.batch_log: list[tuple[int, ...]] = []
        self.rows_computed = 0

    @classmethod
    def random(
        cls,
        tokenizer: TokenizerInfo,
        seed: int = 0,
        temperature_scale: float = 1.0,
        *,
        cost_curve: Callable[[int], float] | None = None,
        name: str = "scripted",
    ) -> ScriptedEngine:
        """A tiny random model: logits are standard normals times ``temperature_scale``.

        The logits depend only on ``seed`` and the last two tokens of the prefix, so the same
        context always gives the same distribution (results are cached per context).

        Args:
            tokenizer: the vocabulary.
            seed: random seed.
            temperature_scale: spread of the logits (larger = peakier distributions).
            cost_curve: see the constructor.
            name: see the constructor.
        """
        fn = _RandomLogits(tokenizer.vocab_size, seed, temperature_scale)
        return cls(tokenizer, fn, cost_curve=cost_curve, name=name)

    @classmethod
    def from_script(
        cls,
        tokenizer: TokenizerInfo,
        text: str,
        strength: float = 10.0,
        *,
        cost_curve: Callable[[int], float] | None = None,
        name: str = "scripted",
    ) -> ScriptedEngine:
        """A model that strongly prefers writing ``text`` (then the first eos token).

        At each position the prefix's longest suffix that is a start of the script's tokens
        is found; the next scripted token gets logit ``strength``, all others ``0``. With no
        match the script's first token is preferred; after the whole script, eos.

        Args:
            tokenizer: the vocabulary; ``text`` is encoded with ``tokenizer.encode``.
            text: the text the model "wants" to write.
            strength: the logit of the preferred token.
            cost_curve: see the constructor.
            name: see the constructor.
        """
        eos = tokenizer.eos_ids[0] if tokenizer.eos_ids else None
        fn = _ScriptLogits(tokenizer.vocab_size, tokenizer.encode(text), eos, strength)
        return cls(tokenizer, fn, cost_curve=cost_curve, name=name)

    # ------------------------------------------------------------------ facts

    @property
    def name(self) -> str:
        """The engine name (``"scripted"`` unless set)."""
        return self._name

    @property
    def tokenizer(self) -> TokenizerInfo:
        """The vocabulary the engine was built with."""
        return self._tokenizer

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """The contents of ``messages`` encoded one after another (no markers)."""
        ids: list[int] = []
        for message in messages:
            try:
                ids.extend(self._tokenizer.encode(message["content"]))
            except ValueError as exc:
                raise EngineError(f"cannot encode chat message: {exc}") from exc
        return ids

    def verify_cost(self, k: int) -> float:
        """``cost_curve(k)`` (default ``1 + 0.03 (k - 1)``)."""
        if k < 1:
            raise EngineError(f"verify width must be at least 1, got {k}")
        return float(self._cost_curve(k))

    def cost_profile(self) -> dict[int, float]:
        """``verify_cost`` at a few widths (the same keys `EmbeddedEngine` measures)."""
        return {k: self.verify_cost(k) for k in CURVE_WIDTHS}

    # -------------------------------------------------------------- sequences

    def new_sequence(self, prompt_ids: Sequence[int]) -> SequenceId:
        """Start a sequence holding ``prompt_ids`` (run lazily by the first ``extend``)."""
        return self._seqs.open(prompt_ids, None)

    def length(self, seq: SequenceId) -> int:
        """Number of tokens the sequence holds."""
        return self._seqs.length(seq)

    def tokens(self, seq: SequenceId) -> list[int]:
        """A copy of the sequence's tokens (for tests)."""
        return self._seqs.tokens(seq)

    def truncate(self, seq: SequenceId, length: int) -> None:
        """Roll the sequence back to its first ``length`` tokens."""
        self._seqs.truncate(seq, length)

    def release(self, seq: SequenceId) -> None:
        """Free the sequence (unknown ids are ignored)."""
        self._seqs.release(seq)

    def extend(
        self,
        requests: Sequence[tuple[SequenceId, Sequence[int]]],
        *,
        keep: Sequence[int] | None = None,
    ) -> list[Logits]:
        """Append tokens to several sequences in one (counted) forward.

        As in `EmbeddedEngine.extend`, pending prompt tokens are run first but get no rows,
        and ``keep`` returns only the last ``keep[j]`` rows of request ``j`` (the logits
        function is not called for the others; `rows_computed` counts the rows returned).
        """
        if not requests:
            return []
        steps = self._seqs.plan(requests, keep)
        size = self._tokenizer.vocab_size
        results: list[Logits] = []
        counts: list[int] = []
        for step in steps:
            ids, k = step.state.ids, step.keep
            ids.extend(step.new)  # the rows read the new tokens; they have run once all do
            start = len(ids) - k
            rows = np.empty((k, size), dtype=np.float32)
            for j in range(start, len(ids)):
                row = np.asarray(self._logits_fn(ids[: j + 1]), dtype=np.float32)
                if row.shape != (size,):
                    raise EngineError(
                        f"logits function returned shape {row.shape}, expected ({size},)"
                    )
                rows[j - start] = row
            step.state.run = len(ids)
            counts.append(len(step.inputs))
            self.rows_computed += k
            results.append(rows)
        self.forward_calls += 1
        self.tokens_processed += sum(counts)
        self.batch_log.append(tuple(counts))
        return results
