"""The import direction of docs/architecture.md, checked on the source (an AST walk, no imports).

Every module of ``factorspec_sdk`` belongs to one layer; a module may import its own layer and
the layers below it, never one above. Two libraries are fenced in: torch only in ``engines``
(and ``tokens``), Z3 only in ``relations``, ``graph`` and ``ir``. No module imports a private
(underscore) name from another module. Imports under ``if TYPE_CHECKING:`` count too: a type
that points upward is still a dependency a reader has to follow.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "factorspec_sdk"

LAYERS: list[tuple[str, ...]] = [
    ("errors",),
    ("relations",),
    ("graph",),
    ("ir",),
    ("writer",),
    ("tokens",),
    ("engines",),
    ("drafter",),
    ("partials", "provenance"),
    ("prompts", "backends", "client", "streams", "tools", "remote"),
    ("integrations",),
    ("server",),
    ("domains",),
    ("bench",),
    ("cli",),
]
"""Lowest first. ``engines`` sits below ``drafter``: the drafter drives an engine through the
engine protocol, an engine never calls back into the drafter. ``partials`` and ``provenance``
read a record's planner after (or while) the drafter decodes it. ``integrations`` (other
libraries' call shapes) builds on ``backends`` and knows nothing of ``server``. ``cli`` (the
``factorspec`` command) is the top: it may import every layer and no layer imports it. The package
root (``factorspec_sdk/__init__.py``) re-exports the public API and may import any layer but the
cli (``import factorspec_sdk`` must not build the Typer app)."""

TORCH_LAYERS = {"engines", "tokens"}
Z3_LAYERS = {"relations", "graph", "ir"}


def _layer_of(top: str) -> int | None:
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    return None


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _top(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module, imported names) for every import in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.removesuffix(".__init__")
    else:
        package = package.rsplit(".", 1)[0]
    out: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            out.append((node.lineno, module, [a.name for a in node.names]))
    aliases = {
        (a.asname or a.name): f"{node.module}.{a.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("factorspec_sdk")
        for a in node.names
    } | {
        a.asname: a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for a in node.names
        if a.asname and a.name.startswith("factorspec_sdk")
    }
    for node in ast.walk(tree):  # `module._private` through a module imported under a name
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            out.append((node.lineno, aliases[node.value.id], [node.attr]))
    return out


def test_every_module_has_a_layer() -> None:
    tops = {_top(p) for p in _modules()} - {"__init__"}
    assert tops <= {n for names in LAYERS for n in names}, tops - {
        n for names in LAYERS for n in names
    }


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down(path: Path) -> None:
    top = _top(path)
    if top == "__init__":
        return
    own = _layer_of(top)
    assert own is not None
    wrong: list[str] = []
    for line, module, names in _imports(path):
        parts = module.split(".")
        if parts[0] == "factorspec_sdk" and len(parts) > 1:
            other = _layer_of(parts[1])
            if other is not None and other > own:
                wrong.append(f"line {line}: {top} imports {module} (a later layer)")
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and module != _module_name(path):
                wrong.append(f"line {line}: imports private {private} from {module}")
        elif parts[0] == "torch" and top not in TORCH_LAYERS:
            wrong.append(f"line {line}: torch is imported outside engines/tokens")
        elif parts[0] == "z3" and top not in Z3_LAYERS:
            wrong.append(f"line {line}: z3 is imported outside relations/graph/ir")
    assert not wrong, f"{path.relative_to(ROOT)}:\n" + "\n".join(wrong)


def _module_name(path: Path) -> str:
    return ".".join(("factorspec_sdk", *path.relative_to(PACKAGE).with_suffix("").parts))


def test_the_package_root_does_not_import_the_cli() -> None:
    """``import factorspec_sdk`` stays free of the Typer app (the cli imports the package)."""
    wrong = [
        f"line {line}: imports {module}"
        for line, module, names in _imports(PACKAGE / "__init__.py")
        if module.split(".")[:2] == ["factorspec_sdk", "cli"]
        or (module == "factorspec_sdk" and "cli" in names)
    ]
    assert not wrong, "factorspec_sdk/__init__.py:\n" + "\n".join(wrong)


def _private_state(path: Path, cls: str) -> set[str]:
    """The private attributes (``self._x = ...``) that the methods of ``cls`` in ``path`` set."""
    tree = ast.parse(path.read_text(), filename=str(path))
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    return {
        t.attr
        for sub in ast.walk(node)
        for t in (
            sub.targets
            if isinstance(sub, ast.Assign)
            else [sub.target]
            if isinstance(sub, ast.AnnAssign)
            else []
        )
        if isinstance(t, ast.Attribute)
        and isinstance(t.value, ast.Name)
        and t.value.id == "self"
        and t.attr.startswith("_")
        and not t.attr.startswith("__")
    }


def test_only_the_compiled_spec_reads_its_private_state() -> None:
    """The oracle (and every other module) reads a `CompiledSpec` through its methods.

    ``component(i)``, ``component_of(var)``, ``len(spec.components)``: never its
    ``_components`` or ``_comp_of``, on whatever object they are reached through.
    """
    owner = PACKAGE / "graph" / "compiled.py"
    private = _private_state(owner, "CompiledSpec")
    assert {"_components", "_comp_of"} <= private  # what the check is about
    wrong: list[str] = []
    for path in _modules():
        if path == owner:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in private
                and not (isinstance(node.value, ast.Name) and node.value.id == "self")
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    assert not wrong, "\n".join(wrong)


def _kind_tables() -> dict[str, Mapping[object, object]]:
    """Every stage's table of behaviour per leaf kind (`factorspec_sdk.relations.kinds`)."""
    from factorspec_sdk.ir.leaves import IR_LEAVES
    from factorspec_sdk.prompts import LEAF_HINTS
    from factorspec_sdk.relations.compiler.fields import LEAF_VALUES
    from factorspec_sdk.relations.defaults import DEFAULT_TEXTS
    from factorspec_sdk.relations.display import LEAF_DISPLAY
    from factorspec_sdk.relations.kinds import PYTHON_TYPES
    from factorspec_sdk.relations.pydantic_layout import LEAF_BUILDERS
    from factorspec_sdk.relations.sample import SAMPLE_VALUES
    from factorspec_sdk.relations.variables import LEAF_VARIABLES
    from factorspec_sdk.writer.leaves import LEAF_WRITERS

    return {
        "kinds.PYTHON_TYPES (the Python types of a kind)": PYTHON_TYPES,
        "pydantic_layout.LEAF_BUILDERS (layout from Pydantic)": LEAF_BUILDERS,
        "variables.LEAF_VARIABLES (the solver variable of a leaf)": LEAF_VARIABLES,
        "compiler.fields.LEAF_VALUES (a relation's value of a leaf)": LEAF_VALUES,
        "display.LEAF_DISPLAY (a variable as the user reads it)": LEAF_DISPLAY,
        "sample.SAMPLE_VALUES (a sample record)": SAMPLE_VALUES,
        "defaults.DEFAULT_TEXTS (a default as the writer writes it)": DEFAULT_TEXTS,
        "ir.leaves.IR_LEAVES (IR wire form, record checks and facts)": IR_LEAVES,
        "writer.leaves.LEAF_WRITERS (writer options and lengths)": LEAF_WRITERS,
        "prompts.LEAF_HINTS (the prompt's schema hint)": LEAF_HINTS,
    }


@pytest.mark.parametrize("table", list(_kind_tables()))
def test_every_stage_handles_every_leaf_kind(table: str) -> None:
    """A new `LeafKind` that a stage does not handle fails here, not in a user's request."""
    from factorspec_sdk.relations.kinds import LeafKind

    missing = set(LeafKind) - set(_kind_tables()[table])
    assert not missing, f"{table} has no entry for {sorted(missing)}"


def _var_kind_tables() -> dict[str, Mapping[object, object]]:
    """Every stage's table of behaviour per variable kind."""
    from factorspec_sdk.ir.record import FACTS
    from factorspec_sdk.ir.variables import WIRE_KINDS
    from factorspec_sdk.relations.display import VARIABLE_DISPLAY
    from factorspec_sdk.relations.kinds import VAR_SORTS

    return {
        "kinds.VAR_SORTS (how the solver holds it)": VAR_SORTS,
        "ir.variables.WIRE_KINDS (the IR's kind)": WIRE_KINDS,
        "ir.record.FACTS (its value in a record)": FACTS,
        "display.VARIABLE_DISPLAY (as the user reads it)": VARIABLE_DISPLAY,
    }


@pytest.mark.parametrize("table", list(_var_kind_tables()))
def test_every_stage_handles_every_variable_kind(table: str) -> None:
    """A new `VarKind` that a stage does not handle fails here."""
    from factorspec_sdk.relations.kinds import VarKind

    missing = set(VarKind) - set(_var_kind_tables()[table])
    assert not missing, f"{table} has no entry for {sorted(missing)}"


def test_no_module_compares_kinds_as_strings() -> None:
    """Kinds are found through tables (or compared as members), never as string tags.

    A comparison of a ``kind``/``temporal`` with a string literal naming a kind (``kind ==
    "date"``, ``kind in ("len", "strlen")``) is the spread this check keeps out.
    """
    names = {"kind", "temporal"}
    tags = {"bool", "int", "str", "enum", "date", "datetime", "aware", "time", "duration"}
    tags |= {"float", "decimal", "len", "strlen", "datepart", "same", "affix"}
    wrong: list[str] = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            named = any(
                (isinstance(s, ast.Attribute) and s.attr in names)
                or (isinstance(s, ast.Name) and s.id in names)
                for s in sides
            )
            literals = {
                c.value
                for s in sides
                for c in (s.elts if isinstance(s, ast.Tuple | ast.List | ast.Set) else [s])
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            }
            if named and literals & tags:
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not wrong, "kinds compared as strings:\n" + "\n".join(wrong)


ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _table(heading: str) -> list[list[str]]:
    """The rows (cells) of the table under ``## heading`` in docs/architecture.md."""
    page = ARCHITECTURE.read_text()
    section = page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [
        [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        for line in section.splitlines()
        if line.startswith("| `")
    ]


def _named_modules() -> dict[str, str]:
    """Every ``.py`` file and folder the package table names: path under the package -> row.

    A row names its package (```relations/``` or ```client.py```); its other cells name modules
    relative to it (```layout.py``` in the ``relations/`` row is ``relations/layout.py``). A
    folder written as ```compiler/``` names its ``__init__.py``, and names in the parentheses
    right after it are relative to it: ```compiler/``` (``core.py``, ...) names
    ``relations/compiler/core.py``.
    """
    named: dict[str, str] = {}
    for package, *cells in _table("What each package owns"):
        row = package.strip("`")
        prefix = "" if row.endswith(".py") else row
        named[row if row.endswith(".py") else f"{row}__init__.py"] = row
        text = " | ".join(cells)
        stack, opens, opens_at = [prefix], None, -1
        for m in re.finditer(r"`([^`]*)`|[()]", text):
            if m.group(0) == "(":
                right_after = opens is not None and not text[opens_at : m.start()].strip()
                stack.append(opens if right_after and opens is not None else stack[-1])
                opens = None
            elif m.group(0) == ")":
                if len(stack) > 1:
                    stack.pop()
                opens = None
            else:
                name, opens = m.group(1), None
                if re.fullmatch(r"[\w/]+\.py", name):
                    named[stack[-1] + name] = row
                elif re.fullmatch(r"[\w/]+/", name):
                    named[f"{stack[-1]}{name}__init__.py"] = row
                    opens, opens_at = stack[-1] + name, m.end()
    return named


def test_the_architecture_page_names_every_module() -> None:
    """Every module of the package is named in its package's row of docs/architecture.md.

    The root ``__init__.py`` aside, a new module fails here until its row names it (with a
    line on what it does), as ``layout.py`` in the ``relations/`` row or ``core.py`` in the
    parentheses after ``compiler/``.
    """
    modules = {p.relative_to(PACKAGE).as_posix() for p in _modules()} - {"__init__.py"}
    missing = sorted(modules - set(_named_modules()))
    assert not missing, "docs/architecture.md does not name:\n" + "\n".join(missing)


def test_the_architecture_page_names_no_module_that_is_gone() -> None:
    """A ``.py`` name in the package table is a module (of its row, else a cross-reference)."""
    gone = [
        f"{row}: {name}"
        for name, row in _named_modules().items()
        if not (PACKAGE / name).is_file()
        and not (PACKAGE / name.removeprefix(row)).is_file()
        and not (ROOT / name.removeprefix(row)).is_file()
    ]
    assert not gone, "docs/architecture.md names modules that do not exist:\n" + "\n".join(gone)


def _exception_classes() -> dict[tuple[str, str], str]:
    """The package's exception classes: (module path, name) -> "FactorSpecError" or "other".

    A base is looked up in the class's own module first, then by name (an imported class).
    """
    import builtins

    classes: list[tuple[str, str, list[str]]] = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                bases = [
                    b.id if isinstance(b, ast.Name) else b.attr
                    for b in node.bases
                    if isinstance(b, ast.Name | ast.Attribute)
                ]
                classes.append((path.relative_to(PACKAGE).as_posix(), node.name, bases))
    kinds: dict[tuple[str, str], str] = {("errors.py", "FactorSpecError"): "FactorSpecError"}
    kinds |= {
        ("", name): "other"
        for name, value in vars(builtins).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }

    def kind_of(where: str, base: str) -> str | None:
        if (where, base) in kinds:
            return kinds[where, base]
        return next((k for (w, n), k in kinds.items() if n == base and w != where), None)

    grew = True
    while grew:  # a class is of the kind of its first known base, transitively
        grew = False
        for where, name, bases in classes:
            kind = next((k for b in bases if (k := kind_of(where, b)) is not None), None)
            if kind is not None and (where, name) not in kinds:
                kinds[where, name], grew = kind, True
    return {key: kind for key, kind in kinds.items() if key[0] and key[1] != "FactorSpecError"}


def test_every_error_lives_in_errors_py_or_is_listed() -> None:
    """Every `FactorSpecError` subclass (private ones included) and every public exception
    class of the package is in ``errors.py`` or in the *Where errors live* table of
    docs/architecture.md, in the module the table gives."""
    listed = {
        name.strip("` "): module.strip("`")
        for names, module, _ in _table("Where errors live")
        for name in names.split(",")
    }
    classes = _exception_classes()
    wrong = [
        f"{where}: {name} ({kind})"
        for (where, name), kind in sorted(classes.items())
        if where != "errors.py"
        and not (kind == "other" and name.startswith("_"))
        and listed.get(name) != where
    ]
    assert not wrong, (
        "move these to factorspec_sdk/errors.py or list them (and why) under 'Where errors "
        "live' in docs/architecture.md:\n" + "\n".join(wrong)
    )
    stale = sorted(
        f"{name} in {where}" for name, where in listed.items() if (where, name) not in classes
    )
    assert not stale, "the table lists exceptions the package does not define:\n" + "\n".join(stale)


def test_nothing_in_the_library_imports_bench() -> None:
    """``bench`` is the benchmark part of the package: only ``bench`` and ``cli`` import it.

    Every import counts, those inside functions (lazy) and under ``if TYPE_CHECKING:``
    included, and so do ``importlib.import_module("factorspec_sdk.bench...")`` calls and the
    package root's ``from factorspec_sdk import bench``.
    """
    wrong: list[str] = []
    for path in _modules():
        if _top(path) in {"bench", "cli"}:
            continue
        where = path.relative_to(ROOT)
        for line, module, names in _imports(path):
            parts = module.split(".")
            if parts[:2] == ["factorspec_sdk", "bench"] or (
                module == "factorspec_sdk" and "bench" in names
            ):
                wrong.append(f"{where}:{line}: imports {module}")
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if (
                isinstance(node, ast.Call)
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and node.args[0].value.split(".")[:2] == ["factorspec_sdk", "bench"]
            ):
                wrong.append(f"{where}:{node.lineno}: loads {node.args[0].value}")
    assert not wrong, "the library imports the benchmarks:\n" + "\n".join(wrong)
