"""Coordinate descent with PyTorch Inductor's semantics (runtime/coordinate_descent_tuner.py).

For each field in order, try one step up and one step down (pow2 params double/halve, int
ranges and stages move by 1), accepting a candidate only when it beats the incumbent by more
than a relative threshold (new < best * (1 - threshold)). Like Inductor, both directions are
tried from the field's current value and accepted in order (up first); unlike Inductor, an
accepted direction is followed further right away instead of on the next sweep. Sweeps repeat
until no field improves; then, optionally, every neighbour within `radius` is checked and any
improvement restarts the descent (Inductor's coordinate_descent_check_all_directions).
"""
from __future__ import annotations

import math
from collections.abc import Generator, Mapping
from typing import Any, Callable, Sequence

from ..errors import AbductuneError
from ..measurement import Measurement
from ..space import Config, Space
from .base import Proposals, SearchContext, Strategy


def measure(ctx: SearchContext, configs: Sequence[Config]) -> Generator[list[Config], list[Measurement],
                                                                         list[Measurement]]:
    """Propose `configs` in batches of ctx.batch_size (so a budget in seconds overshoots by at
    most one batch); return all their measurements. Use as `ms = yield from measure(ctx, cs)`."""
    out: list[Measurement] = []
    for i in range(0, len(configs), ctx.batch_size):
        out += yield list(configs[i: i + ctx.batch_size])
    return out


def improves(new: float, best: float, threshold: float) -> bool:
    """Inductor's has_improvement: better by more than `threshold` (relative). Anything finite
    improves on a failed (infinite) incumbent."""
    return math.isfinite(new) and (not math.isfinite(best) or new < best * (1 - threshold))


def check_threshold(name: str, threshold: Any) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold < 1:
        raise AbductuneError(f"{name}: option 'threshold' must be a number in [0, 1), got {threshold!r}")
    return float(threshold)


def default_field_order(space: Space) -> list[str]:
    """Inductor's order by role: tiles, then warps, then stages, then the rest (space order)."""
    def rank(role: str | None) -> int:
        if role and role.startswith("tile"):
            return 0
        return {"warps": 1, "stages": 2}.get(role or "", 3)
    return sorted(space.names, key=lambda n: rank(space[n].role))  # stable: keeps space order


class CoordinateDescent(Strategy):
    """Options: threshold=0.001, field_order=None (tiles, warps, stages, rest), field_limits=None
    ({name: max value}), check_all_directions=False, radius=2."""

    name = "coordesc"

    def __init__(self, seed: int = 0, threshold: float = 0.001, field_order: Sequence[str] | None = None,
                 field_limits: Mapping[str, Any] | None = None, check_all_directions: bool = False,
                 radius: int = 2, **options: Any):
        super().__init__(seed, **options)
        self.threshold = check_threshold(self.name, threshold)
        if field_order is not None:
            if isinstance(field_order, str) or not all(isinstance(f, str) for f in field_order):
                raise AbductuneError(f"{self.name}: option 'field_order' must be a list of parameter "
                                     f"names, got {field_order!r}")
            field_order = list(field_order)
            if not field_order or len(set(field_order)) != len(field_order):
                raise AbductuneError(f"{self.name}: option 'field_order' must be non-empty without "
                                     f"repeats, got {field_order!r}")
        self.field_order = field_order
        limits = dict(field_limits or {})
        for k, v in limits.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise AbductuneError(f"{self.name}: field_limits[{k!r}] must be a number, got {v!r}")
        self.field_limits = limits
        if not isinstance(check_all_directions, bool):
            raise AbductuneError(f"{self.name}: option 'check_all_directions' must be True or False")
        self.check_all_directions = check_all_directions
        if isinstance(radius, bool) or not isinstance(radius, int) or radius < 1:
            raise AbductuneError(f"{self.name}: option 'radius' must be an integer >= 1, got {radius!r}")
        self.radius = radius

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
        best = self._start(ctx, allowed)
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
                return
            cands = [c for c in space.neighbours(best, self.radius)
                     if allowed(c) and all(c[n] == best[n] for n in frozen)]
            ms = yield from measure(ctx, cands)
            moved = False
            for c, m in zip(cands, ms):
                if improves(m.objective, best_t, self.threshold):
                    best, best_t, moved = c, m.objective, True
            if not moved:
                return
