"""Syntax-only baselines: the decoding loops users would pick instead of FactorSpec.

Every loop here is written against the `Engine` protocol (so it runs on any engine) and is
greedy:

* `decode_free` — free generation: the model writes whatever it wants until an end token;
  the text is parsed afterwards.
* `decode_syntax` — a JSON-schema mask applied token by token, as XGrammar does in vLLM and
  SGLang: one forward per token, the masked argmax, ``GrammarMatcher.accept_token``.
* `decode_with_retries` — the syntax loop plus up to ``max_retries`` new attempts whose user
  message names the violated relations (what Instructor does): the previous answer is
  appended as the assistant turn, then "Your answer violates: ... Fix it.".
* `decode_syntax_ngram` — the syntax loop plus an n-gram (prompt-lookup) drafter, as vLLM's
  ``ngram`` speculator does: ``k`` tokens are proposed from the most recent earlier occurrence
  of the context's last n-gram, cut where the grammar rejects them, the masks at every draft
  position are computed by accepting the draft into the matcher and rolling it back (vLLM's
  structured-output path), and one forward verifies the draft under those masks.

The masks come from the `xgrammar` package (``GrammarCompiler.compile_json_schema``,
``GrammarMatcher.fill_next_token_bitmask`` / ``accept_token`` / ``rollback``). Its vocabulary
is built from the engine's own `TokenizerInfo` byte strings (``VocabType.RAW``), so no
Hugging Face tokenizer is needed and the same code serves every engine; on SmolLM2 its masks
agree with ``xgrammar.TokenizerInfo.from_huggingface``. `LLGuidanceBackend` gives the same
loops llguidance's masks instead (``LLMatcher.grammar_from_json_schema``, the engine's
vocabulary through `factorspec_sdk.tokens.grammar.GrammarTables`): any `MaskBackend` serves
`syntax_steps`.

When the mask allows only end tokens the record is complete and the loops stop without a
further forward (a free saving the baselines get).

Each loop is written once, as a *step generator* (``free_steps``, ``syntax_steps``,
``syntax_ngram_steps``, ``retry_steps``) that yields ``(sequence, tokens)`` to extend and
receives the logits rows; `drive` runs several of them in lockstep, one batched forward per
step for all (how a serving engine batches requests), and the ``decode_*`` functions drive one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from factorspec_sdk.engines.protocol import ChatMessage, Engine, Logits, SequenceId
from factorspec_sdk.tokens.vocab import TokenizerInfo

__all__ = [
    "DecodeRun",
    "LLGuidanceBackend",
    "MaskBackend",
    "Steps",
    "XGrammarBackend",
    "decode_free",
    "decode_syntax",
    "decode_syntax_ngram",
    "decode_with_retries",
    "drive",
    "free_steps",
    "ngram_propose",
    "retry_steps",
    "syntax_ngram_steps",
    "syntax_steps",
]

Grammar = Any
"""An ``xgrammar.CompiledGrammar`` (xgrammar is imported lazily)."""

Steps = Generator[tuple[SequenceId, list[int]], tuple[Logits, float], "DecodeRun"]
"""A decode loop as a generator: yields ``(sequence, tokens)`` to run in the next forward,
receives ``(logits rows, this row's share of the forward's seconds)``, returns the run."""


@dataclass(slots=True)
class DecodeRun:
    """What one baseline decode produced and cost.

    Attributes:
        text: the generated text (end tokens excluded).
        tokens: the generated token ids (end tokens excluded), over all attempts for retries.
        forwards: forward passes run (each verifies one token, or one draft for n-gram).
        wall_seconds: wall time of the decode, grammar compilation included.
        forward_seconds: time inside ``engine.extend``.
        mask_seconds: time computing and applying grammar masks (on the critical path).
        stopped: ``"eos"`` (the model ended), ``"grammar"`` (only end tokens were allowed) or
            ``"max_tokens"`` (the budget ran out).
        drafted: draft tokens sent for verification (n-gram only).
        draft_accepted: draft tokens the model accepted (n-gram only).
        attempts: decodes run (1 plus the retries).
        texts: the text of every attempt (retries only; the last one is ``text``).
    """

    text: str
    tokens: list[int]
    forwards: int = 0
    wall_seconds: float = 0.0
    forward_seconds: float = 0.0
    mask_seconds: float = 0.0
    stopped: str = "eos"
    drafted: int = 0
    draft_accepted: int = 0
    attempts: int = 1
    texts: list[str] = field(default_factory=list)

    def add_attempt(self, one: DecodeRun) -> None:
        """Count ``one`` as the next attempt: its text becomes the answer, costs add up."""
        self.attempts += 1
        self.text = one.text
        self.texts.append(one.text)
        self.tokens.extend(one.tokens)
        self.forwards += one.forwards
        self.forward_seconds += one.forward_seconds
        self.mask_seconds += one.mask_seconds
        self.drafted += one.drafted
        self.draft_accepted += one.draft_accepted
        self.stopped = one.stopped


class XGrammarBackend:
    """XGrammar's compiler and matchers over an engine's vocabulary.

    Args:
        tokenizer: the engine's vocabulary; its byte strings become xgrammar's raw vocabulary
            and its end tokens xgrammar's stop tokens (special tokens map to ``b""``, which
            xgrammar never allows inside the grammar).
        max_threads: threads xgrammar may use to compile.
        cache: keep compiled grammars (off by default so that every request pays its own
            compilation, as a fresh request for a new schema does).

    Raises:
        ImportError: the ``xgrammar`` package is missing (``pip install xgrammar``).
    """

    def __init__(self, tokenizer: TokenizerInfo, max_threads: int = 2, cache: bool = False):
        import xgrammar as xgr

        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        self.eos_ids = frozenset(tokenizer.eos_ids)
        self._info = xgr.TokenizerInfo(
            list(tokenizer.vocab),
            xgr.VocabType.RAW,
            vocab_size=tokenizer.vocab_size,
            stop_token_ids=list(tokenizer.eos_ids),
        )
        self._compiler = xgr.GrammarCompiler(
            self._info, max_threads=max_threads, cache_enabled=cache
        )
        self._words = (self.vocab_size + 31) // 32

    def compile_json_schema(self, schema: dict[str, Any] | str) -> Grammar:
        """Compile a JSON schema with ``json.dumps``-style separators and no free whitespace.

        Compact output without free whitespace is vLLM's ``disable_any_whitespace`` setting:
        it keeps the model from spending its budget on blanks and matches FactorSpec's
        canonical text, so both write the same JSON.
        """
        return self._compiler.compile_json_schema(
            schema, any_whitespace=False, separators=(", ", ": "), strict_mode=True
        )

    def matcher(self, grammar: Grammar, max_rollback_tokens: int = -1) -> Any:
        """A fresh ``xgrammar.GrammarMatcher`` for ``grammar``."""
        import xgrammar as xgr

        return xgr.GrammarMatcher(grammar, max_rollback_tokens=max_rollback_tokens)

    def bitmask(self, rows: int = 1) -> npt.NDArray[np.int32]:
        """An int32 bitmask buffer of ``rows`` rows, as ``fill_next_token_bitmask`` fills."""
        return np.zeros((rows, self._words), dtype=np.int32)

    def allowed(self, bitmask: npt.NDArray[np.int32], row: int = 0) -> npt.NDArray[np.bool_]:
        """Row ``row`` of a bitmask unpacked into one bool per token id."""
        bits = np.unpackbits(bitmask[row].view(np.uint8), bitorder="little")
        return bits[: self.vocab_size].astype(np.bool_)

    def only_end(self, allowed: npt.NDArray[np.bool_]) -> bool:
        """Whether the mask allows nothing but end tokens (the record is complete)."""
        count = int(allowed.sum())
        return count == sum(1 for t in self.eos_ids if allowed[t])


class MaskBackend(Protocol):
    """What `syntax_steps` needs of a grammar library: compile, match, mask.

    A matcher has ``fill_next_token_bitmask(bitmask, index=0)`` and ``accept_token(token)``
    (xgrammar's ``GrammarMatcher`` verbs).
    """

    eos_ids: frozenset[int]

    def compile_json_schema(self, schema: dict[str, Any] | str) -> Grammar:
        """Compile a JSON schema (compact separators, no free whitespace)."""
        ...

    def matcher(self, grammar: Grammar, max_rollback_tokens: int = -1) -> Any:
        """A fresh matcher for ``grammar``."""
        ...

    def bitmask(self, rows: int = 1) -> npt.NDArray[np.int32]:
        """A bitmask buffer of ``rows`` rows."""
        ...

    def allowed(self, bitmask: npt.NDArray[np.int32], row: int = 0) -> npt.NDArray[np.bool_]:
        """Row ``row`` of a bitmask as one bool per token id."""
        ...

    def only_end(self, allowed: npt.NDArray[np.bool_]) -> bool:
        """Whether the mask allows nothing but end tokens."""
        ...


class LLGuidanceBackend:
    """llguidance's JSON-schema masks over an engine's vocabulary, in XGrammar's verbs.

    The vocabulary is the engine's own `TokenizerInfo` (through
    `factorspec_sdk.tokens.grammar.GrammarTables`, the tokenizer FactorSpec's grammar values
    use), so the masks are over the same token ids as every other method's. The schema is
    compiled with ``whitespace_flexible`` off and the separators ``", "`` / ``": "`` (the
    compact text `XGrammarBackend` asks for), as vLLM's ``guidance`` backend does with
    ``disable_any_whitespace``.

    Raises:
        ImportError: the ``llguidance`` package is missing (``pip install llguidance``).
    """

    def __init__(self, tokenizer: TokenizerInfo) -> None:
        import llguidance
        import llguidance.numpy

        from factorspec_sdk.tokens.grammar import GrammarTables

        self._llg = llguidance
        self._fill = llguidance.numpy.fill_next_token_bitmask
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.vocab_size
        self.eos_ids = frozenset(tokenizer.eos_ids)
        self._special = np.asarray(
            sorted(set(tokenizer.special_ids) - self.eos_ids), dtype=np.int64
        )
        self._tok = GrammarTables(tokenizer).tokenizer
        self._words = (self.vocab_size + 31) // 32

    def compile_json_schema(self, schema: dict[str, Any] | str) -> Grammar:
        """Compile a JSON schema to a template matcher (copied by `matcher`).

        Raises:
            ValueError: llguidance rejects the schema (its message).
        """
        grammar = self._llg.LLMatcher.grammar_from_json_schema(
            schema,
            defaults={"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "},
        )
        template = self._llg.LLMatcher(self._tok, grammar, log_level=0)
        if template.is_error():
            raise ValueError(f"llguidance rejects the schema: {template.get_error()}")
        return template

    def matcher(self, grammar: Grammar, max_rollback_tokens: int = -1) -> _LLGuidanceMatcher:
        """A fresh matcher for ``grammar`` (a copy of the compiled template)."""
        del max_rollback_tokens  # llguidance keeps what it needs to roll back
        return _LLGuidanceMatcher(grammar.deep_copy(), self._fill)

    def bitmask(self, rows: int = 1) -> npt.NDArray[np.int32]:
        """An int32 bitmask buffer of ``rows`` rows."""
        return np.zeros((rows, self._words), dtype=np.int32)

    def allowed(self, bitmask: npt.NDArray[np.int32], row: int = 0) -> npt.NDArray[np.bool_]:
        """Row ``row`` unpacked into one bool per token id (special tokens but EOS cleared)."""
        bits = np.unpackbits(bitmask[row].view(np.uint8), bitorder="little")
        allowed = bits[: self.vocab_size].astype(np.bool_)
        if len(self._special):
            allowed[self._special] = False
        return allowed

    def only_end(self, allowed: npt.NDArray[np.bool_]) -> bool:
        """Whether the mask allows nothing but end tokens (the record is complete)."""
        count = int(allowed.sum())
        return count == sum(1 for t in self.eos_ids if allowed[t])


class _LLGuidanceMatcher:
    """An ``llguidance.LLMatcher`` with xgrammar's ``GrammarMatcher`` verbs."""

    def __init__(self, matcher: Any, fill: Callable[..., None]) -> None:
        self._m = matcher
        self._fill = fill

    def fill_next_token_bitmask(self, bitmask: npt.NDArray[np.int32], index: int = 0) -> None:
        self._fill(self._m, bitmask, index)

    def accept_token(self, token: int) -> bool:
        return bool(self._m.consume_token(token))

    def rollback(self, n: int) -> None:
        self._m.rollback(n)


def _masked_argmax(row: Logits, allowed: npt.NDArray[np.bool_]) -> int:
    """Greedy choice among the allowed tokens."""
    if not allowed.any():
        raise RuntimeError("the grammar allows no token at this position")
    return int(np.argmax(np.where(allowed, row, -np.inf)))


def _text(tokenizer: TokenizerInfo, tokens: Sequence[int]) -> str:
    return tokenizer.decode(tokens).decode("utf-8", errors="replace")


_BATCHED_ROW = 16
"""Longest token run `drive` batches with other sequences' rows."""


def drive(engine: Engine, loops: Sequence[Steps]) -> list[DecodeRun | Exception]:
    """Run step generators in lockstep: one batched ``engine.extend`` per step for all.

    A loop that raises ends with its exception in its slot (the others go on); the forward
    time of a step is shared evenly by the rows it ran.
    """
    results: list[DecodeRun | Exception | None] = [None] * len(loops)
    pending: dict[int, tuple[SequenceId, list[int]]] = {}

    def advance(i: int, value: tuple[Logits, float] | None) -> None:
        try:
            pending[i] = next(loops[i]) if value is None else loops[i].send(value)
        except StopIteration as stop:
            pending.pop(i, None)
            results[i] = stop.value
        except Exception as exc:
            pending.pop(i, None)
            results[i] = exc

    started_seqs: set[SequenceId] = set()
    try:
        for i in range(len(loops)):
            advance(i, None)
        while pending:
            # A sequence's first forward runs its whole prompt; batched with one-token rows it
            # would pad every row to the prompt's length, so prompts (and long drafts) run on
            # their own and the one-token rows together.
            short: list[int] = []
            groups: list[list[int]] = []
            for i in pending:
                seq, tokens = pending[i]
                if seq in started_seqs and len(tokens) <= _BATCHED_ROW:
                    short.append(i)
                else:
                    groups.append([i])
                started_seqs.add(seq)
            if short:
                groups.insert(0, short)
            for group in groups:
                started = time.perf_counter()
                rows = engine.extend([pending[i] for i in group])
                share = (time.perf_counter() - started) / len(group)
                for i, r in zip(group, rows, strict=True):
                    advance(i, (r, share))
    finally:
        for loop in loops:
            loop.close()
    out: list[DecodeRun | Exception] = []
    for res in results:
        out.append(res if res is not None else RuntimeError("the loop did not finish"))
    return out


def _drive_one(engine: Engine, loop: Steps) -> DecodeRun:
    (result,) = drive(engine, [loop])
    if isinstance(result, Exception):
        raise result
    return result


def decode_free(engine: Engine, prompt_ids: Sequence[int], max_tokens: int) -> DecodeRun:
    """Greedy free generation until an end token or ``max_tokens`` tokens.

    Args:
        engine: the engine.
        prompt_ids: the prompt (chat template applied); at least one token.
        max_tokens: the token budget.
    """
    return _drive_one(engine, free_steps(engine, prompt_ids, max_tokens))


def free_steps(engine: Engine, prompt_ids: Sequence[int], max_tokens: int) -> Steps:
    """`decode_free` as a step generator (see `drive`)."""
    started = time.perf_counter()
    tokenizer = engine.tokenizer
    eos = frozenset(tokenizer.eos_ids)
    special = tokenizer.special_ids
    run = DecodeRun("", [])
    seq = engine.new_sequence(list(prompt_ids[:-1]))
    pending = int(prompt_ids[-1])
    run.stopped = "max_tokens"
    try:
        while len(run.tokens) < max_tokens:
            rows, seconds = yield seq, [pending]
            run.forwards += 1
            run.forward_seconds += seconds
            token = int(np.argmax(rows[-1]))
            if token in eos or (token in special and not tokenizer.vocab[token]):
                run.stopped = "eos"
                break
            run.tokens.append(token)
            pending = token
    finally:
        engine.release(seq)
    run.text = _text(tokenizer, run.tokens)
    run.wall_seconds = time.perf_counter() - started
    return run


def decode_syntax(
    engine: Engine,
    backend: MaskBackend,
    prompt_ids: Sequence[int],
    schema: dict[str, Any] | str,
    max_tokens: int,
) -> DecodeRun:
    """Greedy decoding under a JSON-schema mask, one token per forward (XGrammar's loop).

    Args:
        engine: the engine.
        backend: xgrammar (or llguidance) over the engine's vocabulary.
        prompt_ids: the prompt (chat template applied); at least one token.
        schema: the JSON schema (compiled here, inside the timed region).
        max_tokens: the token budget.
    """
    return _drive_one(engine, syntax_steps(engine, backend, prompt_ids, schema, max_tokens))


def syntax_steps(
    engine: Engine,
    backend: MaskBackend,
    prompt_ids: Sequence[int],
    schema: dict[str, Any] | str,
    max_tokens: int,
) -> Steps:
    """`decode_syntax` as a step generator (see `drive`)."""
    started = time.perf_counter()
    run = DecodeRun("", [])
    grammar = backend.compile_json_schema(schema)
    matcher = backend.matcher(grammar)
    bitmask = backend.bitmask()
    seq = engine.new_sequence(list(prompt_ids[:-1]))
    pending = int(prompt_ids[-1])
    run.stopped = "max_tokens"
    try:
        while len(run.tokens) < max_tokens:
            t0 = time.perf_counter()
            matcher.fill_next_token_bitmask(bitmask)
            allowed = backend.allowed(bitmask)
            run.mask_seconds += time.perf_counter() - t0
            if backend.only_end(allowed):
                run.stopped = "grammar"
                break
            rows, seconds = yield seq, [pending]
            run.forwards += 1
            run.forward_seconds += seconds
            t0 = time.perf_counter()
            token = _masked_argmax(rows[-1], allowed)
            matcher.accept_token(token)
            run.mask_seconds += time.perf_counter() - t0
            if token in backend.eos_ids:
                run.stopped = "eos"
                break
            run.tokens.append(token)
            pending = token
    finally:
        engine.release(seq)
    run.text = _text(engine.tokenizer, run.tokens)
    run.wall_seconds = time.perf_counter() - started
    return run


def ngram_propose(
    context: Sequence[int], k: int, max_ngram: int = 4, min_ngram: int = 1
) -> list[int]:
    """Up to ``k`` tokens that followed the most recent earlier match of the context's tail.

    The longest tail n-gram (``max_ngram`` down to ``min_ngram`` tokens) that occurred earlier
    in ``context`` wins; the tokens after its most recent earlier occurrence are proposed.
    This is vLLM's ``ngram`` (prompt-lookup) proposer.
    """
    size = len(context)
    if k <= 0 or size < 2:
        return []
    ctx = list(context)
    for n in range(min(max_ngram, size - 1), min_ngram - 1, -1):
        tail = ctx[size - n :]
        for j in range(size - n - 1, -1, -1):
            if ctx[j] == tail[0] and ctx[j : j + n] == tail:
                return ctx[j + n : j + n + k]
    return []


def decode_syntax_ngram(
    engine: Engine,
    backend: XGrammarBackend,
    prompt_ids: Sequence[int],
    schema: dict[str, Any] | str,
    max_tokens: int,
    k: int,
    max_ngram: int = 4,
    min_ngram: int = 1,
) -> DecodeRun:
    """Greedy masked decoding with n-gram drafts of up to ``k`` tokens verified per forward.

    Per step: propose ``k`` tokens with `ngram_propose` over prompt + output; accept them into
    the matcher one by one to find the grammar-valid prefix and fill the mask of every draft
    position; roll the matcher back; run one forward over ``[pending, *draft]``; take the
    masked argmax at each position while it equals the draft, then the model's token at the
    first mismatch (or the bonus token after a fully accepted draft); crop the KV cache past
    the accepted tokens.

    Args:
        engine: the engine.
        backend: xgrammar over the engine's vocabulary.
        prompt_ids: the prompt (chat template applied); at least one token.
        schema: the JSON schema (compiled here, inside the timed region).
        max_tokens: the token budget.
        k: most draft tokens per forward.
        max_ngram: longest n-gram matched.
        min_ngram: shortest n-gram matched.
    """
    return _drive_one(
        engine,
        syntax_ngram_steps(
            engine, backend, prompt_ids, schema, max_tokens, k, max_ngram, min_ngram
        ),
    )


def syntax_ngram_steps(
    engine: Engine,
    backend: XGrammarBackend,
    prompt_ids: Sequence[int],
    schema: dict[str, Any] | str,
    max_tokens: int,
    k: int,
    max_ngram: int = 4,
    min_ngram: int = 1,
) -> Steps:
    """`decode_syntax_ngram` as a step generator (see `drive`)."""
    started = time.perf_counter()
    run = DecodeRun("", [])
    grammar = backend.compile_json_schema(schema)
    matcher = backend.matcher(grammar, max_rollback_tokens=-1)
    bitmask = backend.bitmask(k + 1)
    prompt = [int(t) for t in prompt_ids]
    seq = engine.new_sequence(prompt[:-1])
    pending = prompt[-1]
    run.stopped = "max_tokens"
    try:
        while len(run.tokens) < max_tokens:
            t0 = time.perf_counter()
            matcher.fill_next_token_bitmask(bitmask, 0)
            masks = [backend.allowed(bitmask, 0)]
            if backend.only_end(masks[0]):
                run.mask_seconds += time.perf_counter() - t0
                run.stopped = "grammar"
                break
            budget = max_tokens - len(run.tokens) - 1
            proposal = ngram_propose([*prompt, *run.tokens], min(k, budget), max_ngram, min_ngram)
            draft: list[int] = []
            special = engine.tokenizer.special_ids
            for token in proposal:
                if token in special or token in backend.eos_ids:
                    break
                if not matcher.accept_token(token):
                    break
                draft.append(token)
                matcher.fill_next_token_bitmask(bitmask, len(draft))
                masks.append(backend.allowed(bitmask, len(draft)))
            if draft:
                matcher.rollback(len(draft))
            run.mask_seconds += time.perf_counter() - t0
            base = engine.length(seq)
            rows, seconds = yield seq, [pending, *draft]
            run.forwards += 1
            run.forward_seconds += seconds
            run.drafted += len(draft)
            t0 = time.perf_counter()
            ended = False
            accepted = 0
            token = pending
            for i in range(len(draft) + 1):
                token = _masked_argmax(rows[i], masks[i])
                matcher.accept_token(token)
                if token in backend.eos_ids:
                    ended = True
                    break
                run.tokens.append(token)
                if i < len(draft) and token == draft[i]:
                    accepted += 1
                    continue
                break
            run.mask_seconds += time.perf_counter() - t0
            run.draft_accepted += accepted
            engine.truncate(seq, base + 1 + accepted)
            if ended:
                run.stopped = "eos"
                break
            pending = token
    finally:
        engine.release(seq)
    run.text = _text(engine.tokenizer, run.tokens)
    run.wall_seconds = time.perf_counter() - started
    return run


def decode_with_retries(
    engine: Engine,
    messages: Sequence[ChatMessage],
    decode: Callable[[list[int]], Steps],
    check: Callable[[str], list[str]],
    max_retries: int = 3,
    first: DecodeRun | None = None,
) -> DecodeRun:
    """Decode, check, and retry with a message naming what the answer violates.

    Args:
        engine: the engine (for its chat template and forwards).
        messages: the conversation of the first attempt.
        decode: the step generator of one answer from prompt token ids (e.g.
            `syntax_steps` bound to a schema).
        check: the violations of an answer text as readable sentences; empty when valid.
        max_retries: most extra attempts.
        first: the first attempt when it was already decoded from the same prompt (the
            greedy ``syntax`` record is exactly that); it counts as attempt 1 with its cost.

    Returns:
        The last attempt's text, with tokens, forwards and times summed over all attempts.
    """
    return _drive_one(engine, retry_steps(engine, messages, decode, check, max_retries, first))


def retry_steps(
    engine: Engine,
    messages: Sequence[ChatMessage],
    decode: Callable[[list[int]], Steps],
    check: Callable[[str], list[str]],
    max_retries: int = 3,
    first: DecodeRun | None = None,
) -> Steps:
    """`decode_with_retries` as a step generator (see `drive`)."""
    started = time.perf_counter()
    conversation: list[ChatMessage] = [dict(m) for m in messages]
    total = DecodeRun("", [], attempts=0)
    for attempt in range(max_retries + 1):
        if attempt == 0 and first is not None:
            one = first
        else:
            one = yield from decode(engine.apply_chat_template(conversation))
        total.add_attempt(one)
        problems = check(one.text)
        if not problems or attempt == max_retries:
            break
        conversation.append({"role": "assistant", "content": one.text})
        conversation.append(
            {"role": "user", "content": "Your answer violates: " + " ".join(problems) + " Fix it."}
        )
    total.wall_seconds = time.perf_counter() - started
    if first is not None:
        total.wall_seconds += first.wall_seconds
    return total
