"""Declaring relations, the model layout and the compiler to Z3."""

from factorspec_sdk.relations.decorator import (
    RelationInfo as RelationInfo,
)
from factorspec_sdk.relations.decorator import (
    RelationSet as RelationSet,
)
from factorspec_sdk.relations.decorator import (
    distinct as distinct,
)
from factorspec_sdk.relations.decorator import (
    relation as relation,
)
from factorspec_sdk.relations.decorator import (
    relations_of as relations_of,
)
from factorspec_sdk.relations.pydantic_layout import build_layout as build_layout

__all__ = ["RelationInfo", "RelationSet", "build_layout", "distinct", "relation", "relations_of"]
