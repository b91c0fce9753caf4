"""The FactorSpec exception tree.

Every error the SDK raises on purpose derives from `FactorSpecError` and carries a stable
`code` (its heading on the *Errors* docs page) plus the evidence needed to fix it::

    FactorSpecError
    ├── SpecError                      the model or its relations cannot be compiled
    │   ├── RelationDefinitionError    a relation uses a construct outside the supported subset
    │   │   └── RelationRaisesError    a relation raises in Python (a TypeError, or on every record)
    │   ├── UnsupportedFieldTypeError  a field type the layout cannot write
    │   ├── ContextError               the per-request context is missing or lacks a value
    │   ├── UnsatisfiableSpecError     no record satisfies the schema and relations (unsat core)
    │   └── IRExportError              a compiled formula uses a Z3 construct the IR cannot express
    ├── IRError                        an IR document is malformed, over a limit or undecided
    ├── OracleError                    the solver could not decide a query (unknown / timeout)
    ├── EngineError                    an engine failed or cannot be loaded
    │   ├── ModelLoadError             the model files cannot be found or converted
    │   └── UpstreamsUnavailableError  the engine tier failed a record on every attempt
    └── GenerationError                decoding could not finish
        ├── IncompleteGenerationError  the token budget ran out; carries the partial text
        │   └── GenerationTimeoutError the server's time limit ran out first
        ├── TokenBudgetError           max_tokens is below the shortest record (before any token)
        ├── RemoteError                a FactorSpec server refused or failed a request
        ├── RetriesExhaustedError      an ordinary validator still fails after every re-ask
        ├── RecordInvalidError         a finished record fails the spec's schema or relations
        └── StreamClosed               the caller closed a stream before the record was complete

The exceptions defined elsewhere in the package are not `FactorSpecError`s a caller sees (or
are private signals inside one module); ``docs/architecture.md`` lists them and says why.
"""

from __future__ import annotations

__all__ = [
    "ContextError",
    "EngineError",
    "FactorSpecError",
    "GenerationError",
    "GenerationTimeoutError",
    "IRError",
    "IRExportError",
    "IncompleteGenerationError",
    "ModelLoadError",
    "OracleError",
    "RecordInvalidError",
    "RelationDefinitionError",
    "RelationRaisesError",
    "RemoteError",
    "RetriesExhaustedError",
    "SpecError",
    "StreamClosed",
    "TokenBudgetError",
    "UnsatisfiableSpecError",
    "UnsupportedFieldTypeError",
    "UpstreamsUnavailableError",
]


class FactorSpecError(Exception):
    """Base of every error FactorSpec raises on purpose."""

    code: str = "factorspec-error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} [{self.code}]"


class SpecError(FactorSpecError):
    """The model, its relations or its context cannot be compiled."""

    code = "spec-error"


class RelationDefinitionError(SpecError):
    """A relation uses a construct outside the supported subset.

    Attributes:
        relation: qualified name of the relation (``Model.method``).
        filename: source file of the relation.
        lineno: line of the offending construct in that file.
        construct: short name of the construct, e.g. ``"while loop"`` or ``"call to open()"``.
    """

    code = "relation-definition"

    def __init__(
        self,
        message: str,
        *,
        relation: str,
        filename: str,
        lineno: int,
        construct: str,
    ) -> None:
        self.relation = relation
        self.filename = filename
        self.lineno = lineno
        self.construct = construct
        super().__init__(f"{filename}:{lineno}: relation {relation!r}: {construct}: {message}")


class RelationRaisesError(RelationDefinitionError):
    """A relation raises when Python evaluates it, so it can never hold where it is reached.

    Raised before any solving, instead of blaming the relation in an unsat core: for an
    operation Python refuses for the types of its operands whenever it is evaluated (a
    ``Decimal`` times a ``float``, a ``time`` plus a ``timedelta``, a ``date`` ordered
    against a ``datetime``), and for a relation that raises on every record the schema
    allows.

    Attributes:
        exception: Python's exception, as ``"TypeError: unsupported operand ..."`` (empty
            when the compiler proved that it raises but no sample record showed which).
    """

    code = "relation-raises"

    def __init__(
        self,
        message: str,
        *,
        relation: str,
        filename: str,
        lineno: int,
        construct: str,
        exception: str,
    ) -> None:
        self.exception = exception
        super().__init__(
            message, relation=relation, filename=filename, lineno=lineno, construct=construct
        )


class UnsupportedFieldTypeError(SpecError):
    """A field's type cannot be laid out as canonical JSON."""

    code = "unsupported-field-type"

    def __init__(self, model: str, field: str, annotation: object, why: str) -> None:
        self.model = model
        self.field = field
        self.annotation = annotation
        super().__init__(f"field {model}.{field} has unsupported type {annotation!r}: {why}")


class ContextError(SpecError):
    """The per-request context is missing or does not have a value a relation reads."""

    code = "context"


class UnsatisfiableSpecError(SpecError):
    """No record satisfies the schema and the relations for this context.

    Attributes:
        core: names of the clashing relations and bounds (an unsat core).
    """

    code = "unsatisfiable-spec"

    def __init__(self, core: list[str], model: str = "") -> None:
        self.core = core
        where = f" for {model}" if model else ""
        names = ", ".join(core) if core else "(empty core: the schema bounds alone clash)"
        super().__init__(f"no record satisfies the spec{where}; clashing: {names}")


class IRExportError(SpecError):
    """A compiled formula uses a Z3 construct the IR cannot express (`factorspec_sdk.ir.to_ir`)."""

    code = "ir-export"


class IRError(FactorSpecError):
    """The IR is malformed, exceeds a limit or cannot be decided (``status``: the HTTP status).

    ``status`` is 400 when the document does not match the IR's JSON schema
    (`factorspec_sdk.ir.limits.parse_ir`), and 422 when it does but cannot be built: it breaks
    a rule the schema cannot state (an unknown variable, a repeated name, a limit) or the
    solver cannot decide it in time (``undecided``: such an answer is not cached, the next
    request tries again).
    """

    code = "ir"

    def __init__(self, message: str, status: int = 422, *, undecided: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.undecided = undecided


class OracleError(FactorSpecError):
    """The solver could not decide a feasibility query."""

    code = "oracle"


class EngineError(FactorSpecError):
    """An engine failed, or is not installed."""

    code = "engine"


class ModelLoadError(EngineError):
    """The model files cannot be found, read or converted."""

    code = "model-load"


class UpstreamsUnavailableError(EngineError):
    """The engine tier failed a record on every attempt (`factorspec_sdk.backends.upstreams`).

    Behind ``factorspec serve --upstream URL`` a record a server fails under is restarted; this
    is the error once the restarts failed too (no server behind the router finished it).

    Attributes:
        upstreams: the upstream's URL and the last error it gave (None if it gave none).
    """

    code = "upstreams-unavailable"

    def __init__(self, message: str, upstreams: dict[str, str | None] | None = None) -> None:
        super().__init__(message)
        self.upstreams = dict(upstreams or {})


class GenerationError(FactorSpecError):
    """Decoding could not finish."""

    code = "generation"


class IncompleteGenerationError(GenerationError):
    """The token budget ran out before the record was complete.

    Attributes:
        partial_text: the canonical JSON written so far (a prefix of a valid record).
        tokens: number of tokens generated.
    """

    code = "incomplete-generation"

    def __init__(self, message: str, *, partial_text: str, tokens: int) -> None:
        self.partial_text = partial_text
        self.tokens = tokens
        super().__init__(f"{message} after {tokens} tokens; partial text: {partial_text[-200:]!r}")


class GenerationTimeoutError(IncompleteGenerationError):
    """A server's time limit ran out before the record was complete.

    ``factorspec serve`` answers such a record with a 422 ``timeout_reached``, never with the
    cut text as content. An `IncompleteGenerationError` whose fix is more time, not more
    tokens.

    Attributes:
        timeout_s: the limit, in seconds (the request's ``factorspec.timeout_s``, else the
            server's ``--request-timeout``); None when the server did not say.
    """

    code = "generation-timeout"

    def __init__(
        self, message: str, *, partial_text: str, tokens: int, timeout_s: float | None
    ) -> None:
        self.timeout_s = timeout_s
        super().__init__(message, partial_text=partial_text, tokens=tokens)


class TokenBudgetError(GenerationError):
    """``max_tokens`` is below the shortest record of the spec; raised before any token.

    With a token budget, FactorSpec masks every token after which the record could not be
    finished within the budget, so a record either fits or is refused up front.

    Attributes:
        max_tokens: the budget asked for.
        min_tokens: tokens of the shortest record FactorSpec guarantees to finish (in this
            tokenizer's tokens); the least ``max_tokens`` that works.
    """

    code = "token-budget"

    def __init__(self, *, max_tokens: int, min_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        super().__init__(
            f"max_tokens={max_tokens} is below the shortest record of this spec, which takes "
            f"{min_tokens} tokens of this tokenizer; give max_tokens >= {min_tokens}"
        )


class RemoteError(GenerationError):
    """A FactorSpec server refused or failed a request.

    Attributes:
        status: the server's HTTP status (None when no answer came).
    """

    code = "remote"

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RetriesExhaustedError(GenerationError):
    """An ordinary Pydantic validator still rejects the record after every re-ask.

    Raised by `factorspec_sdk.from_openai` clients (Instructor's ``max_retries``). The schema
    and the relations are guaranteed by the server; only validators the compiler does not
    take (a ``@field_validator``, a ``@model_validator``) can fail, and each failure is sent
    back to the model, naming the validator, until the retries run out.

    Attributes:
        attempts: requests made.
        last_text: the last record's JSON text.
        last_error: the ``pydantic.ValidationError`` of the last record.
        last_completion: the last raw ``ChatCompletion``.
    """

    code = "retries-exhausted"

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        last_text: str,
        last_error: Exception,
        last_completion: object,
    ) -> None:
        self.attempts = attempts
        self.last_text = last_text
        self.last_error = last_error
        self.last_completion = last_completion
        super().__init__(message)


class RecordInvalidError(GenerationError):
    """A record does not pass the spec's schema or relations (`factorspec_sdk.ir.check_record`)."""

    code = "record-invalid"


class StreamClosed(GenerationError):
    """The caller closed the stream before the record was complete (`factorspec_sdk.streams`)."""
