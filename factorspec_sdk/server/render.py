"""The OpenAI answers of `factorspec serve`, as JSON objects and SSE frames.

Owns the shapes of `factorspec_sdk.server.answers`' models: the model card, chat
completion and text completion bodies, their stream chunks, ``usage``, the ``factorspec``
stats extension (top level and per choice: the record's stats, settled on the server's
wall from the request's arrival, and its provenance when asked), and the SSE framing
(``data: ...`` events and the closing ``data: [DONE]``). Pure functions: no I/O, no
waiting (the stats read the clock).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, NamedTuple

from factorspec_sdk.drafter.stats import PARTS
from factorspec_sdk.server.protocol import JsonObject, Kind

if TYPE_CHECKING:
    from factorspec_sdk.server.worker import Done

__all__ = [
    "SSE_DONE",
    "Answer",
    "Meta",
    "body",
    "choice",
    "chunk",
    "last_chunk",
    "model_card",
    "sse",
    "stats",
    "usage",
    "usage_chunk",
]

SSE_DONE = "data: [DONE]\n\n"
"""The SSE event that ends a stream."""


class Answer(NamedTuple):
    """What a finished job answers: the record text, the finish reason, whether it is valid.

    ``tool_calls``: the OpenAI ``tool_calls`` of an answer that calls tools (its ``text`` is
    then empty and its message's ``content`` null). ``provenance``: the record's provenance
    as JSON data (`factorspec_sdk.provenance.Provenance.to_json`), when the request asked
    for it (`factorspec_sdk.server.dispatch.Dispatcher.finish` made it).
    """

    text: str
    finish_reason: str
    valid: bool
    tool_calls: list[JsonObject] | None = None
    provenance: JsonObject | None = None


@dataclass(frozen=True, slots=True)
class Meta:
    """What every body and chunk of one answer shares.

    Attributes:
        id: the completion id (``chatcmpl-...`` or ``cmpl-...``).
        created: its Unix time.
        kind: the endpoint answered.
        model: the served model id.
        spec_seconds: how long building the request's spec took.
        received: when the request arrived (``time.perf_counter()``): a record's
            ``wall_seconds`` counts from it.
    """

    id: str
    created: int
    kind: Kind
    model: str
    spec_seconds: float
    received: float = field(default_factory=time.perf_counter)

    @classmethod
    def new(
        cls, kind: Kind, model: str, spec_seconds: float, received: float | None = None
    ) -> Meta:
        """A fresh id, created now (``received``: when the request arrived; default now)."""
        return cls(
            id=("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex,
            created=int(time.time()),
            kind=kind,
            model=model,
            spec_seconds=spec_seconds,
            received=time.perf_counter() if received is None else received,
        )


def model_card(model: str, created: int) -> JsonObject:
    """The ``/v1/models`` entry of the served model."""
    return {"id": model, "object": "model", "created": created, "owned_by": "factorspec"}


def stats(done: Done, meta: Meta, answer: Answer) -> JsonObject:
    """The ``factorspec`` stats of one choice: validity, stop reason, times, decoding counts.

    A decoded record's stats (a copy) add the spec's build and end the wall now, counted
    from the request's arrival (``meta.received``); ``other_seconds`` is what no part
    names. Its provenance comes along when the request asked for it (the answer's, which
    `Dispatcher.finish` made).
    """
    out: JsonObject = {
        "valid": answer.valid,
        "stop_reason": done.reason,
        "queue_seconds": round(done.queue_seconds, 6),
        "spec_seconds": round(meta.spec_seconds, 6),
    }
    if done.outcome is not None:
        s = replace(done.outcome.stats)
        s.add({"spec_seconds": meta.spec_seconds})
        s.settle(time.perf_counter() - meta.received)
        out.update(
            tokens=s.tokens,
            verify_steps=s.verify_steps,
            tokens_per_step=round(s.tokens_per_step, 4),
            drafted=s.drafted,
            certain_drafted=s.certain_drafted,
            guesses_proposed=s.guesses_proposed,
            guesses_accepted=s.guesses_accepted,
        )
        for name in (*PARTS, "wall_seconds", "plan_seconds", "background_plan_seconds"):
            out[name] = round(getattr(s, name), 6)
        out.update(
            oracle_seconds=out["plan_seconds"],
            critical_oracle_seconds=out["critical_plan_seconds"],
            token_ids=list(done.outcome.tokens),
        )
        if answer.provenance is not None:
            out["provenance"] = answer.provenance
    else:
        out["tokens"] = done.tokens
    return out


def choice(i: int, done: Done, answer: Answer, meta: Meta) -> JsonObject:
    """``choices[i]`` of a (non-streamed) body, with its stats."""
    out: JsonObject = {"index": i, "finish_reason": answer.finish_reason, "logprobs": None}
    if meta.kind == "chat" and answer.tool_calls is not None:
        out["message"] = {"role": "assistant", "content": None, "tool_calls": answer.tool_calls}
    elif meta.kind == "chat":
        out["message"] = {"role": "assistant", "content": answer.text}
    else:
        out["text"] = answer.text
    out["factorspec"] = stats(done, meta, answer)
    return out


def usage(dones: list[Done]) -> JsonObject:
    """``usage``: the prompt's tokens (once) and the completion tokens of every choice.

    ``prompt_tokens_details.cached_tokens`` (OpenAI's field) counts the prompt tokens served
    from the engine's prefix cache: the fewest over the choices (each choice runs the prompt
    as its own sequence).
    """
    stats = [d.outcome.stats for d in dones if d.outcome]
    prompt = max((s.prompt_tokens for s in stats), default=0)
    cached = min((s.cached_prompt_tokens for s in stats), default=0)
    completion = sum(len(d.outcome.tokens) if d.outcome else d.tokens for d in dones)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def body(meta: Meta, choices: list[JsonObject], dones: list[Done]) -> JsonObject:
    """A chat completion or text completion body (``factorspec``: one choice's stats, or all)."""
    all_stats = [c["factorspec"] for c in choices]
    return {
        "id": meta.id,
        "object": "chat.completion" if meta.kind == "chat" else "text_completion",
        "created": meta.created,
        "model": meta.model,
        "choices": choices,
        "usage": usage(dones),
        "factorspec": all_stats[0] if len(all_stats) == 1 else {"choices": all_stats},
    }


def chunk(meta: Meta, delta: str | None, finish: str | None, role: bool) -> JsonObject:
    """A stream chunk of choice 0 (``role``: the first chat chunk names the assistant)."""
    out: JsonObject = {"index": 0, "finish_reason": finish, "logprobs": None}
    if meta.kind == "chat":
        d: JsonObject = {}
        if role:
            d["role"] = "assistant"
        if delta is not None:
            d["content"] = delta
        out["delta"] = d
    else:
        out["text"] = delta or ""
    return {
        "id": meta.id,
        "object": "chat.completion.chunk" if meta.kind == "chat" else "text_completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [out],
    }


def last_chunk(meta: Meta, done: Done, answer: Answer, sent: str) -> JsonObject:
    """The chunk that finishes a stream: the text not yet ``sent``, the reason, the stats."""
    rest = answer.text[len(sent) :] if answer.text.startswith(sent) else ""
    out = chunk(meta, rest, answer.finish_reason, role=False)
    if answer.tool_calls is not None:  # the calls come whole, each with its index
        delta = out["choices"][0]["delta"]  # type: ignore[index]
        delta.pop("content", None)
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(answer.tool_calls)]
    out["factorspec"] = stats(done, meta, answer)
    return out


def usage_chunk(meta: Meta, done: Done) -> JsonObject:
    """The chunk with no choices and the usage (``stream_options.include_usage``)."""
    out = chunk(meta, None, None, role=False)
    out["choices"] = []
    out["usage"] = usage([done])
    return out


def sse(obj: JsonObject) -> str:
    """One SSE event carrying ``obj`` as JSON."""
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"
