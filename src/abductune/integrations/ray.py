"""Tuning on a Ray cluster: one actor per GPU (`num_gpus=1`), each a `fleet.FleetWorker` with
its own evaluator (the live evaluator as `tune` uses it: its compile pool and benchmark worker),
and the driver's `fleet.Farm` handing out jobs, two in flight per actor. The driver owns the
store. This is the only module that imports Ray (`pip install 'abductune[fleet]'`).

    from abductune.integrations.ray import connect, RayExecutor
    from abductune.fleet import Farm, tune_fleet
    connect("auto")                                   # the cluster `ray start` made
    with Farm(RayExecutor()) as farm:
        run = tune_fleet(farm, [("matmul_fp16", {"M": 16, "N": 4096, "K": 4096})], mode="live")

docs/FLEET.md tells how to start a cluster and what happens when a node dies.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Mapping, Sequence

from ..errors import AbductuneError
from ..fleet.executor import Executor, WorkerLost, worker_kwargs
from ..fleet.farm import FleetError
from ..fleet.worker import Factory, FleetWorker, Job, Reply

log = logging.getLogger(__name__)

MISSING = ("Ray is not installed: tuning on a fleet needs the fleet extra "
           "(pip install 'abductune[fleet]')")
START_TIMEOUT_S = 300.0  # for every actor to start and describe itself (imports, NVML)
REPLAY_WORKERS = 4  # CPU actors for a replay fleet, at most


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise AbductuneError(MISSING) from None
    return ray


def available() -> bool:
    """Whether Ray can be imported here."""
    try:
        _ray()
    except AbductuneError:
        return False
    return True


def connect(address: str | None = "auto") -> dict[str, float]:
    """Join a Ray cluster and return its resources. `address`: "local" starts a cluster on
    this machine (its GPUs and cores), "auto" joins the one `ray start` made here, anything
    else is a cluster address (host:port, or ray://host:10001 for Ray Client). A process
    already connected stays connected (`address` is then not used)."""
    ray = _ray()
    if not ray.is_initialized():
        kw: dict[str, Any] = {"logging_level": logging.WARNING, "configure_logging": True}
        try:
            if address in (None, "local"):
                ray.init(include_dashboard=False, **kw)
            else:
                ray.init(address=address, **kw)
        except ConnectionError as e:
            raise AbductuneError(f"cannot join the Ray cluster at {address!r}: {e}; start one with "
                                 "`ray start --head` (or use --ray local)") from None
    return dict(ray.cluster_resources())


def lost_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors that mean the actor (or its node) is gone, not that the job failed."""
    ex = _ray().exceptions
    names = ("RayActorError", "ActorDiedError", "ActorUnavailableError", "WorkerCrashedError",
             "NodeDiedError", "ObjectLostError", "OwnerDiedError", "LocalRayletDiedError")
    return tuple(getattr(ex, n) for n in names if isinstance(getattr(ex, n, None), type))


class RayExecutor(Executor):
    """Ray actors, one per `resource` unit: "GPU" (the default: `num_gpus=1`, so Ray gives
    each actor its own GPU and sets CUDA_VISIBLE_DEVICES), "CPU" (replay workers), or a custom
    resource (tests: a `GPU`-like resource on CPU actors). `workers`: how many (default: all of
    the resource in the cluster; replay on CPU: up to 4). `factory`: how a worker builds an
    evaluator (default `fleet.build_evaluator`); `worker_kw`: one dict of `FleetWorker`
    keyword arguments per worker instead. `address`: the cluster to join if this process has
    not joined one ("local" starts one, and `close` stops it)."""

    name = "Ray"

    def __init__(self, *, workers: int | None = None, resource: str = "GPU", factory: Factory | None = None,
                 worker_kw: Sequence[Mapping[str, Any]] | None = None, address: str | None = None):
        self.workers = workers or (len(worker_kw) if worker_kw else None)
        self.resource = resource
        self.factory = factory
        self.worker_kw = worker_kw
        self.address = address
        self.actors: list[Any] = []
        self._started_ray = False

    def start(self) -> list[Any]:
        ray = _ray()
        if not ray.is_initialized():
            connect(self.address or "local")
            self._started_ray = self.address in (None, "local")
        total = ray.cluster_resources().get(self.resource, 0)
        n = self.workers or (min(REPLAY_WORKERS, int(total)) if self.resource == "CPU" else int(math.floor(total)))
        if n < 1:
            raise FleetError(f"the Ray cluster has no {self.resource} to run a worker on "
                             f"(resources: {', '.join(sorted(ray.cluster_resources())) or 'none'})")
        if self.resource == "GPU":
            opts: dict[str, Any] = {"num_gpus": 1, "num_cpus": 0}
        elif self.resource == "CPU":
            opts = {"num_cpus": 1}
        else:
            opts = {"num_cpus": 0, "resources": {self.resource: 1}}
        cls = ray.remote(FleetWorker)
        self.actors = [cls.options(max_restarts=0, max_task_retries=0, **opts).remote(**kw)
                       for kw in worker_kwargs(n, self.factory, self.worker_kw)]
        return list(self.actors)

    def describe(self, workers: Sequence[Any]) -> list[dict[str, Any]]:
        ray = _ray()
        refs = [a.describe.remote() for a in workers]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=START_TIMEOUT_S)
        if len(ready) < len(refs):
            raise FleetError(f"{len(ready)} of {len(refs)} Ray workers started within {START_TIMEOUT_S:g} s: "
                             f"the cluster has fewer free {self.resource} than asked for (ask for fewer workers)")
        return ray.get(refs)

    def submit(self, worker: Any, job: Job) -> Any:
        return worker.run.remote(job)

    def wait(self, futures: Sequence[Any], timeout: float) -> list[Any]:
        ray = _ray()
        ready, rest = ray.wait(list(futures), num_returns=1, timeout=timeout)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        return ready

    def result(self, future: Any) -> Reply:
        ray = _ray()
        try:
            return ray.get(future)
        except ray.exceptions.RayTaskError as e:  # the job raised: its own error, not a lost GPU
            cause = getattr(e, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise
        except lost_errors() as e:
            raise WorkerLost(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None

    def retire(self, worker: Any) -> None:
        try:
            _ray().kill(worker, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def close(self, grace_s: float = 10.0) -> None:
        """Each actor closes its evaluators and the live evaluator's processes once its jobs
        are done, within `grace_s` together; then every actor is killed (`ray.kill`), a job
        still running with it (a stopped fleet's)."""
        ray = _ray()
        if self.actors and grace_s > 0:
            refs = []
            for a in self.actors:
                try:
                    refs.append(a.close.remote())
                except Exception:  # noqa: BLE001 - a dead actor takes no call
                    pass
            try:
                ray.wait(refs, num_returns=len(refs), timeout=grace_s)
            except Exception:  # noqa: BLE001 - they are killed next either way
                pass
        for a in self.actors:
            self.retire(a)
        self.actors = []
        if self._started_ray:
            _ray().shutdown()
            self._started_ray = False


def executor_for(address: str, *, mode: str = "auto", workers: int | None = None,
                 factory: Factory | None = None) -> tuple[RayExecutor, str]:
    """The executor `abductune tune --ray ADDRESS` uses, and the mode it resolves: live where
    the cluster has GPUs (one actor per GPU), else replay on CPU actors."""
    joined = _ray().is_initialized()  # a cluster this process already uses is not ours to stop
    res = connect(address)
    gpus = res.get("GPU", 0)
    if mode == "auto":
        mode = "live" if gpus >= 1 else "replay"
    if mode == "live" and gpus < 1:
        raise AbductuneError(f"the Ray cluster at {address!r} has no GPU: live tuning needs one "
                             "(--mode replay replays bundled measurements on its CPUs)")
    resource = "GPU" if mode == "live" else "CPU"
    ex = RayExecutor(workers=workers, resource=resource, factory=factory, address=address)
    ex._started_ray = address == "local" and not joined
    return ex, mode
