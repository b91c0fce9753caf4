"""``engine="sglang"``: FactorSpec on an in-process SGLang runtime (``sglang.Engine``); GPU only.

SGLang has no CPU build on PyPI, so this engine is written for GPU machines and checked there
by ``python -m factorspec_sdk.bench.gpu_check``; on a machine without it, creating the engine raises
`EngineError`. It speaks the same segment protocol as every completion engine
(`factorspec_sdk.drafter.segments`): FactorSpec appends the tokens the spec determines, and
at each choice point one ``Engine.generate(input_ids=..., sampling_params={"regex": ...})``
asks SGLang for the next value among the feasible ones (SGLang has no per-request
allowed-token list, so the constraint is a regex; its radix cache turns the shared prefix
into one prefill forward). A free string is one regex request too, and a grammar segment
(grammar values such as floats, dates, nested objects) one request with its llguidance Lark
grammar as ``ebnf``: SGLang's ``llguidance`` grammar backend reads Lark there (its
``grammar_from("ebnf", ...)``), so this engine starts SGLang with
``grammar_backend="llguidance"`` unless told otherwise, and refuses a grammar segment, saying
so, under another backend (XGrammar reads ``ebnf`` as GBNF). On an SGLang server, start it
with ``--grammar-backend llguidance`` for the same.

Why not SGLang's own plug points (see the docs' engines page): ``SpeculativeAlgorithm.register``
would put FactorSpec's drafter inside SGLang's scheduler, where it sees batches, not
requests, and must re-implement the oracle's per-request state there;
``CustomLogitProcessor`` is a per-token hook that runs inside the forward's critical path;
``register_grammar_backend`` expects a grammar compiled once per request, while FactorSpec's
allowed values change with every oracle answer. The segment protocol needs none of them and
keeps one code path for vLLM, SGLang and their servers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from factorspec_sdk.engines.completion import (
    Completion,
    CompletionReply,
    ConstraintStyle,
    LocalCompletionEngine,
)
from factorspec_sdk.errors import EngineError

__all__ = ["GRAMMAR_BACKEND", "SGLangEngine", "sampling_params"]

GRAMMAR_BACKEND = "llguidance"
"""SGLang's grammar backend that reads FactorSpec's grammar segments (Lark, as ``ebnf``)."""


def sampling_params(request: Completion) -> dict[str, Any]:
    """SGLang's ``sampling_params`` dict for one completion request.

    A regex goes as ``regex``; a grammar segment's Lark grammar as ``ebnf``, which SGLang's
    ``llguidance`` grammar backend reads as Lark.

    Raises:
        EngineError: a token-list constraint (SGLang takes a regex or a grammar).
    """
    if request.allowed_ids is not None:
        raise EngineError("SGLang takes regex and grammar constraints only, not allowed token ids")
    params: dict[str, Any] = {
        "max_new_tokens": request.max_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "skip_special_tokens": False,
    }
    if request.regex is not None:
        params["regex"] = request.regex
    else:
        params["ebnf"] = request.grammar
    if request.seed is not None:
        params["sampling_seed"] = request.seed
    return params


class SGLangEngine(LocalCompletionEngine):
    """A `CompletionEngine` over ``sglang.Engine`` (in-process SGLang runtime).

    Args:
        model: a local Hugging Face model folder (default: the SmolLM2 folder the embedded
            engine converts once).
        dtype: weights dtype.
        **engine_options: more ``sglang.Engine`` arguments (e.g. ``mem_fraction_static``);
            ``grammar_backend`` defaults to ``"llguidance"`` (`GRAMMAR_BACKEND`).

    Raises:
        EngineError: SGLang is missing (it has no CPU build on PyPI).
        ModelLoadError: SGLang cannot load the model.
    """

    def __init__(
        self, model: str | Path | None = None, *, dtype: str = "bfloat16", **engine_options: Any
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import sglang
        except ImportError as exc:
            raise EngineError(
                f"engine 'sglang' needs SGLang ({exc}); it has no CPU build on PyPI: install "
                "'factorspec-sdk[sglang]' on a GPU machine, or use engine='vllm'"
            ) from exc
        super().__init__(model, dtype)
        engine_options.setdefault("grammar_backend", GRAMMAR_BACKEND)
        self.grammar_backend = str(engine_options["grammar_backend"])
        """SGLang's grammar backend (``"llguidance"`` unless the caller named one)."""
        self._engine = self._load(
            "SGLang",
            lambda: sglang.Engine(model_path=self._model_path, dtype=dtype, **engine_options),
        )

    @property
    def name(self) -> str:
        """``"sglang"``."""
        return "sglang"

    @property
    def constraint_style(self) -> ConstraintStyle:
        """``"regex"``: SGLang constrains a request by a regular expression."""
        return "regex"

    def complete(self, requests: Sequence[Completion]) -> list[CompletionReply]:
        """One ``Engine.generate`` call for all requests (SGLang batches them)."""
        if not requests:
            return []
        if self.grammar_backend != GRAMMAR_BACKEND and any(r.grammar for r in requests):
            raise EngineError(
                f"a grammar segment goes to SGLang as an llguidance Lark grammar, which its "
                f"{self.grammar_backend!r} grammar backend does not read; start "
                f"SGLangEngine(grammar_backend={GRAMMAR_BACKEND!r}) (the default)"
            )
        params = [sampling_params(r) for r in requests]
        self.requests += len(requests)
        outputs = self._engine.generate(
            input_ids=[list(r.prompt_ids) for r in requests], sampling_params=params
        )
        if isinstance(outputs, dict):
            outputs = [outputs]
        eos = self.tokenizer.eos_ids
        replies: list[CompletionReply] = []
        for out in outputs:
            raw = out.get("output_ids")
            ids = None if raw is None else [int(t) for t in raw]
            meta = out.get("meta_info") or {}
            forwards = int(meta.get("completion_tokens", len(ids or [0])))
            if ids is not None:
                while ids and ids[-1] in eos:
                    ids.pop()
            replies.append(CompletionReply(str(out.get("text", "")), ids, max(1, forwards)))
        return replies

    def close(self) -> None:
        """Shut SGLang down."""
        engine = getattr(self, "_engine", None)
        if engine is not None:
            self._engine = None
            engine.shutdown()
