"""Abduction: explain why the incumbent is slow and measure only what the explanation predicts.

The loop, one small batch at a time:

1. *Observe.* Seeds come first (the Session feeds them: heuristics, the observed database,
   theory predictions, the kernel's own list); the Search measures them before this strategy
   runs. Without a usable seed the space default is measured; in generic mode (a space the
   diagnosis can say nothing about: no roofline, no static facts, e.g. public Kernel Tuner
   data) a small space-filling sample (a Latin hypercube over value indices) is measured.
2. *Diagnose* the incumbent (`theory.diagnose`) and ask the theory library for hypotheses,
   ranked by expected gain times credibility in this run (Laplace's rule over the support /
   refute tally of the theory and of the same move from earlier incumbents, starting from the
   verdicts of earlier runs on this kernel class and GPU, scaled to a few tests), plus the
   speed-up an additive model of everything measured predicts -- except for an interaction
   theory (`tile_shape`), whose moves that model cannot see, until this run refutes it once;
   at most half a batch per theory, so one wrong explanation cannot fill a batch.
3. *Test* the top few (`batch`, 2-4), and judge each against the incumbent with
   `theory.evidence`: supported / refuted beyond the noise threshold taken from measured spread
   and repeats (with a floor); a close call the candidate seems to win is re-measured,
   interleaved with the incumbent (`ctx.remeasure`), before the incumbent changes. Two
   supported moves on different parameters are composed and tested next.
4. *Finish* with multi-parameter moves around the incumbent (single and pairwise moves of
   radius 2, pattern search's pairwise tile moves, `generic_moves` along the parameters and
   pairs that the measurements so far say matter), ranked by the additive model of log-time
   (main effects plus the strongest interactions). They compete with the hypotheses on one
   scale, so they fill a batch the theories cannot, and take over when no theory expects a
   gain. A move that wins sends the engine back to step 2 at the new incumbent.
5. *Fall back* when the neighbourhood is exhausted or `patience` tests in a row brought no
   win beyond noise: proposals from TPE (Optuna ask/tell), until one of them wins, which
   restarts the local loop there. With roles, half of each stalled batch still sweeps the
   nearest untested moves in order of distance, whatever the model predicts of them (it has
   just been wrong `patience` times; a two-parameter move such as a smaller N tile with one
   stage fewer is often where the optimum hides). TPE is told the seeds, the start, its own proposals, the
   model's proposals and every incumbent -- not the dense cluster of local moves, which would
   make the current basin its whole "good" set (told everything, it stayed in one basin of a
   public convolution space). The strategy never ends before its budget unless the whole
   space is measured (a TPE proposal it has seen is replaced by a random unmeasured config).
   If another `patience` tests bring no win either, the search restarts from the best measured
   config outside the basins searched so far, as generic mode does at once (below): on the
   bundled skinny matmul shapes a basin one or two parameters from the optimum held whole
   64-evaluation runs.

Generic mode (no theory applies) differs in four ways, all for global search over a space the
engine knows nothing about:

- every batch mixes `tpe_slots` TPE proposals, `model_slots` proposals from the whole space by
  Thompson sampling of the additive model (fitted to a bootstrap resample of the measurements,
  so it explores what it knows little about), and the best-ranked local moves (the rest of
  `batch`);
- `patience` counts only the tests the engine chose itself (local moves, model proposals): a
  TPE miss says nothing about the incumbent's basin;
- when nothing measured says how noisy the times are (single samples, no repeats), the best
  config of the start is re-measured once: a noise probe, after which only close calls are
  confirmed, instead of every early win costing two more measurements;
- when the local search stalls it restarts from the best measured config more than one local
  move (LOCAL_REACH parameters) away from every incumbent where it stalled before -- iterated
  local search, so one trap cannot hold the rest of the budget (on public spaces a local
  optimum 1.5x off the best held whole runs); only when no such config is measured does TPE
  take every slot.

No config the resource model (`theory.resources`) says cannot launch on the GPU is ever
proposed, by a theory, a finishing move or TPE ("prune" in the log): it would cost a compile
and a failed launch to learn what the tile sizes already say.

Every step is logged through `ctx.log` ("prior", "observe", "hypothesis", "test", "verdict",
"move", "fallback", "prune"), citing measurement ids where the evaluator's store set them, so `explain` can
print which measurement supported or refuted which hypothesis.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ..measurement import Measurement
from ..space import Config, Space
from ..theory.diagnose import Diagnosis, diagnose
from ..theory.evidence import CONFIDENCE, NOISE_FLOOR, Ledger, credibility
from ..theory.generic import generic_moves, importance, interactions
from ..theory.library import BY_NAME, hypotheses
from ..theory import resources
from . import options as opt
from .base import Proposals, SearchContext, Strategy
from .pattern import poll_points
from .tpe import PENALTY, TPEModel, value

# A composed hypothesis (two supported moves at once) is expected to gain what both did.
COMPOSE = "compose"
POLL = "poll"  # finish: multi-parameter moves around the incumbent
TPE_TEST = "tpe"  # model-based fallback proposal
START = "start"
MODEL = "model"  # generic mode: a Thompson-sampled proposal of the additive model, whole space
LOOKAHEAD = 12  # configs a batch names as likely next (compiled ahead by a live evaluator)
MAX_TPE_RETRIES = 8  # TPE asks per slot before a random unmeasured config is taken instead
PAIR_TERMS = 4  # interaction terms in the additive model
LOCAL_REACH = 2  # parameters one local move changes at most (single and pairwise moves)
# Exploration when the theories fail on a kernel (`_Engine._explore_slots`): after this many of
# their tests here did not win, and while fewer than about one in three of their tests won
# (Laplace's rule over this run's verdicts), half of each batch explores. Set by reasoning
# about the rule, not fitted to any recorded data.
DISTRUST_AFTER = 3
TRUST_MIN = 0.34
# On a kernel no theory was confirmed on, theories earn trust after this many won tests.
EARN_TRUST = 2


def _unseen_kernel(problem: Any) -> str | None:
    """The kernel's family name when no packaged theory rule was confirmed on it (a kernel
    the library and its rules were not built around), else None."""
    if problem is None:
        return None
    from ..problem import kernel_family
    from ..theory.store import confirmed_kernels

    fam = kernel_family(problem.kernel)
    return None if fam in confirmed_kernels() else fam
PAIR_MIN = 0.02  # share of variance a pair must explain beyond its parts to get a term


@dataclass
class _Test:
    """One config to measure and the claim it tests."""

    theory: str
    config: Config
    gain: float = 0.0  # expected relative gain that ranked it
    reason: str = ""


class Abduction(Strategy):
    """Options: batch=3 (tests per batch, 1-8), confidence=2.0 (standard errors of the
    difference for a verdict), noise_floor=0.01 (smallest relative difference trusted),
    startup=8 (space-filling configs in generic mode), seeded_startup=None (the same when
    seeds were measured: None keeps `startup`; at least half of it is fresh),
    patience=None (tests without a win beyond noise before TPE takes over, or in generic
    mode local tests before a restart; None: twice the tuned parameters, at least 8), tpe_slots=2 (generic mode: TPE proposals
    in every batch, part of `batch`), model_slots=1 (generic mode: Thompson-sampled proposals
    of the additive model in every batch, on top of `batch`), stop_early=False (end before the
    budget once the search has settled: see `_Engine._settled`), explore_unseen=False (on a
    kernel no theory was confirmed on, half of each batch explores with the model until the
    theories have won EARN_TRUST tests on it: see `_Engine._explore_slots`; off by default, as
    on the zoo it cost more than it saved: docs/PERFORMANCE.md, twelfth session)."""

    name = "abduction"

    def __init__(self, seed: int = 0, batch: int = 3, confidence: float = CONFIDENCE,
                 noise_floor: float = NOISE_FLOOR, startup: int = 8, patience: int | None = None,
                 tpe_slots: int = 2, model_slots: int = 1, stop_early: bool = False,
                 seeded_startup: int | None = None, explore_unseen: bool = False, **options: Any):
        super().__init__(seed, **options)
        self.batch = opt.integer(self.name, "batch", batch, 1, 8)
        self.confidence = opt.number(self.name, "confidence", confidence, 0.1, 10)
        self.noise_floor = opt.number(self.name, "noise_floor", noise_floor, 0, 0.5)
        self.startup = opt.integer(self.name, "startup", startup, 0)
        self.seeded_startup = self.startup if seeded_startup is None else \
            opt.integer(self.name, "seeded_startup", seeded_startup, 0)
        self.patience = None if patience is None else opt.integer(self.name, "patience", patience, 1)
        self.tpe_slots = opt.integer(self.name, "tpe_slots", tpe_slots, 0, 8)
        self.model_slots = opt.integer(self.name, "model_slots", model_slots, 0, 8)
        self.stop_early = opt.boolean(self.name, "stop_early", stop_early)
        self.explore_unseen = opt.boolean(self.name, "explore_unseen", explore_unseen)

    def propose(self, ctx: SearchContext) -> Proposals:
        return (yield from _Engine(self, ctx).run())


# ----------------------------------------------------------------------------- the model

class Additive:
    """log time ~ mu + sum of per-parameter value effects + a few pairwise effects, fitted by
    backfitting with shrinkage (a value seen n times keeps n/(n+1) of its mean residual). An
    ordered parameter's unseen value takes the effect interpolated between its nearest seen
    values (times are smooth in tile sizes and counts); an unordered one's takes 0."""

    def __init__(self, space: Space, rows: Sequence[tuple[Config, float]],
                 pairs: Sequence[tuple[str, str]] = (), sweeps: int = 4, shrink: float = 1.0):
        self.space = space
        self.params = list(space.params)
        pos = {p.name: i for i, p in enumerate(self.params)}
        self.pairs = [(pos[a], pos[b]) for a, b in pairs]
        X = np.array([[p.index(c[p.name]) for p in self.params] for c, _ in rows], dtype=np.int64)
        y = np.array([t for _, t in rows], dtype=float)
        self.mu = float(y.mean()) if len(y) else 0.0
        self.main = [np.zeros(len(p.values)) for p in self.params]
        self.seen = [np.zeros(len(p.values), dtype=bool) for p in self.params]
        self.pair_fx = [np.zeros((len(self.params[a].values), len(self.params[b].values))) for a, b in self.pairs]
        if not len(y):
            return
        for j in range(len(self.params)):
            self.seen[j][np.unique(X[:, j])] = True
        for _ in range(sweeps):
            for j, p in enumerate(self.params):
                r = y - self._fit(X, skip_main=j)
                n = np.bincount(X[:, j], minlength=len(p.values))
                self.main[j] = np.bincount(X[:, j], weights=r, minlength=len(p.values)) / (n + shrink)
            for q, (a, b) in enumerate(self.pairs):
                r = y - self._fit(X, skip_pair=q)
                nb = len(self.params[b].values)
                idx = X[:, a] * nb + X[:, b]
                size = len(self.params[a].values) * nb
                n = np.bincount(idx, minlength=size)
                self.pair_fx[q] = (np.bincount(idx, weights=r, minlength=size) / (n + shrink)).reshape(-1, nb)
        for j, p in enumerate(self.params):  # fill unseen ordered values by interpolation
            if p.ordered and self.seen[j].any() and not self.seen[j].all():
                at = np.flatnonzero(self.seen[j])
                self.main[j] = np.interp(np.arange(len(p.values)), at, self.main[j][at])

    def _fit(self, X: np.ndarray, skip_main: int = -1, skip_pair: int = -1) -> np.ndarray:
        f = np.full(len(X), self.mu)
        for j in range(len(self.params)):
            if j != skip_main:
                f += self.main[j][X[:, j]]
        for q, (a, b) in enumerate(self.pairs):
            if q != skip_pair:
                f += self.pair_fx[q][X[:, a], X[:, b]]
        return f

    def predict(self, configs: Sequence[Config]) -> np.ndarray:
        if not configs:
            return np.zeros(0)
        X = np.array([[p.index(c[p.name]) for p in self.params] for c in configs], dtype=np.int64)
        return self._fit(X)


def latin_hypercube(space: Space, n: int, rng: np.random.Generator) -> list[Config]:
    """n valid configs spread over every parameter's range: each parameter's value indices are
    cut into n strata, one draw per stratum, strata shuffled independently per parameter; a
    combination that breaks a constraint moves to the nearest valid config. Duplicates after
    that repair are replaced by uniform draws from the valid configs."""
    valid = space.valid_configs()
    if n >= len(valid):
        return [dict(c) for c in valid]
    cols = []
    for p in space.params:
        u = (rng.permutation(n) + rng.random(n)) / n
        cols.append(np.minimum((u * len(p.values)).astype(int), len(p.values) - 1))
    out: list[Config] = []
    seen: set[tuple] = set()
    for i in range(n):
        cfg = {p.name: p.values[int(cols[j][i])] for j, p in enumerate(space.params)}
        if not space.satisfies(cfg):
            cfg = space.nearest_valid(cfg)
        k = space.key(cfg)
        if k not in seen:
            seen.add(k)
            out.append(cfg)
    while len(out) < n:
        cfg = dict(valid[int(rng.integers(len(valid)))])
        k = space.key(cfg)
        if k not in seen:
            seen.add(k)
            out.append(cfg)
    return out


def informative(diag: Diagnosis) -> bool:
    """Whether the diagnosis knows anything beyond the time: a roofline position or the
    occupancy (static facts). Without either, no theory can explain the config."""
    return diag.bound != "unknown" or diag.occupancy is not None


# ----------------------------------------------------------------------------- the engine

class _Engine:
    def __init__(self, strategy: Abduction, ctx: SearchContext):
        self.s = strategy
        self.ctx = ctx
        self.space = ctx.space
        self.ledger = Ledger(self.space.key, floor=strategy.noise_floor, confidence=strategy.confidence)
        self.measured: list[Measurement] = []  # first-time answers, in order (for the models)
        self.inc: Config | None = None
        self.generic = False
        self.queue: list[_Test] = []  # composed hypotheses to test next
        self.stale = 0  # tests since the last win beyond noise
        self.tpe: TPEModel | None = None
        # What TPE is told: seeds, the space-filling start, its own proposals and every
        # incumbent -- not the local moves around an incumbent, whose dense cluster would make
        # the incumbent's basin TPE's whole "good" set and keep the fallback inside it.
        self.tpe_pool: list[Measurement] = []
        free = sum(len(p.values) > 1 for p in self.space.params)
        self.patience = strategy.patience or max(8, 2 * free)
        self.startup = strategy.startup
        self.diag_cache: dict[tuple, Diagnosis] = {}
        self.move_tally: dict[frozenset, list[int]] = {}  # move -> [supported, refuted]
        self._pending_trials: dict[tuple, Any] = {}  # config key -> the TPE trial that proposed it
        self._valid_X: np.ndarray | None = None  # value indices of every valid config (model_slots)
        self._model_cache: tuple[int, Additive] | None = None  # (measurements it was fitted on, model)
        self._imp: dict[str, float] = {}
        self._inter: dict[tuple[str, str], float] = {}
        self._pairs: list[tuple[str, str]] = []
        self.exhausted: list[Config] = []  # generic mode: incumbents where the local search stalled
        self._cannot_run: dict[tuple, str | None] = {}  # config key -> why it cannot launch (None: it can)
        self.distrusted = False  # the theories lost trust on this kernel (`_explore_slots`)
        self.unseen_kernel = _unseen_kernel(ctx.problem) if strategy.explore_unseen else None

    # -- bookkeeping
    def known(self, cfg: Config) -> bool:
        return self.ctx.is_known(cfg)

    def _note(self, ms: Iterable[Measurement]) -> None:
        for m in ms:
            if self.ledger.observed(m.config):
                continue  # a memo answer for a config seen before
            self.ledger.observe(m)
            self.measured.append(m)

    def _pool(self, cfg: Config) -> None:
        """Let TPE know this config's first measurement (see `tpe_pool`)."""
        m = self.ctx.known(cfg)
        if m is None:
            return
        self.tpe_pool.append(m)
        if self.tpe is not None:
            self.tpe.add(m)

    def _explore_slots(self, b: int) -> int:
        """Slots of a batch of `b` given to model-based exploration (`_model_tests`) because
        the theories have not earned trust on this kernel (issue 27):
        - with the `explore_unseen` option, on a kernel no theory or rule was confirmed on
          (`unseen_kernel`), from the start, until the theories have won EARN_TRUST of their
          tests here (their seeds and moves carry over from other kernels' tilings, names and
          masks, and may be wrong);
        - on any kernel, once DISTRUST_AFTER of their tests here failed to win (refuted or
          neutral) and the pooled credibility of their tests in this run is below TRUST_MIN,
          until they recover.
        Without it, a kernel whose behaviour the theories misread gets batches of confident
        wrong moves, behind a blind search. Switching either way is logged as a "trust"
        event, which `explain` prints."""
        s = r = n = 0.0
        for name, t in self.ledger.tallies.items():
            if name in BY_NAME:
                s, r, n = s + t.supported, r + t.refuted, n + t.neutral
        trust = credibility(s, r, n)
        unearned = self.unseen_kernel is not None and s < EARN_TRUST
        distrust = unearned or (r + n >= DISTRUST_AFTER and trust < TRUST_MIN)
        if distrust != self.distrusted:
            self.distrusted = distrust
            why = (f"no theory has been confirmed on {self.unseen_kernel} and they have won {s:g} of "
                   f"{s + r + n:g} tests here (trusted after {EARN_TRUST})" if unearned else
                   f"the theories' tests on this kernel won {s:g} of {s + r + n:g} (credibility {trust:.2f} "
                   f"< {TRUST_MIN})")
            self.ctx.log("trust", trusted=not distrust, supported=s, refuted=r, neutral=n, credibility=round(trust, 3),
                         reason=(f"{why}: half of each batch explores with the model" if distrust else
                                 f"the theories earned trust here (won {s:g} of {s + r + n:g}, credibility "
                                 f"{trust:.2f}): batches follow them again"))
        return max(1, b // 2) if distrust and b > 1 else 0

    def _runnable(self, cfg: Config) -> bool:
        """False when the resource model says `cfg` cannot launch on this GPU (shared memory
        over the per-block limit, too many threads): no measurement is spent on it. Logged
        once per config as a "prune" event."""
        p = self.ctx.problem
        if p is None or p.hardware is None:
            return True
        k = self.space.key(cfg)
        if k not in self._cannot_run:
            why = resources.infeasible(p, self.space, cfg)
            self._cannot_run[k] = why
            if why is not None:
                self.ctx.log("prune", config=cfg, reason=f"resource model: {why}")
        return self._cannot_run[k] is None

    def _best(self) -> Config | None:
        b = self.ledger.best()
        return b[0] if b is not None else None

    def _diagnose(self, cfg: Config) -> Diagnosis | None:
        m = self.ctx.known(cfg)
        if m is None or self.ctx.problem is None:
            return None
        k = self.space.key(cfg)
        if k not in self.diag_cache:
            try:
                self.diag_cache[k] = diagnose(m, self.ctx.problem, self.space, self.ctx.hardware)
            except Exception as e:  # noqa: BLE001 - a diagnosis bug must not end the search
                self.ctx.log("observe", config=cfg, error=f"diagnosis failed: {e}")
                return None
        return self.diag_cache[k]

    # -- the loop
    def run(self) -> Proposals:
        ctx = self.ctx
        sources = {self.space.key(s.config): s.source for s in ctx.knowledge.seeds}
        for m in ctx.history:  # the seeds, measured by the Search before this strategy ran
            ctx.log("observe", ids=[m.id] if m.id is not None else [], config=m.config, status=str(m.status),
                    time_ms=m.time_ms, source=sources.get(self.space.key(m.config), "seed"))
        self._note(ctx.history)
        for m in ctx.history:
            self._pool(m.config)
        if ctx.knowledge.theory_evidence:  # what earlier runs on this class and GPU showed
            self.ledger.set_priors(ctx.knowledge.theory_evidence)
            ctx.log("prior", reason="credibility from earlier runs of this kernel class on this GPU",
                    evidence={k: list(v) for k, v in sorted(ctx.knowledge.theory_evidence.items())},
                    credibility={k: round(self.ledger.credibility(k), 3) for k in sorted(self.ledger.priors)})
        self.inc = self._best()
        self.generic = not self._can_explain()
        if self.generic:
            yield from self._startup()
        elif self.inc is None:  # no seed ran: start from the default
            start = self.space.default()
            if not self.known(start):
                ms = yield [start]
                self._log_tests([_Test(START, start, 0.0, "the space default")], ms)
                self._note(ms)
            self.inc = self._best()
        if self.inc is not None:
            self._observe(self.inc)
        while True:
            if self.s.stop_early and self._settled():
                return
            tests = self._next_tests()
            if not tests:
                return
            if ctx.lookahead:
                ctx.expect(self._speculate(tests))
            ms = yield [t.config for t in tests]
            self._log_tests(tests, ms)
            self._note(ms)
            yield from self._judge(tests)

    def _can_explain(self) -> bool:
        """Whether a diagnosis of this problem can say more than the time: tried on a
        stand-in measurement of the default config (1 ms, no static facts)."""
        if self.ctx.problem is None:
            return False
        probe = Measurement(self.space.default(), "ok", time_ms=1.0)
        try:
            return informative(diagnose(probe, self.ctx.problem, self.space, self.ctx.hardware))
        except Exception:  # noqa: BLE001 - no diagnosis: generic mode
            return False

    def _startup(self) -> Proposals:
        """Generic mode: a space-filling sample; seeds count towards it, but at least half of
        it is fresh so one mediocre seed cannot decide where the search looks."""
        have = len(self.measured)
        size = self.s.seeded_startup if have else self.startup
        n = max(size - have, (size + 1) // 2 if have else size)
        picks = [c for c in latin_hypercube(self.space, n, self.ctx.np_rng) if not self.known(c)]
        if not picks:
            return
        self.ctx.log("fallback", reason="no theory explains this space: generic mode, space-filling start",
                     configs=picks)
        ms = yield picks
        self._log_tests([_Test(START, c, 0.0, "space-filling start") for c in picks], ms)
        self._note(ms)
        before = self.inc
        self.inc = self._best()
        if self.inc is not None and before != self.inc:
            self.ctx.log("move", from_config=before, to_config=self.inc, ids=self.ledger.ids(self.inc),
                         reason="best of the space-filling start")
        if self.inc is not None and not self.ledger.noise_known(self.inc, self.inc):
            # one repeat of the best start measures the run-to-run noise, so later wins are
            # judged against it instead of each being confirmed by two more measurements
            rm = yield self.ctx.remeasure([self.inc])
            for m in rm:
                self.ledger.observe(m)
            self.ctx.log("test", theory=START, config=self.inc, kind="remeasure", ids=[m.id for m in rm],
                         time_ms=[m.time_ms for m in rm], reason="noise probe: the best start re-measured")

    def _observe(self, cfg: Config) -> None:
        d = self._diagnose(cfg)
        fields: dict[str, Any] = {"config": cfg, "ids": self.ledger.ids(cfg), "time_ms": self.ledger.estimate(cfg)}
        if d is not None and informative(d):
            fields.update(bound=d.bound, frac_peak_flops=d.frac_peak_flops, frac_peak_bw=d.frac_peak_bw,
                          tiles=d.tiles, waves=d.waves, occupancy=d.occupancy, padding=d.padding,
                          k_trips=d.k_trips)
        self.ctx.log("observe", **fields)

    # -- choosing what to test
    def _next_tests(self) -> list[_Test]:
        # generic mode: the model's Thompson-sampled proposals come on top of the batch
        b = self.s.batch + (self.s.model_slots if self.generic else 0)
        tests: list[_Test] = []
        taken: set[tuple] = set()

        def take(t: _Test) -> bool:
            k = self.space.key(t.config)
            if k in taken or self.known(t.config) or not self.space.is_valid(t.config) \
                    or not self._runnable(t.config):
                return False
            taken.add(k)
            tests.append(t)
            return True

        n_tpe = 0
        # stalled: restart from another basin (generic mode at once; with theories only after
        # the sweep of the nearest moves beside TPE has had `patience` more tests). If no
        # config lies outside the searched basins, TPE takes over below.
        if self.inc is not None and self.stale >= self.patience * (1 if self.generic else 2):
            self._restart()
        if self.inc is not None:
            while self.queue and len(tests) < b:
                take(self.queue.pop(0))
            hyps = self._hypotheses(self.inc)
            if self.stale >= self.patience:  # stalled: only a theory that still expects a gain
                for t in hyps:
                    if len(tests) < b and t.gain > 0:
                        take(t)
                if not self.generic and len(tests) < b:
                    # and the nearest untested moves, whatever the model says of them: it has
                    # been wrong `patience` times here, so the neighbourhood is swept in order
                    near = sorted(self._local(self.inc), key=lambda t: self.space.distance(t.config, self.inc))
                    stop = len(tests) + max(1, (b - len(tests)) // 2)  # the other half: TPE
                    for t in near:
                        if len(tests) >= stop:
                            break
                        take(t)
                n_tpe = b - len(tests)
            else:
                n_tpe = min(self.s.tpe_slots, b - len(tests)) if self.generic else 0
                if self.generic:
                    tests += self._model_tests(min(self.s.model_slots, b - n_tpe - len(tests)), taken)
                else:  # theories that keep failing on this kernel share the batch with exploration
                    tests += self._model_tests(self._explore_slots(b - len(tests)), taken)
                # theory hypotheses and finishing moves compete on one scale: log expected speed-up
                pool = sorted(hyps + self._local(self.inc), key=lambda t: -t.gain)  # stable: theories first
                for t in pool:
                    if len(tests) >= b - n_tpe:
                        break
                    take(t)
        if len(tests) < b:  # neighbourhood exhausted or stalled: the model-based fallback
            fallback = self._tpe_tests(b - len(tests), taken)
            stalled = self.inc is not None and self.stale >= self.patience
            swept = [t.config for t in tests if t.theory == POLL]
            if fallback and (not tests or (stalled and swept)):
                self.ctx.log("fallback", reason=("local search stalled" if stalled else
                                                 "no untested move around the incumbent")
                             + ("; sweeping the nearest untested moves beside TPE" if swept else ""),
                             configs=[t.config for t in fallback], swept=swept)
            tests += fallback
        return tests

    def _speculate(self, tests: Sequence[_Test]) -> list[Config]:
        """What the next batch will likely hold, most likely first, for a live evaluator to
        compile while this batch is measured (nothing here changes the search, nor draws from
        its random state): if every test fails, the next-ranked moves at the incumbent; if one
        wins, the theories' first moves at it (diagnosed at the time it is expected to take);
        if two win on different parameters, their composition."""
        inc = self.inc
        if inc is None:
            return []
        sp = self.space
        seen = {sp.key(t.config) for t in tests}
        out: list[Config] = []

        def add(c: Config) -> None:
            k = sp.key(c)
            if k not in seen and not self.known(c) and sp.is_valid(c):
                seen.add(k)
                out.append(dict(c))
        rest = [t.config for t in sorted(self._hypotheses(inc) + self._local(inc), key=lambda t: -t.gain)
                if sp.key(t.config) not in seen][:LOOKAHEAD]
        for c in rest[:3]:
            add(c)
        base = self.ledger.estimate(inc)
        if self.ctx.problem is not None and math.isfinite(base):
            for t in tests[:2]:
                guess = Measurement(t.config, "ok", time_ms=base / (1 + max(t.gain, NOISE_FLOOR)))
                try:
                    d = diagnose(guess, self.ctx.problem, sp, self.ctx.hardware)
                    hs = hypotheses(d, self.ctx.problem, sp, t.config) if informative(d) else []
                except Exception:  # noqa: BLE001 - a guess that cannot be diagnosed adds nothing
                    continue
                for h in sorted(hs, key=lambda h: -h.expected_gain)[:2]:
                    add(h.to_config)
        for a, b in itertools.combinations(tests, 2):
            both = _composition(inc, a.config, b.config)
            if both is not None:
                add(both)
        for c in rest[3:]:
            add(c)
        return out[:LOOKAHEAD]

    def _settled(self) -> bool:
        """Whether to stop before the budget (option `stop_early`): the diagnosis explains this
        problem (in generic mode nothing predicts what is left, so the budget is spent), the
        incumbent has stood against the last `patience` tests with no win beyond noise (where the
        engine would otherwise hand over to TPE), nothing composed is queued, and no untested
        hypothesis or local move is expected to gain more than the noise threshold at the
        incumbent. A prediction confirmed by its first measurements then ends the search after
        `patience` tests instead of the whole budget (what it saves and costs on the bundled H100
        data: docs/PERFORMANCE.md, fifth session)."""
        if self.generic or self.inc is None or self.queue or self.stale < self.patience:
            return False
        thr = self.ledger.threshold(self.inc, self.inc)
        tests = self._hypotheses(self.inc) + self._local(self.inc)
        outlook = max((t.gain for t in tests), default=0.0)
        if outlook > thr:
            return False
        self.ctx.log("stop", config=self.inc, ids=self.ledger.ids(self.inc), untested=len(tests),
                     best_expected_gain=outlook, threshold=thr,
                     reason=f"settled: {self.stale} tests without a win beyond noise and no untested move "
                            f"expected to gain more than the noise threshold ({thr:.1%})")
        return True

    def _restart(self) -> bool:
        """Stalled: no local move found a win beyond noise for `patience` tests (generic mode;
        twice that with theories, whose stalled batches first sweep the nearest moves), so the
        incumbent is a local optimum as far as local moves can tell. Carry on from the best
        measured config outside every basin exhausted so far (more than one local move,
        LOCAL_REACH parameters, away from each), so one trap cannot hold the rest of the budget.
        The winner is still the best config measured anywhere."""
        k = self.space.key(self.inc)
        if k not in {self.space.key(e) for e in self.exhausted}:
            self.exhausted.append(dict(self.inc))
        far = [m.config for m in self.measured if m.ok and
               all(_changed(self.space, m.config, e) > LOCAL_REACH for e in self.exhausted)]
        if not far:
            return False
        start = min(far, key=self.ledger.estimate)
        self.ctx.log("move", from_config=self.inc, to_config=start, ids=self.ledger.ids(start),
                     reason="local search stalled: restart from the best config outside the basins searched")
        self.inc, self.stale = dict(start), 0
        self._observe(self.inc)
        return True

    def _hypotheses(self, inc: Config) -> list[_Test]:
        """The theory library's untested hypotheses for the incumbent, at most half a batch per
        theory, ranked by log(1 + expected gain x credibility) -- credibility of the theory and
        of the same move (parameter steps) in this run's verdicts -- plus the log-speed-up the
        additive model of this run's measurements predicts (so a move refuted at the last
        incumbent is not the first tried at the next)."""
        d = self._diagnose(inc)
        if d is None or not informative(d) or self.ctx.problem is None:
            return []
        try:
            hs = [h for h in hypotheses(d, self.ctx.problem, self.space, inc) if not self.known(h.to_config)]
        except Exception as e:  # noqa: BLE001 - a theory bug must not end the search
            self.ctx.log("hypothesis", error=f"hypotheses failed: {e}")
            return []
        if not hs:
            return []
        model = self._model()
        pred = model.predict([h.to_config for h in hs])
        base = float(model.predict([inc])[0])
        scored = []
        for i, h in enumerate(hs):
            cred = self.ledger.credibility(h.theory) * self._move_credibility(inc, h.to_config)
            # an interaction theory's moves are ones the additive model cannot rank: its prior
            # stands alone until this run has refuted it once
            th, tally = BY_NAME.get(h.theory), self.ledger.tallies.get(h.theory)
            blind = th is not None and th.interaction and (tally is None or tally.refuted == 0)
            model = 0.0 if blind else base - float(pred[i])
            scored.append((math.log1p(max(h.expected_gain, 0.0) * cred) + model, i, h))
        scored.sort(key=lambda t: (-t[0], t[1]))
        cap = max(1, math.ceil(self.s.batch / 2))
        per: dict[str, int] = {}
        out: list[_Test] = []
        for score, _i, h in scored:
            if per.get(h.theory, 0) >= cap:
                continue
            per[h.theory] = per.get(h.theory, 0) + 1
            out.append(_Test(h.theory, dict(h.to_config), math.expm1(score), h.reason))
        return out

    def _move(self, a: Config, b: Config) -> frozenset:
        """A move as parameter -> index steps (ordered) or new value (unordered)."""
        out = []
        for p in self.space.params:
            if a[p.name] != b[p.name]:
                out.append((p.name, p.index(b[p.name]) - p.index(a[p.name]) if p.ordered else b[p.name]))
        return frozenset(out)

    def _move_credibility(self, inc: Config, cfg: Config) -> float:
        """Laplace's rule over this run's verdicts on the same move from other incumbents."""
        t = self.move_tally.get(self._move(inc, cfg))
        return 1.0 if t is None else (t[0] + 1.0) / (t[0] + t[1] + 2.0) * 2.0

    def _model(self) -> Additive:
        if self._model_cache is not None and self._model_cache[0] == len(self.measured):
            return self._model_cache[1]
        model = self._fit_model()
        self._model_cache = (len(self.measured), model)
        return model

    def _rows(self) -> list[tuple[Config, float]]:
        """(config, log time) of every first measurement, for the additive model."""
        ok = [(m.config, math.log(m.time_ms)) for m in self.measured if m.ok]  # type: ignore[arg-type]
        if ok:  # failures sit a doubling above the slowest success, so the model avoids them
            worst = max(t for _, t in ok) + math.log(2.0)
            ok += [(m.config, worst) for m in self.measured if not m.ok and m.status != "pruned"]
        return ok

    def _fit_model(self) -> Additive:
        ok = self._rows()
        imp = importance(self.space, [m for m in self.measured if m.ok])
        top = [n for n, v in sorted(imp.items(), key=lambda kv: -kv[1]) if v > 0][:5]
        inter = interactions(self.space, [m for m in self.measured if m.ok], names=top) if len(top) > 1 else {}
        pairs = [p for p, v in sorted(inter.items(), key=lambda kv: -kv[1]) if v >= PAIR_MIN][:PAIR_TERMS]
        self._imp, self._inter, self._pairs = imp, inter, pairs
        return Additive(self.space, ok, pairs)

    def _model_tests(self, n: int, taken: set[tuple]) -> list[_Test]:
        """n proposals from the whole space by Thompson sampling: for each, the additive model
        is fitted to a bootstrap resample of the measurements and its fastest unmeasured
        config is taken. The resample's scatter is the model's uncertainty: a value seen
        rarely moves a lot between resamples, so the proposals explore where the model knows
        little and exploit where it is sure (the plain best prediction kept proposing the
        same region)."""
        if n <= 0 or len(self.measured) < 2:
            return []
        valid = self.space.valid_configs()
        if self._valid_X is None:
            self._valid_X = np.array([[p.index(c[p.name]) for p in self.space.params] for c in valid],
                                     dtype=np.int64)
        out: list[_Test] = []
        for _ in range(n):
            model = self._sampled_model()
            pred = model._fit(self._valid_X)
            for i in np.argsort(pred, kind="stable"):
                c = valid[int(i)]
                k = self.space.key(c)
                if k in taken or self.known(c) or not self._runnable(c):
                    continue
                taken.add(k)
                out.append(_Test(MODEL, dict(c), 0.0, "fastest unmeasured config of the additive model "
                                 "fitted to a bootstrap resample (Thompson sampling)"))
                break
        return out

    def _sampled_model(self) -> Additive:
        """The additive model (same interaction terms as `_model`) fitted to a bootstrap
        resample of the measurements: one draw from the model's uncertainty."""
        self._model()  # chooses the interaction terms (self._pairs) on all the measurements
        rows = self._rows()
        pick = self.ctx.np_rng.integers(len(rows), size=len(rows))
        return Additive(self.space, [rows[int(i)] for i in pick], self._pairs)

    def _local(self, inc: Config) -> list[_Test]:
        """Multi-parameter moves around the incumbent, ranked by the additive model's predicted
        gain (nearer moves first on ties)."""
        sp = self.space
        model = self._model()
        cands: dict[tuple, Config] = {}
        for c in itertools.chain(sp.neighbours(inc, 2), poll_points(sp, inc, 1), poll_points(sp, inc, 2),
                                 generic_moves(sp, inc, self._imp, self._inter, k=32)):
            k = sp.key(c)
            if k not in cands and not self.known(c):
                cands[k] = c
        if not cands:
            return []
        cs = list(cands.values())
        pred = model.predict(cs)
        base = float(model.predict([inc])[0])
        order = sorted(range(len(cs)), key=lambda i: (pred[i], sp.distance(cs[i], inc), i))
        return [_Test(POLL, cs[i], math.expm1(base - pred[i]),
                      f"{POLL}: {_describe(sp, inc, cs[i])} (model of {len(self.measured)} measurements)")
                for i in order]

    def _tpe_tests(self, n: int, taken: set[tuple]) -> list[_Test]:
        """n untested configs from TPE (told everything measured); a proposal TPE keeps
        repeating is replaced by a random unmeasured config."""
        if n <= 0:
            return []
        if self.tpe is None:
            self.tpe = TPEModel(self.space, self.s.seed, n_startup_trials=0)
            for m in self.tpe_pool:
                self.tpe.add(m)
        out: list[_Test] = []
        for _ in range(n):
            got = None
            for _try in range(MAX_TPE_RETRIES):
                trials, [cfg] = self.tpe.ask(1)
                k = self.space.key(cfg)
                if not self.known(cfg) and k not in taken and self._runnable(cfg):
                    self._pending_trials[k] = trials[0]
                    got = cfg
                    break
                prev = self.ctx.known(cfg)
                self.tpe.study.tell(trials[0], value(prev) if prev is not None else PENALTY)
            if got is None:
                rest = [c for c in self.space.valid_configs() if not self.known(c) and self.space.key(c) not in taken
                        and self._runnable(c)]
                if not rest:
                    break
                got = dict(rest[int(self.ctx.np_rng.integers(len(rest)))])
            taken.add(self.space.key(got))
            out.append(_Test(TPE_TEST, got, 0.0, "model-based proposal (TPE over everything measured)"))
        return out

    def _log_tests(self, tests: Sequence[_Test], ms: Sequence[Measurement]) -> None:
        for t, m in zip(tests, ms):
            self.ctx.log("hypothesis", theory=t.theory, config=t.config, from_config=self.inc,
                         expected_gain=t.gain, credibility=self.ledger.credibility(t.theory), reason=t.reason)
            self.ctx.log("test", theory=t.theory, config=t.config, ids=[m.id] if m.id is not None else [],
                         status=str(m.status), time_ms=m.time_ms)
            if self.tpe is not None:
                trial = self._pending_trials.pop(self.space.key(t.config), None)
                if trial is not None:
                    self.tpe.tell([trial], [m])
            if t.theory in (START, TPE_TEST, MODEL):
                self._pool(t.config)

    # -- judging
    def _judge(self, tests: Sequence[_Test]) -> Proposals:
        inc = self.inc
        led = self.ledger
        if inc is None:  # nothing ran yet: the first success becomes the incumbent
            self.inc = self._best()
            if self.inc is not None:
                self.ctx.log("move", from_config=None, to_config=self.inc, ids=led.ids(self.inc),
                             reason="first successful measurement")
                self._observe(self.inc)
            return
        outcomes = {id(t): led.compare(t.config, inc)[0] for t in tests}
        close = [t for t in tests if led.needs_confirmation(t.config, inc)]
        sure = [t for t in tests if outcomes[id(t)] == "supported" and t not in close]
        confirmed: _Test | None = None
        if close:  # confirm the most promising doubtful win, unless a sure win beats it anyway
            c = min(close, key=lambda t: led.estimate(t.config))
            if not sure or led.estimate(c.config) < min(led.estimate(t.config) for t in sure):
                confirmed = c
                rm = yield self.ctx.remeasure([inc, c.config])
                for m in rm:
                    led.observe(m)
                self.ctx.log("test", theory=c.theory, config=c.config, kind="remeasure",
                             ids=[m.id for m in rm], time_ms=[m.time_ms for m in rm],
                             reason="close call: incumbent and candidate re-measured, interleaved")
        winners: list[_Test] = []
        significant = False  # a win beyond noise: only that keeps the local search going
        for t in tests:
            v = led.record(t.theory, t.config, inc, confirmed=t is confirmed)
            self.ctx.log("verdict", **v.to_dict())
            tally = self.move_tally.setdefault(self._move(inc, t.config), [0, 0])
            tally[0] += v.outcome == "supported"
            tally[1] += v.outcome in ("refuted", "failed")
            faster = led.estimate(t.config) < led.estimate(inc)
            if v.outcome == "supported" or (faster and (t is confirmed or led.deterministic)):
                winners.append(t)
            significant |= v.outcome == "supported"
        # generic mode: TPE's misses say nothing about the incumbent's basin, so they do not
        # bring its restart closer
        counted = [t for t in tests if t.theory != TPE_TEST] if self.generic else tests
        self.stale = 0 if significant else self.stale + len(counted)
        if not winners:
            return
        best = min(winners, key=lambda t: led.estimate(t.config))
        self._compose(inc, [t for t in winners if t is not best], best)
        self.ctx.log("move", from_config=inc, to_config=best.config, theory=best.theory,
                     ids=led.ids(best.config) + led.ids(inc),
                     ratio=led.estimate(best.config) / led.estimate(inc))
        self.inc = dict(best.config)
        self._pool(self.inc)
        self._observe(self.inc)

    def _compose(self, inc: Config, others: Sequence[_Test], best: _Test) -> None:
        """Queue the winner plus each other winning move on different parameters."""
        for t in sorted(others, key=lambda t: self.ledger.estimate(t.config)):
            cfg = _composition(inc, best.config, t.config)
            if cfg is not None and self.space.is_valid(cfg) and not self.known(cfg):
                self.queue.append(_Test(COMPOSE, cfg, 0.0, f"{COMPOSE}: {best.theory} + {t.theory} "
                                        f"({_describe(self.space, inc, cfg)}), both supported"))
                self.ctx.log("hypothesis", theory=COMPOSE, config=cfg, from_config=best.config,
                             reason=f"{best.theory} and {t.theory} both won on different parameters")


def _composition(inc: Config, a: Config, b: Config) -> Config | None:
    """Move a plus move b, both from `inc`, where they change different parameters (None
    where b changes nothing or shares a parameter with a)."""
    mine = {k for k, v in a.items() if inc.get(k) != v}
    theirs = {k: v for k, v in b.items() if inc.get(k) != v}
    if not theirs or mine & set(theirs):
        return None
    return {**a, **theirs}


def _changed(space: Space, a: Config, b: Config) -> int:
    """How many parameters differ between a and b."""
    return sum(a[n] != b[n] for n in space.names)


def _describe(space: Space, a: Config, b: Config) -> str:
    return ", ".join(f"{n} {a.get(n)}->{b.get(n)}" for n in space.names if a.get(n) != b.get(n))
