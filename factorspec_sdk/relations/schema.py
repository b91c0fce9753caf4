"""A model's relations in its own JSON Schema: ``x-factorspec`` at the root, added by ``@relation``.

``openai.pydantic_function_tool(Model)``, ``client.chat.completions.parse(
response_format=Model)`` and Instructor build their requests from ``Model.model_json_schema()``,
which says nothing of ``@relation`` s: a server would decode without them. So ``@relation``
makes its class add, to its JSON schema, the key `X_FACTORSPEC` with the relation IR of the
model (``{"ir": factorspec_sdk.ir.to_ir(Model)}``), which ``factorspec serve`` reads at the
root of a ``response_format`` schema or of a tool's ``parameters`` and enforces; or, when the
IR cannot be exported without a per-request context (or the relations do not compile), a
marker naming the relations (``{"unexported": {"model": "Slot", "relations": [...], "reason":
"..."}}``), on
which the server refuses the request with a 4xx saying what to send instead, rather than
decoding without them.

**How** (the choice among Pydantic's hooks): the classmethod ``__get_pydantic_json_schema__``
is Pydantic's documented hook for a class to add to its own JSON schema ("Implementing
``__get_pydantic_json_schema__``" in its JSON Schema docs). Pydantic reads it from the class
when it builds the class's core schema and calls it each time the schema is generated, by
``model_json_schema()``, a ``TypeAdapter`` or a containing model, with whichever
``GenerateJsonSchema`` the caller chose; the hook calls the one it replaces first (the class's
own, or an inherited one, or `BaseModel`'s), so a class's own hook keeps working, and a
hand-written ``x-factorspec`` (``json_schema_extra``) is left as it is. The other documented
routes do not fit: ``json_schema_extra`` is the user's slot in ``model_config`` (a decorator
would have to rewrite it, and a subclass's config replaces it), and a ``GenerateJsonSchema``
subclass only acts where the caller picks the generator, which ``openai`` and Instructor
never do. ``@relation`` decorates a method, so it reaches the class through ``__set_name__``,
which Python calls on every value of a class body when the class is created, before Pydantic
builds its core schema (Pydantic's decorator proxy hands it on to the function it wraps, as it
does for a ``cached_property`` under ``@computed_field``). A subclass inherits the hook (with
its own class as ``cls``); a subclass that defines its own ``__get_pydantic_json_schema__``
must call ``super()``'s, or its schema carries no relations.

The export is lazy (at JSON-schema time, never at class creation: it compiles the relations
with Z3), cached per class, and never raises: a model whose relations need a context or do
not compile gets the marker. Validation is unchanged.

A model *without* relations that holds one with relations gets no key at its root (its class
has no hook, and no hook of a nested class can write at its container's root): the nested
model's ``x-factorspec`` sits under ``$defs``, where the server reads none, so it refuses the
request naming the place; ``function_tool``, ``from_openai`` and ``Client(base_url=...)``
send the IR of the whole record.

Relations sit below the relation IR in the layering, so this module does not export the IR
itself: the package root registers the exporter (`set_schema_extension`, with
``factorspec_sdk.ir.carrier.schema_extension``); every import of this package runs the root
first.

Some providers refuse keywords they do not know (Anthropic; OpenAI's strict mode is reported
to refuse some): `plain_json_schema` (or ``model_json_schema(schema_generator=
PlainJsonSchema)``) is the schema without the key.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, GetJsonSchemaHandler
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import CoreSchema

__all__ = [
    "DATA_KEYWORDS",
    "NAME_MAPS",
    "UNEXPORTED",
    "X_FACTORSPEC",
    "PlainJsonSchema",
    "SchemaExtension",
    "carry_relations",
    "plain_json_schema",
    "set_schema_extension",
    "unexported",
    "without_extension",
]

X_FACTORSPEC = "x-factorspec"
"""The JSON Schema key that carries a relation IR inside a schema (``{"ir": {...}}``)."""

UNEXPORTED = "unexported"
"""The key of ``x-factorspec``'s marker: relations that are not in the schema, and why."""

SchemaExtension = Callable[[type[BaseModel]], dict[str, Any]]
"""What a model's schema carries under `X_FACTORSPEC`: ``{"ir": ...}`` or `unexported`."""

_HOOK = "__get_pydantic_json_schema__"
_MARK = "__factorspec_relations_hook__"
NAME_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
"""Keywords whose value maps names (not keywords) to sub-schemas."""
DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
"""Keywords whose value is data, not schemas."""

_extension: list[SchemaExtension] = []
"""The exporter the package root registers (one at most)."""
_plain: contextvars.ContextVar[bool] = contextvars.ContextVar("factorspec_plain", default=False)
"""True while `PlainJsonSchema` generates a schema: the hook exports nothing."""


def set_schema_extension(export: SchemaExtension) -> None:
    """Register what a model's schema carries (the package root does, once)."""
    _extension[:] = [export]


def unexported(model: type[BaseModel], reason: str) -> dict[str, Any]:
    """The marker of ``model``'s relations that its schema cannot carry, and why."""
    from factorspec_sdk.relations.decorator import relations_of

    names = [r.qualname for r in relations_of(model)]
    return {UNEXPORTED: {"model": model.__name__, "relations": names, "reason": reason}}


def carry_relations(owner: type, name: str) -> None:
    """Make ``owner`` (a model with a relation ``name``) carry its relations in its schema.

    Installs the ``__get_pydantic_json_schema__`` hook (see the module) once per class; a
    class that inherits the hook keeps it. Anything but a Pydantic model is left alone.
    """
    if not (isinstance(owner, type) and issubclass(owner, BaseModel)):
        return
    previous = getattr(getattr(owner, _HOOK, None), "__func__", None)
    if previous is None or getattr(previous, _MARK, False):
        return  # not a classmethod (Pydantic's form of the hook), or ours already

    def hook(
        cls: type[BaseModel], core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema: JsonSchemaValue = previous(cls, core_schema, handler)
        target = handler.resolve_ref_schema(json_schema)
        if X_FACTORSPEC not in target and not _plain.get():
            target[X_FACTORSPEC] = _carried(cls)
        return json_schema

    setattr(hook, _MARK, True)
    hook.__doc__ = f"{owner.__name__}'s JSON schema, with its relations (``@relation``, {name})."
    setattr(owner, _HOOK, classmethod(hook))


def _carried(model: type[BaseModel]) -> dict[str, Any]:
    if not _extension:  # the package root registers it: not reached through an import
        return unexported(model, "the relation IR exporter is not loaded (import factorspec_sdk)")
    return _extension[0](model)


class PlainJsonSchema(GenerateJsonSchema):
    """A JSON schema generator that leaves relations out: no ``x-factorspec`` anywhere.

    ``Model.model_json_schema(schema_generator=PlainJsonSchema)``, for a provider that
    refuses keywords it does not know; `plain_json_schema` says it shorter.
    """

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        """The schema of ``schema``, without ``x-factorspec`` (nothing is exported)."""
        token = _plain.set(True)
        try:
            out = super().generate(schema, mode)
        finally:
            _plain.reset(token)
        cleaned = without_extension(out)
        assert isinstance(cleaned, dict)
        return cleaned


def plain_json_schema(model: type[BaseModel], **kwargs: Any) -> dict[str, Any]:
    """``model.model_json_schema(**kwargs)`` without ``x-factorspec`` (no relation IR).

    For a provider that refuses keywords it does not know (Anthropic's tools, OpenAI's strict
    mode); a ``factorspec serve`` given it cannot know the relations.
    """
    return model.model_json_schema(schema_generator=PlainJsonSchema, **kwargs)


def without_extension(value: Any) -> Any:
    """``value`` (a JSON schema) without its ``x-factorspec`` keywords, at any depth.

    Property names, ``$defs`` names and data (``enum``, ``const``, ``default``,
    ``examples``) are kept as they are, even when spelled ``x-factorspec``.
    """
    if isinstance(value, list):
        return [without_extension(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[Any, Any] = {}
    for key, v in value.items():
        if key == X_FACTORSPEC:
            continue
        if key in DATA_KEYWORDS:
            out[key] = v
        elif key in NAME_MAPS and isinstance(v, dict):
            out[key] = {name: without_extension(s) for name, s in v.items()}
        else:
            out[key] = without_extension(v)
    return out
