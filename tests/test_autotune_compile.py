"""The decorator's compile workers and cold first call (issues 24 and 27), on the CPU:

- heuristics under the autotuner (a `triton.heuristics` wrapper made where it is called, its
  module naming the bare kernel): computed here per config, sent as constexprs, and the worker's
  binary lands under the key the caller's own launch computes (a real compile for sm_90);
- the pool starts where a kernel is decorated (one look for a GPU per process) and imports the
  kernels' modules before it takes jobs; a forked child never uses or kills its parent's workers;
- a launch settles with the workers first: a finished job is used, a queued one withdrawn, a
  running one waited for; the run-off stops once one contender won every round;
- a kernel decorated and called at once, its pool's workers slow to start (torch's import made
  to sleep in them): the caller compiles every config itself, in about its own compile time,
  and the tune measures and picks what it does with hot workers; configs named while no worker
  is hot go to the workers once one is;
- `phases`: where a tune's time went."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import pytest

from autotune_kernels import INTERPRET, interpreted

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

from abductune.autotune import compile_workers, compiling  # noqa: E402
from abductune.autotune.evaluation import CallEvaluator, decided  # noqa: E402

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"
MODULE = "autotune_kernels.heuristics_rows"


class FakePool:
    """A pool whose futures the test settles by hand (or at once, with `answer`)."""

    def __init__(self, hot=1, answer=None, failed=None):
        self._hot, self.answer, self._failed, self.jobs, self.futures = hot, answer, failed, [], []

    def hot(self, module):
        return self._hot

    def failed(self, module):
        return self._failed

    def submit(self, job):
        f = Future()
        f.cold = False
        self.jobs.append(job)
        self.futures.append(f)
        if self.answer is not None:
            f.set_running_or_notify_cancel()
            f.set_result(self.answer)
        return f


# ------------------------------------------------------------ heuristics under the autotuner

@interpreted
def test_heuristics_under_the_autotuner_are_computed_here_and_sent_as_constexprs(monkeypatch):
    from autotune_kernels import heuristics_rows as hr

    wrapped = hr.wrapped()
    assert compiling.peelable(wrapped) and compiling.peelable(hr.row_scale)
    assert not compiling.peelable(SimpleNamespace(fn=SimpleNamespace(fn=hr.row_scale)))  # not Triton's heuristics
    x = torch.randn(4, 300)
    args, kwargs = (x, torch.empty_like(x), 300), {"grid": (4,), "warmup": False}
    assert compiling.peel(wrapped, args, {**kwargs, "BLOCK": 128}) == {"WHOLE_ROW": False, "CONTIG": True}
    assert compiling.peel(wrapped, args, {**kwargs, "BLOCK": 512})["WHOLE_ROW"] is True
    # heuristics over heuristics: the outer one first, the inner one sees its value
    outer = triton.heuristics({"BLOCK": lambda a: 1024})(wrapped)
    assert compiling.peel(outer, args, kwargs) == {"BLOCK": 1024, "WHOLE_ROW": True, "CONTIG": True}
    pool = FakePool()
    monkeypatch.setattr(compiling, "compile_pool", lambda *module: pool)
    w = compiling.parallel_warm(f"{MODULE}:row_scale", args, kwargs, under=wrapped)
    w([{"BLOCK": 128, "num_warps": 4}, {"BLOCK": 512, "num_warps": 8}])
    assert [j["config"] for j in pool.jobs] == [{"BLOCK": 128, "num_warps": 4, "WHOLE_ROW": False, "CONTIG": True},
                                                {"BLOCK": 512, "num_warps": 8, "WHOLE_ROW": True, "CONTIG": True}]
    assert all(j["bare"] and j["target"] == f"{MODULE}:row_scale" for j in pool.jobs)
    assert pool.jobs[0]["args"][2] == 300 and pool.jobs[0]["args"][0]["tensor"] == "torch.float32"


def test_an_autotuner_over_a_wrapper_made_where_it_is_called_compiles_in_workers():
    if INTERPRET:
        pytest.skip("compiled kernels: the ordinary run")
    from autotune_kernels import heuristics_rows as hr

    from abductune.autotune import Autotuner

    k = Autotuner(hr.wrapped(), hr.row_scale.arg_names, [triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 512})],
                  ["n_cols"], store=":memory:")
    # the module names the bare kernel; only heuristics lie between: the caller computes them
    assert compiling.compile_plan(k) == ("parallel", f"{MODULE}:row_scale")
    other = Autotuner(SimpleNamespace(fn=hr.row_scale, arg_names=hr.row_scale.arg_names), hr.row_scale.arg_names,
                      [triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 512})], ["n_cols"], store=":memory:")
    plan = compiling.compile_plan(other)  # an unknown wrapper: workers could not rebuild it
    assert plan[0] == "serial" and "cannot rebuild" in plan[1], plan


_CHECK = """
import json, sys, torch
from triton import knobs
from triton.runtime import driver
from abductune.measure.worker import TargetOnlyDriver
from autotune_kernels import heuristics_rows as hr
driver.set_active(TargetOnlyDriver(90, 32))  # compile-only launches for sm_90, no GPU
out = []
for cfg in json.loads(sys.argv[1]):
    seen = []
    knobs.compilation.listener = lambda **kw: seen.append(kw.get("cache_hit", True))
    x = torch.randn(4, 300)
    hr.wrapped().run(x, torch.empty_like(x), 300, grid=(4,), warmup=True, **cfg)  # as the caller launches it
    out.append(seen != [] and not all(seen))
print(json.dumps(out))
"""


def test_a_worker_compiles_the_bare_kernel_under_the_key_the_callers_launch_computes(tmp_path, monkeypatch):
    if INTERPRET:
        pytest.skip("compiles for sm_90: the ordinary run")
    from autotune_kernels import heuristics_rows as hr

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # the workers get the environment at their start
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(SRC), str(TESTS)]))
    guard = "autotune_kernels.pool_guard"  # imports only where the worker starts no pool of its own
    pool = compile_workers.CompilePool(1, target=(90, 32), modules=(MODULE, guard))
    try:
        t0 = time.perf_counter()
        while not (pool.hot(guard) or pool.failed(guard)) and time.perf_counter() - t0 < 180:
            time.sleep(0.05)
        assert pool.hot(MODULE) == 1 and pool.stats["target"] == (90, 32), pool.stats
        assert pool.hot(guard) == 1, pool.failed(guard)
        t0 = time.perf_counter()
        while not pool.settled() and time.perf_counter() - t0 < 30:
            time.sleep(0.05)
        assert pool.settled() and pool.stats["settled_s"] > pool.stats["first_ready_s"] > 0
        monkeypatch.setattr(compiling, "compile_pool", lambda *module: pool)
        x = torch.randn(4, 300)
        wrapped = hr.wrapped()
        w = compiling.parallel_warm(f"{MODULE}:row_scale", (x, torch.empty_like(x), 300),
                                    {"grid": (4,), "warmup": False}, under=wrapped)
        cfgs = [{"BLOCK": 128, "num_warps": 4}, {"BLOCK": 512, "num_warps": 4}]  # a loop over the row; the whole row
        w(cfgs)
        answers = [f.result(timeout=300) for f in w.jobs.values()]  # the launches come after the compiles here
        for c in cfgs:
            w.settle(c)
        assert answers == [{"ok": True}] * 2 and w.stats["from_workers"] == 2 and not w.broken, (w.stats, w.broken)
    finally:
        pool.close()
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", _CHECK, json.dumps(cfgs + [{"BLOCK": 256, "num_warps": 4}])], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    # compiled at the caller's launch: not the two the worker compiled, only the one it never saw
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [False, False, True]


# ------------------------------------------------------------------------ the pool's start

def test_early_start_looks_for_a_gpu_once_and_imports_every_decorated_module(monkeypatch):
    from abductune.measure import target

    looks, preloads = [], []
    fake = SimpleNamespace(preload=preloads.append, pid=os.getpid())

    def started(*module):
        compile_workers._POOL = fake  # restored by monkeypatch below
        return fake
    monkeypatch.setattr(target, "gpu_arch", lambda: looks.append(1) or 90)
    monkeypatch.setattr(compile_workers, "compile_pool", started)
    monkeypatch.setattr(compile_workers, "_POOL", None)
    monkeypatch.setattr(compile_workers, "_EARLY", {"pid": None, "modules": []})
    monkeypatch.setenv(compile_workers.POOL_ENV, "miss")
    assert compile_workers.start_early("lib.a") is False and not looks
    monkeypatch.setenv(compile_workers.POOL_ENV, "early")
    assert compile_workers.start_early("lib.a") and compile_workers.start_early("lib.b")
    t0 = time.perf_counter()
    while len(preloads) < 1 and time.perf_counter() - t0 < 10:
        time.sleep(0.01)
    compile_workers.start_early("lib.a")  # a kernel decorated once the pool runs: its module again
    t0 = time.perf_counter()
    while len(preloads) < 3 and time.perf_counter() - t0 < 10:
        time.sleep(0.01)
    assert looks == [1] and sorted(preloads) == ["lib.a", "lib.a", "lib.b"]
    # no GPU named: nothing starts, and the look is not repeated for the next kernel
    looks.clear()
    preloads.clear()
    monkeypatch.setattr(target, "gpu_arch", lambda: looks.append(1) or None)
    monkeypatch.setattr(compile_workers, "_EARLY", {"pid": None, "modules": []})
    monkeypatch.setattr(compile_workers, "_POOL", None)
    compile_workers.start_early("lib.c")
    compile_workers.start_early("lib.d")
    time.sleep(0.3)
    assert looks == [1] and preloads == []


def test_a_forked_childs_copy_of_the_pool_is_neither_used_nor_closed(monkeypatch):
    monkeypatch.setenv(compile_workers.WORKERS_ENV, "3")
    assert compile_workers.workers_wanted() == 3
    monkeypatch.setenv(compile_workers.WORKERS_ENV, "many")
    assert 1 <= compile_workers.workers_wanted() <= 8
    monkeypatch.setattr(compile_workers, "workers_wanted", lambda: 0)
    parents = compile_workers.CompilePool(0, target=None)
    killed = []
    parents.procs.append(SimpleNamespace(poll=lambda: None, kill=lambda: killed.append(1)))
    parents.pid = -1  # as a forked child sees the pool its parent started
    monkeypatch.setattr(compile_workers, "_POOL", parents)
    assert compile_workers.pool_started() is None
    mine = compile_workers.compile_pool("lib.a")
    assert mine is not parents and mine.pid == os.getpid() and mine.modules == ["lib.a"]
    parents.close()
    assert killed == []  # the parent's workers are the parent's
    mine.close()


# ----------------------------------------- a kernel decorated and called at once (issues 27, 24)

_SLOW_START = """
import sys, time

class SlowTorch:  # a worker slow to start: torch's import sleeps first (the kernel's module is quick)
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            sys.meta_path.remove(self)
            time.sleep(%r)
        return None

sys.meta_path.insert(0, SlowTorch())
"""

_COLD = """
import json, sys, time
mode, slow_dir, store = sys.argv[1:4]
if mode == "slow":
    sys.path.insert(0, slow_dir)  # the compile workers start with this path: its sitecustomize slows them
import torch, triton
from abductune.measure import target
from abductune.measure.worker import _init_compile_worker
_init_compile_worker((90, 32))  # this process's launches only compile, for sm_90
target.gpu_arch = lambda: 90  # as where NVML names an H100: the pool starts at decoration, compiling offline
import abductune
from abductune.autotune import compile_workers
from autotune_kernels import heuristics_rows as hr
configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 128, 256, 512) for w in (2, 4)]
ms = {(c.kwargs["BLOCK"], c.num_warps): 1.0 + i / 10 for i, c in enumerate(configs[::-1])}
timer = lambda cfg, launch: [ms[(cfg["BLOCK"], cfg["num_warps"])]]
k = abductune.autotune(configs=configs, key=["n_cols"], store=store, timer=timer,
                       compile="serial" if mode == "serial" else "auto")(hr.wrapped())
if mode == "hot":  # the workers hot before the first call (a library imported well before it)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 240:
        pool = compile_workers.pool_started()
        if pool is not None and pool.hot(hr.__name__) and pool.settled():
            break
        time.sleep(0.05)
x = torch.randn(4, 300)
t0 = time.perf_counter()
k[(4,)](x, torch.empty_like(x), 300)  # the first call: a tune, every launch a compile only
cold = time.perf_counter() - t0
[p] = k.phases
print(json.dumps({"cold_s": cold, "first_launch_s": p["first_launch_s"], "compile": p["compile"],
                  "winner": k.last_result.winner.config,
                  "measured": sorted(json.dumps(m.config, sort_keys=True) for m in k.last_result.history)}))
"""


def test_a_kernel_called_while_its_workers_start_compiles_in_the_caller_as_fast_as_serially(tmp_path):
    """Session 16 on the H100: the pool was 0.5 s old at the first tune; its workers had imported
    the kernel's module, took the jobs and spent seconds importing torch (and on Triton's first
    compile) while the caller waited for them: LayerNorm's cold call 3.09x Triton's. A worker now
    pays those costs before it counts as hot; until one is, the caller compiles everything."""
    if INTERPRET:
        pytest.skip("compiles for sm_90: the ordinary run")
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(_SLOW_START % 30.0)  # longer than the whole tune
    runs = {}
    for mode in ("serial", "slow", "hot"):
        env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / f"triton-{mode}"), "ABDUCTUNE_COMPILE_WORKERS": "2",
               "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)])}
        env.pop("TRITON_INTERPRET", None)
        r = subprocess.run([sys.executable, "-c", _COLD, mode, str(slow), str(tmp_path / f"{mode}.sqlite")], env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, (mode, r.stderr[-3000:])
        runs[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    serial, slow_run, hot = runs["serial"], runs["slow"], runs["hot"]
    assert serial["compile"]["plan"] == "serial" and slow_run["compile"]["plan"] == hot["compile"]["plan"] == "parallel"
    c = slow_run["compile"]
    # no worker was hot during the tune: nothing was sent, nothing waited for, all compiled here
    assert c["hot"] == 0 and c["sent"] == 0 and c["waited"] == 0 and c["compiled_here"] == 8, c
    # the first call took the caller's own compile time, give or take the pool's start (a
    # loaded CPU; the workers' 30 s sleep would show as far more than this margin)
    assert slow_run["cold_s"] <= 1.5 * serial["cold_s"] + 2.0, (slow_run["cold_s"], serial["cold_s"])
    # hot workers: they compiled configs, each having paid torch and the first compile before
    h = hot["compile"]
    assert h["from_workers"] >= 1 and h["first_prepared_s"] >= h["first_ready_s"] > 0, h
    assert len(h["prepare_s"]) == 2 and all(t is not None and t >= 0 for pair in h["prepare_s"] for t in pair), h
    # the same configs measured and the same winner, however the configs were compiled
    assert serial["measured"] == slow_run["measured"] == hot["measured"] and len(serial["measured"]) == 8
    assert serial["winner"] == slow_run["winner"] == hot["winner"]
    assert (serial["winner"]["BLOCK"], serial["winner"]["num_warps"]) == (512, 4)  # the timer's fastest


# ------------------------------------------------------------------- settling, the run-off

def test_a_launch_uses_a_finished_job_withdraws_a_queued_one_and_waits_for_a_running_one(monkeypatch):
    pool = FakePool()
    monkeypatch.setattr(compiling, "compile_pool", lambda *module: pool)
    w = compiling.parallel_warm("m:k", [torch.zeros(2)], {})
    cfgs = [{"B": b} for b in (1, 2, 3, 4, 5)]
    w(cfgs)
    done, queued, running, cold, late = pool.futures
    done.set_running_or_notify_cancel()
    done.set_result({"ok": True})
    running.set_running_or_notify_cancel()
    cold.set_running_or_notify_cancel()
    cold.cold = True  # its worker is still importing the module
    late.set_running_or_notify_cancel()
    w.settle(cfgs[0])
    w.settle(cfgs[1])
    assert queued.cancelled()
    import threading

    threading.Timer(0.2, lambda: running.set_result({"ok": True})).start()
    w.settle(cfgs[2])  # waits for the worker rather than compiling it a second time
    w.settle(cfgs[3])
    late.set_result({"ok": False, "error": "TypeError: x", "config_error": False})
    w.settle(cfgs[4])
    w.settle(cfgs[0])  # the run-off's launch of a settled config counts nothing
    s = w.stats
    assert (s["from_workers"], s["withdrawn"], s["waited"], s["compiled_here"]) == (2, 1, 1, 3), s
    assert s["waited_s"] >= 0.1
    # a pool whose workers could not import the module: reported once, nothing sent
    broken = []
    pool2 = FakePool(hot=0, failed="ModuleNotFoundError: No module named 'torch'")
    monkeypatch.setattr(compiling, "compile_pool", lambda *module: pool2)
    w2 = compiling.parallel_warm("m:k", [torch.zeros(2)], {}, on_broken=broken.append)
    w2(cfgs)
    w2(cfgs)
    assert pool2.jobs == [] and len(broken) == 1 and "importing m failed" in broken[0]


def test_configs_named_while_no_worker_is_hot_compile_here_until_one_is_then_go_to_the_workers(monkeypatch):
    pool = FakePool(hot=0)
    monkeypatch.setattr(compiling, "compile_pool", lambda *module: pool)
    w = compiling.parallel_warm("m:k", [torch.zeros(2)], {})
    cfgs = [{"B": b} for b in (1, 2, 3, 4, 5)]
    w(cfgs)
    w(cfgs[2:])  # the next batch's hint, the pool still starting
    assert pool.jobs == [] and w.stats["pool_cold_calls"] == 2
    assert not w.settle(cfgs[0])  # compiled here: no worker can take it
    pool._hot = 1  # a worker has paid its one-time costs and imported the module
    assert not w.settle(cfgs[1])  # this one's launch is now: still compiled here ...
    # ... and the configs named meanwhile that no launch has compiled go to the workers, in order
    assert [j["config"] for j in pool.jobs] == cfgs[2:] and w.stats["sent_late"] == 3 and not w.pending
    pool.futures[0].set_running_or_notify_cancel()
    pool.futures[0].set_result({"ok": True})
    assert w.settle(cfgs[2])  # found compiled by a worker
    w(cfgs)  # a later hint: nothing sent twice, nothing compiled here already sent
    assert len(pool.jobs) == 3
    s = w.stats
    assert (s["sent"], s["from_workers"], s["compiled_here"]) == (3, 1, 2), s


def test_while_a_worker_compiles_its_config_this_process_compiles_the_next_queued_ones(monkeypatch):
    pool = FakePool()
    monkeypatch.setattr(compiling, "compile_pool", lambda *module: pool)
    here = []

    def compile_here(c):
        here.append(c["B"])
        if len(here) == 2:  # the worker finishes config 1 while this process compiles config 3
            first.set_result({"ok": True})
    cfgs = [{"B": b} for b in (1, 2, 3, 4)]
    w = compiling.parallel_warm("m:k", [torch.zeros(2)], {}, compile_here=compile_here)
    w(cfgs)
    first, second, third, fourth = pool.futures
    first.set_running_or_notify_cancel()  # a worker compiles config 1; 2, 3 and 4 wait in the queue
    w.settle(cfgs[0])
    # this process compiled the next queued configs (withdrawn from the queue) until config 1 was done
    assert here == [2, 3] and second.cancelled() and third.cancelled() and not fourth.cancelled()
    assert w.stats["helped"] == 2 and w.stats["from_workers"] == 1
    w.settle(cfgs[1])  # compiled here already: nothing to wait for
    assert w.stats["compiled_here"] == 1 and here == [2, 3]


def test_a_worker_binary_compiled_again_at_launch_is_counted_and_said_once(monkeypatch, caplog):
    import logging

    from triton import knobs

    pool = FakePool(answer={"ok": True})
    monkeypatch.setattr(compiling, "compile_pool", lambda *module: pool)
    w = compiling.parallel_warm("m:k", [torch.zeros(2)], {})
    cfgs = [{"B": b} for b in (1, 2, 3)]
    w(cfgs)
    seen = []
    monkeypatch.setattr(knobs.compilation, "listener", lambda **kw: seen.append(kw))  # the user's own, kept

    def compiles_again():  # what Triton's compile() tells the listener on a cache miss
        knobs.compilation.listener(src=None, cache_hit=False)
        return "kernel"
    with caplog.at_level(logging.WARNING, logger="abductune.autotune"):
        assert w.first_launch(cfgs[0], lambda: "kernel") == "kernel"  # found the worker's binary
        w.first_launch(cfgs[1], compiles_again)
        w.first_launch(cfgs[2], compiles_again)
    assert w.stats["worker_misses"] == 2 and w.stats["from_workers"] == 3 and len(seen) == 2
    assert len([r for r in caplog.records if "another cache key" in r.getMessage()]) == 1
    assert knobs.compilation.listener is not None and knobs.compilation.listener.__name__ == "<lambda>"


def _evaluator(table):
    """A CallEvaluator whose run-off timer reads per-config times round by round from `table`."""
    from abductune.measure.inprocess import Launch
    from abductune.problem import Problem
    from abductune.space import Choice, Space

    rounds = {k: iter(v) for k, v in table.items()}
    space = Space([Choice("B", list(table))])
    ev = CallEvaluator(Problem("k", "other", {"n": 1}), space, lambda c: Launch(lambda: None),
                       lambda c, la: 1.0, remeasure_timer=lambda c, la: next(rounds[c["B"]]))
    return ev


def test_the_runoff_stops_once_one_contender_won_every_round():
    clear = _evaluator({1: [1.0, 1.0, 9, 9, 9], 2: [1.1, 1.2, 0, 0, 0], 3: [1.3, 1.05, 0, 0, 0]})
    ms = clear.remeasure([{"B": 1}, {"B": 2}, {"B": 3}], rounds=5)
    assert clear.runoff_rounds == 2 and [m.samples_ms for m in ms] == [(1.0, 1.0), (1.1, 1.2), (1.3, 1.05)]
    traded = _evaluator({1: [1.0, 1.2, 1.0, 1.2, 1.0], 2: [1.1, 1.1, 1.1, 1.1, 1.1]})
    ms = traded.remeasure([{"B": 1}, {"B": 2}], rounds=5)
    assert traded.runoff_rounds == 5 and [m.time_ms for m in ms] == [1.0, 1.1]
    late = _evaluator({1: [1.0, 1.2, 1.0, 1.0, 9], 2: [1.1, 1.1, 1.1, 1.1, 9]})
    late.remeasure([{"B": 1}, {"B": 2}], rounds=5)
    assert late.runoff_rounds == 5  # it lost a round: every round is taken
    assert decided([[1.0], [2.0]], [None, ValueError()]) and not decided([[1.0, 2.0], [1.5, 1.5]], [None, None])


@interpreted
def test_phases_say_where_a_tune_spent_its_time(tmp_path: Path):
    from autotune_kernels import matmul as mm

    def timer(cfg, launch):
        time.sleep(0.01)
        return [{16: 3.0, 32: 1.0}[cfg["BLOCK_SIZE_M"]] + (cfg["BLOCK_SIZE_N"] == 32) * 0.001]

    k = mm.make(store=tmp_path / "s.sqlite", timer=timer)
    mm.matmul(k, torch.randn(40, 24), torch.randn(24, 36))
    [p] = k.phases
    parts = ("lookup_s", "before_session_s", "first_launch_s", "bench_s", "runoff_s", "store_s", "session_other_s",
             "after_session_s")
    assert all(p[n] >= 0 for n in parts) and p["evaluations"] == k.stats["evaluations"]
    assert p["bench_s"] >= 0.01 * p["evaluations"]  # the timer's own time
    assert sum(p[n] for n in parts[1:]) <= p["wall_s"] + 0.01
    assert p["runoff_contenders"] == k.stats["retimed"]
    assert p["compile"]["plan"] == "serial" and "interpreter" in p["compile"]["why"]
    json.dumps(p)  # what the benchmarks write


def test_a_module_importable_only_through_a_folder_its_library_added_is_preloaded_with_that_folder(tmp_path,
                                                                                                  monkeypatch):
    # FlagGems imports its per-GPU backends as `hopper.ops.mm` after putting their folder on
    # sys.path; workers started with the caller's earlier path must be told that folder.
    from abductune.autotune.compile_workers import import_root

    root = tmp_path / "backend"
    (root / "hopperish" / "ops").mkdir(parents=True)
    (root / "hopperish" / "__init__.py").write_text("")
    (root / "hopperish" / "ops" / "__init__.py").write_text("")
    (root / "hopperish" / "ops" / "mm.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(root))
    import importlib

    importlib.import_module("hopperish.ops.mm")
    assert import_root("hopperish.ops.mm") == str(root.resolve())
    assert import_root("hopperish.ops") == str(root.resolve())  # a package: its __init__.py
    assert import_root("no.such.module") is None
    probe = ("import json, sys; from abductune.autotune.compile_workers import _preload; "
             "print(json.dumps([_preload('hopperish.ops.mm'), _preload('hopperish.ops.mm', sys.argv[1])]))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    out = subprocess.run([sys.executable, "-c", probe, str(root.resolve())], env=env, capture_output=True,
                         text=True, timeout=120)
    without, with_root = json.loads(out.stdout.strip().splitlines()[-1])
    assert not without["ok"] and "hopperish" in without["error"]
    assert with_root == {"ok": True}


def test_a_config_still_compiling_in_a_worker_past_the_wait_fails_rather_than_compiling_here_again(monkeypatch):
    pool = FakePool()
    monkeypatch.setattr(compiling, "compile_pool", lambda *module: pool)
    monkeypatch.setattr(compiling, "WAIT_RUNNING_S", 0.05)
    here = []
    cfgs = [{"B": 1}, {"B": 2}]
    w = compiling.parallel_warm("m:k", [torch.zeros(2)], {}, compile_here=lambda c: here.append(c))
    w(cfgs)
    for f in pool.futures:  # both running in workers, neither ever answers (ptxas on a hopeless config)
        f.set_running_or_notify_cancel()
    launched = []
    with pytest.raises(compiling.CompileTimeout, match="still compiling in a worker after 0.05 s"):
        w.first_launch(cfgs[0], lambda: launched.append(1))
    assert launched == [] and here == []  # not compiled a second time here
    assert w.stats["compile_timeouts"] == 1 and w.stats["waited"] == 1
    from abductune.measure.inprocess import status_of

    assert status_of(compiling.CompileTimeout("x")).value == "timeout"  # stored as a timeout, not a crash
    pool.futures[1].set_result({"ok": True})
    assert w.settle(cfgs[1])  # the next config goes on as before


def test_configs_plainly_slower_than_the_fastest_are_timed_by_the_short_probe_alone():
    from abductune.autotune.evaluation import RACE_MARGIN
    from abductune.measure.inprocess import Launch
    from abductune.problem import Problem
    from abductune.space import Choice, Space

    full = {1: 1.0, 2: 2.0, 3: 0.8, 4: 1.3, 5: 0.94}
    probe = {1: 1.0, 2: 2.05, 3: 0.82, 4: 1.31, 5: 0.95}
    timed: list[tuple[str, int]] = []

    def timer(kind, table):
        def t(c, la):
            timed.append((kind, c["B"]))
            return table[c["B"]]
        return t
    ev = CallEvaluator(Problem("k", "other", {"n": 1}), Space([Choice("B", list(full))]),
                       lambda c: Launch(lambda: None), timer("full", full), probe_timer=timer("probe", probe))
    ms = ev.evaluate([{"B": b} for b in (1, 2, 3, 4, 5)])
    # the first has nothing to race against; 2 (2.05 > 1.2 x 1.0) keeps its probe; 3 is close,
    # timed in full and becomes the fastest; 4 (1.31 > 1.2 x 0.8) keeps its probe; 5 (0.95, within
    # 1.2 x 0.8) is timed in full
    assert abs(RACE_MARGIN - 1.2) < 1e-9  # the run-off's widest window: no raced config could be a contender
    assert timed == [("full", 1), ("probe", 2), ("probe", 3), ("full", 3), ("probe", 4), ("probe", 5), ("full", 5)]
    assert [m.time_ms for m in ms] == [1.0, 2.05, 0.8, 1.31, 0.94]
    assert [m.extra.get("raced") for m in ms] == [None, 2.05, None, round(1.31 / 0.8, 3), None]
    assert ev.raced == 2 and ev.best_ms == 0.8 and all(m.ok for m in ms)

    # a config the probe keeps in the running is timed by the timer after a probe (no warm-up)
    timed.clear()
    warm = CallEvaluator(Problem("k", "other", {"n": 1}), Space([Choice("B", list(full))]),
                         lambda c: Launch(lambda: None), timer("full", full), probe_timer=timer("probe", probe),
                         probed_timer=timer("probed", full))
    ms = warm.evaluate([{"B": b} for b in (1, 2, 5)])
    assert timed == [("full", 1), ("probe", 2), ("probe", 5), ("probed", 5)]
    assert [m.time_ms for m in ms] == [1.0, 2.05, 0.94] and warm.best_ms == 0.94

    # without a probe (a timer the user brought) every config is timed in full
    timed.clear()
    plain = CallEvaluator(Problem("k", "other", {"n": 1}), Space([Choice("B", list(full))]),
                          lambda c: Launch(lambda: None), timer("full", full))
    plain.evaluate([{"B": b} for b in (1, 2)])
    assert timed == [("full", 1), ("full", 2)] and plain.raced == 0


def test_a_timer_the_user_brought_is_used_without_a_probe():
    from types import SimpleNamespace

    from abductune.autotune.evaluation import timers

    mine = lambda c, la: 1.0  # noqa: E731
    tuner = SimpleNamespace(_timer=mine, _do_bench=None)
    assert timers(tuner) == (mine, mine, None, None)
    bench = SimpleNamespace(_timer=None, _do_bench=lambda f, quantiles=None: 1.0)
    assert timers(bench)[2:] == (None, None)
