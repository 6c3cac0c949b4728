"""Built-in seed heuristics for Triton kernels.

Each one speaks in roles ("@tile:M", "@tile:K", "@warps", "@stages", "@group", "@tile:R",
"@tile:X"), so it applies to any kernel whose space declares them; parameters a space lacks
are dropped and values are clamped to the space and the problem by `realize.realize`.
The numbers in the docstrings are measurements: vLLM's fused-MoE configs tuned on H100
(`E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json`, the best of an exhaustive search per
batch size) and the Triton tutorials' measured choices, until our own H100 datasets
(`datasets/data/h100/`) replace them (`benchmarks/bench_seeds.py` reports each heuristic's
seed against those datasets' optima).
"""
from __future__ import annotations

from typing import Any, Mapping

from ..classify import RECT_RATIO, SMALL_M, classify, next_pow2
from ..hardware import HardwareInfo, is_hopper, sm_count
from ..problem import Problem
from ..space import Space
from .base import AutotunerHeuristic, register_heuristic

# fraction of the SMs a grid must cover before a larger tile is preferred
WAVE_FILL = 0.8


def _mnk(problem: Problem) -> tuple[int, int, int] | None:
    d = classify(problem).dims
    if "M" in d and "N" in d and "K" in d:
        return d["M"], d["N"], d["K"]
    return None


def _values(space: Space, role: str) -> list[Any]:
    p = space.by_role(role)
    return sorted(p.values) if p is not None and p.ordered else []


def _fill_tile(extent: int, other_tiles: int, sms: int, choices: list[int], lo: int) -> int:
    """The largest tile (from `choices`, at least `lo`) whose grid still covers WAVE_FILL of
    the SMs; the smallest such tile when none does."""
    cands = sorted({c for c in choices if c >= lo}, reverse=True) or [lo]
    for t in cands:
        if -(-extent // t) * other_tiles >= WAVE_FILL * sms:
            return t
    return cands[-1]


class _MatmulHeuristic(AutotunerHeuristic):
    backend = "triton"
    kernel_classes = ("matmul", "quantized_matmul")

    def is_eligible(self, problem: Problem, hardware: HardwareInfo | None) -> bool:
        return super().is_eligible(problem, hardware) and _mnk(problem) is not None


@register_heuristic
class DecodeGemm(_MatmulHeuristic):
    """Decode GEMM (M <= 64): BLOCK_M = max(16, next_pow2(M)), deep K tiles (BLOCK_K 128),
    more pipeline stages (4), and N tiles as large as still fill the SMs.

    Measured (vLLM fused-MoE on H100, E=8, N=14336, exhaustive search per batch size):
    batch 1-4 pick BLOCK_M 16 with BLOCK_K 128-256 and 3-5 stages; batch 8-96 pick
    BLOCK_M 16-64 with BLOCK_K 128-256 and 2-5 stages (4 in five of the seven); only from
    batch 128 does BLOCK_K fall to 64.
    With one M tile the grid is the N tiles alone, so N tiles shrink until they cover the SMs
    (decode is bandwidth-bound: an idle SM is unread weight bandwidth).
    """

    name = "decode_gemm"

    def is_eligible(self, problem: Problem, hardware: HardwareInfo | None) -> bool:
        mnk = _mnk(problem)
        return super().is_eligible(problem, hardware) and mnk is not None and mnk[0] <= SMALL_M

    def get_seed_config(self, problem: Problem, hardware: HardwareInfo | None,
                        space: Space) -> Mapping[str, Any] | None:
        mnk = _mnk(problem)
        if mnk is None or space.by_role("tile:M") is None:
            return None
        m, n, k = mnk
        bn = _fill_tile(n, 1, sm_count(hardware), _values(space, "tile:N") or [32, 64, 128], 32)
        return {"@tile:M": max(16, next_pow2(m)), "@tile:N": bn, "@tile:K": 128,
                "@warps": 4, "@stages": 4}


@register_heuristic
class SkinnyGemm(_MatmulHeuristic):
    """Skinny GEMM (max(M, N) >= 8 * min(M, N)): cover the short side with one tile (next
    power of two, 16..128), then take the largest tile along the long side whose grid still
    fills the SMs; BLOCK_K 64, 4 warps, 4 stages.

    Measured (vLLM fused-MoE on H100, E=8, N=14336): at batch 16-96 (N/M >= 150) the winners
    are BLOCK_M 16-64 (the short side) against BLOCK_N 128, and BLOCK_N never exceeds 128
    below batch 512 -- a 256-wide tile would leave most SMs without a tile.
    """

    name = "skinny_gemm"

    def is_eligible(self, problem: Problem, hardware: HardwareInfo | None) -> bool:
        mnk = _mnk(problem)
        return (super().is_eligible(problem, hardware) and mnk is not None
                and max(mnk[0], mnk[1]) >= RECT_RATIO * min(mnk[0], mnk[1]))

    def get_seed_config(self, problem: Problem, hardware: HardwareInfo | None,
                        space: Space) -> Mapping[str, Any] | None:
        mnk = _mnk(problem)
        if mnk is None or space.by_role("tile:M") is None or space.by_role("tile:N") is None:
            return None
        m, n, _ = mnk
        short_axis, long_axis = ("M", "N") if m <= n else ("N", "M")
        short, long_ = min(m, n), max(m, n)
        ts = min(128, max(16, next_pow2(short)))
        tiles_short = -(-short // ts)
        tl_ = _fill_tile(long_, tiles_short, sm_count(hardware),
                         _values(space, f"tile:{long_axis}") or [32, 64, 128, 256], 32)
        return {f"@tile:{short_axis}": ts, f"@tile:{long_axis}": tl_, "@tile:K": 64,
                "@warps": 4, "@stages": 4}


@register_heuristic
class LargeSquareGemmHopper(_MatmulHeuristic):
    """Large, roughly square GEMM on Hopper (min(M, N) >= 2048, aspect < 8, K >= 1024):
    128 x 256 x 64 tiles, 8 warps, 3 stages, GROUP_M 8.

    Measured (vLLM fused-MoE on H100, E=8, N=14336): every batch size from 512 to 4096
    picks BLOCK_M 128, BLOCK_N 256, BLOCK_K 64 with 8 warps and 3-4 stages; the big tile
    halves operand traffic per FLOP against 128 x 128, which Hopper's tensor cores need to
    stay fed, and 3 stages x 48 KiB fits the 227 KiB of shared memory.
    """

    name = "large_square_gemm_hopper"

    def is_eligible(self, problem: Problem, hardware: HardwareInfo | None) -> bool:
        mnk = _mnk(problem)
        if not (super().is_eligible(problem, hardware) and mnk is not None and is_hopper(hardware)):
            return False
        m, n, k = mnk
        return min(m, n) >= 2048 and max(m, n) < RECT_RATIO * min(m, n) and k >= 1024

    def get_seed_config(self, problem: Problem, hardware: HardwareInfo | None,
                        space: Space) -> Mapping[str, Any] | None:
        return {"@tile:M": 128, "@tile:N": 256, "@tile:K": 64, "@warps": 8, "@stages": 3,
                "@group": 8}


# rows longer than this are walked in chunks of it
ROW_BLOCK_CAP = 8192


def row_warps(block: int) -> int:
    """4 warps below 2048 elements, 8 below 4096, 16 from there (Triton softmax tutorial)."""
    return 4 if block < 2048 else (8 if block < 4096 else 16)


@register_heuristic
class RowReduction(AutotunerHeuristic):
    """Row reduction (softmax, norms): chunk = next power of two of the row, capped at 8192,
    one row per program, warps by chunk size (4 below 2048, 8 below 4096, else 16).

    Measured: the Triton fused-softmax tutorial (the version with a num_warps heuristic)
    sets BLOCK_SIZE = next_power_of_2(n_cols) and 4 / 8 / 16 warps at these thresholds,
    tuned on its benchmark against torch.softmax; a whole row per chunk reads x once. The
    8192 cap is ours (past it rows are walked in chunks anyway, and a larger chunk only adds
    registers): `benchmarks/bench_seeds.py` reports this seed against the H100 optima.
    """

    name = "row_reduction"
    backend = "triton"
    kernel_classes = ("row_reduction",)

    def get_seed_config(self, problem: Problem, hardware: HardwareInfo | None,
                        space: Space) -> Mapping[str, Any] | None:
        d = classify(problem).dims
        if "cols" not in d:
            return None
        block = min(next_pow2(d["cols"]), ROW_BLOCK_CAP)
        cfg: dict[str, Any] = {"@warps": row_warps(block)}
        key = "@tile:R" if space.by_role("tile:R") is not None else "@tile"
        cfg[key] = block
        if space.by_role("tile:X") is not None and space.by_role("tile:R") is not None:
            cfg["@tile:X"] = 1
        return cfg


def elementwise_block(numel: int, sms: int) -> int:
    """Largest power of two in [256, 4096] that still gives >= 4 blocks per SM."""
    b = 4096
    while b > 256 and numel / b < 4 * sms:
        b //= 2
    return b


@register_heuristic
class Elementwise(AutotunerHeuristic):
    """Elementwise: block by numel (the largest power of two in 256..4096 leaving at least
    4 blocks per SM), warps = block / 256 clamped to 2..8 (8 fp16 elements per thread at
    most 32 bytes in flight per thread).

    Measured: TorchInductor's pointwise configs, tuned on its benchmark suites, use XBLOCK
    1024 by default and one warp per 256 elements (at most 8 warps), the same warps rule;
    the 4-blocks-per-SM floor keeps the last, partial wave under a quarter of the run for
    small tensors. `benchmarks/bench_seeds.py` reports this seed against the H100 optima.
    """

    name = "elementwise"
    backend = "triton"
    kernel_classes = ("elementwise",)

    def get_seed_config(self, problem: Problem, hardware: HardwareInfo | None,
                        space: Space) -> Mapping[str, Any] | None:
        d = classify(problem).dims
        if "numel" not in d:
            return None
        block = elementwise_block(d["numel"], sm_count(hardware))
        key = "@tile:X" if space.by_role("tile:X") is not None else "@tile"
        return {key: block, "@warps": max(2, min(8, block // 256))}


BUILTIN = ("decode_gemm", "skinny_gemm", "large_square_gemm_hopper", "row_reduction", "elementwise")
