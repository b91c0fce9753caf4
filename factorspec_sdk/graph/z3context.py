"""The lock that guards Z3's main (process-wide default) context.

Z3 contexts are not thread-safe. `compile_spec` builds every term of a model's spec in Z3's
main context (the relation compiler's constants live there too), so anything that creates,
reads or translates terms of a spec compiled from a Pydantic model must hold
`MAIN_CONTEXT_LOCK`: `compile_spec` itself, the IR export (`factorspec_sdk.ir.spec_to_ir`)
and an oracle copying a spec's formulas into its private context (`Oracle`). Specs rebuilt
from the relation IR (`spec_from_ir`) live in private contexts of their own and need it only
where they meet main-context terms.
"""

from __future__ import annotations

import threading

__all__ = ["MAIN_CONTEXT_LOCK"]

MAIN_CONTEXT_LOCK = threading.RLock()
"""Held while a thread creates, walks or translates terms of Z3's main context (re-entrant)."""
