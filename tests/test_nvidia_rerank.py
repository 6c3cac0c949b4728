"""NVIDIA's model asked about any config (heuristics/nvidia_estimate.py) and its top-k re-ranked by the ranker.

Tests that need nvidia-matmul-heuristics skip with a reason when it is absent (a failure with
ABDUCTUNE_REQUIRE_NVIDIA=1); the warp tiling and the missing-package behaviour run everywhere.
"""
from __future__ import annotations

import math

import pytest

from abductune.datasets.bundled import bundled_datasets
from abductune.datasets.format import read_dataset
from abductune.errors import AbductuneError
from abductune.heuristics import nvidia, nvidia_estimate, ranker_shipped
from abductune.heuristics.harvest import observation_from_dataset
from abductune.problem import Holdout
from abductune.theory.resources import trouble
from nvidia_fixtures import require_nvidia


@pytest.fixture
def nv():
    require_nvidia()
    assert nvidia.available()
    return nvidia


def bundled_matmul(name="M4096_N4096_K4096"):
    path = next(p for p in bundled_datasets(kernel="matmul_fp16") if p.name.startswith(name + "."))
    return observation_from_dataset(read_dataset(path))


def test_warp_tiling_puts_warps_along_m_first_and_refuses_what_cannot_be_placed():
    assert nvidia_estimate.warp_tile((128, 128, 64), 4) == (32, 128, 64)
    assert nvidia_estimate.warp_tile((64, 256, 32), 8) == (16, 128, 32)  # 4 along M, then 2 along N
    assert nvidia_estimate.warp_tile((16, 64, 64), 2) == (16, 32, 64)
    assert nvidia_estimate.warp_tile((16, 8, 64), 4) is None  # 4 warps cannot share 8 columns


def test_estimates_cover_every_config_and_agree_with_the_models_own_candidates(nv):
    o = bundled_matmul()
    configs = o.space.valid_configs()
    est = nvidia_estimate.estimates(o.problem, o.space, configs)
    assert len(est) == len(configs)
    known = [t for t in est if t is not None]
    assert len(known) >= 0.9 * len(configs) and all(t > 0 and math.isfinite(t) for t in known)
    # the realized top-1 gets the runtime the model gave its candidate (same CTA tile and
    # split; the estimate does not move with stages or warp tiling on the H100)
    top = nv.nvidia_topk(o.problem, o.space, 1)
    first = next(f for f in top.fired if f["status"] == "seed")
    (mine,) = nvidia_estimate.estimates(o.problem, o.space, [top[0]])
    assert mine == pytest.approx(first["model"]["est_runtime_us"] * 1e-6, rel=1e-3)
    # and it tells tiles apart: 16 x 32 tiles over a 4096^3 fp16 GEMM are far slower than 128 x 128
    small = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}
    big = {**small, "BLOCK_M": 128, "BLOCK_N": 128}
    s, b = nvidia_estimate.estimates(o.problem, o.space, [small, big])
    assert s > 4 * b


def test_reranked_is_the_models_top_k_in_the_rankers_order_refitted_without_the_kernel(nv):
    o = bundled_matmul("M2048_N14336_K4096")
    hold = Holdout(o.problem, "kernel")
    got = nvidia_estimate.reranked(o.problem, o.space, 8, exclude=hold)
    top = nv.nvidia_topk(o.problem, o.space, 8)
    assert got and {o.space.key(c) for c in got} <= {o.space.key(c) for c in top}
    assert all(trouble(o.problem, o.space, c) is None for c in got)
    refit, left = ranker_shipped.shipped_ranker(hold)
    assert left == ("matmul_fp16",)
    assert got == [dict(c) for c in refit.rank(o.problem, o.space, top)]
    # off the model (a row kernel) there is nothing to re-rank
    row = observation_from_dataset(read_dataset(bundled_datasets(kernel="softmax_fp16")[0]))
    assert nvidia_estimate.reranked(row.problem, row.space, 8) == []


def test_without_the_package_estimates_say_what_to_install_and_reranking_is_empty(monkeypatch):
    monkeypatch.setattr(nvidia, "_MOD", None)
    o = bundled_matmul()
    with pytest.raises(AbductuneError) as e:
        nvidia_estimate.estimates(o.problem, o.space, o.space.valid_configs()[:2])
    assert str(e.value) == nvidia.MISSING
    assert nvidia_estimate.reranked(o.problem, o.space, 8) == []


def test_ranking_within_nvidias_tile_puts_that_tile_first_in_the_rankers_order(nv, monkeypatch):
    o = bundled_matmul("M2048_N14336_K4096")
    hold = Holdout(o.problem, "kernel")
    plain = ranker_shipped.rank(o.problem, o.space, exclude=hold)
    got = ranker_shipped.rank(o.problem, o.space, exclude=hold, nvidia=True)
    top1 = nv.nvidia_topk(o.problem, o.space, 1)[0]
    assert got.nvidia_tile == {"BLOCK_M": top1["BLOCK_M"], "BLOCK_N": top1["BLOCK_N"]}
    first = got.configs[:got.in_tile]
    assert got.in_tile >= 1 and all(c["BLOCK_M"] == top1["BLOCK_M"] and c["BLOCK_N"] == top1["BLOCK_N"]
                                    for c in first)
    keys = [o.space.key(c) for c in got.configs]
    assert sorted(keys) == sorted(o.space.key(c) for c in plain.configs)  # a reordering, nothing lost
    # within the tile and after it, the ranker's own order
    pos = {o.space.key(c): i for i, c in enumerate(plain.configs)}
    assert [pos[k] for k in keys[:got.in_tile]] == sorted(pos[k] for k in keys[:got.in_tile])
    assert "NVIDIA's model's output tile" in got.why(0) and "NVIDIA" not in got.why(got.in_tile)
    # switched off, or without the package: the ranker's ranking
    monkeypatch.setenv(ranker_shipped.NVIDIA_TILE_ENV, "0")
    assert ranker_shipped.rank(o.problem, o.space, exclude=hold, nvidia=True).configs == plain.configs
    monkeypatch.delenv(ranker_shipped.NVIDIA_TILE_ENV)
    monkeypatch.setattr(nvidia, "_MOD", None)
    off = ranker_shipped.rank(o.problem, o.space, exclude=hold, nvidia=True)
    assert off.configs == plain.configs and off.nvidia_tile is None
