"""Coordinate descent with PyTorch Inductor's semantics (runtime/coordinate_descent_tuner.py).

For each field in order, try one step up and one step down (pow2 params double/halve, int
ranges and stages move by 1), accepting a candidate only when it beats the incumbent by more
than a relative threshold (new < best * (1 - threshold)). Like Inductor, both directions are
tried from the field's current value and accepted in order (up first); unlike Inductor, an
accepted direction is followed further right away instead of on the next sweep. Sweeps repeat
until no field improves; then, optionally, every neighbour within `radius` is checked and any
improvement restarts the descent (Inductor's coordinate_descent_check_all_directions).

With `restarts=True` (what a fair replay comparison uses), a converged descent starts again
from the next seed it has not descended from, then from random unmeasured configs, so the
whole budget is spent instead of stopping after a few dozen evaluations; it ends only when
every allowed config has been measured.
"""
from __future__ import annotations

import math
from collections.abc import Generator, Mapping
from typing import Any, Callable, Sequence

from ..errors import AbductuneError
from ..measurement import Measurement
from ..space import Config, Space
from . import options as opt
from .base import Proposals, SearchContext, Strategy, measure


def improves(new: float, best: float, threshold: float) -> bool:
    """Inductor's has_improvement: better by more than `threshold` (relative). Anything finite
    improves on a failed (infinite) incumbent."""
    return math.isfinite(new) and (not math.isfinite(best) or new < best * (1 - threshold))


def default_field_order(space: Space) -> list[str]:
    """Inductor's order by role: tiles, then warps, then stages, then the rest (space order)."""
    def rank(role: str | None) -> int:
        if role and role.startswith("tile"):
            return 0
        return {"warps": 1, "stages": 2}.get(role or "", 3)
    return sorted(space.names, key=lambda n: rank(space[n].role))  # stable: keeps space order


class CoordinateDescent(Strategy):
    """Options: threshold=0.001, field_order=None (tiles, warps, stages, rest), field_limits=None
    ({name: max value}), check_all_directions=False, radius=2, restarts=False (descend again
    from the other seeds, then from random configs, until the budget ends)."""

    name = "coordesc"

    def __init__(self, seed: int = 0, threshold: float = 0.001, field_order: Sequence[str] | None = None,
                 field_limits: Mapping[str, Any] | None = None, check_all_directions: bool = False,
                 radius: int = 2, restarts: bool = False, **options: Any):
        super().__init__(seed, **options)
        self.threshold = opt.number(self.name, "threshold", threshold, 0, 1, hi_open=True)
        self.field_order = opt.names(self.name, "field_order", field_order)
        self.field_limits = opt.numeric_map(self.name, "field_limits", field_limits)
        self.check_all_directions = opt.boolean(self.name, "check_all_directions", check_all_directions)
        self.radius = opt.integer(self.name, "radius", radius, 1)
        self.restarts = opt.boolean(self.name, "restarts", restarts)

    # -- setup against a concrete space
    def _fields(self, space: Space) -> list[str]:
        for n in [*(self.field_order or []), *self.field_limits]:
            if n not in space.names:
                raise AbductuneError(f"{self.name}: unknown parameter {n!r} in field_order/field_limits "
                                     f"(parameters: {', '.join(space.names)})")
        for n in self.field_limits:
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in space[n].values):
                raise AbductuneError(f"{self.name}: field_limits[{n!r}] needs a numeric parameter, but "
                                     f"{n} takes {list(space[n].values)}")
        return self.field_order or default_field_order(space)

    def _allowed(self, space: Space) -> Callable[[Config], bool]:
        limits = self.field_limits
        return lambda c: all(c[n] <= lim for n, lim in limits.items()) and space.satisfies(c)

    def _start(self, ctx: SearchContext, allowed: Callable[[Config], bool]) -> Config:
        """The best seed, else the space default (moved inside field_limits if needed)."""
        if ctx.best is not None:
            return dict(ctx.best.config)
        d = ctx.space.default()
        if allowed(d):
            return d
        inside = [c for c in ctx.space.valid_configs() if allowed(c)]
        if not inside:
            raise AbductuneError(f"{self.name}: field_limits {self.field_limits} exclude every valid config")
        return dict(min(inside, key=lambda c: ctx.space.distance(c, d)))

    # -- the descent
    def _tune_field(self, ctx: SearchContext, name: str, best: Config, best_t: float,
                    allowed: Callable[[Config], bool]):
        """One field: both directions, then follow the accepted one. Returns (best, t, moved)."""
        p = ctx.space[name]
        deltas: list[int | None] = [+1, -1] if p.ordered else [None] * (len(p.values) - 1)
        values = [p.step(best[name], d) for d in deltas[:2]] if p.ordered else p.moves(best[name])
        cands = [(d, {**best, name: v}) for d, v in zip(deltas, values) if v is not None]
        cands = [(d, c) for d, c in cands if allowed(c)]
        if not cands:
            return best, best_t, False
        ms = yield [c for _, c in cands]
        moved, direction = False, None
        for (d, c), m in zip(cands, ms):  # sequential acceptance, as in Inductor
            if improves(m.objective, best_t, self.threshold):
                best, best_t, moved, direction = c, m.objective, True, d
        while direction is not None:  # keep going the way that paid off
            v = p.step(best[name], direction)
            c = {**best, name: v}
            if v is None or not allowed(c):
                break
            [m] = yield [c]
            if not improves(m.objective, best_t, self.threshold):
                break
            best, best_t = c, m.objective
        return best, best_t, moved

    def propose(self, ctx: SearchContext) -> Proposals:
        space = ctx.space
        fields = self._fields(space)
        allowed = self._allowed(space)
        start: Config | None = self._start(ctx, allowed)
        assert start is not None
        # restarts keep the fields this descent does not tune where the first start had them
        first = dict(start)
        frozen = [n for n in space.names if n not in fields]
        may_restart = lambda c: allowed(c) and all(c[n] == first[n] for n in frozen)  # noqa: E731
        used: set[tuple] = set()
        while start is not None:
            used.add(space.key(start))
            yield from self._descend(ctx, start, fields, allowed)
            if not self.restarts:
                return
            start = restart_point(ctx, used, may_restart)

    def _descend(self, ctx: SearchContext, best: Config, fields: list[str],
                 allowed: Callable[[Config], bool]) -> Generator[list[Config], list[Measurement], Config]:
        space = ctx.space
        [m] = yield [best]  # free when it is a seed
        best_t = m.objective
        frozen = [n for n in space.names if n not in fields]
        while True:
            improved = True
            while improved:
                improved = False
                for name in fields:
                    best, best_t, moved = yield from self._tune_field(ctx, name, best, best_t, allowed)
                    improved |= moved
            if not self.check_all_directions:
                return best
            cands = [c for c in space.neighbours(best, self.radius)
                     if allowed(c) and all(c[n] == best[n] for n in frozen)]
            ms = yield from measure(ctx, cands)
            moved = False
            for c, m in zip(cands, ms):
                if improves(m.objective, best_t, self.threshold):
                    best, best_t, moved = c, m.objective, True
            if not moved:
                return best


def restart_point(ctx: SearchContext, used: set[tuple],
                  allowed: Callable[[Config], bool] | None = None) -> Config | None:
    """Where a converged local search starts again: the best seed not yet started from, else a
    random allowed config not yet measured; None when every allowed config is measured."""
    space = ctx.space
    seeds = [(ctx.objective(s), i, s) for i, s in enumerate(ctx.seeds)
             if space.key(s) not in used and (allowed is None or allowed(s))]
    if seeds:
        return dict(min(seeds, key=lambda t: (t[0], t[1]))[2])
    rest = [c for c in space.valid_configs() if not ctx.is_known(c) and (allowed is None or allowed(c))]
    return dict(ctx.rng.choice(rest)) if rest else None
