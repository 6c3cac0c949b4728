"""Tunes and sweeps on a fleet: every (kernel, shape) search runs at once on the driver, each in
a thread of its own with a `Session` as `tune` has it, and their measurements are farmed out
to the workers (`farm.Farm`). The driver owns the store: every row is written here as it
lands, so an interrupted fleet resumes like an interrupted tune, spending only what is left.

Tuning is per GPU type: with H100s and H200s in one fleet, each shape is tuned once for each,
on workers of that type only. Before the searches, a pool of two or more GPUs of one type is
calibrated on shared configs (`farm.calibrate`), and a GPU slower than its peers is left out.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import AbductuneError
from ..hardware import HardwareInfo
from ..measurement import Measurement
from ..search import Budget
from ..session import Session
from ..tune import TuneOutcome, tune_one
from .evaluator import FleetEvaluator
from .farm import Farm, FleetError, FleetStopped, calibrate
from .worker import Target

log = logging.getLogger(__name__)

PROBE_CONFIGS = 3  # shared configs timed on every GPU of a type before the searches


@dataclass
class FleetRun:
    """What a fleet tune did: outcomes in job order (per GPU type), and how the fleet went."""

    outcomes: list[TuneOutcome]
    wall_s: float
    measurements: int  # rows the workers took (search, seeds, baselines, run-offs; probes not)
    calibration: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    skipped: list[tuple[str, dict[str, int]]] = field(default_factory=list)  # not started by the deadline
    stopped: str = ""  # why the farm was stopped before every search finished ("" where none was cut short)
    unfinished: list[tuple[str, dict[str, int]]] = field(default_factory=list)  # cut short by that stop
    # seconds from the start of `tune_fleet`: each search's (start, end) and each job's landing
    # with its worker's account (`timeline.occupancy` reads it)
    timeline: dict[str, Any] = field(default_factory=dict)

    @property
    def per_second(self) -> float:
        return self.measurements / self.wall_s if self.wall_s > 0 else 0.0

    def summary(self) -> str:
        """One line: workers, measurements per second, faults."""
        st = self.stats
        ws = st.get("workers", [])
        gpus = sorted({w["pool"].split("|")[0] for w in ws})
        parts = [f"fleet ({st.get('executor', '?')}): {len(ws)} worker(s) ({', '.join(gpus)}), "
                 f"{self.measurements} measurements in {self.wall_s:.1f} s ({self.per_second:.1f}/s)"]
        if st.get("requeued"):
            parts.append(f"{st['requeued']} config(s) re-queued after a lost worker")
        if st.get("failed"):
            parts.append(f"{st['failed']} recorded failed (lost twice)")
        lost = [w for w in ws if not w["alive"]]
        if lost:
            parts.append(f"{len(lost)} worker(s) lost")
        slow = [w for w in ws if w["retired"]]
        if slow:
            parts.append("left out as slow: " + "; ".join(f"{w['gpu']} ({w['retired']})" for w in slow))
        if self.skipped:
            parts.append(f"{len(self.skipped)} shape(s) not started by the deadline")
        if self.stopped:
            parts.append(f"stopped ({self.stopped}): {len(self.unfinished)} search(es) unfinished, "
                         "their measurements kept in the store")
        return "; ".join(parts)


def _gpu_pools(farm: Farm, mode: str) -> list[str | None]:
    """The pools searches go to: each GPU type (live), or any worker (replay)."""
    if mode == "replay":
        return [None]
    pools = sorted(p for p in farm.pools() if p != "cpu")
    if not pools:
        raise FleetError("no worker of the fleet has a GPU: live tuning needs one (replay runs on CPU "
                         "workers: --mode replay)")
    return pools


def _probe_plan(kernel: str, dims: Mapping[str, int], mode: str) -> list[dict]:
    """The configs every GPU of a type times before the searches: the kernel's default and the
    first of its own list."""
    if mode == "replay":
        from ..datasets.bundled import find_bundled
        from ..datasets.format import read_dataset

        ds = read_dataset(find_bundled(kernel, dict(dims)))
        space = ds.space()
        cands = [ds.meta.get("default_config") or space.default()] + list(ds.meta.get("fixed_configs") or [])
    else:
        from .. import kernels

        spec = kernels.get(kernel)
        space = spec.space()
        cands = [spec.default_config()] + list(spec.fixed_configs())
    out: list[dict] = []
    for c in cands:
        if space.is_valid(c) and space.key(c) not in {space.key(o) for o in out}:
            out.append(dict(c))
        if len(out) == PROBE_CONFIGS:
            break
    return out


def _calibration(farm: Farm, jobs: Sequence[tuple[str, dict[str, int]]], mode: str,
                 options: Mapping[str, Any]) -> tuple[list[str], Callable[[list[dict[str, Any]]], None]]:
    """The pools the slow-GPU probe covers (two workers or more) and the probe itself, which
    appends a row per worker (`farm.calibrate`); its plan is read here, so a bad job fails
    before anything runs."""
    if not jobs:
        return [], lambda rows: None
    kernel, dims = jobs[0]
    pools = [pool for pool, members in sorted(farm.pools().items())
             if len(members) >= 2 and not (mode == "live" and pool == "cpu")]
    plan = _probe_plan(kernel, dims, mode) if pools else []
    target = Target(kernel, dict(dims), mode, dict(options))

    def probe(rows: list[dict[str, Any]]) -> None:
        for pool in pools:
            rows.extend({**r, "pool": pool} for r in calibrate(farm, pool, target, plan))
    return pools, probe


def _run_all(farm: Farm, tasks: list[Callable[[], Any]], searches: int) -> tuple[list[Any], list[int]]:
    """Run tasks in threads: (their results, the indices of those a stopped farm cut short or
    kept from starting). Stopped from outside (`farm.stop`: a deadline), the searches waiting on
    it end at once (each Session marks its run interrupted; what landed is stored) and this
    returns. The first error of a search (or Ctrl-C here) stops the fleet the same way and is
    raised."""
    results: list[Any] = [None] * len(tasks)
    cut: list[int] = []
    with cf.ThreadPoolExecutor(max(1, searches), thread_name_prefix="abductune-search") as pool:
        futs = {pool.submit(t): i for i, t in enumerate(tasks)}
        try:
            pending = set(futs)
            while pending:
                done, pending = cf.wait(pending, timeout=0.2, return_when=cf.FIRST_EXCEPTION)
                for f in done:
                    if f.cancelled() or (isinstance(f.exception(), FleetStopped) and farm.stop_reason is not None):
                        cut.append(futs[f])
                    else:
                        results[futs[f]] = f.result()  # raises the first error
                if farm.stop_reason is not None:
                    for f in pending:  # not started: never will be
                        f.cancel()
        except BaseException as e:
            err = e if isinstance(e, FleetError) else FleetError(f"the fleet stopped: {type(e).__name__}")
            farm.stop(err)
            for f in futs:
                f.cancel()
            cf.wait(list(futs), timeout=60)
            raise
    return results, sorted(cut)


def tune_fleet(farm: Farm, jobs: Sequence[tuple[str, Mapping[str, int]]], *, mode: str,
               strategy: str = "abduction", budget: Budget | None = None, seed: int = 0, store: Any = None,
               heuristics: bool = True, database: Any = None, options: dict[str, Any] | None = None,
               stop_early: bool = False, live_options: Mapping[str, Any] | None = None,
               searches: int | None = None, calibrate_gpus: bool = True, deadline: float | None = None,
               on_batch: Callable[[list[Measurement]], None] | None = None,
               on_done: Callable[[TuneOutcome], None] | None = None) -> FleetRun:
    """Tune every (kernel, dims) of `jobs` on the farm's workers, per GPU type (live) or on
    any worker (replay); `tune_one`'s arguments otherwise. `searches`: how many run at once
    (default: every one; `open_searches` says why); `deadline`
    (time.monotonic): searches not started by then are skipped. Outcomes come back in job
    order, GPU types within a job in name order. Stopped from another thread (`farm.stop`, say
    at a deadline), it returns within moments with the searches that finished; the others are
    in `unfinished`, and `stopped` says why (their measurements so far are in the store)."""
    if mode not in ("live", "replay"):
        raise AbductuneError(f"a fleet tunes live or replay, got mode {mode!r}")
    from ..store import NearestOutside, Store

    t0 = time.perf_counter()
    before = sum(w.measurements for w in farm.workers)
    logged = len(farm.log)
    # the driver owns the store: one connection for every search (in memory per search when
    # none is given, as a serial replay tune has it)
    st = Store(store) if store is not None and not isinstance(store, Store) else store
    frozen: dict[tuple, dict] = {}
    # a search's first seeds: the winners on its kernel's nearest shapes that other commands tuned
    nearest_from = NearestOutside(st, jobs) if st is not None else None

    def evidence(ctx: Any) -> dict:
        """The theory evidence of ctx's class, GPU and dtype family as it was before any of
        this fleet's searches of that key finished (read at the first one's start)."""
        key = (ctx.kernel_class or ctx.kernel, ctx.hardware, ctx.classification.get("dtype_family", ""))
        with lock:
            if key not in frozen:
                frozen[key] = st.theory_evidence(ctx) if st is not None else {}
            return dict(frozen[key])
    lock = threading.Lock()
    pools = _gpu_pools(farm, mode)
    # the slow-GPU probe runs while the searches start: their jobs wait for it (`Farm.gate`), so
    # none is measured on a GPU it leaves out, but their start-up (seeds, the store) is done by then
    calib: list[dict[str, Any]] = []
    probed, probe = _calibration(farm, [(k, dict(d)) for k, d in jobs], mode, live_options or {}) \
        if calibrate_gpus else ([], None)
    calibration_s = [0.0]

    def calibrate_now() -> None:
        t = time.perf_counter()
        try:
            probe(calib)  # type: ignore[misc]
        except Exception:  # noqa: BLE001 - the searches go on with every worker, as with no probe
            if farm.stop_reason is None:  # (a stopped farm refuses the probe: nothing to tell)
                log.exception("the slow-GPU probe failed; every worker is kept")
        finally:
            calibration_s[0] = time.perf_counter() - t
            farm.ungate()
    prober = None
    if probed:
        farm.gate(probed)
        prober = threading.Thread(target=calibrate_now, daemon=True, name="abductune-fleet-probe")
        prober.start()
    several = len(pools) > 1
    skipped: list[tuple[str, dict[str, int]]] = []
    n_workers = sum(len(v) for v in farm.pools().values())
    # searches start up one at a time (their seeds and store reads are Python: one interpreter
    # runs them one after the other anyway): the first search's first batch goes out after its
    # own start-up, not after every search's, interleaved, and each start-up after it takes
    # the interpreter from the searches already running for as short a time as it can
    starting = threading.BoundedSemaphore(1)
    spans: list[tuple[float, float]] = []

    def task(kernel: str, dims: dict[str, int], pool: str | None) -> Callable[[], TuneOutcome | None]:
        def run() -> TuneOutcome | None:
            if deadline is not None and time.monotonic() > deadline:
                with lock:
                    skipped.append((kernel, dims))
                return None
            start = time.perf_counter()
            starting.acquire()
            gate = [True]
            if farm.stop_reason is not None:  # stopped while it waited its turn: it never starts
                starting.release()
                raise FleetStopped(f"the fleet was stopped: {farm.stop_reason}")

            def started() -> None:
                if gate[0]:
                    gate[0] = False
                    starting.release()
            target = Target(kernel, dims, mode, dict(live_options or {}))
            try:
                hw = HardwareInfo.from_dict(farm.hardware(pool)) if pool is not None else None

                def evaluator_for(problem: Any, space: Any) -> FleetEvaluator:
                    live = mode == "live"
                    return FleetEvaluator(farm, target, problem, space, pool=pool, lookahead=live,
                                          remeasures_impls=live, on_request=started)
                out = tune_one(kernel, dims, strategy=strategy, budget=budget, seed=seed, mode=mode, store=st,
                               heuristics=heuristics, database=database, options=options, stop_early=stop_early,
                               on_batch=on_batch, evaluator_for=evaluator_for, hardware=hw,
                               toolchain=farm.toolchain(pool) if pool is not None else None,
                               theory_evidence=evidence if st is not None else None,
                               nearest_from=nearest_from)
            finally:
                started()
                with lock:
                    spans.append((start - t0, time.perf_counter() - t0))
            if several and hw is not None:
                out.gpu = hw.name
            if on_done is not None:
                on_done(out)
            return out
        return run

    keys = [(k, dict(d)) for k, d in jobs for _ in pools]
    tasks = [task(k, dict(d), p) for k, d in jobs for p in pools]
    try:
        results, cut = _run_all(farm, tasks, searches or open_searches(len(tasks)))
    finally:
        if prober is not None:
            prober.join(timeout=60)
        if st is not store and st is not None:
            st.close()
    wall = time.perf_counter() - t0
    why = farm.stop_reason
    timeline = {"workers": len(farm.workers), "slots": farm.in_flight * n_workers, "wall_s": wall,
                "calibration_s": calibration_s[0], "searches": sorted(spans),
                "jobs": [(t - t0, i, n, probe, js) for t, i, n, probe, js in farm.log[logged:]]}
    return FleetRun([r for r in results if r is not None], wall,
                    sum(w.measurements for w in farm.workers) - before, calib,
                    {**farm.stats(), "calibration_s": round(calibration_s[0], 3)}, skipped,
                    (str(why) or type(why).__name__) if why is not None and cut else "", [keys[i] for i in cut],
                    timeline)


def open_searches(n: int) -> int:
    """How many of a fleet tune's `n` searches run at once: all of them. A search is a chain of
    dependent batches, each waiting for the last one's measurements, so it never has more than
    one batch out. A window of searches narrower than the suite makes shapes finish in waves:
    the searches of a window start, run and end together, and the last window, partly empty,
    runs its whole chains on too few searches to fill the workers' job slots, while the other
    workers idle (with 27 shapes: a last window of 3 for 8 slots on two GPUs). Opened at once,
    every search advances a batch at a time in turn (a free worker takes the oldest queued
    job), so they all near their end together and only their last batches run short of work;
    those are cut among the idle workers (`Farm._piece`). What it costs: a driver thread and a
    Session for each (a sweep already opens all of its shapes), an evaluator for each on the
    workers (`FleetWorker.keep`), and no shape finishes early (a stopped run keeps what it
    measured, and a rerun resumes)."""
    return max(1, n)


# ----------------------------------------------------------------------------- sweeps

def sweep_fleet(farm: Farm, kernel_name: str, shapes: Sequence[Mapping[str, int]], out_dir: str | Path, *,
                limit: int | None = None, seed: int = 0, target_ms: float = 10.0, max_reps: int = 50,
                store: Any = None, sample_size: int | None = None, exhaustive_max: int | None = None,
                compile_workers: int | None = None, mode: str = "live",
                on_progress: Callable[[str, int, int], None] | None = None) -> list[Path]:
    """`sweep.sweep` on a fleet: every config of every shape goes out to the workers (any shape
    to any free GPU of the type), and the driver appends each to its shape's `.jsonl` and the
    store as it lands. Same files, same resume: a rerun skips what is recorded. With several
    GPU types each gets its own folder under `out_dir` (`<out>/<gpu>/<kernel>/...`)."""
    from .. import kernels
    from ..datasets.bundled import shape_name
    from ..datasets.format import Dataset, append_records, write_dataset
    from ..files import atomic_write_text
    from ..store import Store
    from ..sweep import EXHAUSTIVE_MAX, SAMPLE_SIZE, _read_compile_times, make_out_dir, read_partial, sweep_plan

    spec = kernels.get(kernel_name)
    space = spec.space()
    configs, meta = sweep_plan(spec, space, limit=limit, seed=seed, sample_size=sample_size or SAMPLE_SIZE,
                               exhaustive_max=exhaustive_max or EXHAUSTIVE_MAX)
    pools = [p for p in _gpu_pools(farm, "live")] if mode == "live" else [None]
    options: dict[str, Any] = {"early_stop": False, "target_ms": target_ms, "max_reps": max_reps, "seed": seed}
    if compile_workers:
        options["compile_workers"] = compile_workers
    st = store if isinstance(store, Store) else Store(store)
    lock = threading.Lock()
    paths: list[Path] = []

    def task(dims: Mapping[str, int], pool: str | None) -> Callable[[], Path]:
        def run() -> Path:
            hw_d = farm.hardware(pool) if pool is not None else None
            hw = HardwareInfo.from_dict(hw_d) if hw_d else None
            base = Path(out_dir) / _slug(hw.name) if (hw is not None and len(pools) > 1) else Path(out_dir)
            with lock:
                out = make_out_dir(base / spec.name)
            problem = spec.problem(dict(dims), hw)
            final = out / f"{shape_name(problem.dims)}.jsonl.gz"
            partial = out / f"{shape_name(problem.dims)}.jsonl"
            if final.exists():
                return final
            info = next((w.info.get("toolchain_info") for w in farm.workers if w.pool == pool), None) or {}
            tc_key = farm.toolchain(pool) if pool is not None else ""
            target = Target(spec.name, dict(problem.dims), "live" if mode == "live" else "replay", options)
            ev = FleetEvaluator(farm, target, problem, space, pool=pool)
            head, recs = read_partial(partial)
            ds = Dataset(problem, space.to_dict(), [], dict(info), source=f"abductune sweep {spec.name}",
                         restricted_to_records="sample" in meta, meta=dict(meta))
            if head is not None:
                ds.baselines = dict(head.get("baselines") or {})
            else:
                base_m = ev.vendor_baseline()
                if base_m.ok:
                    ds.baselines["torch_ms"] = base_m.time_ms
                atomic_write_text(partial, json.dumps(ds.header(), separators=(",", ":")) + "\n")
            seen = {space.key(m.config) for m in recs}
            todo = [c for c in configs if space.key(c) not in seen]
            if todo:
                ctimes_path = out / "compile_times.json"
                with Session(ev, strategy="exhaustive", store=st, toolchain=tc_key) as session, \
                        session.recording("sweep"):
                    for _, ms in ev.stream(todo):
                        with lock:  # the first real compile's seconds, as a serial sweep keeps them
                            ctimes = _read_compile_times(ctimes_path)
                            fixed_ms = []
                            for m in ms:
                                if m.status.value != "compile_error":
                                    ck = json.dumps(space.key(m.config))
                                    ctimes[ck] = max(ctimes.get(ck, 0.0), float(m.compile_s))
                                    m = m.replace(compile_s=ctimes[ck])
                                fixed_ms.append(m)
                            atomic_write_text(ctimes_path, json.dumps(ctimes))
                        append_records(partial, fixed_ms)
                        session.record(fixed_ms)
                        recs.extend(fixed_ms)
                        if on_progress:
                            on_progress(f"{spec.name} {shape_name(problem.dims)}", len(recs), len(configs))
            order = {space.key(c): i for i, c in enumerate(configs)}
            ds.records = sorted(recs, key=lambda m: order.get(space.key(m.config), len(order)))
            write_dataset(ds, final)
            partial.unlink()
            return final
        return run

    tasks = [task(d, p) for p in pools for d in shapes]
    try:
        paths, cut = _run_all(farm, tasks, max(4, len(tasks)))
    finally:
        if not isinstance(store, Store):
            st.close()
    if cut:  # what was recorded stays in the shapes' partial files: a rerun resumes them
        raise FleetStopped(f"the sweep was stopped ({farm.stop_reason}) with {len(cut)} shape(s) unfinished; "
                           "rerun it to resume")
    return paths


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name).strip("_").lower() or "gpu"
