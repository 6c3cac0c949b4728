"""Abduction: explain why the incumbent is slow and measure only what the explanation predicts.

This module holds the strategy (its options) and the engine whose loop (observe, diagnose,
test, judge) ties the parts of this package."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...measurement import Measurement
from ...space import Config
from ...theory import resources
from ...theory.check import HEAVY_SPILL_BYTES, relief
from ...theory.diagnose import Diagnosis, diagnose
from ...theory.evidence import CONFIDENCE, NOISE_FLOOR, Ledger
from .. import options as opt
from ..base import Proposals, SearchContext, Strategy
from ..tpe import TPEModel
from .ledger import RunLedger, _unseen_kernel
from .model import Additive, ModelFit, latin_hypercube
from .moves import EXPLORE, LOCAL, RELIEF, START, _Test
from .planning import BatchPlanner, informative
from .stop import StopRule


class Abduction(Strategy):
    """Options: batch=3 (tests per batch, 1-8), confidence=2.0 (standard errors of the
    difference for a verdict), noise_floor=0.01 (smallest relative difference trusted),
    startup=8 (space-filling configs in generic mode), seeded_startup=None (the same when
    seeds were measured: None keeps `startup`; at least half of it is fresh; also the size of
    the exploring share's space-filling start),
    patience=None (tests without a win beyond noise before TPE takes over, or in generic
    mode local tests before a restart; None: twice the tuned parameters, at least 8), tpe_slots=2 (generic mode: TPE proposals
    in every batch, part of `batch`), model_slots=1 (generic mode: Thompson-sampled proposals
    of the additive model in every batch, on top of `batch`), seeded_model_slots=0 (the same
    when seeds were measured: None keeps `model_slots`; session 18, on synthetic generic
    landscapes with poor seeds the model fitted to a cluster of seeds and a few draws spent
    its slot where seeded random did better), stop_early=False (end before the
    budget once the search has settled: see `_Engine._settled`), explore_unseen=True (on a
    kernel no theory was confirmed on, a share of each batch draws from the whole space, the
    head of the ranker's order (`Knowledge.prior`) and a space-filling start in turn, then
    TPE, sized by how often its tests and the local tests beat the incumbent, and each theory
    gets one test per batch, until the theories have won EARN_TRUST tests on it, and the share
    goes on after that only while its tests keep winning: see
    `_Engine._pooled_trust`, `_global_slots`; session 16's form polled the incumbent's
    neighbourhood instead, and stayed in the basin of a seed the theories got wrong),
    explore=True (whether that exploring share may run at all, on any kernel: off where the
    caller has already spread measurements over the space and hands the strategy a local
    refinement with a small budget, as Helion's searched views do after their seeds phase;
    the theories' one test per batch on an unseen kernel stands),
    cold_start=3 (on such a kernel with no seed measured, the ranker's head and space-filling
    draws in turn, measured beside the default before any theory's move: `_Engine._cold_draws`;
    session 19, chosen by nested leave-one-kernel-out over the zoo kernels it reaches among 0,
    3 and 7, then 0, 1, 3, 5, 7: from the default alone fla's chunk_h search stayed in the 1-warp default's basin),
    centre_roles=() (parameter roles, "*" for every ordered parameter, whose space-filling draws
    lean to the middle of their range: `model.centre_weights`; session 35: for every parameter
    it was worse on Kernel Tuner's public spaces, 1.571 -> 1.713 at 8 evaluations; for warps and
    stages it is in-sample on the zoo only, so it stays off until fresh kernels judge it)."""

    name = "abduction"

    def __init__(self, seed: int = 0, batch: int = 3, confidence: float = CONFIDENCE,
                 noise_floor: float = NOISE_FLOOR, startup: int = 8, patience: int | None = None,
                 tpe_slots: int = 2, model_slots: int = 1, stop_early: bool = False,
                 seeded_startup: int | None = None, explore_unseen: bool = True, explore: bool = True,
                 seeded_model_slots: int | None = 0, cold_start: int = 3,
                 centre_roles: Sequence[str] = (), **options: Any):
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
        self.seeded_model_slots = self.model_slots if seeded_model_slots is None else \
            opt.integer(self.name, "seeded_model_slots", seeded_model_slots, 0, 8)
        self.stop_early = opt.boolean(self.name, "stop_early", stop_early)
        self.explore_unseen = opt.boolean(self.name, "explore_unseen", explore_unseen)
        self.explore = opt.boolean(self.name, "explore", explore)
        self.cold_start = opt.integer(self.name, "cold_start", cold_start, 0, 16)
        self.centre_roles = opt.roles(self.name, "centre_roles", centre_roles)

    def propose(self, ctx: SearchContext) -> Proposals:
        return (yield from _Engine(self, ctx).run())


# The engine is one object over one run; its methods are grouped by concept in the parts it
# inherits (none overrides another's): the ledger (`ledger`), batch planning (`planning`), the
# additive model (`model`) and the ends of a local search (`stop`). The loop is here.
class _Engine(RunLedger, BatchPlanner, ModelFit, StopRule):
    def __init__(self, strategy: Abduction, ctx: SearchContext):
        self.s = strategy
        self.ctx = ctx
        self.space = ctx.space
        self.ledger = Ledger(self.space.key, floor=strategy.noise_floor, confidence=strategy.confidence)
        self.measured: list[Measurement] = []  # first-time answers, in order (for the models)
        self.inc: Config | None = None
        self.generic = False
        self.queue: list[_Test] = []  # composed hypotheses to test next
        self.extension: _Test | None = None  # the last winning move once more (`_extend`)
        self.stale = 0  # tests since the last win beyond noise
        self.tpe: TPEModel | None = None
        # What TPE is told: seeds, the space-filling start, its own proposals and every
        # incumbent -- not the local moves around an incumbent, whose dense cluster would make
        # the incumbent's basin TPE's whole "good" set and keep the fallback inside it.
        self.tpe_pool: list[Measurement] = []
        free = sum(len(p.values) > 1 for p in self.space.params)
        self.patience = strategy.patience or max(8, 2 * free)
        self.startup = strategy.startup
        # generic mode's Thompson-sampled slots: fewer once seeds were measured (`seeded_model_slots`)
        self.model_slots = strategy.seeded_model_slots if ctx.history else strategy.model_slots
        self.diag_cache: dict[tuple, Diagnosis] = {}
        self.move_tally: dict[frozenset, list[int]] = {}  # move -> [supported, refuted]
        self._pending_trials: dict[tuple, Any] = {}  # config key -> the TPE trial that proposed it
        self._valid_X: np.ndarray | None = None  # value indices of every valid config (model_slots)
        self._model_cache: tuple[int, Additive] | None = None  # (measurements it was fitted on, model)
        self._imp: dict[str, float] = {}
        self._inter: dict[tuple[str, str], float] = {}
        self._pairs: list[tuple[str, str]] = []
        self._inert_cache: tuple[int, frozenset[str]] | None = None  # (measurements, inert parameters)
        self._named_at: tuple[tuple, frozenset[tuple]] | None = None  # (incumbent key, steps `_named` gives there)
        self.exhausted: list[Config] = []  # generic mode: incumbents where the local search stalled
        self._cannot_run: dict[tuple, str | None] = {}  # config key -> why it cannot launch (None: it can)
        self._spill_cache: dict[tuple, str | None] = {}  # config key -> why it spills (None: it does not)
        self._passed_over: set[tuple] = set()  # space-filling draws sent to the back for spilling (`_lhs_draw`)
        self.distrusted = False  # the theories have not earned trust on this kernel (`_global_slots`)
        self.explore_share = 0  # slots of the last batch that explored the whole space (`_global_slots`)
        # per side, [tests that beat the incumbent beyond noise, tests] (`_tally_sides`)
        self.sides = {LOCAL: [0, 0], EXPLORE: [0, 0]}
        self.explore_start: list[Config] | None = None  # the exploring share's space-filling start
        self.prior_pos = 0  # how far into `Knowledge.prior` the exploring share has read
        self.prior_used = 0  # configs of it proposed (`_prior_draws`)
        self.prior_keys: set[tuple] = set()  # their keys, to read their verdicts (`_prior_failed`)
        self.prior_dropped = False  # the prior lost its turn on this kernel
        self.explore_turn = 0  # the exploring share's draws so far: the ranker's and the sample's alternate
        self.close_calls: list[tuple[tuple, Config]] = []  # (incumbent key, a close call it has not run off)
        self.theory_trust: dict[str, bool] = {}  # theory -> keeps its credit on this kernel (`_theory_trust`)
        self.unseen_kernel = _unseen_kernel(ctx.problem) if strategy.explore_unseen else None

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
            start = [_Test(START, *self._start_default())] \
                + [_Test(START, c, 0.0, ("cold start: the ranker's next config (learned on other kernels)"
                                         if ranked else "cold start: a space-filling draw")
                         + " (no seed ran on a kernel no theory was confirmed on)") for c, ranked in self._cold_draws()]
            start = [t for t in start if not self.known(t.config)]
            if start:
                ms = yield [t.config for t in start]
                self._log_tests(start, ms)
                self._note(ms)
            self.inc = self._best()
        if self.inc is not None:
            self._observe(self.inc)
            if not self.generic:
                self._relieve_seed()
        while True:
            if not self.generic and self.inc is not None and self.stale >= self.patience \
                    and not self.ledger.noise_known(self.inc, self.inc):
                yield from self._noise_probe("an incumbent that stood against `patience` tests re-measured")
            if self.inc is not None and self.stale >= self.patience:
                yield from self._run_off()
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

    def _relieve_seed(self) -> None:
        """Queue one test ahead of the first batch: the first seed (in the order measured) that
        ran but spilled heavily (`theory.check.HEAVY_SPILL_BYTES`, as the compiler reported it)
        and is not the incumbent, relieved of registers as the zero-shot compile check relieves
        a prediction (`theory.check.relief`: more warps, a smaller K tile, both, then a smaller
        output tile; the first such config that is valid, unmeasured and that the resource model
        lets launch). Why: a seed's time is taken as what its region runs at, and a heavy spill
        is a fault of that one config (local memory traffic), not of the region, which the
        local search, moving from the fastest seed, never revisits. Seen on the zoo's
        persistent matmul at 512 x 5,000 x 3,000 (session 45): the theory's 128 x 256 x 64 seed
        spilled 792 bytes at 4.5x the optimum, which is the same tile with a K tile of 32
        (44 bytes); the search moved from a 128 x 128 seed and ended 1.21x at 16 evaluations
        over 20 repeats. That shape's figure is in-sample for this rule; one test, once per run."""
        here = self.space.key(self.inc)
        for m in self.ctx.history:
            if not m.ok or (m.spills or 0) < HEAVY_SPILL_BYTES or self.space.key(m.config) == here:
                continue
            for c in relief(self.space, m.config):
                if self.space.is_valid(c) and not self.known(c) and self._runnable(c):
                    moved = ", ".join(f"{k} {m.config[k]} -> {c[k]}" for k in c if m.config.get(k) != c[k])
                    why = (f"{RELIEF}: a seed spilled {m.spills} bytes a thread; the same with fewer registers "
                           f"per thread ({moved}) says what its region runs at without the spill")
                    self.queue.append(_Test(RELIEF, dict(c), 0.0, why))
                    self.ctx.log("hypothesis", theory=RELIEF, config=c, from_config=m.config, reason=why)
                    return

    def _start_default(self) -> tuple[Config, float, str]:
        """The cold start's first config: the space default, or where the resource model says
        it cannot launch here (a list written for another GPU opens with it), the least move
        into what it accepts (`resources.runnable_default`): a measurement is not spent on a
        failure the model foresees."""
        cfg = self.space.default()
        if self.ctx.problem is None or self._runnable(cfg):
            return cfg, 0.0, "the space default"
        moved, why = resources.runnable_default(self.ctx.problem, self.space, cfg)
        return moved, 0.0, "; ".join(("the space default, moved to launch", *why))

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

    def _cold_draws(self) -> list[tuple[Config, bool]]:
        """With no seed measured on a kernel no theory was confirmed on (`unseen_kernel`), the
        head of the ranker's order and the exploring share's space-filling sample in turn
        (`_explore_draw`; each with whether it came from the ranker), `cold_start` in all,
        measured beside the default: nothing says the default's basin is the one to search, and
        the theories' moves from it are untested here."""
        n = self.s.cold_start
        if n <= 0 or self.ctx.history or self.unseen_kernel is None:
            return []
        taken = {self.space.key(self.space.default())}
        if self.explore_start is None:
            self.explore_start = latin_hypercube(self.space, self.s.seeded_startup, self.ctx.np_rng, self.s.centre_roles)
        out: list[tuple[Config, bool]] = []
        while len(out) < n and (drawn := self._explore_draw(taken)) is not None:
            out.append(drawn)
        return out

    def _start_size(self) -> int:
        """How many configs a space-filling start draws (generic mode's start, the exploring
        share's): `startup`, or with configs measured already `seeded_startup` less those,
        but at least half of it fresh."""
        have = len(self.measured)
        size = self.s.seeded_startup if have else self.startup
        return max(size - have, (size + 1) // 2 if have else size)

    def _startup(self) -> Proposals:
        """Generic mode: a space-filling sample; seeds count towards it, but at least half of
        it is fresh so one mediocre seed cannot decide where the search looks."""
        n = self._start_size()
        picks = [c for c in latin_hypercube(self.space, n, self.ctx.np_rng, self.s.centre_roles) if not self.known(c)]
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
            yield from self._noise_probe("the best start re-measured")

    def _noise_probe(self, why: str) -> Proposals:
        """Re-measure the incumbent once: the run-to-run noise, which nothing measured had shown.
        Generic mode does it after its start. With theories it is done once the local search
        first stalls: until then every verdict and the additive model's shrinkage (`_shrink`)
        took the noise to be the floor, and an incumbent that stood against `patience` tests
        may be one measured fast by chance (under the bundled noise study's 2.9% noise the stop
        rule settled on such an incumbent 5% from the optimum). If the repeat moves it behind
        another config, that one becomes the incumbent."""
        rm = yield self.ctx.remeasure([self.inc])
        for m in rm:
            self.ledger.observe(m)
        self.ctx.log("test", theory=START, config=self.inc, kind="remeasure", ids=[m.id for m in rm],
                     time_ms=[m.time_ms for m in rm], reason=f"noise probe: {why}")
        best = self._best()
        if not self.generic and best is not None and best != self.inc:
            self.ctx.log("move", from_config=self.inc, to_config=best, ids=self.ledger.ids(best),
                         reason="noise probe: the incumbent's repeat put another config ahead")
            self.inc = best
            self._observe(best)

    def _run_off(self) -> Proposals:
        """At the stall (`patience` tests without a win beyond noise), the close calls this
        incumbent met and did not confirm (`_confirm_now`): the fastest of them and the
        incumbent are re-measured, interleaved, and the faster by the pooled times becomes
        the incumbent (within noise either is as good a centre; the run-off decides once).
        Nothing is re-measured when no close call was faster."""
        k = self.space.key(self.inc)
        est = self.ledger.estimate
        rivals = [c for ik, c in self.close_calls if ik == k and est(c) < est(self.inc)]
        self.close_calls = [(ik, c) for ik, c in self.close_calls if ik != k]
        if not rivals:
            return
        c = min(rivals, key=est)
        rm = yield self.ctx.remeasure([self.inc, c])
        for m in rm:
            self.ledger.observe(m)
        self.ctx.log("test", theory=START, config=c, kind="remeasure", ids=[m.id for m in rm],
                     time_ms=[m.time_ms for m in rm],
                     reason="run-off at the stall: the fastest close call left unconfirmed and the incumbent "
                            "re-measured, interleaved")
        if est(c) < est(self.inc):
            self.ctx.log("move", from_config=self.inc, to_config=c, ids=self.ledger.ids(c) + self.ledger.ids(self.inc),
                         ratio=est(c) / est(self.inc), reason="run-off at the stall: the close call was faster")
            self.inc = dict(c)
            self._pool(self.inc)
            self._observe(self.inc)

    def _observe(self, cfg: Config) -> None:
        d = self._diagnose(cfg)
        fields: dict[str, Any] = {"config": cfg, "ids": self.ledger.ids(cfg), "time_ms": self.ledger.estimate(cfg)}
        if d is not None and informative(d):
            fields.update(bound=d.bound, frac_peak_flops=d.frac_peak_flops, frac_peak_bw=d.frac_peak_bw,
                          tiles=d.tiles, waves=d.waves, occupancy=d.occupancy, padding=d.padding,
                          k_trips=d.k_trips)
        self.ctx.log("observe", **fields)
