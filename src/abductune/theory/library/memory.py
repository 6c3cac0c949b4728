"""Theories of memory traffic: a row read once when it fits one block, operands shared in L2 by grouped tiles."""
from __future__ import annotations

import math
from typing import Any

from ...problem import Problem
from ...space import Config, Space
from ..diagnose import Diagnosis, padding_waste, tiled_dims
from .base import ELEMS_PER_THREAD_OTHER, GROUP_MIN_TILES, Theory, _capped, _keep, set_role, step_roles


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
    # the rows a program owns: every other (non-reduction) tile of the block
    others = [n for r, (n, _d, red) in tiled_dims(pb, sp).items() if not red and r != role]
    out: list[Config | None] = []
    warps = sp.by_role("warps")
    if warps is not None:
        # warps matched to the block: each thread owns the middle of the preferred range
        lo, hi = ELEMS_PER_THREAD_OTHER
        per_block = target * math.prod(cfg[n] for n in others)
        warp_size = pb.hardware.warp_size if pb.hardware else 32
        ideal = per_block / (warp_size * math.sqrt(lo * hi))
        ranked = sorted(warps.values, key=lambda w: abs(math.log2(w / ideal)))
        out += [{**base, warps.name: w} for w in ranked[:2]]
    out.append(set_role(sp, cfg, role, target))
    if not _keep(out, sp, cfg):
        # a whole row does not fit beside the rows this block owns: own fewer rows (a block
        # holds what its threads can; the row in one pass is what this theory is about)
        out = [_fewer_rows(sp, c, others) for c in out if c is not None]
    return _keep(out, sp, cfg)


def _fewer_rows(sp: Space, cfg: Config, others: list[str]) -> Config | None:
    """`cfg` with the other tiles stepped down, one step at a time in turn, until it is valid."""
    c = dict(cfg)
    for _ in range(16):
        if sp.is_valid(c):
            return c
        moved = False
        for n in others:
            v = sp[n].step(c[n], -1)
            if v is not None:
                c[n] = v
                moved = True
        if not moved:
            return None
    return c if sp.is_valid(c) else None


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
