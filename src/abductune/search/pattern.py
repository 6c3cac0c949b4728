"""Pattern search: coordinate moves plus pairwise tile moves, with a shrinking step.

Each poll measures, around the incumbent, every single-parameter move of `step` index units
(both directions) and every pairwise move of two tile parameters (both up, both down, one up
and one down: trading BLOCK_M for BLOCK_N is the move single-axis descent cannot make). The
best improving poll point becomes the incumbent and the step goes back up to `max_step`
(expand); a poll without improvement halves the step (shrink). A failed poll at step 1 is a
local optimum over these moves, and the search ends -- or, with `restarts=True` (what a fair
replay comparison uses), starts again from the next seed, then from random unmeasured configs,
until the budget ends or every config is measured.
"""
from __future__ import annotations

import itertools
from typing import Any

from ..space import Config, Space
from . import options as opt
from .base import Proposals, SearchContext, Strategy, measure
from .coordesc import improves, restart_point


def poll_points(space: Space, best: Config, step: int) -> list[Config]:
    """Valid configs one pattern move away: single moves of ±step, and pairwise tile moves."""
    out: list[Config] = []
    seen = {space.key(best)}

    def add(c: Config) -> None:
        k = space.key(c)
        if k not in seen and space.satisfies(c):
            seen.add(k)
            out.append(c)

    for p in space.params:
        vals = [p.step(best[p.name], s) for s in (step, -step)] if p.ordered else p.moves(best[p.name])
        for v in vals:
            if v is not None:
                add({**best, p.name: v})
    tiles = [p for p in space.params if p.ordered and (p.role or "").startswith("tile:")]
    for a, b in itertools.combinations(tiles, 2):
        for sa, sb in itertools.product((step, -step), repeat=2):
            va, vb = a.step(best[a.name], sa), b.step(best[b.name], sb)
            if va is not None and vb is not None:
                add({**best, a.name: va, b.name: vb})
    return out


class PatternSearch(Strategy):
    """Options: max_step=2 (index units; the step shrinks by halves to 1), threshold=0.001,
    restarts=False (poll again from the other seeds, then from random configs)."""

    name = "pattern"

    def __init__(self, seed: int = 0, max_step: int = 2, threshold: float = 0.001, restarts: bool = False,
                 **options: Any):
        super().__init__(seed, **options)
        self.max_step = opt.integer(self.name, "max_step", max_step, 1)
        self.threshold = opt.number(self.name, "threshold", threshold, 0, 1, hi_open=True)
        self.restarts = opt.boolean(self.name, "restarts", restarts)

    def propose(self, ctx: SearchContext) -> Proposals:
        start: Config | None = dict(ctx.best.config) if ctx.best is not None else ctx.space.default()
        used: set[tuple] = set()
        while start is not None:
            used.add(ctx.space.key(start))
            yield from self._poll_from(ctx, start)
            if not self.restarts:
                return
            start = restart_point(ctx, used)

    def _poll_from(self, ctx: SearchContext, best: Config) -> Proposals:
        [m] = yield [best]
        best_t, step = m.objective, self.max_step
        while True:
            cands = poll_points(ctx.space, best, step)
            ms = yield from measure(ctx, cands)
            # complete poll: move to the best point, if it improves enough on the incumbent
            i = min(range(len(ms)), key=lambda j: ms[j].objective, default=None)
            if i is not None and improves(ms[i].objective, best_t, self.threshold):
                best, best_t, step = cands[i], ms[i].objective, self.max_step
            elif step > 1:
                step //= 2
            else:
                return
