"""Prompt building: the chat messages a record is generated from, and the schema hint.

One copy of the prompt conventions, used by every backend (local engines tokenize the
messages with their chat template, the remote backend sends them) and by the server, so a
server sees the prompt a local engine would:

- `schema_hint`: a compact picture of the expected JSON (``{"city": <text>, ...}``);
- `hint_sentence`: the sentence that carries it (``Answer with JSON of this form: ...``);
- `with_schema_hint`: messages with that sentence appended to the last user message;
- `chat_messages`: a plain prompt (plus an optional system prompt) or a message list, as
  chat messages, with the hint; `check_prompt` refuses a malformed prompt up front.

The hint is on by default everywhere (`Client`'s ``schema_in_prompt``, the server's
``factorspec.schema_in_prompt``), for a plain prompt and a message list alike, so the same
messages give the same prompt, and the same records, locally and through ``factorspec serve``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from factorspec_sdk.engines.protocol import ChatMessage
from factorspec_sdk.relations.kinds import LeafKind
from factorspec_sdk.relations.layout import (
    GrammarLayout,
    LayoutNode,
    LeafLayout,
    ListLayout,
    ObjectLayout,
    RootLayout,
    UnionLayout,
)

__all__ = [
    "LEAF_HINTS",
    "Prompt",
    "chat_messages",
    "check_prompt",
    "hint_sentence",
    "schema_hint",
    "with_schema_hint",
]

Prompt = str | Sequence[ChatMessage]
"""A plain-text prompt, or a list of chat messages (``{"role": ..., "content": ...}``)."""


def schema_hint(layout: RootLayout) -> str:
    """A compact picture of the expected JSON, appended to the user's prompt by default."""

    def show(node: LayoutNode) -> str:
        if isinstance(node, ObjectLayout):
            inner = ", ".join(
                f"{json.dumps(f.key)}: {show(f.node)}" if not f.others else _others_hint(f.node)
                for f in node.fields
            )
            return "{" + inner + "}"
        if isinstance(node, ListLayout):
            return "[" + show(node.item) + ", ...]"
        if isinstance(node, UnionLayout):
            return " | ".join(show(b) for b in node.branches)
        return _leaf_hint(node)

    def _others_hint(node: LayoutNode) -> str:  # an object's other keys: "<key>": v, ...
        assert isinstance(node, ListLayout) and isinstance(node.item, ObjectLayout)
        return f'"<key>": {show(node.item.field("value").node)}, ...'

    return show(layout)


def _leaf_hint(node: LeafLayout | GrammarLayout) -> str:
    if isinstance(node, GrammarLayout):
        return _schema_hint(node.schema_dict)
    hint = LEAF_HINTS[node.kind]
    return hint if isinstance(hint, str) else hint(node)


LEAF_HINTS: dict[LeafKind, str | Callable[[LeafLayout], str]] = {
    LeafKind.BOOL: "true|false",
    LeafKind.INT: "<integer>",
    LeafKind.STR: "<text>",
    LeafKind.ENUM: lambda node: " | ".join(json.dumps(c) for c in node.choices),
    LeafKind.DATE: "<YYYY-MM-DD>",
    LeafKind.DATETIME: "<YYYY-MM-DDTHH:MM:SS>",
    LeafKind.AWARE: "<YYYY-MM-DDTHH:MM:SSZ>",
    LeafKind.TIME: "<HH:MM:SS>",
    LeafKind.DURATION: "<PT###S>",
    LeafKind.FLOAT: "<number>",
    LeafKind.DECIMAL: "<number>",
    LeafKind.UUID: "<uuid>",  # the hint it had as a grammar value: prompts unchanged
}
"""The schema hint of each leaf kind: its picture, or how to draw it."""


def _schema_hint(schema: object, depth: int = 0) -> str:
    """A short picture of a grammar value from its JSON Schema (``<date>``, ``[<number>, ...]``).

    Objects show their properties and arrays their items, three levels deep; a union shows
    its first alternatives; anything else its format or type.
    """
    if not isinstance(schema, dict):
        return "<value>"
    if "const" in schema:
        return json.dumps(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return " | ".join(json.dumps(v) for v in schema["enum"][:5])
    for key in ("anyOf", "oneOf"):
        alts = schema.get(key)
        if isinstance(alts, list) and alts:
            return " | ".join(_schema_hint(a, depth + 1) for a in alts[:3])
    what = schema.get("format") or schema.get("type")
    props = schema.get("properties")
    if depth < 3 and isinstance(props, dict) and props and what in (None, "object"):
        inner = ", ".join(
            f"{json.dumps(k)}: {_schema_hint(v, depth + 1)}" for k, v in list(props.items())[:12]
        )
        return "{" + inner + "}"
    items = schema.get("items")
    if depth < 3 and isinstance(items, dict) and what in (None, "array"):
        return "[" + _schema_hint(items, depth + 1) + ", ...]"
    if isinstance(what, str):
        return (
            "<" + {"number": "number", "integer": "integer", "string": "text"}.get(what, what) + ">"
        )
    return "<value>"


def hint_sentence(layout: RootLayout) -> str:
    """The sentence that asks for ``layout``'s JSON: ``Answer with JSON of this form: ...``."""
    return "Answer with JSON of this form: " + schema_hint(layout)


def with_schema_hint(messages: Sequence[ChatMessage], layout: RootLayout) -> list[ChatMessage]:
    """A copy of ``messages`` with `hint_sentence` appended to the last user message.

    The sentence follows the message's text after a blank line; messages without a user
    message are copied unchanged.
    """
    out: list[ChatMessage] = [dict(m) for m in messages]
    for m in reversed(out):
        if m["role"] == "user":
            m["content"] += "\n\n" + hint_sentence(layout)
            break
    return out


def check_prompt(prompt: Prompt, system: str | None = None) -> None:
    """Refuse a prompt `chat_messages` cannot use.

    Raises:
        TypeError: ``system`` with a message list, or a message whose keys are not
            ``role`` and ``content``.
    """
    if isinstance(prompt, str):
        return
    if system is not None:
        raise TypeError("pass the system prompt inside the messages, not as system=")
    for m in prompt:
        if set(m) != {"role", "content"}:
            raise TypeError(f"a chat message has the keys role and content, got {m!r}")


def chat_messages(
    prompt: Prompt,
    *,
    system: str | None = None,
    layout: RootLayout | None = None,
    hint: bool = True,
) -> list[ChatMessage]:
    """The chat messages for ``prompt``.

    A plain prompt becomes one user message (after an optional system message); a message
    list is checked and copied. With ``hint`` and a ``layout``, `hint_sentence` is appended
    to the last user message (`with_schema_hint`), as the server does for its chat requests.

    Raises:
        TypeError: as `check_prompt`.
    """
    check_prompt(prompt, system)
    messages: list[ChatMessage]
    if isinstance(prompt, str):
        messages = [] if system is None else [{"role": "system", "content": system}]
        messages.append({"role": "user", "content": prompt})
    else:
        messages = [dict(m) for m in prompt]
    return with_schema_hint(messages, layout) if hint and layout is not None else messages
