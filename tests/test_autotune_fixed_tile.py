"""Tiles the caller fixes (issue 27's call-fixed tiles): a tile-like constexpr passed in the call
joins the key's space as a one-valued parameter with its role, so the knowledge sees the whole
tile, while the launch takes it from the call alone. On the CPU under Triton's interpreter, with
an injected timer; the helpers' unit tests run in this process."""
from __future__ import annotations

from pathlib import Path

import pytest

from autotune_kernels import INTERPRET, interpreted
from test_patch_libraries import Timer  # ms = table(config), each trial launched once
from abductune.autotune.fixed import FixedEvaluator, call_fixed, fixed_of, strip, with_fixed, without
from abductune.measurement import Measurement
from abductune.space import Choice, Pow2, Space

if INTERPRET:
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from autotune_kernels import fixed_tile as ft

    from abductune.store import Store


def _space() -> Space:
    return Space([Pow2("BLOCK_N", 16, 64), Choice("num_warps", [2, 4]), Choice("num_stages", [2, 3])])


def test_call_fixed_takes_only_untuned_positive_int_tiles():
    sp = _space()
    got = call_fixed(None, sp, {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "HAS_BIAS": True, "BLOCK_K": 0,
                                "grid": (1,), "scale": 2, "TILE_K": 2.0, "BLOCK_R": False})
    assert got == {"BLOCK_M": 64}  # tuned, launch options, flags, floats and non-tile names stay out


def test_call_fixed_respects_the_kernels_constexprs():
    class P:
        def __init__(self, name, c):
            self.name, self.is_constexpr = name, c

    class Fn:
        params = [P("BLOCK_M", False), P("TILE_K", True)]

    class Tuner:
        base_fn = Fn()
    assert call_fixed(Tuner(), _space(), {"BLOCK_M": 64, "TILE_K": 32}) == {"TILE_K": 32}


def test_with_fixed_adds_one_valued_params_with_roles_and_round_trips():
    sp = _space()
    aug = with_fixed(sp, {"BLOCK_M": 64})
    assert list(aug.names) == [*sp.names, "BLOCK_M"]
    assert aug["BLOCK_M"].values == (64,) and aug["BLOCK_M"].role == "tile:M"
    assert aug.cardinality == sp.cardinality  # nothing more to search
    assert fixed_of(aug, sp) == {"BLOCK_M": 64}
    assert list(without(aug, {"BLOCK_M": 64}).names) == list(sp.names)
    assert with_fixed(sp, {}) is sp
    assert strip({"BLOCK_N": 32, "BLOCK_M": 64}, {"BLOCK_M": 64}) == {"BLOCK_N": 32}


class _Inner:
    def __init__(self, space):
        self.space, self.problem, self.clock, self.calls, self.seen = space, None, 1.5, 7, []
        self.warm = self._warm
        self.warmed = []

    def evaluate(self, configs):
        self.seen.append([dict(c) for c in configs])
        assert all("BLOCK_M" not in c for c in configs)
        return [Measurement(dict(c), "ok", time_ms=1.0) for c in configs]

    def remeasure(self, configs, *, rounds=1):
        return self.evaluate(configs)

    def stream(self, configs):
        for i, c in enumerate(configs):
            yield [i], self.evaluate([c])

    def prefetch_hint(self, configs):
        self.seen.append(("hint", [dict(c) for c in configs]))

    def _warm(self, configs):
        self.warmed.append([dict(c) for c in configs])

    def close(self):
        self.closed = True


def test_fixed_evaluator_strips_on_the_way_in_and_restores_on_the_way_out():
    sp = _space()
    aug = with_fixed(sp, {"BLOCK_M": 64})
    inner = _Inner(sp)
    ev = FixedEvaluator(inner, aug, {"BLOCK_M": 64})
    cfg = {"BLOCK_N": 32, "num_warps": 4, "num_stages": 2, "BLOCK_M": 64}
    [m] = ev.evaluate([cfg])
    assert m.config == cfg and inner.seen[-1] == [strip(cfg, {"BLOCK_M": 64})]
    [m] = ev.remeasure([cfg], rounds=3)
    assert m.config == cfg
    assert [ms[0].config for _, ms in ev.stream([cfg, {**cfg, "BLOCK_N": 16}])] == [cfg, {**cfg, "BLOCK_N": 16}]
    ev.prefetch_hint([cfg])
    assert inner.seen[-1] == ("hint", [strip(cfg, {"BLOCK_M": 64})])
    ev.warm([cfg])
    assert inner.warmed == [[strip(cfg, {"BLOCK_M": 64})]]
    ev.warm = None
    assert inner.warm is None and ev.warm is None
    impl = {"impl": "torch"}
    assert ev.evaluate([impl])[0].config == impl
    assert ev.clock == 1.5 and ev.calls == 7 and ev.space is aug
    assert not hasattr(ev, "expect")  # only what the inner evaluator has
    ev.close()
    assert inner.closed


def mm_time(cfg):
    if "impl" in cfg:
        return 5.0
    return {16: 2.0, 32: 1.0}.get(cfg["BLOCK_SIZE_N"], 3.0) + 0.1 * cfg["BLOCK_SIZE_K"] / 16


@interpreted
def test_a_tile_the_caller_passes_is_seen_by_the_tune_and_launched_once(tmp_path: Path):
    timer = Timer(mm_time)
    k = ft.make(store=tmp_path / "s.sqlite", timer=timer, budget=6)
    a, b = torch.randn(40, 24), torch.randn(24, 36)
    c = ft.matmul(k, a, b, block_m=16)  # Triton would raise "conflicting meta-parameters" on a double pass
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    assert timer.seen and all("BLOCK_SIZE_M" not in cfg for cfg in timer.seen)  # launched without it
    assert "BLOCK_SIZE_M" not in k.best_config.kwargs
    assert k.stats["beyond_list"] <= k.stats["evaluations"]
    with Store(tmp_path / "s.sqlite") as s:
        [run] = s.runs()
        [w] = s.by_id([run.winner_id])
        assert w.config["BLOCK_SIZE_M"] == 16  # the key's space holds the call's tile
        assert all(m.config["BLOCK_SIZE_M"] == 16 for m in s.measurements(run.context))
    c2 = ft.matmul(k, a, b, block_m=16)  # a hit launches the stored winner
    torch.testing.assert_close(c2, a @ b, atol=1e-4, rtol=1e-4)
    assert k.stats["tunes"] == 1


@interpreted
def test_the_fixed_tile_reaches_the_store_from_the_store_path(tmp_path: Path):
    """A second process (a fresh autotuner on the same store) reads the winner with the call's
    tile in it and launches without passing it twice."""
    k = ft.make(store=tmp_path / "s.sqlite", timer=Timer(mm_time), budget=4)
    a, b = torch.randn(32, 16), torch.randn(16, 32)
    ft.matmul(k, a, b, block_m=16)
    k2 = ft.make(store=tmp_path / "s.sqlite", timer=Timer(mm_time), budget=4)
    c = ft.matmul(k2, a, b, block_m=16)
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    assert k2.stats["store_hits"] == 1 and k2.stats["tunes"] == 0


@interpreted
def test_record_mode_writes_the_callers_tile_into_the_dataset(tmp_path: Path):
    """Record mode (what `abductune sweep --call` sets) measures the key's whole grown space and
    writes it in the key's space: the call's tile is a one-valued parameter of the header, in
    every record, the default and the list."""
    from abductune.datasets.format import read_dataset

    timer = Timer(mm_time)
    k = ft.make(store=tmp_path / "s.sqlite", timer=timer, record=tmp_path / "rec", judge=False)
    a, b = torch.randn(32, 16), torch.randn(16, 32)
    torch.testing.assert_close(ft.matmul(k, a, b, block_m=16), a @ b, atol=1e-4, rtol=1e-4)
    [path] = k.recorded
    ds = read_dataset(path, strict=True)
    sp = ds.space()
    assert sp["BLOCK_SIZE_M"].values == (16,) and sp["BLOCK_SIZE_M"].role == "tile:M"
    assert len(ds.records) == len(k.strategy_options["configs"]) == len(timer.seen)
    assert all(m.config["BLOCK_SIZE_M"] == 16 for m in ds.records)
    assert ds.meta["default_config"]["BLOCK_SIZE_M"] == 16 and ds.meta["call_fixed"] == {"BLOCK_SIZE_M": 16}
    assert all(c["BLOCK_SIZE_M"] == 16 for c in ds.meta["fixed_configs"])


@interpreted
def test_the_resource_model_judges_a_config_with_the_callers_tile():
    """On an H100, the prune of a key whose caller fixes BLOCK_SIZE_M = 256 counts that tile:
    what fits with the smallest M a dot takes does not fit with the caller's."""
    from abductune.autotune.evaluation import call_evaluator
    from abductune.hardware import lookup
    from abductune.problem import Problem

    k = ft.make(budget=8, store=":memory:")
    h100 = Problem("matmul_kernel", "matmul", {"M": 4096, "N": 4096, "K": 4096},
                   {"a_ptr": "fp16", "b_ptr": "fp16", "c_ptr": "fp16"}, hardware=lookup("H100-SXM"))
    beyond = {"BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 2, "num_warps": 8, "num_stages": 5}
    # 5 x (256 x 64 + 64 x 128) x 2 bytes = 240 KB with the caller's M tile; 100 KB with M = 16
    assert call_evaluator(k, h100, (), {}, {}, {}, k.space).prune(beyond) is None
    ev = call_evaluator(k, h100, (), {}, {}, {}, k.space, fixed={"BLOCK_SIZE_M": 256})
    assert "shared memory" in ev.prune(beyond)
    assert ev.prune({**beyond, "num_stages": 3}) is None  # 144 KB


@interpreted
def test_the_decorator_gives_abduction_the_rankers_order_and_no_other_strategy(tmp_path: Path, monkeypatch):
    from abductune.heuristics import seeds as seeds_mod

    asked = []

    def fake(problem, space, **kw):
        asked.append(list(space.names))
        return [space.default()]

    monkeypatch.setattr(seeds_mod, "ranker_prior", fake)
    a, b = torch.randn(32, 16), torch.randn(16, 32)
    k = ft.make(store=tmp_path / "a.sqlite", timer=Timer(mm_time), budget=6, strategy="abduction")
    torch.testing.assert_close(ft.matmul(k, a, b), a @ b, atol=1e-4, rtol=1e-4)
    assert len(asked) == 1 and "BLOCK_SIZE_M" in asked[0]  # the key's space, the caller's tile in it
    k = ft.make(store=tmp_path / "b.sqlite", timer=Timer(mm_time), budget=6, strategy="pattern")
    torch.testing.assert_close(ft.matmul(k, a, b), a @ b, atol=1e-4, rtol=1e-4)
    assert len(asked) == 1
