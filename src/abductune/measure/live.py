"""Live evaluator: compile in parallel worker processes, benchmark in an isolated worker.

- Compilation: a spawn process pool (one CUDA context each, compile-only launches) fills
  Triton's on-disk cache and reads registers, spills and shared memory; per-config timeout.
- Benchmarking: one worker process owns the inputs, the reference output and an L2-flush
  buffer. A crash, a hang (timeout) or a sticky CUDA error kills only that worker; the
  parent records the failure, starts a new worker and goes on with the next config.
- Every candidate's output (poisoned before the run) is checked against the reference; a
  wrong result is a `wrong_result` measurement and never a winner.
- `remeasure(configs, rounds=n)` re-times configs interleaved (the Session's final run-off).
"""
from __future__ import annotations

import concurrent.futures as cf
import logging
import math
import multiprocessing as mp
import os
import statistics
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Mapping, Sequence

from ..errors import AbductuneError
from ..measurement import Measurement
from ..problem import Problem
from ..space import Space
from .base import Evaluator
from .replies import CompileResult

log = logging.getLogger(__name__)


class WorkerLost(Exception):
    def __init__(self, status: str, error: str):
        super().__init__(error)
        self.status = status
        self.error = error


class BenchWorker:
    """Parent-side handle of the benchmark process: request/reply with a timeout, restart."""

    def __init__(self, start_timeout: float = 120.0):
        self._ctx = _server_context()
        self.proc: Any = None
        self.conn: Any = None
        self.start_timeout = start_timeout
        self.restarts = 0
        self._setup_msg: dict | None = None

    def _start(self) -> None:
        from .worker import bench_server

        parent, child = self._ctx.Pipe()
        self.proc = self._ctx.Process(target=bench_server, args=(child, dict(os.environ), list(sys.path)),
                                      daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        if not parent.poll(self.start_timeout):
            self.kill()
            raise AbductuneError("the benchmark worker did not start (no GPU, or CUDA hangs?)")
        try:
            hello = parent.recv()
        except EOFError:
            code = self.proc.exitcode
            self.kill()
            raise AbductuneError(f"the benchmark worker exited while starting (exit code {code}); "
                                 "a script that starts workers needs an `if __name__ == '__main__':` "
                                 "guard") from None
        if not hello.get("ready"):
            self.kill()
            raise AbductuneError(f"the benchmark worker failed to start: {hello.get('error')}")
        if self._setup_msg is not None:
            self._call(self._setup_msg, self.start_timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
        if self.proc is not None and self.proc.pid is not None:
            self.proc.join(5)
        self.proc = None

    def _call(self, msg: dict, timeout: float) -> dict:
        try:
            self.conn.send(msg)
            if not self.conn.poll(timeout):
                self.kill()
                raise WorkerLost("timeout", f"no answer within {timeout:.0f} s (hang?); worker restarted")
            reply = self.conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            code = self.proc.exitcode if self.proc is not None else None
            self.kill()
            raise WorkerLost("runtime_error", f"benchmark worker died (exit code {code}); restarted") from None
        if getattr(reply, "sticky", False):
            self.proc.join(10)
            self.kill()
        return reply

    def ensure_started(self) -> None:
        """Start the process now (torch, a CUDA context and the flush buffer) rather than at
        the first request."""
        if self.proc is None or not self.proc.is_alive():
            self._start()

    def request(self, msg: dict, timeout: float) -> dict:
        if self.proc is None or not self.proc.is_alive():
            if self.proc is not None or self.conn is not None:
                self.restarts += 1
            self._start()
        if msg["op"] == "setup":
            self._setup_msg = msg
        return self._call(msg, timeout)

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send({"op": "stop"})
                self.proc.join(5)
            except (BrokenPipeError, OSError):
                pass
        self.kill()


def _config_id(config: Mapping[str, Any]) -> str:
    """How the compile pool names a config: the evaluator's speculation checks against the
    pool's `prefetched` by the same name."""
    return repr(sorted(dict(config).items()))


class Compiler:
    """Parallel compile-only pool (forked from the workers' server). Hung compiles time out and
    a broken pool is rebuilt; a compile whose worker died is tried afresh when asked again.

    `target` (arch, warp size): workers compile offline for it, through Triton's own launch
    path with a stand-in driver and stand-in tensors: no CUDA context, no GPU buffers, and the
    same cache key as the benchmark worker's launch. "auto" reads the GPU's architecture (NVML);
    None: every worker creates a CUDA context and launches on real buffers (the fallback)."""

    def __init__(self, workers: int | None = None, timeout_s: float = 180.0, facts: str = "ptxas",
                 target: Any = "auto"):
        from .target import compile_target

        self.target: tuple[int, int] | None = compile_target() if target == "auto" else target
        self.workers = workers or max(1, (os.cpu_count() or 2))
        self.timeout_s = timeout_s
        self._pool: cf.ProcessPoolExecutor | None = None
        # "ptxas": spills as ptxas spill-store bytes (a second ptxas run per config, what the
        # datasets record); "triton": Triton's own count, free (what a tune needs to decide)
        self.facts = facts
        # every compile submitted, by (kernel, problem, config): a config asked for while its
        # prefetch is still compiling waits for that compile instead of starting a second one
        self._futures: dict[tuple, cf.Future] = {}
        self._problem_key: Any = None
        self.last_stats: dict[str, int] = {}  # the last compile's configs: ready, under way, new
        import threading

        self._lock = threading.RLock()  # the pool is started by warm()'s thread or the first compile
        self._warming = False

    @property
    def prefetched(self) -> set[str]:
        """Configs (`_config_id`) submitted for the current problem."""
        with self._lock:
            return {k[2] for k in self._futures if k[0] != "warm"}

    def warm(self) -> None:
        """Start every worker now, in the background (the first start waits for the fork
        server's imports), so the pool's start-up overlaps the benchmark worker's and the
        caller's own preparations instead of delaying them; a compile waits for it."""
        import threading

        from .worker import warm_task

        def start() -> None:
            with self._lock:
                pool = self._get_pool()
                for i in range(self.workers):
                    self._futures[("warm", i, "")] = pool.submit(warm_task)
        if self._pool is None and not self._warming:
            self._warming = True
            threading.Thread(target=start, daemon=True, name="abductune-compile-pool").start()

    def busy(self) -> int:
        """Compiles submitted and not finished (running or queued)."""
        with self._lock:
            return sum(not f.done() for f in self._futures.values())

    def idle(self) -> int:
        """Workers with nothing submitted to them (a rough count: the pool does not say)."""
        return max(0, self.workers - self.busy())

    def _key(self, kernel_name: str, problem: Problem, config: Mapping[str, Any]) -> tuple:
        return (kernel_name, problem.key(), _config_id(config))

    def _submit(self, kernel_name: str, config: Mapping[str, Any], problem: Problem) -> tuple[cf.Future, bool]:
        """The compile of config: the one already submitted, or a new one (second item True)."""
        with self._lock:
            return self._submit_locked(kernel_name, config, problem)

    def _submit_locked(self, kernel_name: str, config: Mapping[str, Any], problem: Problem) -> tuple[cf.Future, bool]:
        from .worker import compile_task

        pkey = (kernel_name, problem.key())
        if pkey != self._problem_key:  # a new problem: forget the last one's futures
            self._futures = {k: f for k, f in self._futures.items() if k[0] == "warm" and not f.done()}
            self._problem_key = pkey
        key = self._key(kernel_name, problem, config)
        fut = self._futures.get(key)
        if fut is not None:
            return fut, False
        args = (compile_task, kernel_name, dict(config), problem.to_dict(), self.facts)
        try:
            fut = self._get_pool().submit(*args)
        except BrokenProcessPool:  # a worker died hard earlier: start a fresh pool
            self.shutdown(kill=True)
            self._problem_key = pkey
            fut = self._get_pool().submit(*args)
        self._futures[key] = fut
        return fut, True

    def prefetch(self, kernel_name: str, configs: Sequence[Mapping[str, Any]], problem: Problem,
                 limit: int | None = None) -> int:
        """Compile configs in the background, so a later `compile` of them finds them done (or
        under way): the search proposes ahead while the GPU measures. At most `limit` new."""
        n = 0
        for c in configs:
            if limit is not None and n >= limit:
                break
            n += self._submit(kernel_name, c, problem)[1]
        return n

    def _get_pool(self) -> cf.ProcessPoolExecutor:
        with self._lock:
            return self._start_pool()

    def _start_pool(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            from .worker import _init_compile_worker

            self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=_server_context(),
                                                initializer=_init_compile_worker,
                                                initargs=(self.target, dict(os.environ), list(sys.path)))
        return self._pool

    def use_cuda(self) -> None:
        """Fall back to CUDA-context workers (the benchmark worker found that binaries compiled
        offline were not reused: Triton computed another cache key)."""
        if self.target is None:
            return
        log.warning("configs compiled offline for sm_%d were compiled again at launch; compile "
                    "workers now use a CUDA context each (set ABDUCTUNE_COMPILE_MODE=cuda to start so)",
                    self.target[0])
        self.shutdown()
        self.target = None

    def compile(self, kernel_name: str, configs: Sequence[Mapping[str, Any]], problem: Problem,
                on_done: Callable[[int, CompileResult], None] | None = None,
                after: Sequence[Mapping[str, Any]] = (), busy_cap: int | None = None) -> list[CompileResult]:
        """Compile configs (reusing compiles already submitted), calling on_done(i, result) as
        each finishes; `after`: configs to prefetch once these are queued, while fewer than
        `busy_cap` compiles (default: the workers) are under way."""
        self._fit_workers(problem)
        futs: dict[cf.Future, list[int]] = {}
        stats = {"ready": 0, "under_way": 0, "new": 0}
        for i, c in enumerate(configs):
            fut, new = self._submit(kernel_name, c, problem)
            stats["new" if new else "ready" if fut.done() else "under_way"] += 1
            futs.setdefault(fut, []).append(i)
        self.last_stats = stats
        if after:
            room = (self.workers if busy_cap is None else busy_cap) - self.busy()
            if room > 0:
                self.prefetch(kernel_name, after, problem, room)
        results: list[CompileResult | None] = [None] * len(configs)
        # every config gets timeout_s once a worker is free for it
        deadline = time.monotonic() + self.timeout_s * math.ceil(len(configs) / self.workers) + 30
        try:
            for f in cf.as_completed(futs, timeout=max(1.0, deadline - time.monotonic())):
                try:
                    res = f.result()
                except Exception as e:  # noqa: BLE001 - a worker process died
                    res = CompileResult("compile_error", error=f"compile worker died: {e}")
                    with self._lock:  # not an answer to keep: asked again, it compiles afresh
                        self._futures = {k: v for k, v in self._futures.items() if v is not f}
                for i in futs[f]:
                    results[i] = res
                    if on_done:
                        on_done(i, res)
        except cf.TimeoutError:
            self.shutdown(kill=True)
        for i, r in enumerate(results):
            if r is None:
                results[i] = CompileResult("timeout", self.timeout_s, error=f"compile took over {self.timeout_s:.0f} s")
        return results  # type: ignore[return-value]

    def _fit_workers(self, problem: Problem) -> None:
        """Each CUDA-context compile worker holds one copy of the problem's buffers on the GPU:
        use no more workers than half the free memory holds (a 4 GB softmax x 16 workers ran
        out). Offline workers hold no GPU memory."""
        if self.target is not None:
            return
        try:
            import torch

            free, _ = torch.cuda.mem_get_info()
        except Exception:  # noqa: BLE001 - no GPU visible here: keep the configured count
            return
        need = max(problem.min_bytes, 1.0) * 1.25 + 600e6  # buffers + a CUDA context
        fit = max(1, int(0.5 * free // need))
        if fit < self.workers:
            log.info("compiling with %d workers (GPU memory), not %d", fit, self.workers)
            self.shutdown()
            self.workers = fit

    def shutdown(self, kill: bool = False) -> None:
        self._futures = {}
        self._warming = False
        self._problem_key = None
        if self._pool is None:
            return
        if kill:
            for p in list(getattr(self._pool, "_processes", {}).values()):
                p.kill()
        self._pool.shutdown(wait=not kill, cancel_futures=True)
        self._pool = None


def _server_context() -> Any:
    """Workers fork from a server that imported torch, Triton and the kernels once and never
    touched CUDA (forkserver with preload): 16 compile workers and the benchmark worker start
    in about one import's time instead of 17 imports contending for the CPU. Each gets the
    parent's current environment and sys.path at start (the server holds the ones it started
    with). Spawn where there is no forkserver (Windows)."""
    try:
        ctx = mp.get_context("forkserver")
    except ValueError:
        return mp.get_context("spawn")
    ctx.set_forkserver_preload(["abductune.measure.worker_preload"])
    return ctx


def prestart() -> None:
    """Start the workers' fork server now, so its imports run while this process does its
    own (a live tune calls this first thing when a GPU is visible)."""
    ctx = _server_context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


_SHARED: dict[str, Any] = {}


def shared_processes(compile_workers: int | None = None) -> tuple["BenchWorker", "Compiler"]:
    """One benchmark worker and one compile pool per process, kept across shapes and kernels
    (starting them costs seconds: a CUDA context each). Closed at exit."""
    if "worker" not in _SHARED:
        import atexit

        _SHARED["worker"] = BenchWorker()
        _SHARED["compiler"] = Compiler(compile_workers)
        atexit.register(close_shared)
    return _SHARED["worker"], _SHARED["compiler"]


def release_shared() -> None:
    """Free the shared benchmark worker's problem buffers (GPU memory) and keep the worker:
    what a daemon does between commands. The next tune's setup allocates its own."""
    w = _SHARED.get("worker")
    if w is not None and w.proc is not None and w.proc.is_alive():
        try:
            w.request({"op": "release"}, timeout=30)
            w._setup_msg = None  # a restart must not set the released problem up again
        except WorkerLost as e:
            log.warning("releasing the benchmark worker's buffers failed: %s", e.error)


def close_shared(kill: bool = False) -> None:
    """Stop the shared workers; `kill`: without waiting for a benchmark or compile under way
    (a cancelled command's). The next live tune starts new ones."""
    w, c = _SHARED.pop("worker", None), _SHARED.pop("compiler", None)
    if w is not None and kill:
        w.kill()
    elif w is not None:
        w.close()
    if c is not None:
        c.shutdown(kill=kill)


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
        asked = {_config_id(c) for c in configs}
        out: list[dict] = []
        self._later = [c for c in self._later if _config_id(c) not in self.compiler.prefetched]
        near = [n for c in configs for n in self.space.neighbours(c, 1)]
        for c in list(self._expected) + list(self._later) + near:
            k = _config_id(c)
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
