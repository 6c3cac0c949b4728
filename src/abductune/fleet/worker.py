"""The per-GPU worker of a fleet: what runs on each GPU, whatever starts it (a Ray actor, a
local process). It holds one evaluator per problem (the live evaluator as `tune` uses it, its
compile pool and benchmark worker shared by every problem it serves), runs one job at a time,
and tags each measurement with the GPU that took it. It keeps no store: the driver does."""
from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..measure.base import Evaluator
from ..measurement import Measurement

OPS = ("evaluate", "remeasure", "vendor", "probe")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    """What a worker builds an evaluator for: a kernel on a shape, live or replayed, with the
    live evaluator's options (a sweep's: no early stop, its own repetitions)."""

    kernel: str
    dims: Mapping[str, int]
    mode: str = "live"  # live | replay
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple:
        return (self.kernel, tuple(sorted(self.dims.items())), self.mode,
                tuple(sorted((k, repr(v)) for k, v in self.options.items())))


@dataclass
class Job:
    """One piece of work for one worker. `op`: evaluate (first measurements), remeasure
    (re-time, interleaved over `rounds`), vendor (the vendor library's time) or probe
    (compile, then re-time on a fresh evaluator whose clock counts for nothing: calibration)."""

    target: Target
    op: str
    configs: list[dict]
    rounds: int = 1
    expect: list[dict] = field(default_factory=list)  # what the strategy expects to ask next
    incumbent_ms: float | None = None  # the search's best so far (a live evaluator stops early above it)
    later: list[dict] = field(default_factory=list)  # what the search measures at its end (baselines)


@dataclass
class Reply:
    measurements: list[Measurement]
    clock: float  # evaluator seconds the job cost (compile + benchmark; simulated in replay)
    worker: str = ""
    # where the worker's seconds went in this job: "job_s" (all of it), "new_evaluator_s",
    # "switch_s" (the benchmark worker set up for another problem), the live evaluator's own
    # phases ("compile_wait_s", "bench_s", ...); counts: "switches", "speculation_dropped"
    stats: dict[str, float] = field(default_factory=dict)


Factory = Callable[[Target], Evaluator]


def build_evaluator(target: Target) -> Evaluator:
    """The evaluator `tune` would use for this target: a replay of the bundled dataset, or the
    live evaluator on this process's GPU with the shared compile pool and benchmark worker
    (its compile pool sized to this GPU's share of the node's cores)."""
    if target.mode == "replay":
        from ..datasets.bundled import find_bundled
        from ..datasets.format import read_dataset
        from ..measure.replay import ReplayEvaluator

        return ReplayEvaluator(read_dataset(find_bundled(target.kernel, dict(target.dims))))
    from .. import kernels
    from ..measure.live import LiveEvaluator
    from ..measure.target import local_hardware

    spec = kernels.get(target.kernel)
    problem = spec.problem(dict(target.dims), local_hardware())
    opts = {"shared": True, "compile_workers": cores_per_gpu(), **dict(target.options)}
    _size_compile_pool(int(opts["compile_workers"]))
    return LiveEvaluator(spec, problem, **opts)


def _size_compile_pool(workers: int) -> None:
    """The shared compile pool takes the size the first evaluator asks for (a sweep's own
    `compile_workers`), as before the warm-up (`warm_up`) made its handle, not yet its
    processes, ahead of every evaluator."""
    from ..measure.shared import shared_processes

    _, compiler = shared_processes(workers)
    if compiler._pool is None and not compiler._warming:
        compiler.workers = workers


def warm_up() -> None:
    """Start what every live job of this GPU's worker needs, before the first job: the fork
    server (torch, Triton and the kernels imported once) and the benchmark worker (a process
    with its CUDA context). They start while the driver prepares (the slow-GPU probe, the
    searches' seeds), not inside the first job, which would wait seconds for them."""
    from ..measure.forkserver import prestart
    from ..measure.shared import shared_processes

    prestart()
    bench, _ = shared_processes(cores_per_gpu())
    bench.ensure_started()


CORES_ENV = "ABDUCTUNE_FLEET_CORES"  # set by an executor that knows how many workers share the node


def cores_per_gpu() -> int:
    """The compile workers this GPU's worker gets: `ABDUCTUNE_FLEET_CORES` where the executor
    set it (local processes: the node's cores over its workers), else the node's cores over all
    of its GPUs. NVML is asked for every GPU of the node: a worker sees only its own through
    CUDA_VISIBLE_DEVICES, and counting that one gave every worker all the cores (two GPUs'
    workers started twice as many compile processes as the node has cores)."""
    try:
        return max(1, int(os.environ[CORES_ENV]))
    except (KeyError, ValueError):
        pass
    try:
        import pynvml

        pynvml.nvmlInit()
        gpus = int(pynvml.nvmlDeviceGetCount()) or 1
    except Exception:  # noqa: BLE001 - NVML missing: assume one GPU
        gpus = 1
    return max(2, (os.cpu_count() or 2) // gpus)


class FleetWorker:
    """One GPU's worker. `factory` builds the evaluator of a target (default:
    `build_evaluator`); evaluators are kept per target, the least recently used closed past
    `keep` (at least the searches a worker serves at once: the driver opens every search of
    a suite, and an evaluator closed and made again costs a benchmark setup). `hardware` and
    `toolchain`: the GPU this worker stands for, instead of the one it finds (tests: replay
    workers on CPUs standing in for an H100 and an H200). Where it has a GPU, `describe`
    starts the live evaluator's processes in the background (`warm_up`); a job waits for them."""

    def __init__(self, factory: Factory | None = None, keep: int = 64, hardware: Mapping[str, Any] | None = None,
                 toolchain: str = ""):
        self.factory = factory or build_evaluator
        self.keep = keep
        self.stand_in = dict(hardware) if hardware is not None else None
        self.stand_in_toolchain = toolchain
        self._evaluators: OrderedDict[tuple, Evaluator] = OrderedDict()
        self._held: tuple | None = None  # the problem its benchmark worker and compile pool hold
        self._prefetch_cap: dict[tuple, int] = {}
        self._warming: threading.Thread | None = None
        device = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        host = socket.gethostname()
        self.ident = f"{host}:cuda{device}" if device else f"{host}:pid{os.getpid()}"

    def describe(self) -> dict[str, Any]:
        """Who this worker is: host, process, GPU (its hardware record and toolchain key, which
        make the problems it may measure), or no GPU (replay only)."""
        from ..hardware import toolchain_key

        if self.stand_in is not None:
            self._warm(False)
            return {"ident": self.ident, "host": socket.gethostname(), "pid": os.getpid(), "device": "",
                    "hardware": self.stand_in, "toolchain": self.stand_in_toolchain, "toolchain_info": {}}
        hw = None
        try:
            from ..measure.target import local_hardware, visible_gpu

            if visible_gpu() is not None or os.environ.get("CUDA_VISIBLE_DEVICES"):
                hw = local_hardware().to_dict()
        except Exception:  # noqa: BLE001 - no GPU here: a replay worker
            hw = None
        self._warm(hw is not None)
        info: dict[str, Any] = {}
        if hw is not None:
            from ..hardware import toolchain

            info = toolchain()
        return {"ident": self.ident, "host": socket.gethostname(), "pid": os.getpid(),
                "device": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "hardware": hw,
                "toolchain": toolchain_key(info) if hw is not None else "", "toolchain_info": info}

    def _evaluator(self, target: Target) -> Evaluator:
        k = target.key
        ev = self._evaluators.get(k)
        if ev is None:
            ev = self._evaluators[k] = self.factory(target)
            while len(self._evaluators) > self.keep:
                _, old = self._evaluators.popitem(last=False)
                old.close()
        self._evaluators.move_to_end(k)
        return ev

    def run(self, job: Job) -> Reply:
        """Run one job; every measurement comes back tagged with this worker's GPU."""
        if job.op not in OPS:
            raise ValueError(f"unknown fleet job op {job.op!r}; one of {OPS}")
        t0 = time.perf_counter()
        self._warmed()  # the first job waits for the warm-up: counted in its job_s, and apart
        warm_s = time.perf_counter() - t0
        stats: dict[str, float] = {"warm_wait_s": warm_s} if warm_s > 0.001 else {}
        if job.op == "probe":
            return self._probe(job, stats)
        fresh = job.target.key not in self._evaluators
        ev = self._evaluator(job.target)
        if fresh:
            stats["new_evaluator_s"] = time.perf_counter() - t0
        before = dict(getattr(ev, "timing", None) or {})
        switching = job.target.key != self._held
        t1 = time.perf_counter()
        if switching:
            stats["switches"] = 1.0
            left = self._evaluators.get(self._held) if self._held is not None else None
            shared = getattr(ev, "compiler", None)
            if left is not None and shared is not None and getattr(left, "compiler", None) is shared:
                stats["speculation_dropped"] = float(_drop_speculation(ev))
        activate = getattr(ev, "activate", None)
        if activate is not None:  # a benchmark worker shared by several problems holds one at a time
            activate()
        if switching:
            stats["switch_s"] = time.perf_counter() - t1
        self._held = job.target.key
        if job.incumbent_ms is not None and hasattr(ev, "incumbent_ms"):
            ev.incumbent_ms = min(x for x in (ev.incumbent_ms, job.incumbent_ms) if x is not None)
        if job.later:
            ev.prefetch_hint(job.later)
        clock0 = ev.clock
        self._speculate_only_asked(ev, job)
        if job.op == "evaluate":
            if hasattr(ev, "expect"):  # an empty list too: nothing expected from an earlier job lingers
                ev.expect(job.expect)
            ms = ev.evaluate(job.configs)
        elif job.op == "remeasure":
            ms = ev.remeasure(job.configs, rounds=job.rounds)
        else:
            vb = getattr(ev, "vendor_baseline", None)
            ms = [vb() if vb is not None else Measurement({"impl": "torch"}, "pruned",
                                                          error="no vendor implementation here")]
        for k, v in (getattr(ev, "timing", None) or {}).items():
            if k != "setup" and v - before.get(k, 0.0) > 0:
                stats[f"{k}_s"] = v - before.get(k, 0.0)
        stats["job_s"] = time.perf_counter() - t0
        return Reply([self._tag(m) for m in ms], ev.clock - clock0, self.ident, stats)

    def _warm(self, gpu: bool) -> None:
        """Start the warm-up in the background: the factory's own (`warm`, a simulated GPU's),
        or the live evaluator's processes where this worker has a GPU and builds live
        evaluators (a replay worker starts nothing)."""
        warm = getattr(self.factory, "warm", None)
        if warm is None and gpu and self.factory is build_evaluator:
            warm = warm_up
        if warm is not None and self._warming is None:
            self._warming = threading.Thread(target=_quietly, args=(warm,), daemon=True,
                                             name="abductune-fleet-warm")
            self._warming.start()

    def _warmed(self) -> None:
        """Wait for the warm-up started at `describe` (a job must not start the benchmark
        worker a second time beside it)."""
        if self._warming is not None:
            self._warming.join()

    def _speculate_only_asked(self, ev: Evaluator, job: Job) -> None:
        """Compile ahead only what the search said it asks next (`expect`) and at its end
        (`later`), not the batch's neighbours a serial tune adds: a fleet worker serves several
        searches in turn, and guessed neighbours of one take the compile pool (and the cores
        beside the benchmark) from the configs the others asked for."""
        if not isinstance(getattr(ev, "prefetch", None), int):
            return
        cap = self._prefetch_cap.setdefault(job.target.key, ev.prefetch)  # the evaluator's own setting
        ev.prefetch = min(cap, len(job.expect) + len(job.later))

    def _probe(self, job: Job, stats: dict[str, float]) -> Reply:
        """`probe_s` in its stats: all of it (warm-up wait, evaluator, setup, compile, timing)."""
        start = time.perf_counter()
        ev = self.factory(job.target)
        try:
            activate = getattr(ev, "activate", None)
            if activate is not None:
                activate()
                self._held = None  # the benchmark worker now holds the probe's own setup
            t0 = time.perf_counter()
            ev.evaluate(job.configs)  # compiled (and warmed) first
            ms = ev.remeasure(job.configs, rounds=max(2, job.rounds))
            t1 = time.perf_counter()
            return Reply([self._tag(m) for m in ms], t1 - t0, self.ident,
                         {**stats, "probe_s": t1 - start + stats.get("warm_wait_s", 0.0)})
        finally:
            ev.close()

    def _tag(self, m: Measurement) -> Measurement:
        return m.replace(extra={**m.extra, "gpu": self.ident})

    def close(self) -> None:
        """Close its evaluators and the live evaluator's processes of this process (compile
        pool, benchmark worker), so the process can exit: a process pool left open in a
        worker process keeps that process from ever exiting (it waits for the pool's
        workers, which wait for work)."""
        while self._evaluators:
            _, ev = self._evaluators.popitem()
            try:
                ev.close()
            except Exception:  # noqa: BLE001 - closing the rest matters more
                pass
        shared = sys.modules.get("abductune.measure.shared")  # loaded only where a live evaluator ran
        if shared is not None:
            shared.close_shared()


def _drop_speculation(ev: Evaluator) -> int:
    """Cancel the compiles a live evaluator's shared pool holds for the problem it leaves that
    have not started (speculation: what the last search might ask next). The pool keeps the
    futures of one problem at a time and forgets the others' without cancelling them, so in a
    fleet, where a worker switches problems at almost every job, each job's speculative
    compiles queued up ahead of the next job's own (first in, first out) and counted for
    nothing in the pool's busy count. Compiles under way finish into Triton's cache. Returns
    how many were dropped. (Belongs in `measure.compile_pool.Compiler`, which forgets them.)"""
    compiler = getattr(ev, "compiler", None)
    futures, lock = getattr(compiler, "_futures", None), getattr(compiler, "_lock", None)
    if not isinstance(futures, dict) or lock is None:
        return 0
    with lock:
        dropped = sum(1 for k, f in list(compiler._futures.items()) if k[0] != "warm" and f.cancel())
        if dropped:  # a cancelled future left there would read as a failed compile when asked again
            compiler._futures = {k: f for k, f in compiler._futures.items() if not f.cancelled()}
    return dropped


def _quietly(warm: Callable[[], None]) -> None:
    """A warm-up that fails leaves the error to the first job, which meets it again and
    reports it where it belongs (on the measurements)."""
    try:
        warm()
    except Exception as e:  # noqa: BLE001
        log.warning("fleet worker warm-up failed (the first job retries): %s: %s", type(e).__name__, e)
