"""Seed configs before any search: registry heuristics per backend and the observed database.

    from abductune.heuristics import seed_configs
    report = seed_configs(problem, space, hardware)         # SeedReport
    run(strategy, evaluator, budget, seeds=report.configs)  # measured first
    store.start_run(ctx, strategy, options, heuristics=report.fired)
"""
from . import triton as _triton_builtin  # noqa: F401  (registers the built-in heuristics)
from .classify import Classification, bucket_of, classify, dtype_family, fallback_category
from .observed import Database, Lookup, Rule, Template, load_database, packaged_database
from .registry import (REGISTRY, AutotunerHeuristic, HeuristicRegistry, InvalidSeed, SeedReport,
                       as_hardware, hardware_matches, is_amd, is_hopper, is_nvidia, realize,
                       register_heuristic, seed_configs, template_keys, template_scope)

__all__ = [
    "REGISTRY", "AutotunerHeuristic", "Classification", "Database", "HeuristicRegistry",
    "InvalidSeed", "Lookup", "Rule", "SeedReport", "Template", "as_hardware", "bucket_of",
    "classify", "dtype_family", "fallback_category", "hardware_matches", "is_amd", "is_hopper",
    "is_nvidia", "load_database", "packaged_database", "realize", "register_heuristic",
    "seed_configs", "template_keys", "template_scope",
]
