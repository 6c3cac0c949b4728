"""Diagnosis: why a measured config is as fast as it is, from the measurement, its problem,
its space's roles and the hardware. Pure functions; nothing here measures anything.

The diagnosis fills what it can know and leaves the rest None: a public Kernel Tuner record
(no roles, no static facts, no FLOP count) gives a Diagnosis with only its time, a live or
bundled record (roles, registers, shared memory, roofline) gives all of it.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..classify import batch_dims, classify, independent_dims, partitioned_dim, tile_dim, tile_dim_name
from ..hardware import HardwareInfo
from ..measurement import Measurement
from ..problem import Problem
from ..space import Space

# Below this fraction of *both* roofs the kernel is limited by neither: it waits on memory
# latency, launch overhead or too little parallelism. Tuned Triton kernels reach 0.6-0.8 of the
# roof that binds them, so a third of it means the binding resource is not the bottleneck.
LATENCY_FRAC = 0.35

# Triton launches 4 warps when a space does not tune them.
TRITON_DEFAULT_WARPS = 4
# Registers are allocated per warp in chunks of 256 (8 per thread); sm_80+ reserves 1 KB of
# shared memory per resident block for the system.
REG_ALLOC_UNIT = 256
SMEM_RESERVED_PER_BLOCK = 1024

# Roles that tile a reduced dimension (a loop inside a program) rather than the launch grid.
REDUCTION_AXES = ("K", "R")

# ABDUCTUNE_GRID_UNTILED=1: the launch grid also counts the independent dims no tile covers
# (attention's batch x heads, a row-wise map's rows), attention's key tile as its loop, and a
# MoE matmul's tokens tiled per expert (`grid_tiles`). Off by default: measured leave-one-kernel-
# out on the zoo (benchmarks/results/session15/grid_model), it served MoE better zero-shot
# (1.144 -> 1.082) but put the ranker's attention picks on configs that cannot compile (4 -> 9
# of 10) and one MoE search behind (1.011 -> 1.056 at 16). Measured again in session 16 with
# attention's resource model (no infeasible pick either way), leave-one-kernel-out: the ranker's
# attention top-1 1.232 -> 1.202 and the served zero-shot 1.165 -> 1.163 (MoE 1.144 -> 1.082,
# tutorial matmul 1.266 -> 1.290), but seeded abduction on attention 1.003 -> 1.017 and on MoE
# 1.002 -> 1.009 at 16 (benchmarks/results/session16/issue27_zeroshot/README.md): still off. Regenerate the
# shipped ranker (`python -m abductune.heuristics.ranker_shipped`) under the setting it is served with.
GRID_UNTILED = os.environ.get("ABDUCTUNE_GRID_UNTILED", "0") == "1"


@dataclass(frozen=True)
class Diagnosis:
    """What one measurement says about its config. Every field is None when unknowable."""

    config: dict[str, Any] = field(default_factory=dict, hash=False)
    status: str = "ok"
    time_ms: float | None = None
    kernel_class: str = "other"
    dims: dict[str, int] = field(default_factory=dict, hash=False)  # canonical dims (M, N, K / rows, cols / numel)
    # roofline
    frac_peak_flops: float | None = None
    frac_peak_bw: float | None = None
    bound: str = "unknown"  # "compute" | "memory" | "latency" | "unknown"
    # tiling: per tile role, the padding waste and the number of tiles along its dim
    padding: dict[str, float] = field(default_factory=dict, hash=False)
    tiles_along: dict[str, int] = field(default_factory=dict, hash=False)
    tiles: int | None = None  # programs launched
    tile_elems_per_thread: float | None = None  # output-tile elements per thread (warps matched?)
    # occupancy
    warps: int | None = None
    blocks_per_sm: int | None = None
    occupancy_limit: str | None = None  # "registers" | "smem" | "warps" | "blocks"
    occupancy: float | None = None  # resident warps / the SM's maximum
    # waves
    sms: int | None = None
    waves: float | None = None
    wave_efficiency: float | None = None
    underfilled: bool | None = None  # fewer programs than SMs
    # static facts and pipeline
    registers: int | None = None
    spills: int | None = None
    smem_bytes: int | None = None
    k_trips: int | None = None  # trips of the loop over the reduced dim (K / BLOCK_K, cols / BLOCK)
    stages: int | None = None
    row_fits_block: bool | None = None  # row kernels: one block holds a whole row

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.time_ms is not None

    @property
    def roof_fraction(self) -> float | None:
        """The larger known fraction of peak: how close the kernel is to the roof that binds it."""
        known = [f for f in (self.frac_peak_flops, self.frac_peak_bw) if f is not None]
        return max(known) if known else None

    @property
    def useful_fraction(self) -> float:
        """Share of the tiled work that is not padding (1.0 when no tile is known)."""
        return math.prod(1.0 - w for w in self.padding.values())


# ----------------------------------------------------------------------------- helpers

def _classify(problem: Problem, space: Space | None) -> Any:
    return classify(problem, space)


def _tile_dim(role: str, cls: Any) -> int | None:
    return tile_dim(role, cls)


def is_reduction_role(role: str, kernel_class: str, tile_axes: Mapping[str, str] | None = None) -> bool:
    """True when a tile role walks a reduced dim inside a program (matmul K, a row's columns,
    attention's keys). `tile_axes` (`Classification.tile_axes`): axes whose dim the kernel's
    loops tell, which win over the letters' convention."""
    axis = role.split(":", 1)[1] if ":" in role else ""
    if tile_axes and axis in tile_axes:
        return kernel_class == "row_reduction" and tile_axes[axis] == "cols"
    if axis in REDUCTION_AXES:
        return True
    # attention tiles its sequence twice: queries (tile:M) across the grid, keys (tile:N) in the
    # loop each program runs over them, reducing the scores' softmax and P·V along it
    if kernel_class == "attention" and axis == "N" and GRID_UNTILED:
        return True
    # a row kernel reduces along its columns: tile:N (the row length), a bare tile, or a tile
    # named for the dim itself (BLOCK_COLS, classify.tile_dim_name)
    return kernel_class == "row_reduction" and axis.upper() in ("", "N", "COL", "COLS")


def tiled_dims(problem: Problem, space: Space) -> dict[str, tuple[str, int, bool]]:
    """tile role -> (parameter name, problem dim it covers, is a reduction), for every tile
    parameter whose dim the problem names."""
    cls = _classify(problem, space)
    out: dict[str, tuple[str, int, bool]] = {}
    for p in space.params:
        if not p.role or not (p.role == "tile" or p.role.startswith("tile:")):
            continue
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in p.values):
            continue  # a "tile" that is not a positive size (a flag, a name) tiles nothing
        dim = _tile_dim(p.role, cls)
        if dim is not None and dim > 0:
            out[p.role] = (p.name, int(dim), is_reduction_role(p.role, cls.kernel_class, cls.tile_axes))
    return out


def on_warpgroup_mma(problem: Problem, space: Space, config: Mapping[str, Any]) -> bool | None:
    """Whether a matmul-like config can use the hardware's warpgroup MMA (Hopper's wgmma: an
    M tile of at least 64 rows and warps in groups of 4); None where the question does not
    arise (no such MMA, no M/N/K tiles or warps role, or an M dim below the rows)."""
    hw = problem.hardware
    wg = hw.warpgroup_mma if hw is not None else None
    tiles = tiled_dims(problem, space)
    warps = space.by_role("warps")
    if wg is None or warps is None or not all(r in tiles for r in ("tile:M", "tile:N", "tile:K")):
        return None
    name, dim, _ = tiles["tile:M"]
    if dim < wg[1] or name not in config or warps.name not in config:
        return None
    return int(config[name]) >= wg[1] and int(config[warps.name]) % wg[0] == 0


def padding_waste(dim: int, tile: int) -> float:
    """Share of a tiled dim's lanes that fall past its end: 1 - dim / (ceil(dim/tile) * tile)."""
    return 1.0 - dim / (math.ceil(dim / tile) * tile)


def _role_value(space: Space, config: Mapping[str, Any], role: str) -> Any:
    p = space.by_role(role)
    return None if p is None or p.name not in config else config[p.name]


def grid_tiles(problem: Problem, space: Space, config: Mapping[str, Any]) -> tuple[int | None, dict[str, int]]:
    """(programs launched, tiles along each tiled dim) for `config`: the product of
    ceil(dim / tile) over the grid (non-reduction) tile roles, times the split:K factor; a row
    kernel with no grid tile launches one program per row, and where no tile covers a problem
    dim the grid is unknown (None). With `GRID_UNTILED`, also times every independent dim that
    no tile covers (`classify.independent_dims`: attention's batch x heads, a row kernel's rows,
    tokens; one program per index), and a dim split among groups tiled apart (a MoE matmul's
    tokens among its experts) is tiled per group."""
    cls = _classify(problem, space)
    tiled = tiled_dims(problem, space)
    if not tiled:
        rows = cls.dims.get("rows") if cls.kernel_class == "row_reduction" else None
        return (int(rows), {}) if rows else (None, {})
    covered = {tile_dim_name(role, cls) for role in tiled} if GRID_UNTILED else set()
    part = partitioned_dim(cls) if GRID_UNTILED else None
    along: dict[str, int] = {}
    grid = 1
    any_grid = False
    for role, (name, dim, reduction) in tiled.items():
        tile = int(config[name])
        if part is not None and part[1] not in covered and tile_dim_name(role, cls) == part[0]:
            # each group's share of the dim is tiled on its own; with top-k routing unknown,
            # each token counts once, spread evenly over min(groups, tokens) groups
            groups = min(int(cls.dims[part[1]]), dim)
            n = groups * math.ceil(math.ceil(dim / groups) / tile)
        else:
            n = math.ceil(dim / tile)
        along[role] = n
        if not reduction:
            grid *= n
            any_grid = True
    if GRID_UNTILED:
        extra = [k for k in independent_dims(cls) if k not in covered]
    else:
        extra = ["rows"] if not any_grid and cls.kernel_class == "row_reduction" and "rows" in cls.dims else []
        # a batch of independent products (a bmm: the batch on the grid's third axis): one
        # program per output tile of one product, so the grid is the batch times one product's
        # tiles. Counted whatever GRID_UNTILED says: a batch dim is nothing else, and counting
        # it changes no figure of a product without one (session 21: FlagGems' bmm, held out,
        # was read as 16 programs where it launches 512, and every rule shrank its tiles)
        own = {tile_dim_name(role, cls) for role in tiled}
        extra += [k for k in batch_dims(cls) if k not in own]
    for k in extra:
        grid *= int(cls.dims[k])
        any_grid = True
    if not any_grid:
        return None, along
    split = _role_value(space, config, "split:K")
    if isinstance(split, int) and split > 1:
        grid *= split
    return grid, along


def serializes_idle(problem: Problem, space: Space, config: Mapping[str, Any],
                    counted: "frozenset[str] | set[str]") -> str | None:
    """Why `config` serializes work that idle SMs could run, or None. `counted`: the tile
    parameters the kernel's source iterates as a count (`scope.counted_tiles`: each program
    owns that many items of a grid dim and handles them one per trip). Such a parameter adds
    serial trips per program and divides the grid; it pays only by amortizing a program's
    fixed cost once the grid has more programs than the GPU has SMs. Where the next smaller
    value would still launch no more programs than there are SMs, every program it adds lands
    on an idle SM, so the larger value only runs in series what could run in parallel: no
    measurement is needed to prefer the smaller (a memory-bound program's bandwidth, and a
    compute-bound one's FLOPs, come from the SM it runs on). The bound is the hardware's SM
    count, not a fitted constant. None where the grid or the SM count is unknown, or where the
    smaller value is not a config of the space."""
    hw = problem.hardware
    if not counted or hw is None or not hw.sms:
        return None
    tiled = tiled_dims(problem, space)
    for _role, (name, _dim, reduction) in tiled.items():
        if reduction or name not in counted or name not in config:
            continue
        p = space[name]
        v = config[name]
        lower = [x for x in p.values if isinstance(x, int) and x < v]
        if not lower:
            continue
        smaller = {**config, name: max(lower)}
        if not space.is_valid(smaller):
            continue
        grid, _ = grid_tiles(problem, space, smaller)
        if grid is not None and grid <= hw.sms:
            return (f"{name}={v} runs in series, in each program, items that {name}={max(lower)} would give to "
                    f"idle SMs ({grid} programs at most, on {hw.sms} SMs)")
    return None


def tile_padding(problem: Problem, space: Space, config: Mapping[str, Any]) -> dict[str, float]:
    """Per tile role, the share of its lanes past the end of its dim (`padding_waste`); a dim
    split among groups (`grid_tiles`) is padded in every group."""
    return _padding(tiled_dims(problem, space), grid_tiles(problem, space, config)[1], config)


def _padding(tiled: Mapping[str, tuple[str, int, bool]], along: Mapping[str, int],
             config: Mapping[str, Any]) -> dict[str, float]:
    return {role: 1.0 - dim / (along[role] * int(config[name])) for role, (name, dim, _r) in tiled.items()}


def smem_reserved(hw: HardwareInfo) -> int:
    """Shared memory the system takes per resident block on top of the kernel's own."""
    return SMEM_RESERVED_PER_BLOCK if hw.vendor == "nvidia" and hw.compute_capability >= (8, 0) else 0


def blocks_per_sm(hw: HardwareInfo, warps: int, registers: int | None,
                  smem_bytes: int | None) -> tuple[int | None, str | None]:
    """Resident blocks per SM of `warps` warps and what limits them: registers (per-warp
    allocation against the register file), shared memory (plus the per-block reservation),
    threads, and the block-count cap; (None, None) when the hardware gives no limit."""
    limits: dict[str, int] = {}
    if registers and hw.regs_per_sm:
        per_warp = math.ceil(registers * hw.warp_size / REG_ALLOC_UNIT) * REG_ALLOC_UNIT
        limits["registers"] = (hw.regs_per_sm // per_warp) // warps
    if smem_bytes and hw.smem_per_sm:
        limits["smem"] = hw.smem_per_sm // (smem_bytes + smem_reserved(hw))
    if hw.max_threads_per_sm and hw.warp_size:
        limits["warps"] = (hw.max_threads_per_sm // hw.warp_size) // warps
    if hw.max_blocks_per_sm:
        limits["blocks"] = hw.max_blocks_per_sm
    if not limits:
        return None, None
    # ties go to the first named: a resource before the thread and block caps
    limit = min(limits, key=lambda k: limits[k])
    return limits[limit], limit


def wave_stats(tiles: int, slots: int) -> tuple[float, float]:
    """(waves, wave efficiency) of `tiles` programs over `slots` resident blocks in the GPU."""
    waves = tiles / slots
    return waves, tiles / (math.ceil(waves) * slots)


def roofline_fractions(m: Measurement, problem: Problem,
                       hw: HardwareInfo | None) -> tuple[float | None, float | None]:
    """Achieved fractions of peak FLOP/s and bytes/s: the measurement's own when it has them,
    else from the problem's FLOPs and minimum bytes against the hardware peaks."""
    ff = getattr(m, "frac_peak_flops", None)
    fb = getattr(m, "frac_peak_bw", None)
    extra = getattr(m, "extra", None) or {}
    ff = extra.get("frac_peak_flops") if ff is None else ff
    fb = extra.get("frac_peak_bw") if fb is None else fb
    t = m.time_ms if m.ok else None
    if t and hw is not None:
        if ff is None and problem.flops:
            peak = hw.peak(problem.dtype)
            ff = problem.flops / (t * 1e-3) / peak if peak else None
        if fb is None and problem.min_bytes and hw.mem_bandwidth:
            fb = problem.min_bytes / (t * 1e-3) / hw.mem_bandwidth
    return (float(ff) if ff is not None else None, float(fb) if fb is not None else None)


def problem_bound(problem: Problem) -> str | None:
    """The roof the *problem* sits under, whatever a config reaches: compute where its FLOPs
    per byte (`Problem.flops` over `min_bytes`) reach the GPU's ridge point, else memory; None
    when the roofline is unknown. A config far from both roofs ("latency") on a compute-bound
    problem is short of the compute roof, the one its work can reach."""
    hw = problem.hardware
    if hw is None or not problem.flops or not problem.min_bytes or not hw.mem_bandwidth:
        return None
    peak = hw.peak(problem.dtype)
    if not peak:
        return None
    return "compute" if problem.flops / problem.min_bytes >= peak / hw.mem_bandwidth else "memory"


def classify_bound(ff: float | None, fb: float | None) -> str:
    """compute / memory: the roof the kernel is nearer; latency: far from both; unknown when a
    low fraction comes without the other (the missing roof might be the binding one)."""
    known = [f for f in (ff, fb) if f is not None]
    if not known:
        return "unknown"
    top = max(known)
    if top < LATENCY_FRAC:
        return "latency" if len(known) == 2 else "unknown"
    if fb is None or (ff is not None and ff >= fb):
        return "compute"
    return "memory"


def _output_tile_elems(problem: Problem, space: Space, config: Mapping[str, Any]) -> int | None:
    """Elements one program holds at a time: the product of its tile parameters, reduced dims
    included only for row kernels and attention (a chunk of a row and a block of scores are
    held, a K slice of a matmul is not)."""
    dims = tiled_dims(problem, space)
    if not dims:
        return None
    cls = _classify(problem, space)
    elems = 1
    for role, (name, _dim, reduction) in dims.items():
        if reduction and cls.kernel_class not in ("row_reduction", "attention"):
            continue
        elems *= int(config[name])
    return elems


# ----------------------------------------------------------------------------- diagnose

def diagnose(measurement: Measurement, problem: Problem, space: Space,
             hardware: HardwareInfo | None = None) -> Diagnosis:
    """Everything the measurement, problem, space roles and hardware say about the config."""
    hw = hardware or problem.hardware
    config = dict(measurement.config)
    cls = _classify(problem, space)
    ff, fb = roofline_fractions(measurement, problem, hw)
    status = str(getattr(measurement.status, "value", measurement.status))
    facts: dict[str, Any] = dict(
        config=config, status=status, time_ms=measurement.time_ms if measurement.ok else None,
        kernel_class=cls.kernel_class, dims=dict(cls.dims), frac_peak_flops=ff, frac_peak_bw=fb,
        bound=classify_bound(ff, fb), registers=measurement.registers, spills=measurement.spills,
        smem_bytes=measurement.smem_bytes)

    # roles the config does not carry (a partial config) are left unknown
    if not set(space.names) <= set(config):
        return Diagnosis(**facts)

    dims = tiled_dims(problem, space)
    tiles, along = grid_tiles(problem, space, config)
    facts["padding"] = _padding(dims, along, config)
    facts["tiles"], facts["tiles_along"] = tiles, along

    warps = _role_value(space, config, "warps")
    warps = int(warps) if isinstance(warps, int) else None
    stages = _role_value(space, config, "stages")
    facts["warps"] = warps
    facts["stages"] = int(stages) if isinstance(stages, int) else None
    # Without a warps role only a Triton kernel's static facts say the 4-warp default applies;
    # for a foreign kernel (public data) nothing says how many threads a block has.
    triton_facts = measurement.registers is not None or bool(measurement.smem_bytes)
    threads_warps = warps if warps is not None else (TRITON_DEFAULT_WARPS if triton_facts else None)
    elems = _output_tile_elems(problem, space, config)
    if elems is not None and threads_warps and hw is not None and hw.warp_size:
        facts["tile_elems_per_thread"] = elems / (hw.warp_size * threads_warps)

    # the loop over the reduced dim: K slices of a matmul (per split), chunks of a row
    for role, (name, dim, reduction) in dims.items():
        if not reduction:
            continue
        split = _role_value(space, config, "split:K") if role == "tile:K" else None
        per_program = math.ceil(dim / split) if isinstance(split, int) and split > 1 else dim
        facts["k_trips"] = math.ceil(per_program / int(config[name]))
        if cls.kernel_class == "row_reduction":
            facts["row_fits_block"] = int(config[name]) >= dim
        break

    if hw is not None and hw.sms:
        facts["sms"] = hw.sms
        bps, limit = blocks_per_sm(hw, threads_warps, measurement.registers, measurement.smem_bytes) \
            if threads_warps else (None, None)
        facts["blocks_per_sm"], facts["occupancy_limit"] = bps, limit
        if bps is not None and hw.max_threads_per_sm and hw.warp_size:
            facts["occupancy"] = bps * threads_warps / (hw.max_threads_per_sm // hw.warp_size)
        if tiles is not None:
            facts["underfilled"] = tiles < hw.sms
            if bps:
                facts["waves"], facts["wave_efficiency"] = wave_stats(tiles, hw.sms * bps)
    return Diagnosis(**facts)
