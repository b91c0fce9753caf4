"""What a generation cost: `GenerationStats`, and the clock the decoders keep it with.

The stats name every part of a call's wall time, as ``*_seconds`` fields (`PARTS`, in the
order a call meets them): the parts on the critical path add up to ``wall_seconds``, with
``other_seconds`` what no part names (`GenerationStats.settle`). Each layer of a call adds
the parts it measured and settles the wall it saw: the decoder (drafts, forwards,
verification, planning it waited for), the backend (the prompt, the record's setup, the
wait for the engine), the server (its queue, the network between it and the client), the
client (the spec, the engine's load, the Pydantic validation). Time a record spent while
the thread worked for the other records of its batch is ``batch_seconds``.

Planning on the decoding thread is counted where it happened: `DecoderClock.part` takes the
planner's critical time (`factorspec_sdk.tokens.plan.PlannerStats`) out of the part it ran
in, so the planning the thread waited for is ``critical_plan_seconds`` (and
``grammar_seconds`` for llguidance grammar compiles), once. Planning the worker thread did
during forwards (``background_plan_seconds``) is off the critical path and in no part.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from factorspec_sdk.graph.oracle import OracleStats
    from factorspec_sdk.tokens.plan import PlannerStats

__all__ = ["PARTS", "DecoderClock", "GenerationStats", "RecordClock", "others"]

PARTS: tuple[str, ...] = (
    "load_seconds",
    "spec_seconds",
    "prompt_seconds",
    "queue_seconds",
    "network_seconds",
    "start_seconds",
    "forward_seconds",
    "cost_curve_seconds",
    "critical_plan_seconds",
    "grammar_seconds",
    "draft_seconds",
    "verify_seconds",
    "stream_seconds",
    "batch_seconds",
    "validate_seconds",
    "explain_seconds",
    "other_seconds",
)
"""The parts of a call's critical path, in the order a call meets them; they add up to
``wall_seconds`` (see `GenerationStats`)."""
_NAMED = PARTS[:-1]  # every part but other_seconds, the rest


@dataclass(slots=True)
class GenerationStats:
    """What one generation cost: its tokens, and where its wall time went.

    The ``*_seconds`` fields from ``load_seconds`` to ``other_seconds`` are the parts of the
    wall (`PARTS`; each is 0 where a call has no such step): they add up to
    ``wall_seconds``. ``plan_seconds``, ``background_plan_seconds`` and
    ``oracle_query_seconds`` count planning apart.

    Attributes:
        prompt_tokens: tokens of the prompt (chat template included).
        cached_prompt_tokens: of those, tokens whose KV states the engine took from its
            prefix cache instead of running them (0 on an engine without one).
        tokens: tokens of the record.
        verify_steps: forward passes that verified drafts (one per step, batched or not).
        drafted: draft tokens sent for verification.
        certain_drafted: of those, certain tokens (accepted by construction).
        guesses_proposed: guessed tokens sent for verification.
        guesses_accepted: guessed tokens the model accepted.
        oracle_queries: questions the record's feasibility oracle answered (on any thread).
        solver_checks: Z3 checks those took (answers from the cache, from a known
            completion or from what earlier facts determine take none).
        load_seconds: loading the engine (weights, tokenizer, dtype choice, warm-up) when
            the call waited for it: the first call of a client with a named engine.
        spec_seconds: compiling the spec (relation checks, Z3, the sat check; a cache hit
            is a lookup); on a server, building it from the relation IR or JSON schema too.
        prompt_seconds: the chat messages, the chat template and tokenization.
        queue_seconds: waiting for a turn: another call holding the engine, the async
            client's queue, a server's queue, a free connection to the server.
        network_seconds: the round trips to a server, less the server's own wall time.
        start_seconds: setting the record up: its writer and oracle, the engine's
            sequence (the first segment and the token budget check, which plan, are
            ``critical_plan_seconds``).
        forward_seconds: the engine's forward passes (the prompt's prefill included).
        cost_curve_seconds: choosing draft widths on an engine that may measure its cost
            curve on first use (one of your own, a scripted engine's curve function, a
            shared engine's host asked for each width once); 0 on the embedded engine,
            which settles its curve at load (in ``load_seconds``, once per machine).
        critical_plan_seconds: planning the decoding thread waited for: oracle queries,
            tokenization of forced text, mask tries, the token budget check before the first
            token (grammar compiles excluded).
        grammar_seconds: compiling llguidance grammars for grammar values, on the critical
            path (the first one of a tokenizer builds its token tables too).
        draft_seconds: building drafts: certain tokens, masks under the budget, guesses,
            and their widths on an engine whose cost curve was settled at load.
        verify_seconds: verifying drafts under the masks and choosing the model's tokens.
        stream_seconds: making partial views of the record for a stream.
        batch_seconds: the thread's work for the other records of the batch while this one
            waited (their setup, drafts, verification, forwards after this one ended).
        validate_seconds: checking the record: Pydantic's ``model_validate_json`` with its
            relations (the client), the record re-check (a server).
        explain_seconds: computing the record's provenance for the answer (a server
            asked for it).
        other_seconds: the rest of ``wall_seconds``, which no part names.
        wall_seconds: the whole call, from the client's call to its results (for a record
            decoded by a bare `Decoder`, from its submission to its end).
        plan_seconds: oracle + mask + tokenization time on any thread.
        background_plan_seconds: planning the worker thread did during forwards (off the
            critical path; in no part).
        oracle_query_seconds: the time inside the record's oracle, on any thread (Z3 and
            the answers' caches). Not a server's ``oracle_seconds``, which is
            ``plan_seconds`` under an older name.
    """

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    tokens: int = 0
    verify_steps: int = 0
    drafted: int = 0
    certain_drafted: int = 0
    guesses_proposed: int = 0
    guesses_accepted: int = 0
    oracle_queries: int = 0
    solver_checks: int = 0
    load_seconds: float = 0.0
    spec_seconds: float = 0.0
    prompt_seconds: float = 0.0
    queue_seconds: float = 0.0
    network_seconds: float = 0.0
    start_seconds: float = 0.0
    forward_seconds: float = 0.0
    cost_curve_seconds: float = 0.0
    critical_plan_seconds: float = 0.0
    grammar_seconds: float = 0.0
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    stream_seconds: float = 0.0
    batch_seconds: float = 0.0
    validate_seconds: float = 0.0
    explain_seconds: float = 0.0
    other_seconds: float = 0.0
    wall_seconds: float = 0.0
    plan_seconds: float = 0.0
    background_plan_seconds: float = 0.0
    oracle_query_seconds: float = 0.0

    @property
    def tokens_per_step(self) -> float:
        """Record tokens per verify step (forward)."""
        return self.tokens / self.verify_steps if self.verify_steps else 0.0

    @property
    def critical_share(self) -> float:
        """Share of wall time spent waiting for oracle/mask work."""
        return self.critical_plan_seconds / self.wall_seconds if self.wall_seconds else 0.0

    def parts(self) -> dict[str, float]:
        """The parts of the wall, by name, in `PARTS` order; they add up to ``wall_seconds``."""
        return {name: getattr(self, name) for name in PARTS}

    def add(self, parts: Mapping[str, float]) -> None:
        """Add seconds to parts (a layer's own measurements), e.g. ``{"spec_seconds": 0.1}``.

        Raises:
            ValueError: a name that is no part, or ``other_seconds`` (`settle` sets it).
        """
        for name, seconds in parts.items():
            if name not in _NAMED:
                raise ValueError(f"{name!r} is not a part of the wall; parts: {_NAMED}")
            setattr(self, name, getattr(self, name) + seconds)

    def settle(self, wall: float) -> None:
        """Make ``wall`` the wall time; ``other_seconds`` becomes what the parts leave of it."""
        self.wall_seconds = wall
        self.other_seconds = wall - sum(getattr(self, name) for name in _NAMED)

    def to_json(self) -> dict[str, float]:
        """Every field as JSON data (a server's answer carries them)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> GenerationStats:
        """The stats of `to_json`'s data; unknown keys and non-numbers are left out."""
        stats = cls()
        for f in fields(cls):
            value = data.get(f.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            setattr(stats, f.name, int(value) if f.type in (int, "int") else float(value))
        return stats

    def summary(self) -> str:
        """One line for logs and the CLI, ending with the three largest parts of the wall."""
        largest = sorted(self.parts().items(), key=lambda kv: -kv[1])[:3]
        named = ", ".join(f"{_label(name)} {seconds:.2f}s" for name, seconds in largest)
        return (
            f"{self.tokens} tokens in {self.verify_steps} verify steps "
            f"({self.tokens_per_step:.1f} tokens/step), guesses {self.guesses_accepted}/"
            f"{self.guesses_proposed} accepted, forward {self.forward_seconds:.2f}s, "
            f"oracle+masks {self.plan_seconds:.2f}s ({self.critical_plan_seconds:.2f}s on the "
            f"critical path), wall {self.wall_seconds:.2f}s ({named})"
        )


def _label(part: str) -> str:
    """A part's name for people: ``cost_curve_seconds`` is ``cost curve``."""
    return part.removesuffix("_seconds").replace("_", " ")


def others(total: float, own: float) -> float:
    """The seconds of ``total`` that were not ``own``.

    Never below 0: ``own`` is a part of ``total``, summed in another order.
    """
    return max(total - own, 0.0)


class DecoderClock:
    """The decoding thread's clock: each record's parts, and the thread's measured work.

    A decoder times every piece of its thread's work with `part` (a record's own step
    phases) or `shared` (a forward, or a wait, that every running record waits through).
    ``busy`` is the sum of them all; a record's ``batch_seconds`` is the busy time of its
    life that was not its own (`close`).
    """

    def __init__(self) -> None:
        self.busy = 0.0
        """Seconds of measured work on the decoding thread, for every record."""

    @contextmanager
    def part(self, record: RecordClock, name: str) -> Iterator[None]:
        """Time a piece of ``record``'s own work as part ``name``.

        The planning the piece waited for (its planner's critical time, grown meanwhile)
        is left out of ``name``: it is counted once, from the planner, at the record's end.
        """
        planner = record.planner
        planned = planner.critical_seconds if planner is not None else 0.0
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = time.perf_counter() - t0
            if planner is not None:
                planned = planner.critical_seconds - planned
            self.busy += dt
            record.own += dt
            record.stats.add({name: dt - planned})

    def shared(self, seconds: float, records: list[RecordClock], name: str | None) -> None:
        """``seconds`` of work every record of ``records`` waited through (as part ``name``).

        ``name`` None: the part is counted elsewhere (a prefetch wait: the planners count
        it as critical planning).
        """
        self.busy += seconds
        for record in records:
            record.own += seconds
            if name is not None:
                record.stats.add({name: seconds})

    def record(
        self,
        stats: GenerationStats,
        planner: PlannerStats | None,
        oracle: OracleStats | None = None,
    ) -> RecordClock:
        """Start the clock of a record now (``oracle``: its oracle's counters, if any)."""
        return RecordClock(stats, planner, time.perf_counter(), self.busy, oracle)

    def close(self, record: RecordClock) -> None:
        """End ``record``'s clock: its planning, its batch time, its wall (now)."""
        stats = record.stats
        planner = record.planner
        if planner is not None:
            stats.plan_seconds = planner.plan_seconds
            grammar = planner.critical_grammar_seconds
            stats.critical_plan_seconds = planner.critical_seconds - grammar
            stats.grammar_seconds = grammar
        oracle = record.oracle
        if oracle is not None:
            stats.oracle_queries = oracle.queries
            stats.solver_checks = oracle.solver_checks
            stats.oracle_query_seconds = oracle.seconds
        stats.batch_seconds = others(self.busy - record.busy0, record.own)
        stats.settle(time.perf_counter() - record.started)

    def rebase(self, record: RecordClock, started: float, busy0: float) -> None:
        """Re-settle a closed record over a longer span (a whole `Decoder.run`).

        ``started`` and ``busy0``: the clock and ``busy`` at the span's start. The time of
        the span outside the record's life, on the thread's measured work, is batch time.
        """
        record.stats.batch_seconds = others(self.busy - busy0, record.own)
        record.stats.settle(time.perf_counter() - started)


@dataclass(slots=True)
class RecordClock:
    """One record's clock (`DecoderClock.record`).

    Attributes:
        stats: the record's stats, which its parts are added to.
        planner: its planner's stats (the planning it waited for), if it has a planner.
        started: when the record's life began (``time.perf_counter()``).
        busy0: the clock's ``busy`` then.
        oracle: its oracle's counters (copied into the stats when the clock closes).
        own: the measured work of its life that was its own (or shared by it).
    """

    stats: GenerationStats
    planner: PlannerStats | None
    started: float
    busy0: float
    oracle: OracleStats | None = None
    own: float = 0.0
