"""FactorSpec SDK: structured outputs that always satisfy schema and relations.

``import factorspec_sdk`` stays light: torch, transformers, vLLM and the server are imported
only when an engine or the server is created; `from_openai` (Instructor's call shape,
`factorspec_sdk.integrations.openai_compat`) and `from_transformers` (an engine on a model
you loaded, `factorspec_sdk.engines.embedded`) are imported on first use.
"""

from typing import TYPE_CHECKING, Any

from factorspec_sdk.client import AsyncClient as AsyncClient
from factorspec_sdk.client import Client as Client
from factorspec_sdk.client import GenerationResult as GenerationResult
from factorspec_sdk.drafter.loop import GenerationStats as GenerationStats
from factorspec_sdk.drafter.verify import SamplingParams as SamplingParams
from factorspec_sdk.errors import (
    ContextError as ContextError,
)
from factorspec_sdk.errors import (
    EngineError as EngineError,
)
from factorspec_sdk.errors import (
    FactorSpecError as FactorSpecError,
)
from factorspec_sdk.errors import (
    GenerationError as GenerationError,
)
from factorspec_sdk.errors import (
    GenerationTimeoutError as GenerationTimeoutError,
)
from factorspec_sdk.errors import (
    IncompleteGenerationError as IncompleteGenerationError,
)
from factorspec_sdk.errors import (
    ModelLoadError as ModelLoadError,
)
from factorspec_sdk.errors import (
    OracleError as OracleError,
)
from factorspec_sdk.errors import (
    RelationDefinitionError as RelationDefinitionError,
)
from factorspec_sdk.errors import (
    RelationRaisesError as RelationRaisesError,
)
from factorspec_sdk.errors import (
    RemoteError as RemoteError,
)
from factorspec_sdk.errors import (
    RetriesExhaustedError as RetriesExhaustedError,
)
from factorspec_sdk.errors import (
    SpecError as SpecError,
)
from factorspec_sdk.errors import (
    StreamClosed as StreamClosed,
)
from factorspec_sdk.errors import (
    TokenBudgetError as TokenBudgetError,
)
from factorspec_sdk.errors import (
    UnsatisfiableSpecError as UnsatisfiableSpecError,
)
from factorspec_sdk.errors import (
    UnsupportedFieldTypeError as UnsupportedFieldTypeError,
)
from factorspec_sdk.errors import (
    UpstreamsUnavailableError as UpstreamsUnavailableError,
)
from factorspec_sdk.partials import partial_model as partial_model
from factorspec_sdk.provenance import Provenance as Provenance
from factorspec_sdk.provenance import Source as Source
from factorspec_sdk.relations.decorator import distinct as distinct
from factorspec_sdk.relations.decorator import relation as relation
from factorspec_sdk.relations.decorator import relations_of as relations_of
from factorspec_sdk.relations.floats import Places as Places
from factorspec_sdk.relations.schema import PlainJsonSchema as PlainJsonSchema
from factorspec_sdk.relations.schema import plain_json_schema as plain_json_schema
from factorspec_sdk.relations.schema import set_schema_extension
from factorspec_sdk.streams import AsyncRecordStream as AsyncRecordStream
from factorspec_sdk.streams import RecordStream as RecordStream

if TYPE_CHECKING:
    from pydantic import BaseModel

    from factorspec_sdk.engines.embedded import from_transformers as from_transformers
    from factorspec_sdk.integrations.openai_compat import from_openai as from_openai

__version__ = "0.1.0"


def _schema_extension(model: type["BaseModel"]) -> dict[str, Any]:
    """What a model's JSON schema carries under ``x-factorspec`` (`factorspec_sdk.ir.carrier`).

    Registered here because ``relations`` sit below ``ir`` in the layering, and every import
    of ``factorspec_sdk.relations`` runs this module first; ``ir`` (and Z3) is imported on the
    first schema of a model with relations.
    """
    from factorspec_sdk.ir.carrier import schema_extension

    return schema_extension(model)


set_schema_extension(_schema_extension)

__all__ = [
    "AsyncClient",
    "AsyncRecordStream",
    "Client",
    "ContextError",
    "EngineError",
    "FactorSpecError",
    "GenerationError",
    "GenerationResult",
    "GenerationStats",
    "GenerationTimeoutError",
    "IncompleteGenerationError",
    "ModelLoadError",
    "OracleError",
    "Places",
    "PlainJsonSchema",
    "Provenance",
    "RecordStream",
    "RelationDefinitionError",
    "RelationRaisesError",
    "RemoteError",
    "RetriesExhaustedError",
    "SamplingParams",
    "Source",
    "SpecError",
    "StreamClosed",
    "TokenBudgetError",
    "UnsatisfiableSpecError",
    "UnsupportedFieldTypeError",
    "UpstreamsUnavailableError",
    "__version__",
    "distinct",
    "from_openai",
    "from_transformers",
    "partial_model",
    "plain_json_schema",
    "relation",
    "relations_of",
]


def __getattr__(name: str) -> object:
    # the names imported on first use, so that `import factorspec_sdk` stays light
    if name == "from_openai":
        from factorspec_sdk.integrations.openai_compat import from_openai

        return from_openai
    if name == "from_transformers":
        from factorspec_sdk.engines.embedded import from_transformers

        return from_transformers
    raise AttributeError(f"module 'factorspec_sdk' has no attribute {name!r}")
