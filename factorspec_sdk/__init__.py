"""FactorSpec SDK: structured outputs that always satisfy schema and relations.

``import factorspec_sdk`` stays light: torch, transformers, vLLM and the server are imported
only when an engine or the server is created.
"""

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
    RemoteError as RemoteError,
)
from factorspec_sdk.errors import (
    SpecError as SpecError,
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
from factorspec_sdk.relations.decorator import distinct as distinct
from factorspec_sdk.relations.decorator import relation as relation
from factorspec_sdk.relations.decorator import relations_of as relations_of

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Client",
    "ContextError",
    "EngineError",
    "FactorSpecError",
    "GenerationError",
    "GenerationResult",
    "GenerationStats",
    "IncompleteGenerationError",
    "ModelLoadError",
    "OracleError",
    "RelationDefinitionError",
    "RemoteError",
    "SamplingParams",
    "SpecError",
    "TokenBudgetError",
    "UnsatisfiableSpecError",
    "UnsupportedFieldTypeError",
    "__version__",
    "distinct",
    "relation",
    "relations_of",
]
