"""The embedded engine: PyTorch + transformers in this process, CPU or GPU.

`EmbeddedEngine` loads a model folder; `from_transformers` wraps a model and tokenizer you have
loaded. The engine's jobs live in one module each (`engine`, `runner`, `kv`, `batching`,
`loading`, `settle`; the sequence table is `factorspec_sdk.engines.sequences`). Importing this
package imports no torch: the modules import it where they run the model.
"""

from __future__ import annotations

from factorspec_sdk.engines.embedded.batching import PROFILE_KS
from factorspec_sdk.engines.embedded.engine import EmbeddedEngine, from_transformers
from factorspec_sdk.engines.embedded.kv import DEFAULT_PREFIX_CACHE_BYTES

__all__ = ["DEFAULT_PREFIX_CACHE_BYTES", "PROFILE_KS", "EmbeddedEngine", "from_transformers"]
