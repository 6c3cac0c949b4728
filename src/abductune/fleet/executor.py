"""Where a fleet's workers run: the `Executor` interface (start the workers, run a job on one,
wait, tell a lost worker from a failed job, end them) and `ProcessExecutor`, one local process
per GPU running the same `FleetWorker` a Ray actor runs (`integrations/ray.py` is the Ray
executor)."""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import multiprocessing.connection as mpc
import os
import signal
import threading
import time
from abc import ABC, abstractmethod
from typing import Any, Mapping, Sequence

from ..errors import AbductuneError
from .worker import CORES_ENV, Factory, FleetWorker, Job, Reply


class WorkerLost(Exception):
    """The worker running a job is gone (its process or node died, or it was killed)."""

class Executor(ABC):
    """Where a fleet's workers run. Handles and futures are whatever the executor uses."""

    name = "executor"

    @abstractmethod
    def start(self) -> list[Any]:
        """Start the workers; return one handle per worker."""

    @abstractmethod
    def describe(self, workers: Sequence[Any]) -> list[dict[str, Any]]:
        """`FleetWorker.describe()` of each worker, in order."""

    @abstractmethod
    def submit(self, worker: Any, job: Job) -> Any:
        """Run `job` on `worker` (queued behind the worker's current job); return a future."""

    @abstractmethod
    def wait(self, futures: Sequence[Any], timeout: float) -> list[Any]:
        """The futures among `futures` that are done, waiting at most `timeout` for one."""

    @abstractmethod
    def result(self, future: Any) -> Reply:
        """The job's reply; raises WorkerLost when the worker died, the job's own error else."""

    def retire(self, worker: Any) -> None:
        """Stop a worker the farm will not use again (slow, or found dead)."""

    def close(self, grace_s: float = 10.0) -> None:
        """End every worker: each may finish its job and close (its compile pool, its benchmark
        worker) within `grace_s`; any still running after that is killed. Never waits longer."""


def worker_kwargs(n: int, factory: Factory | None, worker_kw: Sequence[Mapping[str, Any]] | None
                  ) -> list[dict[str, Any]]:
    """`FleetWorker` keyword arguments for each of `n` workers."""
    if worker_kw is not None and len(worker_kw) != n:
        raise AbductuneError(f"{len(worker_kw)} worker settings for {n} workers")
    kws = [dict(k) for k in worker_kw] if worker_kw is not None else [{} for _ in range(n)]
    for k in kws:
        if factory is not None:
            k.setdefault("factory", factory)
    return kws


# --------------------------------------------------------------------- local processes

_LOCAL: dict[str, Any] = {}


def _local_init(env: Mapping[str, str], kw: Mapping[str, Any]) -> None:
    from multiprocessing import util

    os.environ.update(env)
    if hasattr(os, "setpgid"):
        # a process group of its own, with everything it starts (the fork server, the compile
        # pool, the benchmark worker): `close` can then kill all of it at once, and a Ctrl-C at
        # the terminal reaches the driver only, which stops the fleet itself
        try:
            os.setpgid(0, 0)
            signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # its logging to the terminal is not stopped
        except OSError:
            pass
    _LOCAL["worker"] = FleetWorker(**kw)
    # at a normal exit, before multiprocessing waits for this process's children: without it a
    # live worker's compile pool, never shut down, kept the process from exiting. Ahead of the
    # queues' own finalizers (priority 10), which stop their feeder threads: a pool shut down
    # after those never gets its workers' stop messages out
    util.Finalize(None, _local_close, exitpriority=100)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True,
                     name="abductune-fleet-parent").start()


def _local_close() -> None:
    worker = _LOCAL.pop("worker", None)
    if worker is not None:
        worker.close()


def _watch_parent(parent: int, every_s: float = 1.0) -> None:
    """End this worker, with all it started, once the driver is gone (killed, or its terminal
    closed): nothing else would tell it, and it would keep its GPU."""
    while os.getppid() == parent:
        time.sleep(every_s)
    for p in multiprocessing.active_children():
        p.kill()
    _kill_group(os.getpid(), alive=True)
    os._exit(1)


def _kill_group(pid: int, alive: bool) -> None:
    """Kill the process group a worker leads: the worker (where `alive`) and whatever it
    started that is still there, even after the worker itself is gone (a process group
    outlives its leader while it has members, and its id is not reused meanwhile). Where the
    worker leads no group, the worker alone."""
    if hasattr(os, "killpg"):
        try:
            os.killpg(pid, signal.SIGKILL)
            return
        except OSError:  # no such group: it made none, or all of it is gone
            pass
    if alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _local_call(method: str, *args: Any) -> Any:
    return getattr(_LOCAL["worker"], method)(*args)


class ProcessExecutor(Executor):
    """One local process per GPU (`gpus`: CUDA device ids, each worker sees only its own), or
    `workers` processes without a GPU (replay). The same `FleetWorker` as a Ray actor runs,
    for a machine without Ray. `factory` (or `worker_kw`, one dict of `FleetWorker` keyword
    arguments per worker) says how each builds its evaluators."""

    name = "local processes"

    def __init__(self, gpus: Sequence[int | str] | None = None, *, workers: int | None = None,
                 factory: Factory | None = None, worker_kw: Sequence[Mapping[str, Any]] | None = None,
                 env: Mapping[str, str] | None = None):
        if gpus is None and not workers and not worker_kw:
            raise AbductuneError("ProcessExecutor needs gpus (device ids) or a number of workers")
        self.gpus = [str(g) for g in gpus] if gpus is not None else None
        self.n = len(self.gpus) if self.gpus is not None else int(workers or len(worker_kw or ()))
        self.kw = worker_kwargs(self.n, factory, worker_kw)
        self.env = dict(env or {})
        self._pools: list[cf.ProcessPoolExecutor] = []
        self._procs: dict[int, Any] = {}  # worker -> its process (multiprocessing.Process)

    def start(self) -> list[Any]:
        ctx = multiprocessing.get_context("spawn")  # no CUDA, no threads inherited
        for i in range(self.n):
            # the node's cores shared by its workers' compile pools
            env = {CORES_ENV: str(max(1, (os.cpu_count() or 2) // self.n)), **self.env}
            if self.gpus is not None:
                env["CUDA_VISIBLE_DEVICES"] = self.gpus[i]
            self._pools.append(cf.ProcessPoolExecutor(1, mp_context=ctx, initializer=_local_init,
                                                      initargs=(env, self.kw[i])))
        return list(range(self.n))

    def describe(self, workers: Sequence[Any]) -> list[dict[str, Any]]:
        futs = [self._pools[w].submit(_local_call, "describe") for w in workers]
        out = [f.result() for f in futs]
        for w in workers:  # each pool has started its one process by now
            for p in list((self._pools[w]._processes or {}).values()):  # type: ignore[attr-defined]
                self._procs[w] = p
        return out

    def submit(self, worker: Any, job: Job) -> Any:
        return self._pools[worker].submit(_local_call, "run", job)

    def wait(self, futures: Sequence[Any], timeout: float) -> list[Any]:
        done, _ = cf.wait(futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        return list(done)

    def result(self, future: Any) -> Reply:
        try:
            return future.result()
        except cf.process.BrokenProcessPool as e:
            raise WorkerLost(f"worker process died ({e})") from None

    def kill(self, worker: Any) -> None:
        """Kill a worker's process (tests: a GPU that falls off the bus)."""
        for p in list(self._pools[worker]._processes.values()):  # type: ignore[attr-defined]
            p.kill()

    def pid(self, worker: Any) -> int | None:
        """The process id of a worker (None before `describe`)."""
        p = self._procs.get(worker)
        return p.pid if p is not None else None

    def retire(self, worker: Any) -> None:
        self._pools[worker].shutdown(wait=False, cancel_futures=True)
        p = self._procs.get(worker)
        if p is not None and not p.is_alive():  # died: what it started may outlive it
            _kill_group(p.pid, alive=False)

    def close(self, grace_s: float = 10.0) -> None:
        pools, self._pools = self._pools, []
        procs = dict(self._procs)
        for w, pool in enumerate(pools):  # no new job; a job under way may finish
            procs.setdefault(w, next(iter((pool._processes or {}).values()), None))  # type: ignore[attr-defined]
            pool.shutdown(wait=False, cancel_futures=True)
        running = {p.sentinel: p for p in procs.values() if p is not None}
        deadline = time.monotonic() + max(0.0, grace_s)
        while running and time.monotonic() < deadline:  # (sentinels, not join: the pool's own thread reaps)
            for s in mpc.wait(list(running), timeout=max(0.0, deadline - time.monotonic())):
                running.pop(s)
        for p in procs.values():
            if p is not None:  # past the grace: killed with what it started; exited: what it left behind
                _kill_group(p.pid, alive=p.sentinel in running)
        if running:
            mpc.wait(list(running), timeout=5)
        self._procs = {}
