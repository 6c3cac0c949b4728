"""Issue 26: tuning on a fleet (docs/FLEET.md). A local Ray cluster on the CPU stands in for a
fleet of GPUs: a custom resource `fleet_gpu` plays the GPU, and each actor replays the bundled
H100 recordings (`fleet_fixtures.Replayed`). What must hold:
- the results equal a serial run's: same winners, same stored rows, nothing measured twice;
- a worker killed mid-run (`ray.kill`) loses nothing: its jobs in flight are queued again once;
  a config lost twice is recorded failed, once;
- an interrupted or killed driver resumes from the store and spends only what is left;
- every row names its GPU; an H200 beside H100s is another problem; a GPU slower than its
  peers on shared configs is left out;
- a fleet stopped at a deadline returns at once with what finished, keeps every measurement
  that landed, and `close` ends a worker stuck in a job (and what it started) after its grace;
- a batch goes to one worker whole unless others idle; a worker switching problems drops the
  compiles it queued ahead for the last one.
One Ray cluster serves the module (starting one costs seconds). Without Ray these tests skip,
unless ABDUCTUNE_REQUIRE_FLEET=1 (CI), where a missing Ray is a failure. The local-process
executor (the fallback where Ray cannot be installed) is tested without Ray."""
from __future__ import annotations

import collections
import concurrent.futures as cf
import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import pytest

import fleet_fixtures
from abductune.datasets.bundled import bundled_datasets
from abductune.datasets.format import read_dataset
from abductune.fleet import (Executor, Farm, FleetError, FleetStopped, FleetWorker, Job, ProcessExecutor, Target,
                              sweep_fleet, tune_fleet)
from abductune.hardware import KNOWN_GPUS
from abductune.measure.base import Evaluator
from abductune.measurement import Measurement
from abductune.search import Budget
from abductune.store import NearestOutside, Store
from abductune.tune import tune_one
from fleet_fixtures import Replayed

ROOT = Path(__file__).resolve().parents[1]
STRATEGY, BUDGET = "pattern", 12


def _jobs() -> list[tuple[str, dict[str, int]]]:
    out = []
    for kernel in ("softmax_fp16", "rmsnorm_fp16", "gelu_mul_fp16"):
        for p in bundled_datasets(kernel=kernel)[:2]:
            out.append((kernel, dict(read_dataset(p).problem.dims)))
    return out


JOBS = _jobs()


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        if os.environ.get("ABDUCTUNE_REQUIRE_FLEET") == "1":
            raise
        pytest.skip("ray is not installed (pip install 'abductune[fleet]'); ABDUCTUNE_REQUIRE_FLEET=1 fails instead")
    return ray


@pytest.fixture(scope="module")
def ray_cluster() -> Any:
    """One local Ray cluster for the module: 4 CPUs and 4 `fleet_gpu`s."""
    ray = _ray()
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(fleet_fixtures)  # the actors need not find tests/ on their path
    ray.init(num_cpus=4, resources={"fleet_gpu": 4}, include_dashboard=False, logging_level=logging.WARNING)
    yield ray
    ray.shutdown()


def _executor(workers: int = 3, **kw: Any) -> Any:
    from abductune.integrations.ray import RayExecutor

    if "worker_kw" in kw:
        return RayExecutor(resource="fleet_gpu", **kw)  # one worker per setting
    kw.setdefault("factory", Replayed())
    return RayExecutor(workers=workers, resource="fleet_gpu", **kw)


_ROWS = ("SELECT c.kernel, c.dims, c.hardware, m.config, m.status, m.time_ms, m.kind FROM measurements m "
         "JOIN contexts c ON c.id = m.context_id")


def rows(path: Path, where: str = "") -> list[tuple]:
    with sqlite3.connect(path) as db:
        return sorted(db.execute(_ROWS + where).fetchall(), key=repr)


def duplicates(path: Path) -> list[tuple]:
    """(context, config) measured more than once as a first measurement (seed, search, baseline)."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT context_id, config, COUNT(*) FROM measurements WHERE kind IN "
                          "('seed', 'search', 'baseline') GROUP BY context_id, config_key HAVING COUNT(*) > 1"
                          ).fetchall()


def gpus_of(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {json.loads(e).get("gpu") for (e,) in db.execute("SELECT extra FROM measurements")}


def winners(outcomes: list[Any]) -> list[tuple]:
    return [(o.kernel, o.dims, o.gpu, o.winner.config if o.winner else None) for o in outcomes]


def fleet(executor: Any, store: Path, jobs: list = JOBS, **kw: Any) -> tuple[Any, Farm]:
    kw = {"mode": "replay", "strategy": STRATEGY, "budget": Budget(BUDGET), **kw}
    with Farm(executor) as farm:
        return tune_fleet(farm, jobs, store=str(store), **kw), farm


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same tunes run one after another in this process, as `abductune tune` runs them."""
    path = tmp_path_factory.mktemp("serial") / "serial.sqlite"
    with Store(path) as store:
        near = NearestOutside(store, JOBS)  # as the command does: no shape seeded from another of its own
        outs = [tune_one(k, d, strategy=STRATEGY, budget=Budget(BUDGET), mode="replay", store=store,
                         nearest_from=near) for k, d in JOBS]
    return {"path": path, "rows": rows(path), "winners": winners(outs), "evaluations": [o.evaluations for o in outs]}


def assert_same_as_serial(path: Path, serial: dict[str, Any], outcomes: list[Any] | None = None) -> None:
    assert rows(path) == serial["rows"]
    assert not duplicates(path)
    if outcomes is not None:
        assert winners(outcomes) == serial["winners"]


# ----------------------------------------------------------------------------- Ray

def test_a_fleet_on_ray_gives_what_a_serial_run_gives(ray_cluster: Any, serial: dict[str, Any], tmp_path: Path):
    run, farm = fleet(_executor(3), tmp_path / "f.sqlite")
    assert_same_as_serial(tmp_path / "f.sqlite", serial, run.outcomes)
    assert [o.evaluations for o in run.outcomes] == serial["evaluations"]
    busy = [w for w in run.stats["workers"] if w["jobs"]]
    assert len(busy) >= 2, run.stats  # the searches' jobs went to several workers
    assert gpus_of(tmp_path / "f.sqlite") <= {w["gpu"] for w in run.stats["workers"]}  # every row names its GPU
    assert None not in gpus_of(tmp_path / "f.sqlite")
    assert run.measurements == len(serial["rows"]) and "3 worker(s)" in run.summary()


def _tune_killing_one_worker(farm: Farm, kill: Any, store: Path) -> Any:
    """`tune_fleet` over JOBS while another thread calls `kill(worker 0)` once that worker has
    done two jobs and holds one in flight; the farm is closed after."""
    def killer() -> None:
        w = farm.workers[0]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (w.jobs >= 2 and w.in_flight > 0):
            time.sleep(0.005)
        kill(w)
    t = threading.Thread(target=killer)
    t.start()
    try:
        return tune_fleet(farm, JOBS, mode="replay", strategy=STRATEGY, budget=Budget(BUDGET),
                          store=str(store), calibrate_gpus=False)
    finally:
        t.join()
        farm.close()


def test_ray_kill_of_a_worker_mid_run_loses_nothing(ray_cluster: Any, serial: dict[str, Any], tmp_path: Path):
    executor = _executor(3, factory=Replayed(delay=0.02))
    farm = Farm(executor).start()
    killed: list[str] = []

    def kill(w: Any) -> None:
        ray_cluster.kill(w.handle, no_restart=True)
        killed.append(w.info["ident"])
    run = _tune_killing_one_worker(farm, kill, tmp_path / "k.sqlite")
    assert killed and run.stats["lost"] and run.stats["requeued"] >= 1 and run.stats["failed"] == 0, run.stats
    assert_same_as_serial(tmp_path / "k.sqlite", serial, run.outcomes)
    assert "re-queued after a lost worker" in run.summary() and "1 worker(s) lost" in run.summary()


def test_a_config_lost_with_two_workers_is_recorded_failed_once(ray_cluster: Any, serial: dict[str, Any],
                                                                 tmp_path: Path):
    kernel, dims = JOBS[0]
    with sqlite3.connect(serial["path"]) as db:  # a config the first search measures, after its seeds
        [(poison,)] = db.execute("SELECT m.config FROM measurements m JOIN contexts c ON c.id = m.context_id "
                                 "WHERE c.dims = ? AND m.kind = 'search' ORDER BY m.id LIMIT 1",
                                 (json.dumps(dims, sort_keys=True, separators=(",", ":")),)).fetchall()
    path = tmp_path / "p.sqlite"
    run, _ = fleet(_executor(3, factory=Replayed(delay=0.005, poison=json.loads(poison))), path,
                   calibrate_gpus=False)
    assert len(run.stats["lost"]) == 2 and run.stats["failed"] == 1, run.stats
    with sqlite3.connect(path) as db:
        got = db.execute("SELECT status, error FROM measurements WHERE config = ?", (poison,)).fetchall()
        assert db.execute("SELECT COUNT(*) FROM runs WHERE status != 'done'").fetchone()[0] == 0
    assert len(got) == 1 and got[0][0] == "runtime_error" and "died twice" in got[0][1], got
    assert not duplicates(path)
    # the other shapes' searches never met the poison: their rows are the serial run's
    key = json.dumps(dims, sort_keys=True, separators=(",", ":"))
    other = f" WHERE NOT (c.kernel = '{kernel}' AND c.dims = '{key}')"
    assert rows(path, other) == [r for r in serial["rows"] if (r[0], json.loads(r[1])) != (kernel, dims)]


def test_an_interrupted_fleet_resumes_and_spends_only_what_is_left(ray_cluster: Any, serial: dict[str, Any],
                                                                    tmp_path: Path):
    path = tmp_path / "i.sqlite"
    batches = [0]

    def stop_after_some(ms: list[Any]) -> None:
        batches[0] += 1
        if batches[0] == 8:
            raise KeyboardInterrupt  # Ctrl-C, as a search thread meets it
    with pytest.raises(KeyboardInterrupt):
        fleet(_executor(3, factory=Replayed(delay=0.01)), path, on_batch=stop_after_some, calibrate_gpus=False)
    with sqlite3.connect(path) as db:
        statuses = dict(db.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall())
        spent = db.execute("SELECT COUNT(*) FROM measurements WHERE kind IN ('search', 'seed', 'remeasure')"
                           ).fetchone()[0]
    assert statuses.get("interrupted") and "running" not in statuses, statuses
    assert 0 < spent < sum(serial["evaluations"])
    run, _ = fleet(_executor(3), path)
    assert_same_as_serial(path, serial, run.outcomes)
    assert sum(o.evaluations for o in run.outcomes) == sum(serial["evaluations"]) - spent


DRIVER = """
import sys, ray, fleet_fixtures
from ray import cloudpickle
from abductune.fleet import Farm, tune_fleet
from abductune.integrations.ray import RayExecutor
from abductune.search import Budget
cloudpickle.register_pickle_by_value(fleet_fixtures)
ray.init(address=sys.argv[1], logging_level="warning")
jobs = {jobs!r}
with Farm(RayExecutor(workers=2, resource="fleet_gpu", factory=fleet_fixtures.Replayed(delay=0.05))) as farm:
    tune_fleet(farm, jobs, mode="replay", strategy={strategy!r}, budget=Budget({budget}), store=sys.argv[2])
"""


def test_a_killed_driver_resumes_from_the_store(ray_cluster: Any, serial: dict[str, Any], tmp_path: Path):
    path = tmp_path / "d.sqlite"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.format(jobs=JOBS, strategy=STRATEGY, budget=BUDGET))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    address = ray_cluster.get_runtime_context().gcs_address
    proc = subprocess.Popen([sys.executable, str(script), address, str(path)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    n = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists():
            try:
                with sqlite3.connect(path) as db:
                    n = db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
            except sqlite3.Error:
                n = 0
            if n >= 15:
                break
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    os.kill(proc.pid, signal.SIGKILL)  # no chance to mark anything
    proc.wait()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM runs WHERE status = 'running'").fetchone()[0] > 0
        spent = db.execute("SELECT COUNT(*) FROM measurements WHERE kind IN ('search', 'seed', 'remeasure')"
                           ).fetchone()[0]
    run, _ = fleet(_executor(3), path)
    assert_same_as_serial(path, serial, run.outcomes)
    assert sum(o.evaluations for o in run.outcomes) == sum(serial["evaluations"]) - spent
    with sqlite3.connect(path) as db:  # the dead driver's runs were found and marked, then resumed
        statuses = dict(db.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall())
    assert statuses.get("interrupted") and "running" not in statuses, statuses


def _stand_in(name: str, factory: Any = None) -> dict[str, Any]:
    return {"factory": factory or Replayed(), "hardware": KNOWN_GPUS[name].to_dict(),
            "toolchain": "torch=2.13.0;triton=3.9.0"}


def test_an_h200_beside_h100s_is_another_problem(ray_cluster: Any, tmp_path: Path):
    path = tmp_path / "h.sqlite"
    kw = [_stand_in("H100-SXM"), _stand_in("H100-SXM"), _stand_in("H200")]
    run, _ = fleet(_executor(worker_kw=kw), path, jobs=JOBS[:2], mode="live")
    assert [(o.kernel, o.gpu) for o in run.outcomes] == [(JOBS[0][0], "H100-SXM"), (JOBS[0][0], "H200"),
                                                         (JOBS[1][0], "H100-SXM"), (JOBS[1][0], "H200")]
    idents = {w["pool"].split("|")[0]: set() for w in run.stats["workers"]}
    for w in run.stats["workers"]:
        idents[w["pool"].split("|")[0]].add(w["gpu"])
    with sqlite3.connect(path) as db:
        by_hw = db.execute("SELECT c.hardware, m.extra FROM measurements m JOIN contexts c ON c.id = m.context_id"
                           ).fetchall()
    assert {hw for hw, _ in by_hw} == {"H100-SXM", "H200"}
    for hw, extra in by_hw:  # an H100 problem measured only on H100s, the H200's only on the H200
        assert json.loads(extra)["gpu"] in idents[hw]
    assert [r["pool"].split("|")[0] for r in run.calibration] == ["H100-SXM", "H100-SXM"]  # two of a kind
    assert not any(r["slow"] for r in run.calibration)


def test_a_gpu_slower_than_its_peers_is_left_out(ray_cluster: Any, serial: dict[str, Any], tmp_path: Path):
    path = tmp_path / "s.sqlite"
    kw = [{"factory": Replayed()}, {"factory": Replayed()}, {"factory": Replayed(scale=1.4)}]
    run, farm = fleet(_executor(worker_kw=kw), path)
    slow = [r for r in run.calibration if r["slow"]]
    assert len(slow) == 1 and slow[0]["ratio"] == pytest.approx(1.4), run.calibration
    assert slow[0]["gpu"] not in gpus_of(path)  # none of its timings is mixed with the others'
    assert_same_as_serial(path, serial, run.outcomes)
    assert "left out as slow" in run.summary()


def test_sweep_on_a_fleet_records_every_config_once_and_resumes(ray_cluster: Any, tmp_path: Path):
    shapes = [d for k, d in JOBS if k == "softmax_fp16"]
    out, store = tmp_path / "sweep", tmp_path / "sw.sqlite"
    kw = [_stand_in("H100-SXM"), _stand_in("H100-SXM")]
    with Farm(_executor(worker_kw=kw)) as farm:
        paths = sweep_fleet(farm, "softmax_fp16", shapes, out, limit=10, store=str(store))
        first = sum(w.measurements for w in farm.workers)
    assert len(paths) == 2 and all(p.name.endswith(".jsonl.gz") for p in paths)
    for p in paths:
        ds = read_dataset(p)
        keys = [ds.space().key(m.config) for m in ds.records]
        assert len(keys) == 10 == len(set(keys)) and ds.baselines.get("torch_ms")
    assert first == 2 * 10 + 2  # each config once, and torch once per shape
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] == 20
        assert {r[0] for r in db.execute("SELECT status FROM runs")} == {"done"}
    with Farm(_executor(worker_kw=kw)) as farm:  # finished shapes: nothing measured again
        assert sweep_fleet(farm, "softmax_fp16", shapes, out, limit=10, store=str(store)) == paths
        assert sum(w.measurements for w in farm.workers) == 0


def test_tune_with_ray_prints_what_the_serial_tune_prints(ray_cluster: Any, tmp_path: Path):
    from test_cli_errors import run_cli

    args = ["tune", "--mode", "replay", "--kernel", "gelu_mul_fp16", "--budget", "6", "--strategy", "pattern"]
    code, serial_out, err, exc = run_cli([*args, "--store", "a.sqlite"], tmp_path)
    assert code == 0, (err, exc)
    code, out, err, exc = run_cli([*args, "--store", "b.sqlite", "--ray", "local"], tmp_path)
    assert code == 0, (err, exc)

    def table(text: str) -> list[str]:  # the table and the winners; run ids and timings differ
        return [ln for ln in text.splitlines() if not ln.startswith(("runs ", "run ", "wall ", "fleet "))]
    assert table(out) == table(serial_out)
    assert [ln for ln in out.splitlines() if ln.startswith("fleet (Ray): ")]
    assert rows(tmp_path / "a.sqlite") == rows(tmp_path / "b.sqlite")
    assert ray_cluster.is_initialized()  # a cluster the command joined is not its to stop


# ----------------------------------------------------------------------------- without Ray

def test_local_processes_give_what_a_serial_run_gives_and_survive_a_killed_one(serial: dict[str, Any],
                                                                                tmp_path: Path):
    executor = ProcessExecutor(worker_kw=[{"factory": Replayed(delay=0.02)}] * 3)
    farm = Farm(executor).start()
    run = _tune_killing_one_worker(farm, lambda w: executor.kill(0), tmp_path / "l.sqlite")
    assert len(run.stats["lost"]) == 1 and run.stats["requeued"] >= 1, run.stats
    assert_same_as_serial(tmp_path / "l.sqlite", serial, run.outcomes)
    assert run.summary().startswith("fleet (local processes): 3 worker(s) (cpu)")


def test_a_fleet_seeds_each_shape_from_earlier_commands_shapes_as_a_serial_run_does(tmp_path: Path):
    """Shapes of a kernel tuned by an earlier command are every new shape's first seeds (its
    nearest winners), on a fleet as in a serial run; the command's own shapes never seed each
    other, so the fleet's finishing order cannot change a search, nor can the serial order."""
    [earlier] = [dict(read_dataset(p).problem.dims) for p in bundled_datasets(kernel="gelu_mul_fp16")
                 if dict(read_dataset(p).problem.dims) not in [d for _, d in JOBS]][:1]
    stores = {name: tmp_path / f"{name}.sqlite" for name in ("serial", "reversed", "fleet")}
    for path in stores.values():
        prior = tune_one("gelu_mul_fp16", earlier, strategy=STRATEGY, budget=Budget(BUDGET), mode="replay",
                         store=str(path)).winner.config
    for name, jobs in (("serial", JOBS), ("reversed", JOBS[::-1])):
        with Store(stores[name]) as store:
            near = NearestOutside(store, jobs)
            for k, d in jobs:
                tune_one(k, d, strategy=STRATEGY, budget=Budget(BUDGET), mode="replay", store=store,
                         nearest_from=near)
    executor = ProcessExecutor(worker_kw=[{"factory": Replayed(delay=0.01)}] * 2)
    with Farm(executor) as farm:
        tune_fleet(farm, JOBS, mode="replay", strategy=STRATEGY, budget=Budget(BUDGET), store=str(stores["fleet"]),
                   calibrate_gpus=False)
    assert rows(stores["fleet"]) == rows(stores["serial"]) == rows(stores["reversed"])
    with Store(stores["fleet"]) as st:
        for r in st.runs():
            first = r.summary["seeds"][0] if r.summary.get("seeds") else None
            if r.context.kernel == "gelu_mul_fp16" and r.context.dims != earlier:
                assert first == {"config": prior, "source": "store:nearest shape"}
            else:  # the earlier shape itself, and kernels no earlier command tuned
                assert first is None or first["source"] != "store:nearest shape"


@pytest.mark.parametrize("argv", [
    ["tune", "--ray", "local", "--mode", "replay", "--kernel", "gelu_mul_fp16"],
    ["sweep", "--ray", "local", "--kernel", "softmax_fp16", "--out", "out"],
])
def test_without_ray_the_command_says_which_extra_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                              argv: list[str]):
    from test_cli_errors import assert_one_line, run_cli

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as where it is not installed
    code, _, err, exc = run_cli(argv, tmp_path)
    assert_one_line(code, err, exc, "Ray is not installed: tuning on a fleet needs the fleet extra "
                                    "(pip install 'abductune[fleet]')")


def test_live_on_a_cluster_without_gpus_says_so_in_one_line(ray_cluster: Any, tmp_path: Path):
    from test_cli_errors import assert_one_line, run_cli

    for argv in (["tune", "--ray", "local", "--mode", "live", "--kernel", "gelu_mul_fp16"],
                 ["sweep", "--ray", "local", "--kernel", "softmax_fp16", "--out", "out"]):
        code, _, err, exc = run_cli(argv, tmp_path)
        assert_one_line(code, err, exc, "the Ray cluster at 'local' has no GPU: live tuning needs one")
    assert ray_cluster.is_initialized()


def test_a_ray_tune_is_never_sent_to_the_daemon():
    from abductune.daemon.client import forwardable

    assert not forwardable(["tune", "--ray", "auto", "--mode", "live"])
    assert not forwardable(["tune", "--ray=local"])


# ----------------------------------------------------------------------------- stopping and closing

class Hangs:
    """A worker's evaluator factory: the bundled recordings replayed, except that a job holding
    `config` (any job, where None) never returns, as a hung compile or benchmark; first it
    starts a process of its own (as a live evaluator starts its compile pool and benchmark
    worker) and writes "worker-pid child-pid" to `pids`."""

    def __init__(self, config: Mapping[str, Any] | None, pids: str):
        self.config, self.pids = (dict(config) if config is not None else None), pids

    def __call__(self, target: Any) -> Evaluator:
        return _Hanging(Replayed()(target), self.config, self.pids)


class _Hanging(Evaluator):
    def __init__(self, inner: Evaluator, config: dict | None, pids: str):
        self.inner, self.config, self.pids = inner, config, pids
        self.space, self.problem = inner.space, inner.problem

    @property
    def clock(self) -> float:  # type: ignore[override]
        return self.inner.clock

    def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
        if self.config is None or any(dict(c) == self.config for c in configs):
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            with open(self.pids, "a") as f:
                f.write(f"{os.getpid()} {child.pid}\n")
            time.sleep(600)
        return self.inner.evaluate(configs)

    def remeasure(self, configs: Sequence[Mapping[str, Any]], *, rounds: int = 1) -> list[Measurement]:
        return self.inner.remeasure(configs, rounds=rounds)

    def vendor_baseline(self) -> Measurement:
        return self.inner.vendor_baseline()  # type: ignore[attr-defined]


class WithPool:
    """Replay, with a process pool per worker process kept in a module global, as the live
    evaluator keeps its compile pool (`measure.shared`); the evaluator's `close` shuts it down
    and appends to `marker`. Such a pool, left open, kept a worker process from ever exiting."""

    def __init__(self, marker: str):
        self.marker = marker

    def __call__(self, target: Any) -> Evaluator:
        import multiprocessing

        if "pool" not in _POOL:
            _POOL["pool"] = cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver"))
            _POOL["pool"].submit(os.getpid).result()
        ev = Replayed()(target)
        marker = self.marker

        def close() -> None:
            pool = _POOL.pop("pool", None)
            if pool is not None:
                pool.shutdown(wait=True)
                with open(marker, "a") as f:
                    f.write("closed\n")
        ev.close = close  # type: ignore[method-assign]
        return ev


_POOL: dict[str, Any] = {}


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie, dead and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()
    except (FileNotFoundError, ProcessLookupError):
        # A process that exits between the open and the read makes the read fail with ESRCH.
        return False


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether a process killed just now is gone within `within_s`: a SIGKILLed process closes
    its pipes (the sentinel `close` waits on) before the kernel marks it a zombie, and on a
    loaded machine that can take a moment; a process nothing killed stays alive and fails this."""
    deadline = time.monotonic() + within_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _first_search_config(serial: dict[str, Any], dims: Mapping[str, int]) -> dict:
    with sqlite3.connect(serial["path"]) as db:  # a config the search measures after its seeds
        [(cfg,)] = db.execute("SELECT m.config FROM measurements m JOIN contexts c ON c.id = m.context_id "
                              "WHERE c.dims = ? AND m.kind = 'search' ORDER BY m.id LIMIT 1",
                              (json.dumps(dict(dims), sort_keys=True, separators=(",", ":")),)).fetchall()
    return json.loads(cfg)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_fleet_stopped_at_a_deadline_returns_at_once_with_what_finished_and_loses_nothing(
        serial: dict[str, Any], tmp_path: Path):
    kernel, dims = JOBS[0]
    path, pids = tmp_path / "stop.sqlite", tmp_path / "pids"
    executor = ProcessExecutor(worker_kw=[{"factory": Hangs(_first_search_config(serial, dims), str(pids))}] * 3)
    farm = Farm(executor).start()
    done: list[Any] = []
    stopped_at: list[float] = []

    def stopper() -> None:  # the deadline: once one search hangs and the others could finish
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (pids.exists() and len(done) >= len(JOBS) - 2):
            time.sleep(0.02)
        stopped_at.append(time.monotonic())
        farm.stop(FleetError("the test's deadline"))
    t = threading.Thread(target=stopper)
    t.start()
    try:
        run = tune_fleet(farm, JOBS, mode="replay", strategy=STRATEGY, budget=Budget(BUDGET), store=str(path),
                         calibrate_gpus=False, on_done=done.append)
        returned = time.monotonic()
        t.join()
        assert pids.exists(), "the hanging config was never measured"
        assert returned - stopped_at[0] < 3.0, returned - stopped_at[0]  # not waiting on the hung job
        t0 = time.monotonic()
    finally:
        farm.close(grace_s=1.0)
    assert time.monotonic() - t0 < 8.0  # the grace, then killed
    assert "the test's deadline" in run.stopped and "unfinished" in run.summary()
    assert (kernel, dims) in run.unfinished
    assert len(run.outcomes) + len(run.unfinished) == len(JOBS) and len(run.outcomes) >= len(JOBS) - 2
    finished = [(o.kernel, o.dims) for o in run.outcomes]
    assert winners(run.outcomes) == [w for w in serial["winners"] if (w[0], w[1]) in finished]
    # nothing that landed is lost: every measurement the workers delivered is a stored row, and
    # each row is the one the serial run stored (the replay is deterministic)
    got = rows(path)
    assert len(got) == run.measurements
    assert not collections.Counter(got) - collections.Counter(serial["rows"])
    assert [r for r in got if (r[0], json.loads(r[1])) in finished] == \
        [r for r in serial["rows"] if (r[0], json.loads(r[1])) in finished]
    with sqlite3.connect(path) as db:
        statuses = dict(db.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall())
        spent = db.execute("SELECT COUNT(*) FROM measurements WHERE kind IN ('search', 'seed', 'remeasure')"
                           ).fetchone()[0]
    assert statuses.get("interrupted") and "running" not in statuses, statuses
    for line in pids.read_text().split("\n"):
        for pid in map(int, line.split()):
            assert _gone(pid), line  # the hung worker and the process it started
    run2, _ = fleet(ProcessExecutor(worker_kw=[{"factory": Replayed()}] * 2), path, calibrate_gpus=False)
    assert_same_as_serial(path, serial, run2.outcomes)  # resumed: finished, as the serial run
    assert sum(o.evaluations for o in run2.outcomes) == sum(serial["evaluations"]) - spent


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_close_kills_a_worker_stuck_in_a_job_and_what_it_started_after_the_grace(tmp_path: Path):
    pids = tmp_path / "pids"
    kernel, dims = JOBS[0]
    executor = ProcessExecutor(worker_kw=[{"factory": Hangs(None, str(pids))}])
    farm = Farm(executor).start()
    worker = executor.pid(0)
    try:
        cfg = read_dataset(bundled_datasets(kernel=kernel)[0]).records[0].config
        req = farm.request(Target(kernel, dims, "replay"), "evaluate", [cfg])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not pids.exists():
            time.sleep(0.02)
        assert pids.exists()
    finally:
        t0 = time.monotonic()
        farm.close(grace_s=1.0)
        took = time.monotonic() - t0
    assert 1.0 <= took < 5.0, took
    assert isinstance(req.replies.get(timeout=1), FleetStopped)
    [child] = [int(x) for x in pids.read_text().split()[1:]]
    assert worker is not None and _gone(worker) and _gone(child)
    with pytest.raises(FleetStopped, match="stopped"):  # a stopped farm takes no new work
        farm.request(Target(kernel, dims, "replay"), "evaluate", [cfg])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_closes_its_evaluators_and_exits_at_close_without_waiting_for_the_grace(tmp_path: Path):
    marker = tmp_path / "closed"
    executor = ProcessExecutor(worker_kw=[{"factory": WithPool(str(marker))}])
    with Farm(executor) as farm:
        run = tune_fleet(farm, JOBS[:1], mode="replay", strategy=STRATEGY, budget=Budget(4))
        worker = executor.pid(0)
        t0 = time.monotonic()
        farm.close(grace_s=60.0)
        took = time.monotonic() - t0
    assert len(run.outcomes) == 1
    assert took < 15.0, took  # it exited by itself: before, it waited on its pool forever
    assert marker.read_text() == "closed\n" and worker is not None and _gone(worker)


LOCAL_DRIVER = """
import sys, time
from abductune.fleet import Farm, ProcessExecutor, Target
from test_fleet import Hangs
if __name__ == "__main__":
    ex = ProcessExecutor(worker_kw=[{{"factory": Hangs(None, sys.argv[1])}}])
    farm = Farm(ex).start()
    farm.request(Target({kernel!r}, {dims!r}, "replay"), "evaluate", [{config!r}])
    time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_local_workers_end_with_what_they_started_when_the_driver_is_killed(tmp_path: Path):
    kernel, dims = JOBS[0]
    cfg = read_dataset(bundled_datasets(kernel=kernel)[0]).records[0].config
    script, pids = tmp_path / "driver.py", tmp_path / "pids"
    script.write_text(LOCAL_DRIVER.format(kernel=kernel, dims=dims, config=cfg))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src"),
                                                        os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(script), str(pids)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not pids.exists() and proc.poll() is None:
            time.sleep(0.05)
        assert pids.exists(), proc.stderr.read().decode()[-2000:] if proc.poll() is not None else "no job ran"
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # no chance to close anything
        proc.wait()
    worker, child = (int(x) for x in pids.read_text().split())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_alive(worker) or _alive(child)):
        time.sleep(0.1)
    assert _gone(worker) and _gone(child)


class _Inline(Executor):
    """Workers as threads of this process, recording the size of every job they get."""

    name = "inline"

    def __init__(self, n: int):
        self.n, self.sizes = n, []

    def start(self) -> list[Any]:
        self.workers = [FleetWorker(factory=Replayed()) for _ in range(self.n)]
        self.pools = [cf.ThreadPoolExecutor(1) for _ in range(self.n)]
        return list(range(self.n))

    def describe(self, workers: Sequence[Any]) -> list[dict[str, Any]]:
        return [self.workers[w].describe() for w in workers]

    def submit(self, worker: Any, job: Job) -> Any:
        self.sizes.append(len(job.configs))
        return self.pools[worker].submit(self.workers[worker].run, job)

    def wait(self, futures: Sequence[Any], timeout: float) -> list[Any]:
        return list(cf.wait(futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)[0])

    def result(self, future: Any) -> Any:
        return future.result()

    def close(self, grace_s: float = 10.0) -> None:
        for p in self.pools:
            p.shutdown(wait=True)


@pytest.mark.parametrize("workers, sizes", [(1, [8]), (3, [4, 4])])
def test_a_batch_goes_to_one_worker_whole_unless_other_workers_idle(workers: int, sizes: list[int]):
    kernel, dims = JOBS[0]
    configs = [m.config for m in read_dataset(bundled_datasets(kernel=kernel)[0]).records[:8]]
    executor = _Inline(workers)
    with Farm(executor) as farm:
        req = farm.request(Target(kernel, dims, "replay"), "evaluate", configs)
        got = 0
        while got < len(configs):
            got += len(req.replies.get(timeout=10)[0])
    # one worker runs one job at a time, compiling its configs when it starts it: one job of 8
    # compiles them side by side, where two of 4 would compile one after the other
    assert sorted(executor.sizes) == sizes


def test_a_worker_switching_problems_drops_the_compiles_it_queued_for_the_last_one():
    from abductune.measure.compile_pool import Compiler

    compiler = Compiler(workers=1, target=(90, 32))
    compiler._pool = cf.ThreadPoolExecutor(1)  # one compile slot, held below: what is queued stays queued
    release = threading.Event()
    compiler._pool.submit(release.wait)
    datasets = {k: read_dataset(bundled_datasets(kernel=k)[0]) for k in ("softmax_fp16", "rmsnorm_fp16")}

    class Speculating(Evaluator):
        """Replays, and queues compiles of the configs it expects next on the shared pool."""

        def __init__(self, target: Any):
            self.inner = Replayed()(target)
            self.space, self.problem = self.inner.space, self.inner.problem
            self.compiler = compiler
            self.queued: list[Any] = []

        def evaluate(self, configs: Sequence[Mapping[str, Any]]) -> list[Measurement]:
            ahead = [m.config for m in datasets[self.problem.kernel].records[8:12]]
            for c in ahead:
                self.queued.append(compiler._submit(self.problem.kernel, c, self.problem)[0])
            return self.inner.evaluate(configs)

    made: dict[str, Speculating] = {}

    def factory(target: Any) -> Evaluator:
        made[target.kernel] = Speculating(target)
        return made[target.kernel]
    worker = FleetWorker(factory=factory)
    try:
        targets = {k: Target(k, dict(ds.problem.dims), "replay") for k, ds in datasets.items()}
        first = worker.run(Job(targets["softmax_fp16"], "evaluate", [datasets["softmax_fp16"].records[0].config]))
        assert first.stats["switches"] == 1 and "speculation_dropped" not in first.stats
        again = worker.run(Job(targets["softmax_fp16"], "evaluate", [datasets["softmax_fp16"].records[1].config]))
        assert "switches" not in again.stats  # the same problem: nothing dropped, no new setup
        assert not any(f.cancelled() for f in made["softmax_fp16"].queued)
        other = worker.run(Job(targets["rmsnorm_fp16"], "evaluate", [datasets["rmsnorm_fp16"].records[0].config]))
        assert other.stats["switches"] == 1 and other.stats["speculation_dropped"] == 4
        assert all(f.cancelled() for f in made["softmax_fp16"].queued)  # never run: they held up the others
        assert not any(f.cancelled() for f in compiler._futures.values())  # none left to read as a failed compile
        assert other.measurements[0].ok
    finally:
        for f in list(compiler._futures.values()) + [f for ev in made.values() for f in ev.queued]:
            f.cancel()  # nothing queued ever runs a compile here
        release.set()
        compiler._pool.shutdown(wait=True)
