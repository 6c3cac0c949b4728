"""Genetic algorithm: tournament selection, uniform crossover, per-gene mutation, elitism.

Children that violate the constraints are repaired (nearest valid config, or a fresh random
one); children already measured are bred again a few times and then replaced by a fresh
random config, so every generation spends its budget on new configs. Runs until the space is
exhausted or the best has not improved for `max_stalled_generations`.
"""
from __future__ import annotations

from typing import Any, Iterator

from ..errors import AbductuneError
from ..space import Config
from . import options as opt
from .base import Proposals, SearchContext, Strategy, measure

_BREED_TRIES = 10  # attempts at an unmeasured child before falling back to a random config


class GeneticAlgorithm(Strategy):
    """Options: population=16, mutation_rate=0.2 (per gene), tournament=3, elite=2,
    max_stalled_generations=50, repair="nearest" | "resample"."""

    name = "genetic"

    def __init__(self, seed: int = 0, population: int = 16, mutation_rate: float = 0.2, tournament: int = 3,
                 elite: int = 2, max_stalled_generations: int = 50, repair: str = "nearest", **options: Any):
        super().__init__(seed, **options)
        self.population = opt.integer(self.name, "population", population, 2)
        self.tournament = opt.integer(self.name, "tournament", tournament, 1)
        self.elite = opt.integer(self.name, "elite", elite, 0)
        if self.elite >= self.population:
            raise AbductuneError(f"genetic: option 'elite' ({elite}) must be smaller than 'population' "
                                 f"({population})")
        self.max_stalled = opt.integer(self.name, "max_stalled_generations", max_stalled_generations, 1)
        self.mutation_rate = opt.number(self.name, "mutation_rate", mutation_rate, 0, 1)
        self.repair = opt.choice(self.name, "repair", repair, ("nearest", "resample"))

    def propose(self, ctx: SearchContext) -> Proposals:
        space, rng = ctx.space, ctx.rng
        valid = space.valid_configs()
        order: Iterator[int] = iter(ctx.np_rng.permutation(len(valid)).tolist())
        taken: set[tuple] = set()  # proposed this generation

        def fresh() -> Config | None:
            """A random valid config neither measured nor already taken; None when none is left."""
            for i in order:
                c = valid[i]
                if not ctx.is_known(c) and space.key(c) not in taken:
                    return dict(c)
            return None

        def pick(pop: list[tuple[float, Config]]) -> Config:
            contenders = rng.sample(range(len(pop)), min(self.tournament, len(pop)))
            return pop[min(contenders, key=lambda i: (pop[i][0], i))][1]

        def breed(pop: list[tuple[float, Config]]) -> Config | None:
            a, b = pick(pop), pick(pop)
            child = {n: (a[n] if rng.random() < 0.5 else b[n]) for n in space.names}
            for p in space.params:
                if len(p.values) > 1 and rng.random() < self.mutation_rate:
                    child[p.name] = rng.choice(p.moves(child[p.name]))
            if space.satisfies(child):
                return child
            return space.nearest_valid(child) if self.repair == "nearest" else fresh()

        # first generation: the seeds, topped up with random configs
        pop = [(m.objective, dict(m.config)) for m in ctx.history][: self.population]
        first = []
        while len(pop) + len(first) < self.population and (c := fresh()) is not None:
            taken.add(space.key(c))
            first.append(c)
        ms = yield from measure(ctx, first)
        pop += [(m.objective, c) for c, m in zip(first, ms)]
        if not pop:
            return  # no seeds and every valid config was already measured
        best, stalled = min(t for t, _ in pop), 0
        while stalled < self.max_stalled:
            taken.clear()
            children: list[Config] = []
            while len(children) < self.population - self.elite:
                child = None
                for _ in range(_BREED_TRIES):
                    c = breed(pop)
                    if c is not None and not ctx.is_known(c) and space.key(c) not in taken:
                        child = c
                        break
                child = child or fresh()
                if child is None:
                    break  # every valid config is measured or in this generation
                taken.add(space.key(child))
                children.append(child)
            if not children:
                return
            ms = yield from measure(ctx, children)
            elites = sorted(pop, key=lambda tc: tc[0])[: self.elite]
            pop = elites + [(m.objective, c) for c, m in zip(children, ms)]
            gen_best = min(t for t, _ in pop)
            best, stalled = (gen_best, 0) if gen_best < best else (best, stalled + 1)
