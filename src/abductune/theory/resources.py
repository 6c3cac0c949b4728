"""The resource model: what a config costs in shared memory and registers, read from its
roles and the problem's dtypes and held against the hardware's limits. No compile, no GPU.

It answers two questions before a measurement is spent:

- **Can it launch?** (`infeasible`) A tiled matmul's software pipeline keeps `stages` copies
  of its A tile (tile:M x tile:K) and B tile (tile:K x tile:N) in shared memory, in the
  inputs' element sizes (an int4 operand packs two per byte); more than the hardware's
  per-block shared memory fails at launch, whatever the kernel's names. This is the idea of
  Triton's `early_config_prune` for its matmuls, stated over roles so it holds for any kernel
  whose parameters carry them. Too many threads (warps x warp size over the per-block
  maximum) cannot launch either.
- **Will it spill badly?** (`spills`) The fp32 accumulator of an M x N output tile is spread
  over the program's threads; past `ACC_MAX` values per thread, a thread's 255 registers
  cannot hold it beside addresses and operands, and ptxas spills most of it to local memory:
  the config runs, slowly. Predictions and seeds avoid it; the search may still measure it.
  At exactly `ACC_MAX` ptxas spills a little, and on Hopper those configs (a 128 x 256 tile
  on 8 warps) are often the fastest: they are not avoided.

Kernels whose tile roles do not say what is buffered (row kernels, attention, anything the
classifier cannot read) get no shared-memory claim: the model says nothing rather than guess,
and the compile check (`theory.check`) or the measurement decides.

The figures were read off the built-in matmul's recorded H100 data only (never the zoo): Triton
3.6 allocated stages - 1 or stages copies of the per-stage tiles (the estimate keeps the larger,
so it never calls a launchable config impossible by undercounting), and recorded configs with
128 accumulator values per thread spilled up to 1.2 KB yet were often the fastest (the built-in
space allows no more than 128, so past it there is no data: the bound is the register file's).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from ..costs import operand_bytes
from ..problem import Problem
from ..space import Config, Space

# Triton's num_stages default, for a space that does not tune stages
DEFAULT_STAGES = 3
# fp32 accumulator values per thread past which most of the accumulator spills (module docstring)
ACC_MAX = 128
# pipeline depth `fit` keeps while it can shrink the K tile instead
STAGES_KEPT = 3


@dataclass(frozen=True)
class Footprint:
    """What one program of a config holds. None where the model cannot tell."""

    smem_bytes: int | None  # pipeline buffers in shared memory
    acc_per_thread: float | None  # fp32 accumulator values per thread
    threads: int | None


def _value(space: Space, config: Mapping[str, Any], role: str) -> int | None:
    p = space.by_role(role)
    if p is None or p.name not in config:
        return None
    v = config[p.name]
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def footprint(problem: Problem, space: Space, config: Mapping[str, Any]) -> Footprint:
    bm, bn, bk = (_value(space, config, r) for r in ("tile:M", "tile:N", "tile:K"))
    warps = _value(space, config, "warps")
    hw = problem.hardware
    warp = hw.warp_size if hw is not None and hw.warp_size else 32
    threads = warps * warp if warps else None
    smem = acc = None
    if bm and bn and bk:  # a tiled product: A and B tiles stream through the pipeline
        stages = _value(space, config, "stages") or DEFAULT_STAGES
        sa, sb, _ = operand_bytes(problem.dtypes)  # A and B, the first two inputs
        smem = int(math.ceil(max(stages, 1) * (bm * bk * sa + bk * bn * sb)))
        if threads:
            acc = bm * bn / threads
    return Footprint(smem, acc, threads)


def infeasible(problem: Problem, space: Space, config: Mapping[str, Any]) -> str | None:
    """Why `config` cannot launch on the problem's hardware, or None when the model sees no
    reason (which is not a promise that it can)."""
    hw = problem.hardware
    if hw is None:
        return None
    fp = footprint(problem, space, config)
    limit = hw.smem_per_block
    if fp.smem_bytes is not None and limit and fp.smem_bytes > limit:
        return (f"needs about {fp.smem_bytes // 1024} KB of shared memory for its pipeline, over the "
                f"{limit // 1024} KB a block can have on {hw.name}")
    if fp.threads is not None and fp.threads > 1024:
        return f"{fp.threads} threads per program, over the 1024 a block can have"
    return None


def spills(problem: Problem, space: Space, config: Mapping[str, Any]) -> str | None:
    """Why `config` will spill registers, or None."""
    fp = footprint(problem, space, config)
    if fp.acc_per_thread is not None and fp.acc_per_thread > ACC_MAX:
        return (f"{fp.acc_per_thread:g} accumulator values per thread (past {ACC_MAX}, registers spill to "
                "local memory)")
    return None


def trouble(problem: Problem, space: Space, config: Mapping[str, Any]) -> str | None:
    """`infeasible` or `spills`: why a prediction or seed should not be this config."""
    return infeasible(problem, space, config) or spills(problem, space, config)


def fit(problem: Problem, space: Space, config: Mapping[str, Any]) -> tuple[Config | None, list[str]]:
    """`config` moved the least way into what the model accepts: fewer pipeline stages first
    (down to `STAGES_KEPT`), then a smaller K tile, then fewer stages still, then more warps
    (for the accumulator), then smaller M/N tiles, the larger first. Returns (config or None when nothing fits, what changed)."""
    cfg = dict(config)
    changes: list[str] = []
    if trouble(problem, space, cfg) is None:
        return cfg, changes
    # (role, direction, lowest value this pass may reach): a pipeline keeps three stages
    # before the K tile shrinks (two leave the loads exposed), then gives them up too
    order = [("stages", -1, STAGES_KEPT), ("tile:K", -1, 0), ("stages", -1, 0), ("warps", +1, 0),
             ("tile:N", -1, 0), ("tile:M", -1, 0)]
    for _ in range(24):
        if trouble(problem, space, cfg) is None:
            return cfg, changes
        moved = False
        for role, direction, floor in order:
            p = space.by_role(role)
            if p is None or p.name not in cfg:
                continue
            if direction < 0 and floor and cfg[p.name] <= floor:
                continue
            if role in ("tile:N", "tile:M"):
                other = space.by_role("tile:M" if role == "tile:N" else "tile:N")
                if other is not None and other.name in cfg and cfg[other.name] > cfg[p.name]:
                    continue  # shrink the larger of the two output tiles first
            nxt = p.step(cfg[p.name], direction)
            if nxt is None:
                continue
            if role == "warps" and infeasible(problem, space, {**cfg, p.name: nxt}):
                continue
            if role in ("stages", "tile:K") and infeasible(problem, space, cfg) is None \
                    and spills(problem, space, cfg) is not None:
                continue  # stages and the K tile do not touch the accumulator
            cand = {**cfg, p.name: nxt}
            if not space.is_valid(cand):
                try:
                    cand = space.nearest_valid(cand, prefer={p.name: nxt})
                except Exception:  # noqa: BLE001 - no valid neighbour: try the next role
                    continue
                if cand[p.name] != nxt:
                    continue
            changes.append(f"{p.name} {cfg[p.name]} -> {nxt}")
            cfg = cand
            moved = True
            break
        if not moved:
            break
    return (cfg, changes) if trouble(problem, space, cfg) is None else (None, changes)
