"""The ``@relation`` decorator and the collection of a model's relations.

``@relation`` only records metadata, in the way pydantic's ``@field_validator`` does: it wraps
the function in a pydantic ``model_validator(mode="after")`` so that
``Model.model_validate(data, context=ctx)`` checks it, and tags the wrapper with a frozen
`RelationInfo`. The relations of a class are collected from pydantic's own decorator registry
(``__pydantic_decorators__``), so inheritance and overriding behave exactly as for validators.

The per-request context reaches a relation through pydantic's validation context: the object
passed as ``context=`` is handed, as is, to the relation's second parameter.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationInfo, model_validator

from factorspec_sdk.errors import RelationDefinitionError
from factorspec_sdk.relations.schema import carry_relations

__all__ = [
    "RelationInfo",
    "RelationSet",
    "distinct",
    "relation",
    "relations_of",
]

_ATTR = "__factorspec_relation__"
_SET_NAME = "__set_name__"

ModelT = TypeVar("ModelT", bound=BaseModel)


def distinct(values: Iterable[Hashable]) -> bool:
    """True when no two of ``values`` are equal (usable inside relations)."""
    seen: list[Hashable] = []
    for v in values:
        if v in seen:
            return False
        seen.append(v)
    return True


@dataclass(frozen=True, slots=True)
class RelationInfo:
    """What ``@relation`` records about one relation.

    Attributes:
        name: the method name.
        qualname: ``Model.method`` as written in the source.
        func: the plain Python function (``self`` [, context]) -> bool.
        filename: file the relation is defined in.
        lineno: first line of the ``def`` in that file.
        takes_context: whether the function has a second (context) parameter.
        context_param: name of that parameter, if any.
        tree: the function's AST with line numbers as in ``filename``.
    """

    name: str
    qualname: str
    func: Callable[..., object]
    filename: str
    lineno: int
    takes_context: bool
    context_param: str | None
    tree: ast.FunctionDef = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class RelationSet:
    """The relations of one model class, in definition order (base classes first)."""

    model: type[BaseModel]
    relations: tuple[RelationInfo, ...]

    @property
    def needs_context(self) -> bool:
        """Whether any relation reads the per-request context."""
        return any(r.takes_context for r in self.relations)

    def __iter__(self) -> Any:
        return iter(self.relations)

    def __len__(self) -> int:
        return len(self.relations)


class RelationViolation(ValueError):
    """Raised inside pydantic validation when a relation does not hold."""


def _parse(func: Callable[..., object], qualname: str) -> tuple[ast.FunctionDef, str, int]:
    filename = inspect.getsourcefile(func) or "<unknown>"
    try:
        lines, start = inspect.getsourcelines(func)
    except (OSError, TypeError) as exc:
        raise RelationDefinitionError(
            "the source of a relation must be available to compile it",
            relation=qualname,
            filename=filename,
            lineno=0,
            construct="relation without source",
        ) from exc
    source = textwrap.dedent("".join(lines))
    module = ast.parse(source)
    ast.increment_lineno(module, start - 1)
    node = module.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise RelationDefinitionError(
            "@relation applies to a plain method (def), not to a lambda or async def",
            relation=qualname,
            filename=filename,
            lineno=start,
            construct=type(node).__name__,
        )
    return node, filename, start


def relation(func: Callable[..., bool]) -> Any:
    """Declare a relation among a model's fields.

    The decorated method takes ``self`` and, optionally, one per-request context argument; it
    returns ``True`` when the record satisfies the relation. It runs as a pydantic validator
    (``Model.model_validate(data, context=ctx)`` checks it) and FactorSpec compiles the same
    function into constraints that steer decoding. The body must stay within the supported
    subset (see *Writing relations*); constructs outside it raise `RelationDefinitionError`
    when the class is defined or compiled, never while generating.

    Example:
        ```python
        class Stay(BaseModel):
            first_day: int
            last_day: int

            @relation
            def ordered(self) -> bool:
                return self.first_day <= self.last_day
        ```
    """
    if isinstance(func, (classmethod, staticmethod)):
        raise TypeError("@relation goes on a plain method, not a classmethod or staticmethod")
    qualname = getattr(func, "__qualname__", getattr(func, "__name__", "relation"))
    tree, filename, lineno = _parse(func, qualname)
    params = list(inspect.signature(func).parameters.values())
    if not params:
        raise RelationDefinitionError(
            "a relation takes `self` and at most one context argument",
            relation=qualname,
            filename=filename,
            lineno=lineno,
            construct="relation without self",
        )
    if len(params) > 2:
        raise RelationDefinitionError(
            f"a relation takes `self` and at most one context argument, got {len(params)}",
            relation=qualname,
            filename=filename,
            lineno=lineno,
            construct="extra parameters",
        )
    context_param = params[1].name if len(params) == 2 else None
    info = RelationInfo(
        name=func.__name__,
        qualname=qualname,
        func=func,
        filename=filename,
        lineno=lineno,
        takes_context=context_param is not None,
        context_param=context_param,
        tree=tree,
    )
    # Unsupported syntax is reported now, at class-definition time.
    from factorspec_sdk.relations.checks import check_syntax

    check_syntax(info)

    def check(self: ModelT, validation_info: ValidationInfo) -> ModelT:
        ok = evaluate(info, self, validation_info.context)
        if not ok:
            raise RelationViolation(f"relation {info.name!r} does not hold")
        return self

    check.__name__ = func.__name__
    check.__qualname__ = qualname
    check.__doc__ = func.__doc__
    setattr(check, _ATTR, info)
    # Python calls __set_name__ on the class body's values when the class is created (and
    # pydantic's validator proxy hands it to the function it wraps): the class then carries
    # its relations in its JSON schema (factorspec_sdk.relations.schema)
    setattr(check, _SET_NAME, carry_relations)
    return model_validator(mode="after")(check)


def evaluate(info: RelationInfo, instance: BaseModel, context: object) -> bool:
    """Run one relation in Python; an exception inside it counts as a violation.

    This is the reference semantics the compiled form must agree with: an ``IndexError``
    (``self.stays[0]`` on an empty list), ``KeyError`` (a lookup of an unknown key) or any
    other exception means the record does not satisfy the relation.
    """
    if info.takes_context and context is None:
        raise RelationViolation(
            f"relation {info.name!r} needs a context: pass context=... to model_validate"
        )
    try:
        result = info.func(instance, context) if info.takes_context else info.func(instance)
    except Exception:
        return False
    return bool(result)


def relations_of(model: type[BaseModel]) -> RelationSet:
    """Collect the relations of ``model`` (inherited ones included), in definition order."""
    decorators = getattr(model, "__pydantic_decorators__", None)
    found: list[RelationInfo] = []
    if decorators is not None:
        for dec in decorators.model_validators.values():
            info = getattr(dec.func, _ATTR, None)
            if isinstance(info, RelationInfo):
                found.append(info)
    return RelationSet(model=model, relations=tuple(found))
