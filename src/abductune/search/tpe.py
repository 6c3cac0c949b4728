"""TPE through Optuna's TPESampler (ask/tell), seeded and multivariate by default.

Encoding (option `encoding`): "categorical" (default) makes every parameter a categorical over
its value indices; "int" makes an ordered parameter an integer index (suggest_int over 0..n-1),
so the Parzen estimators see that 64 lies between 32 and 128. Categorical won on replays of
the public Kernel Tuner data (clearly on convolution, tied elsewhere, int slightly ahead on
CLBlast GEMM at 60 evaluations), so it is the default.

A sampled combination that breaks a constraint is mapped to the nearest valid config and
Optuna is told that config's time; a failed config is told a large penalty, so TPE learns to
avoid the region (a FAIL state would just be ignored by the sampler). Seeds are added to the
study as completed trials. Ends when every valid config is measured, or after
`max_stalled_trials` consecutive trials that brought nothing new.
"""
from __future__ import annotations

import warnings
from typing import Any

from ..errors import AbductuneError
from ..space import Config
from . import options as opt
from .base import Proposals, SearchContext, Strategy

PENALTY = 1e30  # ranked after every real time; finite, so Optuna stores it as a plain value


def _import_optuna():
    try:
        import optuna
    except ImportError:
        raise AbductuneError("TPE needs optuna: pip install abductune[tpe]") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


class TPE(Strategy):
    """Options: n_startup_trials=8, multivariate=True, constant_liar=True (spreads the trials
    of one batch), max_stalled_trials=200, encoding="categorical" | "int"."""

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
        optuna = _import_optuna()
        space = ctx.space
        D = optuna.distributions
        free = [p for p in space.params if len(p.values) > 1]
        as_int = self.encoding == "int"
        dists = {p.name: D.IntDistribution(0, len(p.values) - 1) if p.ordered and as_int
                 else D.CategoricalDistribution(list(range(len(p.values)))) for p in free}
        with warnings.catch_warnings():  # multivariate / constant_liar are "experimental"
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=self.n_startup_trials,
                                                 multivariate=self.multivariate,
                                                 constant_liar=self.constant_liar)
        study = optuna.create_study(direction="minimize", sampler=sampler)

        def value(m) -> float:
            return m.objective if m.ok else PENALTY

        for m in ctx.history:  # the seeds
            study.add_trial(optuna.trial.create_trial(
                params={p.name: p.index(m.config[p.name]) for p in free}, distributions=dists, value=value(m)))

        fixed = {p.name: p.values[0] for p in space.params if len(p.values) == 1}
        stalled = 0
        while True:
            trials = [study.ask(dists) for _ in range(ctx.batch_size)]
            cfgs: list[Config] = []
            keys: set[tuple] = set()
            for t in trials:
                cfg = {**fixed, **{p.name: p.values[t.params[p.name]] for p in free}}
                cfg = {n: cfg[n] for n in space.names}
                if not space.satisfies(cfg):
                    cfg = space.nearest_valid(cfg)
                k = space.key(cfg)
                stalled = stalled + 1 if (k in keys or ctx.is_known(cfg)) else 0
                keys.add(k)
                cfgs.append(cfg)
            ms = yield cfgs
            for t, m in zip(trials, ms):
                study.tell(t, value(m))
            if stalled >= self.max_stalled_trials:
                return
            if stalled and all(ctx.is_known(c) for c in space.valid_configs()):
                return  # nothing left to learn
