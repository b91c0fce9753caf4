from pydantic import BaseModel, Field

from factorspec_sdk import UnsatisfiableSpecError, relation
from factorspec_sdk.graph import compile_spec


class Pair(BaseModel):
    a: int = Field(ge=0, le=10)
    b: int = Field(ge=0, le=10)

    @relation
    def a_below_b(self) -> bool:
        return self.a < self.b

    @relation
    def b_below_a(self) -> bool:
        return self.b < self.a


try:
    compile_spec(Pair)  # Client.generate compiles the same way, before any token
except UnsatisfiableSpecError as exc:
    print(exc.code)  # unsatisfiable-spec
    print(exc.core)  # ['a_below_b', 'b_below_a']
