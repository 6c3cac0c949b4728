"""Theories of work for every SM: fewer programs than SMs (an under-filled GPU) and a part-empty last wave."""
from __future__ import annotations

import math

from ...problem import Problem
from ...space import Config, Space
from ..diagnose import Diagnosis, grid_tiles, wave_stats
from .base import WAVE_EFF_MIN, Theory, _capped, _grid_roles, _keep, step_roles


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
