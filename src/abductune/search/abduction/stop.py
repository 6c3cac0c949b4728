"""When the local search stalls: the stop rule (option `stop_early`) and the restart from another basin."""
from __future__ import annotations

from ..pattern import poll_points
from .moves import COARSE_STEP, LOCAL_REACH, _changed


class StopRule:
    """The ends of a local search, for `strategy._Engine` (a part of it, whose state it reads)."""

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

    def _polled_out(self) -> bool:
        """Whether the incumbent has stood against every move of pattern search's poll
        (`search.pattern.poll_points` of every step up to COARSE_STEP, the configs the resource
        model lets run): a local optimum in pattern search's sense, where pattern search itself
        restarts. Waiting `patience` more tests there (TPE's turn, then the restart) spent the
        rest of a small budget in the basin of a seed: a kernel with a few parameters has only
        about ten such moves, all measured long before."""
        inc, sp, led = self.inc, self.space, self.ledger
        t = led.estimate(inc)
        for step in range(1, COARSE_STEP + 1):
            for c in poll_points(sp, inc, step):
                if not sp.is_valid(c) or not self._runnable(c):
                    continue
                if not self.known(c) or led.estimate(c) < t:
                    return False
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
