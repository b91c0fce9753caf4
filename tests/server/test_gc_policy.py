"""The server process's collector policy (`factorspec_sdk.server.gc_policy`)."""

from __future__ import annotations

import subprocess
import sys


def test_tune_gc_freezes_start_up_and_raises_the_thresholds() -> None:
    # in a child process: the collector's state is the whole process's
    code = (
        "import gc\n"
        "from factorspec_sdk.server.gc_policy import GC_THRESHOLDS, tune_gc\n"
        "junk = [[i] for i in range(1000)]\n"
        "assert gc.get_freeze_count() == 0\n"
        "tune_gc()\n"
        "assert gc.get_threshold() == GC_THRESHOLDS\n"
        "assert gc.get_freeze_count() > 1000\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
