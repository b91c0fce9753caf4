"""Prompt building: one schema hint for the client, the remote backend and the server."""

import pytest

from factorspec_sdk.prompts import chat_messages, hint_sentence, schema_hint, with_schema_hint
from factorspec_sdk.relations.pydantic_layout import build_layout
from tests.helpers import Pick, Trip


def test_schema_hint_pictures_the_record() -> None:
    assert schema_hint(build_layout(Pick)) == (
        '{"letter": "x" | "y" | "z", "n": <integer>, "big": true|false}'
    )
    layout = build_layout(Trip)
    assert hint_sentence(layout) == "Answer with JSON of this form: " + schema_hint(layout)


def test_chat_messages_append_the_hint_to_the_last_user_message() -> None:
    layout = build_layout(Pick)
    got = chat_messages("pick", system="be brief", layout=layout)
    assert got == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "pick\n\n" + hint_sentence(layout)},
    ]
    assert chat_messages("pick", layout=layout, hint=False) == [{"role": "user", "content": "pick"}]
    listed = [{"role": "user", "content": "pick"}]
    assert chat_messages(listed, layout=layout) == [  # a message list gets it too
        {"role": "user", "content": "pick\n\n" + hint_sentence(layout)}
    ]
    assert chat_messages(listed, layout=layout, hint=False) == listed  # as written
    with pytest.raises(TypeError):
        chat_messages(listed, system="no")
    with pytest.raises(TypeError):
        chat_messages([{"role": "user", "text": "x"}])


def test_with_schema_hint_goes_to_the_last_user_message() -> None:
    layout = build_layout(Pick)
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": "?"},
    ]
    got = with_schema_hint(messages, layout)
    assert got[2]["content"] == "second\n\n" + hint_sentence(layout)
    assert [m["content"] for m in got[:2] + got[3:]] == ["first", "ok", "?"]
    assert messages[2]["content"] == "second"  # a copy: the input is unchanged
    assert with_schema_hint([{"role": "system", "content": "s"}], layout)[0]["content"] == "s"
