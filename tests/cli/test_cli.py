"""The `factorspec` command line: check, generate, exit codes and a light --help."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factorspec_sdk.cli.main import ExitCode, app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

UNSAT = """
from pydantic import BaseModel, Field

from factorspec_sdk import relation


class Pair(BaseModel):
    a: int = Field(ge=0, le=10)
    b: int = Field(ge=0, le=10)

    @relation
    def a_below_b(self) -> bool:
        return self.a < self.b

    @relation
    def b_below_a(self) -> bool:
        return self.b < self.a
"""

WHILE_LOOP = """
from pydantic import BaseModel

from factorspec_sdk import relation


class Loop(BaseModel):
    xs: list[int]

    @relation
    def positive(self) -> bool:
        i = 0
        while i < len(self.xs):
            return False
        return True
"""

PROPERTY = """
from pydantic import BaseModel

from factorspec_sdk import relation


class Prop(BaseModel):
    a: int

    @property
    def double(self) -> int:
        return 2 * self.a

    @relation
    def small(self) -> bool:
        return self.double < 10
"""


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip("\n"))
    return path


def flat(output: str) -> str:
    """Output with Rich's panel borders and line wrapping removed."""
    for ch in "│╭╮╰╯─":
        output = output.replace(ch, " ")
    return " ".join(output.split())


def line_of(path: Path, needle: str) -> int:
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


# ----------------------------------------------------------------------------- check


@pytest.mark.parametrize(
    ("target", "context"),
    [
        ("examples/itinerary.py:Itinerary", "examples/itinerary.py:SAMPLE_CONTEXT"),
        ("examples.itinerary:Itinerary", "examples.itinerary:SAMPLE_CONTEXT"),
        ("examples/invoice.py:Invoice", "examples/invoice.py:SAMPLE_CONTEXT"),
        ("examples/meeting.py:Meeting", "examples/meeting.py:SAMPLE_CONTEXT"),
        # what a pip install has: the packaged domains
        ("factorspec_sdk.domains.trip:Itinerary", "factorspec_sdk.domains.trip:SAMPLE_CONTEXT"),
        (
            "factorspec_sdk.domains.meeting:Meeting",
            "factorspec_sdk.domains.meeting:SAMPLE_CONTEXT",
        ),
    ],
)
def test_check_examples(target: str, context: str) -> None:
    result = runner.invoke(app, ["check", target, "--context", context])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "variables (" in out
    assert "factors:" in out
    assert "components (" in out
    assert "ok: the spec is satisfiable" in out


def test_check_context_json_is_validated_into_the_annotated_type(tmp_path: Path) -> None:
    from examples.itinerary import SAMPLE_CONTEXT

    ctx = tmp_path / "trip.json"
    ctx.write_text(SAMPLE_CONTEXT.model_dump_json())
    result = runner.invoke(app, ["check", "examples/itinerary.py:Itinerary", "-c", str(ctx)])
    assert result.exit_code == 0, result.output
    assert "stays: at most 5 items" in result.stdout


def test_check_context_that_does_not_validate(tmp_path: Path) -> None:
    ctx = tmp_path / "trip.json"
    ctx.write_text('{"cities": 3}')
    result = runner.invoke(app, ["check", "examples/itinerary.py:Itinerary", "-c", str(ctx)])
    assert result.exit_code == ExitCode.SPEC_ERROR
    assert "does not validate as TripProblem" in result.output


def test_check_missing_context_is_a_spec_error() -> None:
    result = runner.invoke(app, ["check", "examples/itinerary.py:Itinerary"])
    assert result.exit_code == ExitCode.SPEC_ERROR
    assert "--context" in result.output


def test_check_unsupported_construct_at_class_definition(tmp_path: Path) -> None:
    path = write(tmp_path, "loop_spec.py", WHILE_LOOP)
    result = runner.invoke(app, ["check", f"{path}:Loop"])
    assert result.exit_code == ExitCode.SPEC_ERROR
    assert f"{path}:{line_of(path, 'while')}" in result.output
    assert "while loop" in result.output
    assert "Loop.positive" in result.output


def test_check_unsupported_construct_at_compile_time(tmp_path: Path) -> None:
    path = write(tmp_path, "prop_spec.py", PROPERTY)
    result = runner.invoke(app, ["check", f"{path}:Prop"])
    assert result.exit_code == ExitCode.SPEC_ERROR
    assert f"{path}:{line_of(path, 'self.double < 10')}" in result.output
    assert "attribute that is not a field" in result.output


def test_check_unsat_names_both_relations(tmp_path: Path) -> None:
    path = write(tmp_path, "unsat_spec.py", UNSAT)
    result = runner.invoke(app, ["check", f"{path}:Pair"])
    assert result.exit_code == ExitCode.SPEC_ERROR
    assert "a_below_b" in result.output
    assert "b_below_a" in result.output
    assert "unsatisfiable-spec" in result.output


KINDS = """
import datetime as dt
from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, Field

from factorspec_sdk import relation


class Alarm(BaseModel):
    at: dt.time
    gain: float = Field(ge=-1.0, le=1.0)
    day: dt.date = Field(ge=dt.date(2026, 1, 1), le=dt.date(2026, 12, 31))
    price: Annotated[Decimal, Field(max_digits=5, decimal_places=2, ge=0)]
    pause: dt.timedelta = Field(ge=dt.timedelta(0), le=dt.timedelta(hours=1))
    when: dt.datetime

    @relation
    def morning(self) -> bool:
        return (
            self.at < dt.time(12) and self.gain > 0 and self.day.month == 3
            and self.price > 1 and self.pause > dt.timedelta(0) and self.when.hour == 9
        )
"""


def test_check_prints_each_variable_with_the_users_type_and_bounds(tmp_path: Path) -> None:
    """Issue #39 item 7: a time, a float, a date... as the user wrote them, not as encoded."""
    path = write(tmp_path, "kinds_spec.py", KINDS)
    result = runner.invoke(app, ["check", f"{path}:Alarm"])
    assert result.exit_code == 0, result.output
    lines = {line.strip() for line in result.stdout.splitlines()}
    assert {
        "at: time in [00:00:00, 23:59:59]",
        "gain: float in [-1.0, 1.0] (6 decimals)",
        "day: date in [2026-01-01, 2026-12-31]",
        "month(day): int in [1, 12]",
        "price: Decimal in [0.00, 999.99]",
        "pause: timedelta in [0 s, 3600 s]",
        "when: datetime in [0001-01-01T00:00:00, 9999-12-31T23:59:59]",
        "clock(when): time in [00:00:00, 23:59:59]",
        "date(when): date in [0001-01-01, 9999-12-31]",
    } <= lines, result.stdout
    assert "86399" not in result.stdout and "1000000" not in result.stdout


UUIDS = """
import uuid

from pydantic import BaseModel

from factorspec_sdk import relation


class Transfer(BaseModel):
    source: uuid.UUID
    target: uuid.UUID | None = None

    @relation
    def elsewhere(self) -> bool:
        return self.source != self.target
"""


def test_check_prints_a_uuid_as_the_users_type(tmp_path: Path) -> None:
    """Issue #40: a UUID leaf reads as ``UUID``, not as its 128-bit int and bounds."""
    path = write(tmp_path, "uuid_spec.py", UUIDS)
    result = runner.invoke(app, ["check", f"{path}:Transfer"])
    assert result.exit_code == 0, result.output
    lines = {line.strip() for line in result.stdout.splitlines()}
    assert {"source: UUID", "target: UUID"} <= lines, result.stdout
    assert str(2**128 - 1) not in result.stdout


RAISES = """
from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, Field

from factorspec_sdk import relation


class Rules(BaseModel):
    rate: float


class Invoice(BaseModel):
    subtotal: Annotated[Decimal, Field(max_digits=6, decimal_places=2, ge=0)]
    tax: Annotated[Decimal, Field(max_digits=6, decimal_places=2, ge=0)]

    @relation
    def taxed(self, rules: Rules) -> bool:
        return self.tax == round(self.subtotal * rules.rate, 2)
"""


def test_check_says_a_relation_raises_instead_of_an_unsat_core(tmp_path: Path) -> None:
    """Issue #39 item 5, from the command line: the exception, the line and the fix."""
    path = write(tmp_path, "raises_spec.py", RAISES)
    ctx = tmp_path / "rules.json"
    ctx.write_text('{"rate": 0.2}')
    result = runner.invoke(app, ["check", f"{path}:Invoice", "-c", str(ctx)])
    assert result.exit_code == ExitCode.SPEC_ERROR
    out = flat(result.output)
    assert f"{path}:{line_of(path, 'rules.rate')}" in out
    assert "TypeError: unsupported operand type(s) for *: 'decimal.Decimal' and 'float'" in out
    assert "Decimal(str(rules.rate))" in out
    assert "relation-raises" in out and "unsatisfiable-spec" not in out


@pytest.mark.parametrize(
    "args",
    [
        ["check", "examples/itinerary.py"],  # no :Model
        ["check", "examples/nope.py:Itinerary"],  # missing file
        ["check", "examples.nope:Itinerary"],  # missing module
        ["check", "examples/itinerary.py:Nope"],  # missing attribute
        ["check", "examples/itinerary.py:SAMPLE_PROMPT"],  # not a model class
        ["check", "examples/itinerary.py:Itinerary", "-c", "nope.json"],  # missing file
        ["generate", "examples/itinerary.py:Itinerary"],  # no prompt
        ["generate", "examples/itinerary.py:Itinerary", "-p", "x", "-f", "x.txt"],  # both
        ["generate", "examples/itinerary.py:Itinerary", "-f", "nope.txt"],
        ["check"],
        ["nope"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == ExitCode.USAGE_ERROR, result.output


def test_bad_json_context_exits_2(tmp_path: Path) -> None:
    ctx = tmp_path / "bad.json"
    ctx.write_text("{")
    result = runner.invoke(app, ["check", "examples/itinerary.py:Itinerary", "-c", str(ctx)])
    assert result.exit_code == ExitCode.USAGE_ERROR
    assert "not valid JSON" in flat(result.output)


def test_generate_checks_the_spec_before_loading_an_engine(tmp_path: Path) -> None:
    path = write(tmp_path, "unsat_gen.py", UNSAT)
    result = runner.invoke(app, ["generate", f"{path}:Pair", "-p", "two numbers"])
    assert result.exit_code == ExitCode.SPEC_ERROR
    assert "a_below_b" in result.output


def test_generate_with_an_unknown_engine_is_an_engine_error() -> None:
    result = runner.invoke(
        app,
        [
            "generate",
            "examples/meeting.py:Meeting",
            "-p",
            "x",
            "--engine",
            "nope",
            "-c",
            "examples/meeting.py:SAMPLE_CONTEXT",
        ],
    )
    assert result.exit_code == ExitCode.ENGINE_ERROR
    assert "unknown engine 'nope'" in result.output


@pytest.mark.parametrize("command", ["check", "generate"])
def test_help_names_what_a_pip_install_has(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The help's examples resolve outside a checkout: no ``examples/`` (not in the wheel)."""
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps the help at the terminal's width
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "factorspec_sdk.domains.trip:Itinerary" in result.output
    assert "examples" not in result.output


def test_version() -> None:
    from factorspec_sdk import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"factorspec {__version__}"


# ----------------------------------------------------------------------------- --help

HEAVY = ["torch", "transformers", "z3", "vllm", "sglang", "fastapi", "uvicorn", "openai"]


@pytest.mark.parametrize(
    "args", [["--help"], ["generate", "--help"], ["check", "--help"], ["bench", "--help"]]
)
def test_help_is_fast_and_light(args: list[str]) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        sys.argv = ["factorspec", *{args!r}]
        from factorspec_sdk.cli.main import main
        try:
            main()
        except SystemExit as exc:
            assert exc.code in (0, None), exc.code
        heavy = [m for m in {HEAVY!r} if m in sys.modules]
        print("HEAVY=" + ",".join(heavy))
        """
    )
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    elapsed = time.perf_counter() - started
    assert "Usage" in out
    assert "HEAVY=\n" in out, out[-300:]
    assert elapsed < 10, f"--help took {elapsed:.1f}s"


# ----------------------------------------------------------------------------- the real model


@pytest.mark.model
def test_generate_end_to_end(tmp_path: Path) -> None:
    from examples.itinerary import SAMPLE_CONTEXT, SAMPLE_PROMPT
    from factorspec_sdk.domains.trip import Itinerary

    prompt = tmp_path / "prompt.txt"
    prompt.write_text(SAMPLE_PROMPT)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "factorspec_sdk.cli.main",
            "generate",
            "examples/itinerary.py:Itinerary",
            "--prompt-file",
            str(prompt),
            "--context",
            "examples/itinerary.py:SAMPLE_CONTEXT",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(proc.stdout)
    Itinerary.model_validate(record, context=SAMPLE_CONTEXT)
    assert "tokens/step" in proc.stderr


def test_generate_with_the_scripted_engine_gives_a_valid_record() -> None:
    """`--engine scripted` is a random model over a byte vocabulary: no model, still valid."""
    from examples.meeting import SAMPLE_CONTEXT as MEETING_CONTEXT
    from examples.meeting import Meeting

    args = ["generate", "examples/meeting.py:Meeting", "-p", "x", "--engine", "scripted"]
    result = runner.invoke(app, [*args, "-c", "examples/meeting.py:SAMPLE_CONTEXT"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout[: result.stdout.rindex("}") + 1])
    Meeting.model_validate(record, context=MEETING_CONTEXT)


def test_generate_explain_and_live_show_where_values_came_from() -> None:
    """``--explain`` tables each value's origin; ``--live`` streams and prints the same record."""
    args = ["generate", "examples/meeting.py:Meeting", "-p", "x", "--engine", "scripted"]
    args += ["-c", "examples/meeting.py:SAMPLE_CONTEXT", "--indent", "0"]
    plain = runner.invoke(app, args)
    assert plain.exit_code == 0, plain.output
    shown = runner.invoke(app, [*args, "--explain", "--live"])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines()[0] == plain.stdout.splitlines()[0]  # the record, unchanged
    assert "colours: model  relations  schema" in shown.stderr
    assert "start_hour" in shown.stderr and "relations" in shown.stderr
    assert "provenance: model: 0 values" in shown.stderr
    # where the call's time went: the parts of its wall, and the wall
    for part in ("forward_seconds", "validate_seconds", "other_seconds", "wall_seconds"):
        assert part in shown.stderr


def test_dict_context_is_passed_as_is(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "dict_ctx.py",
        """
        from pydantic import BaseModel, Field

        from factorspec_sdk import relation


        class Score(BaseModel):
            points: int = Field(ge=0, le=100)

            @relation
            def at_least(self, limits: dict[str, int]) -> bool:
                return self.points >= limits["min"]
        """,
    )
    ctx = tmp_path / "limits.json"
    ctx.write_text('{"min": 40}')
    result = runner.invoke(app, ["check", f"{path}:Score", "-c", str(ctx)])
    assert result.exit_code == 0, result.output
    assert "points: int in [40, 100]" in result.stdout or "at_least" in result.stdout


@pytest.mark.parametrize("missing", ["uvicorn", "fastapi"])
def test_serve_without_the_server_extra_says_to_install_it(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """Found by a new user: without uvicorn, `serve` raised ModuleNotFoundError from inside
    `server.serve` as a traceback, past the check that names the extra."""
    for name in [m for m in sys.modules if m == missing or m.startswith(missing + ".")]:
        monkeypatch.delitem(sys.modules, name)
    import factorspec_sdk.server as server

    monkeypatch.delitem(sys.modules, "factorspec_sdk.server.app", raising=False)
    monkeypatch.delattr(server, "app", raising=False)  # both restored after the test
    monkeypatch.setitem(sys.modules, missing, None)  # ``import missing`` raises ImportError
    result = runner.invoke(app, ["serve", "--engine", "scripted"])
    assert result.exit_code == ExitCode.ENGINE_ERROR, result.output
    assert "factorspec-sdk[server]" in result.output
    assert "Traceback" not in result.output


def test_serve_passes_device_and_dtype_to_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    import factorspec_sdk.server as server

    seen: dict[str, object] = {}
    monkeypatch.setattr(server, "serve", lambda **kwargs: seen.update(kwargs))
    result = runner.invoke(
        app, ["serve", "--engine", "embedded", "--device", "cpu", "--dtype", "float32"]
    )
    assert result.exit_code == 0, result.output
    assert seen["dtype"] == "float32" and seen["device"] == "cpu"
    assert seen["engine"] == "embedded" and seen["port"] == 8000
    seen.clear()
    assert runner.invoke(app, ["serve", "--engine", "scripted"]).exit_code == 0
    assert "dtype" not in seen and "device" not in seen  # the engine's own defaults
    assert "kept_specs" not in seen  # the server's default
    assert runner.invoke(app, ["serve", "--engine", "scripted", "--kept-specs", "0"]).exit_code == 0
    assert seen["kept_specs"] == 0
    assert runner.invoke(app, ["serve", "--kept-specs", "-1"]).exit_code != 0


RESTRICTED = """
from pydantic import BaseModel, Field

from factorspec_sdk import relation


class Basket(BaseModel):
    items: list[int] = Field(default_factory=list)
    coupon: str | None = None
    total: int = Field(ge=0, le=9)

    @relation
    def counted(self) -> bool:
        return self.total == len(self.items)
"""


def test_check_lists_where_the_writer_writes_less_than_the_schema(tmp_path: Path) -> None:
    """Issue #41: each restriction is named with how to lift it, not a silent narrowing."""
    path = write(tmp_path, "restricted_spec.py", RESTRICTED)
    result = runner.invoke(app, ["check", f"{path}:Basket"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    section = out[out.index("restrictions (3):") :]
    assert "items: an optional key always written" in section  # read, a default_factory
    assert "items: at most 16 items" in section  # no max_length
    assert "items[]: at most 18 digits" in section  # ints without bounds
    assert "coupon" not in section  # left out freely: no relation reads it
    assert section.count("to lift it:") == 3
    assert "Field(max_length=...)" in section
