"""The compile pool: compile-only worker processes that fill Triton's cache and read registers,
spills and shared memory of each config, ahead of the benchmark (prefetch), with a timeout."""
from __future__ import annotations

import concurrent.futures as cf
import logging
import math
import os
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Mapping, Sequence

from ..problem import Problem
from ..space import config_id
from .forkserver import _server_context
from .replies import CompileResult

# the logger keeps live.py's name from before the split: the CLI's `WARNING name:` lines stay
log = logging.getLogger("abductune.measure.live")


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
        """Configs (`space.config_id`) submitted for the current problem."""
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
        return (kernel_name, problem.key(), config_id(config))

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
