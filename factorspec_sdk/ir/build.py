"""The relation-IR front end of the spec back end: validate, check limits, rebuild Z3 terms.

Nothing in the IR is executed: the expression trees are read node by node against an
allowlist of operators and rebuilt as Z3 terms in a private Z3 context (one per spec, so that
specs built in different threads never share a context; `factorspec_sdk.ir.expressions`).
The layout is built with the same constructors as a Pydantic model's
(`factorspec_sdk.ir.layout`), and bounds and domains of variables and their existence
conditions are *derived from the layout* with the relation compiler's own derivation
(`factorspec_sdk.ir.variables`), never taken from the sender; only relation formulas come
from the IR. The variables and relation formulas then go to the same assembly as
`compile_spec`'s (`factorspec_sdk.graph.assemble.assemble_spec`: schema factors, components,
checks), so both entry points give the same spec, unsat cores and errors. What the checks of
each document found is kept by the `IRCompiler` that built it (`DEFAULT_IR_COMPILER` for the
module-level `spec_from_ir`).
"""

from __future__ import annotations

import hashlib
import json
import marshal
import time
from dataclasses import dataclass

import z3

from factorspec_sdk.errors import FactorSpecError, OracleError, SpecError
from factorspec_sdk.graph.assemble import RelationFactor, assemble_spec, schema_factor_name
from factorspec_sdk.graph.cache import SpecCache
from factorspec_sdk.graph.compiled import CompiledSpec, Traits
from factorspec_sdk.graph.z3context import private_context
from factorspec_sdk.graph.z3raw import Node, TermBuilder
from factorspec_sdk.ir.expressions import ExprBuilder
from factorspec_sdk.ir.jsonschema import ir_from_json_schema
from factorspec_sdk.ir.layout import build_ir_layout, root_model
from factorspec_sdk.ir.limits import DEFAULT_LIMITS, IRError, IRLimits, parse_ir
from factorspec_sdk.ir.model import RelationIR
from factorspec_sdk.ir.variables import IRVariableSpec, derive_variable
from factorspec_sdk.relations.compiler import InternTable, VarRecord, date_links
from factorspec_sdk.relations.decorator import RelationSet
from factorspec_sdk.relations.kinds import BOOL_KINDS
from factorspec_sdk.relations.layout import (
    ObjectLayout,
    Path,
    RootLayout,
    UnionLayout,
    branch_name,
    is_branch_part,
    length_name,
    node_at,
    path_name,
)

__all__ = [
    "DEFAULT_IR_COMPILER",
    "DEFAULT_MAX_SPECS",
    "CheckedIR",
    "IRCompiler",
    "ir_digest",
    "spec_from_ir",
]


@dataclass(slots=True)
class CheckedIR:
    """What the checks of one IR document found (the entries of `IRCompiler.documents`).

    Attributes:
        ir: the parsed document.
        layout: its layout.
        list_bounds: the list bounds the checks found (None: not checked yet).
        determined: what the checks found each component determines
            (`Component.determined`, in component order; None: not checked yet).
        error: the error the document raised (a malformed IR or an unsatisfiable spec);
            an undecided check is not kept, the next request tries again.
        traits: the components' `Traits`, which every spec rebuilt from the document
            shares (in component order; None: none built yet). An oracle's first solver of
            a component finds them (a walk of its constraints: 5-15 ms a trip component,
            about a tenth of a served trip's CPU when each request found them again).
    """

    ir: RelationIR
    layout: RootLayout
    list_bounds: dict[Path, int] | None = None
    determined: list[dict[str, int | bool] | None] | None = None
    error: FactorSpecError | None = None
    traits: list[Traits] | None = None

    def share_traits(self, spec: CompiledSpec) -> None:
        """Give ``spec``'s components the traits of the document's earlier specs (or keep its)."""
        comps = [spec.component(i) for i in range(len(spec.components))]
        if self.traits is None or len(self.traits) != len(comps):
            self.traits = [c.traits for c in comps]
        else:
            for comp, traits in zip(comps, self.traits, strict=True):
                comp.traits = traits


def _layout(
    ir: RelationIR,
    data: object,
    limits: IRLimits,
    layouts: SpecCache[tuple[str, IRLimits], RootLayout],
) -> RootLayout:
    """The layout of a parsed document, from ``layouts`` when one with its key is there."""
    key = None
    if isinstance(data, dict):
        doc = _document_key(data.get("layout"))
        key = None if doc is None else (doc, limits)
    layout = layouts.get(key) if key is not None else None
    if layout is None:
        layout = build_ir_layout(ir, limits)
        if key is not None:
            layouts.put(key, layout)
    return layout


def ir_digest(data: object) -> str:
    """A stable digest of an IR document: the same for equal documents, in any key order."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _document_key(data: object) -> str | None:
    """The cache key of a parsed JSON value (`IRCompiler`'s caches); None: not plain JSON.

    The SHA-256 of its ``marshal`` serialization (format 2, which writes every value out,
    with no back-references): a third of `ir_digest`'s canonical JSON, which every server
    request paid. Equal values with their keys in the same order get equal keys; a document
    whose keys come in another order gets another key, a cache miss, never a wrong hit.
    """
    try:
        written = marshal.dumps(data, 2)  # type: ignore[arg-type]  # raises on what it can't
        return hashlib.sha256(written).hexdigest()
    except (ValueError, TypeError, RecursionError):  # a value marshal does not write
        return None


DEFAULT_MAX_SPECS = 16
"""The specs an `IRCompiler` keeps unless told otherwise (``max_specs``): about 256 MB of Z3
contexts at most."""


class IRCompiler:
    """Builds `CompiledSpec` objects from relation IR documents, and keeps what it found.

    The IR front end's counterpart of `factorspec_sdk.graph.SpecCompiler`: as XGrammar's
    ``GrammarCompiler`` owns its cache of compiled grammars, the compiler owns what the
    checks of each document found, so two compilers share nothing. A server owns one
    (`factorspec_sdk.server.app.create_app`'s ``ir_compiler``), or shares
    `DEFAULT_IR_COMPILER` (what the module-level `spec_from_ir` uses).

    Args:
        max_documents: the most documents kept (``documents``).
        max_layouts: the most layouts kept (``layouts``).
        max_specs: the most built specs kept (``specs``); 0 keeps none, and every call
            builds its spec afresh. Each spec holds a private Z3 context (about 16 MB), so
            this bounds the memory the cache holds: 16 specs, about 256 MB.
        max_schemas: the most JSON schemas' IR documents kept (``schemas``).

    Attributes:
        specs: the specs built, by the document's key, the limits and the solver's time
            limit: an LRU (None: ``max_specs`` 0). A hit is the spec an earlier request
            built, as `factorspec_sdk.graph.SpecCompiler` hands one spec of a model and
            context to every call: a spec is shared by design (its oracles copy its terms
            under its `CompiledSpec.context_lock`, and what they find of its components is
            written under it too). A server's requests for one document (one response
            schema, one tool, one relation IR with its context) build it once.
        schemas: the IR documents `ir_from_json_schema` made, by a key of the schema, the
            record's name and the limits: an LRU. A server's requests that send one
            response schema, or one tool's parameters, convert it once (the conversion and
            its meta-schema check take milliseconds a schema, up to tens of them).
        documents: what `spec_from_ir` found for each IR document, by a key of the
            document: an LRU. A hit skips parsing, the layout and the satisfiability
            checks, and keeps what they found each component determines (a spec no longer
            in ``specs``, or built under another time limit, rebuilds its Z3 terms in a
            fresh context).
        layouts: layouts by a key of their IR (and the limits they were checked under): an
            LRU. Requests for one record type send one layout with different relations
            and constants (a trip's cities, stays and flights); building a layout makes its
            pydantic models, the larger part of a new document's cost.
    """

    def __init__(
        self,
        *,
        max_documents: int = 128,
        max_layouts: int = 64,
        max_specs: int = DEFAULT_MAX_SPECS,
        max_schemas: int = 128,
    ) -> None:
        if max_specs < 0:
            raise ValueError(f"max_specs must be >= 0, got {max_specs}")
        self.schemas: SpecCache[tuple[str, str, IRLimits], bytes] = SpecCache(max_size=max_schemas)
        self.documents: SpecCache[str, CheckedIR] = SpecCache(max_size=max_documents)
        self.layouts: SpecCache[tuple[str, IRLimits], RootLayout] = SpecCache(max_size=max_layouts)
        self.specs: SpecCache[tuple[str, IRLimits, int | None], CompiledSpec] | None = (
            SpecCache(max_size=max_specs) if max_specs else None
        )

    def spec_from_ir(
        self,
        data: object,
        limits: IRLimits = DEFAULT_LIMITS,
        *,
        digest: str | None = None,
        solver_timeout_ms: int | None = None,
    ) -> CompiledSpec:
        """Rebuild a `CompiledSpec` from an IR document (a parsed JSON value or `RelationIR`).

        The spec behaves as the one the IR was exported from: same layout, variables,
        factors, components, list bounds, feasible sets and unsat cores. Its ``model`` is a
        pydantic model built from the layout (structure and bounds); `check_record` checks
        the relations too. A document built before (under the same limits and time limit)
        answers the spec it built then, from ``specs``; a new one is built in a private Z3
        context, its satisfiability checks cached per IR document in ``documents`` (a check
        that ran out of time is not: it is tried again). The spec may be used from any
        thread: whoever reads its terms holds its ``context_lock``.
        ``limits.solver_timeout_ms`` bounds each check here; ``solver_timeout_ms`` bounds
        each query of the spec's oracles (`CompiledSpec`).

        Raises:
            IRError: a malformed IR, a limit exceeded, or a spec the solver cannot decide in
                time.
            UnsatisfiableSpecError: no record satisfies the spec (the core names the IR's
                factors).
            SpecError: a list needs more items than its bound, or a str read by a relation
                has no finite domain.
        """
        key = digest
        if key is None and not isinstance(data, RelationIR):
            key = _document_key(data)
        spec_key = None if key is None else (key, limits, solver_timeout_ms)
        if spec_key is not None and self.specs is not None:
            built = self.specs.get(spec_key)
            if built is not None:
                return built
        checked = self.documents.get(key) if key is not None else None
        if checked is None:
            ir = parse_ir(data, limits)
            checked = CheckedIR(ir, _layout(ir, data, limits, self.layouts))
        if checked.error is not None:
            raise checked.error
        try:
            spec = _build(checked, limits, solver_timeout_ms)
            checked.share_traits(spec)
            if checked.list_bounds is None:
                checked.list_bounds = dict(spec.list_bounds)
                checked.determined = spec.determined
            if spec_key is not None and self.specs is not None:
                self.specs.put(spec_key, spec)
            return spec
        except (IRError, SpecError) as exc:
            if not (isinstance(exc, IRError) and exc.undecided):
                checked.error = exc
            raise
        finally:
            if key is not None:
                self.documents.put(key, checked)

    def ir_from_json_schema(
        self, schema: object, *, name: str = "Record", limits: IRLimits = DEFAULT_LIMITS
    ) -> dict[str, object]:
        """`factorspec_sdk.ir.ir_from_json_schema`, kept per schema in ``schemas``.

        A schema converted before (with the same name and limits) answers a copy of its IR
        document, so a caller may change what it gets. Errors are not kept: a schema the
        conversion refuses is converted (and refused) again.

        Raises:
            IRError: as `factorspec_sdk.ir.ir_from_json_schema`.
        """
        doc = _document_key(schema)
        if doc is None:
            return ir_from_json_schema(schema, name=name, limits=limits)
        key = (doc, name, limits)
        kept = self.schemas.get(key)
        if kept is None:
            ir = ir_from_json_schema(schema, name=name, limits=limits)
            try:
                kept = marshal.dumps(ir, 2)
            except (ValueError, RecursionError):  # nested past marshal's depth: not kept
                return ir
            self.schemas.put(key, kept)
        copy: dict[str, object] = marshal.loads(kept)
        return copy

    def clear(self) -> None:
        """Forget every spec, schema, document and layout (the counters stay)."""
        if self.specs is not None:
            self.specs.clear()
        self.schemas.clear()
        self.documents.clear()
        self.layouts.clear()

    def __repr__(self) -> str:
        return (
            f"IRCompiler(specs={self.specs!r}, schemas={self.schemas!r}, "
            f"documents={self.documents!r}, layouts={self.layouts!r})"
        )


DEFAULT_IR_COMPILER = IRCompiler()
"""The compiler that the module-level `spec_from_ir` uses, and a server given none.

One shared instance: a program that wants documents of its own (a second server in one
process, a test, a benchmark that wants each document cold) makes an `IRCompiler`.
"""


def spec_from_ir(
    data: object,
    limits: IRLimits = DEFAULT_LIMITS,
    *,
    digest: str | None = None,
    solver_timeout_ms: int | None = None,
) -> CompiledSpec:
    """`IRCompiler.spec_from_ir` of `DEFAULT_IR_COMPILER` (see there).

    Raises:
        IRError: a malformed IR, a limit exceeded, or a spec the solver cannot decide in time.
        UnsatisfiableSpecError: no record satisfies the spec (the core names the IR's factors).
        SpecError: a list needs more items than its bound, or a str read by a relation has no
            finite domain.
    """
    return DEFAULT_IR_COMPILER.spec_from_ir(
        data, limits, digest=digest, solver_timeout_ms=solver_timeout_ms
    )


def _build(checked: CheckedIR, limits: IRLimits, solver_timeout_ms: int | None) -> CompiledSpec:
    """Validate the IR against the layout and limits, build its Z3 terms, assemble the spec."""
    t0 = time.perf_counter()
    ir, layout = checked.ir, checked.layout
    lim = limits
    if len(ir.variables) > lim.max_variables:
        raise IRError(f"more than {lim.max_variables} variables")
    if len(ir.factors) > lim.max_factors:
        raise IRError(f"more than {lim.max_factors} factors")
    if len(ir.defs) > lim.max_defs:
        raise IRError(f"more than {lim.max_defs} defs")
    if len(ir.strings) > lim.max_strings:
        raise IRError(f"more than {lim.max_strings} strings")
    strings = InternTable()
    for text in ir.strings:
        if len(text) > lim.max_string_length:
            raise IRError(f"a string of the table is longer than {lim.max_string_length}")
        if text in strings.codes:
            raise IRError(f"the string table repeats {text!r}")
        strings.code(text)

    ctx = private_context()
    specs: dict[str, IRVariableSpec] = {}
    for v in ir.variables:
        if v.name in specs:
            raise IRError(f"variable {v.name!r} is declared twice")
        other = None if v.other is None else tuple(v.other)
        specs[v.name] = derive_variable(layout, v.name, tuple(v.path), v.kind, other, v.text)
    is_bool = {n: s.shape.kind in BOOL_KINDS for n, s in specs.items()}
    relation_factors: list[RelationFactor] = []
    with TermBuilder(ctx) as tb:
        nodes = {n: tb.const(n, boolean=b) for n, b in is_bool.items()}
        terms: dict[str, z3.ExprRef] = {
            n: tb.wrap(node) if is_bool[n] else tb.wrap_int(node) for n, node in nodes.items()
        }
        records: dict[str, VarRecord] = {}
        for n, s in specs.items():
            for c in s.shape.choices or ():
                if isinstance(c, str) and c not in strings.codes:
                    raise IRError(f"variable {n!r}: choice {c!r} is missing from the string table")
            exists = _exists(tb, layout, s.path, nodes, n)
            if s.other is not None:
                second = _exists(tb, layout, s.other, nodes, n)
                exists = (
                    second
                    if exists is None
                    else exists
                    if second is None
                    else tb.app("and", [exists, second])
                )
            records[n] = VarRecord(
                n,
                s.path,
                s.shape.kind,
                terms[n],
                s.shape.ge,
                s.shape.le,
                s.shape.choices,
                s.shape.free_str,
                True if exists is None else tb.wrap(exists),
                s.shape.enum_type,
                s.other,
                s.affix,
            )
        # the IR's factor names are the relation names; they may not take a schema factor's
        # name, nor a derived tie's (the server ties each date's parts to it itself)
        ties = date_links(records)
        schema_names = {schema_factor_name(rec) for rec in records.values()}
        schema_names |= {name for name, _, _ in ties}

        names: set[str] = set()
        eb = ExprBuilder(tb, nodes, is_bool, lim)
        for i, d in enumerate(ir.defs):
            eb.used = set()
            eb.defs.append(eb.build(d, f"defs[{i}]"))
            eb.def_vars.append(frozenset(eb.used))
        for i, f in enumerate(ir.factors):
            if f.name in names or f.name in schema_names:
                raise IRError(f"factor name {f.name!r} repeats")
            if len(f.name) > lim.max_string_length:
                raise IRError(f"factors[{i}]: the name is longer than {lim.max_string_length}")
            names.add(f.name)
            eb.used = set()
            formula = eb.formula(f.formula, f"factors[{i}] ({f.name})")
            unknown = [v for v in f.variables if v not in terms]
            if unknown:
                raise IRError(f"factors[{i}] ({f.name}): unknown variables {unknown[:5]}")
            variables = frozenset(f.variables) | eb.used
            scope = None if f.scope is None else tuple(f.scope)
            if scope is not None:
                outside = sorted(v for v in variables if not _under(records[v], scope))
                if outside:
                    raise IRError(
                        f"factors[{i}] ({f.name}): variable {outside[0]!r} is not at or under "
                        f"its scope {path_name(scope)}"
                    )
            relation_factors.append(RelationFactor(f.name, variables, formula, scope))
    relation_factors += [RelationFactor(n, vs, f) for n, vs, f in ties]
    model = layout.model if isinstance(layout, ObjectLayout) else root_model(ir.name, layout)
    try:
        return assemble_spec(
            name=ir.name,
            model=model,
            layout=layout,
            relations=RelationSet(model, ()),
            context=None,
            records=records,
            strings=strings,
            relation_factors=relation_factors,
            ctx=ctx,
            check_timeout_ms=lim.solver_timeout_ms,
            list_bounds=checked.list_bounds,
            determined=checked.determined,
            solver_timeout_ms=solver_timeout_ms,
            started=t0,
        )
    except OracleError as exc:
        raise IRError(exc.message, status=422, undecided=True) from None


def _under(rec: VarRecord, scope: Path) -> bool:
    """Whether a variable lies at or under ``scope`` (a ``same`` variable: both its paths)."""
    return all(p[: len(scope)] == scope for p in (rec.path, rec.other) if p is not None)


def _exists(
    tb: TermBuilder, layout: RootLayout, path: Path, nodes: dict[str, Node], name: str
) -> Node | None:
    """When the item at ``path`` exists: enclosing lists long enough, unions on its branch.

    None: always (a node of the record's top level).
    """
    conds: list[Node] = []
    for k, part in enumerate(path):
        if isinstance(part, int):
            ln = length_name(path[:k])
            t = nodes.get(ln)
            if t is None:
                raise IRError(f"variable {name!r} lies in a list whose length {ln!r} is undeclared")
            conds.append(tb.app("gt", [t, tb.int(part)]))
        elif is_branch_part(part):
            union = node_at(layout, path[:k])
            assert isinstance(union, UnionLayout)  # `derive_variable` found the path
            bn = branch_name(path[:k])
            t = nodes.get(bn)
            if t is None:
                raise IRError(
                    f"variable {name!r} lies in a union whose branch {bn!r} is undeclared"
                )
            conds.append(tb.app("eq", [t, tb.int(union.branch(part)[0])]))
    return tb.conj(conds) if conds else None
