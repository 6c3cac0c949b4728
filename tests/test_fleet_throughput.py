"""Issue 26, throughput: a fleet on one host simulated on the CPU (`fleet.simulate`: workers as
threads answering from the 27 bundled recordings after their recorded compile and benchmark
seconds, compiling on their share of the host's 32 cores). The dispatcher, the searches and the
store are the real ones. What must hold:
- every search of the suite open at once, two simulated GPUs measure at least 1.8x one GPU's
  evaluations per second, and each gives what a serial replay gives (rows, winners, nothing
  measured twice);
- the window of searches the driver used before (`max(4, 2 x in flight x workers)`) is still
  there to compare (`searches=`), never exceeded;
- `timeline.occupancy` accounts each worker's busy, benchmark and compile-wait seconds and the
  searches open over time; the slow-GPU probe runs while the searches start, and no search job
  reaches a worker before it ends; a worker warms up at `describe` and its first job waits."""
from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from abductune.datasets.bundled import bundled_datasets
from abductune.fleet import Farm, FleetWorker, Job, Target, tune_fleet
from abductune.fleet.simulate import Host, Simulated, ThreadExecutor, datasets_from
from abductune.fleet.timeline import describe, occupancy, open_curve
from abductune.search import Budget
from abductune.store import Store
from abductune.tune import tune_one

STRATEGY, BUDGET = "pattern", 12
SCALE = 0.2  # the recorded seconds, five times faster (the driver's own Python stays a small share)
TARGET = 1.8  # issue 26: two GPUs at least 1.8x one GPU's evaluations per second

_ROWS = ("SELECT c.kernel, c.dims, c.hardware, m.config, m.status, m.time_ms, m.kind FROM measurements m "
         "JOIN contexts c ON c.id = m.context_id")


def rows(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return sorted(db.execute(_ROWS).fetchall(), key=repr)


def duplicates(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT context_id, config, COUNT(*) FROM measurements WHERE kind IN "
                          "('seed', 'search', 'baseline') GROUP BY context_id, config_key HAVING COUNT(*) > 1"
                          ).fetchall()


def winners(outcomes: list[Any]) -> list[tuple]:
    return [(o.kernel, o.dims, o.winner.config if o.winner else None) for o in outcomes]


@pytest.fixture(scope="module")
def host() -> Host:
    """The recordings, read once for the module (each run gets a fresh host around them)."""
    h = Host(32)
    for p in bundled_datasets():
        h.read(p)
    if len(h._datasets) < 27:
        pytest.skip(f"the 27-shape suite needs the bundled recordings ({len(h._datasets)} found)")
    return h


@pytest.fixture(scope="module")
def suite(host: Host) -> list[tuple[str, dict[str, int]]]:
    return [(ds.problem.kernel, dict(ds.problem.dims)) for ds in host._datasets.values()]


@pytest.fixture(scope="module")
def serial(host: Host, suite: list, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("serial") / "serial.sqlite"
    with datasets_from(host), Store(path) as store:
        outs = [tune_one(k, d, strategy=STRATEGY, budget=Budget(BUDGET), mode="replay", store=store,
                         heuristics=False) for k, d in suite]
    return {"path": path, "rows": rows(path), "winners": winners(outs)}


def simulate(host: Host, suite: list, workers: int, store: Path, searches: int | None = None,
             scale: float = SCALE) -> Any:
    fresh = Host(host.cores)
    fresh._datasets = host._datasets  # the recordings, not what another run compiled
    with datasets_from(fresh), Farm(ThreadExecutor(workers, fresh, scale=scale)) as farm:
        return tune_fleet(farm, suite, mode="replay", strategy=STRATEGY, budget=Budget(BUDGET), store=str(store),
                          heuristics=False, searches=searches)


def test_two_simulated_gpus_measure_the_suite_at_least_1_8x_one_and_give_the_serial_rows(
        host: Host, suite: list, serial: dict[str, Any], tmp_path: Path):
    ratios = []
    for attempt in range(2):  # the driver's Python shares a loaded host's cores: one retry
        runs = {}
        for n in (1, 2):
            store = tmp_path / f"w{n}_{attempt}.sqlite"
            runs[n] = run = simulate(host, suite, n, store)
            assert rows(store) == serial["rows"] and not duplicates(store)
            assert winners(run.outcomes) == serial["winners"]
            occ = occupancy(run.timeline)
            print(f"\n{n} worker(s): {run.measurements} measurements in {run.wall_s:.2f} s "
                  f"({run.per_second:.1f}/s)\n  " + "\n  ".join(describe(occ)))
            assert occ["max_open"] == len(suite)  # every search at once
            for w in occ["workers"]:  # the simulated GPUs are fed: never short of a job for long
                assert w["busy"] > 0.85, occ
        ratios.append(runs[2].per_second / runs[1].per_second)
        print(f"ratio {ratios[-1]:.2f}")
        if ratios[-1] >= TARGET:
            break
    assert max(ratios) >= TARGET, ratios


def test_the_old_window_of_searches_is_kept_to_compare(host: Host, suite: list, serial: dict[str, Any],
                                                       tmp_path: Path):
    """(No delays: the figures of both windows come from benchmarks/gpu/fleet_throughput.py --sim.)"""
    for n in (1, 2):
        window = max(4, 2 * 2 * n)  # what the driver opened before: max(4, 2 x in flight x workers)
        store = tmp_path / f"old{n}.sqlite"
        run = simulate(host, suite, n, store, searches=window, scale=0.0)
        assert occupancy(run.timeline)["max_open"] == window
        assert rows(store) == serial["rows"] and winners(run.outcomes) == serial["winners"]


def test_occupancy_accounts_busy_benchmark_and_compile_wait_and_open_searches():
    timeline = {"workers": 2, "slots": 4, "wall_s": 10.0, "calibration_s": 1.0,
                "searches": [(0.0, 8.0), (0.0, 6.0), (1.0, 9.0), (2.0, 10.0)],
                "jobs": [(1.0, 0, 2, True, {"probe_s": 1.0}), (5.0, 0, 3, False, {"job_s": 4.0, "bench_s": 1.0,
                                                                                   "compile_wait_s": 3.0}),
                         (9.0, 1, 3, False, {"job_s": 6.0, "bench_s": 3.0, "compile_wait_s": 2.0})]}
    occ = occupancy(timeline, samples=5)
    w0, w1 = occ["workers"]
    assert w0["busy"] == pytest.approx(0.5) and w0["idle_s"] == pytest.approx(5.0)
    assert w0["gpu"] == pytest.approx(0.1) and w0["compile_wait"] == pytest.approx(0.3)
    assert w1["busy"] == pytest.approx(0.6) and w1["gpu"] == pytest.approx(0.3)
    assert open_curve(timeline["searches"]) == [(0.0, 2), (1.0, 3), (2.0, 4), (6.0, 3), (8.0, 2), (9.0, 1),
                                                (10.0, 0)]
    assert occ["open"] == [3, 4, 4, 3, 1] and occ["max_open"] == 4  # at 1, 3, 5, 7 and 9 s
    # fewer open searches than the 4 slots: 0-2 s and 6-10 s; worker 0 busy 0-1 and 1-2 (probe,
    # then its job from 1 s), worker 1 from 3 to 9 s
    assert occ["short_s"] == pytest.approx(6.0)
    assert w0["short_idle_s"] == pytest.approx(4.0) and w1["short_idle_s"] == pytest.approx(3.0)
    assert "busy 50%" in describe(occ)[0]


def test_the_slow_gpu_probe_runs_while_the_searches_start_and_gates_their_jobs(host: Host, suite: list,
                                                                                tmp_path: Path):
    seen: list[tuple[str, float]] = []

    class Recording(ThreadExecutor):
        """Records what it sends out; a probe takes half a second more (a GPU's start-up)."""

        def submit(self, worker: Any, job: Job) -> Any:
            seen.append((job.op, time.perf_counter()))
            if job.op != "probe":
                return super().submit(worker, job)
            return self._pools[worker].submit(lambda: (time.sleep(0.5), self.workers[worker].run(job))[1])

    fresh = Host(host.cores)
    fresh._datasets = host._datasets
    with datasets_from(fresh), Farm(Recording(2, fresh, scale=SCALE)) as farm:
        starts: list[float] = []
        real = farm.request

        def request(*a: Any, **kw: Any) -> Any:
            if a[1] == "evaluate":
                starts.append(time.perf_counter())
            return real(*a, **kw)
        farm.request = request  # type: ignore[method-assign]
        run = tune_fleet(farm, suite[:6], mode="replay", strategy=STRATEGY, budget=Budget(BUDGET),
                         store=str(tmp_path / "p.sqlite"), heuristics=False)
    probed = max(t for t, _, _, probe, _ in farm.log if probe)  # the last probe landed
    assert sum(op == "probe" for op, _ in seen) == 2 and len(run.calibration) == 2
    assert starts and min(starts) < probed  # a search asked for its first batch during the probe
    assert min(t for op, t in seen if op != "probe") > probed  # none went out before it ended
    assert run.timeline["calibration_s"] >= 0.5


def test_a_worker_warms_up_at_describe_and_its_first_job_waits_for_it(host: Host, suite: list):
    class Slow(Simulated):
        def warm(self) -> None:
            time.sleep(0.3)
            self.warmed = threading.current_thread().name

    sim = Slow(host, 2, scale=0.0)
    worker = FleetWorker(factory=sim)
    worker.describe()
    assert worker._warming is not None and worker._warming.is_alive()  # in the background
    kernel, dims = suite[0]
    config = host.dataset(kernel, dims).records[0].config
    reply = worker.run(Job(Target(kernel, dims, "replay"), "evaluate", [config]))
    assert sim.warmed == "abductune-fleet-warm" and reply.stats["warm_wait_s"] > 0.1
    assert reply.stats["job_s"] >= reply.stats["warm_wait_s"]  # the worker was busy, not idle, meanwhile
    again = worker.run(Job(Target(kernel, dims, "replay"), "evaluate", [config]))
    assert "warm_wait_s" not in again.stats
    worker.close()


def test_the_benchmark_runs_its_cpu_path_and_reports_where_the_time_went(tmp_path: Path):
    import json
    import subprocess
    import sys

    out = tmp_path / "f.json"
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "fleet_throughput.py"
    proc = subprocess.run([sys.executable, str(script), "--smoke", "--executor", "local", "--variants",
                           "1gpu,2gpu-window", "--deadline-s", "120", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    one, two = res["variants"]
    assert one["searches_open"] == 3 and two["searches_open"] == 8  # the old window: max(4, 2 x 2 x 2)
    for v in (one, two):
        occ = v["occupancy"]
        assert len(occ["workers"]) == len(v["gpus"]) and occ["open"] and v["finished"] == 3
        assert all(0 < w["busy"] <= 1 for w in occ["workers"])
    assert "where the wall time went" in proc.stdout and "searches open at 12 even instants" in proc.stdout
