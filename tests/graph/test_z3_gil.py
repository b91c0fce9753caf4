"""The Z3 call policy of the processes FactorSpec owns (`factorspec_sdk.graph.z3_gil`)."""

from __future__ import annotations

import subprocess
import sys


def test_short_z3_calls_keep_the_gil_and_answers_do_not_change() -> None:
    # in a child process: the policy is the whole process's
    code = (
        "import threading, z3\n"
        "from z3 import z3core\n"
        "from factorspec_sdk.ir import check_record, spec_from_ir, to_ir\n"
        "from factorspec_sdk.graph.z3_gil import keep_gil_in_short_calls\n"
        "from tests.helpers import TRIP_CONTEXT, Trip\n"
        "def f(name):\n"
        "    return getattr(z3core, name).__defaults__[-1].f\n"
        "def oracle_answers():\n"
        "    spec = spec_from_ir(to_ir(Trip, TRIP_CONTEXT))\n"
        "    o = spec.new_oracle()\n"
        "    return [o.feasible_values((), v) for v in sorted(spec.variables)]\n"
        "before = oracle_answers()\n"
        "assert not f('Z3_mk_and')._flags_ & 4\n"
        "n = keep_gil_in_short_calls()\n"
        "assert n > 500 and keep_gil_in_short_calls() == n\n"
        "assert f('Z3_mk_and')._flags_ & 4 and f('Z3_inc_ref')._flags_ & 4\n"
        "from factorspec_sdk.graph import z3raw\n"
        "assert z3raw.NARY_OPS['and']._flags_ & 4 and z3raw.BINARY_OPS['eq']._flags_ & 4\n"
        "assert z3raw._LIB.Z3_inc_ref._flags_ & 4 and z3raw._LIB.Z3_translate._flags_ & 4\n"
        "assert not z3raw._LIB.Z3_solver_check_assumptions._flags_ & 4\n"
        "assert not f('Z3_solver_check_assumptions')._flags_ & 4\n"
        "assert not f('Z3_mk_context_rc')._flags_ & 4\n"
        "assert oracle_answers() == before\n"
        "errors = []\n"
        "def work():\n"
        "    try:\n"
        "        for _ in range(3):\n"
        "            assert oracle_answers() == before\n"
        "    except BaseException as exc:\n"
        "        errors.append(exc)\n"
        "threads = [threading.Thread(target=work) for _ in range(4)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "assert not errors, errors\n"
        "x = z3.Int('x')\n"
        "try:  # a libz3 error, read through the rebound error-code call\n"
        "    z3core.Z3_mk_not(z3.main_ctx().ref(), x.as_ast())\n"
        "except z3.Z3Exception:\n"
        "    print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
