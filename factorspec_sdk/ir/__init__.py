"""The relation IR: a compiled spec as JSON data (``"factorspec_ir": 1``), never code.

A client builds it from a Pydantic model, its ``@relation`` methods and the per-request
context (`to_ir`); a server rebuilds a `CompiledSpec` from it (`IRCompiler.spec_from_ir`; the
module-level `spec_from_ir` uses `DEFAULT_IR_COMPILER`) without any Python relation, and
checks finished records with `check_record`. `ir_from_json_schema` converts a JSON Schema to
a relation-free IR, and `check_json_schema_record` holds a record to that schema with
`jsonschema`. `IR_JSON_SCHEMA` is the JSON Schema of the format, generated
from the pydantic models in `factorspec_sdk.ir.model`.

Format (version 1)::

    {
      "factorspec_ir": 1,
      "name": "Itinerary",
      "layout": {"type": "object", "name": "Itinerary", "fields": [
          {"name": "stays", "key": "stays", "node": {"type": "list", "min_length": 0,
           "max_length": 10, "bounded_by_schema": true, "item": {...}}}, ...]},
      "strings": ["Paris", "Rome"],              # intern table: code i + 1 (0 = any other)
      "variables": [{"name": "len(stays)", "path": ["stays"], "kind": "len"},
                    {"name": "stays[0].city", "path": ["stays", 0, "city"], "kind": "str"}],
      "defs": [{"op": "gt", "args": [{"var": "len(stays)"}, {"int": 0}]}],
      "factors": [{"name": "visits_every_city_once", "variables": [...],
                   "formula": {"op": "and", "args": [{"def": 0}, ...]}}]
    }

Expressions are objects with one key: ``{"var": name}``, ``{"int": n}``, ``{"bool": b}``,
``{"def": i}`` (a shared subterm; a def may only use earlier defs) or ``{"op": op, "args":
[...]}`` with ``op`` among and, or, not, implies, ite, eq, distinct, le, lt, ge, gt, add, sub,
mul, div, mod, neg (Z3 semantics: ``div``/``mod`` are integer division and modulo). Strings
and Enum/Literal str values are integer codes into ``strings``. The context of the relations
is folded in: its values are constants of the formulas.

Only relation factors travel: the bounds of each variable, its domain, the condition that it
exists (its enclosing lists are long enough) and the length bounds of lists follow from the
layout and are derived by the reader with the compiler's own code
(`factorspec_sdk.relations.variables`; factor names ``bounds of x`` and ``length bounds of
xs``), so unsat cores name the same factors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from factorspec_sdk.ir.build import (
    DEFAULT_IR_COMPILER,
    DEFAULT_MAX_SPECS,
    IRCompiler,
    ir_digest,
    spec_from_ir,
)
from factorspec_sdk.ir.export import IRExportError, spec_to_ir, to_ir
from factorspec_sdk.ir.jsonschema import ir_from_json_schema
from factorspec_sdk.ir.limits import IRError, IRLimits, json_depth, parse_ir
from factorspec_sdk.ir.model import IR_VERSION, RelationIR
from factorspec_sdk.ir.record import RecordInvalidError, check_record, record_facts
from factorspec_sdk.ir.schema_check import check_json_schema_record, json_schema_validator

if TYPE_CHECKING:
    from factorspec_sdk.graph.compiled import CompiledSpec as CompiledSpec

__all__ = [
    "DEFAULT_IR_COMPILER",
    "DEFAULT_MAX_SPECS",
    "IR_JSON_SCHEMA",
    "IR_VERSION",
    "IRCompiler",
    "IRError",
    "IRExportError",
    "IRLimits",
    "RecordInvalidError",
    "RelationIR",
    "check_json_schema_record",
    "check_record",
    "ir_digest",
    "ir_from_json_schema",
    "json_depth",
    "json_schema_validator",
    "parse_ir",
    "record_facts",
    "spec_from_ir",
    "spec_to_ir",
    "to_ir",
]

IR_JSON_SCHEMA: dict[str, object] = RelationIR.model_json_schema(by_alias=True)
"""The JSON Schema of the relation IR (draft 2020-12), generated from the pydantic models."""
