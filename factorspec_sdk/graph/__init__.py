"""The factor graph of a model's relations and its exact feasibility oracle."""

from factorspec_sdk.graph.cache import SpecCache as SpecCache
from factorspec_sdk.graph.compiled import Assignment as Assignment
from factorspec_sdk.graph.compiled import AtLeast as AtLeast
from factorspec_sdk.graph.compiled import AtMost as AtMost
from factorspec_sdk.graph.compiled import CompiledSpec as CompiledSpec
from factorspec_sdk.graph.compiled import Fact as Fact
from factorspec_sdk.graph.compiled import Factor as Factor
from factorspec_sdk.graph.compiled import Value as Value
from factorspec_sdk.graph.compiled import VarInfo as VarInfo
from factorspec_sdk.graph.oracle import Oracle as Oracle
from factorspec_sdk.graph.oracle import OracleStats as OracleStats
from factorspec_sdk.graph.spec import DEFAULT_SPEC_COMPILER as DEFAULT_SPEC_COMPILER
from factorspec_sdk.graph.spec import SpecCompiler as SpecCompiler
from factorspec_sdk.graph.spec import clear_spec_caches as clear_spec_caches
from factorspec_sdk.graph.spec import compile_spec as compile_spec
from factorspec_sdk.graph.z3context import MAIN_CONTEXT_LOCK as MAIN_CONTEXT_LOCK

__all__ = [
    "DEFAULT_SPEC_COMPILER",
    "MAIN_CONTEXT_LOCK",
    "Assignment",
    "AtLeast",
    "AtMost",
    "CompiledSpec",
    "Fact",
    "Factor",
    "Oracle",
    "OracleStats",
    "SpecCache",
    "SpecCompiler",
    "Value",
    "VarInfo",
    "clear_spec_caches",
    "compile_spec",
]
