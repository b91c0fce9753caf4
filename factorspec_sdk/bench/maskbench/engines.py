"""The engines MaskBench compares, each as a compile and a search over its real masks.

* **factorspec**: the schema compiled as a server's ``response_format`` is
  (`factorspec_sdk.bench.schemas.compile_factorspec`: `ir_from_json_schema`, then
  `spec_from_ir`; a refusal is not compiled), the masks of the planner
  `factorspec_sdk.tokens.plan.planner_for` builds (`Planner.allowed` at each cursor,
  `Planner.advance`); the record may end where the cursor is `Finished`, or where the
  mask allows an end token (after a root value that could go on, a number:
  `Planner.exit_after`).
* **llguidance** and **xgrammar**: the JSON-schema masks of
  `factorspec_sdk.bench.baselines.LLGuidanceBackend` and `XGrammarBackend` (the writer's
  separators ``", "`` / ``": "``, no free whitespace: FactorSpec's `GRAMMAR_OPTIONS`; the
  vocabulary is the same `TokenizerInfo`, so the token ids are the same); the record may
  end where the mask allows an end token.

`judge` decides one instance: the `candidate_texts` are searched in order
(`factorspec_sdk.bench.maskbench.search`) until one is written; the tokens that wrote it
are then replayed on a fresh planner or matcher to time each step (*mask time per token*:
from the previous token to the next mask: FactorSpec's ``advance`` and ``allowed``, the
libraries' ``accept_token`` and bitmask fill; the first step is the start's mask, the last
the mask that allows the end). The search's own masks are not timed, as it meets the same
states many times and the planner caches them.

Memo keys (`Walker.key`): a FactorSpec trie node is one object per planned segment (the
planner caches segments by writer state), a free string's cursor is a value (its writer
state), and a grammar segment's cursor is named by its segment and the bytes consumed in
it (llguidance's matcher reads bytes; two tokenizations of the same bytes leave it in the
same state); any other cursor is its own key (cursors are immutable). A grammar library's
matcher state is a function of the bytes consumed, so its key is empty.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from factorspec_sdk.bench.baselines import LLGuidanceBackend, MaskBackend, XGrammarBackend
from factorspec_sdk.bench.maskbench.reasons import describe
from factorspec_sdk.bench.maskbench.search import (
    DEFAULT_BUDGET,
    SearchResult,
    TokenIds,
    TokenIndex,
    Walker,
    best_dead,
    search,
)
from factorspec_sdk.bench.schemas import CompileResult, compile_factorspec, load_hf_tokenizer
from factorspec_sdk.bench.workers import Library, captured_stderr, short_text
from factorspec_sdk.errors import FactorSpecError
from factorspec_sdk.tokens.grammar import GrammarCursor
from factorspec_sdk.tokens.plan import Cursor, Finished, Planner, planner_for
from factorspec_sdk.tokens.vocab import TokenizerInfo

if TYPE_CHECKING:
    from factorspec_sdk.graph import CompiledSpec

__all__ = [
    "ENGINES",
    "FactorSpecEngine",
    "InstanceResult",
    "MaskEngine",
    "MatcherEngine",
    "engine_library",
    "judge",
    "make_engine",
]


@dataclass(slots=True)
class InstanceResult:
    """One engine's verdict on one test instance.

    Attributes:
        verdict: ``writable``, ``unwritable``, ``undecided`` (a search ran out of nodes, or,
            set by the runner, the schema's time ran out), or ``error`` (the engine raised).
        text: the index of the candidate text written (-1 when none).
        tokens: tokens of the text written.
        nodes: masks the searches computed.
        mask_seconds: per step of the replay of the written text (see the module).
        label: for an instance not written, what kind of place stopped the masks
            (`factorspec_sdk.bench.maskbench.reasons.Place.label`).
        reason: for an instance not written, where and why, for a person to read.
    """

    verdict: str
    text: int = -1
    tokens: int = 0
    nodes: int = 0
    mask_seconds: list[float] = field(default_factory=list)
    label: str = ""
    reason: str = ""


class MaskEngine(Protocol):
    """One engine as MaskBench drives it (in a worker process: `engine_library`).

    Attributes:
        name: the engine's name in `ENGINES`.
        index: the vocabulary by byte string.
        budget: nodes each text's search may take.
        compiled: whether the last `compile` accepted its schema.
        schema: the last schema compiled (to name the places of failures).
    """

    name: str
    index: TokenIndex
    budget: int
    compiled: bool
    schema: Any

    def compile(self, schema: Any) -> CompileResult:
        """Compile ``schema``; a refusal is ``rejected`` with the engine's message."""
        ...

    def walker(self) -> Walker[Any]:
        """A walker of the last compiled schema, at the record's start."""
        ...

    def replay(self, tokens: Sequence[int]) -> list[float]:
        """Seconds of each step when ``tokens`` are fed to a fresh planner or matcher."""
        ...

    def run(self, payload: Any) -> InstanceResult:
        """`judge` the candidate texts ``payload`` (the worker process's verb)."""
        ...


def judge(engine: MaskEngine, texts: Sequence[str]) -> InstanceResult:
    """Whether one of ``texts`` (one instance's spellings) can be written, and if not why.

    Raises:
        RuntimeError: ``engine`` has no schema compiled.
    """
    if not engine.compiled:
        raise RuntimeError(f"{engine.name}: no schema compiled")
    results: list[SearchResult] = []
    for i, text in enumerate(texts):
        found = search(engine.walker(), engine.index, text, engine.budget)
        results.append(found)
        if found.verdict == "writable":
            nodes = sum(r.nodes for r in results)
            return InstanceResult(
                "writable", i, len(found.tokens), nodes, engine.replay(found.tokens)
            )
    verdicts = {r.verdict for r in results}
    verdict = next((v for v in ("error", "undecided") if v in verdicts), "unwritable")
    out = InstanceResult(verdict, nodes=sum(r.nodes for r in results))
    furthest = best_dead(results)
    if furthest is not None:
        place, line = describe(texts[furthest[0]], furthest[1], engine.index, engine.schema)
        out.label, out.reason = place.label, line
    errors = [r.error for r in results if r.error]
    if errors:
        out.label, out.reason = "engine error", errors[0]
    return out


# ------------------------------------------------------------------ FactorSpec


class _PlannerWalker:
    def __init__(self, planner: Planner) -> None:
        self.planner = planner
        self.vocab = planner.tok.vocab
        self.eos = np.asarray(sorted(planner.tok.eos_ids), dtype=np.int64)

    def root(self) -> Cursor:
        return self.planner.start()

    def allowed(self, state: Cursor) -> TokenIds:
        return self.planner.allowed(state)

    def advance(self, state: Cursor, token: int) -> Cursor:
        return self.planner.advance(state, token)

    def back(self) -> None:
        pass

    def ended(self, state: Cursor, allowed: TokenIds) -> bool:
        return isinstance(state, Finished) or bool(np.isin(self.eos, allowed).any())

    def key(self, state: Cursor) -> Hashable:
        if isinstance(state, GrammarCursor):
            return (state.segment, b"".join(self.vocab[t] for t in state.tokens))
        return state  # immutable: a trie node by identity, the others by value


class FactorSpecEngine:
    """FactorSpec's planner masks (see the module docstring)."""

    def __init__(self, tok: TokenizerInfo, budget: int = DEFAULT_BUDGET) -> None:
        self.name = "factorspec"
        self.tok = tok
        self.index = TokenIndex(tok)
        self.budget = budget
        self.compiled = False
        self.schema: Any = None
        self.spec: CompiledSpec | None = None
        self.planner: Planner | None = None

    def compile(self, schema: Any) -> CompileResult:
        """`compile_factorspec`; a `FactorSpecError` or a `RecursionError` is a refusal."""
        self.spec, self.planner, self.compiled, self.schema = None, None, False, schema
        t0 = time.perf_counter()
        try:
            spec = compile_factorspec(schema)
        except (FactorSpecError, RecursionError) as exc:
            return CompileResult("rejected", time.perf_counter() - t0, short_text(exc))
        seconds = time.perf_counter() - t0
        # one planner for every search of this schema: its segments are planned once
        self.spec, self.planner, self.compiled = spec, planner_for(spec, self.tok), True
        return CompileResult("accepted", seconds)

    def run(self, payload: Any) -> InstanceResult:
        """`judge` the candidate texts ``payload``."""
        return judge(self, list(payload))

    def walker(self) -> _PlannerWalker:
        """A walker over the schema's planner (shared by the searches: it caches segments)."""
        assert self.planner is not None
        return _PlannerWalker(self.planner)

    def replay(self, tokens: Sequence[int]) -> list[float]:
        """Each step's ``advance`` and ``allowed`` on a fresh planner (a request's)."""
        assert self.spec is not None
        planner = planner_for(self.spec, self.tok)
        t0 = time.perf_counter()
        cursor = planner.start()
        planner.allowed(cursor)
        times = [time.perf_counter() - t0]
        for token in tokens:
            t0 = time.perf_counter()
            cursor = planner.advance(cursor, token)
            planner.allowed(cursor)
            times.append(time.perf_counter() - t0)
        return times


# ------------------------------------------------------------------ grammar libraries


class _MatcherWalker:
    def __init__(self, backend: MaskBackend, grammar: Any) -> None:
        self.backend = backend
        self.matcher = backend.matcher(grammar, max_rollback_tokens=-1)
        self.bitmask = backend.bitmask()
        self.eos = np.asarray(sorted(backend.eos_ids), dtype=np.int64)

    def root(self) -> None:
        return None

    def allowed(self, state: None) -> TokenIds:
        del state
        self.matcher.fill_next_token_bitmask(self.bitmask)
        return np.flatnonzero(self.backend.allowed(self.bitmask)).astype(np.int64)

    def advance(self, state: None, token: int) -> None:
        del state
        if not self.matcher.accept_token(token):
            raise RuntimeError(f"the matcher refused token {token}, which its mask allowed")

    def back(self) -> None:
        self.matcher.rollback(1)

    def ended(self, state: None, allowed: TokenIds) -> bool:
        del state
        return bool(np.isin(self.eos, allowed).any())

    def key(self, state: None) -> Hashable:
        return state


class MatcherEngine:
    """A grammar library's JSON-schema masks through a `MaskBackend` (see the module)."""

    def __init__(
        self,
        name: str,
        backend: Callable[[TokenizerInfo], MaskBackend],
        tok: TokenizerInfo,
        budget: int = DEFAULT_BUDGET,
    ) -> None:
        self.name = name
        self.index = TokenIndex(tok)
        self.budget = budget
        self.compiled = False
        self.schema: Any = None
        self.backend = backend(tok)
        self.grammar: Any = None

    def compile(self, schema: Any) -> CompileResult:
        """The backend's ``compile_json_schema``; its ``ValueError``/``RuntimeError`` refuse.

        Warnings the library prints (XGrammar's, for constraints it drops) are counted.
        """
        self.grammar, self.compiled, self.schema = None, False, schema
        t0 = time.perf_counter()
        with captured_stderr() as read_stderr:
            try:
                grammar = self.backend.compile_json_schema(json.dumps(schema))
            except (ValueError, RuntimeError, TypeError) as exc:
                return CompileResult("rejected", time.perf_counter() - t0, short_text(exc))
            seconds = time.perf_counter() - t0
        self.grammar, self.compiled = grammar, True
        return CompileResult("accepted", seconds, warnings=read_stderr().count("Warning"))

    def run(self, payload: Any) -> InstanceResult:
        """`judge` the candidate texts ``payload``."""
        return judge(self, list(payload))

    def walker(self) -> _MatcherWalker:
        """A walker over a fresh matcher."""
        return _MatcherWalker(self.backend, self.grammar)

    def replay(self, tokens: Sequence[int]) -> list[float]:
        """Each step's ``accept_token`` and bitmask fill on a fresh matcher."""
        m = self.backend.matcher(self.grammar)
        bitmask = self.backend.bitmask()
        t0 = time.perf_counter()
        m.fill_next_token_bitmask(bitmask)
        times = [time.perf_counter() - t0]
        for token in tokens:
            t0 = time.perf_counter()
            m.accept_token(token)
            m.fill_next_token_bitmask(bitmask)
            times.append(time.perf_counter() - t0)
        return times


def _xgrammar(tok: TokenizerInfo) -> MaskBackend:
    return XGrammarBackend(tok, max_threads=1, cache=False)


ENGINES: dict[str, Callable[[TokenizerInfo, int], MaskEngine]] = {
    "factorspec": FactorSpecEngine,
    "llguidance": lambda tok, budget: MatcherEngine("llguidance", LLGuidanceBackend, tok, budget),
    "xgrammar": lambda tok, budget: MatcherEngine("xgrammar", _xgrammar, tok, budget),
}
"""The engines by name, in the report's order."""


def make_engine(name: str, tok: TokenizerInfo, budget: int = DEFAULT_BUDGET) -> MaskEngine:
    """The engine ``name`` of `ENGINES` over ``tok``.

    Raises:
        KeyError: an unknown name.
    """
    return ENGINES[name](tok, budget)


def engine_library(name: str, budget: int) -> Library:
    """A worker process's engine over SmolLM2's tokenizer (`factorspec_sdk.bench.workers`)."""
    return make_engine(name, TokenizerInfo.from_hf(load_hf_tokenizer()), budget)
