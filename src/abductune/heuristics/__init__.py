"""Seed configs before any search: registry heuristics per backend and the observed database.

    from abductune.heuristics import seed_configs
    report = seed_configs(problem, space, hardware)         # SeedReport
    run(strategy, evaluator, budget, seeds=report.configs)  # measured first

Write a heuristic by subclassing `AutotunerHeuristic` and decorating it with
`register_heuristic`; build a database with `abductune harvest` (`heuristics.harvest`).
Module map: `base` (the contract and registry), `triton` (built-in heuristics), `realize`
(partial config -> valid config), `observed` (the database), `seeds` (`seed_configs`),
`harvest` and `coverage` (building and checking a database), `vllm` (vLLM config files),
`nvidia` (NVIDIA's analytic GEMM model, the optional `abductune[nvidia]` extra).
"""
from . import triton as _triton_builtin  # noqa: F401  (registers the built-in heuristics)
from . import nvidia as _nvidia_model  # noqa: F401  (NVIDIA's GEMM model; quiet when not installed)
from .base import REGISTRY, AutotunerHeuristic, HeuristicRegistry, register_heuristic
from .observed import Database, load_database, packaged_database
from .seeds import SeedReport, seed_configs

__all__ = [
    "REGISTRY", "AutotunerHeuristic", "Database", "HeuristicRegistry", "SeedReport",
    "load_database", "packaged_database", "register_heuristic", "seed_configs",
]
