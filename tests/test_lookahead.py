"""Compiling ahead: the abduction engine names the configs it is likely to propose next, the
live evaluator's compile pool starts them on idle workers after the batch, and a config whose
compile is already under way is waited for, never compiled twice. On the CPU: replay of the
bundled datasets (what the engine names) and a hand-driven executor (what the pool does)."""
from __future__ import annotations

import concurrent.futures as cf
import statistics
import threading

import pytest

from abductune.datasets.bundled import bundled_datasets
from abductune.datasets.format import read_dataset
from abductune.measure.live import Compiler
from abductune.measure.replay import ReplayEvaluator
from abductune.measure.replies import CompileResult
from abductune.search import Budget
from abductune.session import Session
from abductune.tune import seed_list

kernels = pytest.importorskip("abductune.kernels")


class Listening(ReplayEvaluator):
    """Replay that records what it was told to expect before each batch."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.told: list[list[dict]] = []
        self.batches: list[list[dict]] = []
        self._pending: list[dict] = []

    def expect(self, configs):
        self._pending = [dict(c) for c in configs]

    def evaluate(self, configs):
        self.told.append(self._pending)
        self._pending = []
        self.batches.append([dict(c) for c in configs])
        return super().evaluate(configs)


def _run(ev, ds, budget=24):
    space = ds.space()
    seeds, _ = seed_list(ds.problem, space, ds.meta.get("default_config") or space.default(), None, True,
                         None, exclude=ds.problem)
    with Session(ev, strategy="abduction", seed=1, budget=Budget(budget), seeds=seeds, judge=False) as s:
        s.run()
        return [m.config for m in s.store.measurements(s.context)]


MATMUL = [p for p in bundled_datasets(kernel="matmul_fp16")][:6]


@pytest.mark.parametrize("path", MATMUL, ids=lambda p: p.name.split(".")[0])
def test_naming_what_comes_next_never_changes_the_search(path):
    ds = read_dataset(path)
    plain = _run(ReplayEvaluator(ds, seed=1), ds)
    told = _run(Listening(ds, seed=1), ds)
    assert told == plain


def test_most_configs_the_engine_proposes_were_named_a_batch_ahead():
    """Over the bundled matmul shapes, at least half of the search's proposals (seeds and the
    first batch aside: nothing could name them) were among the configs named before them."""
    rates = []
    for path in bundled_datasets(kernel="matmul_fp16"):
        ds = read_dataset(path)
        ev = Listening(ds, seed=1)
        _run(ev, ds)
        key = ds.space().key
        named: set = set()
        hits = total = 0
        for i, (told, batch) in enumerate(zip(ev.told, ev.batches)):
            if i >= 2:
                hits += sum(key(c) in named for c in batch)
                total += len(batch)
            named |= {key(c) for c in told}
        assert all(len(t) <= 12 for t in ev.told)
        if total:
            rates.append(hits / total)
    assert len(rates) >= 10
    assert statistics.fmean(rates) >= 0.5, rates


# ------------------------------------------------------------------ the compile pool

class HandExecutor:
    """Records submissions; futures finish only when the test says so."""

    def __init__(self):
        self.submitted: list[tuple[str, dict]] = []
        self.futures: dict[str, cf.Future] = {}

    def submit(self, fn, *args):
        f: cf.Future = cf.Future()
        if fn.__name__ == "compile_task":
            key = repr(sorted(args[1].items()))
            self.submitted.append((key, dict(args[1])))
            self.futures[key] = f
        else:
            f.set_result(True)
        return f

    def finish(self, cfg, status="ok"):
        self.futures[repr(sorted(cfg.items()))].set_result(CompileResult(status, 1.0))

    def shutdown(self, wait=True, cancel_futures=False):
        pass


def _compiler(workers=8):
    c = Compiler(workers, target=None, facts="triton")
    c._pool = HandExecutor()  # type: ignore[assignment]
    c._fit_workers = lambda problem: None  # type: ignore[method-assign]
    return c


def test_the_batch_is_queued_before_speculation_and_speculation_stops_at_the_cap():
    spec = kernels.get("gelu_mul_fp16")
    problem = spec.problem({"numel": 1 << 20})
    cfgs = spec.space().valid_configs()
    c = _compiler()
    batch, ahead = cfgs[:2], cfgs[2:12]
    done = []
    t = threading.Thread(target=lambda: done.append(c.compile(spec.name, batch, problem, after=ahead, busy_cap=5)))
    t.start()
    while len(c._pool.submitted) < 5:
        pass
    keys = [k for k, _ in c._pool.submitted]
    assert keys[:2] == [repr(sorted(b.items())) for b in batch]  # the batch first
    assert len(keys) == 5  # 2 for the batch + 3 speculative: the cap counts what is under way
    for b in batch:
        c._pool.finish(b)
    t.join(5)
    assert done and all(r.ok for r in done[0])


def test_a_config_under_way_as_speculation_is_waited_for_not_compiled_again():
    spec = kernels.get("gelu_mul_fp16")
    problem = spec.problem({"numel": 1 << 20})
    cfgs = spec.space().valid_configs()
    c = _compiler()
    assert c.prefetch(spec.name, cfgs[:3], problem) == 3
    got = []
    t = threading.Thread(target=lambda: got.append(c.compile(spec.name, [cfgs[1], cfgs[5]], problem)))
    t.start()
    while len(c._pool.submitted) < 4:
        pass
    assert [cfg for _, cfg in c._pool.submitted] == [cfgs[0], cfgs[1], cfgs[2], cfgs[5]]
    c._pool.finish(cfgs[5])
    c._pool.finish(cfgs[1], status="compile_error")  # the prefetch's own outcome is the answer
    t.join(5)
    assert [r.status for r in got[0]] == ["compile_error", "ok"]
    # a later ask for a config compiled before is answered from that compile
    assert [r.status for r in c.compile(spec.name, [cfgs[5]], problem)] == ["ok"]
    assert len(c._pool.submitted) == 4
    # another problem starts afresh
    other = spec.problem({"numel": 1 << 21})
    t = threading.Thread(target=lambda: c.compile(spec.name, [cfgs[5]], other))
    t.start()
    while len(c._pool.submitted) < 5:
        pass
    c._pool.futures[repr(sorted(cfgs[5].items()))].set_result(CompileResult("ok", 1.0))
    t.join(5)


def test_a_compile_whose_worker_died_is_tried_afresh_when_asked_again():
    spec = kernels.get("gelu_mul_fp16")
    problem = spec.problem({"numel": 1 << 20})
    cfg = spec.space().valid_configs()[0]
    c = _compiler()
    got = []
    t = threading.Thread(target=lambda: got.append(c.compile(spec.name, [cfg], problem)))
    t.start()
    while len(c._pool.submitted) < 1:
        pass
    c._pool.futures[repr(sorted(cfg.items()))].set_exception(RuntimeError("worker killed"))
    t.join(5)
    assert got[0][0].status == "compile_error" and "died" in got[0][0].error
    t = threading.Thread(target=lambda: got.append(c.compile(spec.name, [cfg], problem)))
    t.start()
    while len(c._pool.submitted) < 2:
        pass
    c._pool.finish(cfg)
    t.join(5)
    assert got[1][0].ok
