"""Decoding one record on the engine tier, restarted when the tier fails mid-record.

``factorspec serve --upstream URL`` plans records and sends their segment requests to one
URL: a router in front of several vLLM or SGLang servers (vllm-router, sglang-router, a
Kubernetes gateway) or a single server. Choosing a server, probing health and retrying a
request are the router's; what stays here is FactorSpec's own: `decode_record` runs
`factorspec_sdk.drafter.segments.SegmentDecoder` on one record and, if a request of it fails
because a server failed (`factorspec_sdk.engines.openai_server.is_server_failure`: the
router answered a 5xx or could not be reached, e.g. the server holding the record died),
**restarts the record from its beginning**, with a fresh planner and a fresh affinity key,
on whatever server the router picks next. Nothing of the failed attempt is kept: the
returned record was decoded from its first token to its last in one attempt, and every
token of it went through FactorSpec's masks, so it is valid. When every attempt failed, the
outcome carries an `UpstreamsUnavailableError` naming the URL and each attempt's error.

(Continuing the record from the failed attempt's tokens would also give a valid record,
since a request carries the whole sequence; restarting is chosen so that a record never
mixes two servers' samples, whose numerics may differ, and so that a stream that already
sent text can check that the restart repeats it.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from factorspec_sdk.drafter.loop import DecodeJob, DecodeOutcome, DecoderConfig, GenerationStats
from factorspec_sdk.drafter.segments import SegmentDecoder
from factorspec_sdk.engines.completion import (
    Completion,
    CompletionEngine,
    CompletionReply,
    ConstraintStyle,
)
from factorspec_sdk.engines.openai_server import OpenAIServerEngine, is_server_failure
from factorspec_sdk.engines.protocol import ChatMessage
from factorspec_sdk.errors import UpstreamsUnavailableError
from factorspec_sdk.tokens.vocab import TokenizerInfo

__all__ = ["RecordRun", "decode_record"]

Watch = Callable[[Sequence[int]], None]
"""Called before each request of a record with its tokens so far; raising ends the record."""

RESTART_PAUSES_S = (0.25, 0.5, 1.0)
"""Pauses before the restarts of a record (one restart per pause): the router needs a moment
to take a dead server out (vllm-router's circuit breaker opens after a few failed requests,
its health check marks the server down)."""


@dataclass(frozen=True, slots=True)
class RecordRun:
    """One record decoded on the engine tier.

    Attributes:
        outcome: the record (text, tokens, stats) or its error.
        failures: the error of each attempt that failed because a server failed, in order.
        restarts: times the record was started again after such a failure.
    """

    outcome: DecodeOutcome
    failures: tuple[str, ...] = ()
    restarts: int = 0


class _Watched:
    """An engine that shows ``watch`` the record's tokens before each request."""

    def __init__(self, engine: CompletionEngine, prompt_length: int, watch: Watch) -> None:
        self.engine = engine
        self.prompt_length = prompt_length
        self.watch = watch

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def tokenizer(self) -> TokenizerInfo:
        return self.engine.tokenizer

    @property
    def constraint_style(self) -> ConstraintStyle:
        return self.engine.constraint_style

    def apply_chat_template(self, messages: Sequence[ChatMessage]) -> list[int]:
        return self.engine.apply_chat_template(messages)

    def complete(self, requests: Sequence[Completion]) -> list[CompletionReply]:
        for request in requests:  # one: a record is decoded alone
            self.watch(request.prompt_ids[self.prompt_length :])
        return self.engine.complete(requests)

    def close(self) -> None:
        """Nothing to free: the engine is shared."""


def decode_record(
    engine: OpenAIServerEngine,
    job: Callable[[], DecodeJob],
    config: DecoderConfig | None = None,
    *,
    watch: Watch | None = None,
    pauses_s: Sequence[float] = RESTART_PAUSES_S,
) -> RecordRun:
    """Decode one record on ``engine``, restarting it while the engine tier fails.

    Args:
        engine: the engine tier's URL (a router, or one server).
        job: builds the record's job (called again for each restart: a fresh planner,
            and the decoder gives the record a fresh affinity key).
        config: decoder options.
        watch: sees the record's tokens before each request (streaming, cancellation).
        pauses_s: the pause before each restart; their number is the most restarts.

    Returns:
        The run, never raising: errors are in its outcome (an `UpstreamsUnavailableError`
        when the last attempt failed too).
    """
    failures: list[str] = []
    for attempt in range(len(pauses_s) + 1):
        if attempt:
            time.sleep(pauses_s[attempt - 1])
        fresh = job()
        decoding = engine if watch is None else _Watched(engine, len(fresh.prompt_ids), watch)
        try:
            outcome = SegmentDecoder(decoding, config).run([fresh])[0]
        except Exception as exc:  # the decoder refused the job
            stats = GenerationStats(prompt_tokens=len(fresh.prompt_ids))
            return RecordRun(DecodeOutcome("", [], stats, exc), tuple(failures), attempt)
        if outcome.error is None or not is_server_failure(outcome.error):
            return RecordRun(outcome, tuple(failures), attempt)
        failures.append(str(outcome.error))
    tried = "; ".join(f"attempt {i + 1}: {why}" for i, why in enumerate(failures))
    error = UpstreamsUnavailableError(
        f"the record failed {len(failures)} times in a row on {engine.root} (no engine "
        f"server behind it finished it): {tried}",
        {engine.root: engine.last_error},
    )
    return RecordRun(DecodeOutcome("", [], outcome.stats, error), tuple(failures), len(pauses_s))
