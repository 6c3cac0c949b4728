"""Beam search: keep the `beam_width` best configs seen, measure all their unmeasured
neighbours (within `radius`), and stop when a round leaves the beam unchanged -- or, with
`restarts=True` (what a fair replay comparison uses), start a fresh beam around unmeasured
configs (the best unused seed, else random ones) and go on until the budget is spent."""
from __future__ import annotations

from typing import Any

from ..space import Config
from . import options as opt
from .base import Proposals, SearchContext, Strategy, measure
from .coordesc import restart_point


class BeamSearch(Strategy):
    """Options: beam_width=4, radius=1, initial=beam_width (random configs added to the seeds
    and the space default to form the first beam), restarts=False (a converged beam starts
    again from unmeasured configs instead of ending the search)."""

    name = "beam"

    def __init__(self, seed: int = 0, beam_width: int = 4, radius: int = 1, initial: int | None = None,
                 restarts: bool = False, **options: Any):
        super().__init__(seed, **options)
        self.beam_width = opt.integer(self.name, "beam_width", beam_width, 1)
        self.radius = opt.integer(self.name, "radius", radius, 1)
        self.initial = self.beam_width if initial is None else opt.integer(self.name, "initial", initial, 0)
        self.restarts = opt.boolean(self.name, "restarts", restarts)

    def propose(self, ctx: SearchContext) -> Proposals:
        space = ctx.space
        scores: dict[tuple, tuple[float, Config]] = {}  # everything this search has seen, in order

        episode: set[tuple] | None = None  # after a restart: the configs this beam has seen

        def note(cfgs: list[Config], objs: list[float]) -> None:
            for c, t in zip(cfgs, objs):
                scores.setdefault(space.key(c), (t, c))
                if episode is not None:
                    episode.add(space.key(c))

        def beam() -> list[tuple]:
            # stable sort: ties keep first-seen order, so runs are reproducible
            seen = scores.items() if episode is None else ((k, scores[k]) for k in episode)
            return [k for k, _ in sorted(seen, key=lambda kv: kv[1][0])[: self.beam_width]]

        note([m.config for m in ctx.history], [m.objective for m in ctx.history])  # the seeds
        valid = space.valid_configs()
        picks = [valid[i] for i in ctx.rng.sample(range(len(valid)), min(self.initial, len(valid)))]
        start = [c for c in [space.default(), *picks] if space.key(c) not in scores]
        ms = yield from measure(ctx, start)
        note(start, [m.objective for m in ms])
        current = beam()
        used = {space.key(c) for c in start} | {space.key(m.config) for m in ctx.history}
        while True:
            frontier: dict[tuple, Config] = {}
            for k in current:
                for c in space.neighbours(scores[k][1], self.radius):
                    ck = space.key(c)
                    if ck not in scores:  # known-but-unscored ones are answered free
                        frontier.setdefault(ck, c)
            nxt = current
            if frontier:
                cfgs = list(frontier.values())
                ms = yield from measure(ctx, cfgs)
                note(cfgs, [m.objective for m in ms])
                nxt = beam()
            if nxt != current:
                current = nxt
                continue
            if not self.restarts:
                return
            # converged: a fresh beam of unmeasured configs; it then ranks only what it saw
            fresh: list[Config] = []
            while len(fresh) < self.beam_width:
                c = restart_point(ctx, used | {space.key(f) for f in fresh})
                if c is None:
                    break
                fresh.append(c)
            if not fresh:
                return
            used |= {space.key(c) for c in fresh}
            episode = set()
            ms = yield from measure(ctx, fresh)
            note(fresh, [m.objective for m in ms])
            current = beam()
