"""What abductune.inductor spends at compile time, on a CPU: the finish searches only where the
time is (`min_us`), answers from Inductor's own timings without compiling or running anything
again, stores a kept pick so the next process compiles one config, and reports its seconds
per kernel and phase (read with an injected clock). Inductor's own loader and config providers
run with the kernels of tests/test_inductor.py; `FakeGPU` stands in for compiling and timing.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the Inductor integration needs torch")
pytest.importorskip("triton", reason="Inductor's Triton kernels need triton")

from test_inductor import ARGS_RED, FakeGPU, _inductor_here, load, prime  # noqa: E402,F401 (a fixture)

from abductune.errors import AbductuneError  # noqa: E402
from abductune.integrations import inductor  # noqa: E402
from abductune.integrations import inductor_kernels as K  # noqa: E402
from abductune.integrations import inductor_measure  # noqa: E402
from abductune.integrations import inductor_report as R  # noqa: E402
from abductune.store import Store  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OPTIMUM = {"XBLOCK": 2, "R0_BLOCK": 512, "num_warps": 4}


class ScaledGPU(FakeGPU):
    """FakeGPU with every time multiplied by `scale` (FakeGPU's optimum runs 1 ms)."""

    def __init__(self, optimum, scale: float):
        super().__init__(optimum)
        self.scale = scale

    def time(self, cfg, args) -> float:
        return super().time(cfg, args) * self.scale


class Clock:
    """An injected perf_counter: compiling and timing advance it by known amounts."""

    def __init__(self):
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now


def listed(t) -> list[tuple[dict, int]]:
    return [(dict(c.kwargs), c.num_warps) for c in t.configs]


def test_the_rule_searches_only_where_the_time_is():
    assert not K.worth_searching(0.0999, 100.0)  # 99.9 us
    assert K.worth_searching(0.1, 100.0) and K.worth_searching(2.5, 100.0)
    # nothing to go by, a pick that failed to time, or no threshold: search
    assert K.worth_searching(None, 100.0) and K.worth_searching(float("inf"), 100.0)
    assert K.worth_searching(0.001, 0.0) and K.worth_searching(0.001, None)
    assert K.Settings(":memory:").min_us == K.DEFAULT_MIN_US == 100.0


def test_a_fast_kernel_keeps_inductors_pick_compiles_nothing_and_is_stored(tmp_path, monkeypatch):
    gpu = ScaledGPU(OPTIMUM, scale=0.01).install(monkeypatch)  # about 10 us a launch
    path = tmp_path / "s.sqlite"
    with inductor.enable(store=path) as h:
        t = prime(load("triton_red_fused_1"))
        mine = listed(t)  # abductune's candidates, then Inductor's list
        t.run(*ARGS_RED, stream=0)
        assert h.stats["kept"] == 1 and h.stats["searches"] == 0
    assert gpu.compiled == [], "nothing compiled past what Inductor compiled"
    assert len(gpu.benched) == len(mine), "nothing timed past Inductor's own benchmark of its list"
    time_of = lambda kw, w: gpu.time(type(t.configs[0])(kw, num_warps=w), ARGS_RED)  # noqa: E731
    pick = min(mine, key=lambda c: time_of(*c))
    (w,) = t.launchers
    assert (dict(w.config.kwargs), w.config.num_warps) == pick and w.config.found_by_coordesc and w.calls == 1
    (entry,) = h.report
    assert entry["decision"] == "kept" and entry["inductor_us"] == pytest.approx(time_of(*pick) * 1e3)
    assert entry["listed"] == len(mine) and entry["candidates"] == len(mine) - len(t._abt.inductor)
    with Store(path) as store:
        (run,) = store.runs()
        rows = store.measurements(run.context)
    assert run.status == "done" and run.options["note"] == K.KEPT
    assert len(rows) == len(mine) and all(m.kind == "baseline" and m.compile_s == 0.0 for m in rows)
    assert sorted(m.time_ms for m in rows) == pytest.approx(sorted(time_of(*c) for c in mine))

    # the next process: the store answers at load, one config, nothing timed
    with inductor.enable(store=str(path)) as h:
        again = load("triton_red_fused_1", "\n# another process\n")
        assert listed(again) == [pick] and again._abt_stored
        monkeypatch.setattr(type(again).__mro__[1], "precompile", lambda self, *a, **k: None)
        again.precompile(warm_cache_only=False)
        assert [e["decision"] for e in h.report] == ["stored"]

    # a process that asks for every kernel to be searched does not take the kept pick for a search
    # (and, with no threshold, puts its candidates ahead of Inductor's list again)
    with inductor.enable(store=str(path), min_us=0) as h:
        t = prime(load("triton_red_fused_1", "\n# search everything\n"))
        everything = listed(t)
        assert everything[len(everything) - len(mine):] == mine and len(everything) > len(mine)
        benched = len(gpu.benched)
        t.run(*ARGS_RED, stream=0)
        assert h.stats["searches"] == 1 and h.stats["kept"] == 0
    (entry,) = h.report
    assert entry["decision"] == "searched" and entry["answered"] >= 1
    # Inductor's own timings answered the configs of its list: none of them compiled again
    assert not [c for c in gpu.compiled if c in everything]
    assert len(gpu.benched) - benched - len(everything) < entry["evaluations"] + 20  # searched, judged


def test_a_slow_kernel_is_searched_and_its_seconds_are_reported(tmp_path, monkeypatch):
    clock = Clock()
    ScaledGPU(OPTIMUM, scale=0.2).install(monkeypatch)  # about 200 us a launch: searched at the default min_us
    benched = []

    class Compiled:  # a compile costs 0.25 s on the injected clock (Inductor compiles, then makes a launcher)
        def __init__(self, result):
            self.result = result

        def make_launcher(self):
            clock.now += 0.25
            return self.result.make_launcher()
    for c in inductor._classes().values():  # and a run 0.04 s
        compile_, bench = c._precompile_config, c.bench
        monkeypatch.setattr(c, "_precompile_config", lambda self, cfg, f=compile_: Compiled(f(self, cfg)))

        def timed(self, launcher, *a, f=bench, **k):
            clock.now += 0.04
            benched.append(launcher.config)
            return f(self, launcher, *a, **k)
        monkeypatch.setattr(c, "bench", timed)
    monkeypatch.setattr(inductor_measure, "time", clock)
    monkeypatch.setattr(inductor, "time", clock)
    with inductor.enable(store=tmp_path / "s.sqlite", budget=8) as h:
        t = prime(load("triton_red_fused_1"))
        n_listed = len(t.configs)
        t.run(*ARGS_RED, stream=0)
        summary = h.summary()
    (entry,) = h.report
    # its bytes say a microsecond (no candidates: `worth_candidates`); its time says 200 us: searched
    assert entry["candidates"] == 0 and entry["estimate_us"] < 1
    assert entry["decision"] == "searched" and entry["inductor_us"] >= 100
    assert entry["compiled"] >= 1 and entry["compile_s"] == pytest.approx(0.25 * entry["compiled"])
    # Inductor timed its list first where it holds more than one config; the rest is the finish's
    ours = len(benched) - (n_listed if n_listed > 1 else 0)
    assert ours >= 1 and entry["bench_s"] == pytest.approx(0.04 * ours)
    assert entry["finish_s"] == pytest.approx(entry["compile_s"] + entry["bench_s"])
    assert entry["winner_us"] <= entry["inductor_us"] * 1.02
    assert summary["decisions"]["searched"] == 1 and summary["kernels"] == 1
    assert summary["compile_s"] == pytest.approx(entry["compile_s"]) and summary["min_us"] == K.DEFAULT_MIN_US
    assert summary["searched_us_after"] <= summary["searched_us_before"] * 1.02
    assert "searched" in R.table(h.report)


def test_a_kernel_reports_its_load_once_and_only_here(tmp_path, monkeypatch):
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    calls = []
    monkeypatch.setattr(CachingAutotuner, "precompile", lambda self, *a, **k: calls.append(k))
    with inductor.enable(store=tmp_path / "s.sqlite", min_us=0) as h:  # candidates for this small kernel
        t = load("triton_red_fused_1")
        t.precompile(warm_cache_only=True)  # what a compile worker does: nothing reported
        assert h.report == []
        t.precompile(warm_cache_only=False, reload_kernel=None)
        t.precompile()
        assert len(calls) == 3
    (entry,) = h.report
    assert entry["decision"] == "not_launched" and entry["listed"] == len(t.configs)
    assert entry["candidates"] == len(t.configs) - len(t._abt.inductor) >= 1
    assert entry["worker_plan_s"] > 0 and entry["worker_lookup_s"] >= 0
    assert t.__getstate__()["_abt_report"] is None  # the report stays in this process


def test_min_us_is_checked_and_read_from_the_environment(tmp_path):
    for bad in (-1, "10", float("inf"), True):
        with pytest.raises(AbductuneError, match="min_us"):
            inductor.enable(store=tmp_path / "s.sqlite", min_us=bad)
    assert inductor.active() is None
    h = inductor.from_env({"ABDUCTUNE_INDUCTOR": "1", "ABDUCTUNE_INDUCTOR_MIN_US": "25"})
    try:
        assert h.settings.min_us == 25.0
    finally:
        h.undo()
    h = inductor.from_env({"ABDUCTUNE_INDUCTOR": "1"})
    try:
        assert h.settings.min_us == K.DEFAULT_MIN_US
    finally:
        h.undo()
    with pytest.raises(AbductuneError, match="ABDUCTUNE_INDUCTOR_MIN_US"):
        inductor.from_env({"ABDUCTUNE_INDUCTOR": "1", "ABDUCTUNE_INDUCTOR_MIN_US": "fast"})


def test_the_summary_adds_up_the_entries():
    a = R.loaded("k0", "pointwise", {"x": 1024}, 4, 2, 0.1, 0.01, stored=False)
    a.update(decision="searched", finish_s=2.0, compile_s=1.5, bench_s=0.3, evaluations=8, compiled=6,
             inductor_us=300.0, winner_us=250.0)
    b = R.loaded("k1", "reduction", {"x": 64, "r0_": 512}, 1, 0, 0.2, 0.02, stored=True)
    c = R.loaded("k2", "pointwise", {"x": 64}, 3, 1, 0.1, 0.0, stored=False)
    c.update(decision="kept", finish_s=0.01, inductor_us=3.0, winner_us=3.0)
    s = R.summarize([a, b, c], 100.0)
    assert s["decisions"]["searched"] == s["decisions"]["stored"] == s["decisions"]["kept"] == 1
    assert s["finish_s"] == pytest.approx(2.01) and s["worker_plan_s"] == pytest.approx(0.4)
    assert s["evaluations"] == 8 and s["compiled"] == 6
    assert (s["searched_us_before"], s["searched_us_after"]) == (300.0, 250.0)
    json.dumps(s)


def test_the_models_benchmark_plans_one_device_call(tmp_path):
    """benchmarks/gpu/inductor_models.py --dry-run: the rows, each a fresh process, and the
    expected wall time against the deadline, with no GPU and no torch import in the driver."""
    out = tmp_path / "plan.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu" / "inductor_models.py"), "--models", "bert,llama_prefill",
           "--variants", "default,coordesc,abductune", "--phases", "cold,store", "--repeats", "2",
           "--deadline-s", "540", "--dry-run", "--out", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    plan = json.loads(out.read_text())
    rows = [(r["model"], r["variant"], r["phase"], r["repeat"]) for r in plan["plan"]]
    assert len(rows) == 2 * 2 * 4  # per model and repeat: default, coordesc, abductune cold + store
    assert ("bert", "abductune", "store", 1) in rows
    assert rows.index(("bert", "abductune", "store", 0)) == rows.index(("bert", "abductune", "cold", 0)) + 1
    assert not any(p == "warm" for _, _, p, _ in rows) and not any(v == "coordesc" and p == "store"
                                                                      for _, v, p, _ in rows)
    assert 0 < plan["expected_s"] and plan["deadline_s"] == 540
    assert "expected" in run.stdout and "rows" in run.stdout
    bad = subprocess.run(cmd[:-3] + ["--phases", "store", "--dry-run", "--out", str(out)], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert bad.returncode != 0 and "store" in bad.stderr


def test_the_default_min_us_is_half_the_fastest_kernel_a_search_paid_on():
    """DEFAULT_MIN_US follows the bundled H100 sweeps (benchmarks/inductor_gate.py), not the
    models it is reported on: it must move if those sweeps say otherwise."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import inductor_gate
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    table = inductor_gate.rows()
    if not table:
        pytest.skip("no bundled H100 sweeps of elementwise or row-reduction kernels")
    paid = [r["best_us"] for r in table if r["counts"]]
    assert paid and abs(min(paid) / 2 - K.DEFAULT_MIN_US) <= 0.1 * K.DEFAULT_MIN_US
    assert not any(r["counts"] for r in table if r["best_us"] < K.DEFAULT_MIN_US)


def test_the_same_kernel_twice_in_one_process_is_decided_once(tmp_path, monkeypatch):
    """Two graphs with the same kernel (same source and size hints): both load before either
    launches, so the store cannot answer at load; the second is answered at launch."""
    for scale, decision in ((0.01, "kept"), (0.2, "searched")):
        gpu = ScaledGPU(OPTIMUM, scale=scale).install(monkeypatch)
        with inductor.enable(store=tmp_path / f"s{scale}.sqlite") as h:
            a = prime(load("triton_red_fused_1", f"\n# graph 1 {scale}\n"))
            b = prime(load("triton_red_fused_1", f"\n# graph 2 {scale}\n"))
            a.run(*ARGS_RED, stream=0)
            compiled = len(gpu.compiled)
            b.run(*ARGS_RED, stream=0)
        assert [e["decision"] for e in h.report] == [decision, "store_at_launch"]
        assert b.launchers[0].config.kwargs == a.launchers[0].config.kwargs
        assert len(gpu.compiled) - compiled <= 1  # at most the winner, where Inductor had not compiled it
