"""A fixed list of configs, measured in order: what `triton.autotune` users ship."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Sequence

from ..errors import AbductuneError
from .base import Proposals, SearchContext, Strategy


class FixedList(Strategy):
    """Options: `configs` (list of full or partial configs; partial ones are completed with
    `space.complete`). Default: the space's default config only."""

    name = "fixed"

    def __init__(self, seed: int = 0, configs: Sequence[Mapping[str, Any]] | None = None, **options: Any):
        super().__init__(seed, **options)
        if configs is not None:
            if isinstance(configs, Mapping) or not isinstance(configs, Sequence) or \
                    not all(isinstance(c, Mapping) for c in configs):
                raise AbductuneError("fixed: option 'configs' must be a list of dicts "
                                     f"(parameter name -> value), got {configs!r}")
            if not configs:
                raise AbductuneError("fixed: option 'configs' is empty; give at least one config")
        self.configs = None if configs is None else [dict(c) for c in configs]

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
        for i in range(0, len(todo), ctx.batch_size):
            yield todo[i: i + ctx.batch_size]
