"""Farming measurements out to a fleet's workers, one per GPU, while the driver keeps the store.

An `Executor` starts the workers and runs jobs on them (`integrations/ray.py`: Ray actors;
`executor.ProcessExecutor`: one local process per GPU). The `Farm` is the driver's side. It is not
a scheduler: the executor places the workers, and the farm only decides which queued job a
free worker takes next.
- Two jobs in flight per worker, so a worker never waits for the driver between two jobs.
- A batch goes to one worker whole, so its configs compile side by side on that worker's
  pool as in a serial tune; it is cut into jobs of up to `chunk` configs only for workers that
  would otherwise idle (the start, the last searches). A worker runs one job at a time: two
  jobs of one batch on one worker compile one after the other.
- Work stealing: a free worker takes the oldest queued job it may run, from any search
  (preferring the problem it already holds, which saves a benchmark setup).
- Faults: the jobs in flight on a worker that died (its process or its node) are queued
  again once, one config a job, each run alone on its worker; a config lost a second time
  comes back as a failed measurement ("the worker measuring it died twice"). The worker is
  not used again; the searches go on with the others.
- A `FleetEvaluator` (`evaluator.py`) is one search's view of the farm. It is an ordinary `Evaluator` for a
  Session, and it streams each job's measurements as they land, so the Session stores every
  row before the rest of its batch is measured.
- Stopping (a deadline, Ctrl-C, a failed search): `stop` answers every waiting search at once
  with `FleetStopped`; the jobs still running are abandoned. `close` then gives the workers
  `grace_s` to finish and exit, and kills those that do not (a compile or benchmark that hangs).
"""
from __future__ import annotations

import collections
import logging
import math
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import AbductuneError
from ..measurement import Measurement
from .executor import Executor, WorkerLost
from .worker import Job, Reply, Target

log = logging.getLogger(__name__)

IN_FLIGHT = 2  # jobs per worker: one running, one waiting beside it
CHUNK = 4  # configs per job when a batch is cut for idle workers: a batch of 8 to two of them
GRACE_S = 10.0  # how long `close` lets workers finish a job and exit before killing them


class FleetError(AbductuneError):
    """The fleet cannot go on (every worker that may run a job is gone, or it was stopped)."""


class FleetStopped(FleetError):
    """The farm was stopped (`Farm.stop`: a deadline, Ctrl-C, another search's error) before
    this search's measurements came back; those that came back are stored."""


@dataclass
class _Worker:
    handle: Any
    info: dict[str, Any]
    pool: str
    in_flight: int = 0
    last: tuple | None = None  # the target of its last job (the problem its benchmark worker holds)
    alive: bool = True
    retired: str = ""  # why the farm stopped using it
    suspect: bool = False  # running a job lost once before: alone, so a second loss blames only it
    jobs: int = 0
    measurements: int = 0
    busy_s: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # the worker's own account (`Reply.stats`)


@dataclass
class _Request:
    """One batch a search asked for: its pieces come back on `replies` as (indices, Reply),
    or an exception."""

    n: int
    replies: "queue.Queue[Any]" = field(default_factory=queue.Queue)


@dataclass
class _Chunk:
    request: _Request
    indices: list[int]
    job: Job
    pool: str | None  # None: any worker
    worker: int | None = None  # pinned to one worker (a probe)
    attempt: int = 0
    submitted: float = 0.0
    seq: int = 0  # submission order (a worker runs its jobs in that order)


def pool_key(info: Mapping[str, Any]) -> str:
    """Which problems a worker may measure: its GPU and toolchain (an H200 beside an H100 is
    another problem, not noise), or "cpu" for a worker without a GPU (replay)."""
    hw = info.get("hardware")
    if not hw:
        return "cpu"
    return f"{hw.get('name', '?')}|{info.get('toolchain', '')}"


class Farm:
    """The driver's dispatcher over an executor's workers (see the module's doc)."""

    def __init__(self, executor: Executor, *, in_flight: int = IN_FLIGHT, chunk: int = CHUNK,
                 poll_s: float = 0.01):
        if in_flight < 1 or chunk < 1:
            raise AbductuneError("a farm needs in_flight >= 1 and chunk >= 1")
        self.executor = executor
        self.in_flight = in_flight
        self.chunk = chunk
        self.poll_s = poll_s
        self.workers: list[_Worker] = []
        self._queue: collections.deque[_Chunk] = collections.deque()
        self._running: dict[Any, tuple[int, _Chunk]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.stop_reason: BaseException | None = None  # why `stop` was called first (None: running)
        self.requeued = 0
        self.failed = 0
        self._seq = 0
        self.lost: list[str] = []
        self.started = 0.0
        # one row per job that came back: (perf_counter when it landed, worker index, configs,
        # probe?, the worker's own stats); `run.occupancy` turns it into each worker's busy time
        self.log: list[tuple[float, int, int, bool, dict[str, float]]] = []
        self._gated: set[str] = set()  # pools whose workers run only pinned jobs (probes) for now

    # -- lifetime
    def start(self) -> "Farm":
        try:
            handles = self.executor.start()
            infos = self.executor.describe(handles)
            self.workers = [_Worker(h, info, pool_key(info)) for h, info in zip(handles, infos)]
            if not self.workers:
                raise FleetError(f"the fleet ({self.executor.name}) has no worker")
        except BaseException:
            self.executor.close()  # workers that did start are not left running
            raise
        self.started = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="abductune-farm", daemon=True)
        self._thread.start()
        return self

    def close(self, grace_s: float = GRACE_S) -> None:
        """Stop, then end the workers: each gets `grace_s` to finish its job and exit, and is
        killed after that (with what it started: compile pool, benchmark worker)."""
        self.stop()
        self.executor.close(grace_s=grace_s)

    def __enter__(self) -> "Farm":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        # leaving on an error or Ctrl-C, a job still running can give nothing the driver keeps:
        # its workers get a short grace (the process ends its GPU memory either way)
        self.close(GRACE_S if exc[0] is None else min(GRACE_S, 2.0))

    def stop(self, error: BaseException | None = None) -> None:
        """Stop dispatching, from any thread; every search waiting on the farm gets a
        `FleetStopped` saying why (`error`) at once, and later requests are refused. Jobs
        still running on workers are abandoned: what they measure is not stored."""
        with self._lock:  # under the lock: a request racing this one is either answered here or refused
            if self.stop_reason is None:
                self.stop_reason = error or self.error or FleetError("stopped")
            self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        with self._lock:
            pending = list(self._queue) + [c for _, c in self._running.values()]
            self._queue.clear()
            self._running.clear()
        for c in pending:
            c.request.replies.put(self._stopped())

    def _stopped(self) -> FleetError:
        """What a search hears from a stopped farm (a failed dispatcher's own error as it is)."""
        if self.error is not None and (self.stop_reason is None or self.stop_reason is self.error):
            return self.error
        why = self.stop_reason
        return FleetStopped(f"the fleet was stopped: {why}" if why is not None and str(why) else
                            "the fleet was stopped")

    # -- what the driver sees
    def pools(self) -> dict[str, list[_Worker]]:
        out: dict[str, list[_Worker]] = {}
        for w in self.workers:
            if w.alive and not w.retired:
                out.setdefault(w.pool, []).append(w)
        return out

    def hardware(self, pool: str) -> dict[str, Any] | None:
        return next((w.info.get("hardware") for w in self.workers if w.pool == pool), None)

    def toolchain(self, pool: str) -> str:
        return next((w.info.get("toolchain", "") for w in self.workers if w.pool == pool), "")

    def stats(self) -> dict[str, Any]:
        return {"executor": self.executor.name, "workers": [
            {"gpu": w.info.get("ident"), "pool": w.pool, "jobs": w.jobs, "measurements": w.measurements,
             "busy_s": round(w.busy_s, 3), "alive": w.alive, "retired": w.retired,
             "phases": {k: round(v, 3) for k, v in sorted(w.phases.items())}} for w in self.workers],
            "requeued": self.requeued, "failed": self.failed, "lost": list(self.lost)}

    def retire(self, index: int, why: str) -> None:
        """Take a worker out of the fleet (it measured slower than its peers)."""
        w = self.workers[index]
        with self._lock:
            w.retired = why
        log.warning("fleet: %s retired: %s", w.info.get("ident"), why)
        try:
            self.executor.retire(w.handle)
        except Exception:  # noqa: BLE001 - it is out of the fleet either way
            pass

    def gate(self, pools: Sequence[str]) -> None:
        """Let the workers of `pools` run only jobs pinned to them (the slow-GPU probes) until
        `ungate`: the searches may start and queue their first batches meanwhile, and none of
        their configs is measured on a GPU the probes may still leave out."""
        with self._lock:
            self._gated.update(pools)

    def ungate(self) -> None:
        with self._lock:
            self._gated.clear()
        self._wake.set()

    # -- asking
    def request(self, target: Target, op: str, configs: Sequence[Mapping[str, Any]], *, pool: str | None = None,
                rounds: int = 1, expect: Sequence[Mapping[str, Any]] = (), incumbent_ms: float | None = None,
                split: bool = True, worker: int | None = None,
                later: Sequence[Mapping[str, Any]] = ()) -> _Request:
        """Queue `configs` (as one job, or cut for idle workers when `split`: `_piece`); their
        measurements come back on the request's queue as the jobs land. `expect` and `later`
        (what the search asks next, and at its end) ride on the first job: a live worker
        compiles them ahead."""
        configs = [dict(c) for c in configs]
        req = _Request(len(configs))
        with self._lock:
            if self.error is not None or self._stop.is_set():
                raise self._stopped()
            if pool is not None and worker is None and not any(
                    w.pool == pool and w.alive and not w.retired for w in self.workers):
                raise FleetError(f"no live worker in the fleet measures {pool.split('|')[0]}")
            size = self._piece(len(configs), pool) if split and worker is None else max(1, len(configs))
            for i in range(0, len(configs), size):
                idx = list(range(i, min(i + size, len(configs))))
                job = Job(target, op, [configs[j] for j in idx], rounds,
                          [dict(c) for c in expect] if i == 0 else [], incumbent_ms,
                          [dict(c) for c in later] if i == 0 else [])
                self._queue.append(_Chunk(req, idx, job, pool, worker))
        self._wake.set()
        return req

    def _piece(self, n: int, pool: str | None) -> int:
        """Configs per job for a batch of `n` (under the lock). Whole, unless workers that may
        run it sit idle with nothing queued for them: then cut into as many even jobs as there
        are such workers (no more than jobs of `chunk` configs make). A worker runs one job at
        a time and compiles each job's configs when it starts it, so two jobs of one batch on
        one worker would compile one after the other; whole, they compile side by side."""
        idle = sum(1 for w in self.workers if w.alive and not w.retired and not w.suspect and w.in_flight == 0
                   and (pool is None or w.pool == pool))
        queued = sum(1 for c in self._queue if c.worker is None and (pool is None or c.pool in (None, pool)))
        pieces = max(1, min(idle - queued, math.ceil(n / self.chunk)))
        return max(1, math.ceil(n / pieces))

    # -- the dispatcher
    def _eligible(self, i: int, w: _Worker, c: _Chunk) -> bool:
        if c.worker is not None:
            return c.worker == i
        return c.pool is None or c.pool == w.pool

    def _pick(self, i: int, w: _Worker) -> _Chunk | None:
        first = None
        for c in self._queue:
            if not self._eligible(i, w, c) or (c.attempt and w.in_flight):
                continue
            if c.worker is None and w.pool in self._gated:
                continue
            if c.job.target.key == w.last:  # the problem it holds: no benchmark setup
                first = c
                break
            if first is None:
                first = c
        if first is not None:
            self._queue.remove(first)
        return first

    def _assign(self) -> None:
        """Hand queued jobs out, one at a time to the least loaded worker that may run one, so
        two idle workers split a batch rather than one taking both its jobs."""
        with self._lock:
            while self._queue:
                for i, w in sorted(enumerate(self.workers), key=lambda iw: iw[1].in_flight):
                    if not w.alive or w.retired or w.suspect or w.in_flight >= self.in_flight:
                        continue
                    c = self._pick(i, w)
                    if c is None:
                        continue
                    try:
                        fut = self.executor.submit(w.handle, c.job)
                    except Exception as e:  # noqa: BLE001 - a dead worker refuses work
                        self._queue.appendleft(c)
                        self._lose(i, f"submit failed: {e}")
                        break
                    c.submitted = time.perf_counter()
                    self._seq += 1
                    c.seq = self._seq
                    w.in_flight += 1
                    w.suspect = c.attempt > 0
                    w.last = c.job.target.key
                    self._running[fut] = (i, c)
                    break
                else:
                    break  # no worker can take another job now
            self._orphans()

    def _orphans(self) -> None:
        """Queued jobs no live worker may run: fail their requests (under the lock)."""
        keep: collections.deque[_Chunk] = collections.deque()
        for c in self._queue:
            if any(self._eligible(i, w, c) and w.alive and not w.retired for i, w in enumerate(self.workers)):
                keep.append(c)
            else:
                what = "the pinned worker" if c.worker is not None else (
                    f"a worker for {c.pool.split('|')[0]}" if c.pool else "a worker")
                c.request.replies.put(FleetError(f"no live worker left in the fleet: {what} is gone "
                                                 f"({'; '.join(self.lost) or 'retired'})"))
        self._queue = keep

    def _lose(self, i: int, why: str) -> None:
        w = self.workers[i]
        if w.alive:
            w.alive = False
            self.lost.append(f"{w.info.get('ident')}: {why}")
            log.warning("fleet: lost worker %s (%s); its jobs in flight are queued again", w.info.get("ident"), why)
            try:
                self.executor.retire(w.handle)
            except Exception:  # noqa: BLE001
                pass

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._assign()
                with self._lock:
                    futs = list(self._running)
                if not futs:
                    self._wake.wait(0.1)
                    self._wake.clear()
                    continue
                done = self.executor.wait(futs, self.poll_s)
                with self._lock:  # in submission order: a worker's finished jobs before its lost ones
                    done.sort(key=lambda f: self._running[f][1].seq if f in self._running else 0)
                for fut in done:
                    self._landed(fut)
        except BaseException as e:  # noqa: BLE001 - every waiting search must hear of it
            log.exception("fleet dispatcher failed")
            self.error = FleetError(f"the fleet's dispatcher failed: {type(e).__name__}: {e}")
            self._stop.set()
            with self._lock:
                pending = list(self._queue) + [c for _, c in self._running.values()]
                self._queue.clear()
                self._running.clear()
            for c in pending:
                c.request.replies.put(self.error)

    def _landed(self, fut: Any) -> None:
        with self._lock:
            if fut not in self._running:
                return  # settled with its worker's death (`_died`)
            i, c = self._running.pop(fut)
            w = self.workers[i]
            w.in_flight -= 1
            w.suspect = False
        try:
            reply = self.executor.result(fut)
        except WorkerLost as e:
            self._died(i, c, str(e))
            return
        except BaseException as e:  # noqa: BLE001 - the job's own error: its search fails with it
            c.request.replies.put(e)
            return
        self._deliver(w, c, reply)

    def _deliver(self, w: _Worker, c: _Chunk, reply: Reply) -> None:
        self.log.append((time.perf_counter(), self.workers.index(w), len(c.indices), c.worker is not None,
                         dict(reply.stats or {})))
        w.jobs += 1
        if c.worker is None:  # a probe's timings are calibration, not the fleet's work
            w.measurements += len(reply.measurements)
        w.busy_s += time.perf_counter() - c.submitted  # queued time included: two in flight overlap
        for k, v in (reply.stats or {}).items():
            w.phases[k] = w.phases.get(k, 0.0) + float(v)
        c.request.replies.put((c.indices, reply))

    def _died(self, i: int, c: _Chunk, why: str, settle_s: float = 30.0) -> None:
        """Worker i is gone (`c` came back lost). Its other jobs in flight are settled first,
        so those that finished are delivered. Every job lost with it is queued again once, one
        config a job; such a job then runs alone on its worker (`_Worker.suspect`), so a worker
        lost under it blames that config only, which is then recorded failed. (Which of two jobs
        in flight a dying worker was running cannot be told: the reply of the one it finished
        may die with it.)"""
        w = self.workers[i]
        with self._lock:
            self._lose(i, why)
            others = {f: x for f, (wi, x) in self._running.items() if wi == i}
            for f in others:
                del self._running[f]
            w.in_flight = 0
        lost = [c]
        pending = list(others)
        deadline = time.monotonic() + settle_s
        while pending and time.monotonic() < deadline and not self._stop.is_set():
            for f in self.executor.wait(pending, 0.1):
                pending.remove(f)
                x = others[f]
                try:
                    self._deliver(w, x, self.executor.result(f))
                except WorkerLost:
                    lost.append(x)
                except BaseException as e:  # noqa: BLE001
                    x.request.replies.put(e)
        lost += [others[f] for f in pending]  # never settled
        lost.sort(key=lambda x: x.seq)
        log.info("fleet: %s died with %d job(s) in flight (%s)", w.info.get("ident"), len(lost),
                 ", ".join(f"{len(x.indices)} config(s), attempt {x.attempt}" for x in lost))
        failed = []
        with self._lock:
            for x in lost:
                if x.worker is None and x.attempt == 0:
                    self.requeued += len(x.indices)
                    self._queue.extendleft(reversed(_singles(x)))
                else:
                    self.failed += len(x.indices)
                    failed.append(x)
        for x in failed:
            text = (f"the worker measuring it died twice ({why})" if x.worker is None
                    else f"the worker died ({why})")
            x.request.replies.put((x.indices, Reply([_failed(cfg, x.job, text) for cfg in x.job.configs], 0.0)))


def _singles(c: _Chunk) -> list[_Chunk]:
    """A lost job queued again: first measurements one config a job, so a config that kills
    its worker takes only itself down the second time; a re-timing stays whole (its configs
    are timed side by side)."""
    if c.job.op != "evaluate" or len(c.indices) == 1:
        return [_Chunk(c.request, c.indices, c.job, c.pool, None, 1)]
    return [_Chunk(c.request, [i], Job(c.job.target, c.job.op, [cfg], c.job.rounds, [], c.job.incumbent_ms),
                   c.pool, None, 1) for i, cfg in zip(c.indices, c.job.configs)]


def _failed(cfg: Mapping[str, Any], job: Job, why: str) -> Measurement:
    c = dict(cfg) if job.op != "vendor" else {"impl": "torch"}
    return Measurement(c, "runtime_error", error=why)


def calibrate(farm: Farm, pool: str, target: Target, configs: Sequence[Mapping[str, Any]], *,
              rounds: int = 3, margin: float = 0.08, timeout_s: float = 600.0) -> list[dict[str, Any]]:
    """Time the same configs on every worker of `pool` and retire any worker slower than its
    peers by more than `margin` (a throttled GPU, another SKU under one name): its timings are
    then never mixed with the others'. The reference is the lower median of the workers'
    times (with two workers, the faster one). Returns one row per worker."""
    workers = [i for i, w in enumerate(farm.workers) if w.pool == pool and w.alive and not w.retired]
    if len(workers) < 2 or not configs:
        return []
    reqs = {i: farm.request(target, "probe", configs, pool=pool, rounds=rounds, split=False, worker=i)
            for i in workers}
    times: dict[int, list[float]] = {}
    deadline = time.monotonic() + timeout_s
    for i, req in reqs.items():
        try:
            item = req.replies.get(timeout=max(1.0, deadline - time.monotonic()))
        except queue.Empty:
            continue
        if isinstance(item, BaseException):
            continue
        times[i] = [m.time_ms if m.ok else math.inf for m in item[1].measurements]
    rows = []
    if len(times) < 2:
        return rows
    ratios: dict[int, float] = {}
    ncfg = len(configs)
    for i, ts in times.items():
        rs = []
        for k in range(ncfg):
            col = sorted(t[k] for t in times.values())
            ref = col[(len(col) - 1) // 2]
            if math.isfinite(ref) and ref > 0 and math.isfinite(ts[k]):
                rs.append(ts[k] / ref)
        ratios[i] = sorted(rs)[len(rs) // 2] if rs else 1.0
    for i, r in ratios.items():
        slow = r > 1 + margin
        ident = farm.workers[i].info.get("ident")
        rows.append({"gpu": ident, "ratio": round(r, 4), "slow": slow})
        if slow:
            farm.retire(i, f"measured {r:.2f}x its peers' time on {ncfg} shared config(s)")
    return rows
