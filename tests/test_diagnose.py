"""diagnose(): roofline position, padding, tiles, occupancy, waves and pipeline facts against
numbers computed by hand for an H100 (132 SMs, 228 KB shared memory and 64K registers per SM)."""
from __future__ import annotations

import dataclasses
import math

import pytest

from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.space import Choice, Space
from abductune.theory import Diagnosis, diagnose
from abductune.theory.diagnose import LATENCY_FRAC, blocks_per_sm, classify_bound, padding_waste
from theory_fixtures import (DEFAULT_MM, H100, elementwise, elementwise_space, matmul, matmul_space, measured,
                             row_space, rows)


def test_square_matmul_tiles_occupancy_and_waves():
    d = diagnose(measured(DEFAULT_MM, frac_flops=0.6, frac_bw=0.1, registers=128, smem_bytes=98304),
                 matmul(4096, 4096, 4096), matmul_space())
    assert d.kernel_class == "matmul" and d.dims == {"M": 4096, "N": 4096, "K": 4096}
    assert d.bound == "compute" and d.frac_peak_flops == 0.6
    assert d.tiles == 32 * 32 and d.tiles_along == {"tile:M": 32, "tile:N": 32, "tile:K": 64}
    assert d.padding == {"tile:M": 0.0, "tile:N": 0.0, "tile:K": 0.0}
    # registers: ceil(128*32/256)*256 = 4096 per warp -> 16 warps -> 4 blocks of 4 warps;
    # shared memory: 233472 // (98304 + 1024 reserved) = 2 blocks -> smem limits
    assert (d.blocks_per_sm, d.occupancy_limit) == (2, "smem")
    assert d.occupancy == pytest.approx(2 * 4 / 64)
    assert d.waves == pytest.approx(1024 / 264)
    assert d.wave_efficiency == pytest.approx(1024 / (4 * 264))
    assert d.underfilled is False
    assert (d.k_trips, d.stages, d.warps) == (64, 3, 4)
    assert d.tile_elems_per_thread == pytest.approx(128 * 128 / (32 * 4))
    assert d.row_fits_block is None


def test_register_limited_occupancy():
    # 200 registers: 6400 per warp -> 65536 // 6400 = 10 warps -> 2 blocks of 4 warps
    assert blocks_per_sm(H100, 4, 200, None) == (2, "registers")
    # 32 registers on 4 warps: 16 blocks by registers, 16 by threads: the resource is named
    assert blocks_per_sm(H100, 4, 32, None) == (16, "registers")
    # 8 warps and nothing else known: 64 / 8 = 8 blocks by threads
    assert blocks_per_sm(H100, 8, None, None) == (8, "warps")


def test_decode_matmul_is_underfilled_and_padded():
    d = diagnose(measured(DEFAULT_MM, frac_flops=0.001, frac_bw=0.2, registers=200, smem_bytes=98304),
                 matmul(1, 4096, 4096), matmul_space())
    assert d.bound == "latency"  # 0.2 of the bandwidth roof: neither roof is near
    assert d.tiles == 32 and d.underfilled is True
    assert d.padding["tile:M"] == pytest.approx(1 - 1 / 128)
    assert d.waves == pytest.approx(32 / 264) and d.waves < 1


def test_ragged_padding_and_split_k():
    d = diagnose(measured(DEFAULT_MM, frac_flops=0.5), matmul(3000, 5120, 1024), matmul_space())
    assert d.padding["tile:M"] == pytest.approx(1 - 3000 / 3072)
    assert d.tiles == 24 * 40
    cfg = {**DEFAULT_MM, "SPLIT_K": 4}
    d = diagnose(measured(cfg, frac_bw=0.2), matmul(1, 4096, 4096), matmul_space(split_k=True))
    assert d.tiles == 32 * 4  # each split of K is a program
    assert d.k_trips == math.ceil(4096 / 4 / 64)


def test_row_reduction_fit_trips_and_padding():
    sp, pb = row_space(), rows(4096, 1000)
    chunked = diagnose(measured({"BLOCK": 512, "ROWS_PER_PROGRAM": 2, "num_warps": 4, "num_stages": 1},
                                frac_bw=0.5, registers=40), pb, sp)
    assert chunked.row_fits_block is False and chunked.k_trips == 2
    assert chunked.padding["tile:R"] == pytest.approx(1 - 1000 / 1024)
    assert chunked.tiles == 2048  # rows / rows per program
    assert chunked.tile_elems_per_thread == pytest.approx(512 * 2 / (32 * 4))
    whole = diagnose(measured({"BLOCK": 2048, "ROWS_PER_PROGRAM": 1, "num_warps": 8, "num_stages": 1},
                              frac_bw=0.5, registers=40), pb, sp)
    assert whole.row_fits_block is True and whole.k_trips == 1
    assert whole.padding["tile:R"] == pytest.approx(1 - 1000 / 2048)


def test_huge_elementwise_runs_many_full_waves():
    d = diagnose(measured({"BLOCK": 1024, "num_warps": 4, "num_stages": 1}, frac_flops=0.005, frac_bw=0.9,
                          registers=32), elementwise(1 << 28), elementwise_space())
    assert d.bound == "memory"
    assert d.tiles == (1 << 28) // 1024 and d.underfilled is False
    assert d.blocks_per_sm == 16
    assert d.waves == pytest.approx((1 << 28) / 1024 / (132 * 16))
    assert d.wave_efficiency > 0.99
    assert d.k_trips is None and d.row_fits_block is None


def test_fractions_computed_from_the_problem_when_missing():
    pb = matmul(4096, 4096, 4096)
    d = diagnose(measured(DEFAULT_MM, time_ms=0.2), pb, matmul_space())
    assert d.frac_peak_flops == pytest.approx(pb.flops / 0.2e-3 / 989e12)
    assert d.frac_peak_bw == pytest.approx(pb.min_bytes / 0.2e-3 / 3.35e12)
    assert d.bound == "compute"
    # older records kept the fractions in `extra`
    m = Measurement(config=dict(DEFAULT_MM), time_ms=1.0, extra={"frac_peak_flops": 0.3, "frac_peak_bw": 0.7})
    assert diagnose(m, pb, matmul_space()).bound == "memory"


def test_bound_thresholds():
    assert classify_bound(0.6, 0.1) == "compute"
    assert classify_bound(0.05, 0.8) == "memory"
    assert classify_bound(LATENCY_FRAC - 0.01, 0.1) == "latency"
    assert classify_bound(None, 0.2) == "unknown"  # the missing roof may be the binding one
    assert classify_bound(None, 0.8) == "memory"
    assert classify_bound(None, None) == "unknown"


def test_without_roles_or_facts_only_the_time_is_known():
    sp = Space([Choice("a", [1, 2, 3]), Choice("b", ["x", "y"])])
    pb = Problem("foreign", "other", {"n": 100})
    d = diagnose(Measurement(config={"a": 2, "b": "y"}, time_ms=3.5), pb, sp)
    assert d.time_ms == 3.5 and d.ok
    assert d.bound == "unknown" and d.frac_peak_flops is None
    assert d.tiles is None and d.padding == {} and d.blocks_per_sm is None and d.waves is None
    assert d.useful_fraction == 1.0


def test_failed_and_partial_measurements():
    d = diagnose(measured(DEFAULT_MM, status="resource_error", registers=None), matmul(4096, 4096, 4096),
                 matmul_space())
    assert d.status == "resource_error" and d.time_ms is None and not d.ok
    assert d.tiles == 1024  # the config's geometry is still known
    partial = diagnose(Measurement(config={"BLOCK_M": 64}, time_ms=1.0), matmul(64, 64, 64), matmul_space())
    assert partial.tiles is None and partial.padding == {}


def test_diagnosis_is_frozen_and_hashable():
    d = diagnose(measured(DEFAULT_MM, frac_flops=0.6), matmul(4096, 4096, 4096), matmul_space())
    assert isinstance(hash(d), int)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.bound = "memory"  # type: ignore[misc]
    assert isinstance(d, Diagnosis)


def test_padding_waste_formula():
    assert padding_waste(4096, 128) == 0.0
    assert padding_waste(1, 16) == pytest.approx(15 / 16)
    assert padding_waste(1000, 512) == pytest.approx(1 - 1000 / 1024)
