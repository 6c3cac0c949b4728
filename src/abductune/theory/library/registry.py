"""The library: every theory in the order that breaks ties, and `hypotheses`, which asks them all."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...problem import Problem
from ...space import Space
from ..diagnose import Diagnosis, on_warpgroup_mma
from .base import Hypothesis, Theory
from .memory import L2_GROUPING, ONE_BLOCK_ROW
from .occupancy import ONE_MORE_BLOCK, PRESSURE, WARPS_MATCHED
from .parallelism import UNDERFILLED, WAVES
from .pipeline import LATENCY, SHALLOW_LOOP
from .tiles import PADDING, TILE_SHAPE, UNDERTILED

# The order breaks ties: a config two theories propose with the same expected gain stays under
# the earlier one, and equal gains rank in this order (`hypotheses`).
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
