"""Uniform random sampling without replacement: the baseline every strategy must beat."""
from __future__ import annotations

from .base import Proposals, SearchContext, Strategy


class RandomSearch(Strategy):
    name = "random"

    def propose(self, ctx: SearchContext) -> Proposals:
        configs = ctx.space.valid_configs()
        order = ctx.np_rng.permutation(len(configs))
        yield from ctx.measure([configs[j] for j in order])
