"""Whether llguidance can generate a grammar value: checked when the spec compiles, not mid-record.

llguidance checks a grammar's shape when it compiles it (``LLMatcher.validate_grammar``), but
its parser's resource limits (``LLParserLimits``: items in one Earley row, lexer states, ...)
are only met while it parses. A schema whose combinators fan out (an ``allOf`` of twenty
``if``/``then`` pairs, translated to ``anyOf`` branches by `factorspec_sdk.ir.standalone`) can
pass the first check and then fail at the record's first token, as a `GenerationError`
mid-request, on every engine: vLLM's and SGLang's guidance backends use the default limits
too. So the check here also *probes* the grammar's start with a byte-level vocabulary: the
mask at its start, and the mask after each byte it allows there. A fan-out that passes a
limit does so where the most alternatives are open, at the value's start; one that passes
a limit deeper in the value is not found here, and stays a `GenerationError` at that token.

llguidance does the parsing; this module only asks it, with a vocabulary of the 256 bytes.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

__all__ = ["GRAMMAR_OPTIONS", "grammar_problem"]

GRAMMAR_OPTIONS: dict[str, Any] = {
    "item_separator": ", ",
    "key_separator": ": ",
    "whitespace_flexible": False,
}
"""llguidance's JSON options for grammar values: the writer's separators, no free whitespace."""

_EOS = 256


class _Bytes:
    """A vocabulary of the 256 single bytes and an end token, as ``TokenizerWrapper`` calls it."""

    def __init__(self) -> None:
        self.eos_token_id = _EOS
        self.bos_token_id = None
        self.special_token_ids = [_EOS]
        self.tokens = [bytes([b]) for b in range(256)] + [b"<eos>"]

    def __call__(self, text: str | bytes) -> list[int]:
        return list(text.encode("utf-8") if isinstance(text, str) else text)


_TOKENIZER: Any = None
_TOKENIZER_LOCK = threading.Lock()


def _tokenizer() -> Any:
    global _TOKENIZER
    with _TOKENIZER_LOCK:
        if _TOKENIZER is None:
            import llguidance

            _TOKENIZER = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Bytes()))
        return _TOKENIZER


@lru_cache(maxsize=1024)
def grammar_problem(text: str) -> str:
    """Why llguidance cannot generate the JSON Schema ``text`` ("" when it can).

    Its refusal of the schema or of the grammar, or the first parser error of the probe at the
    value's start (a limit passed: "Current row has 12576 items; max is 2000").
    """
    import llguidance

    try:
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            text,
            defaults=GRAMMAR_OPTIONS,  # type: ignore[arg-type]
        )
    except ValueError as exc:
        return str(exc)
    problem = str(llguidance.LLMatcher.validate_grammar(grammar))
    if problem:
        return problem
    return _start_problem(llguidance.LLMatcher(_tokenizer(), grammar, log_level=0))


def _start_problem(matcher: Any) -> str:
    """The first parser error at the grammar's start or one byte into it ("" if none)."""
    mask = matcher.compute_bitmask()
    if matcher.is_error():
        return f"at the value's start: {_first_line(matcher.get_error())}"
    bits = int.from_bytes(mask, "little")
    for b in range(256):
        if not bits >> b & 1:
            continue
        after = matcher.deep_copy()
        after.consume_token(b)
        if not after.is_error():
            after.compute_bitmask()
        if after.is_error():
            return f"at its first character {chr(b)!r}: {_first_line(after.get_error())}"
    return ""


def _first_line(error: str) -> str:
    """The error llguidance reports, without the parser dump it appends (``<state>``...)."""
    return error.split("\n<state>", 1)[0].strip()
