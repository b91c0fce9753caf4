"""The closing walk's guides read a schema's keywords, never the names of its properties."""

from __future__ import annotations

import json

from factorspec_sdk.writer.closing_guides import closing_guides
from factorspec_sdk.writer.closing_numbers import NumberGuide
from factorspec_sdk.writer.closing_strings import StringGuide

# Properties named like keywords (JSONSchemaBench's Github_hard/o37603.json has a property
# "type" whose schema is an enum): the map of properties is no schema of its own.
SCHEMA = {
    "type": "object",
    "properties": {
        "type": {"enum": ["table", "cards"]},
        "pattern": {"type": "integer", "maximum": 9},
        "minLength": {"type": "string", "maxLength": 3},
    },
    "$defs": {"type": {"type": "number", "minimum": 1}},
}


def test_property_names_are_not_read_as_keywords() -> None:
    guides = closing_guides((json.dumps(SCHEMA),))  # raised TypeError: unhashable 'dict'
    assert set(guides.strings) == {
        StringGuide(literal="type"),
        StringGuide(literal="pattern"),
        StringGuide(literal="minLength"),
        StringGuide(literal="table"),
        StringGuide(literal="cards"),
        StringGuide(max_length=3),
        StringGuide(),
    }
    assert set(guides.numbers) == {
        NumberGuide(integer=True, hi=9),
        NumberGuide(integer=False, lo=1),
        NumberGuide(),
    }
