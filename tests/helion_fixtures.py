"""Helion test helpers shared by the Helion test files: Helion imported or the module skipped,
and a stand-in for Helion's `BenchmarkProvider` that answers each config with a time from a
cost model (no GPU here)."""
from __future__ import annotations

import os
from typing import Any, Callable

import pytest


def import_helion() -> Any:
    """Helion, or the calling test module skipped with the reason (a failure with
    ABDUCTUNE_REQUIRE_HELION=1: CI installs what it tests)."""
    try:
        import helion
    except ImportError as e:  # e.g. Helion 1.5.1 with torch 2.11
        if os.environ.get("ABDUCTUNE_REQUIRE_HELION") == "1":
            raise
        pytest.skip(f"Helion does not import here ({type(e).__name__}: {e})", allow_module_level=True)
    return helion


def stand_in_provider(cost: Callable[[Any], float]) -> type:
    """A `BenchmarkProvider` subclass answering every config with `cost(config)` (None: the
    config failed, as Helion reports a compile error); the class attribute `seen` collects the
    configs it was asked to time, in order (reset it per test)."""
    from helion.autotuner.benchmark_provider import BenchmarkProvider, BenchmarkResult

    class _Timed:
        def __init__(self, t: float):
            self.t = t

        def __call__(self, *args: Any, **kwargs: Any) -> float:
            return self.t

    class StandIn(BenchmarkProvider):
        seen: list = []

        def __init__(self, kernel, settings, config_spec, args, log, autotune_metrics):
            self.mutated_arg_indices = []

        def benchmark(self, configs, *, desc="Benchmarking", raise_if_no_viable_config=True):
            StandIn.seen += list(configs)
            out = []
            for c in configs:
                t = cost(c)
                out.append(BenchmarkResult(config=c, fn=_Timed(t), perf=t, status="ok", compile_time=0.01)
                           if t is not None else
                           BenchmarkResult(config=c, fn=_Timed(float("inf")), perf=float("inf"), status="error",
                                           compile_time=None))
            return out

        def setup(self) -> None:
            pass

        def cleanup(self) -> None:
            pass

    return StandIn
