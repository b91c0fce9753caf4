"""Z3 call policy for processes FactorSpec owns: short libz3 calls keep the GIL, long ones don't.

z3py calls libz3 through ``ctypes.CDLL``, which releases the GIL around every foreign call,
however short: making a term, taking or giving back a reference, reading a sort, checking
the error code (z3py makes ~10 of them per term). In a server, planning runs in several
threads at once (request threads build specs and plan first segments, the engine thread
plans the rest); each short call hands the GIL to a waiting thread and the caller waits to
get it back, so the process spends its time switching threads. Measured with
``python -m factorspec_sdk.bench.load --engine scripted --clients 64`` (server in its own
process): ~45% of the server's CPU was the kernel switching threads, and a trip record cost
~95 ms of server CPU; with this policy ~66 ms, the kernel's share ~10%.

`keep_gil_in_short_calls` rebinds z3py's wrappers (each keeps its foreign function as the
default of its last parameter), and the raw term builder's functions
(`factorspec_sdk.graph.z3raw.rebind`), to the same libz3 functions loaded through
``ctypes.PyDLL``, which keeps the GIL, except the calls that can run long: solver checks,
simplification, tactics, optimization, parsing, printing, making or freeing a context, and
interrupting. Those still release the GIL, so other threads run while Z3 searches. The
answers are the same calls' answers; only who holds the GIL meanwhile changes.

Only processes FactorSpec owns call it (`factorspec serve`, the load script's server): a
library must not change how its host's z3py behaves.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from typing import Any

import z3
from z3 import z3core

from factorspec_sdk.graph import z3raw

__all__ = ["RELEASING", "keep_gil_in_short_calls"]

RELEASING = (
    "check",
    "simplify",
    "tactic",
    "probe",
    "optimize",
    "cube",
    "consequences",
    "fixedpoint",
    "context",
    "parse",
    "to_string",
    "eval_smtlib2",
    "interrupt",
    "propagate",
    "benchmark",
    "get_help",
)
"""Parts of the names of the libz3 calls that keep releasing the GIL (they can run long)."""

_lock = threading.Lock()
_switched: set[str] = set()


def _libz3_path() -> str | None:
    """The file of the libz3 z3py loaded (Linux: from the process's mappings)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if os.path.basename(path).startswith("libz3."):
                    return path
    except OSError:
        pass
    found = sorted(glob.glob(os.path.join(os.path.dirname(z3.__file__), "lib", "libz3.*")))
    return found[0] if found else None


def keep_gil_in_short_calls() -> int:
    """Make z3py's short libz3 calls keep the GIL (see the module); returns how many now do.

    Idempotent. Returns 0, changing nothing, where the libz3 file cannot be found or z3py's
    wrappers do not keep their foreign functions as this expects.
    """
    with _lock:
        if _switched:
            return len(_switched)
        path = _libz3_path()
        if path is None:
            return 0
        held = ctypes.PyDLL(path)
        for name, wrapper in vars(z3core).items():
            defaults = getattr(wrapper, "__defaults__", None)
            if not name.startswith("Z3_") or not defaults or not hasattr(defaults[-1], "f"):
                continue
            elems = defaults[-1]
            elems.get_error_code = _rebind(held, elems.get_error_code)
            if any(part in name.lower() for part in RELEASING):
                continue
            elems.f = _rebind(held, elems.f)
            _switched.add(name)
        z3raw.rebind()  # the raw term builder looked its functions up before the switch
        return len(_switched)


_KEEPS_GIL = 0x4
"""``_FUNCFLAG_PYTHONAPI`` of ctypes: the flag of a ``PyDLL`` function."""


def _rebind(lib: ctypes.PyDLL, fn: Any) -> Any:
    """``fn`` (a libz3 function of ``ctypes.CDLL``) from ``lib``, with its types."""
    if fn._flags_ & _KEEPS_GIL:  # already one that keeps the GIL
        return fn
    out = getattr(lib, fn.__name__)
    out.restype = fn.restype
    if fn.argtypes is not None:
        out.argtypes = fn.argtypes
    return out
