"""Theories of tile size against the problem: lanes past the dims (padding), operand reuse, shape at equal area."""
from __future__ import annotations

import itertools
import math
from typing import Any, Mapping

from ...problem import Problem
from ...space import Config, Space
from ..diagnose import Diagnosis, grid_tiles, problem_bound, tile_padding, tiled_dims
from .base import (NEAR_ROOF, PADDING_BUSY_FLOOR, PADDING_MIN, Theory, _capped, _grid_roles, _keep, headroom, set_role,
                   step_roles)


def _useful(problem: Problem, space: Space, config: Mapping[str, Any]) -> float:
    return math.prod(1.0 - w for w in tile_padding(problem, space, config).values())


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


# 5. Compute-bound and under-tiled

def _tile_area(pb: Problem, sp: Space, cfg: Config) -> tuple[float, float]:
    """(output tile area, operand elements loaded per K step) over the grid tile roles."""
    sides = [int(cfg[tiled_dims(pb, sp)[r][0]]) for r in _grid_roles(pb, sp)]
    return float(math.prod(sides)), float(sum(sides))


def _undertiled_applies(d: Diagnosis, pb: Problem, sp: Space, cfg: Config) -> bool:
    # far from both roofs on a compute-bound problem ("latency") is short of the compute roof
    # too: small tiles are one reason (a Helion attention kernel at 24% of the tensor peak with
    # a 32-wide key tile, session 24, where only pipeline and grouping theories applied)
    compute = d.bound == "compute" or (d.bound == "latency" and problem_bound(pb) == "compute")
    return compute and not d.underfilled and len(_grid_roles(pb, sp)) >= 2 \
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
