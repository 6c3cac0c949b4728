"""Where any Helion search's wall time goes (Helion's own or abductune's): an account by phase for measuring harnesses.

`HelionAccount` wraps, while its block runs, the methods of Helion's classes that a search's
time passes through, and sums their seconds; `since(before, wall_s)` is one search's share. It
patches classes, so it is for a harness that runs one search at a time in its process
(`benchmarks/gpu/helion_bench.py` wraps every search of a lane, Helion's `quick` as well as
abductune's); abductune's own search keeps a per-instance account in its report
(`helion_measure.Timing`). Nothing here changes what Helion does: each wrapper calls the
original and returns its result.

The figures (seconds unless said):
- `baseline_s`: the provider's construction, where Helion compiles and runs the reference
  config for its accuracy baseline; `setup_s`: writing the arguments and baseline to disk for
  the worker; `cleanup_s`: the provider's cleanup (Helion's shuts its benchmark worker down);
- `batch_s`: the provider's `benchmark` calls (`batches`, `configs` asked), of which
  `codegen_s` (Helion generating each config's Triton code in this process, one after another),
  `precompile_s` (preparing the forked compiles and waiting for them: they run in parallel)
  and `bench_s` (timing each new config, `timed` of them, `first_bench_s` the first, which
  waits for a newly started worker, `bench_max_s` the slowest), of which the worker's
  `bench_job_s` and `accuracy_s` (its timing and accuracy-check jobs, round trips included);
  the rest of `batch_s` (`batch_other_s`) is source deduplication and bookkeeping;
- `rebench_s`: Helion's `rebenchmark` (run-offs, outside the final verification), `final_s`:
  its `final_rebenchmark_best`;
- `worker_starts`: benchmark workers started;
- `other_s` (from `since`): the wall less all of the above: the search algorithm itself
  (Helion's surrogate models, abductune's Sessions), binding, cache look-ups, and compiling
  and running the winner after the search.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable

FIGURES = ("baseline_s", "setup_s", "cleanup_s", "batch_s", "codegen_s", "precompile_s", "bench_s",
           "bench_job_s", "accuracy_s", "rebench_s", "final_s")
COUNTS = ("batches", "configs", "timed", "worker_starts")
# the figures that do not overlap: their sum and `other_s` make the wall
TOP = ("baseline_s", "setup_s", "batch_s", "rebench_s", "final_s", "cleanup_s")


class HelionAccount:
    """Context manager: Helion's classes wrapped while the block runs (module docstring).
    `totals` holds the running sums; `snapshot()` and `since()` cut out one search."""

    def __init__(self) -> None:
        self.totals: dict[str, Any] = {k: 0.0 for k in FIGURES} | {k: 0 for k in COUNTS}
        self.bench_each: list[float] = []
        self._saved: list[tuple[type, str, Any]] = []
        self._depth = {"batch": 0, "bench": 0, "final": 0}

    # -- the wrappers
    def _patch(self, cls: type, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        raw = cls.__dict__.get(name)
        if raw is None:  # a Helion without this method: that figure stays 0
            return
        static = isinstance(raw, staticmethod)
        inner = raw.__func__ if static else raw
        wrapped = make(inner)
        setattr(cls, name, staticmethod(wrapped) if static else wrapped)
        self._saved.append((cls, name, raw))

    def _timed(self, figure: str, depth: str | None = None, when: Callable[[], bool] = lambda: True,
               count: str | None = None, then: Callable[[float], None] | None = None
               ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def make(inner: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if not when():
                    return inner(*args, **kwargs)
                if depth:
                    self._depth[depth] += 1
                t0 = time.perf_counter()
                try:
                    return inner(*args, **kwargs)
                finally:
                    dt = time.perf_counter() - t0
                    if depth:
                        self._depth[depth] -= 1
                    self.totals[figure] += dt
                    if count:
                        self.totals[count] += 1
                    if then:
                        then(dt)
            return wrapper
        return make

    def _bench(self, dt: float) -> None:
        self.bench_each.append(dt)

    def __enter__(self) -> "HelionAccount":
        from helion.autotuner.base_search import PopulationBasedSearch
        from helion.autotuner.benchmark_provider import LocalBenchmarkProvider
        from helion.autotuner.precompile_future import PrecompileFuture
        from helion.runtime.kernel import BoundKernel

        P = LocalBenchmarkProvider
        self._patch(P, "__init__", self._timed("baseline_s"))
        self._patch(P, "setup", self._timed("setup_s"))
        self._patch(P, "cleanup", self._timed("cleanup_s"))

        def batch(inner: Callable[..., Any]) -> Callable[..., Any]:
            timed = self._timed("batch_s", depth="batch", count="batches")(inner)

            def wrapper(provider: Any, configs: Any, *args: Any, **kwargs: Any) -> Any:
                self.totals["configs"] += len(configs)
                return timed(provider, configs, *args, **kwargs)
            return wrapper
        self._patch(P, "benchmark", batch)
        in_batch = lambda: self._depth["batch"] > 0 and self._depth["bench"] == 0  # noqa: E731
        self._patch(BoundKernel, "compile_config", self._timed("codegen_s", when=in_batch))
        self._patch(P, "_create_precompile_future", self._timed("precompile_s", when=in_batch))
        self._patch(PrecompileFuture, "wait_for_all", self._timed("precompile_s", when=in_batch))
        self._patch(P, "_benchmark_function", self._timed("bench_s", depth="bench", count="timed", then=self._bench))
        self._patch(P, "_run_subprocess_benchmark_job", self._timed("bench_job_s"))
        self._patch(P, "_run_subprocess_accuracy_check_job", self._timed("accuracy_s"))
        self._patch(PopulationBasedSearch, "final_rebenchmark_best", self._timed("final_s", depth="final"))
        self._patch(PopulationBasedSearch, "rebenchmark",
                    self._timed("rebench_s", when=lambda: self._depth["final"] == 0))
        try:
            from helion.autotuner.benchmark_worker import BenchmarkWorker
        except ImportError:
            return self

        def start(inner: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(worker: Any, *args: Any, **kwargs: Any) -> Any:
                self.totals["worker_starts"] += 1
                return inner(worker, *args, **kwargs)
            return wrapper
        self._patch(BenchmarkWorker, "_start", start)
        return self

    def __exit__(self, *exc: Any) -> None:
        for cls, name, raw in reversed(self._saved):
            setattr(cls, name, raw)
        self._saved.clear()

    # -- one search's share
    def snapshot(self) -> dict[str, Any]:
        return {**self.totals, "n_bench": len(self.bench_each)}

    def since(self, before: dict[str, Any], wall_s: float | None = None) -> dict[str, Any]:
        """What was spent after `before` (a `snapshot`), rounded; with `wall_s` (the search's
        wall time), `other_s`: the wall less the non-overlapping figures (module docstring)."""
        out: dict[str, Any] = {k: self.totals[k] - before[k] for k in (*FIGURES, *COUNTS)}
        each = self.bench_each[before["n_bench"]:]
        out["first_bench_s"] = each[0] if each else 0.0
        out["bench_max_s"] = max(each, default=0.0)
        out["bench_median_s"] = statistics.median(each) if each else 0.0
        out["batch_other_s"] = max(0.0, out["batch_s"] - out["codegen_s"] - out["precompile_s"] - out["bench_s"])
        if wall_s is not None:
            out["wall_s"] = wall_s
            out["other_s"] = max(0.0, wall_s - sum(out[k] for k in TOP))
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}


def describe(a: dict[str, Any]) -> str:
    """One line: where a search's wall time went (an account from `since`)."""
    def s(k: str) -> str:
        return f"{a.get(k, 0.0):.1f}"

    per = a["bench_median_s"]
    return (f"wall {s('wall_s')} s = baseline {s('baseline_s')} + batches {s('batch_s')} [{a['batches']} batches, "
            f"{a['configs']} configs: codegen {s('codegen_s')}, parallel compiles {s('precompile_s')}, timing "
            f"{s('bench_s')} ({a['timed']} timed, first {s('first_bench_s')}, median {per:.3f}, slowest "
            f"{a['bench_max_s']:.2f}; worker jobs {s('bench_job_s')} + accuracy {s('accuracy_s')})] + run-offs "
            f"{s('rebench_s')} + final {s('final_s')} + cleanup {s('cleanup_s')} + other {s('other_s')}; "
            f"{a['worker_starts']} worker(s) started")
