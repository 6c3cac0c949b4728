"""The engine's ledger of one run: what was measured and told TPE, each test's verdict and move tally, and trust."""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from ...measurement import Measurement
from ...space import Config
from ...theory.evidence import credibility
from ...theory.library import BY_NAME
from ..base import Proposals
from .moves import COMPOSE, EXTEND, MODEL, START, TPE_TEST, _composition, _continuation, _describe, _Test

# Exploration when the theories fail on a kernel (`_Engine._pooled_trust`): after this many of
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
            if t.theory in (START, TPE_TEST, MODEL):
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

    def _explore_slots(self, b: int) -> int:
        """Slots of a batch of `b` that poll the incumbent's neighbourhood in pattern search's
        order, whatever the theories or the model expect (`_ranked(model=False)`): half the
        batch, rounded down, while the theories have not earned trust on this kernel
        (`_pooled_trust`), else none. A kernel whose behaviour the theories misread still gets
        pattern search's probes at half its pace, and the other half follows the theories that
        have not failed here yet. (Proposals of the additive model's whole-space optimum, the
        exploration tried here before, chose extreme configs from a model of a handful of
        points.)"""
        return max(1, b // 2) if self.distrusted and b > 1 else 0

    def _pooled_trust(self) -> None:
        """Whether the theories, pooled, have earned trust on this kernel (issue 27); sets
        `distrusted`, which gives a share of each batch to polling (`_explore_slots`) and
        allows each theory one test per batch until it has won here (`_hypotheses`):
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
                     reason=(f"{why}: half of each batch explores, polling the incumbent's neighbourhood as "
                             f"pattern search does, and each theory gets one test per batch until it wins here"
                             if distrust else
                             f"the theories earned trust here (won {s:g} of {s + r + n:g}, credibility "
                             f"{trust:.2f}): batches follow them again"))

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
        self._theory_trust(tests)
        if not winners:
            return
        best = min(winners, key=lambda t: led.estimate(t.config))
        self._compose(inc, [t for t in winners if t is not best], best)
        self._extend(inc, best)
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

    def _extend(self, inc: Config, best: _Test) -> None:
        """Offer the winning move taken once more in the same direction (`_continuation`, a
        pattern move as in Hooke and Jeeves): a slope that paid one step often pays the next,
        and the additive model cannot say so (it holds the edge of what it has seen flat). It
        competes with the theories' hypotheses at the new incumbent on one scale: expected gain
        the gain the move just showed, times the credibility such continuations have earned in
        this run. Not after a global proposal (TPE, the model, the start), whose jump is no
        direction."""
        self.extension = None
        if best.theory in (TPE_TEST, MODEL, START):
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
