"""Decoding one record on an upstream pool, restarted on another upstream when its own fails.

`factorspec_sdk.engines.upstreams.UpstreamPool` routes and keeps health; this module owns
what a record does when its upstream dies: `decode_record` leases one upstream for the
record and runs `factorspec_sdk.drafter.segments.SegmentDecoder` on it; if the upstream
fails mid-record, the record is **restarted from its beginning** on another healthy
upstream, with a fresh planner. Nothing of the failed attempt is kept: the returned record
was decoded on one upstream from its first token to its last, and every token of it went
through FactorSpec's masks, so it is valid. When no upstream is left, the outcome carries an
`UpstreamsUnavailableError` naming each upstream and its last error.

(Continuing the record on another upstream from the failed attempt's tokens would also
give a valid record, since a completion request carries the whole sequence; restarting is
chosen so that a record never mixes two servers' samples, whose numerics may differ.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from factorspec_sdk.drafter.loop import DecodeJob, DecodeOutcome, DecoderConfig, GenerationStats
from factorspec_sdk.drafter.segments import SegmentDecoder
from factorspec_sdk.engines.completion import Completion, CompletionReply, ConstraintStyle
from factorspec_sdk.engines.protocol import ChatMessage
from factorspec_sdk.engines.upstreams import UpstreamLease, UpstreamPool
from factorspec_sdk.errors import UpstreamsUnavailableError
from factorspec_sdk.tokens.vocab import TokenizerInfo

__all__ = ["RecordRun", "decode_record"]

Watch = Callable[[Sequence[int]], None]
"""Called before each request of a record with its tokens so far; raising ends the record."""


@dataclass(frozen=True, slots=True)
class RecordRun:
    """One record decoded on a pool.

    Attributes:
        outcome: the record (text, tokens, stats) or its error.
        upstreams: the upstreams it ran on, in order: more than one when an upstream
            failed mid-record and the record was restarted (the outcome is the last one's).
    """

    outcome: DecodeOutcome
    upstreams: tuple[str, ...]

    @property
    def restarts(self) -> int:
        """Times the record was restarted on another upstream."""
        return max(len(self.upstreams) - 1, 0)


class _Watched:
    """A lease that shows ``watch`` the record's tokens before each request."""

    def __init__(self, lease: UpstreamLease, prompt_length: int, watch: Watch) -> None:
        self.lease = lease
        self.prompt_length = prompt_length
        self.watch = watch

    @property
    def name(self) -> str:
        return self.lease.name

    @property
    def tokenizer(self) -> TokenizerInfo:
        return self.lease.tokenizer

    @property
    def constraint_style(self) -> ConstraintStyle:
        return self.lease.constraint_style

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        return self.lease.apply_chat_template(messages)

    def complete(self, requests: Sequence[Completion]) -> list[CompletionReply]:
        for request in requests:  # one: a record is decoded alone
            self.watch(request.prompt_ids[self.prompt_length :])
        return self.lease.complete(requests)

    def close(self) -> None:
        self.lease.close()


def decode_record(
    pool: UpstreamPool,
    job: Callable[[], DecodeJob],
    config: DecoderConfig | None = None,
    *,
    watch: Watch | None = None,
    max_attempts: int | None = None,
) -> RecordRun:
    """Decode one record on ``pool``, restarting it on another upstream if its upstream fails.

    Args:
        pool: the upstreams.
        job: builds the record's job (called again for each restart: a fresh planner).
        config: decoder options.
        watch: sees the record's tokens before each request (streaming, cancellation).
        max_attempts: most upstreams to try (default: twice the pool's size; each failure
            marks one down, so the pool runs out first unless upstreams come back).

    Returns:
        The outcome, never raising: errors (no upstream left included) are in it.
    """
    attempts = max_attempts if max_attempts is not None else 2 * len(pool.urls)
    used: list[str] = []
    outcome: DecodeOutcome | None = None
    for _ in range(max(attempts, 1)):
        fresh = job()
        try:
            with pool.lease() as lease:
                used.append(lease.url)
                engine = lease if watch is None else _Watched(lease, len(fresh.prompt_ids), watch)
                outcome = SegmentDecoder(engine, config).run([fresh])[0]
        except Exception as exc:  # no upstream left, or the decoder refused the job
            stats = GenerationStats(prompt_tokens=len(fresh.prompt_ids))
            return RecordRun(DecodeOutcome("", [], stats, exc), tuple(used))
        if not lease.failed:
            return RecordRun(outcome, tuple(used))
    assert outcome is not None
    tried = ", ".join(used)
    error = UpstreamsUnavailableError(
        f"the record failed on {len(used)} upstreams in turn ({tried}); last error: "
        f"{outcome.error}",
        {h.url: h.last_error for h in pool.health()},
    )
    return RecordRun(DecodeOutcome("", [], outcome.stats, error), tuple(used))
