"""Tool calling as records: the functions a model may call, and the record of its calls.

``client.call([GetWeather, BookRoom], "Book me a room in Oslo for nights 3 to 5")`` returns a
``BookRoom`` instance: the arguments of the call the model chose. A tool is a Pydantic model
of its arguments (named and described by the class, as OpenAI's ``pydantic_function_tool``
does) or a plain Python function (its typed parameters become the model,
`FunctionArguments`). Relations on an arguments model (``start < end``) hold like any
other's.

The calls are generated as one record of `calls_model`:
``{"calls": [{"name": "BookRoom", "arguments": {...}}, ...]}``, a list of a union whose tag is
the function's name, so the choice of function is a choice point of the writer (the feasible
branches come from the spec) and each call's arguments are laid out, relations included, by
the same writer as any record. One call unless ``parallel``.

This module owns the tool descriptions (`Tool`), the record of calls, the system text
that lists the tools to the model (`tools_prompt`), and a tool as the OpenAI API's ``tools``
describe it, its relations included (`function_tool`, for a ``factorspec serve`` called
with the plain ``openai`` client); the client sends them.
"""

from __future__ import annotations

import inspect
import json
import keyword
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, ClassVar, Literal, Union, cast

from pydantic import BaseModel, Field, create_model

from factorspec_sdk.relations.schema import X_FACTORSPEC, plain_json_schema, without_extension

__all__ = [
    "MAX_PARALLEL_CALLS",
    "X_FACTORSPEC",
    "FunctionArguments",
    "Tool",
    "ToolSpec",
    "calls_model",
    "function_tool",
    "tools_of",
    "tools_prompt",
]

MAX_PARALLEL_CALLS = 8
"""Most calls in one answer with ``parallel=True`` (unless the caller asks for another bound)."""

ToolSpec = type[BaseModel] | Callable[..., Any]
"""What a tool is given as: a Pydantic model of its arguments, or a typed function."""


class FunctionArguments(BaseModel):
    """The arguments of a call to a Python function (the model `Tool.of` makes from it)."""

    __function__: ClassVar[Callable[..., Any] | None] = None

    def run(self) -> Any:
        """Call the function with these arguments."""
        fn = type(self).__function__
        if fn is None:
            raise TypeError(f"{type(self).__name__} is not the arguments of a function")
        return fn(**{name: getattr(self, name) for name in type(self).model_fields})


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the model may call.

    Attributes:
        name: the function's name, as the model writes it.
        description: what it does (the class's or the function's docstring).
        arguments: the Pydantic model of its arguments.
    """

    name: str
    description: str
    arguments: type[BaseModel]

    @classmethod
    def of(cls, spec: ToolSpec | Tool) -> Tool:
        """The tool of a model class or of a typed function.

        Raises:
            TypeError: ``spec`` is neither, or a function parameter has no type annotation
                or is ``*args`` / ``**kwargs``.
        """
        if isinstance(spec, Tool):
            return spec
        if isinstance(spec, type) and issubclass(spec, BaseModel):
            return cls(spec.__name__, inspect.getdoc(spec) or "", spec)
        if inspect.isfunction(spec) or inspect.ismethod(spec):
            return cls(spec.__name__, inspect.getdoc(spec) or "", _arguments_of(spec))
        raise TypeError(f"a tool is a pydantic model class or a typed function, not {spec!r}")

    def schema(self) -> dict[str, Any]:
        """The tool as the OpenAI API describes it (``{"type": "function", ...}``).

        The parameters are the arguments model's JSON schema as the model sees them, without
        ``x-factorspec`` (`factorspec_sdk.plain_json_schema`); see `function_tool` for the
        tool a server should get.
        """
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": plain_json_schema(self.arguments),
            },
        }


def function_tool(spec: ToolSpec | Tool, context: object = None) -> dict[str, Any]:
    """The OpenAI ``tools`` entry of a tool, with its relations for ``context``.

    ``openai.pydantic_function_tool(Model)`` sends the model's JSON schema, which carries
    the relation IR of a model whose relations read no context (``@relation`` puts it there,
    `factorspec_sdk.relations.schema`) and, for relations that read one, only a marker on
    which ``factorspec serve`` refuses the tool. This sends the same function with the
    relation IR of its arguments for ``context`` (`factorspec_sdk.ir.to_ir`) under
    ``x-factorspec`` at the root of ``parameters``, where ``factorspec serve`` reads it and
    enforces the relations in every call of the function; it is also the IR of the whole
    arguments model when only a nested model has relations::

        client.chat.completions.create(model=..., messages=...,
                                       tools=[function_tool(BookRoom, context=ctx)])

    A tool without relations gets its plain JSON schema.

    Raises:
        TypeError: ``spec`` is not a tool (`Tool.of`).
        SpecError: as `factorspec_sdk.ir.to_ir`, before anything is sent.
    """
    from factorspec_sdk.ir import to_ir

    tool = Tool.of(spec)
    described = tool.schema()  # the plain schema: the IR below is the one for `context`
    ir = to_ir(tool.arguments, context)
    if ir.get("factors"):
        parameters = dict(described["function"]["parameters"])
        parameters[X_FACTORSPEC] = {"ir": ir}
        described["function"]["parameters"] = parameters
    return described


def _arguments_of(fn: Callable[..., Any]) -> type[FunctionArguments]:
    """The arguments model of ``fn``: one field per parameter, with its type and default."""
    hints = typing.get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(fn).parameters.items():
        where = f"{fn.__qualname__}({name})"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{where}: a tool's parameters are named, not *args / **kwargs")
        if name not in hints:
            raise TypeError(f"{where}: a tool's parameters need type annotations")
        default = ... if param.default is param.empty else param.default
        fields[name] = (hints[name], default)
    model = create_model(
        fn.__name__,
        __base__=FunctionArguments,
        __module__=fn.__module__,
        __doc__=inspect.getdoc(fn),
        **fields,
    )
    model.__function__ = fn
    return cast("type[FunctionArguments]", model)


def tools_of(tools: Sequence[ToolSpec | Tool] | object) -> list[Tool]:
    """The tools of a list (of models, functions or `Tool` s) or of a union of models.

    Raises:
        TypeError: an item is not a tool, there is none, or two share a name.
        ValueError: a name is not one a model can write as a JSON string.
    """
    origin = typing.get_origin(tools)
    if origin is Union or origin is types.UnionType:
        items: Sequence[object] = typing.get_args(tools)
    elif isinstance(tools, type) and issubclass(tools, BaseModel):
        items = [tools]
    elif isinstance(tools, Sequence) and not isinstance(tools, str):
        items = tools
    else:
        raise TypeError(f"tools are a list of models or functions, or a Union; got {tools!r}")
    out = [Tool.of(cast("ToolSpec | Tool", t)) for t in items]
    if not out:
        raise TypeError("call() needs at least one tool")
    names = [t.name for t in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TypeError(f"two tools share the name {', '.join(twice)}")
    for name in names:
        if not name or keyword.iskeyword(name) or any(c in name for c in '"\\\n'):
            raise ValueError(f"{name!r} cannot be a tool's name")
    return out


def calls_model(tools: Sequence[Tool], max_calls: int = 1) -> type[BaseModel]:
    """The record of up to ``max_calls`` calls to ``tools`` (one at least).

    ``{"calls": [{"name": ..., "arguments": {...}}, ...]}``: each call a branch of a union
    whose tag is ``name``.
    """
    if max_calls < 1:
        raise ValueError(f"max_calls must be >= 1, not {max_calls}")
    return _calls_model(tuple(tools), max_calls)


@lru_cache(maxsize=128)
def _calls_model(tools: tuple[Tool, ...], max_calls: int) -> type[BaseModel]:
    branches = [
        create_model(
            f"Call{i}",
            __doc__=f"A call to {tool.name}.",
            name=(cast("Any", Literal[tool.name]), ...),
            arguments=(tool.arguments, ...),
        )
        for i, tool in enumerate(tools)
    ]
    call: Any = (
        branches[0]
        if len(branches) == 1
        else Annotated[Union[tuple(branches)], Field(discriminator="name")]  # noqa: UP007
    )
    model = create_model(
        "ToolCalls",
        __doc__="The calls the model makes.",
        calls=(list[call], Field(min_length=1, max_length=max_calls)),
    )
    return cast("type[BaseModel]", model)


def tools_prompt(
    tools: Sequence[Tool | Mapping[str, Any]], max_calls: int = 1, *, message: bool = False
) -> str:
    """The system text that lists ``tools`` to the model and asks for its call(s).

    A tool is a `Tool` or an OpenAI function description (``name``, ``description``,
    ``parameters``), as a server receives it. ``x-factorspec`` keys (relation IRs) are left
    out of the parameters listed: they are for the server, not the model.

    With ``message`` (the answer is a message or calls, OpenAI's ``tool_choice`` ``"auto"``)
    the text is the functions alone under a heading: the model writes the message's free text
    in the same turn, and copies sentences of its system text into it (SmolLM2 answered
    ``"You can call these functions: "``), so the text has no sentence to copy.
    """
    functions = [
        without_extension(t.schema()["function"] if isinstance(t, Tool) else dict(t)) for t in tools
    ]
    listed = json.dumps(functions, ensure_ascii=False)
    if message:
        return f"Functions:\n{listed}"
    how = (
        "Call one of them"
        if max_calls == 1
        else f"Call one or more of them (at most {max_calls} calls)"
    )
    return f"You can call these functions:\n{listed}\n{how} to answer the user."
