"""A fixed list of configs, measured in order: what `triton.autotune` users ship."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Sequence

from . import options as opt
from .base import Proposals, SearchContext, Strategy


class FixedList(Strategy):
    """Options: `configs` (list of full or partial configs; partial ones are completed with
    `space.complete`). Default: the space's default config only."""

    name = "fixed"

    def __init__(self, seed: int = 0, configs: Sequence[Mapping[str, Any]] | None = None, **options: Any):
        super().__init__(seed, **options)
        self.configs = opt.configs(self.name, "configs", configs)

    def propose(self, ctx: SearchContext) -> Proposals:
        space = ctx.space
        wanted = [space.default()] if self.configs is None else [space.complete(c) for c in self.configs]
        seen: set[tuple] = set()
        todo = []
        for c in wanted:  # completion can map two partial configs onto one: measure it once
            k = space.key(c)
            if k not in seen:
                seen.add(k)
                todo.append(c)
        yield from ctx.measure(todo)
