"""The rest of a JSON value written in part (`json_rest`) and a schema's longest text
(`json_longest`), read by real llguidance matchers and jsonschema-free texts."""

from __future__ import annotations

import json

import pytest

from factorspec_sdk.tokens.grammar import grammar_tables, lark_grammar
from factorspec_sdk.tokens.json_longest import longest_bytes
from factorspec_sdk.tokens.json_rest import value_rest
from factorspec_sdk.tokens.vocab import TokenizerInfo

TOK = TokenizerInfo.tiny_bytes()


def _accepts(grammar: str, text: str) -> bool:
    """Whether the grammar's language holds ``text`` (byte tokens, then the end)."""
    import llguidance

    tokenizer = grammar_tables(TOK).tokenizer
    m = llguidance.LLMatcher(tokenizer, llguidance.grammar_from("lark", grammar))
    assert not m.is_error(), m.get_error()
    return m.consume_tokens(list(text.encode("utf-8"))) and m.is_accepting()


@pytest.mark.parametrize(
    ("written", "rest", "wrong"),
    [
        ('"ab', 'c"', 'c" '),
        ("-", "0.5e+3", "00"),
        ("12", "", "x"),
        ("12", ".5", "."),
        ("1.", "5", "e"),
        ("1e", "-7", ""),
        ("tr", "ue", "ue1"),
        ('[1, "a', '", [2, {"k": null}]]', '"]]'),
        ('{"a": [1, 2', '], "b": {}}', "]]"),
        ('{"a', '": 1}', '", 1}'),
        ('{"a":', ' true, "b": "x"}', "true}"),
        ('{"a": 1,', ' "b": 2}', " 2}"),
        ("[", "]", ","),
        ("{", "}", "]"),
    ],
)
def test_the_rest_of_a_value_is_any_json_after_it(written: str, rest: str, wrong: str) -> None:
    """What may finish a value begun as ``written``: the rest it was written with, and not
    a text that is no JSON after it; then the segment's text after the value, exactly."""
    lead = value_rest(written.encode("utf-8"))
    assert lead is not None
    grammar = lark_grammar(["}"], [], lead)
    assert _accepts(grammar, rest + "}")
    assert not _accepts(grammar, wrong + "}")
    assert not _accepts(grammar, rest)  # the text after the value is due


def test_no_rest_inside_an_escape_or_a_character() -> None:
    """A rest grammar starts between characters: none after ``\\``, in ``\\u00``, in ``é``."""
    for written in (b'"a\\', b'"a\\u00', '"é'.encode()[:-1], b'{"a" 1'):
        assert value_rest(written) is None


@pytest.mark.parametrize(
    ("schema", "longest"),
    [
        ({"type": "boolean"}, 5),
        ({"enum": ["a", "bcd"]}, 5),
        ({"type": "string", "maxLength": 3}, 2 + 36),
        ({"type": "string", "format": "date"}, 12),
        ({"type": "integer", "minimum": -50, "maximum": 7}, 3),
        ({"type": "array", "items": {"type": "boolean"}, "maxItems": 2}, len("[false, false]")),
        (
            {
                "type": "object",
                "properties": {"a": {"const": 1}, "b": {"$ref": "#/$defs/n"}},
                "additionalProperties": False,
                "$defs": {"n": {"type": "null"}},
            },
            len('{"a": 1, "b": null}'),
        ),
        ({"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 1}]}, 14),
        ({"type": "number"}, None),
        ({"type": "string", "pattern": "^a+$"}, None),
        ({"type": "object", "properties": {"a": {"type": "null"}}}, None),
        ({"type": "array", "maxItems": 1, "items": {"$ref": "#"}}, None),  # recursive
    ],
)
def test_longest_bytes(schema: dict[str, object], longest: int | None) -> None:
    """A schema's longest text as the writer's grammar writes it, or None where unbounded."""
    assert longest_bytes(schema) == longest
    if longest is not None:
        assert longest_bytes(json.loads(json.dumps(schema))) == longest
