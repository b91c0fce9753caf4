"""The factor graph of a model's relations and its exact feasibility oracle."""

from factorspec_sdk.graph.oracle import Oracle as Oracle
from factorspec_sdk.graph.oracle import OracleStats as OracleStats
from factorspec_sdk.graph.spec import Assignment as Assignment
from factorspec_sdk.graph.spec import AtLeast as AtLeast
from factorspec_sdk.graph.spec import CompiledSpec as CompiledSpec
from factorspec_sdk.graph.spec import Fact as Fact
from factorspec_sdk.graph.spec import Factor as Factor
from factorspec_sdk.graph.spec import Value as Value
from factorspec_sdk.graph.spec import VarInfo as VarInfo
from factorspec_sdk.graph.spec import compile_spec as compile_spec

__all__ = [
    "Assignment",
    "AtLeast",
    "CompiledSpec",
    "Fact",
    "Factor",
    "Oracle",
    "OracleStats",
    "Value",
    "VarInfo",
    "compile_spec",
]
