"""Theories of per-SM resources: registers (spills, tile elements per thread), shared memory and resident blocks."""
from __future__ import annotations

import math

from ...problem import Problem
from ...space import Config, Space
from ..diagnose import TRITON_DEFAULT_WARPS, Diagnosis, blocks_per_sm, smem_reserved, tiled_dims
from ..resources import footprint
from .base import ELEMS_PER_THREAD, ELEMS_PER_THREAD_OTHER, Theory, _capped, _keep, step_roles


# 6. Spills and low occupancy

def _low_occupancy(d: Diagnosis) -> bool:
    return d.occupancy is not None and d.occupancy < 1 / 16  # < 1 warp per scheduler


def _pressure_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    return bool(d.spills) or d.status == "resource_error" or d.blocks_per_sm == 0 or _low_occupancy(d)


def _spills_only(d: Diagnosis) -> bool:
    """Whether registers are the config's only trouble: it spills, launched, and keeps at least
    one warp per scheduler resident."""
    return bool(d.spills) and d.status != "resource_error" and d.blocks_per_sm != 0 and not _low_occupancy(d)


def _pressure_propose(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> list[Config]:
    # a shallower pipeline frees shared memory (a launch, a resident block), not registers:
    # the stages' buffers live in shared memory, so it is no move against spills alone
    out: list[Config | None] = [] if _spills_only(d) else [step_roles(sp, cfg, {"stages": -1}, adjust=())]
    for role in tiled_dims(pb, sp):
        out.append(step_roles(sp, cfg, {role: -1}))
    # spills: spread the tile over more threads; too few resident warps: smaller blocks pack better
    out.append(step_roles(sp, cfg, {"warps": +1 if d.spills else -1}, adjust=("stages",)))
    return _keep(out, sp, cfg)


def _register_cut(pb: Problem, sp: Space, cfg: Config, to: Config) -> float | None:
    """The share of `cfg`'s live registers per thread (`resources.Footprint.held_regs`) that the
    move to `to` removes, in [0, 1]; None where the resource model does not say."""
    a, b = footprint(pb, sp, cfg).held_regs, footprint(pb, sp, to).held_regs
    if a is None or b is None or a <= 0:
        return None
    return max(0.0, min(1.0, 1.0 - b / a))


def _pressure_gain(d: Diagnosis, pb: Problem, sp: Space, cfg: Config, to: Config) -> float:
    if d.status == "resource_error" or d.blocks_per_sm == 0:
        return 1.0  # anything that runs beats a config that cannot launch
    if d.spills:
        full = min(0.5, 0.1 + d.spills / 256)
        # what spills is what the registers cannot hold: a move relieves the spill by the share
        # of the live registers it frees. Twice the warps halve every per-thread term, as far
        # as a move of one step can go: that share (one half) earns the whole gain, and a move
        # that frees none (the split of K, the group size) earns none on this account
        cut = _register_cut(pb, sp, cfg, to)
        g = full if cut is None else full * min(1.0, 2.0 * cut)
        return _capped(d, max(g, 0.1) if _low_occupancy(d) else g)
    return _capped(d, 0.1)


PRESSURE = Theory(
    "spills_low_occupancy",
    "Spills go through local memory and one warp per scheduler hides no latency: lighter blocks fix both.",
    _pressure_applies, _pressure_propose, _pressure_gain)


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
