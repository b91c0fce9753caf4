"""The engines the trip benchmark runs on: by name, plus the warm-up outside the timing."""

from __future__ import annotations

from factorspec_sdk.engines.completion import CompletionEngine
from factorspec_sdk.engines.protocol import Engine

__all__ = ["make_engine", "tiny_scripted_engine", "warm_up"]


def tiny_scripted_engine() -> Engine:
    """A numpy random model over printable ASCII, so the whole runner works without torch."""
    from factorspec_sdk.engines.scripted import ScriptedEngine
    from factorspec_sdk.tokens.vocab import TokenizerInfo

    pieces = sorted({chr(c) for c in range(32, 127)} | {"\n"})
    pieces += ['{"', '": ', ', "', '"}', "}, {", "city", "first_day", "last_day", "day"]
    return ScriptedEngine.random(TokenizerInfo.tiny(pieces), seed=0, temperature_scale=2.0)


def make_engine(name: str, **options: object) -> Engine | CompletionEngine:
    """An engine by name: every name `factorspec_sdk.engines.create_engine` knows.

    ``"scripted"`` without options builds a tiny random model over printable ASCII (a smoke
    test of the runner; its scores mean nothing).

    Raises:
        EngineError: an unknown name (the message lists the known ones) or a backend that
            cannot be loaded.
    """
    from factorspec_sdk.engines import ENGINES, create_engine
    from factorspec_sdk.errors import EngineError

    if name not in ENGINES:
        known = ", ".join(sorted(ENGINES))
        raise EngineError(f"unknown engine {name!r}; known engines: {known}")
    if name == "scripted" and not options:
        return tiny_scripted_engine()
    return create_engine(name, **options)


def warm_up(engine: Engine, prompt_ids: list[int]) -> None:
    """One forward over the end of ``prompt_ids`` (first-call overheads), outside any record."""
    seq = engine.new_sequence(prompt_ids[:-1])
    try:
        engine.extend([(seq, prompt_ids[-1:])])
    finally:
        engine.release(seq)
