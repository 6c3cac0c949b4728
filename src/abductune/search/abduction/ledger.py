"""The engine's ledger of one run: what was measured and told TPE, each test's verdict and move tally, and trust."""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from ...measurement import Measurement
from ...space import Config
from ...theory.evidence import credibility
from ...theory.library import BY_NAME
from ..base import Proposals
from .moves import (COMPOSE, EXPLORE, EXTEND, GLOBAL_KINDS, JUMPS, LOCAL, MODEL, START, TPE_TEST, _composition,
                    _continuation, _describe, _Test)

# Exploration when the theories fail on a kernel (`_Engine._pooled_trust`): after this many of
# their tests here did not win, and while fewer than about one in three of their tests won
# (Laplace's rule over this run's verdicts), a share of each batch explores the whole space
# (`_global_slots`). Set by reasoning about the rule, not fitted to any recorded data.
DISTRUST_AFTER = 3
TRUST_MIN = 0.34
# On a kernel no theory was confirmed on, theories earn trust after this many won tests.
EARN_TRUST = 2


def _unseen_kernel(problem: Any) -> str | None:
    """The kernel's family name when no packaged theory rule was confirmed on it (a kernel
    the library and its rules were not built around), else None."""
    if problem is None:
        return None
    from ...problem import kernel_family
    from ...theory.store import confirmed_kernels

    fam = kernel_family(problem.kernel)
    return None if fam in confirmed_kernels() else fam


class RunLedger:
    """Bookkeeping and judging for `strategy._Engine` (a part of it, whose state it reads): the
    first measurement of each config, what TPE is told, the verdict on each test against the
    incumbent (`theory.evidence.Ledger`), the move that follows a win, and the trust the
    theories keep on this kernel."""

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

    def _best(self) -> Config | None:
        b = self.ledger.best()
        return b[0] if b is not None else None

    def _log_tests(self, tests: Sequence[_Test], ms: Sequence[Measurement]) -> None:
        for t, m in zip(tests, ms):
            # a theory that lost its credit on this kernel ranked with none (`_theory_trusted`)
            lost = t.theory in BY_NAME and not self._theory_trusted(t.theory)
            cred = 0.0 if lost else self.ledger.credibility(t.theory)
            self.ctx.log("hypothesis", theory=t.theory, config=t.config, from_config=self.inc,
                         expected_gain=t.gain, credibility=cred, reason=t.reason)
            self.ctx.log("test", theory=t.theory, config=t.config, ids=[m.id] if m.id is not None else [],
                         status=str(m.status), time_ms=m.time_ms)
            if self.tpe is not None:
                trial = self._pending_trials.pop(self.space.key(t.config), None)
                if trial is not None:
                    self.tpe.tell([trial], [m])
            if t.theory in (START, TPE_TEST, MODEL, EXPLORE):
                self._pool(t.config)

    def _theory_trusted(self, theory: str) -> bool:
        """Whether `theory` keeps its credit on this kernel: not while its tests in this run
        lost more than they won (refuted, or half a miss for no effect beyond noise, as in
        `theory.evidence.credibility`: Laplace's rule over this run's verdicts alone below an
        even chance). Earlier runs' priors do not count here: what the theory says of other
        kernels is no defence once it was wrong on this one. A win here gives the credit back."""
        t = self.ledger.tallies.get(theory)
        return t is None or t.supported >= t.refuted + 0.5 * t.neutral

    def _theory_trust(self, tests: Sequence[_Test]) -> None:
        """Log a "trust" event (`explain` prints it) for each theory tested in this batch whose
        credit on this kernel changed (`_theory_trusted`), citing the verdict that changed it."""
        for name in dict.fromkeys(t.theory for t in tests if t.theory in BY_NAME):
            now = self._theory_trusted(name)
            if now == self.theory_trust.get(name, True):
                continue
            self.theory_trust[name] = now
            t = self.ledger.tallies[name]
            v = next(v for v in reversed(self.ledger.verdicts) if v.theory == name)
            last = (f"{_describe(self.space, v.incumbent, v.candidate)} measured {v.ratio:.3f}x the incumbent "
                    f"({v.outcome})")
            self.ctx.log("trust", theory=name, trusted=now, supported=t.supported, refuted=t.refuted,
                         neutral=t.neutral, ids=list(v.ids),
                         reason=(f"stopped trusting {name} on this kernel: its predictions here won {t.supported}, "
                                 f"were refuted {t.refuted} and made no difference {t.neutral} times (last: {last}); "
                                 f"its moves now rank only by the model of this run's measurements" if not now else
                                 f"{name} trusted again on this kernel: its prediction won (last: {last})"))

    def _global_slots(self, b: int) -> int:
        """Slots of a batch of `b` for the exploring share (`_explore_tests`: proposals from the
        whole space, a space-filling start and then TPE over what it was told). A local search
        from a seed the theories got wrong stays in that seed's basin, and on a rugged space
        moving one or two parameters at a time from a poor start loses to drawing from the
        whole space (issue 27). Each side's chance that its next test beats the incumbent
        beyond noise is Laplace's rule over its tests so far in this run (`_tally_sides`); the
        share is the exploring side's part of the two chances, times the batch, rounded down:
        half at first; it yields while the local tests (the theories' among them) keep finding
        wins and grows as they stall, each of their misses lowering their chance, or as
        exploring wins. At least one slot stays local, so the search always refines what
        exploration found. While the theories have not earned trust on this kernel
        (`_pooled_trust`) the share keeps at least one slot; once they have, it lasts only
        while an exploring test has won and the share still holds a slot by that rule (on a
        kernel the theories were confirmed on it never starts unless they lose their trust).
        Session 17 sized it by duels (per batch, which side found the faster config): one
        score per batch, and none for a batch where neither side won, so a local search that
        stalled batch after batch never gave exploring more room. A change of size is logged
        as an "explore" event, which `explain` prints."""
        if not self.s.explore:  # the caller's choice (the strategy's `explore` option)
            return 0
        (lw, ln), (ew, en) = self.sides[LOCAL], self.sides[EXPLORE]
        p_local, p_explore = (lw + 1.0) / (ln + 2.0), (ew + 1.0) / (en + 2.0)
        share = math.floor(b * p_explore / (p_local + p_explore))
        n = 0 if b < 2 else max(1, min(b - 1, share)) if self.distrusted else \
            min(b - 1, share) if ew > 0 else 0
        if n != self.explore_share:
            self.explore_share = n
            self.ctx.log("explore", slots=n, batch=b, local_won=lw, local_tests=ln, explore_won=ew, explore_tests=en,
                         reason=(f"{n} of {b} tests per batch draw from the whole space: {ew} of the exploring share's "
                                 f"{en} tests beat the incumbent, {lw} of the local tests' {ln}" if n else
                                 "no exploring share: the theories have earned trust on this kernel and "
                                 f"exploring has not held its own ({ew} of its {en} tests beat the incumbent, "
                                 f"{lw} of the local tests' {ln})"))
        return n

    def _pooled_trust(self) -> None:
        """Whether the theories, pooled, have earned trust on this kernel (issue 27); sets
        `distrusted`, which gives a share of each batch to exploring the whole space
        (`_global_slots`) and allows each theory one test per batch until it has won here
        (`_hypotheses`):
        - on a kernel no theory or rule was confirmed on (`unseen_kernel`, unless the option
          `explore_unseen` is off), from the start, until the theories have won EARN_TRUST of
          their tests here (their seeds and moves carry over from other kernels' tilings, names
          and masks, and may be wrong);
        - on any kernel, once DISTRUST_AFTER of their tests here failed to win (refuted or
          neutral) and the pooled credibility of their tests in this run is below TRUST_MIN,
          until they recover.
        Switching either way is logged as a "trust" event, which `explain` prints."""
        s = r = n = 0.0
        for name, t in self.ledger.tallies.items():
            if name in BY_NAME:
                s, r, n = s + t.supported, r + t.refuted, n + t.neutral
        trust = credibility(s, r, n)
        unearned = self.unseen_kernel is not None and s < EARN_TRUST
        distrust = unearned or (r + n >= DISTRUST_AFTER and trust < TRUST_MIN)
        if distrust == self.distrusted:
            return
        self.distrusted = distrust
        why = (f"no theory has been confirmed on {self.unseen_kernel} and they have won {s:g} of "
               f"{s + r + n:g} tests here (trusted after {EARN_TRUST})" if unearned else
               f"the theories' tests on this kernel won {s:g} of {s + r + n:g} (credibility {trust:.2f} "
               f"< {TRUST_MIN})")
        self.ctx.log("trust", trusted=not distrust, supported=s, refuted=r, neutral=n, credibility=round(trust, 3),
                     reason=(f"{why}: a share of each batch explores, proposals from the whole space (a "
                             f"space-filling start, then TPE), and each theory gets one test per batch until it "
                             f"wins here"
                             if distrust else
                             f"the theories earned trust here (won {s:g} of {s + r + n:g}, credibility "
                             f"{trust:.2f}): batches follow them again, and explore only while exploring "
                             f"keeps finding the faster configs"))

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
        close = [t for t in tests if led.needs_confirmation(t.config, inc) and self._confirm_now(t, outcomes[id(t)])]
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
            self._tally_sides(t, v.outcome)
            tally = self.move_tally.setdefault(self._move(inc, t.config), [0, 0])
            tally[0] += v.outcome == "supported"
            tally[1] += v.outcome in ("refuted", "failed")
            faster = led.estimate(t.config) < led.estimate(inc)
            if v.outcome == "supported" or (faster and (t is confirmed or led.deterministic)):
                winners.append(t)
            elif faster and v.outcome == "neutral" and t is not confirmed:
                self.close_calls.append((self.space.key(inc), dict(t.config)))  # run off at the stall
            significant |= v.outcome == "supported"
        # a draw from the whole space that missed says nothing about the incumbent's basin, so
        # it does not bring the local search's stall closer: the exploring share's, and in
        # generic mode TPE's
        counted = [t for t in tests if t.theory != EXPLORE and (t.theory != TPE_TEST or not self.generic)]
        self.stale = 0 if significant else self.stale + len(counted)
        self._theory_trust(tests)
        if not winners:
            return
        best = min(winners, key=lambda t: led.estimate(t.config))
        if best.theory not in JUMPS:  # a jump across the space composes with no local move
            self._compose(inc, [t for t in winners if t is not best and t.theory not in JUMPS], best)
        self._extend(inc, best)
        self.ctx.log("move", from_config=inc, to_config=best.config, theory=best.theory,
                     ids=led.ids(best.config) + led.ids(inc),
                     ratio=led.estimate(best.config) / led.estimate(inc))
        self.inc = dict(best.config)
        self._pool(self.inc)
        self._observe(self.inc)

    def _confirm_now(self, t: _Test, outcome: str) -> bool:
        """Whether a win that needs confirming (`Ledger.needs_confirmation`) is re-measured now.
        A win while nothing says how noisy the times are is (one look proves nothing). A close
        call, a candidate faster by less than the noise threshold, waits until the local search
        has stalled (`patience` tests without a win beyond noise): two measurements would move
        the incumbent by less than the noise while the search may still find larger wins (at 8
        evaluations a run-off is two of the five to seven tests left after the seeds); until
        then it counts as no effect and is run off at the stall (`_run_off`)."""
        return outcome != "close" or self.stale >= self.patience

    def _tally_sides(self, t: _Test, outcome: str) -> None:
        """Count a judged test for the side it came from (`sides`, which sizes the exploring
        share: `_global_slots`): the exploring share's draws, or the local side (the theories'
        tests and the moves around the incumbent); a win is a verdict "supported", faster than
        the incumbent beyond the noise threshold. TPE's and the model's proposals and the
        start are neither."""
        side = EXPLORE if t.theory == EXPLORE else None if t.theory in GLOBAL_KINDS else LOCAL
        if side is not None:
            self.sides[side][0] += outcome == "supported"
            self.sides[side][1] += 1

    def _compose(self, inc: Config, others: Sequence[_Test], best: _Test) -> None:
        """Queue the winner plus each other winning move on different parameters."""
        for t in sorted(others, key=lambda t: self.ledger.estimate(t.config)):
            cfg = _composition(inc, best.config, t.config)
            if cfg is not None and self.space.is_valid(cfg) and not self.known(cfg):
                self.queue.append(_Test(COMPOSE, cfg, 0.0, f"{COMPOSE}: {best.theory} + {t.theory} "
                                        f"({_describe(self.space, inc, cfg)}), both supported"))
                self.ctx.log("hypothesis", theory=COMPOSE, config=cfg, from_config=best.config,
                             reason=f"{best.theory} and {t.theory} both won on different parameters")

    def _extend(self, inc: Config, best: _Test) -> None:
        """Offer the winning move taken once more in the same direction (`_continuation`, a
        pattern move as in Hooke and Jeeves): a slope that paid one step often pays the next,
        and the additive model cannot say so (it holds the edge of what it has seen flat). It
        competes with the theories' hypotheses at the new incumbent on one scale: expected gain
        the gain the move just showed, times the credibility such continuations have earned in
        this run. Not after a global proposal (TPE, the model, the start, the exploring share, a
        seed's relief: `GLOBAL_KINDS`), whose jump is no direction."""
        self.extension = None
        if best.theory in GLOBAL_KINDS:
            return
        cfg = _continuation(self.space, inc, best.config)
        if cfg is None or not self.space.is_valid(cfg) or self.known(cfg):
            return
        shown = self.ledger.estimate(inc) / self.ledger.estimate(best.config) - 1.0
        self.extension = _Test(EXTEND, cfg, shown, f"{EXTEND}: {_describe(self.space, best.config, cfg)}, the "
                               f"{best.theory} move that won ({shown:.1%}), once more")

    def _extensions(self) -> list[_Test]:
        """The pending continuation of the last winning move (`_extend`), ranked by the gain that
        move showed times this run's credibility of continuations."""
        t = self.extension
        if t is None or self.known(t.config):
            return []
        return [_Test(t.theory, t.config, max(t.gain, 0.0) * self.ledger.credibility(EXTEND), t.reason)]

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
