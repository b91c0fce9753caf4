"""Benchmarks and load scripts, shipped in the package so an installed wheel runs them.

`trip` (``factorspec bench trip``): FactorSpec against syntax-only baselines on trip problems;
`baselines`: the syntax-only decoding loops; `gen_bench` and `oracle_bench`: decoding-mode and
oracle timings; `user_models` (``factorspec bench models``): where a record's time goes on
the models users write (`models`); `gpu_check`: the prepared check for a GPU machine;
`load`: the load test of ``factorspec serve``.
"""
