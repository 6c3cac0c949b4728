"""Kernel-agnostic features of a config for its problem: roles, diagnosis facts and the resource model.

A learned ranker (`heuristics.ranker`) must compare configs of kernels it has never seen, so
nothing here reads a parameter's name: every feature comes from what the roles say the config
does to the problem on the hardware, without a measurement. The engine's own diagnosis
(`theory.diagnose`) is asked about a measurement that has not happened yet, carrying only the
shared memory the resource model (`theory.resources`) expects, so the facts it derives
(programs, waves, padding, occupancy, loop trips) are the ones abduction reasons with.

The list was fixed from first principles before any leave-one-kernel-out figure was seen:
- parallelism: programs per SM, the share of SMs the first wave fills, wave efficiency;
- waste: the share of tiled lanes past the end of their dims (padding);
- work per thread: tile elements per thread, warps (each also squared: both ends are slow);
- the loop: its trips, pipeline stages, stages the loop is too short to use;
- resources: shared memory against the block limit, occupancy, accumulator per thread;
- reuse: a tiled product's FLOPs per byte it loads; split-K, grouped launch order, Hopper's
  warpgroup MMA, a row held whole by one program (only where the kernel has a path without a
  loop over the row: on a kernel whose every path walks the row in tile steps, a tile that
  covers the row is one trip of the same loop, which reads the row as often as several trips
  do; `theory.store.scope`, session 24);
- the regime (how far the problem sits from the hardware's ridge point) times the features
  whose best value it moves: compute-bound problems want reuse and fewer, larger programs.
A fact the roles cannot give is 0 (per shape a constant, so it does not rank).

Added in session 18 (issue 27), after looking at the worst zero-shot picks of the zoo's matmuls
(so figures on those kernels are in-sample for it): each operand's K slice per row in bytes
(@tile:K x its element size), as log2 over `K_ROW_BYTES`, its distance from it, and the regime
times it. The tensor cores read shared memory in 128-byte swizzled rows, so a K slice is
judged in bytes, not elements: 64 bf16 and 128 fp8 elements fill the same row.

Added in session 37, from Triton's own rule and then checked on three zoo matmuls recorded for
it: Triton specialises an integer argument on divisibility by 16 (`TRITON_DIVISIBILITY`), and
where a product's row strides (K for a row-major A, N for B and the output) are not multiples of
it, the compiler cannot prove its loads 16-byte aligned. It then cannot copy the operand tiles
straight to shared memory; they pass through registers, so the configs that hold the most in
registers (the accumulator, the operand tiles, the stages in flight) lose most. On the H200
the tutorial matmul at 4,000 x 3,000 x 1,000 ran at 145 TFLOP/s against 495 at 4,000 x 3,008 x
1,008, and 392 of its 812 configs spilled against 16 (`zoo_data/h200/`). Per shape a flag,
`unaligned`, times the features whose best value it moves. The question came from a held-out
kernel (fla's matmul: its 3,000 x 5,000 x 1,000 shape ran at an eighth of its aligned shapes'
speed, session 36), so its figures there are not fully out of sample; the flag's form is Triton's
rule and its weights are fitted without that kernel's data. The row-major reading is an
assumption: a transposed operand's stride is another dim.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ..costs import product_operand_bytes
from ..hardware import HardwareInfo
from ..measurement import Measurement
from ..problem import Problem
from ..space import Space
from ..theory.diagnose import diagnose, on_warpgroup_mma, tiled_dims
from ..theory.resources import ACC_MAX, DEFAULT_STAGES, footprint
from ..theory.store.scope import LOOP, structure

BASE = ("programs_per_sm", "fill", "wave_eff", "useful", "elems_per_thread", "elems_per_thread_sq",
        "warps", "warps_sq", "stages", "loop_trips", "stages_unused", "smem_frac", "occupancy",
        "acc_frac", "reuse", "split", "group", "warpgroup_mma", "row_whole",
        "k_bytes_a", "k_bytes_b", "k_bytes_a_off", "k_bytes_b_off")
# the regime moves where these are best (module docstring)
REGIME_OF = ("programs_per_sm", "elems_per_thread", "warps", "stages", "reuse", "split", "k_bytes_a", "k_bytes_b")
# misaligned row strides move where these are best (module docstring): what the registers hold
UNALIGNED_OF = ("acc_frac", "operand_regs", "stages", "warps")
NAMES = BASE + tuple(f"regime*{n}" for n in REGIME_OF) + tuple(f"unaligned*{n}" for n in UNALIGNED_OF)
# |log2 distance to the ridge point| past which a problem is plainly one side of it
REGIME_CLIP = 4.0
TRITON_DEFAULT_WARPS = 4
# the width of a swizzled shared-memory row the tensor cores read (NVIDIA's 128-byte swizzle):
# where a K slice per row sits against it (module docstring); fixed from the hardware, not fitted
K_ROW_BYTES = 128
# the divisibility Triton specialises integer arguments on (its JIT's `divisibility`): a stride
# that is not a multiple of it leaves the loads it addresses unproven aligned
TRITON_DIVISIBILITY = 16


def unaligned(problem: Problem, space: Space) -> bool:
    """Whether a tiled product's row strides, read as row-major (A is M x K, B K x N), are not
    multiples of `TRITON_DIVISIBILITY`: K or N off it (module docstring). False where the space
    tiles no K and N of the problem (the layout is then unknown)."""
    tiles = tiled_dims(problem, space)
    if "tile:K" not in tiles or "tile:N" not in tiles:
        return False
    return any(tiles[r][1] % TRITON_DIVISIBILITY for r in ("tile:K", "tile:N"))


def regime(problem: Problem, hw: HardwareInfo | None) -> float:
    """log2 of the problem's FLOPs per byte over the hardware's ridge point, in [-1, 1]
    (negative: memory-bound); 0 when the roofline is unknown."""
    if hw is None or not problem.flops or not problem.min_bytes or not hw.mem_bandwidth:
        return 0.0
    peak = hw.peak(problem.dtype)
    if not peak:
        return 0.0
    r = math.log2((problem.flops / problem.min_bytes) / (peak / hw.mem_bandwidth))
    return max(-REGIME_CLIP, min(REGIME_CLIP, r)) / REGIME_CLIP


def _int(space: Space, config: Mapping[str, Any], role: str) -> int | None:
    p = space.by_role(role)
    v = config.get(p.name) if p is not None else None
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def _log2(v: float | None) -> float:
    return math.log2(v) if v is not None and v > 0 else 0.0


def config_features(problem: Problem, space: Space, config: Mapping[str, Any],
                    hardware: HardwareInfo | None = None, rho: float | None = None,
                    loops: bool | None = None, off: bool | None = None) -> list[float]:
    """The `NAMES` features of one config (no measurement). `rho` (the regime), `loops`
    (every path of the kernel walks its reduced dim in tile steps) and `off` (`unaligned`) are
    per problem: a caller featurising many configs passes them once."""
    hw = hardware or problem.hardware
    fp = footprint(problem, space, config)
    d = diagnose(Measurement(config=dict(config), smem_bytes=fp.smem_bytes), problem, space, hw)
    sms = d.sms or (hw.sms if hw is not None and hw.sms else 0)
    warps = d.warps or TRITON_DEFAULT_WARPS
    stages = d.stages or DEFAULT_STAGES
    f: dict[str, float] = dict.fromkeys(BASE + ("operand_regs",), 0.0)
    if d.tiles and sms:
        f["programs_per_sm"] = math.log2(d.tiles / sms)
        f["fill"] = math.log2(min(1.0, d.tiles / sms))
    f["wave_eff"] = d.wave_efficiency if d.wave_efficiency is not None else 0.0
    f["useful"] = math.log2(max(d.useful_fraction, 1e-6))
    f["elems_per_thread"] = _log2(d.tile_elems_per_thread)
    f["elems_per_thread_sq"] = f["elems_per_thread"] ** 2
    f["warps"] = math.log2(warps)
    f["warps_sq"] = f["warps"] ** 2
    f["stages"] = float(stages)
    if d.k_trips:
        f["loop_trips"] = math.log2(d.k_trips)
        f["stages_unused"] = float(max(0, stages - d.k_trips))
    if fp.smem_bytes is not None and hw is not None and hw.smem_per_block:
        f["smem_frac"] = fp.smem_bytes / hw.smem_per_block
    f["occupancy"] = d.occupancy or 0.0
    if fp.acc_per_thread is not None:
        f["acc_frac"] = fp.acc_per_thread / ACC_MAX
    bm, bn = _int(space, config, "tile:M"), _int(space, config, "tile:N")
    if bm and bn:  # a K slice of A (bm rows) and B (bn columns) feeds 2*bm*bn FLOPs per element of K
        sa, sb = product_operand_bytes(problem.dtypes)
        f["reuse"] = math.log2(2.0 * bm * bn / (bm * sa + bn * sb))
    f["split"] = _log2(_int(space, config, "split:K"))
    f["group"] = _log2(_int(space, config, "group"))
    f["warpgroup_mma"] = 1.0 if on_warpgroup_mma(problem, space, config) else 0.0
    if loops is None:
        loops = structure(problem, space) == LOOP
    f["row_whole"] = 1.0 if d.row_fits_block and not loops else 0.0
    bk = _int(space, config, "tile:K")
    if bk:
        sa, sb = product_operand_bytes(problem.dtypes)
        for side, size in (("a", sa), ("b", sb)):
            f[f"k_bytes_{side}"] = math.log2(bk * size / K_ROW_BYTES)
            f[f"k_bytes_{side}_off"] = abs(f[f"k_bytes_{side}"])
    if fp.operand_regs:
        f["operand_regs"] = math.log2(fp.operand_regs)
    r = regime(problem, hw) if rho is None else rho
    u = float(unaligned(problem, space) if off is None else off)
    return [f[n] for n in BASE] + [r * f[n] for n in REGIME_OF] + [u * f[n] for n in UNALIGNED_OF]


def feature_matrix(problem: Problem, space: Space, configs: Sequence[Mapping[str, Any]],
                   hardware: HardwareInfo | None = None) -> np.ndarray:
    """(len(configs), len(NAMES)) features, one row per config."""
    rho = regime(problem, hardware or problem.hardware)
    loops = structure(problem, space) == LOOP
    off = unaligned(problem, space)
    rows = [config_features(problem, space, c, hardware, rho, loops, off) for c in configs]
    return np.asarray(rows, dtype=float).reshape(len(rows), len(NAMES))


def usable(problem: Problem, space: Space) -> str | None:
    """Why the features cannot describe this problem's configs, or None when they can: the
    hardware must be known (SMs), the space must launch Triton-style programs (a warps role:
    in a CUDA kernel's space a "block size" counts threads, not data), tile a dim, and tune
    every tile its class is sized by (`theory.store.gaps.space_gap`: with a tile fixed inside
    the kernel, reuse, programs and shared memory would be read off the wrong tile, so such a
    space is neither ranked nor learned from)."""
    hw = problem.hardware
    if hw is None or not hw.sms:
        return "hardware unknown (no SM count)"
    if space.by_role("warps") is None:
        return "no warps role (not a Triton-style launch: block sizes may count threads)"
    if not tiled_dims(problem, space):
        return "no tile role covers a problem dim"
    from ..theory.store.gaps import space_gap  # lazily: the theory store imports the heuristics

    return space_gap(problem, space)
