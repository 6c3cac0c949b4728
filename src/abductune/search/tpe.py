"""TPE through Optuna's TPESampler (ask/tell), seeded and multivariate by default.

Encoding (option `encoding`): "categorical" (default) makes every parameter a categorical over
its value indices; "int" makes an ordered parameter an integer index (suggest_int over 0..n-1),
so the Parzen estimators see that 64 lies between 32 and 128. Categorical won on replays of
the public Kernel Tuner data (clearly on convolution, tied elsewhere, int slightly ahead on
CLBlast GEMM at 60 evaluations), so it is the default.

A sampled combination that breaks a constraint is mapped to the nearest valid config and
Optuna is told that config's time; a failed config is told a large penalty, so TPE learns to
avoid the region (a FAIL state would just be ignored by the sampler).

Seeds are added to the study as completed trials, on top of the random startup trials rather
than in place of them: with one mediocre seed and no random trials, the Parzen estimator's
"good" set is that seed alone for a long time and the search stays in its neighbourhood
(replay of a public convolution space: a 1.52x seed ended at 1.47x after 200 evaluations,
1.10x unseeded). When TPE keeps proposing configs it has seen (`max_stalled_trials` in a row),
the rest of the space is measured in random order, so the whole budget is used.

`TPEModel` is the study itself, for other strategies (abduction's fallback) to tell any
measured config and ask for proposals.
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

from ..errors import AbductuneError
from ..measurement import Measurement
from ..space import Config, Space
from . import options as opt
from .base import Proposals, SearchContext, Strategy

PENALTY = 1e30  # ranked after every real time; finite, so Optuna stores it as a plain value


def _import_optuna():
    try:
        import optuna
    except ImportError:
        raise AbductuneError("TPE needs optuna, a dependency of abductune that is missing here: pip install optuna") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def value(m: Measurement) -> float:
    """What Optuna is told: the time, or PENALTY for a failure."""
    return m.objective if m.ok else PENALTY


class TPEModel:
    """An Optuna TPE study over a space's value indices. `add` tells it a config measured
    elsewhere; `ask(n)` proposes n valid configs (repaired to the nearest valid one);
    `tell` answers the last ask. `n_startup_trials` counts random trials from the first ask
    on, whatever was added before it."""

    def __init__(self, space: Space, seed: int, *, n_startup_trials: int = 8, multivariate: bool = True,
                 constant_liar: bool = True, encoding: str = "categorical", prior_trials: int = 0):
        optuna = self.optuna = _import_optuna()
        self.space = space
        D = optuna.distributions
        self.free = [p for p in space.params if len(p.values) > 1]
        as_int = encoding == "int"
        self.dists = {p.name: D.IntDistribution(0, len(p.values) - 1) if p.ordered and as_int
                      else D.CategoricalDistribution(list(range(len(p.values)))) for p in self.free}
        self.fixed = {p.name: p.values[0] for p in space.params if len(p.values) == 1}
        with warnings.catch_warnings():  # multivariate / constant_liar are "experimental"
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup_trials + prior_trials,
                                                 multivariate=multivariate, constant_liar=constant_liar)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self._told: set[tuple] = set()

    def add(self, m: Measurement) -> None:
        """Tell the study a config measured outside its asks (once per config)."""
        k = self.space.key(m.config)
        if k in self._told:
            return
        self._told.add(k)
        self.study.add_trial(self.optuna.trial.create_trial(
            params={p.name: p.index(m.config[p.name]) for p in self.free}, distributions=self.dists,
            value=value(m)))

    def ask(self, n: int) -> tuple[list[Any], list[Config]]:
        trials = [self.study.ask(self.dists) for _ in range(n)]
        cfgs: list[Config] = []
        for t in trials:
            cfg = {**self.fixed, **{p.name: p.values[t.params[p.name]] for p in self.free}}
            cfg = {nm: cfg[nm] for nm in self.space.names}
            if not self.space.satisfies(cfg):
                cfg = self.space.nearest_valid(cfg)
            cfgs.append(cfg)
        return trials, cfgs

    def tell(self, trials: Sequence[Any], ms: Sequence[Measurement]) -> None:
        for t, m in zip(trials, ms):
            self.study.tell(t, value(m))
            self._told.add(self.space.key(m.config))


def unmeasured_in_random_order(ctx: SearchContext) -> list[Config]:
    """Every valid config this search has not measured, shuffled with the search's rng."""
    rest = [c for c in ctx.space.valid_configs() if not ctx.is_known(c)]
    ctx.rng.shuffle(rest)
    return rest


class TPE(Strategy):
    """Options: n_startup_trials=8 (random trials, on top of the seeds), multivariate=True,
    constant_liar=True (spreads the trials of one batch), max_stalled_trials=200 (then the
    rest is measured in random order), encoding="categorical" | "int"."""

    name = "tpe"

    def __init__(self, seed: int = 0, n_startup_trials: int = 8, multivariate: bool = True,
                 constant_liar: bool = True, max_stalled_trials: int = 200, encoding: str = "categorical",
                 **options: Any):
        super().__init__(seed, **options)
        self.n_startup_trials = opt.integer(self.name, "n_startup_trials", n_startup_trials, 0)
        self.max_stalled_trials = opt.integer(self.name, "max_stalled_trials", max_stalled_trials, 1)
        self.multivariate = opt.boolean(self.name, "multivariate", multivariate)
        self.constant_liar = opt.boolean(self.name, "constant_liar", constant_liar)
        self.encoding = opt.choice(self.name, "encoding", encoding, ("categorical", "int"))

    def propose(self, ctx: SearchContext) -> Proposals:
        space = ctx.space
        model = TPEModel(space, self.seed, n_startup_trials=self.n_startup_trials,
                         multivariate=self.multivariate, constant_liar=self.constant_liar,
                         encoding=self.encoding, prior_trials=len(ctx.history))
        for m in ctx.history:  # the seeds
            model.add(m)
        stalled = 0
        while True:
            trials, cfgs = model.ask(ctx.batch_size)
            keys: set[tuple] = set()
            for cfg in cfgs:
                k = space.key(cfg)
                stalled = stalled + 1 if (k in keys or ctx.is_known(cfg)) else 0
                keys.add(k)
            ms = yield cfgs
            model.tell(trials, ms)
            if stalled >= self.max_stalled_trials:
                break  # TPE has converged on what it knows: measure the rest at random
            if stalled and all(ctx.is_known(c) for c in space.valid_configs()):
                return  # nothing left to learn
        yield from ctx.measure(unmeasured_in_random_order(ctx))
