"""Batch planning: which configs the next batch tests (hypotheses, finishing moves, model and TPE proposals)."""
from __future__ import annotations

import itertools
import math
from typing import Callable, Sequence

import numpy as np

from ...measurement import Measurement
from ...space import Config, Space
from ...theory.diagnose import Diagnosis, diagnose
from ...theory.evidence import NOISE_FLOOR
from ...theory.generic import generic_moves
from ...theory.library import BY_NAME, PRESSURE, hypotheses
from ...theory import resources
from ..pattern import poll_points
from ..tpe import PENALTY, TPEModel, value
from .model import latin_hypercube
from .moves import COARSE_STEP, EXPLORE, MODEL, POLL, TPE_TEST, _composition, _describe, _Test

LOOKAHEAD = 12  # configs a batch names as likely next (compiled ahead by a live evaluator)
MAX_TPE_RETRIES = 8  # TPE asks per slot before a random unmeasured config is taken instead
# configs of `Knowledge.prior` (the ranker's order) the exploring share and the cold start take
# before they sample the space: half of the exploring share's seeded start (`seeded_startup` 8),
# set by that reasoning before any figure was read (session 22)
PRIOR_DRAWS = 4


def _coarse_first(space: Space, inc: Config, cfg: Config, named: frozenset[tuple] = frozenset()) -> float:
    """Order of a local move among moves the model cannot tell apart: a single ordered parameter
    moved COARSE_STEP values first, then one value, then everything else by distance. Where the
    model knows nothing, one coarse probe per direction learns more than two fine ones, the
    reason pattern search starts at its largest step; a fine step after it is still tried.
    Where the register-pressure theory names the one-value step of that parameter in that
    direction at a spilling incumbent (`named`, config keys: `BatchPlanner._named`), the step
    takes the coarse probe's place and the probe goes with the fine steps: the diagnosis has
    said how far, and the blind probe is only the better guess where nothing has (a spilling
    tile halved, not quartered). Either way one move per direction leads, so the ties probe as
    many parameters as before."""
    changed = [p for p in space.params if cfg[p.name] != inc[p.name]]
    if len(changed) == 1 and changed[0].ordered:
        p = changed[0]
        d = p.index(cfg[p.name]) - p.index(inc[p.name])
        if abs(d) == COARSE_STEP:
            near = p.step(inc[p.name], 1 if d > 0 else -1)
            return 1.0 if named and near is not None and space.key({**inc, p.name: near}) in named else 0.0
        if abs(d) == 1:
            return 0.0 if named and space.key(cfg) in named else 1.0
    return 2.0 + space.distance(cfg, inc)


def informative(diag: Diagnosis) -> bool:
    """Whether the diagnosis knows anything beyond the time: a roofline position or the
    occupancy (static facts). Without either, no theory can explain the config."""
    return diag.bound != "unknown" or diag.occupancy is not None


class BatchPlanner:
    """What `strategy._Engine` (a part of it, whose state it reads) tests next: the queue of
    composed moves, the theories' hypotheses and the finishing moves on one scale, the model's
    and TPE's proposals, the stalled sweep, what a live evaluator may compile ahead, and the
    configs the resource model says cannot launch ("prune")."""

    def _next_tests(self) -> list[_Test]:
        # generic mode: the model's Thompson-sampled proposals come on top of the batch
        b = self.s.batch + (self.model_slots if self.generic else 0)
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
        if not self.generic:  # generic mode has no theory to trust
            self._pooled_trust()
        # stalled: restart from another basin (generic mode at once; with theories only after
        # the sweep of the nearest moves beside TPE has had `patience` more tests). If no
        # config lies outside the searched basins, TPE takes over below.
        if self.inc is not None and (self.stale >= self.patience * (1 if self.generic else 2)
                                     or (not self.generic and self.stale > 0 and self._polled_out())):
            self._restart()
        explore: list[_Test] = []
        if self.inc is not None:
            stalled = self.stale >= self.patience
            # until the theories have earned trust here, and after that while it keeps winning,
            # a share of the batch draws from the whole space (`_global_slots`); the stalled
            # phase below has TPE's share already
            n_explore = 0 if self.generic or stalled else self._global_slots(b)
            explore = self._explore_tests(n_explore, taken)
            b -= len(explore)
            while self.queue and len(tests) < b:
                take(self.queue.pop(0))
            hyps = sorted(self._hypotheses(self.inc) + self._extensions(), key=lambda t: -t.gain)
            if self.stale >= self.patience:  # stalled: only a theory that still expects a gain
                for t in hyps:
                    if len(tests) < b and t.gain > 0:
                        take(t)
                if not self.generic and len(tests) < b:
                    # and the nearest untested moves, whatever the model says of them: it has
                    # been wrong `patience` times here, so the neighbourhood is swept in order
                    near = sorted(self._local(self.inc), key=lambda t: self.space.distance(t.config, self.inc))
                    stop = len(tests) + max(1, (b - len(tests)) // 2)  # the other half: TPE
                    self._fill(near, stop, take, tests)
                n_tpe = b - len(tests)
            else:
                n_tpe = min(self.s.tpe_slots, b - len(tests)) if self.generic else 0
                local = self._local(self.inc)
                if self.generic:
                    tests += self._model_tests(min(self.model_slots, b - n_tpe - len(tests)), taken)
                # theory hypotheses and finishing moves compete on one scale: log expected speed-up
                self._fill(self._ranked(hyps + local), b - n_tpe, take, tests)
        tests += explore
        b += len(explore)
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

    def _ranked(self, tests: Sequence[_Test]) -> list[_Test]:
        """`tests` best first. An expected gain within the noise threshold at the incumbent is
        one no measurement could confirm, so such tests tie (the additive model fitted to a few
        configs predicts differences of a fraction of a percent from noise and from parameters
        that changed together, and ranking on them sent early batches along those parameters
        instead of probing the others); ties go coarse first (`_coarse_first`), and among
        single-parameter moves of one kind, one per parameter before a second on any, so a
        batch learns about as many parameters as it can, as pattern search's poll does. A
        parameter that a test ranked ahead of the ties (an expected gain past the threshold)
        moves alone has had its first turn: the ties probe the others first."""
        inc = self.inc
        sp = self.space
        thr = self.ledger.threshold(inc, inc)
        named = self._named(inc)
        turns: dict[tuple[float, str], int] = {}
        keys = []
        moves = [[p.name for p in sp.params if t.config[p.name] != inc[p.name]] for t in tests]
        ahead = {m[0] for t, m in zip(tests, moves) if t.gain > thr and len(m) == 1}
        for i, t in enumerate(tests):
            g = t.gain
            if g < -thr:
                keys.append((2, -g, 0.0, 0, i))
            elif g > thr:
                keys.append((0, -g, 0.0, 0, i))
            else:
                cls = _coarse_first(sp, inc, t.config, named)
                alone = moves[i]
                turn = 0
                if len(alone) == 1:
                    turn = turns[(cls, alone[0])] = turns.get((cls, alone[0]), -1) + 1
                    turn += alone[0] in ahead
                keys.append((1, 0.0, cls, turn, i))
        return [tests[k[-1]] for k in sorted(keys)]

    def _inert(self) -> frozenset[str]:
        """Parameters that have made no difference beyond noise wherever this run varied one
        alone: every pair of measured configs that differ in it and nothing else is within the
        ledger's noise threshold, and there is at least one such pair (num_stages in a kernel
        with no loop, a group size with one row of tiles). What is inert at one incumbent may
        not be at another, so this only orders tests (`_fill`), it forbids none."""
        n = len(self.measured)
        if self._inert_cache is not None and self._inert_cache[0] == n:
            return self._inert_cache[1]
        ok = [m.config for m in self.measured if m.ok]
        led = self.ledger
        inert = set()
        for p in self.space.params:
            groups: dict[tuple, list[Config]] = {}
            for c in ok:  # configs equal in every other parameter
                groups.setdefault(tuple(c[q.name] for q in self.space.params if q is not p), []).append(c)
            pairs = [(a, b) for g in groups.values() for i, a in enumerate(g) for b in g[i + 1:]]
            if pairs and all(abs(led.estimate(a) / led.estimate(b) - 1.0) <= led.threshold(a, b) for a, b in pairs):
                inert.add(p.name)
        self._inert_cache = (n, frozenset(inert))
        return self._inert_cache[1]

    def _same_time(self) -> Callable[[Config], tuple]:
        """A config's values in the parameters that are not inert (`_inert`): two configs with
        the same key would, as far as this run can tell, measure the same time."""
        live = [p.name for p in self.space.params if p.name not in self._inert()]
        return lambda c: tuple(c[n] for n in live)

    def _fill(self, cands: Sequence[_Test], stop: int, take: Callable[[_Test], bool], tests: list[_Test]) -> None:
        """Take `cands` in order until the batch holds `stop` tests. A near-duplicate, a config
        whose only differences from one measured or already in this batch are inert parameters,
        would measure a known time again, and a move the resource model says spills registers
        (`_spill_why`) would most likely measure a config many times slower than its neighbours:
        both wait until no other candidate is left (the spilling ones last)."""
        key = self._same_time()
        seen = {key(m.config) for m in self.measured if m.ok} | {key(t.config) for t in tests}
        later: list[_Test] = []
        spilling: list[_Test] = []
        for t in cands:
            if len(tests) >= stop:
                return
            if key(t.config) in seen:
                later.append(t)
            elif self._spill_why(t.config) is not None:
                spilling.append(t)
            elif take(t):
                seen.add(key(t.config))
        for t in later + spilling:
            if len(tests) >= stop:
                return
            take(t)

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
        rest = [t.config for t in self._ranked(self._hypotheses(inc) + self._local(inc))
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

    def _hypotheses(self, inc: Config) -> list[_Test]:
        """The theory library's untested hypotheses for the incumbent, at most half a batch per
        theory, ranked by log(1 + expected gain x credibility) -- credibility of the theory and
        of the same move (parameter steps) in this run's verdicts, none for a theory that lost
        its credit on this kernel (`_theory_trusted`) -- plus the log-speed-up the
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
        # the register-pressure theory's steps where the incumbent measured spills (`_named`)
        self._named_at = (self.space.key(inc), frozenset(self.space.key(h.to_config) for h in hs
                                                         if d.spills and h.theory == PRESSURE.name
                                                         and self._theory_trusted(h.theory)))
        if not hs:
            return []
        model = self._model()
        pred = model.predict([h.to_config for h in hs])
        base = float(model.predict([inc])[0])
        scored = []
        for i, h in enumerate(hs):
            # a theory whose predictions lost more than they won on this kernel has lost its
            # credit here (`_theory_trust`): its moves rank only as the model ranks them
            trusted = self._theory_trusted(h.theory)
            cred = self.ledger.credibility(h.theory) * self._move_credibility(inc, h.to_config) if trusted else 0.0
            # an interaction theory's moves are ones the additive model cannot rank: its prior
            # stands alone until this run has refuted it once
            th, tally = BY_NAME.get(h.theory), self.ledger.tallies.get(h.theory)
            blind = th is not None and th.interaction and (tally is None or tally.refuted == 0)
            model = 0.0 if blind else base - float(pred[i])
            scored.append((math.log1p(max(h.expected_gain, 0.0) * cred) + model, i, h))
        scored.sort(key=lambda t: (-t[0], t[1]))
        # at most half a batch per theory; until the theories have earned trust on this kernel
        # (`_pooled_trust`), one test per batch for a theory that has not won here yet: its
        # first test says whether it applies here at all
        cap = max(1, math.ceil(self.s.batch / 2))
        per: dict[str, int] = {}
        out: list[_Test] = []
        for score, _i, h in scored:
            won = h.theory in self.ledger.tallies and self.ledger.tallies[h.theory].supported > 0
            if per.get(h.theory, 0) >= (cap if won or not self.distrusted else 1):
                continue
            per[h.theory] = per.get(h.theory, 0) + 1
            out.append(_Test(h.theory, dict(h.to_config), math.expm1(score), h.reason))
        return out

    def _named(self, inc: Config) -> frozenset[tuple]:
        """Keys of the untested configs `_coarse_first` lets take a coarse probe's place at
        `inc`: the register-pressure theory's moves where `inc` measured spills, all of them
        (before `_hypotheses` caps what a theory may test in one batch), unless the theory lost
        its credit on this kernel (`_theory_trusted`); empty until `_hypotheses` has run at
        `inc`. Only that theory's: a spill is a measured fact about the config, where the other
        theories read a roofline; with every theory's moves so placed, abduction fell behind
        seeded random where every theory points the wrong way (`tests/test_abduction_trust.py`,
        the bundled matmul under its own name with its times inverted: 2.52 against random's
        2.34 times the optimum at 16 evaluations; 2.12 with this theory's alone). And the steps
        short of a coarse probe's value that only ever failed here (`_halved`)."""
        got = self._named_at
        named = got[1] if got is not None and got[0] == self.space.key(inc) else frozenset()
        return named | self._halved(inc)

    def _halved(self, inc: Config) -> frozenset[tuple]:
        """Keys of the one-value steps from `inc` whose coarse probe's value failed wherever this
        run measured it (every config with it failed to compile, launch or check; none ran):
        pattern search halves its step where the coarse poll fails, and a failure says nothing
        of how the value one step short would run. Without this, a failed probe of two more
        stages booked that value as slow, the step of one stage ranked with the fine steps, and
        a small budget never reached it (Helion's attention at 24 evaluations, session 44)."""
        failed: dict[str, set] = {}
        ran: dict[str, set] = {}
        for m in self.measured:
            if m.status == "pruned":
                continue
            for p in self.space.params:
                (ran if m.ok else failed).setdefault(p.name, set()).add(m.config[p.name])
        out = set()
        for p in self.space.params:
            if not p.ordered:
                continue
            bad = failed.get(p.name, set()) - ran.get(p.name, set())
            for s in (1, -1):
                far, near = p.step(inc[p.name], COARSE_STEP * s), p.step(inc[p.name], s)
                if far is None or near is None or near in bad:
                    continue
                # or a probe the resource model says cannot launch here (`_runnable`): the
                # failure foreseen rather than measured, so pattern search's step halves the same
                # way (a pipeline two stages deeper over the shared memory, one deeper within it)
                probe = {**inc, p.name: far}
                foreseen = self.space.is_valid(probe) and not self._runnable(probe)
                if far in bad or foreseen:
                    out.add(self.space.key({**inc, p.name: near}))
        return frozenset(out)

    def _local(self, inc: Config) -> list[_Test]:
        """Multi-parameter moves around the incumbent, ranked by the additive model's predicted
        gain; on ties (values the model has not seen, which it holds level with the better of
        the nearest it has on either side) coarse before fine, as pattern search polls
        (`_coarse_first`)."""
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
        # ties: equal to 1e-9 in log time (sums of the same effects in another order)
        named = self._named(inc)
        order = sorted(range(len(cs)), key=lambda i: (round(float(pred[i]), 9), _coarse_first(sp, inc, cs[i], named), i))
        return [_Test(POLL, cs[i], math.expm1(base - pred[i]),
                      f"{POLL}: {_describe(sp, inc, cs[i])} (model of {len(self.measured)} measurements)")
                for i in order]

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

    def _explore_tests(self, n: int, taken: set[tuple]) -> list[_Test]:
        """The exploring share (`_global_slots`): n untested configs from the whole space. First
        a space-filling sample (a Latin hypercube over value indices, drawn once, as large as
        generic mode's seeded start: `seeded_startup`, at least half of it fresh), so the first
        draws cover every parameter's range wherever the seeds sit; then TPE, told the seeds,
        these draws and every incumbent (`tpe_pool`). Logged as "explore" tests."""
        if n <= 0:
            return []
        out: list[_Test] = []
        if self.explore_start is None:
            k = self._start_size()
            self.explore_start = latin_hypercube(self.space, k, self.ctx.np_rng, self.s.centre_roles) if k > 0 else []
        while len(out) < n and (drawn := self._explore_draw(taken)) is not None:
            c, ranked = drawn
            out.append(_Test(EXPLORE, c, 0.0, "exploring share: the next config in the order a ranker learned "
                             "on other kernels gives this space" if ranked else
                             "exploring share: a space-filling draw (Latin hypercube) from the whole space"))
        for t in self._tpe_tests(n - len(out), taken):
            out.append(_Test(EXPLORE, t.config, 0.0, "exploring share: TPE over the seeds, the space-filling "
                             "draws and every incumbent"))
        return out

    def _explore_draw(self, taken: set[tuple]) -> tuple[Config, bool] | None:
        """The next untested config of the exploring share (and of the cold start), and whether
        it came from the ranker's order: its head (`_prior_draws`) and the space-filling sample
        (`_lhs_draw`) take turns, the ranker first, so where the ranker was learned on kernels
        unlike this one half the draws still sample the space; either goes on alone once the
        other is spent. None when both are. A space-filling draw the resource model says spills
        waits at the back of the sample (`_lhs_draw`)."""
        if self.explore_turn % 2 == 0 and (got := self._prior_draws(1, taken)):
            drawn = (got[0], True)
        elif (c := self._lhs_draw(taken)) is not None:
            drawn = (c, False)
        elif got := self._prior_draws(1, taken):
            drawn = (got[0], True)
        else:
            return None
        self.explore_turn += 1
        return drawn

    def _lhs_draw(self, taken: set[tuple]) -> Config | None:
        """The next untested config of the exploring share's space-filling sample, or None. A
        draw the resource model says spills (`_spill_why`) is passed over while the sample has
        others: it goes to the back, so it is still drawn once nothing else is left. The
        exploring share is the guard against theories that mislead on this kernel; the register
        file's bound is not a theory of this kind (no config it names was within 9% of its
        shape's optimum on the zoo's and bundled data, session 27), so the share skips what it
        names after the cold start too, as the cold start always did."""
        passed: list[Config] = []
        try:
            while self.explore_start:
                c = self.explore_start.pop(0)
                k = self.space.key(c)
                if k in taken or self.known(c) or not self.space.is_valid(c) or not self._runnable(c):
                    continue
                if k not in self._passed_over and self._spills(c):
                    self._passed_over.add(k)
                    passed.append(c)
                    continue
                taken.add(k)
                return dict(c)
            return None
        finally:
            if passed:  # then a list: `passed` came out of it
                self.explore_start.extend(passed)

    def _spills(self, cfg: Config) -> bool:
        """True when the resource model says `cfg` spills registers (`_spill_why`): a
        space-filling draw does not spend a measurement on it while others are left (a local
        move or a theory's only after every other candidate, `_fill`). Logged as a "skip" event."""
        why = self._spill_why(cfg)
        if why is not None:
            self.ctx.log("skip", config=cfg, reason=f"a space-filling draw the resource model says spills: {why}")
        return why is not None

    def _spill_why(self, cfg: Config) -> str | None:
        """Why the resource model says `cfg` spills registers (`resources.spills_held`), or None
        (also without a problem or hardware to judge by). The bound is the register file's, not
        fitted; checked (session 27) on the zoo's and bundled data, no config it names was
        within 9% of its shape's optimum."""
        p = self.ctx.problem
        if p is None or p.hardware is None:
            return None
        k = self.space.key(cfg)
        if k not in self._spill_cache:
            self._spill_cache[k] = resources.spills_held(p, self.space, cfg)
        return self._spill_cache[k]

    def _prior_draws(self, n: int, taken: set[tuple]) -> list[Config]:
        """Up to n untested configs from the head of `Knowledge.prior` (the ranker's order,
        learned on other kernels), while fewer than PRIOR_DRAWS of it were proposed in this
        run. The ranker's top few beat as many random draws on most zoo kernels
        leave-one-kernel-out (the best of its top 3 on 26 of 30, session 22), so the
        exploring share looks there before it samples the space; past its head the order says
        little, and the Latin hypercube and TPE take over."""
        out: list[Config] = []
        prior = self.ctx.knowledge.prior
        if self._prior_failed():
            return out
        while len(out) < n and self.prior_used < PRIOR_DRAWS and self.prior_pos < len(prior):
            c = prior[self.prior_pos]
            self.prior_pos += 1
            k = self.space.key(c)
            if k in taken or self.known(c) or not self.space.is_valid(c) or not self._runnable(c):
                continue
            taken.add(k)
            self.prior_used += 1
            self.prior_keys.add(k)
            out.append(dict(c))
        return out

    def _prior_failed(self) -> bool:
        """Whether the prior has lost its turn on this kernel: PRIOR_DRAWS // 2 of its configs
        were judged and none beat the incumbent beyond noise. The ranker earned trust on other
        kernels of the class; two losses here say this kernel is not one of them, and its
        draws go back to sampling the space (logged once as an "explore" event)."""
        judged = [v for v in self.ledger.verdicts if self.space.key(v.candidate) in self.prior_keys]
        failed = len(judged) >= PRIOR_DRAWS // 2 and not any(v.supports for v in judged)
        if failed and not self.prior_dropped:
            self.prior_dropped = True
            self.ctx.log("explore", reason=f"stopped drawing from the ranker's order: {len(judged)} of its configs "
                         "were tested here and none beat the incumbent")
        return failed

    def _tpe_tests(self, n: int, taken: set[tuple]) -> list[_Test]:
        """n untested configs from TPE (told what `tpe_pool` holds); a proposal TPE keeps
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
