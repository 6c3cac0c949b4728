"""One Helion benchmark worker kept across abductune's searches in a process (issue 29).

Helion times each config in a spawned worker process (`BenchmarkWorker`: a killable
interpreter, restarted after a timeout, a crash or a sticky CUDA error). Each search's
benchmark provider makes its own and shuts it down when the search ends, so every search
waits for a fresh interpreter to import torch and Helion and start CUDA (14-15 s of a 24 s
search on the H100). Helion has no setting or public hook that keeps one between searches:
`autotune_benchmark_subprocess=False` drops the worker (and its isolation) altogether.

abductune keeps the worker instead. At the end of a search (`give`) the provider's worker,
if it is alive and usable, is taken out of the provider before Helion's cleanup would shut
it down, its per-search state is dropped (`forget`), and it waits here; the next search's
provider is handed it (`take`). The isolation is Helion's own: the same class runs the same
jobs with the same timeouts, kill and restart; a worker already runs every config of one
search one after another, and what a job leaves behind in it is what Helion clears between
configs (the kernel module is unloaded after each job), except two caches keyed by a
search's temporary files (its arguments and accuracy baseline, GPU tensors), which `forget`
clears. A kept worker that died is restarted by Helion on its next job.

Helion points Triton's compile cache at a temporary directory for each search (its
"ephemeral" cache: `TRITON_CACHE_DIR`, `CUTE_DSL_CACHE_DIR` for CuTe, set in the parent's
environment for the search and deleted after it). Helion's parallel precompiles write each
config's binary there, and its worker, spawned during that search, inherits the variable and
loads the binary. A worker kept from an earlier search still named the earlier search's
directory, deleted by then, so it found none of the new search's binaries and compiled each
config again itself, one after another (and left those files in a directory no one removes).
That fits session 16's H100 reports: timing a config took 0.2-1.4 s (per-phase medians) in
every search that reused a worker against 0.05-0.17 s in each process's first. So `take`
copies those variables from this process into a reused worker (`sync_environ`) before the
search uses it and reads them back; a worker that does not take them is shut down and a fresh
one spawned.

The kept worker holds a CUDA context while idle, so it is shut down after
`ABDUCTUNE_HELION_WORKER_IDLE_S` seconds without a search (default 300; 0 keeps none, so
every search starts its own, as Helion's do), by `release()`, and at interpreter exit.
Helion is imported only inside functions.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import threading
import time
from typing import Any, Callable, Mapping

log = logging.getLogger(__name__)

IDLE_ENV = "ABDUCTUNE_HELION_WORKER_IDLE_S"
DEFAULT_IDLE_S = 300.0
FORGET_TIMEOUT_S = 30.0
# the variables Helion sets in this process for one search and its worker must see (module docstring)
# (and whether it times configs as CUDA graphs: `helion_measure.graph_timing`)
SYNCED_ENV = ("TRITON_CACHE_DIR", "CUTE_DSL_CACHE_DIR", "HELION_BENCHMARK_CUDAGRAPH")
# run in the worker by `exec` (a builtin, so the job pickles without any module of abductune's)
_SET_ENV = ("import os\n"
            "for k, v in values.items():\n"
            "    if v is None:\n"
            "        os.environ.pop(k, None)\n"
            "    else:\n"
            "        os.environ[k] = v\n")


def idle_seconds(env: Any = os.environ) -> float:
    """How long a kept worker waits for the next search (0: none is kept)."""
    text = env.get(IDLE_ENV, "")
    if not text:
        return DEFAULT_IDLE_S
    try:
        value = float(text)
    except ValueError:
        log.warning("abductune: %s=%r is not a number of seconds; using %s", IDLE_ENV, text, DEFAULT_IDLE_S)
        return DEFAULT_IDLE_S
    return max(0.0, value)


def usable(worker: Any) -> bool:
    """A worker worth keeping: alive, and not marked unkillable by Helion."""
    if worker is None or getattr(worker, "_fatal_error", None) is not None:
        return False
    alive = getattr(worker, "alive", None)
    return bool(alive()) if callable(alive) else False


def forget_jobs() -> list[Callable[[], Any]]:
    """Jobs that drop one search's state from a worker: Helion's caches of the arguments
    and accuracy baseline it loaded (keyed by that search's temporary files), then the
    CUDA memory those tensors held. Picklable references to Helion's and torch's own
    functions, so the worker needs nothing of abductune's."""
    jobs: list[Callable[[], Any]] = []
    for module, name in (("helion.autotuner.kernel_args", "load_trusted_kernel_args"),
                         ("helion.autotuner.benchmark_job", "_load_trusted_baseline_output")):
        with contextlib.suppress(ImportError, AttributeError):
            import importlib

            jobs.append(getattr(importlib.import_module(module), name).cache_clear)
    with contextlib.suppress(ImportError):
        import torch

        jobs.append(torch.cuda.empty_cache)  # a no-op where CUDA never started
    return jobs


def forget(worker: Any, timeout: float = FORGET_TIMEOUT_S) -> bool:
    """Run `forget_jobs` in the worker; False where any fails (then it is not kept)."""
    try:
        for job in forget_jobs():
            worker.run(job, timeout=timeout)
    except Exception as e:  # noqa: BLE001 - a worker that cannot forget is shut down, not kept
        log.info("abductune: Helion's benchmark worker could not drop a search's state: %s: %s",
                 type(e).__name__, e)
        return False
    return True


def environ_values(env: Mapping[str, str] = os.environ) -> dict[str, str | None]:
    """This process's values of SYNCED_ENV (None: unset)."""
    return {k: env.get(k) for k in SYNCED_ENV}


def environ_jobs(values: Mapping[str, str | None]) -> tuple[Callable[[], Any], list[Callable[[], Any]]]:
    """(a job that sets `values` in a worker's environment, jobs that read each back):
    picklable, built from builtins and `os` only, so the worker needs nothing of abductune's."""
    return (functools.partial(exec, _SET_ENV, {"values": dict(values)}),
            [functools.partial(os.getenv, k) for k in values])


def sync_environ(worker: Any, env: Mapping[str, str] = os.environ, timeout: float = FORGET_TIMEOUT_S) -> bool:
    """Give a kept worker this process's SYNCED_ENV values (module docstring); True where
    the worker reads them back unchanged."""
    values = environ_values(env)
    put, reads = environ_jobs(values)
    try:
        worker.run(put, timeout=timeout)
        got = [worker.run(job, timeout=timeout) for job in reads]
    except Exception as e:  # noqa: BLE001 - a worker that cannot take them is replaced, not used
        log.info("abductune: Helion's benchmark worker did not take this search's cache directory: %s: %s",
                 type(e).__name__, e)
        return False
    return got == list(values.values())


def shutdown(worker: Any) -> None:
    with contextlib.suppress(Exception):  # an unkillable worker is Helion's to report, not ours
        worker.shutdown()


class Keeper:
    """Holds at most one idle worker for this process (module docstring). `idle_s`: None
    reads ABDUCTUNE_HELION_WORKER_IDLE_S at each `give`. `stats`: workers spawned by `take`,
    reused, kept by `give`, dropped by `give` (not usable, could not forget, or one already
    kept), expired (idle too long), released, synced (a reused worker given this search's
    cache directories), unsynced (one that would not take them: shut down, a fresh one
    spawned)."""

    def __init__(self, idle_s: float | None = None):
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._worker: Any = None
        self._timer: threading.Timer | None = None
        self._pid = os.getpid()
        self._atexit = False
        self.stats = {"spawned": 0, "reused": 0, "kept": 0, "dropped": 0, "expired": 0, "released": 0,
                      "synced": 0, "unsynced": 0}

    def _mine(self) -> bool:
        # a forked child (Helion precompiles in forked processes) must not touch the parent's worker
        return os.getpid() == self._pid

    def take(self, spawn: Callable[[], Any], sync: Callable[[Any], bool] | None = None) -> tuple[Any, bool]:
        """(worker, reused): the kept worker where one is usable and takes this process's
        cache directories (`sync`, default `sync_environ`), else `spawn()` (None where that
        fails)."""
        with self._lock:
            worker, self._worker = self._worker, None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if worker is not None and self._mine():
            if usable(worker):
                if (sync or sync_environ)(worker):
                    self.stats["synced"] += 1
                    self.stats["reused"] += 1
                    return worker, True
                self.stats["unsynced"] += 1
            shutdown(worker)
        # (in a forked child the parent's worker is left alone: shutting it would end it for the parent)
        worker = spawn()
        if worker is not None:
            self.stats["spawned"] += 1
        return worker, False

    def give(self, worker: Any, *, used: bool = True) -> bool:
        """Keep `worker` for the next search (True), or shut it down (False). `used=False`:
        it ran no search's jobs, so there is nothing to forget (and no need to wait for it)."""
        if worker is None:
            return False
        idle = idle_seconds() if self.idle_s is None else self.idle_s
        if idle <= 0 or not self._mine() or not usable(worker) or (used and not forget(worker)):
            self.stats["dropped"] += 1
            shutdown(worker)
            return False
        with self._lock:
            old, self._worker = self._worker, worker
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(idle, self._expire, args=(worker,))
            self._timer.daemon = True
            self._timer.start()
            if not self._atexit:
                atexit.register(self.release)
                self._atexit = True
        if old is not None and old is not worker:  # two searches at once: keep one
            self.stats["dropped"] += 1
            shutdown(old)
        self.stats["kept"] += 1
        return True

    def _expire(self, worker: Any) -> None:
        with self._lock:
            if self._worker is not worker:
                return
            self._worker, self._timer = None, None
        self.stats["expired"] += 1
        shutdown(worker)

    def release(self) -> bool:
        """Shut the kept worker down now; True where there was one."""
        if not self._mine():
            return False
        with self._lock:
            worker, self._worker = self._worker, None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if worker is None:
            return False
        self.stats["released"] += 1
        shutdown(worker)
        return True

    def kept(self) -> bool:
        return self._worker is not None


KEEPER = Keeper()


def spawn_worker() -> Any:
    """A started Helion BenchmarkWorker (its interpreter importing while the caller goes on),
    or None where this Helion has none or it cannot start."""
    try:
        from helion.autotuner.benchmark_worker import BenchmarkWorker
    except ImportError:
        return None
    if not hasattr(BenchmarkWorker, "_start"):
        return None
    worker = BenchmarkWorker(device=None)  # what Helion's provider makes lazily on its first job
    try:
        worker._start()
    except Exception:  # noqa: BLE001 - the provider starts its own on its first job instead
        return None
    return worker


def prestart() -> bool:
    """Start a worker now and keep it for the first search (call it early in a program that
    will tune: the worker's start then overlaps the program's own work). True where one is
    kept."""
    worker, reused = KEEPER.take(spawn_worker)
    if worker is None:
        return False
    return reused or KEEPER.give(worker, used=False)


def first_answer_s(worker: Any, timeout: float = 600.0) -> float:
    """Seconds until `worker` answers a job that imports Helion there and, on a GPU, starts
    CUDA there: what its first benchmark job waits for, where it has just been spawned."""
    import torch

    jobs = forget_jobs()[:1] + ([torch.cuda.synchronize] if torch.cuda.is_available() else [])
    t0 = time.perf_counter()
    for job in jobs:
        worker.run(job, timeout=timeout)
    return time.perf_counter() - t0
