"""Helion test helpers shared by the Helion test files: a stand-in for Helion's
`BenchmarkProvider` that answers each config with a time from a cost model (no GPU here)."""
from __future__ import annotations

from typing import Any, Callable


def stand_in_provider(cost: Callable[[Any], float]) -> type:
    """A `BenchmarkProvider` subclass answering every config with `cost(config)`; the class
    attribute `seen` collects the configs it was asked to time, in order (reset it per test)."""
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
            return [BenchmarkResult(config=c, fn=_Timed(cost(c)), perf=cost(c), status="ok", compile_time=0.01)
                    for c in configs]

        def setup(self) -> None:
            pass

        def cleanup(self) -> None:
            pass

    return StandIn
