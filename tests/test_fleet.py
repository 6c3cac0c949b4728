"""Issue 26: tuning on a fleet (docs/FLEET.md). A local Ray cluster on the CPU stands in for a
fleet of GPUs: a custom resource `fleet_gpu` plays the GPU, and each actor replays the bundled
H100 recordings (`fleet_fixtures.Replayed`). What must hold:
- the results equal a serial run's: same winners, same stored rows, nothing measured twice;
- a worker killed mid-run (`ray.kill`) loses nothing: its jobs in flight are queued again once;
  a config lost twice is recorded failed, once;
- an interrupted or killed driver resumes from the store and spends only what is left;
- every row names its GPU; an H200 beside H100s is another problem; a GPU slower than its
  peers on shared configs is left out.
One Ray cluster serves the module (starting one costs seconds). Without Ray these tests skip,
unless ABDUCTUNE_REQUIRE_FLEET=1 (CI), where a missing Ray is a failure. The local-process
executor (the fallback where Ray cannot be installed) is tested without Ray."""
from __future__ import annotations

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
from typing import Any

import pytest

import fleet_fixtures
from abductune.datasets.bundled import bundled_datasets
from abductune.datasets.format import read_dataset
from abductune.fleet import Farm, ProcessExecutor, sweep_fleet, tune_fleet
from abductune.hardware import KNOWN_GPUS
from abductune.search import Budget
from abductune.store import Store
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
        outs = [tune_one(k, d, strategy=STRATEGY, budget=Budget(BUDGET), mode="replay", store=store) for k, d in JOBS]
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


def test_ray_kill_of_a_worker_mid_run_loses_nothing(ray_cluster: Any, serial: dict[str, Any], tmp_path: Path):
    executor = _executor(3, factory=Replayed(delay=0.02))
    farm = Farm(executor).start()
    killed: list[str] = []

    def killer() -> None:
        w = farm.workers[0]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (w.jobs >= 2 and w.in_flight > 0):
            time.sleep(0.005)
        ray_cluster.kill(w.handle, no_restart=True)
        killed.append(w.info["ident"])
    t = threading.Thread(target=killer)
    t.start()
    try:
        run = tune_fleet(farm, JOBS, mode="replay", strategy=STRATEGY, budget=Budget(BUDGET),
                         store=str(tmp_path / "k.sqlite"), calibrate_gpus=False)
    finally:
        t.join()
        farm.close()
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

    def killer() -> None:
        w = farm.workers[0]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (w.jobs >= 2 and w.in_flight > 0):
            time.sleep(0.005)
        executor.kill(0)
    t = threading.Thread(target=killer)
    t.start()
    try:
        run = tune_fleet(farm, JOBS, mode="replay", strategy=STRATEGY, budget=Budget(BUDGET),
                         store=str(tmp_path / "l.sqlite"), calibrate_gpus=False)
    finally:
        t.join()
        farm.close()
    assert len(run.stats["lost"]) == 1 and run.stats["requeued"] >= 1, run.stats
    assert_same_as_serial(tmp_path / "l.sqlite", serial, run.outcomes)
    assert run.summary().startswith("fleet (local processes): 3 worker(s) (cpu)")


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
