"""Theories of the software pipeline along the reduction loop: loads in flight, and stages beyond the loop."""
from __future__ import annotations

import math

from ...problem import Problem
from ...space import Config, Space
from ..diagnose import Diagnosis, tiled_dims
from .base import NEAR_ROOF, Theory, _capped, _keep, step_roles


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
