"""The relation IR's parsing and limits: what a document may ask for, checked up front.

`parse_ir` checks a document's shape against the IR's models (`factorspec_sdk.ir.model`)
and its nesting; `IRLimits` bounds everything else a document may ask for (variables,
factors, layout nodes, list bounds, string lengths, the solver's time). Every violation is an
`IRError`, a 4xx on a server.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from factorspec_sdk.errors import IRError
from factorspec_sdk.ir.model import RelationIR

__all__ = ["DEFAULT_LIMITS", "IRError", "IRLimits", "json_depth", "parse_ir"]


@dataclass(frozen=True, slots=True)
class IRLimits:
    """Limits on what an IR may ask for (each violation is an `IRError`, a 4xx on a server).

    Attributes:
        max_json_depth: deepest nesting of JSON arrays/objects in the IR document.
        max_expr_depth: deepest inline expression tree (shared subterms go to ``defs``).
        max_expr_nodes: expression nodes in all of ``defs`` and ``factors``.
        max_variables: solver variables.
        max_factors: relation factors.
        max_defs: shared subterms.
        max_strings: entries of the string table.
        max_string_length: characters of one string (table entries, names, choices).
        max_layout_nodes: layout nodes, before unrolling lists.
        max_unrolled_nodes: layout nodes after unrolling every list to its bound.
        max_layout_depth: deepest layout nesting.
        max_list_length: largest list bound.
        max_choices: values of one enum leaf.
        max_text_length: largest ``min_length``/``max_length`` of a free string.
        max_unique_work: most values times items of a JSON Schema's ``uniqueItems`` list
            whose items have at most 64 values (`factorspec_sdk.ir.jsonschema`): the
            writer's solver work grows with both (16 items of 16 values: ~5 s a record on a
            2-core machine; 8 of 8: 0.2 s), so beyond it the list holds fewer items than the
            schema allows, ``minItems`` at least.
        max_int: largest magnitude of an integer constant in a formula (``2**128``: a
            UUID's 128-bit value, ``uuid.UUID.int``, is one).
        solver_timeout_ms: time the satisfiability checks of one spec may take.
    """

    max_json_depth: int = 200
    max_expr_depth: int = 64
    max_expr_nodes: int = 500_000
    max_variables: int = 4096
    max_factors: int = 2048
    max_defs: int = 200_000
    max_strings: int = 4096
    max_string_length: int = 1024
    max_layout_nodes: int = 2048
    max_unrolled_nodes: int = 50_000
    max_layout_depth: int = 32
    max_list_length: int = 256
    max_choices: int = 1024
    max_text_length: int = 100_000
    max_unique_work: int = 256
    max_int: int = 2**128
    solver_timeout_ms: int = 20_000


DEFAULT_LIMITS = IRLimits()


def json_depth(value: object, limit: int) -> int:
    """Nesting depth of a JSON value (level by level); stops counting past ``limit + 1``."""
    deepest = 0
    level: list[object] = [value]
    while level:
        below: list[object] = []
        containers = False
        for v in level:
            if isinstance(v, dict):
                below.extend(v.values())
                containers = True
            elif isinstance(v, list):
                below.extend(v)
                containers = True
        if not containers:
            break
        deepest += 1
        if deepest > limit:
            break
        level = below
    return deepest


def _validation_message(exc: ValidationError, what: str) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc or '<root>'}: {err['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return f"invalid {what}: " + "; ".join(parts) + more


def parse_ir(data: object, limits: IRLimits = DEFAULT_LIMITS) -> RelationIR:
    """Validate the shape of an IR document (a parsed JSON value) against the IR models."""
    if isinstance(data, RelationIR):
        return data
    if not isinstance(data, dict):
        raise IRError("the relation IR must be a JSON object", status=400)
    if data.get("factorspec_ir") != 1:
        raise IRError(
            f"unsupported relation IR version {data.get('factorspec_ir')!r}; this server reads "
            '"factorspec_ir": 1',
            status=400,
        )
    if json_depth(data, limits.max_json_depth) > limits.max_json_depth:
        raise IRError(f"the relation IR nests deeper than {limits.max_json_depth} levels")
    try:
        return RelationIR.model_validate(data)
    except ValidationError as exc:
        raise IRError(_validation_message(exc, "relation IR"), status=400) from None
    except RecursionError:
        raise IRError("the relation IR nests too deeply") from None
