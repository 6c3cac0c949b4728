"""Live evaluator: compile in parallel worker processes, benchmark in an isolated worker.

- Compilation: a spawn process pool (one CUDA context each, compile-only launches) fills
  Triton's on-disk cache and reads registers, spills and shared memory; per-config timeout.
- Benchmarking: one worker process owns the inputs, the reference output and an L2-flush
  buffer. A crash, a hang (timeout) or a sticky CUDA error kills only that worker; the
  parent records the failure, starts a new worker and goes on with the next config.
- Every candidate's output (poisoned before the run) is checked against the reference; a
  wrong result is a `wrong_result` measurement and never a winner.
- `remeasure(configs, rounds=n)` re-times configs interleaved (the Session's final run-off).

The processes it drives live beside it: `compile_pool.py` (`Compiler`), `bench_client.py`
(`BenchWorker`), `forkserver.py` (how both start) and `shared.py` (one of each per process).
"""
from __future__ import annotations

import logging
import os
import statistics
import time
from typing import Any, Mapping, Sequence

from ..measurement import Measurement
from ..problem import Problem
from ..space import Space, config_id
from .base import Evaluator
from .bench_client import BenchWorker, WorkerLost
from .compile_pool import Compiler
# the rest of the live machinery, importable from here as before the split
from .forkserver import prestart  # noqa: F401
from .replies import CompileResult
from .shared import close_shared, release_shared, shared_processes  # noqa: F401

log = logging.getLogger(__name__)


# A config whose first few timed runs are this much slower than the incumbent is not timed
# further: it cannot win, and a full median would only cost benchmark time.
EARLY_STOP = 0.25
# Kernels faster than this are timed in a CUDA graph (reps replayed at once, events as graph
# nodes): no host launch between flush and kernel, so host jitter cannot land in a sample.
GRAPH_BELOW_MS = 0.05


def stop_above_ms(incumbent_ms: float | None, threshold: float = EARLY_STOP) -> float | None:
    """The estimate past which a config is clearly slower than the incumbent (None: no
    incumbent yet). The threshold is far above the run-to-run noise we measured (a few %), so
    the true best is never cut (tests/test_live_policy.py checks it on the bundled data). The
    benchmark worker applies it to the median of its first 3 runs."""
    return None if incumbent_ms is None else incumbent_ms * (1 + threshold)


def should_stop_early(estimate_ms: float, incumbent_ms: float | None, threshold: float = EARLY_STOP) -> bool:
    """Whether a config estimated at `estimate_ms` (median of a few runs) is clearly slower
    than the incumbent: the rule the worker applies with `stop_above_ms`."""
    limit = stop_above_ms(incumbent_ms, threshold)
    return limit is not None and estimate_ms > limit


class LiveEvaluator(Evaluator):
    """Measures configs of a built-in kernel on the local GPU. Compilation of a batch runs in
    the pool while the configs already compiled are benchmarked (overlap); a config clearly
    slower than the best so far stops after a few runs (`should_stop_early`); NVML clock state
    is read with every batch and throttled measurements are flagged. `timing` says where the
    seconds went."""

    def __init__(self, kernel: Any, problem: Problem, *, compile_workers: int | None = None,
                 compile_timeout_s: float = 180.0, bench_timeout_s: float = 60.0, seed: int = 0,
                 target_ms: float = 25.0, min_reps: int = 5, max_reps: int = 100,
                 worker: BenchWorker | None = None, compiler: Compiler | None = None,
                 shared: bool = False, early_stop: bool = True, overlap: bool = True,
                 prefetch: int = 16, graph_below_ms: float | None = GRAPH_BELOW_MS):
        from .. import kernels
        from .clocks import Clocks

        t0 = time.perf_counter()
        self.spec = kernels.get(kernel) if isinstance(kernel, str) else kernel
        self.problem = problem
        self.space: Space = self.spec.space()
        self.clock = 0.0
        self.bench_timeout_s = bench_timeout_s
        self.opts = {"target_ms": target_ms, "min_reps": min_reps, "max_reps": max_reps,
                     "graph_below_ms": graph_below_ms}
        if shared and worker is None and compiler is None:
            worker, compiler = shared_processes(compile_workers)
            self._own_worker = self._own_compiler = False
        else:
            self._own_worker, self._own_compiler = worker is None, compiler is None
        self.worker = worker or BenchWorker()
        self.compiler = compiler or Compiler(compile_workers, compile_timeout_s,
                                             facts="triton" if early_stop else "ptxas")
        if self.compiler._pool is None:
            self.compiler.warm()  # pool start-up overlaps the worker's setup below
        self.prefetch = prefetch
        self.early_stop = early_stop
        self.overlap = overlap
        self.incumbent_ms: float | None = None
        self.compile_misses = 0
        self._expected: list[dict] = []
        self._later: list[dict] = []  # baselines: compiled ahead after the search's own configs
        self.timing: dict[str, float] = {}
        # per batch: compiles found done (ready), under way, or started; configs offered for
        # speculation; seconds the batch waited on compiles
        self.pipeline: dict[str, Any] = {"batches": 0, "configs": 0, "ready": 0, "under_way": 0, "new": 0,
                                         "speculated": 0, "batch_wait_s": []}
        self.clocks = Clocks()
        self.clock_log: list[dict[str, Any]] = []
        # the worker's start and setup (a process, torch, a CUDA context, the inputs) run in the
        # background while the first batch compiles; the first benchmark waits for it
        self.device = ""
        self._setup_error: BaseException | None = None
        setup = {"op": "setup", "kernel": self.spec.name, "problem": problem.to_dict(), "seed": seed}
        self._setup_msg = setup

        def do_setup() -> None:
            try:
                self.device = self.worker.request(setup, timeout=600).device
            except BaseException as e:  # noqa: BLE001 - re-raised where the worker is first needed
                self._setup_error = e
        import threading

        self._setup_thread: threading.Thread | None = threading.Thread(target=do_setup, daemon=True,
                                                                       name="abductune-bench-setup")
        self._setup_thread.start()
        self._add("setup", t0)

    def activate(self) -> None:
        """Make this evaluator's problem the one the benchmark worker holds. A worker shared by
        evaluators of several problems (a fleet worker's, taking batches of any shape) holds one
        problem's inputs at a time; a serial tune never switches, so this costs it nothing."""
        self._ready()
        if self.worker._setup_msg != self._setup_msg:
            self.worker.request(self._setup_msg, timeout=600)

    def _ready(self) -> None:
        """Wait for the background setup of the benchmark worker; raise what it raised."""
        if self._setup_thread is not None:
            t0 = time.perf_counter()
            self._setup_thread.join()
            self._setup_thread = None
            self._add("setup_wait", t0)
        if self._setup_error is not None:
            raise self._setup_error

    def _add(self, phase: str, t0: float) -> float:
        dt = time.perf_counter() - t0
        self.timing[phase] = self.timing.get(phase, 0.0) + dt
        return dt

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        t0 = time.perf_counter()
        state = self.clocks.read()
        out: list[Measurement | None] = [None] * len(configs)
        bench_s = [0.0]

        def on_done(i: int, comp: CompileResult) -> None:  # benchmark while the rest still compile
            b0 = time.perf_counter()
            out[i] = self._bench_one(dict(configs[i]), comp, state)
            bench_s[0] += self._add("bench", b0)
        after = self._speculation(configs)[:self.prefetch] if self.prefetch and self.overlap else []
        if self.overlap:
            self.compiler.compile(self.spec.name, configs, self.problem, on_done=on_done, after=after,
                                  busy_cap=self._busy_cap())
        else:  # the old way, kept to measure what overlap buys: compile all, then time all
            for i, comp in enumerate(self.compiler.compile(self.spec.name, configs, self.problem)):
                on_done(i, comp)
        for i, m in enumerate(out):
            if m is None:  # compile timed out: no callback came
                out[i] = Measurement(dict(configs[i]), "timeout", error="compile did not finish")
        total = time.perf_counter() - t0
        p = self.pipeline
        p["batches"] += 1
        p["configs"] += len(configs)
        for k, v in (getattr(self.compiler, "last_stats", None) or {}).items():
            p[k] = p.get(k, 0) + v
        p["speculated"] += len(after)
        p["batch_wait_s"].append(round(total - bench_s[0], 3))
        self.timing["compile_wait"] = self.timing.get("compile_wait", 0.0) + total - bench_s[0]
        self.clock += total
        if state is not None:
            self.clock_log.append(state.to_dict())
        return out  # type: ignore[return-value]

    def prefetch_hint(self, configs: Sequence[Mapping[str, Any]]) -> None:
        """Configs the caller will ask for later (the baselines): compiled ahead once the
        batches in hand and what the strategy expects next are queued."""
        if self.prefetch:
            self._later += [dict(c) for c in configs]

    def expect(self, configs: Sequence[Mapping[str, Any]]) -> None:
        """Configs the strategy expects to ask for next (it proposes ahead): the next batch
        compiles them on idle workers while this one is measured."""
        self._expected = [dict(c) for c in configs if self.space.is_valid(c)]

    def _busy_cap(self) -> int:
        """Speculative compiles stop where the compiles under way would take the cores the
        benchmark worker and this process need (timings of short kernels suffer first)."""
        return max(1, min(self.compiler.workers, (os.cpu_count() or 2) - 2))

    def _speculation(self, configs: Sequence[Mapping[str, Any]]) -> list[dict]:
        """What to compile ahead, most likely first: what the strategy said it expects, the
        baselines (measured at the end), then the single-parameter neighbours of this batch
        (what a local search asks next)."""
        asked = {config_id(c) for c in configs}
        out: list[dict] = []
        self._later = [c for c in self._later if config_id(c) not in self.compiler.prefetched]
        near = [n for c in configs for n in self.space.neighbours(c, 1)]
        for c in list(self._expected) + list(self._later) + near:
            k = config_id(c)
            if k not in asked:
                asked.add(k)
                out.append(dict(c))
        self._expected = []
        return out

    def bench_compiled(self, cfg: dict, comp: CompileResult) -> Measurement:
        """Benchmark one config whose compile result is `comp` (a sweep compiles everything first)."""
        return self._bench_one(cfg, comp)

    def _bench_one(self, cfg: dict, comp: CompileResult, state: Any = None) -> Measurement:
        base = dict(config=cfg, compile_s=float(comp.compile_s), registers=comp.registers, spills=comp.spills,
                    smem_bytes=comp.smem_bytes)
        if not comp.ok:
            return Measurement(status=comp.status, error=comp.error, **base)
        opts = dict(self.opts)
        if self.early_stop and self.incumbent_ms is not None:
            opts["stop_above_ms"] = stop_above_ms(self.incumbent_ms)
        try:
            self._ready()
            r = self.worker.request({"op": "bench", "config": cfg, "opts": opts}, self.bench_timeout_s)
        except WorkerLost as e:
            return Measurement(status=e.status, error=e.error, bench_s=self.bench_timeout_s, **base)
        extra: dict[str, Any] = {}
        if r.rel_err is not None:
            extra["rel_err"] = r.rel_err
        if base["registers"] is None and r.registers is not None:  # offline compile: read at launch
            base.update(registers=r.registers, spills=r.spills, smem_bytes=base["smem_bytes"] or r.smem_bytes)
            extra["spills_source"] = "triton"
        elif comp.spills_source != "ptxas":
            extra["spills_source"] = comp.spills_source
        if r.compiled_here:
            extra["compiled_at_launch"] = True
            self._note_miss()
        if r.early_stop:
            extra["early_stop"] = True
        if r.timing != "events":
            extra["timing"] = r.timing
        if state is not None:
            extra["sm_mhz"] = state.sm_mhz
            if state.throttled:
                extra["throttled"] = list(state.throttle)
        ok = r.status == "ok" and r.time_ms is not None
        if ok and not r.early_stop and (self.incumbent_ms is None or r.time_ms < self.incumbent_ms):
            self.incumbent_ms = r.time_ms
        ff, fb = self.problem.roofline(r.time_ms) if ok else (None, None)
        return Measurement(status=r.status, time_ms=r.time_ms, samples_ms=r.samples_ms, bench_s=float(r.bench_s),
                           error=r.error, extra=extra, frac_peak_flops=ff, frac_peak_bw=fb,
                           **base)

    def _note_miss(self) -> None:
        """A config the pool compiled was compiled again at its first launch. Twice means the
        offline cache key differs from the launch's (a Triton we do not know): fall back."""
        self.compile_misses += 1
        if self.compile_misses >= 2 and self.compiler.target is not None:
            self.compiler.use_cuda()

    vendor_name = "torch"
    remeasures_impls = True  # {"impl": "torch"} joins interleaved re-timings (the worker launches torch)

    def vendor_baseline(self) -> Measurement:
        """Time the torch implementation (cuBLAS for matmul) on the same inputs."""
        self._ready()
        r = self.worker.request({"op": "bench", "config": None, "opts": self.opts}, self.bench_timeout_s)
        return Measurement({"impl": "torch"}, status=r.status, time_ms=r.time_ms, samples_ms=r.samples_ms,
                           bench_s=float(r.bench_s), error=r.error)

    baseline = vendor_baseline

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        """Re-time already compiled configs: one after another for a single round, or
        interleaved over `rounds` (a run-off: A B C A B C ..., so drift hits all alike). New
        measurements each time; nothing measured earlier is changed."""
        configs = [dict(c) for c in configs]
        if rounds <= 1 or len(configs) < 2:
            return self.evaluate(configs)
        t0 = time.perf_counter()
        try:
            self._ready()
            r = self.worker.request({"op": "interleaved", "configs": configs, "rounds": rounds, "reps": 10,
                                     "graph_below_ms": self.opts["graph_below_ms"]},
                                    self.bench_timeout_s * len(configs))
        except WorkerLost as e:
            log.warning("interleaved re-measurement failed: %s", e.error)
            return [Measurement(c, status=e.status, error=e.error) for c in configs]
        finally:
            self.clock += time.perf_counter() - t0
        out = []
        for c, s in zip(configs, r.samples or [[]] * len(configs)):
            t = statistics.median(s) if s else None
            ff, fb = self.problem.roofline(t)
            out.append(Measurement(c, "ok" if t else "runtime_error", time_ms=t, samples_ms=tuple(s),
                                   frac_peak_flops=ff, frac_peak_bw=fb,
                                   error="" if t else (r.error or "no samples")))
        return out

    def close(self) -> None:
        if self._setup_thread is not None:
            self._setup_thread.join(timeout=600)  # never close the worker under a setup in flight
        if self._own_worker:
            self.worker.close()
        if self._own_compiler:
            self.compiler.shutdown()
