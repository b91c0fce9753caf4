"""Unsupported constructs raise RelationDefinitionError naming the relation, line and construct."""

from __future__ import annotations

import inspect

import pytest
from pydantic import BaseModel

from factorspec_sdk import relation
from factorspec_sdk.errors import RelationDefinitionError
from factorspec_sdk.graph import compile_spec


def _line_of(marker: str, func: object) -> int:
    lines, start = inspect.getsourcelines(func)  # type: ignore[arg-type]
    for k, line in enumerate(lines):
        if marker in line:
            return start + k
    raise AssertionError(marker)


def _expect(construct: str, build: object, marker: str) -> None:
    with pytest.raises(RelationDefinitionError) as err:
        build()  # type: ignore[operator]
    assert err.value.construct == construct
    assert err.value.lineno == _line_of(marker, build)
    assert err.value.filename == __file__
    assert "M." in err.value.relation
    assert str(err.value.lineno) in str(err.value)


def test_while_loop() -> None:
    def build() -> None:
        class M(BaseModel):
            a: int

            @relation
            def r(self) -> bool:
                while self.a > 0:  # MARK
                    return True
                return False

    _expect("while loop", build, "# MARK")


def test_call_to_open() -> None:
    def build() -> None:
        class M(BaseModel):
            a: int

            @relation
            def r(self) -> bool:
                return open("x") is None  # MARK

    _expect("call to open()", build, "# MARK")


def test_assignment_to_attribute() -> None:
    def build() -> None:
        class M(BaseModel):
            a: int

            @relation
            def r(self) -> bool:
                self.a = 3  # MARK
                return True

    _expect("assignment", build, "# MARK")


def test_augmented_assignment() -> None:
    def build() -> None:
        class M(BaseModel):
            a: int

            @relation
            def r(self) -> bool:
                x = 1
                x += self.a  # MARK
                return x > 0

    _expect("assignment", build, "# MARK")


def test_lambda() -> None:
    def build() -> None:
        class M(BaseModel):
            a: int

            @relation
            def r(self) -> bool:
                return (lambda: self.a)() > 0  # MARK

    _expect("lambda", build, "# MARK")


def test_import() -> None:
    def build() -> None:
        class M(BaseModel):
            a: int

            @relation
            def r(self) -> bool:
                import math  # MARK

                return math.pi > self.a

    _expect("import", build, "# MARK")


def test_try() -> None:
    def build() -> None:
        class M(BaseModel):
            a: int

            @relation
            def r(self) -> bool:
                try:  # MARK
                    return self.a > 0
                except ValueError:
                    return False

    _expect("try statement", build, "# MARK")


def test_fstring() -> None:
    def build() -> None:
        class M(BaseModel):
            a: int

            @relation
            def r(self) -> bool:
                return f"{self.a}" == "1"  # MARK

    _expect("f-string", build, "# MARK")


def test_attribute_on_function() -> None:
    def build() -> None:
        class M(BaseModel):
            a: int

            @relation
            def r(self) -> bool:
                return len.__name__ == "len"  # MARK

    _expect("attribute access on a function", build, "# MARK")


def test_is_non_none() -> None:
    def build() -> None:
        class M(BaseModel):
            a: int
            b: int

            @relation
            def r(self) -> bool:
                return self.a is self.b  # MARK

    _expect("`is` comparison with a non-None value", build, "# MARK")


def test_for_loop() -> None:
    def build() -> None:
        class M(BaseModel):
            a: list[int]

            @relation
            def r(self) -> bool:
                for x in self.a:  # MARK
                    return x > 0
                return True

    _expect("for loop", build, "# MARK")


def test_true_division() -> None:
    def build() -> None:
        class M(BaseModel):
            a: int
            b: int

            @relation
            def r(self) -> bool:
                return self.a / self.b > 1  # MARK: / by a constant compiles (floats)

        compile_spec(M)

    _expect("true division (/)", build, "# MARK")


def test_method_call_on_field() -> None:
    def build() -> None:
        class M(BaseModel):
            a: str

            @relation
            def r(self) -> bool:
                return self.a.upper() == "X"  # MARK

    _expect("call to self.a.upper()", build, "# MARK")


def test_let_bindings_and_if_chains_are_accepted() -> None:
    class M(BaseModel):
        a: int
        b: int

        @relation
        def r(self) -> bool:
            """Docstring first."""
            d = self.a - self.b
            if d > 3:
                return False
            elif d < -3:
                return self.a == 0
            return d != 0

    spec = compile_spec(M)
    o = spec.new_oracle()
    assert o.feasible((("a", 10), ("b", 1))) is False
    assert o.feasible((("a", 0), ("b", 10))) is True
    assert o.feasible((("a", 2), ("b", 2))) is False


# --- errors found at compile time (they need the layout) --------------------------------


def test_non_field_attribute_at_compile_time() -> None:
    class M(BaseModel):
        a: int

        @property
        def double(self) -> int:
            return 2 * self.a

        @relation
        def r(self) -> bool:
            return self.double > 2  # MARK

    with pytest.raises(RelationDefinitionError) as err:
        compile_spec(M)
    assert err.value.construct == "attribute that is not a field"
    assert err.value.lineno == _line_of("# MARK", test_non_field_attribute_at_compile_time)


def test_symbolic_slice_bound_at_compile_time() -> None:
    class M(BaseModel):
        xs: list[int]
        k: int

        @relation
        def r(self) -> bool:
            return len(self.xs[: self.k]) == 1  # MARK

    with pytest.raises(RelationDefinitionError) as err:
        compile_spec(M)
    assert err.value.construct == "slice with a bound read from the record"
    assert err.value.lineno == _line_of("# MARK", test_symbolic_slice_bound_at_compile_time)


def test_string_ordering_at_compile_time() -> None:
    class M(BaseModel):
        a: str
        b: str

        @relation
        def r(self) -> bool:
            return self.a < self.b  # MARK

    with pytest.raises(RelationDefinitionError) as err:
        compile_spec(M)
    assert err.value.construct == "ordering comparison of strings"
