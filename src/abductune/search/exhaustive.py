"""Exhaustive search: every valid config in enumeration order (the ground truth)."""
from __future__ import annotations

from .base import Proposals, SearchContext, Strategy


class Exhaustive(Strategy):
    name = "exhaustive"

    def propose(self, ctx: SearchContext) -> Proposals:
        configs = ctx.space.valid_configs()
        yield from ctx.measure(configs)
