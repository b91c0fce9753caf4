"""The server process's garbage-collector policy: freeze what start-up made, collect less often.

Every request builds a spec and an oracle out of thousands of short-lived Z3 objects, and
CPython's collector runs a young collection every 700 new container objects and an old one
every hundred of those; an old collection walks every object the process holds (torch,
transformers, the model's modules: millions), so on a trip record with the scripted engine
the collector took about a quarter of FactorSpec's CPU (``python -m
factorspec_sdk.bench.planning --gc both`` measures it). `tune_gc` moves everything alive after
start-up into the permanent generation (`gc.freeze`: never walked again) and raises the
thresholds to `GC_THRESHOLDS`, as servers of large Python processes commonly do. Reference
counting still frees almost every object at once; the collector is there for cycles.

Only processes FactorSpec owns call it (`factorspec serve`, the load script's server, the
planning benchmark): a library must not change its host's collector.
"""

from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLDS", "tune_gc"]

GC_THRESHOLDS = (50_000, 20, 20)
"""`gc.set_threshold` after `tune_gc`: a young collection every 50,000 new objects."""


def tune_gc() -> None:
    """Collect once, freeze the survivors and raise the thresholds (call after start-up)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
