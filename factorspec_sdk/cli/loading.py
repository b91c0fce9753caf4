"""Resolve the command line's ``MODULE:ATTR`` references and context files.

Kept free of heavy imports: it imports only the user's module (which imports
``factorspec_sdk``, itself light) and pydantic.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import types
import typing
from pathlib import Path

from pydantic import BaseModel, TypeAdapter, ValidationError

from factorspec_sdk.errors import ContextError, FactorSpecError
from factorspec_sdk.relations.decorator import relations_of

__all__ = [
    "UsageProblem",
    "coerce_context",
    "context_types",
    "load_attribute",
    "load_context",
    "load_model",
    "read_prompt",
]


class UsageProblem(Exception):
    """A bad command line: a reference that does not resolve, a missing file, bad JSON.

    Attributes:
        message: what is wrong and how to fix it.
        param: the parameter it concerns, as the user wrote it (``MODULE:Model``, ``--context``).
    """

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def _looks_like_path(ref: str) -> bool:
    return ref.endswith(".py") or "/" in ref or os.sep in ref


def _ensure_cwd_on_path() -> None:
    # `python -m` puts the working directory first on sys.path; do the same for dotted names.
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def _import_dotted(name: str, param: str) -> types.ModuleType:
    _ensure_cwd_on_path()
    try:
        return importlib.import_module(name)
    except FactorSpecError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise UsageProblem(f"no module named {name!r}", param) from exc
        raise UsageProblem(f"importing {name!r} failed: {exc}", param) from exc
    except Exception as exc:
        raise UsageProblem(f"importing {name!r} failed: {exc!r}", param) from exc


def _dotted_name_under_cwd(path: Path) -> str | None:
    try:
        rel = path.relative_to(Path.cwd().resolve())
    except ValueError:
        return None
    parts = rel.with_suffix("").parts
    if parts and all(p.isidentifier() for p in parts):
        return ".".join(parts)
    return None


def _import_file(ref: str, param: str) -> types.ModuleType:
    path = Path(ref).expanduser()
    if not path.is_file():
        raise UsageProblem(f"file {ref!r} does not exist", param)
    resolved = path.resolve()
    dotted = _dotted_name_under_cwd(resolved)
    if dotted is not None:
        # Import as a package module so that `pkg/models.py` and `pkg.models` are one
        # module (same classes, same sample context).
        module = _import_dotted(dotted, param)
        file = getattr(module, "__file__", None)
        if file is not None and Path(file).resolve() == resolved:
            return module
    name = f"_factorspec_user_{resolved.stem}_{abs(hash(str(resolved))):x}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise UsageProblem(f"cannot import {ref!r} as a Python module", param)
    module = importlib.util.module_from_spec(spec)
    # pydantic resolves postponed annotations through sys.modules[cls.__module__]
    sys.modules[name] = module
    parent = str(resolved.parent)
    if parent not in sys.path:
        sys.path.append(parent)  # sibling imports, as when the file is run as a script
    try:
        spec.loader.exec_module(module)
    except FactorSpecError:
        del sys.modules[name]
        raise
    except Exception as exc:
        del sys.modules[name]
        raise UsageProblem(f"importing {ref!r} failed: {exc!r}", param) from exc
    return module


def load_attribute(target: str, param: str) -> object:
    """The object named by ``MODULE:ATTR``.

    ``MODULE`` is a file path (``models.py``) or a dotted module name
    (``factorspec_sdk.domains.trip``, found from the working directory as with ``python -m``).

    Raises:
        UsageProblem: the reference is malformed or does not resolve.
        FactorSpecError: importing the module raised one (e.g. `RelationDefinitionError`
            from ``@relation`` at class-definition time).
    """
    module_ref, sep, attr = target.rpartition(":")
    if not sep or not module_ref or not attr:
        raise UsageProblem(
            f"expected MODULE:ATTR (e.g. factorspec_sdk.domains.trip:Itinerary), got {target!r}",
            param,
        )
    if _looks_like_path(module_ref):
        module = _import_file(module_ref, param)
    else:
        module = _import_dotted(module_ref, param)
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageProblem(f"{module_ref!r} has no attribute {attr!r}", param) from None
    return obj


def load_model(target: str, param: str = "MODULE:MODEL") -> type[BaseModel]:
    """The Pydantic model class named by ``MODULE:Model``.

    Raises:
        UsageProblem: the reference does not resolve to a Pydantic model class.
    """
    obj = load_attribute(target, param)
    if not (isinstance(obj, type) and issubclass(obj, BaseModel)):
        got = type(obj).__name__ if not isinstance(obj, type) else f"class {obj.__name__}"
        raise UsageProblem(f"{target!r} is not a Pydantic model class (it is a {got})", param)
    return obj


def context_types(model: type[BaseModel]) -> list[object]:
    """The annotated types of the context parameters of ``model``'s relations.

    Nested models' relations count too (they receive the same context). Relations whose
    context parameter has no annotation (or one that cannot be resolved) add nothing.
    """
    found: list[object] = []
    seen: set[type[BaseModel]] = set()

    def visit(m: type[BaseModel]) -> None:
        if m in seen:
            return
        seen.add(m)
        for info in relations_of(m):
            if info.context_param is None:
                continue
            try:
                hints = typing.get_type_hints(info.func)
            except Exception:
                continue
            tp = hints.get(info.context_param)
            if tp is not None and tp not in found:
                found.append(tp)
        for f in m.model_fields.values():
            for sub in _models_in(f.annotation):
                visit(sub)

    visit(model)
    return found


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += _models_in(arg)
    return out


def coerce_context(model: type[BaseModel], value: object) -> object:
    """Validate ``value`` into the type the relations of ``model`` annotate their context with.

    A value that already has that type, a model without an annotated context parameter, or an
    annotation of ``object``/``Any`` leave ``value`` as is. A pydantic model type is filled
    with ``model_validate``; any other annotation (``dict[str, int]``, a dataclass...) goes
    through a pydantic ``TypeAdapter``.

    Raises:
        ContextError: ``value`` does not validate into the annotated type.
    """
    types_ = [t for t in context_types(model) if t not in (object, typing.Any)]
    if not types_ or value is None:
        return value
    tp = types_[0]
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    try:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp.model_validate(value)
        return TypeAdapter(typing.cast(typing.Any, tp)).validate_python(value)
    except ValidationError as exc:
        name = getattr(tp, "__name__", repr(tp))
        raise ContextError(f"the context does not validate as {name}: {exc}") from exc


def load_context(ref: str, param: str = "--context") -> object:
    """The raw context named by ``ref``: a JSON file, ``-`` (JSON on stdin) or ``MODULE:ATTR``.

    Raises:
        UsageProblem: the file is missing, the JSON is malformed, or the reference does not
            resolve.
    """
    if ref == "-":
        text = sys.stdin.read()
        where = "stdin"
    else:
        path = Path(ref).expanduser()
        if not path.is_file():
            module_ref, sep, _ = ref.rpartition(":")
            if sep and module_ref and not ref.endswith(".json"):
                return load_attribute(ref, param)
            raise UsageProblem(f"context file {ref!r} does not exist", param)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageProblem(f"cannot read {ref!r}: {exc}", param) from exc
        where = ref
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageProblem(f"{where} is not valid JSON: {exc}", param) from exc


def read_prompt(prompt: str | None, prompt_file: str | None) -> str:
    """The prompt text from ``--prompt`` or ``--prompt-file`` (``-`` reads stdin).

    Raises:
        UsageProblem: neither or both are given, or the file cannot be read.
    """
    if (prompt is None) == (prompt_file is None):
        raise UsageProblem("give exactly one of --prompt and --prompt-file", "--prompt")
    if prompt_file is None:
        return prompt or ""
    if prompt_file == "-":
        return sys.stdin.read()
    path = Path(prompt_file).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageProblem(f"prompt file {prompt_file!r} does not exist", "--prompt-file") from None
    except OSError as exc:
        raise UsageProblem(f"cannot read {prompt_file!r}: {exc}", "--prompt-file") from exc
