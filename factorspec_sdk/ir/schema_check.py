"""Holding records to the JSON Schema a client sent, with the `jsonschema` package.

One validator serves both sides of the JSON Schema path: `ir_from_json_schema` filters
``enum``/``const`` values and decides where ``null`` may be written with it, and the server
checks every finished record with it (`check_json_schema_record`) before answering. The
dialect follows ``$schema`` (draft 2020-12 when it is absent or unknown) and ``format`` is
asserted with the dialect's format checker, so the check is as strict as `jsonschema` can be.
"""

from __future__ import annotations

import json

import jsonschema
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from factorspec_sdk.ir.limits import IRError
from factorspec_sdk.ir.record import RecordInvalidError

__all__ = ["check_json_schema_record", "json_schema_validator"]


def json_schema_validator(schema: dict[str, object], *, check_schema: bool = True) -> Validator:
    """The `jsonschema` validator of ``schema``: its own dialect, formats asserted.

    Args:
        schema: a JSON Schema document.
        check_schema: first check ``schema`` against its dialect's meta-schema (pure
            Python: ~10 ms for a typical schema, up to seconds for a large one); pass False
            for a schema that `ir_from_json_schema` accepted, which has checked it.

    Raises:
        IRError: ``schema`` is not a valid schema of its dialect, so no validator could
            say what it accepts.
    """
    if not isinstance(schema.get("$schema", ""), str):
        raise IRError("#/$schema: $schema must be a URI string")
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    if check_schema:
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            where = "#" + "".join(f"/{p}" for p in exc.absolute_path)
            raise IRError(
                f"{where}: the JSON schema is not a valid {_dialect(cls)} schema: {exc.message}"
            ) from None
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def check_json_schema_record(validator: Validator, text: str) -> None:
    """Check that ``text`` is one JSON value that ``validator``'s schema accepts.

    Raises:
        RecordInvalidError: ``text`` is not JSON, or the schema rejects it (the message
            names the first failing place of the record and of the schema).
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RecordInvalidError(f"the record is not JSON: {exc}") from None
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        at = "$" + "".join(f"[{p!r}]" for p in error.absolute_path)
        rule = "#" + "".join(f"/{p}" for p in error.absolute_schema_path)
        raise RecordInvalidError(
            f"the record fails the JSON schema at {at} (schema {rule}): {error.message}"
        )


def _dialect(cls: type[Validator]) -> str:
    return cls.__name__.removesuffix("Validator")
