from pydantic import BaseModel

from factorspec_sdk import RelationDefinitionError, relation

try:

    class Basket(BaseModel):
        prices: list[int]

        @relation
        def all_positive(self) -> bool:
            for p in self.prices:  # a for statement: not in the supported subset
                if p <= 0:
                    return False
            return True

except RelationDefinitionError as exc:
    print(exc.construct)  # for loop
    print(exc.relation, exc.lineno > 0)
    print(exc)
