"""How abductune's search inside Helion spends its budget and picks its winner (helion_search.py,
helion_measure.py, HelionMap.sweep), on a CPU.

Timing needs a GPU, so each test drives the whole search through Helion's `BenchmarkProvider`
seam with a stand-in whose times come from a model (`Model`): a *true* time per config (what
Helion's interleaved re-timing sees, through its `autotune_benchmark_fn` setting) and a *batch*
time (what the first, single timing sees), so a lucky or unlucky first reading can be staged.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="Helion needs torch")
from helion_fixtures import import_helion  # noqa: E402

helion = import_helion()

import abductune.integrations.helion  # noqa: E402,F401 - registers abductune with Helion
from abductune.integrations import helion_measure as HM  # noqa: E402
from abductune.integrations import helion_search as HS  # noqa: E402
from abductune.integrations.helion_kernel import facts_of  # noqa: E402
from abductune.integrations.helion_search import AbductuneSearch, kernel_map, tensors_of  # noqa: E402
from abductune.integrations.helion_space import ANCHOR, SWEEP_MAX_VALUES  # noqa: E402
from helion.autotuner.benchmark_provider import (BenchmarkProvider, BenchmarkResult,  # noqa: E402
                                                 LocalBenchmarkProvider)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"))
import helion_bench  # noqa: E402

F16 = torch.float16


def _kernel(name: str):
    fn = {"mm": helion_bench.matmul, "softmax": helion_bench.softmax}[name]
    args = {"mm": lambda: (torch.randn(256, 128, dtype=F16), torch.randn(128, 512, dtype=F16)),
            "softmax": lambda: (torch.randn(1024, 512, dtype=F16),)}[name]()
    k = helion.kernel(static_shapes=True, autotune_progress_bar=False, autotune_log_level=40,
                      autotune_benchmark_fn=lambda fns, *, repeat=1, desc=None: [f() for f in fns])(fn)
    return k.bind(args), args


def _hmap(bound, args, name):
    spec = bound.config_spec
    gen = spec.create_config_generation()
    facts = facts_of(spec, tensors_of(args), name=name)
    return gen, kernel_map(gen, spec, facts.roles, name=name)


class _Fn:
    """A compiled kernel stand-in: calling it (Helion's re-timing does) returns its true time."""

    def __init__(self, t: float):
        self.t = t

    def __call__(self, *args, **kwargs) -> float:
        return self.t


class Model:
    """true(config) and batch(config) times; `seen` is every config Helion benchmarked."""

    def __init__(self, true, batch=None):
        self.true, self.batch = true, batch or true
        self.seen: list = []


def _provider(model: Model, base=BenchmarkProvider, bench_sleep: float = 0.0):
    class StandIn(base):
        def __init__(self, kernel, settings, config_spec, args, log, autotune_metrics):
            self.mutated_arg_indices = []

        def _benchmark_function(self, config, fn):  # what Helion's local provider times
            time.sleep(bench_sleep)
            return model.batch(config)

        def benchmark(self, configs, *, desc="Benchmarking", raise_if_no_viable_config=True):
            model.seen += list(configs)
            return [BenchmarkResult(config=c, fn=_Fn(model.true(c)), perf=self._benchmark_function(c, None),
                                    status="ok", compile_time=0.01) for c in configs]

        def setup(self) -> None:
            pass

        def cleanup(self) -> None:
            pass

    return StandIn


def _tiles(c) -> float:
    bs = c.config["block_sizes"]
    return abs(bs[0] - 64) / 64 + abs(bs[1] - 128) / 128


def _evicts(c, value: str) -> bool:
    pol = c.config.get("load_eviction_policies") or []
    return bool(pol) and all(p == value for p in pol)


# ----------------------------------------------------------------------------- the sweep, on the map

def test_sweep_tries_each_small_roleless_unit_round_robin():
    bound, args = _kernel("mm")
    gen, hmap = _hmap(bound, args, "mm")
    anchor = hmap.from_flat(gen.canonicalize_flat(gen.default_flat())[0])
    items = hmap.sweep(anchor)
    units = {u.name: u for u in hmap.units(anchor)}
    swept = [u for u in units.values() if not u.role and 2 <= len(u.values) <= SWEEP_MAX_VALUES]
    assert {n for n, _, _ in items} == {u.name for u in swept} and "load_eviction_policies" in units
    assert not any(units[n].role for n, _, _ in items)  # roles are the strategy's, never swept
    for u in swept:  # every value other than the anchor's, once
        assert sorted(map(repr, (v for n, v, _ in items if n == u.name))) == \
            sorted(repr(v) for v in u.values if v not in (u.default, ANCHOR))
    # every unit's first alternative comes first; then the units with the fewest values left
    assert len({n for n, _, _ in items[:len(swept)]}) == len(swept)
    left = [len([1 for n, _, _ in items[len(swept):] if n == u]) for u in dict.fromkeys(n for n, _, _ in items[len(swept):])]
    assert left == sorted(left)
    for name, value, cfg in items:  # one unit changed, nothing else
        changed = {k for k in cfg if cfg[k] != anchor[k]}
        assert changed and changed <= set(units[name].elements)
        assert all(cfg[e] == value for e in units[name].elements)
    # an ordered unit tries the values nearest the anchor's first
    stages = [v for n, v, _ in items if n == "range_num_stages_1"]
    assert stages == sorted(stages, key=lambda v: abs(v - anchor["range_num_stages_1"]))


def test_views_of_different_anchors_are_different_spaces():
    bound, args = _kernel("mm")
    gen, hmap = _hmap(bound, args, "mm")
    a = hmap.from_flat(gen.canonicalize_flat(gen.default_flat())[0])
    b = dict(a)
    evict = [n for n in b if n.startswith("load_eviction_policies_")]
    b.update({n: "last" for n in evict})  # differs only outside the view below
    names = ["block_sizes_0", "num_warps"]
    assert hmap.view(a, names).space.fingerprint() == hmap.view(dict(a), names).space.fingerprint()
    # the same view configs are other kernels around another anchor: another store context
    assert hmap.view(a, names).space.fingerprint() != hmap.view(b, names).space.fingerprint()


# ----------------------------------------------------------------------------- the search's budget

def test_a_roleless_win_is_found_by_the_sweep():
    """Eviction policy "last" on every load halves the time: a unit without a role, which the
    plan puts in its last group; the sweep tries it on the incumbent within the budget."""
    bound, args = _kernel("mm")
    model = Model(lambda c: (1.0 + _tiles(c)) * (0.5 if _evicts(c, "last") else 1.0))
    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(model), max_evaluations=24)
    best = s.autotune(skip_cache=True)
    assert _evicts(best, "last")
    phases = [p["phase"] for p in s.report["phases"]]
    assert phases[:3] == ["seeds", "roles", "sweep"]
    assert any(_evicts(c, "first") for c in model.seen) and any(_evicts(c, "last") for c in model.seen)
    assert s.report["evaluations"] == s.report["timing"]["timed"] <= 24
    assert len(model.seen) == s.report["timing"]["timed"]  # each benchmarked config counted once


def test_a_gain_within_the_noise_is_combined_with_a_sure_one_and_kept_where_it_pays():
    """The sweep reads eviction "last" 20% faster (beyond the noise) and the second loop's
    flattening 0.8% faster (within the 1% noise floor): the improving values together are
    measured (one sure gain alone is no combination), and the winner keeps both."""
    bound, args = _kernel("mm")

    def true(c):
        flat = (c.config.get("range_flattens") or [None, None])[1] is True
        return (1.0 + _tiles(c)) * (0.8 if _evicts(c, "last") else 1.0) * (0.992 if flat else 1.0)

    model = Model(true)
    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(model), max_evaluations=32)
    best = s.autotune(skip_cache=True)
    combine = next(p for p in s.report["phases"] if p["phase"] == "combine")
    # one config, changed from the phase's incumbent (the sweep's eviction win) by the flattening
    assert len(combine["measured"]) == 1 and set(combine["measured"][0]["changed"]) == {"range_flattens"}
    assert sum(_evicts(c, "last") and c.config["range_flattens"][1] is True for c in model.seen) == 1
    assert _evicts(best, "last") and best.config["range_flattens"][1] is True


def test_sweep_measures_every_value_when_the_budget_allows():
    bound, args = _kernel("softmax")
    gen, hmap = _hmap(bound, args, "softmax")
    model = Model(lambda c: 1.0 + 0.1 * abs(c.config["num_warps"] - 4))
    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(model), max_evaluations=24)
    best = s.autotune(skip_cache=True)
    anchor = hmap.from_flat(gen.canonicalize_flat(gen.flatten(best))[0])
    measured = {repr(c) for c in model.seen} | {repr(best)}
    # every one-unit change of the winner that is a distinct Helion config was measured
    for name, value, cfg in hmap.sweep(anchor):
        _, config = gen.canonicalize_flat(hmap.to_flat(cfg))
        assert repr(config) in measured, (name, value)


# ----------------------------------------------------------------------------- the final pick

def test_helions_default_is_pinned_and_wins_when_truly_fastest():
    """The default's first timing is unlucky (3x its true time); every other config is truly
    slower. Only the pinned final verification re-times it, and then it wins."""
    bound, args = _kernel("mm")
    default = bound.config_spec.default_config()
    gen = bound.config_spec.create_config_generation()
    dflat = gen.canonicalize_flat(gen.flatten(default))[0]

    def true(c):
        return 1.0 + 0.05 * sum(a != b for a, b in zip(gen.flatten(c), dflat))

    model = Model(true, lambda c: true(c) * (3.0 if gen.flatten(c) == dflat else 1.0))
    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(model), max_evaluations=16)
    best = s.autotune(skip_cache=True)
    assert gen.flatten(best) == dflat
    assert s.report["pinned"] == ["helion:default"] and s.report["final"]["changed"]


def test_a_lucky_first_reading_does_not_win():
    """Persistent-interleaved configs read 4x too fast in their batch; re-timed they are 2x
    slower. The winner is re-timed before it is chosen, so no such config is returned."""
    bound, args = _kernel("mm")

    def true(c):
        return (1.0 + _tiles(c)) * (2.0 if c.config.get("pid_type") == "persistent_interleaved" else 1.0)

    model = Model(true, lambda c: true(c) * (0.125 if c.config.get("pid_type") == "persistent_interleaved" else 1.0))
    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(model), max_evaluations=24)
    best = s.autotune(skip_cache=True)
    assert any(c.config.get("pid_type") == "persistent_interleaved" for c in model.seen)  # the trap was measured
    assert best.config.get("pid_type") != "persistent_interleaved"
    assert true(best) <= true(bound.config_spec.default_config())


# ----------------------------------------------------------------------------- how it measures, where time goes

def test_runoffs_are_interleaved_and_the_report_says_where_time_went(monkeypatch):
    bound, args = _kernel("mm")
    model = Model(lambda c: 1.0 + _tiles(c))
    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(model, bench_sleep=0.002), max_evaluations=20)
    calls = []
    real = s.rebenchmark

    def spy(members, **kw):
        calls.append((len(members), kw))
        return real(members, **kw)

    monkeypatch.setattr(s, "rebenchmark", spy)
    s.autotune(skip_cache=True)
    assert calls, "no run-off"
    *phase_runoffs, final = calls
    for _, kw in phase_runoffs:  # Helion's interleaved in-process re-timing, short, no isolated pass
        assert kw["use_isolated"] is False and kw["use_interleaved"] is True and kw["confirm_suspicious"] is False
        assert kw["target_ms"] == HM.RUNOFF_TARGET_MS
    n, kw = final  # Helion's own final verification, sized by the search
    assert kw["target_ms"] == HS.FINAL_TARGET_MS
    assert 2 <= n <= HS.FINAL_TOP_K + len(s.report["pinned"])
    t = s.report["timing"]
    assert t["bench_s"] >= 0.002 * t["timed"] and 0 < t["first_bench_s"] <= t["bench_s"]
    assert len(t["bench_each"]) == t["timed"] and t["bench_max_s"] == max(t["bench_each"])
    assert t["precompile_s"] == t["compile_s"] and t["codegen_s"] == 0.0  # the stand-in generates no code
    parts = t["compile_s"] + t["bench_s"] + t["runoff_s"] + t["final_s"] + t["ours_s"]
    assert abs(parts - t["search_s"]) < 0.01
    assert sum(p["timing"]["timed"] for p in s.report["phases"]) == t["timed"] == len(model.seen)
    assert t["batches"] == sum(p["timing"]["batches"] for p in s.report["phases"])
    assert s.report["phases"][0]["timing"]["batches"] == 1  # every seed in one batch: one round of compiles


def test_the_final_verification_times_each_finalist_alone_unless_the_user_chose(monkeypatch):
    """Interleaved, a config that keeps its inputs in L2 (evict-last loads) speeds up the rivals
    timed after it, so Helion's final verification on Triton dropped the sweep's eviction-policy
    winners (session 44): the search's final verification times each finalist alone in the
    benchmark worker, without Helion's fresh process per finalist; the phases' run-offs stay
    interleaved, and a user's HELION_AUTOTUNE_FINAL_REBENCHMARK_ISOLATED is Helion's to read."""
    from helion.autotuner.base_search import PopulationBasedSearch

    calls = []
    real = PopulationBasedSearch.rebenchmark

    def spy(self, members, **kw):
        calls.append(kw)
        return real(self, members, **kw)

    monkeypatch.setattr(PopulationBasedSearch, "rebenchmark", spy)
    monkeypatch.delenv(HS.FINAL_ISOLATED_ENV, raising=False)
    bound, args = _kernel("mm")
    model = Model(lambda c: (1.0 + _tiles(c)) * (0.8 if _evicts(c, "last") else 1.0))
    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(model), max_evaluations=20)
    s.autotune(skip_cache=True)
    *runoffs, final = calls
    assert runoffs and all(kw["use_interleaved"] is True and kw["use_isolated"] is False for kw in runoffs)
    assert final["use_isolated"] is True and final["use_interleaved"] is False
    assert final["candidate_private_args"] is False and final["confirm_suspicious"] is False
    assert final["target_ms"] == HS.FINAL_TARGET_MS
    assert s._final_alone is False  # only inside the final verification
    calls.clear()
    monkeypatch.setenv(HS.FINAL_ISOLATED_ENV, "1")  # the user's: Helion's own isolated timing, fresh processes
    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(model), max_evaluations=20)
    s.autotune(skip_cache=True)
    assert calls[-1]["use_isolated"] is True and calls[-1]["candidate_private_args"] is True
    # finalists that all keep Helion's default loads are paired, interleaved, as Helion does
    gen = bound.config_spec.create_config_generation()
    plain = bound.config_spec.default_config()
    last = gen.unflatten(gen.flatten(plain))
    last.config["load_eviction_policies"] = ["last"] * len(last.config.get("load_eviction_policies") or [])
    assert last.config["load_eviction_policies"], "the test kernel has loads with a policy to set"

    class M:
        def __init__(self, config):
            self.config = config

    assert not HS._evicting([M(plain), M(plain)]) and HS._evicting([M(plain), M(last)])


def test_the_timing_splits_codegen_and_the_workers_jobs():
    """Helion's provider in miniature (its call structure: codegen of each config, then each
    config timed by a worker job and an accuracy job): the codegen inside a config's timing is
    not the batch's; every wrapper comes off afterwards; the per-phase cut keeps its own slowest."""
    class Kernel:
        def compile_config(self, config, allow_print=True):
            time.sleep(0.02)
            return config

    class Provider:
        def __init__(self):
            self.kernel = Kernel()

        def _run_subprocess_benchmark_job(self, fn, **kw):
            time.sleep(0.03 if fn == 3 else 0.01)
            return 1.0

        def _run_subprocess_accuracy_check_job(self, fn):
            time.sleep(0.005)

        def _benchmark_function(self, config, fn):
            self.kernel.compile_config(config)  # Helion's in-process path compiles here too
            self._run_subprocess_benchmark_job(fn)
            self._run_subprocess_accuracy_check_job(fn)
            return 1.0

        def benchmark(self, configs):
            fns = [self.kernel.compile_config(c) for c in configs]
            return [self._benchmark_function(c, f) for c, f in zip(configs, fns)]

    p, t = Provider(), HM.Timing()
    with HM.timed_benchmarks(p, t):
        p.benchmark([1, 2])
    mid = t.snapshot()
    with HM.timed_benchmarks(p, t):
        p.benchmark([3])
    assert not {"_benchmark_function", "_run_subprocess_benchmark_job"} & set(vars(p))
    assert "compile_config" not in vars(p.kernel)
    assert 0.06 <= t.codegen_s < 0.1  # three configs' codegen, not six
    assert len(t.bench_each) == 3 and t.bench_s >= 0.03 + 0.02 + 0.015 + 0.06
    assert t.bench_job_s >= 0.05 and t.accuracy_s >= 0.015 and t.first_bench_s == t.bench_each[0]
    t.compile_s = 0.5
    d = t.to_dict()
    assert d["precompile_s"] == round(0.5 - t.codegen_s, 4) and d["bench_max_s"] == round(t.bench_each[2], 4)
    assert d["bench_other_s"] == round(t.bench_s - t.bench_job_s - t.accuracy_s, 4)
    first = mid.since(HM.Timing())
    assert len(first["bench_each"]) == 2 and first["bench_max_s"] < d["bench_max_s"]
    assert t.since(mid)["bench_each"] == [round(t.bench_each[2], 4)]


class _FakeWorker:
    events: list = []

    def __init__(self, device=None):
        self.device = device

    def _start(self):
        _FakeWorker.events.append(("worker", self))

    def shutdown(self):
        _FakeWorker.events.append(("shutdown", self))


@pytest.mark.parametrize("subprocess_on", [True, False])
def test_benchmark_worker_starts_before_helions_baseline(monkeypatch, subprocess_on):
    from helion.autotuner import benchmark_worker

    monkeypatch.setattr(benchmark_worker, "BenchmarkWorker", _FakeWorker)
    _FakeWorker.events = []
    model = Model(lambda c: 1.0 + _tiles(c))
    base = _provider(model, base=LocalBenchmarkProvider)

    class Local(base):  # Helion's local provider, less its GPU baseline
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            _FakeWorker.events.append(("baseline", None))
            self._benchmark_worker = None

        def _subprocess_benchmark_enabled(self):
            return True

        def take_effective_source_repairs(self):
            return {}

        def cleanup(self):
            if self._benchmark_worker is not None:
                self._benchmark_worker.shutdown()

    bound, args = _kernel("mm")
    monkeypatch.setattr(bound.settings, "autotune_benchmark_subprocess", subprocess_on)
    s = AbductuneSearch(bound, args, benchmark_provider_cls=Local, max_evaluations=6)
    s.autotune(skip_cache=True)
    kinds = [k for k, _ in _FakeWorker.events]
    if subprocess_on:
        assert kinds == ["worker", "baseline", "shutdown"]  # spawned first, used, shut down by Helion's cleanup
        assert _FakeWorker.events[0][1] is _FakeWorker.events[2][1]
        assert s.report["timing"]["worker_early"] is True
    else:
        assert kinds == ["baseline"] and s.report["timing"]["worker_early"] is False


def test_an_early_worker_the_provider_will_not_use_is_shut_down():
    w = _FakeWorker()
    _FakeWorker.events = []

    class P:
        _benchmark_worker = None

        def _subprocess_benchmark_enabled(self):
            return False

    assert HM.adopt_worker(P(), w) is False and _FakeWorker.events == [("shutdown", w)]
    assert HM.adopt_worker(P(), None) is False


def test_the_compile_timeout_follows_the_seeds_and_is_put_back():
    """A config that hangs the compiler must not cost Helion's whole timeout (60 s; 30 s after its
    own adaptive step): once the seeds have compiled, the rest of the search is cut at five times
    the slowest seed's compile, never below ten seconds, and the kernel's setting is restored."""
    assert HS.compile_timeout(60, [0.4, 1.5]) == 10
    assert HS.compile_timeout(60, [4.0]) == 20
    assert HS.compile_timeout(15, [4.0]) == 15  # never above the user's own timeout
    assert HS.compile_timeout(60, []) == 60
    bound, args = _kernel("mm")
    seen_timeouts: list = []
    box: dict = {}

    def true(c):
        seen_timeouts.append(box["s"].settings.autotune_compile_timeout)
        return 1.0 + _tiles(c)

    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(Model(true)), max_evaluations=12)
    box["s"] = s
    before = s.settings.autotune_compile_timeout
    s.settings.autotune_adaptive_timeout = True
    s.autotune(skip_cache=True)
    assert before > 10 and seen_timeouts[0] == before  # the seeds compile under the user's timeout
    assert seen_timeouts[-1] == 10 and s.report["compile_timeout_s"] == 10
    assert s.settings.autotune_compile_timeout == before


def test_each_search_phase_runs_under_the_ptxas_watch(monkeypatch):
    import contextlib

    depth, seen = [0], []

    @contextlib.contextmanager
    def watching():
        depth[0] += 1
        yield None
        depth[0] -= 1
    monkeypatch.setattr(HS, "watching", watching)
    bound, args = _kernel("mm")
    base = lambda c: 1.0 + _tiles(c)  # noqa: E731

    def timed(c):
        seen.append(depth[0])
        return base(c)
    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(Model(timed)), max_evaluations=12)
    s.autotune(skip_cache=True)
    assert sum(d == 1 for d in seen) >= 8 and all(d == 1 for d in seen[1:]), seen  # the search, inside a watch


# ----------------------------------------------------------------------------- timing as CUDA graphs

def test_graph_timing_is_on_for_the_search_unless_the_user_chose(monkeypatch):
    """Helion's worker times one Python call per sample, which a kernel of a few microseconds
    cannot outlast: the search switches Helion's CUDA-graph timing on for its own duration (the
    worker it spawns or keeps takes the switch), and leaves a value the user set alone."""
    monkeypatch.delenv(HM.GRAPH_TIMING_ENV, raising=False)
    env: dict = {}
    with HM.graph_timing(env) as on:
        assert on and env == {HM.GRAPH_TIMING_ENV: "1"}
    assert env == {}
    with pytest.raises(RuntimeError), HM.graph_timing(env):
        raise RuntimeError("a search that fails still puts the switch back")
    assert env == {}
    for users, expect in (("0", False), ("1", True)):
        env = {HM.GRAPH_TIMING_ENV: users}
        with HM.graph_timing(env) as on:
            assert on is expect and env == {HM.GRAPH_TIMING_ENV: users}
        assert env == {HM.GRAPH_TIMING_ENV: users}

    from abductune.integrations import helion_worker as HW

    assert HM.GRAPH_TIMING_ENV in HW.SYNCED_ENV  # a kept worker is given the switch with the cache directories

    import os

    seen = []
    bound, args = _kernel("mm")

    def true(c):
        seen.append(os.environ.get(HM.GRAPH_TIMING_ENV))
        return 1.0 + _tiles(c)

    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(Model(true)), max_evaluations=6)
    s.autotune(skip_cache=True)
    assert seen and set(seen) == {"1"} and s.report["graph_timing"] is True
    assert HM.GRAPH_TIMING_ENV not in os.environ
    monkeypatch.setenv(HM.GRAPH_TIMING_ENV, "0")
    seen.clear()
    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(Model(true)), max_evaluations=6)
    s.autotune(skip_cache=True)
    assert set(seen) == {"0"} and s.report["graph_timing"] is False


def test_a_failed_config_says_why_in_the_phase_report():
    """A config with no time keeps Helion's status in the report (a wrong result, a timeout, an
    error): the GPU runs' failures were otherwise unexplained (session 43)."""
    import math

    bound, args = _kernel("mm")
    model = Model(lambda c: 1.0 + _tiles(c))

    class Failing(_provider(model)):
        def benchmark(self, configs, *, desc="Benchmarking", raise_if_no_viable_config=True):
            model.seen += list(configs)
            out = []
            for c in configs:
                bad = c.config.get("num_warps", 4) >= 8
                out.append(BenchmarkResult(config=c, fn=_Fn(model.true(c)), perf=math.inf if bad else model.true(c),
                                           status="accuracy_error" if bad else "ok", compile_time=0.01))
            return out

    s = AbductuneSearch(bound, args, benchmark_provider_cls=Failing, max_evaluations=16)
    s.autotune(skip_cache=True)
    rows = [m for p in s.report["phases"] for m in p["measured"]]
    failed = [m for m in rows if m["ms"] is None]
    assert failed and all(m["status"] == "accuracy_error" for m in failed)
    assert all("status" not in m for m in rows if m["ms"] is not None)


def test_a_searched_phase_says_what_it_tested_and_why():
    """A strategy's phase lists its tests in order, each with the theory or kind of move that
    proposed it and the units it changed from the phase's starting incumbent: a GPU run's
    phase that measured four configs in one batch could not say why those four (session 44)."""
    bound, args = _kernel("mm")
    s = AbductuneSearch(bound, args, benchmark_provider_cls=_provider(Model(lambda c: 1.0 + _tiles(c))),
                        max_evaluations=20)
    s.autotune(skip_cache=True)
    gen, hmap = _hmap(bound, args, "mm")
    names = set(hmap.full.names)
    searched = [p for p in s.report["phases"] if p["phase"] == "roles"]
    assert searched and searched[0]["tests"]
    for why, changed in searched[0]["tests"]:
        assert isinstance(why, str) and why and changed and set(changed) <= names
    assert all("tests" not in p for p in s.report["phases"] if p["phase"] in ("seeds", "coupled", "sweep"))
    # the views refine the seeds phase's winner: no draws from the whole space (ABDUCTION_OPTIONS)
    assert s.options == HS.ABDUCTION_OPTIONS and HS.ABDUCTION_OPTIONS["explore"] is False
    assert not any(why == "explore" for p in s.report["phases"] for why, _ in p.get("tests", []))
    assert AbductuneSearch(bound, args, options={"batch": 4}).options == {"batch": 4}  # the user's stand
