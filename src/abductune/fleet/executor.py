"""Where a fleet's workers run: the `Executor` interface (start the workers, run a job on one,
wait, tell a lost worker from a failed job) and `ProcessExecutor`, one local process per GPU
running the same `FleetWorker` a Ray actor runs (`integrations/ray.py` is the Ray executor)."""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
from abc import ABC, abstractmethod
from typing import Any, Mapping, Sequence

from ..errors import AbductuneError
from .worker import Factory, FleetWorker, Job, Reply


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

    def close(self) -> None:
        """Stop every worker."""


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
    import os

    os.environ.update(env)
    _LOCAL["worker"] = FleetWorker(**kw)


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

    def start(self) -> list[Any]:
        ctx = multiprocessing.get_context("spawn")  # no CUDA, no threads inherited
        for i in range(self.n):
            env = dict(self.env)
            if self.gpus is not None:
                env["CUDA_VISIBLE_DEVICES"] = self.gpus[i]
            self._pools.append(cf.ProcessPoolExecutor(1, mp_context=ctx, initializer=_local_init,
                                                      initargs=(env, self.kw[i])))
        return list(range(self.n))

    def describe(self, workers: Sequence[Any]) -> list[dict[str, Any]]:
        futs = [self._pools[w].submit(_local_call, "describe") for w in workers]
        return [f.result() for f in futs]

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

    def retire(self, worker: Any) -> None:
        self._pools[worker].shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        for p in self._pools:
            p.shutdown(wait=True, cancel_futures=True)
        self._pools = []
