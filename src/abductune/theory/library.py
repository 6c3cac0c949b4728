"""The theory library: why a config can be slow, what to change, and how much it should help.

A `Theory` is data plus three small functions over a `Diagnosis`:
  - `applies(diag, problem, space, config)`: the precondition (is this explanation live?);
  - `propose(diag, problem, space, config)`: transformations over parameter *roles*
    (tile:M, tile:K, warps, stages, group, split:K ...), only valid configs;
  - `expected_gain(diag, problem, space, config, proposal)`: the predicted relative speed-up
    (0.2 = 20% faster, negative = slower), used to rank hypotheses. Gains are priors scaled by
    what the diagnosis measured, and never exceed the distance to the roof (`headroom`).

`hypotheses(diag, ...)` asks every theory and returns the proposals ranked by expected gain.
Each theory below reads on its own: its precondition, its moves and its one-line reasoning.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..problem import Problem
from ..space import Config, Space
from .diagnose import (TRITON_DEFAULT_WARPS, Diagnosis, blocks_per_sm, grid_tiles, on_warpgroup_mma, padding_waste,
                       smem_reserved, tiled_dims, wave_stats)

Applies = Callable[[Diagnosis, Problem, Space, Config], bool]
Propose = Callable[[Diagnosis, Problem, Space, Config], "list[Config]"]
Gain = Callable[[Diagnosis, Problem, Space, Config, Config], float]


@dataclass(frozen=True)
class Theory:
    """One explanation of slowness: a precondition, role moves, and a predicted effect."""

    name: str
    reasoning: str  # one line: why the moves should help
    applies: Applies = field(repr=False)
    propose: Propose = field(repr=False)
    expected_gain: Gain = field(repr=False)
    # its moves are interactions (two roles at once, effects that cancel one by one): a model
    # that adds per-parameter effects cannot rank them, so the engine takes the prior alone
    interaction: bool = False


@dataclass(frozen=True)
class Hypothesis:
    """A test the engine may run: `to_config` should beat `from_config` by `expected_gain`."""

    theory: str
    from_config: dict[str, Any] = field(hash=False)
    to_config: dict[str, Any] = field(hash=False)
    expected_gain: float = 0.0
    reason: str = ""

    @property
    def changes(self) -> dict[str, tuple[Any, Any]]:
        """name -> (from, to) for every parameter the hypothesis moves."""
        return {k: (self.from_config.get(k), v) for k, v in self.to_config.items()
                if self.from_config.get(k) != v}


# ----------------------------------------------------------------------------- thresholds

PADDING_MIN = 0.10        # below 10% padding the masked lanes are not worth a tile change
PADDING_BUSY_FLOOR = 0.10  # masked lanes cost issue slots and registers even when memory binds
WAVE_EFF_MIN = 0.80       # a last wave under 80% full wastes more than a tile change risks
NEAR_ROOF = 0.75          # within 75% of the roof, deeper pipelines have little left to hide
GROUP_MIN_TILES = 4       # grouping needs several tile rows and columns to reorder
DEFAULT_HEADROOM = 1.0    # when no roofline is known, assume up to 2x can be gained
# Elements of the tile each thread should own: matmul accumulators below 16 leave warps waiting
# on one small MMA, above 64 crowd registers (128 is ptxas's spill edge with 255 registers);
# row and elementwise kernels want one or two 16-byte vectors per thread and not much more.
ELEMS_PER_THREAD = {"matmul": (16, 64), "quantized_matmul": (16, 64), "attention": (16, 64)}
ELEMS_PER_THREAD_OTHER = (4, 16)


# ----------------------------------------------------------------------------- role helpers

def step_roles(space: Space, config: Mapping[str, Any], steps: Mapping[str, int],
               adjust: Sequence[str] = ("warps",)) -> Config | None:
    """`config` with each role's parameter moved `steps[role]` positions; None when a role is
    absent or would step past its end. When the result breaks a constraint, the first of
    `adjust` roles' steps (+1, -1, +2, -2) that makes it valid is taken; None if none does."""
    cfg = dict(config)
    for role, delta in steps.items():
        p = space.by_role(role)
        if p is None or p.name not in cfg:
            return None
        v = p.step(cfg[p.name], delta)
        if v is None:
            return None
        cfg[p.name] = v
    if space.is_valid(cfg):
        return cfg
    for role in adjust:
        p = space.by_role(role)
        if p is None or role in steps or p.name not in cfg:
            continue
        for delta in (+1, -1, +2, -2):
            v = p.step(cfg[p.name], delta)
            if v is not None and space.is_valid({**cfg, p.name: v}):
                return {**cfg, p.name: v}
    return None


def set_role(space: Space, config: Mapping[str, Any], role: str, value: Any,
             adjust: Sequence[str] = ("warps",)) -> Config | None:
    """`config` with `role` set to `value` (which must be one of its values), repaired like
    `step_roles`; None when the role is absent or no repair is valid."""
    p = space.by_role(role)
    if p is None or not p.contains(value):
        return None
    return step_roles(space, {**config, p.name: value}, {}, [r for r in adjust if r != role])


def _keep(configs: Iterable[Config | None], space: Space, config: Mapping[str, Any]) -> list[Config]:
    """Valid, distinct configs other than `config`, in order."""
    out, seen = [], {space.key(config)}
    for c in configs:
        if c is not None and space.is_valid(c):
            k = space.key(c)
            if k not in seen:
                seen.add(k)
                out.append(c)
    return out


def headroom(diag: Diagnosis) -> float:
    """Most any change can gain: the distance to the roof that binds (1/f - 1, f the larger
    achieved fraction of peak)."""
    f = diag.roof_fraction
    return DEFAULT_HEADROOM if not f else max(0.0, 1.0 / min(f, 1.0) - 1.0)


def _capped(diag: Diagnosis, gain: float) -> float:
    return min(gain, headroom(diag))


def _grid_roles(problem: Problem, space: Space) -> list[str]:
    return [r for r, (_n, _d, red) in tiled_dims(problem, space).items() if not red]


def _useful(problem: Problem, space: Space, config: Mapping[str, Any]) -> float:
    return math.prod(1.0 - padding_waste(d, int(config[n])) for n, d, _r in tiled_dims(problem, space).values())


# ----------------------------------------------------------------------------- theories
# 1. Padding waste

def _padding_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    return any(w >= PADDING_MIN and sp.by_role(r) is not None for r, w in d.padding.items())


def _padding_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    out: list[Config | None] = []
    for role, (name, dim, _red) in tiled_dims(pb, sp).items():
        if d.padding.get(role, 0.0) < PADDING_MIN:
            continue
        p = sp[name]
        out.append(step_roles(sp, cfg, {role: -1}))
        # the tightest fit: the smallest tile that still covers the dim in one piece (the
        # smallest tile there is when the dim is smaller than every tile)
        fits = [v for v in p.values if isinstance(v, int) and v >= dim]
        if fits and min(fits) < cfg[name]:
            out.append(set_role(sp, cfg, role, min(fits)))
    return _keep(out, sp, cfg)


def _padding_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    # Serial model: the padded work keeps the units busy for a share `busy` of the time;
    # shrinking it by useful_old / useful_new saves that share of it.
    old, new = _useful(pb, sp, cfg), _useful(pb, sp, to)
    if new <= old:
        return 0.0
    busy = min(1.0, max(PADDING_BUSY_FLOOR, (d.frac_peak_flops or 0.0) / max(old, 1e-9)))
    saved = busy * (1.0 - old / new)
    return _capped(d, 1.0 / (1.0 - saved) - 1.0)


PADDING = Theory(
    "padding_waste",
    "Lanes past the end of a dim compute nothing: a tile closer to the dim recovers that work.",
    _padding_applies, _padding_propose, _padding_gain)


# 2. Under-filled GPU

def _underfilled_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    # a few idle SMs (128 programs on 132) cost less than the operand reuse smaller tiles lose
    return bool(d.underfilled) and bool(d.tiles) and bool(d.sms) and d.tiles < WAVE_EFF_MIN * d.sms


def _underfilled_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    out: list[Config | None] = []
    roles = _grid_roles(pb, sp)
    for role in roles:
        out.append(step_roles(sp, cfg, {role: -1}))
        out.append(step_roles(sp, cfg, {role: -2}))
    if len(roles) >= 2:
        out.append(step_roles(sp, cfg, {r: -1 for r in roles}))
    if sp.by_role("split:K") is not None:
        out.append(step_roles(sp, cfg, {"split:K": +1}))
        out.append(step_roles(sp, cfg, {"split:K": +2}))
    # only moves that really launch more programs
    return [c for c in _keep(out, sp, cfg) if (grid_tiles(pb, sp, c)[0] or 0) > (d.tiles or 0)]


def _underfilled_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    # Work runs in parallel over min(programs, resident slots); each doubling of that is counted
    # as half a doubling of speed, since smaller tiles or split-K lose some operand reuse (and
    # split-K adds a reduction).
    new = grid_tiles(pb, sp, to)[0]
    if not d.tiles or not d.sms or not new:
        return 0.0
    slots = d.sms * (d.blocks_per_sm or 1)
    return _capped(d, 0.5 * math.log2(min(new, slots) / min(d.tiles, slots)))


UNDERFILLED = Theory(
    "underfilled_gpu",
    "Fewer programs than SMs leave SMs idle: smaller tiles or split-K give every SM work.",
    _underfilled_applies, _underfilled_propose, _underfilled_gain)


# 3. Wave quantization

def _wave_eff(pb: Problem, sp: Space, d: Diagnosis, cfg: Config) -> float | None:
    tiles = grid_tiles(pb, sp, cfg)[0]
    if not tiles or not d.sms or not d.blocks_per_sm:
        return None
    # resident blocks per SM are kept as measured: a new config's static facts are unknown
    return wave_stats(tiles, d.sms * d.blocks_per_sm)[1]


def _waves_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    return (d.waves is not None and d.waves > 1.0 and d.wave_efficiency is not None
            and d.wave_efficiency < WAVE_EFF_MIN)


def _waves_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    roles = _grid_roles(pb, sp)
    out: list[Config | None] = []
    for role in roles:
        out += [step_roles(sp, cfg, {role: -1}), step_roles(sp, cfg, {role: +1})]
    for a in roles:  # trade one dim for another: same area, another tile count
        for b in roles:
            if a != b:
                out.append(step_roles(sp, cfg, {a: +1, b: -1}))
    base = d.wave_efficiency or 0.0
    return [c for c in _keep(out, sp, cfg) if (_wave_eff(pb, sp, d, c) or 0.0) > base + 0.05]


def _waves_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    # time ~ ceil(waves) x work per tile, so the pure quantization gain is the ratio of wave
    # efficiencies; half of it is counted because a tile change also moves reuse and occupancy.
    new = _wave_eff(pb, sp, d, to)
    if new is None or not d.wave_efficiency:
        return 0.0
    return _capped(d, 0.5 * (new / d.wave_efficiency - 1.0))


WAVES = Theory(
    "wave_quantization",
    "A part-empty last wave idles SMs to the end: a tile size whose count fills whole waves does not.",
    _waves_applies, _waves_propose, _waves_gain)


# 4. Memory-latency bound: deepen the pipeline

def _reduction_role(pb: Problem, sp: Space) -> str | None:
    """The tile role walking the reduced dim: tile:K of a matmul, tile:R of a row kernel."""
    return next((r for r, (_n, _d, red) in tiled_dims(pb, sp).items() if red), None)


def _latency_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    if sp.by_role("stages") is None and _reduction_role(pb, sp) is None:
        return False
    far_from_roof = d.bound == "latency" or (d.roof_fraction is not None and d.roof_fraction < NEAR_ROOF)
    # a pipeline deeper than the loop has nothing to overlap
    loop_long_enough = d.k_trips is None or d.stages is None or d.k_trips > d.stages
    return far_from_roof and loop_long_enough


def _latency_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    red = _reduction_role(pb, sp)
    out = [step_roles(sp, cfg, {"stages": +1}, adjust=()), step_roles(sp, cfg, {"stages": +2}, adjust=())]
    if red is not None:
        # a larger reduction tile may need more warps to hold it (row kernels)
        out += [step_roles(sp, cfg, {red: +1}), step_roles(sp, cfg, {"stages": +1, red: +1}, adjust=())]
    return _keep(out, sp, cfg)


def _latency_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    # Loads in flight ~ stages x reduction tile. Doubling them is worth up to half a doubling of
    # speed, scaled by how far the kernel is from NEAR_ROOF (near a roof little latency is exposed).
    red = _reduction_role(pb, sp)

    def in_flight(c: Config) -> float:
        s, k = sp.by_role("stages"), sp.by_role(red) if red else None
        return (c[s.name] if s else 1) * (c[k.name] if k else 1)

    ratio = in_flight(to) / in_flight(cfg)
    f = d.roof_fraction if d.roof_fraction is not None else 0.0
    exposed = max(0.0, (NEAR_ROOF - f) / NEAR_ROOF)
    return _capped(d, 0.5 * exposed * math.log2(ratio)) if ratio > 1.0 else 0.0


LATENCY = Theory(
    "memory_latency",
    "Far from the roof, loads wait on memory latency: more stages and a larger K (reduction) tile keep more in flight.",
    _latency_applies, _latency_propose, _latency_gain)


# 5. Compute-bound and under-tiled

def _tile_area(pb: Problem, sp: Space, cfg: Config) -> tuple[float, float]:
    """(output tile area, operand elements loaded per K step) over the grid tile roles."""
    sides = [int(cfg[tiled_dims(pb, sp)[r][0]]) for r in _grid_roles(pb, sp)]
    return float(math.prod(sides)), float(sum(sides))


def _undertiled_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    return d.bound == "compute" and not d.underfilled and len(_grid_roles(pb, sp)) >= 2 \
        and (d.frac_peak_flops or 0.0) < NEAR_ROOF + 0.1


def _undertiled_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    out: list[Config | None] = []
    roles = _grid_roles(pb, sp)
    for role in roles:
        out.append(step_roles(sp, cfg, {role: +1}))
        out.append(step_roles(sp, cfg, {role: +1, "warps": +1}, adjust=("stages",)))
    # a larger tile must still leave a program for every SM
    return [c for c in _keep(out, sp, cfg) if (grid_tiles(pb, sp, c)[0] or 0) >= (d.sms or 0)]


def _undertiled_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    # Arithmetic intensity of a tile ~ area / perimeter; half its growth is expected to show.
    a0, p0 = _tile_area(pb, sp, cfg)
    a1, p1 = _tile_area(pb, sp, to)
    growth = (a1 / p1) / (a0 / p0) - 1.0
    return _capped(d, 0.5 * min(1.0, headroom(d)) * max(0.0, growth))


UNDERTILED = Theory(
    "compute_undertiled",
    "Small tiles on a compute-bound kernel reload operands per tile: larger tiles (and warps) raise intensity.",
    _undertiled_applies, _undertiled_propose, _undertiled_gain)


# 6. Spills and low occupancy

def _pressure_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    low_occupancy = d.occupancy is not None and d.occupancy < 1 / 16  # < 1 warp per scheduler
    return bool(d.spills) or d.status == "resource_error" or d.blocks_per_sm == 0 or low_occupancy


def _pressure_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    out: list[Config | None] = [step_roles(sp, cfg, {"stages": -1}, adjust=())]
    for role in tiled_dims(pb, sp):
        out.append(step_roles(sp, cfg, {role: -1}))
    # spills: spread the tile over more threads; too few resident warps: smaller blocks pack better
    out.append(step_roles(sp, cfg, {"warps": +1 if d.spills else -1}, adjust=("stages",)))
    return _keep(out, sp, cfg)


def _pressure_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    if d.status == "resource_error" or d.blocks_per_sm == 0:
        return 1.0  # anything that runs beats a config that cannot launch
    if d.spills:
        return _capped(d, min(0.5, 0.1 + d.spills / 256))
    return _capped(d, 0.1)


PRESSURE = Theory(
    "spills_low_occupancy",
    "Spills go through local memory and one warp per scheduler hides no latency: lighter blocks fix both.",
    _pressure_applies, _pressure_propose, _pressure_gain)


# 7. A reduction that fits one block

def _row_role(pb: Problem, sp: Space) -> tuple[str, str, int] | None:
    """(role, param name, cols) of the tile walking a row, for row kernels."""
    for role, (name, dim, red) in tiled_dims(pb, sp).items():
        if red and role != "tile:K":
            return role, name, dim
    return None


def _row_target(pb: Problem, sp: Space) -> Any:
    """The smallest chunk that holds a whole row (smallest value >= cols); when none does, the
    largest chunk (fewest passes of the loop). None for kernels without a row tile."""
    rr = _row_role(pb, sp)
    if rr is None:
        return None
    values = [v for v in sp[rr[1]].values if isinstance(v, int)]
    fits = [v for v in values if v >= rr[2]]
    return min(fits) if fits else max(values, default=None)


def _onerow_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    rr = _row_role(pb, sp)
    if d.kernel_class != "row_reduction" or rr is None:
        return False
    target = _row_target(pb, sp)
    return target is not None and cfg[rr[1]] != target


def _onerow_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    rr = _row_role(pb, sp)
    target = _row_target(pb, sp)
    if rr is None or target is None:
        return []
    role, name, _cols = rr
    base = {**cfg, name: target}
    out: list[Config | None] = []
    warps = sp.by_role("warps")
    if warps is not None:
        # warps matched to the block: each thread owns the middle of the preferred range
        lo, hi = ELEMS_PER_THREAD_OTHER
        rows = sp.by_role("tile:X")
        per_block = target * (cfg[rows.name] if rows is not None else 1)
        warp_size = pb.hardware.warp_size if pb.hardware else 32
        ideal = per_block / (warp_size * math.sqrt(lo * hi))
        ranked = sorted(warps.values, key=lambda w: abs(math.log2(w / ideal)))
        out += [{**base, warps.name: w} for w in ranked[:2]]
    out.append(set_role(sp, cfg, role, target))
    return _keep(out, sp, cfg)


def _onerow_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    rr = _row_role(pb, sp)
    if rr is None:
        return 0.0
    _role, name, cols = rr
    if cfg[name] < cols <= to[name]:
        # chunked rows take a second pass over memory (read twice, write once: 3 passes vs 2);
        # half of the 1.5x a memory-bound kernel would gain is counted
        return _capped(d, 0.5 * (3 / 2 - 1.0))
    if cfg[name] < to[name]:
        # still chunked, in fewer chunks: each chunk pays a loop trip of loads, reductions and
        # rescaling; a tenth per halving of the trips
        return _capped(d, 0.1 * math.log2(math.ceil(cols / cfg[name]) / math.ceil(cols / to[name])))
    # oversized block: masked lanes hold registers and issue slots for nothing
    return _capped(d, 0.5 * (padding_waste(cols, cfg[name]) - padding_waste(cols, to[name])))


ONE_BLOCK_ROW = Theory(
    "row_fits_one_block",
    "A row that fits one block is read once and reduced in registers; chunking it reads it twice (or more, per chunk).",
    _onerow_applies, _onerow_propose, _onerow_gain)


# 8. L2 tile grouping

def _group_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    g = sp.by_role("group")
    if g is None or g.step(cfg[g.name], +1) is None:
        return False
    tm, tn = d.tiles_along.get("tile:M", 0), d.tiles_along.get("tile:N", 0)
    hw = pb.hardware
    spills_l2 = not (hw and hw.l2_bytes and pb.min_bytes) or pb.min_bytes > hw.l2_bytes
    return tm >= GROUP_MIN_TILES and tn >= GROUP_MIN_TILES and spills_l2


def _group_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    return _keep([step_roles(sp, cfg, {"group": +1}, adjust=())], sp, cfg)


def _group_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    # grouping saves DRAM traffic, which pays most where memory binds
    return _capped(d, 0.08 if d.bound == "memory" else 0.03)


L2_GROUPING = Theory(
    "l2_grouping",
    "With many tiles along M and N, programs launched together share operands in L2 only when grouped.",
    _group_applies, _group_propose, _group_gain)


# 9. Warps matched to the tile

def _warps_range(d: Diagnosis) -> tuple[int, int]:
    return ELEMS_PER_THREAD.get(d.kernel_class, ELEMS_PER_THREAD_OTHER)


def _warps_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    if sp.by_role("warps") is None or d.tile_elems_per_thread is None:
        return False
    lo, hi = _warps_range(d)
    return not lo <= d.tile_elems_per_thread <= hi


def _warps_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    lo, hi = _warps_range(d)
    e = d.tile_elems_per_thread or 0.0
    direction = +1 if e > hi else -1  # too many elements per thread: more warps
    return _keep([step_roles(sp, cfg, {"warps": direction}, adjust=("stages",)),
                  step_roles(sp, cfg, {"warps": 2 * direction}, adjust=("stages",))], sp, cfg)


def _warps_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    lo, hi = _warps_range(d)
    w = sp.by_role("warps")
    if w is None or d.tile_elems_per_thread is None:
        return 0.0
    e_new = d.tile_elems_per_thread * cfg[w.name] / to[w.name]

    def distance(e: float) -> float:  # octaves outside the preferred range
        return max(0.0, math.log2(lo / e), math.log2(e / hi))

    return _capped(d, 0.08 * (distance(d.tile_elems_per_thread) - distance(e_new)))


WARPS_MATCHED = Theory(
    "warps_matched",
    "A thread should own a fair share of the tile: extra warps idle on a tiny tile, too few serialise a big one.",
    _warps_applies, _warps_propose, _warps_gain)


# 10. A pipeline as deep as the loop it pipelines

def _shallow_loop_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    return (sp.by_role("stages") is not None and d.k_trips is not None and d.stages is not None
            and d.stages > 1 and d.stages >= d.k_trips)


def _shallow_loop_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    out = [step_roles(sp, cfg, {"stages": -1}, adjust=()), step_roles(sp, cfg, {"stages": -2}, adjust=())]
    red = _reduction_role(pb, sp)
    if red is not None:  # or lengthen the loop: a smaller reduction tile gives the stages work
        out.append(step_roles(sp, cfg, {red: -1}, adjust=()))
    return _keep(out, sp, cfg)


def _shallow_loop_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    # Stages beyond the loop's trips only fill shared memory (fewer blocks per SM) and lengthen
    # the prologue; the share of idle stages bounds what dropping them can win.
    idle = (d.stages - d.k_trips + 1) / d.stages  # type: ignore[operator]
    return _capped(d, 0.15 * idle)


SHALLOW_LOOP = Theory(
    "pipeline_deeper_than_loop",
    "Pipeline stages beyond the reduction loop's trip count only take shared memory and prologue time: fewer stages, or a smaller K tile so the stages have work.",
    _shallow_loop_applies, _shallow_loop_propose, _shallow_loop_gain)


# 11. Tile shape at equal area

SHAPE_GAIN = 0.03  # a prior: reshaping helps by a few percent when it helps at all


def _shape_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    return len(_grid_roles(pb, sp)) >= 2 and d.bound in ("compute", "memory") \
        and (d.roof_fraction or 0.0) < NEAR_ROOF


def _shape_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    roles = _grid_roles(pb, sp)
    out: list[Config | None] = []
    for a, b in itertools.permutations(roles, 2):
        out.append(step_roles(sp, cfg, {a: +1, b: -1}))
    area = _tile_area(pb, sp, cfg)[0]
    # same area (registers, shared memory per stage) and no fewer programs: only the shape moves
    return [c for c in _keep(out, sp, cfg) if _tile_area(pb, sp, c)[0] == area
            and (grid_tiles(pb, sp, c)[0] or 0) >= (d.tiles or 0)]


def _shape_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    return _capped(d, SHAPE_GAIN)


TILE_SHAPE = Theory(
    "tile_shape",
    "At equal tile area (registers, shared memory, programs), the shape sets operand reuse and the length of "
    "contiguous loads.",
    _shape_applies, _shape_propose, _shape_gain, interaction=True)


# 12. One more resident block

OCCUPANCY_GAIN = 0.25  # prior: most a second resident block can win when prologue and epilogue dominate
OCCUPANCY_MAX_BLOCKS = 2  # from three resident blocks on, one more hides little that is not hidden
OCCUPANCY_MIN_GAIN = 0.02  # a long loop hides its own prologue and epilogue: below 2%, not worth a test


def _mma_tiles(pb: Problem, sp: Space) -> tuple[str, str, str] | None:
    """Parameter names of the M, N and K tiles of a matmul-like space; None when one is missing."""
    dims = tiled_dims(pb, sp)
    names = [dims[r][0] if r in dims else None for r in ("tile:M", "tile:N", "tile:K")]
    return None if None in names else tuple(names)  # type: ignore[return-value]


def _fits_one_more(d: Diagnosis, pb: Problem, sp: Space, cfg: Config,
                   to: Config) -> bool:
    """Whether `to` fits blocks_per_sm + 1 blocks on an SM (`diagnose.blocks_per_sm`), its
    shared memory scaled from the measured config by operand tile area x stages and its
    registers by accumulator elements (operands are pipelined through shared memory; the fp32
    accumulator holds most registers)."""
    hw, tiles, st = pb.hardware, _mma_tiles(pb, sp), sp.by_role("stages")
    if hw is None or tiles is None or st is None or not d.smem_bytes or not d.stages or not d.blocks_per_sm:
        return False
    m, n, k = tiles
    per_stage = d.smem_bytes / d.stages * (to[m] * to[k] + to[k] * to[n]) / (cfg[m] * cfg[k] + cfg[k] * cfg[n])
    # registers are judged only where the space tunes warps (the per-warp allocation needs them)
    regs = d.registers * (to[m] * to[n]) / (cfg[m] * cfg[n]) if d.registers and d.warps else None
    fits, _limit = blocks_per_sm(hw, d.warps or TRITON_DEFAULT_WARPS, regs, per_stage * int(to[st.name]))
    return fits is not None and fits >= d.blocks_per_sm + 1


def _one_more_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    hw = pb.hardware
    if (hw is None or not hw.smem_per_sm or not d.smem_bytes or not d.stages or d.k_trips is None
            or not d.blocks_per_sm or d.blocks_per_sm > OCCUPANCY_MAX_BLOCKS
            or sp.by_role("stages") is None or _mma_tiles(pb, sp) is None):
        return False
    return (hw.smem_per_sm // (d.smem_bytes + smem_reserved(hw)) == d.blocks_per_sm  # shared memory binds
            and OCCUPANCY_GAIN * _exposed(d) >= OCCUPANCY_MIN_GAIN)


def _one_more_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    st = sp.by_role("stages")
    assert st is not None
    deepest_first = sorted((v for v in st.values if v <= cfg[st.name]), reverse=True)
    out: list[Config | None] = []
    # the same tiles with a shallower pipeline, or one tile a step smaller with the deepest
    # pipeline that still fits: the first of each that leaves room for one more block
    bases: list[Config | None] = [dict(cfg)] + [step_roles(sp, cfg, {r: -1}, adjust=())
                                                for r in ("tile:M", "tile:N", "tile:K")]
    for base in bases:
        if base is None:
            continue
        for s in deepest_first:
            c = {**base, st.name: s}
            if c != cfg and _fits_one_more(d, pb, sp, cfg, c):
                # a pipeline cut too shallow loses more loads in flight than the block adds
                if _one_more_gain(d, pb, sp, cfg, c) >= OCCUPANCY_MIN_GAIN:
                    out.append(c)
                break
    return _keep(out, sp, cfg)


def _exposed(d: Diagnosis) -> float:
    # A block alone on its SM leaves the tensor cores idle while it fills its pipeline and
    # writes its tile; a second block's main loop runs in those gaps. Their share of the
    # block's time is about stages / (loop trips + stages); a third block adds less.
    return d.stages / (d.k_trips + d.stages) / d.blocks_per_sm  # type: ignore[operator]


def _one_more_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    # Loads in flight per SM should not fall: blocks x (stages - 1) before against after.
    st = sp.by_role("stages")
    n, s, s_to = d.blocks_per_sm, d.stages, int(to[st.name]) if st is not None else d.stages
    kept = 1.0 if s <= 1 else min(1.0, (n + 1) * (s_to - 1) / (n * (s - 1)))  # type: ignore[operator]
    return _capped(d, OCCUPANCY_GAIN * _exposed(d) * kept)


ONE_MORE_BLOCK = Theory(
    "one_more_block",
    "With shared memory for one block per SM, nothing overlaps a block's pipeline fill and tile store: fewer stages or a smaller tile let a second block in.",
    _one_more_applies, _one_more_propose, _one_more_gain, interaction=True)


LIBRARY: tuple[Theory, ...] = (PADDING, UNDERFILLED, WAVES, LATENCY, UNDERTILED, PRESSURE,
                               ONE_BLOCK_ROW, L2_GROUPING, WARPS_MATCHED, SHALLOW_LOOP, TILE_SHAPE,
                               ONE_MORE_BLOCK)
BY_NAME: dict[str, Theory] = {t.name: t for t in LIBRARY}


# ----------------------------------------------------------------------------- hypotheses

def _describe(space: Space, cfg: Mapping[str, Any], to: Mapping[str, Any]) -> str:
    parts = []
    for p in space.params:
        if cfg.get(p.name) != to.get(p.name):
            parts.append(f"{p.name}{'(' + p.role + ')' if p.role else ''} {cfg.get(p.name)}->{to.get(p.name)}")
    return ", ".join(parts)


def hypotheses(diag: Diagnosis, problem: Problem, space: Space, config: Mapping[str, Any],
               library: Sequence[Theory] = LIBRARY) -> list[Hypothesis]:
    """Every live theory's proposals, best expected gain first; a config proposed by several
    theories appears once, under the theory that expects the most of it (library order on ties)."""
    cfg = dict(config)
    best: dict[tuple, Hypothesis] = {}
    order: list[tuple] = []
    keeps_wgmma = on_warpgroup_mma(problem, space, cfg)
    for th in library:
        if not th.applies(diag, problem, space, cfg):
            continue
        for to in th.propose(diag, problem, space, cfg):
            # a move off the warpgroup MMA trades the tensor cores' fast path for what the
            # theory expects: the older path costs more than any of them predicts
            if keeps_wgmma and on_warpgroup_mma(problem, space, to) is False:
                continue
            k = space.key(to)
            gain = float(th.expected_gain(diag, problem, space, cfg, to))
            h = Hypothesis(th.name, cfg, dict(to), gain,
                           f"{th.name}: {_describe(space, cfg, to)}. {th.reasoning}")
            if k not in best:
                order.append(k)
                best[k] = h
            elif gain > best[k].expected_gain:
                best[k] = h
    rank = {k: i for i, k in enumerate(order)}
    return sorted(best.values(), key=lambda h: (-h.expected_gain, rank[space.key(h.to_config)]))
