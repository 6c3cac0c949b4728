"""Hand-made problems and spaces for the theory tests (no torch, no triton).

The spaces mirror the built-in kernels' (kernels/matmul.py, kernels/base.py row_reduction_space,
kernels/elementwise.py) without importing them, so these tests run where triton is absent.
"""
from __future__ import annotations

from typing import Any

from abductune.hardware import lookup
from abductune.measurement import Measurement
from abductune.problem import Problem
from abductune.space import Choice, Pow2, Space

H100 = lookup("H100-SXM")
SMEM_LIMIT = 232448


def matmul_space(split_k: bool = False) -> Space:
    params = [Pow2("BLOCK_M", 16, 256, default=128), Pow2("BLOCK_N", 32, 256, default=128),
              Pow2("BLOCK_K", 32, 128, default=64), Choice("GROUP_M", [1, 8], role="group", default=8),
              Choice("num_warps", [2, 4, 8], default=4), Choice("num_stages", [2, 3, 4, 5], default=3)]
    if split_k:
        params.append(Choice("SPLIT_K", [1, 2, 4, 8], default=1))
    return Space(params, constraints=[
        f"num_stages * (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2 <= {SMEM_LIMIT}",
        "BLOCK_M * BLOCK_N <= 128 * 32 * num_warps",
        "BLOCK_M * BLOCK_N >= 16 * 32 * num_warps",
    ], name="matmul_test")


def row_space() -> Space:
    return Space([Pow2("BLOCK", 128, 16384, role="tile:R", default=2048),
                  Choice("ROWS_PER_PROGRAM", [1, 2, 4], role="tile:X", default=1),
                  Pow2("num_warps", 1, 16, default=8), Choice("num_stages", [1, 2, 3], default=2)],
                 constraints=["ROWS_PER_PROGRAM * BLOCK >= 32 * num_warps",
                              "ROWS_PER_PROGRAM * BLOCK <= 64 * 32 * num_warps"], name="rows_test")


def elementwise_space() -> Space:
    return Space([Pow2("BLOCK", 128, 8192, role="tile:X", default=1024),
                  Pow2("num_warps", 1, 16, default=4), Choice("num_stages", [1, 2], default=1)],
                 constraints=["BLOCK >= 32 * num_warps"], name="elementwise_test")


def matmul(m: int, n: int, k: int) -> Problem:
    return Problem("matmul_fp16", "matmul", {"M": m, "N": n, "K": k}, {"a": "fp16", "b": "fp16", "c": "fp16"},
                   flops=2.0 * m * n * k, min_bytes=2.0 * (m * k + k * n + m * n), hardware=H100)


def rows(r: int, c: int) -> Problem:
    return Problem("softmax_fp16", "row_reduction", {"rows": r, "cols": c}, {"x": "fp16", "y": "fp16"},
                   flops=5.0 * r * c, min_bytes=4.0 * r * c, hardware=H100)


def elementwise(numel: int) -> Problem:
    return Problem("gelu_mul_fp16", "elementwise", {"numel": numel}, {"x": "fp16"},
                   flops=10.0 * numel, min_bytes=6.0 * numel, hardware=H100)


DEFAULT_MM = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 3}


def measured(config: dict[str, Any], *, frac_flops: float | None = None, frac_bw: float | None = None,
             time_ms: float = 1.0, registers: int | None = 128, spills: int | None = 0,
             smem_bytes: int | None = None, status: str = "ok") -> Measurement:
    return Measurement(config=dict(config), status=status, time_ms=time_ms if status == "ok" else None,
                       registers=registers, spills=spills, smem_bytes=smem_bytes,
                       frac_peak_flops=frac_flops, frac_peak_bw=frac_bw)
