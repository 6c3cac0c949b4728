"""Whether a ranked answer leaves most of the GPU idle: the first config that fills the SMs, put first."""
from __future__ import annotations

import logging
from typing import Sequence

from ..problem import Problem
from ..space import Config, Space
from ..theory.diagnose import grid_tiles

# a ranked answer launching fewer programs than this share of the SMs leaves most of the GPU
# idle (`filling_first`): half, the point past which more SMs sit idle than work
UNDERFILL = 0.5
# what a kernel launch costs on the GPU whatever its work: the zoo's smallest kernel (RoPE at one
# token, 0.01 us of bytes at the H100's bandwidth) runs in 5.3 us at its best. Below this much
# roofline time, the SMs a grid leaves idle are not what sets the time
LAUNCH_FLOOR_S = 5e-6

log = logging.getLogger("abductune.fill")


def filling_first(problem: Problem, space: Space, configs: Sequence[Config]) -> tuple[list[Config], tuple[str, ...]]:
    """`configs` (best first) with the first one that launches a program for every SM put
    first, where the first launches too few for half of them (`UNDERFILL`) and the grid is
    known: a program runs on one SM, so such a grid leaves more than half the GPU idle however
    fast each program is. The ranker scores fill among its features and still put such configs
    first (FlagGems' antialiased bicubic at 224 x 224: 56 programs on 132 SMs, 4.0x the
    optimum, which launches 224). Where no ranked config fills the GPU (the problem has too
    little work, or the grid is not known), or the problem's roofline time is under what a
    launch costs (`LAUNCH_FLOOR_S`, or unknown), the order stands: there the launch, not the
    SMs, sets the time (RoPE at 64 tokens: 0.4 us of bytes, 6 us at its optimum, which launches
    64 programs)."""
    sms = problem.hardware.sms if problem.hardware is not None else None
    if not configs or not sms or max(problem.roofline_seconds()) < LAUNCH_FLOOR_S:
        return list(configs), ()  # with less work than a launch costs, idle SMs cost nothing
    first = grid_tiles(problem, space, configs[0])[0]
    if first is None or first >= UNDERFILL * sms:
        return list(configs), ()
    grids = ((i, c, grid_tiles(problem, space, c)[0] or 0) for i, c in enumerate(configs))
    got = next(((i, c, n) for i, c, n in grids if n >= sms), None)
    if got is None:
        return list(configs), ()
    i, fill, n = got
    return [fill, *(c for c in configs if c is not fill)], (
        f"the ranker's first pick launches {first} programs on {sms} SMs; served its first that fills the GPU "
        f"({n} programs, rank {i + 1})",)


def filling_first_or_order(problem: Problem, space: Space,
                           configs: Sequence[Config]) -> tuple[list[Config], tuple[str, ...]]:
    """`filling_first`, or where the grid cannot be read for this problem (a diagnosis bug, a
    space whose tiles do not map to the problem's dims), `configs` in their order: the check
    only reorders a ranked answer, so its failure must not lose the answer (`predict` and the
    search's prior both keep the ranker's order then)."""
    try:
        return filling_first(problem, space, configs)
    except Exception as e:  # noqa: BLE001 - a guard that cannot read the grid leaves the order
        log.warning("grid check of %s's ranked answer failed: %s: %s", problem.kernel, type(e).__name__, e)
        return list(configs), ()
