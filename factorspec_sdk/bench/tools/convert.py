"""BFCL function docs as FactorSpec tools, and a record of calls back in BFCL's answer format.

BFCL describes a function's parameters in its own dialect of JSON Schema: the types
``string``, ``integer``, ``float``, ``boolean``, ``array``, ``tuple``, ``dict`` and ``any``,
with ``enum``, ``items``, ``properties`` and ``required``. `tool_of` turns one function doc
into a `factorspec_sdk.tools.Tool` whose arguments model is built with
``pydantic.create_model``:

==========  =================================================================================
BFCL        Pydantic
==========  =================================================================================
string      ``str`` (``Literal[...]`` with an ``enum``)
integer     ``int`` (``Literal[...]`` with an ``enum``; ``"1"`` enum values are read as ints)
float       ``float``
boolean     ``bool``
array       ``list[item]`` (``list[str]`` without ``items``)
tuple       ``list[item]`` (BFCL's checker compares tuples as lists)
dict        a nested model of its ``properties`` (``dict[str, Any]`` without them)
any         ``str`` (BFCL's checker types ``any`` as ``str``)
==========  =================================================================================

A parameter not in ``required`` is optional: ``T | None = None``. An enum whose values are
not of the declared type (BFCL has ``boolean`` enums of ``"True"``/``"dontcare"``) is dropped
and the declared type kept. A parameter whose name is not a Python identifier, or clashes with
a `BaseModel` attribute, is a field with that name as its alias (the JSON keeps BFCL's name).
A doc this cannot convert raises `UnsupportedFunctionDoc` with the reason.

`bfcl_calls` turns a parsed ``{"calls": [{"name": ..., "arguments": {...}}]}`` object into
BFCL's answer format ``[{name: {arg: value}}]``, leaving out arguments that are ``null``
(BFCL's possible answers mark an optional argument that may be left out with ``""``; null is
how a model leaves it out here).
"""

from __future__ import annotations

import keyword
import re
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, create_model

from factorspec_sdk.tools import Tool

__all__ = ["UnsupportedFunctionDoc", "bfcl_calls", "tool_of"]

_SCALARS: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "any": str,
}
_CONFIG = ConfigDict(protected_namespaces=(), populate_by_name=True)


class UnsupportedFunctionDoc(ValueError):
    """A BFCL function doc that cannot become a tool; the message says why."""


def _model_name(name: str) -> str:
    cleaned = re.sub(r"\W", "_", name)
    return cleaned if cleaned[:1].isalpha() else f"F_{cleaned}"


def _field_name(name: str, index: int) -> tuple[str, str | None]:
    """The Python field name of a parameter, and its alias when it needs one."""
    if name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_"):
        if not hasattr(BaseModel, name):
            return name, None
    cleaned = re.sub(r"\W", "_", name).strip("_")
    return f"p{index}_{cleaned}", name


def _enum(kind: str, values: list[Any], base: object, where: str) -> object:
    """``Literal[values]`` when they are (or read as) values of ``kind``; else ``base``."""
    if kind == "integer":
        ints = []
        for v in values:
            if isinstance(v, bool):
                return base
            if isinstance(v, int):
                ints.append(v)
            elif isinstance(v, str) and re.fullmatch(r"-?\d+", v):
                ints.append(int(v))
            else:
                return base
        values = ints
    elif kind in ("string", "any"):
        if not all(isinstance(v, str) for v in values):
            return base
    else:
        return base
    if not values:
        raise UnsupportedFunctionDoc(f"{where}: an empty enum")
    return Literal[tuple(dict.fromkeys(values))]


def _type_of(param: dict[str, Any], where: str) -> object:
    """The Python type of one BFCL parameter (or item) description."""
    kind = param.get("type")
    if not isinstance(kind, str):
        raise UnsupportedFunctionDoc(f"{where}: no type")
    if kind in _SCALARS:
        base: object = _SCALARS[kind]
        enum = param.get("enum")
        if isinstance(enum, list):
            return _enum(kind, enum, base, where)
        return base
    if kind in ("array", "tuple"):
        items = param.get("items")
        item = _type_of(items, f"{where}[]") if isinstance(items, dict) else str
        return list[item]  # type: ignore[valid-type]
    if kind == "dict":
        props = param.get("properties")
        if not isinstance(props, dict) or not props:
            return dict[str, Any]
        return _model(where, props, param.get("required", list(props)), "", where)
    raise UnsupportedFunctionDoc(f"{where}: unknown type {kind!r}")


def _model(
    name: str, props: dict[str, Any], required: object, doc: str, where: str
) -> type[BaseModel]:
    if not isinstance(required, list):
        raise UnsupportedFunctionDoc(f"{where}: 'required' is not a list")
    fields: dict[str, Any] = {}
    for i, (pname, param) in enumerate(props.items()):
        if not isinstance(param, dict):
            raise UnsupportedFunctionDoc(f"{where}.{pname}: not an object")
        typ = _type_of(param, f"{where}.{pname}")
        field, alias = _field_name(pname, i)
        description = str(param.get("description", "")) or None
        if pname in required:
            fields[field] = (typ, Field(alias=alias, description=description))
        else:
            fields[field] = (
                typ | None,  # type: ignore[operator]
                Field(default=None, alias=alias, description=description),
            )
    unknown = [r for r in required if r not in props]
    if unknown:
        raise UnsupportedFunctionDoc(f"{where}: required {unknown} are not parameters")
    model = create_model(_model_name(name), __config__=_CONFIG, __doc__=doc or None, **fields)
    return cast("type[BaseModel]", model)


def tool_of(doc: dict[str, Any]) -> Tool:
    """The FactorSpec tool of one BFCL function doc (named as BFCL names it).

    Raises:
        UnsupportedFunctionDoc: a doc this module cannot convert (the message says why).
    """
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise UnsupportedFunctionDoc(f"a function doc without a name: {doc!r:.80}")
    if any(c in name for c in '"\\\n') or keyword.iskeyword(name):
        raise UnsupportedFunctionDoc(f"{name!r} cannot be a tool's name")
    params = doc.get("parameters")
    if not isinstance(params, dict) or params.get("type") != "dict":
        raise UnsupportedFunctionDoc(f"{name}: parameters are not a 'dict'")
    props = params.get("properties")
    if not isinstance(props, dict):
        raise UnsupportedFunctionDoc(f"{name}: parameters without properties")
    description = str(doc.get("description", ""))
    # the description is the tool's (listed once); the arguments model has no docstring
    model = _model(name, props, params.get("required", []), "", name)
    return Tool(name=name, description=description, arguments=model)


def bfcl_calls(record: object) -> list[dict[str, dict[str, Any]]]:
    """``{"calls": [{"name": n, "arguments": a}, ...]}`` as BFCL's ``[{n: a}, ...]``.

    Arguments whose value is ``null`` are left out (at any depth of a nested object).

    Raises:
        ValueError: ``record`` is not of that shape.
    """
    if not isinstance(record, dict) or not isinstance(record.get("calls"), list):
        raise ValueError('not a record of calls: no "calls" list')
    out: list[dict[str, dict[str, Any]]] = []
    for call in record["calls"]:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError(f"a call without a name: {call!r:.80}")
        args = call.get("arguments", {})
        if not isinstance(args, dict):
            raise ValueError(f"arguments of {call['name']} are not an object")
        out.append({call["name"]: _without_nulls(args)})
    return out


def _without_nulls(args: dict[str, Any]) -> dict[str, Any]:
    return {
        k: _without_nulls(v) if isinstance(v, dict) else v for k, v in args.items() if v is not None
    }
