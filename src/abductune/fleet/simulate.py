"""A fleet on one host, simulated on the CPU: workers as threads of this process (`ThreadExecutor`),
each answering from the bundled recordings (replay) at the pace the recordings give, compiling
on its share of the host's cores and benchmarking one config at a time on its "GPU"
(`Simulated`). The dispatcher, the searches and the store are the real ones, so a simulated
fleet shows how the driver keeps the workers fed (tests/test_fleet_throughput.py,
benchmarks/gpu/fleet_throughput.py --sim) and gives the same rows as a serial replay tune."""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import socket
import threading
import time
from typing import Any, Iterator, Mapping, Sequence

from ..datasets.format import Dataset
from ..datasets.format import read_dataset as _read
from ..measure.base import Evaluator
from ..measure.replay import ReplayEvaluator
from ..measurement import Measurement
from .executor import Executor, WorkerLost
from .worker import FleetWorker, Job, Reply, Target


class Host:
    """One machine: its compile cores (shared by every worker on it), its Triton cache (a
    config compiled once is not compiled again, by any worker) and the recordings, read once."""

    def __init__(self, cores: int = 32):
        self.cores = cores
        self.slots = threading.BoundedSemaphore(cores)
        self._compiled: set[tuple] = set()
        self._datasets: dict[str, Dataset] = {}
        self._lock = threading.Lock()

    def read(self, path: Any) -> Dataset:
        """A recording, read once."""
        with self._lock:
            ds = self._datasets.get(str(path))
        if ds is None:
            ds = _read(path)
            with self._lock:
                ds = self._datasets.setdefault(str(path), ds)
        return ds

    def dataset(self, kernel: str, dims: Mapping[str, int]) -> Dataset:
        from ..datasets.bundled import find_bundled

        return self.read(find_bundled(kernel, dict(dims)))

    def compiled(self, key: tuple) -> bool:
        with self._lock:
            return key in self._compiled

    def compile(self, key: tuple, seconds: float) -> None:
        with self.slots:  # a core of the host
            time.sleep(seconds)
        with self._lock:
            self._compiled.add(key)


class SimulatedGPU(Evaluator):
    """One target on one simulated GPU: the recorded answers, after the recorded seconds (times
    `scale`). A batch's configs compile side by side on the worker's compile slots (each a core
    of the host) and each is benchmarked as soon as it compiled, one at a time (the live
    evaluator's overlap); a re-timing costs benchmark seconds only. `timing` keeps the live
    evaluator's phases (`compile_wait`, `bench`), which the fleet worker reports. It compiles
    nothing ahead (no `expect`)."""

    def __init__(self, sim: "Simulated", target: Target):
        self.sim = sim
        self.inner = ReplayEvaluator(sim.host.dataset(target.kernel, target.dims))
        self.space, self.problem = self.inner.space, self.inner.problem
        self._key = target.key
        self.timing: dict[str, float] = {}

    @property
    def clock(self) -> float:  # type: ignore[override]
        return self.inner.clock

    def _record(self, cfg: Mapping[str, Any]) -> Measurement | None:
        return self.inner._table.get(self.space.key(cfg))

    def _bench(self, seconds: float) -> float:
        with self.sim.gpu:
            time.sleep(seconds * self.sim.scale)
        return seconds * self.sim.scale

    def _compile(self, key: tuple, rec: Measurement) -> Measurement:
        self.sim.host.compile(key, rec.compile_s * self.sim.scale)
        return rec

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        t0 = time.perf_counter()
        bench = 0.0
        futs = []
        for c in configs:
            rec = self._record(c)
            key = (self._key, self.space.key(c))
            if rec is None or self.sim.host.compiled(key):
                f: cf.Future = cf.Future()
                f.set_result(rec)
            else:
                f = self.sim.pool().submit(self._compile, key, rec)
            futs.append(f)
        for f in cf.as_completed(futs):
            rec = f.result()
            if rec is not None and rec.ok:
                bench += self._bench(rec.bench_s)
        total = time.perf_counter() - t0
        self.timing["compile_wait"] = self.timing.get("compile_wait", 0.0) + total - bench
        self.timing["bench"] = self.timing.get("bench", 0.0) + bench
        return self.inner.evaluate(configs)

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        bench = 0.0
        for c in configs:
            rec = self._record(c)
            if rec is not None and rec.ok:
                bench += self._bench(rec.bench_s * max(1, rounds))
        self.timing["bench"] = self.timing.get("bench", 0.0) + bench
        cfgs = [c for c in configs if "impl" not in c]  # a run-off re-times the vendor's too: recorded
        got = iter(self.inner.remeasure(cfgs, rounds=rounds))
        return [self.inner.vendor_baseline() if "impl" in c else next(got) for c in configs]

    def vendor_baseline(self) -> Measurement:
        return self.inner.vendor_baseline()


class Simulated:
    """One simulated GPU's evaluator factory (`FleetWorker(factory=...)`): `compile_slots` of
    the host's cores for its compile pool, one benchmark at a time, the recorded seconds times
    `scale`."""

    def __init__(self, host: Host, compile_slots: int, scale: float = 1.0):
        self.host, self.compile_slots, self.scale = host, max(1, compile_slots), scale
        self.gpu = threading.Lock()
        self._pool: cf.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def pool(self) -> cf.ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = cf.ThreadPoolExecutor(self.compile_slots, thread_name_prefix="abductune-sim-compile")
            return self._pool

    def __call__(self, target: Target) -> Evaluator:
        return SimulatedGPU(self, target)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class ThreadExecutor(Executor):
    """`workers` simulated GPUs on one `Host`, as threads of this process: each a `FleetWorker`
    running one job at a time, with the host's cores split among them (as `ProcessExecutor`
    splits a node's cores among its workers' compile pools)."""

    name = "simulated GPUs (threads)"

    def __init__(self, workers: int, host: Host | None = None, *, scale: float = 1.0):
        self.n = workers
        self.host = host or Host()
        self.scale = scale
        self.sims: list[Simulated] = []
        self.workers: list[FleetWorker] = []
        self._pools: list[cf.ThreadPoolExecutor] = []

    def start(self) -> list[Any]:
        for i in range(self.n):
            sim = Simulated(self.host, self.host.cores // self.n, self.scale)
            w = FleetWorker(factory=sim)
            w.ident = f"{socket.gethostname()}:sim{i}"
            self.sims.append(sim)
            self.workers.append(w)
            self._pools.append(cf.ThreadPoolExecutor(1, thread_name_prefix=f"abductune-sim-gpu{i}"))
        return list(range(self.n))

    def describe(self, workers: Sequence[Any]) -> list[dict[str, Any]]:
        return [self.workers[w].describe() for w in workers]

    def submit(self, worker: Any, job: Job) -> Any:
        return self._pools[worker].submit(self.workers[worker].run, job)

    def wait(self, futures: Sequence[Any], timeout: float) -> list[Any]:
        return list(cf.wait(futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)[0])

    def result(self, future: Any) -> Reply:
        try:
            return future.result()
        except cf.CancelledError:
            raise WorkerLost("the simulated worker was shut down") from None

    def close(self, grace_s: float = 10.0) -> None:
        for p in self._pools:
            p.shutdown(wait=False, cancel_futures=True)
        for p in self._pools:
            p.shutdown(wait=True)
        for w, sim in zip(self.workers, self.sims):
            w.close()
            sim.close()


@contextlib.contextmanager
def datasets_from(host: Host) -> Iterator[None]:
    """Replay tunes in this process read each recording once, through `host`: a simulated
    driver then spends its time on the searches, as a live driver (which reads no recording)
    does, not on reading the same files again for each search."""
    from ..datasets import format as fmt

    def read(path: Any, *args: Any, **kw: Any) -> Dataset:
        return host.read(path) if not args and not kw else _read(path, *args, **kw)
    fmt.read_dataset = read  # type: ignore[assignment]
    try:
        yield
    finally:
        fmt.read_dataset = _read  # type: ignore[assignment]
